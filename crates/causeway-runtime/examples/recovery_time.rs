//! Recovery time against data size: fills one replica (1 DC × 1 partition)
//! with `N` versions through the protocol — one session commits
//! transactions of 100 fresh keys (`key00000042`, 11 bytes) with 64-byte
//! values — logging its records as the runtime does, then times what a
//! restart does, from the whole log and again after a checkpoint:
//!
//! * open: the log read, checked and its records decoded
//!   (`disk::NodeDisk::open`);
//! * recover: the replica rebuilt from them (`Protocol::recover`).
//!
//! ```text
//! cargo run --release -p causeway-runtime --example recovery_time -- wren 1000000 3
//! ```
//!
//! Arguments: the protocol (`wren`, `cure`, `h-cure`, `ec`), the number of
//! keys (versions held once old ones are collected), how many times to
//! measure each (the median and the range are printed), and how many times
//! each key is written (default 1: the log holds as much as the state; more
//! makes the history longer than the state, which a checkpoint drops). Results are in docs/BENCHMARKS.md, "Recovery time".

use causeway_protocol::contract::protocol::RecordOf;
use causeway_protocol::contract::RecordLog;
use causeway_protocol::cure::{Cure, HCure};
use causeway_protocol::ec::Ec;
use causeway_protocol::wren::Wren;
use causeway_protocol::{
    Addr, ClientId, DcId, Key, Limits, Protocol, Replica, ReplicaId, Session, SessionEvent, SessionSetup, Topology,
    Tuning, Value,
};
use causeway_runtime::disk::{Fsync, NodeDisk, ReplicaLog};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WRITES_PER_TXN: u64 = 100;
const VALUE_BYTES: usize = 64;
const CLUSTER: &str = "bench";
const NODE: &str = "bench";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map_or("wren", String::as_str);
    let versions: u64 = args.get(2).map_or(100_000, |a| a.parse().expect("a number of versions"));
    let runs: usize = args.get(3).map_or(3, |a| a.parse().expect("a number of runs"));
    let rounds: u64 = args.get(4).map_or(1, |a| a.parse().expect("a number of rounds"));
    match kind {
        "wren" => run::<Wren>(versions, runs, rounds),
        "cure" => run::<Cure>(versions, runs, rounds),
        "h-cure" => run::<HCure>(versions, runs, rounds),
        "ec" => run::<Ec>(versions, runs, rounds),
        other => panic!("unknown protocol {other:?}: wren, cure, h-cure or ec"),
    }
}

fn run<P: Protocol>(versions: u64, runs: usize, rounds: u64) {
    let data = tempfile::tempdir().expect("a temporary directory");
    let id = ReplicaId::new(0, 0);
    let topology = Arc::new(Topology::full(1, 1).expect("a topology"));
    let config = P::configure(&Tuning::default());

    let started = Instant::now();
    let (records, live) = fill::<P>(data.path(), id, &topology, &config, versions, rounds);
    let fill_took = started.elapsed();
    let log_bytes = bytes_under(data.path());
    println!(
        "{}: {versions} keys written {rounds} times ({} versions stored), {records} records, {:.1} MiB of log, filled in {:.1} s",
        P::NAME,
        live.counters().versions,
        log_bytes as f64 / (1 << 20) as f64,
        fill_took.as_secs_f64()
    );
    let replayed = measure::<P>(data.path(), id, &topology, &config, runs, "whole log");

    // A checkpoint of the running replica, as the runtime takes one (what
    // the collector dropped is not in it; a replica rebuilt from the whole
    // log holds every version until its collector runs again).
    let state = live.checkpoint();
    let size = postcard::to_allocvec(&state).expect("records serialize").len();
    let mut log = open::<P>(data.path(), id).log;
    log.checkpoint(state);
    // Dropping the log waits for the checkpoint's thread.
    drop(log);
    println!(
        "checkpoint: {:.1} MiB ({:.1} MiB on disk)",
        size as f64 / (1 << 20) as f64,
        bytes_under(data.path()) as f64 / (1 << 20) as f64
    );
    let checkpointed = measure::<P>(data.path(), id, &topology, &config, runs, "checkpoint");
    assert_eq!(checkpointed.latest_values(), replayed.latest_values(), "the checkpoint rebuilds the same values");
    assert_eq!(checkpointed.latest_values(), live.latest_values(), "as the replica held");
}

/// The node's log, opened as a restart opens it, and the replica's share.
fn open<P: Protocol>(data: &Path, id: ReplicaId) -> causeway_runtime::disk::Opened<RecordOf<P>> {
    let mut disk = NodeDisk::<RecordOf<P>>::open(data, CLUSTER, NODE, &[id], Fsync::Never, u64::MAX).expect("opens");
    disk.replica(id, Vec::new()).expect("opens")
}

/// Commits `versions` fresh keys through a session and the replica,
/// appending the replica's records to its log; returns how many records
/// and the replica.
fn fill<P: Protocol>(
    data: &Path,
    id: ReplicaId,
    topology: &Arc<Topology>,
    config: &P::Config,
    versions: u64,
    rounds: u64,
) -> (u64, P::Replica) {
    let mut log = open::<P>(data, id).log;
    let me = Addr::Replica(id);
    let client = ClientId { dc: DcId(0), index: 0 };
    let setup = SessionSetup { id: client, coordinator: id, topology: topology.clone(), limits: Limits::default() };
    let mut session = P::session(setup, config);
    let mut replica = P::replica(id, topology.clone(), config);
    let mut now: u64 = 1_000_000;
    let mut timers: Vec<(u64, <P::Replica as Replica>::Timer)> = Vec::new();
    let mut wire: VecDeque<(Addr, Addr, P::Message)> = VecDeque::new();
    let mut records = 0u64;
    let mut rout = Default::default();
    let mut sout = Default::default();

    // Runs every step the messages on the wire cause; returns the session's
    // completion, if one came.
    let mut pump = |replica: &mut P::Replica,
                    session: &mut P::Session,
                    rout: &mut causeway_protocol::contract::replica::ReplicaEffects<P::Replica>,
                    sout: &mut causeway_protocol::contract::session::SessionEffects<P::Session>,
                    timers: &mut Vec<(u64, <P::Replica as Replica>::Timer)>,
                    log: &mut ReplicaLog<RecordOf<P>>,
                    now: u64|
     -> Option<SessionEvent> {
        let mut event = None;
        loop {
            for (to, msg) in sout.messages.drain(..) {
                wire.push_back((Addr::Client(client), to, msg));
            }
            records += rout.records.len() as u64;
            log.append_all(&mut rout.records);
            // Everything counts as durable at once: this fills a log, it
            // does not measure commits.
            for (to, msg) in rout.messages.drain(..).chain(rout.after_durable.drain(..)) {
                wire.push_back((me, to, msg));
            }
            for (timer, after) in rout.timers.drain(..) {
                timers.push((now + after, timer));
            }
            let Some((from, to, msg)) = wire.pop_front() else { return event };
            match to {
                Addr::Replica(_) => replica.on_message(now, from, msg, rout),
                _ => event = session.on_message(now, from, msg, sout).or(event),
            }
        }
    };

    replica.start(now, &mut rout);
    pump(&mut replica, &mut session, &mut rout, &mut sout, &mut timers, &mut log, now);
    let writes = versions * rounds;
    let txns = writes.div_ceil(WRITES_PER_TXN);
    for t in 0..txns {
        let started = session.begin(now, &mut sout).expect("begin");
        let started =
            started.or_else(|| pump(&mut replica, &mut session, &mut rout, &mut sout, &mut timers, &mut log, now));
        assert!(matches!(started, Some(SessionEvent::Started)), "transaction {t}: {started:?}");
        for w in t * WRITES_PER_TXN..((t + 1) * WRITES_PER_TXN).min(writes) {
            let k = w % versions;
            let value = Value::from(vec![b'v'; VALUE_BYTES]);
            session.write(Key::from(format!("key{k:08}")), Some(value)).expect("write");
        }
        let done = session.commit(now, &mut sout).expect("commit");
        let done = done.or_else(|| pump(&mut replica, &mut session, &mut rout, &mut sout, &mut timers, &mut log, now));
        assert!(matches!(done, Some(SessionEvent::Committed(_))), "transaction {t}: {done:?}");
        // A millisecond per transaction; the replica's due timers run.
        now += 1_000;
        timers.sort_by_key(|&(at, _)| at);
        while timers.first().is_some_and(|&(at, _)| at <= now) {
            let (_, timer) = timers.remove(0);
            replica.on_timer(now, timer, &mut rout);
            pump(&mut replica, &mut session, &mut rout, &mut sout, &mut timers, &mut log, now);
        }
    }
    // Long enough for every apply round and stabilization to pass.
    for _ in 0..100 {
        now += 1_000;
        let due = std::mem::take(&mut timers);
        for (_, timer) in due {
            replica.on_timer(now, timer, &mut rout);
            pump(&mut replica, &mut session, &mut rout, &mut sout, &mut timers, &mut log, now);
        }
    }
    // Dropping the log syncs it.
    drop(log);
    (records, replica)
}

/// Opens and recovers the replica `runs` times; prints the median and the
/// range of each part, and returns the last replica rebuilt.
fn measure<P: Protocol>(
    data: &Path,
    id: ReplicaId,
    topology: &Arc<Topology>,
    config: &P::Config,
    runs: usize,
    what: &str,
) -> P::Replica {
    let (mut opens, mut recovers, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs {
        drop(last.take());
        let t0 = Instant::now();
        let opened = open::<P>(data, id);
        let t1 = Instant::now();
        let count = opened.records.len();
        let replica = P::recover(id, topology.clone(), config, opened.records);
        let t2 = Instant::now();
        drop(opened.log);
        opens.push(t1 - t0);
        recovers.push(t2 - t1);
        totals.push(t2 - t0);
        println!(
            "  {what}: {count} records, open {:.3} s + recover {:.3} s, {} versions",
            (t1 - t0).as_secs_f64(),
            (t2 - t1).as_secs_f64(),
            replica.counters().versions
        );
        last = Some(replica);
    }
    println!(
        "{what}: open {}, recover {}, total {} (median, min–max of {runs})",
        summary(&mut opens),
        summary(&mut recovers),
        summary(&mut totals)
    );
    last.expect("at least one run")
}

fn summary(times: &mut [Duration]) -> String {
    times.sort();
    let s = |d: Duration| format!("{:.3}", d.as_secs_f64());
    format!("{} s ({}–{})", s(times[times.len() / 2]), s(times[0]), s(times[times.len() - 1]))
}

fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("a directory") {
        let entry = entry.expect("an entry");
        let meta = entry.metadata().expect("metadata");
        total += if meta.is_dir() { bytes_under(&entry.path()) } else { meta.len() };
    }
    total
}
