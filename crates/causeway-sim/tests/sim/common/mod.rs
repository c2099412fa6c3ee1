//! Shared by the simulator's integration tests.
#![allow(dead_code)]

pub mod scenario;

use causeway_history::{check_for, OpKind, Report, Status};
use causeway_protocol::wren::{Wren, WrenConfig};
use causeway_protocol::Protocol;
use causeway_sim::{Cut, LatencySpikes, SimConfig, SimReport, Simulation};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// How many seeds a property test runs: `CAUSEWAY_SEEDS` or the default.
pub fn seeds(default: u64) -> u64 {
    std::env::var("CAUSEWAY_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Up to two cuts of a random DC (none with one DC), each starting in
/// `starts` and lasting a time drawn from `lens`, in microseconds.
pub fn random_cuts(rng: &mut impl Rng, dcs: u16, starts: Range<u64>, lens: Range<u64>) -> Vec<Cut> {
    let mut cuts = Vec::new();
    if dcs > 1 {
        for _ in 0..rng.random_range(0..=2) {
            let start_us = rng.random_range(starts.clone());
            let len = rng.random_range(lens.clone());
            cuts.push(Cut { dc: rng.random_range(0..dcs), start_us, end_us: start_us + len });
        }
    }
    cuts
}

/// A random but seed-determined cluster and fault schedule: 1–5 DCs,
/// 1–8 partitions, clock skew up to 60 ms (250 ms on a quarter of the
/// seeds), drift, up to two DC cuts, on half the seeds latency spikes, and
/// on half of them deletes among the writes.
/// The workload runs for 600 ms of simulated time or `max_txns`
/// transactions, whichever comes first.
pub fn random_config(seed: u64, max_txns: u64) -> SimConfig {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_c0de);
    let dcs = rng.random_range(1..=5u16);
    let partitions = rng.random_range(1..=8u32);
    let cuts = random_cuts(&mut rng, dcs, 0..400_000, 20_000..400_000);
    let workload = WorkloadConfig {
        reads_per_txn: rng.random_range(1..=8),
        writes_per_txn: rng.random_range(1..=4),
        partitions_per_txn: rng.random_range(1..=4),
        keys_per_partition: rng.random_range(5..=60),
        zipf: if rng.random_bool(0.7) { 0.99 } else { 0.0 },
        read_only_fraction: rng.random_range(0.0..0.5),
        abort_fraction: 0.05,
        rewrite_fraction: 0.05,
        // Half the seeds delete keys too: tombstones replicated, ordered,
        // read as no value, and collected.
        delete_fraction: if rng.random_bool(0.5) { rng.random_range(0.05..0.3) } else { 0.0 },
        max_read_rounds: rng.random_range(1..=3),
        // Clients pause between transactions so that a run spans several WAN
        // round trips without piling up transactions: remote versions then
        // arrive, become stable and get read.
        think_time_us: rng.random_range(1_000..30_000),
        // Under partial replication only (PaRiS's tests draw their own).
        multi_dc_fraction: 0.05,
        shape: causeway_workload::TxnShape::ReadThenWrite,
    };
    SimConfig {
        seed,
        dcs,
        partitions,
        clients_per_partition: rng.random_range(1..=3),
        txns: Some(max_txns),
        duration_us: Some(600_000),
        // Most seeds skew clocks by up to 60 ms; a quarter of them by up to
        // 250 ms, clocks far off that make remote writes win against fresher
        // local ones.
        max_skew_us: if rng.random_bool(0.25) {
            rng.random_range(60_000..=250_000)
        } else {
            rng.random_range(0..=60_000)
        },
        max_drift_ppm: rng.random_range(0..=200),
        cuts,
        // Half the seeds see messages stall now and then: laggard partitions
        // in the middle of two-phase commit, late heartbeats, slow gossip.
        spikes: rng.random_bool(0.5).then(|| LatencySpikes {
            probability: rng.random_range(0.001..0.05),
            max_extra_us: rng.random_range(1_000..50_000),
        }),
        workload: WorkloadKind::Random(workload),
        ..SimConfig::default()
    }
}

pub fn run_wren(config: SimConfig, wren: &WrenConfig) -> (SimReport, Report) {
    run::<Wren>(config, wren)
}

/// Runs any protocol of the engine and judges its history.
pub fn run<P: Protocol>(config: SimConfig, protocol: &P::Config) -> (SimReport, Report) {
    let report = Simulation::<P>::new(config, protocol).expect("valid configuration").run();
    let verdict = check_for(&report.history, P::GUARANTEE);
    (report, verdict)
}

/// What is wrong with a run of `P` that should be clean: a history that
/// breaks `P`'s guarantee, a read that waited under a protocol whose reads
/// never wait, a cluster that did not settle, an input refused in an honest
/// run, or a run that got stuck (a floor of 10 commits: a single client with
/// 30 ms of think time and latency spikes commits only 16 transactions in
/// 600 simulated ms, seed 1607 of Wren's test).
pub fn problems<P: Protocol>(report: &SimReport, verdict: &Report) -> Vec<String> {
    let mut problems = Vec::new();
    if !verdict.upholds(P::GUARANTEE) {
        problems.push(format!("checker:\n{verdict}"));
    }
    if P::READS_NEVER_WAIT && report.reads_waited > 0 {
        problems.push(format!("{} reads waited", report.reads_waited));
    }
    if !report.settled() {
        problems.push("did not settle".into());
    }
    if report.counters.inputs_refused > 0 {
        problems.push(format!("{} inputs refused in an honest run", report.counters.inputs_refused));
    }
    // No honest message runs further ahead of its receiver's clock than the
    // clocks are apart — or, after restarts, than the clock reservations a
    // replica resumes at, a window each — so a node's guard against
    // poisoned clocks (`max_clock_offset_ms`) holds none back when it
    // exceeds the spread (and, for a while after a restart, the window).
    let window = report.faults.restarts * causeway_protocol::recovery::CLOCK_WINDOW_US;
    if report.max_reach_ahead_us > report.clock_spread_us + window + 1_000 {
        problems.push(format!(
            "a message reached {} µs ahead of its receiver's clock; the clocks were at most {} µs apart",
            report.max_reach_ahead_us, report.clock_spread_us
        ));
    }
    if report.committed < 10 {
        problems.push(format!("only {} transactions committed", report.committed));
    }
    problems
}

/// Runs `f` over `0..n` on two threads (the machine has two cores).
pub fn par_seeds<T: Send>(n: u64, f: impl Fn(u64) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4) as u64;
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| scope.spawn(move || (0..n).filter(|s| s % threads == t).map(|s| (s, f(s))).collect::<Vec<_>>()))
            .collect();
        let mut all: Vec<(u64, T)> = handles.into_iter().flat_map(|h| h.join().expect("seed thread")).collect();
        all.sort_by_key(|(s, _)| *s);
        all.into_iter().map(|(_, t)| t).collect()
    })
}

/// Contention: 3 DCs × 4 partitions, only 8 keys per partition, several
/// writes per transaction over several partitions, 20 ms of skew — where a
/// protocol that is not TCC shows it.
pub fn hot_keys(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        dcs: 3,
        partitions: 4,
        clients_per_partition: 3,
        txns: Some(2_000),
        max_skew_us: 20_000,
        workload: WorkloadKind::Random(WorkloadConfig {
            reads_per_txn: 6,
            writes_per_txn: 3,
            partitions_per_txn: 3,
            keys_per_partition: 8,
            ..WorkloadConfig::default()
        }),
        ..SimConfig::default()
    }
}

/// For each key, the value of the last-writer-wins winner among the
/// acknowledged writes (`None`: a delete won), and every value a
/// transaction of unknown outcome wrote to it (`None`: it deleted it).
type Expected = BTreeMap<String, (Option<String>, BTreeSet<Option<String>>)>;

fn expected_finals(report: &SimReport) -> Expected {
    let mut winners: BTreeMap<String, (&causeway_history::CommitTs, Option<String>)> = BTreeMap::new();
    let mut unknown: BTreeMap<String, BTreeSet<Option<String>>> = BTreeMap::new();
    for t in &report.history.txns {
        // A transaction's last write of a key is the one that counts.
        let mut last: BTreeMap<&str, Option<String>> = BTreeMap::new();
        for op in t.ops.iter().filter(|op| matches!(op.op, OpKind::Write | OpKind::Delete)) {
            last.insert(&op.key, op.value.clone());
        }
        match (t.status, &t.commit_ts) {
            (Status::Committed, Some(stamp)) => {
                for (key, value) in last {
                    let entry = winners.entry(key.to_string()).or_insert((stamp, value.clone()));
                    if stamp > entry.0 {
                        *entry = (stamp, value);
                    }
                }
            }
            (Status::Unknown, _) => {
                for (key, value) in last {
                    unknown.entry(key.to_string()).or_default().insert(value);
                }
            }
            _ => {}
        }
    }
    let mut expected = Expected::new();
    for (key, (_, value)) in winners {
        let maybe = unknown.remove(&key).unwrap_or_default();
        expected.insert(key, (value, maybe));
    }
    for (key, maybe) in unknown {
        expected.insert(key, (None, maybe));
    }
    expected
}

/// The acknowledged writes some DC's final state lost, among the keys
/// `holds(dc, key)` says the DC holds.
pub fn lost_writes(report: &SimReport, holds: impl Fn(u16, &str) -> bool) -> Vec<String> {
    let expected = expected_finals(report);
    let mut lost = Vec::new();
    for dc in &report.history.finals {
        for (key, (winner, maybe)) in expected.iter().filter(|(key, _)| holds(dc.dc, key)) {
            let held = dc.state.get(key).cloned();
            if held != *winner && !maybe.contains(&held) {
                lost.push(format!("dc{} {key}: holds {held:?}, the acknowledged winner is {winner:?}", dc.dc));
            }
        }
    }
    lost
}
