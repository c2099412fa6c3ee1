//! The closed-loop clients: each holds one session (one connection) to its
//! DC and runs transactions back to back for the duration, recording what
//! it read and wrote.
//!
//! A client keeps going through the failure of its server: a transaction
//! whose connection breaks is recorded as it ended — `unknown` if its
//! commit was in flight ([`Error::OutcomeUnknown`]), `aborted` otherwise
//! (it did not commit) — and the client reconnects to the same node with
//! backoff, as a new session of the history (its causal past could only be
//! carried over with a token exported after every transaction, a round trip
//! each). A request refused because a partition is unavailable is counted,
//! and the client carries on after a pause.

use crate::visibility::{self, Commit};
use bytes::Bytes;
use causeway_client::wire::AbortReason;
use causeway_client::{Client, ClientOptions, Error};
use causeway_history::{CommitTs, Op, StampElem, Status, TxnRecord};
use causeway_protocol::{DcId, Key, PartitionId, Topology, Value};
use causeway_workload::{Generator, Transfer, TxnClass, TxnPlan, WorkloadKind};
use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Client endpoints, one or more per DC.
    pub endpoints: Vec<(DcId, SocketAddr)>,
    pub clients_per_dc: u32,
    /// Transactions that end before this much time has passed are run (and
    /// recorded in the history) but not measured.
    pub warmup: Duration,
    /// The measured time, after the warm-up.
    pub duration: Duration,
    pub workload: WorkloadKind,
    pub seed: u64,
    /// Names the run in session names and transaction ids
    /// (`RUN-dc0-c1-5`), so that the histories of runs against one cluster
    /// never share an id; empty: `dc0-c1-5`.
    pub run_id: String,
    /// Every key the clients read and write starts with this.
    pub key_prefix: String,
    /// Keep every transaction for the history (costs memory on long runs).
    pub record: bool,
    /// Pad written values to at least this many bytes; without a history,
    /// cut them to exactly this many (they need not be unique then).
    pub value_size: Option<usize>,
    /// Told when the warm-up ends and when the measured time ends (before
    /// the clients finish their last transactions).
    pub phases: Option<mpsc::UnboundedSender<Phase>>,
    /// How the clients connect: TLS (a cluster with `[tls]`), credentials,
    /// timeouts. Each client gets its own name.
    pub connect: ClientOptions,
}

/// Moments of a run, for a caller that measures the cluster alongside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Measuring,
    Stopped,
}

/// A progress report, about once a second.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub elapsed: Duration,
    pub committed: u64,
    /// Over the last interval.
    pub throughput: f64,
    pub mean_latency_ms: f64,
    /// Still in the warm-up: nothing is measured yet.
    pub warming_up: bool,
}

/// What the clients measured after the warm-up (the history has everything).
pub struct LoadReport {
    /// The measured time: from the end of the warm-up to the stop.
    pub elapsed: Duration,
    pub committed: u64,
    pub aborted: u64,
    /// Transactions that ended in the measured time, whatever their outcome.
    pub attempted: u64,
    /// Operations that failed for another reason than a deliberate abort,
    /// an outage (below) or a lost connection.
    pub errors: Vec<String>,
    /// Transactions whose outcome the client could not know (recorded
    /// `unknown` in the history), over the whole run.
    pub unknown: u64,
    /// Transactions refused or given up because a partition or a server
    /// was unavailable, over the whole run (recorded as aborted).
    pub unavailable: u64,
    /// Connections made again after one broke, over the whole run.
    pub reconnects: u64,
    /// Latency of committed transactions, in microseconds.
    pub latency: Histogram<u64>,
    /// The same measurements by transaction class and client DC, for the
    /// workloads that class their transactions ([`TxnClass`]); empty
    /// otherwise.
    pub classes: Vec<ClassMeasure>,
    pub records: Vec<TxnRecord>,
}

/// What the clients of one DC measured of one class of transactions after
/// the warm-up.
#[derive(Clone, Debug)]
pub struct ClassMeasure {
    pub class: TxnClass,
    pub dc: DcId,
    pub committed: u64,
    pub aborted: u64,
    /// Latency of the committed ones, in microseconds.
    pub latency: Histogram<u64>,
}

#[derive(Default)]
struct Counters {
    committed: AtomicU64,
    latency_sum_us: AtomicU64,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs the load; `commits` (if given) receives every commit for visibility
/// tracking; `progress` is called about once a second.
pub async fn run(
    config: LoadConfig,
    topology: Arc<Topology>,
    commits: Option<mpsc::UnboundedSender<Commit>>,
    mut progress: impl FnMut(Progress) + Send,
) -> Result<LoadReport, Error> {
    let generator = Arc::new(Generator::with_key_prefix(config.workload.clone(), &topology, &config.key_prefix));
    let run = if config.run_id.is_empty() { String::new() } else { format!("{}-", config.run_id) };
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    // Connect everyone first, so connection errors come before the run.
    let mut clients = Vec::new();
    let dcs: Vec<DcId> = topology.dcs().collect();
    for &dc in &dcs {
        let endpoints: Vec<_> = config.endpoints.iter().filter(|(d, _)| *d == dc).map(|(_, a)| *a).collect();
        if endpoints.is_empty() {
            continue;
        }
        for i in 0..config.clients_per_dc {
            let addr = endpoints[i as usize % endpoints.len()];
            let options = ClientOptions { name: format!("load-{run}dc{}-{i}", dc.0), ..config.connect.clone() };
            let client = Client::connect_with(addr, options.clone()).await?;
            clients.push((dc, i, addr, options, client));
        }
    }
    let origin = Instant::now();
    let measure_from = origin + config.warmup;
    let deadline = measure_from + config.duration;
    if let Some(phases) = config.phases.clone() {
        // On time, not at the next progress tick: the caller reads its
        // counters at these moments.
        let until = tokio::time::Instant::from_std(measure_from);
        tokio::spawn(async move {
            tokio::time::sleep_until(until).await;
            let _ = phases.send(Phase::Measuring);
        });
    }
    let mut tasks = Vec::new();
    for (dc, i, addr, options, client) in clients {
        let name = format!("{run}dc{}-c{i}", dc.0);
        let worker = Worker {
            session: name.clone(),
            name,
            dc,
            // Clients are dealt over the DC's endpoints as they are over
            // its replicas (one endpoint per replica, or one for the DC).
            home: generator.home_of(dc, i),
            addr,
            options,
            client: Some(client),
            outages: Outages::default(),
            generator: generator.clone(),
            topology: topology.clone(),
            rng: ChaCha8Rng::seed_from_u64(config.seed ^ (u64::from(dc.0) << 32) ^ u64::from(i)),
            counters: counters.clone(),
            commits: commits.clone(),
            record: config.record,
            value_size: config.value_size,
            origin,
            measure_from,
            measured: Measured::default(),
            latency: visibility::histogram(),
            classes: Vec::new(),
            records: Vec::new(),
        };
        tasks.push(tokio::spawn(worker.run(stop.clone())));
    }
    drop(commits);
    let mut last = (Instant::now(), 0u64, 0u64);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1).min(deadline.saturating_duration_since(Instant::now()))).await;
        let committed = counters.committed.load(Ordering::Relaxed);
        let sum = counters.latency_sum_us.load(Ordering::Relaxed);
        let dt = last.0.elapsed().as_secs_f64().max(1e-9);
        let n = committed - last.1;
        progress(Progress {
            elapsed: origin.elapsed(),
            committed,
            throughput: n as f64 / dt,
            mean_latency_ms: if n > 0 { (sum - last.2) as f64 / n as f64 / 1000.0 } else { 0.0 },
            warming_up: Instant::now() < measure_from,
        });
        last = (Instant::now(), committed, sum);
    }
    stop.store(true, Ordering::Relaxed);
    let elapsed = measure_from.elapsed();
    if let Some(phases) = &config.phases {
        let _ = phases.send(Phase::Stopped);
    }
    let mut report = LoadReport {
        elapsed,
        committed: 0,
        aborted: 0,
        attempted: 0,
        errors: Vec::new(),
        unknown: 0,
        unavailable: 0,
        reconnects: 0,
        latency: visibility::histogram(),
        classes: Vec::new(),
        records: Vec::new(),
    };
    for t in tasks {
        match t.await {
            Ok(w) => {
                report.committed += w.committed;
                report.aborted += w.aborted;
                report.attempted += w.attempted;
                report.unknown += w.outages.unknown;
                report.unavailable += w.outages.unavailable;
                report.reconnects += w.outages.reconnects;
                let _ = report.latency.add(&w.latency);
                for c in w.classes {
                    match report.classes.iter_mut().find(|m| (m.class, m.dc) == (c.class, c.dc)) {
                        Some(m) => {
                            m.committed += c.committed;
                            m.aborted += c.aborted;
                            let _ = m.latency.add(&c.latency);
                        }
                        None => report.classes.push(c),
                    }
                }
                report.records.extend(w.records);
                report.errors.extend(w.error);
            }
            Err(e) => report.errors.push(format!("a client task failed: {e}")),
        }
    }
    report.classes.sort_by_key(|m| (m.class, m.dc));
    Ok(report)
}

struct Worker {
    /// The client's name: its transaction ids start with it.
    name: String,
    /// The history's session of the current connection: the name, then
    /// `NAME/rN` after the Nth reconnect.
    session: String,
    dc: DcId,
    /// The partition of the replica its session is attached to.
    home: PartitionId,
    /// The node it connects to, and again after a failure.
    addr: SocketAddr,
    options: ClientOptions,
    /// `None` while the connection is down.
    client: Option<Client>,
    outages: Outages,
    generator: Arc<Generator>,
    topology: Arc<Topology>,
    rng: ChaCha8Rng,
    counters: Arc<Counters>,
    commits: Option<mpsc::UnboundedSender<Commit>>,
    record: bool,
    value_size: Option<usize>,
    origin: Instant,
    measure_from: Instant,
    measured: Measured,
    latency: Histogram<u64>,
    /// By class, for classed workloads.
    classes: Vec<ClassMeasure>,
    records: Vec<TxnRecord>,
}

/// Counts of transactions that ended after the warm-up.
#[derive(Default)]
struct Measured {
    committed: u64,
    aborted: u64,
    attempted: u64,
}

/// What outages did to one client.
#[derive(Default)]
struct Outages {
    unknown: u64,
    unavailable: u64,
    reconnects: u64,
}

/// The first wait before connecting again after a failure; it doubles up
/// to [`RECONNECT_MAX`].
const RECONNECT_MIN: Duration = Duration::from_millis(50);
const RECONNECT_MAX: Duration = Duration::from_secs(1);
/// The pause after a request refused for an unavailable partition.
const UNAVAILABLE_PAUSE: Duration = Duration::from_millis(100);

/// Whether `e` says the cluster (a partition, a server, the connection to
/// it) was unavailable, rather than that the client did something wrong.
fn is_outage(e: &Error) -> bool {
    matches!(
        e,
        Error::Unavailable(_)
            | Error::PartitionUnavailable { .. }
            | Error::Aborted(causeway_client::wire::AbortReason::Unavailable(_))
            | Error::OutcomeUnknown { .. }
            | Error::Disconnected
            | Error::Timeout { .. }
            | Error::Unreachable { .. }
    )
}

struct Finished {
    outages: Outages,
    latency: Histogram<u64>,
    classes: Vec<ClassMeasure>,
    committed: u64,
    aborted: u64,
    attempted: u64,
    records: Vec<TxnRecord>,
    error: Option<String>,
}

impl Worker {
    async fn run(mut self, stop: Arc<AtomicBool>) -> Finished {
        let mut seq = 0u64;
        let mut error = None;
        while !stop.load(Ordering::Relaxed) {
            if self.client.is_none() && !self.reconnect(&stop).await {
                break;
            }
            seq += 1;
            let mut plan = self.generator.next_at(&mut self.rng, self.dc, self.home);
            let txid = format!("{}-{seq}", self.name);
            let started = Instant::now();
            let mut ops = Vec::new();
            let outcome = self.transaction(&mut plan, &txid, &mut ops).await;
            let ended = Instant::now();
            let measured = ended >= self.measure_from && !stop.load(Ordering::Relaxed);
            if measured {
                self.measured.attempted += 1;
            }
            let status = match &outcome {
                Ok(Outcome::Committed(stamp)) => {
                    let us = ended.duration_since(started).as_micros().max(1) as u64;
                    self.counters.committed.fetch_add(1, Ordering::Relaxed);
                    self.counters.latency_sum_us.fetch_add(us, Ordering::Relaxed);
                    if measured {
                        let _ = self.latency.record(us);
                        self.measured.committed += 1;
                        if let Some(c) = self.class(&plan) {
                            c.committed += 1;
                            let _ = c.latency.record(us);
                        }
                    }
                    if let (Some(s), Some(tx), true) = (stamp, &self.commits, measured) {
                        let mut partitions: Vec<u32> =
                            plan.writes.iter().map(|w| self.topology.partition_of(&w.key).0).collect();
                        partitions.sort_unstable();
                        partitions.dedup();
                        let _ = tx.send(Commit { ts: s.ts, origin: self.dc, partitions, at: ended });
                    }
                    Status::Committed
                }
                // Aborted by the plan, or refused by the store for a conflict
                // (a serializable protocol's certification): an abort, not an
                // error.
                Ok(Outcome::Aborted) | Err(Error::Aborted(AbortReason::Conflict(_))) => {
                    if measured {
                        self.measured.aborted += 1;
                        if let Some(c) = self.class(&plan) {
                            c.aborted += 1;
                        }
                    }
                    Status::Aborted
                }
                Err(Error::OutcomeUnknown { .. }) => {
                    self.outages.unknown += 1;
                    Status::Unknown
                }
                // Refused, given up, or cut off before its commit was sent:
                // it did not commit.
                Err(_) => Status::Aborted,
            };
            if self.record {
                let commit_ts = match &outcome {
                    Ok(Outcome::Committed(Some(s))) => {
                        Some(CommitTs(vec![StampElem::Int(s.ts), StampElem::Int(s.dc.into()), StampElem::Int(s.txid)]))
                    }
                    _ => None,
                };
                self.records.push(TxnRecord {
                    txid,
                    session: self.session.clone(),
                    seq,
                    dc: self.dc.0,
                    status,
                    ops,
                    commit_ts,
                    start_us: started.duration_since(self.origin).as_micros() as u64,
                    end_us: ended.duration_since(self.origin).as_micros() as u64,
                });
            }
            if let Err(e) = outcome {
                // The transaction is over either way. A dead connection is
                // made again at the next turn; an outage is waited out; a
                // certification abort is no error (counted above).
                if !matches!(e, Error::Aborted(AbortReason::Conflict(_))) {
                    if !is_outage(&e) {
                        error.get_or_insert_with(|| format!("{}: {e}", self.name));
                    } else if !matches!(e, Error::OutcomeUnknown { .. }) {
                        self.outages.unavailable += 1;
                    }
                }
                if e.is_fatal() || self.client.as_ref().is_some_and(|c| c.is_closed()) {
                    self.client = None;
                } else {
                    if let Some(c) = self.client.as_mut() {
                        let _ = c.abort().await;
                    }
                    if is_outage(&e) {
                        tokio::time::sleep(UNAVAILABLE_PAUSE).await;
                    }
                }
            }
        }
        let Measured { committed, aborted, attempted } = self.measured;
        Finished {
            outages: self.outages,
            latency: self.latency,
            classes: self.classes,
            committed,
            aborted,
            attempted,
            records: self.records,
            error,
        }
    }

    /// The measurements of `plan`'s class in this client's DC, if it has one.
    fn class(&mut self, plan: &TxnPlan) -> Option<&mut ClassMeasure> {
        let class = plan.class?;
        let i = match self.classes.iter().position(|c| c.class == class) {
            Some(i) => i,
            None => {
                let latency = visibility::histogram();
                self.classes.push(ClassMeasure { class, dc: self.dc, committed: 0, aborted: 0, latency });
                self.classes.len() - 1
            }
        };
        Some(&mut self.classes[i])
    }

    /// Connects again to the client's node, with backoff, until it answers
    /// or the run stops (`false`). The new connection is a new session of
    /// the history.
    async fn reconnect(&mut self, stop: &AtomicBool) -> bool {
        let mut wait = RECONNECT_MIN;
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(wait).await;
            if let Ok(client) = Client::connect_with(self.addr, self.options.clone()).await {
                self.outages.reconnects += 1;
                self.session = format!("{}/r{}", self.name, self.outages.reconnects);
                self.client = Some(client);
                return true;
            }
            wait = (wait * 2).min(RECONNECT_MAX);
        }
        false
    }

    /// Runs `plan`. A timeline's second read round and the writes of a
    /// transfer, a post or a follow follow from what it read: they are
    /// added to the plan as they become known (the history and the
    /// visibility tracker see them there).
    async fn transaction(&mut self, plan: &mut TxnPlan, txid: &str, ops: &mut Vec<Op>) -> Result<Outcome, Error> {
        let client = self.client.as_mut().ok_or(Error::Disconnected)?;
        let record = self.record;
        let note = |ops: &mut Vec<Op>, keys: &[Key], values: &[Option<Value>]| {
            if record {
                for (k, v) in keys.iter().zip(values) {
                    ops.push(Op::read(text(k), v.as_ref().map(|v| text(v))));
                }
            }
        };
        // A read-only transaction in one round trip when it reads once.
        if plan.is_one_read_only_call() {
            let keys = &plan.read_rounds[0];
            let values = client.read_only(keys).await?;
            note(ops, keys, &values);
            return Ok(Outcome::Committed(None));
        }
        // Begin travels with the first read, and the writes with the commit:
        // two round trips for the paper's transaction.
        // What the last round read, kept only for plans whose writes follow
        // from it.
        let derives = plan.social.is_some() || plan.transfer.is_some();
        let mut last: Vec<(Key, Option<Value>)> = Vec::new();
        let mut round = 0;
        while round < plan.read_rounds.len() {
            let keys = &plan.read_rounds[round];
            let values = if round == 0 { client.begin_read(keys).await? } else { client.read(keys).await? };
            note(ops, keys, &values);
            if derives {
                last = keys.iter().cloned().zip(values).collect();
            }
            if let (0, Some((step, social))) = (round, &plan.social) {
                let more = social.second_round(step, &last);
                if !more.is_empty() {
                    plan.read_rounds.push(more);
                }
            }
            round += 1;
        }
        if plan.read_rounds.is_empty() {
            client.begin().await?;
        }
        // Writes that follow from the reads: exact values (a list, a
        // balance), never padded or cut.
        let mut derived: Vec<(Key, String)> = Vec::new();
        if let Some((step, social)) = &plan.social {
            derived = social.writes(step, &last, txid, txid);
        } else if let Some(transfer) = &plan.transfer {
            let find = |key: &Key| last.iter().find(|(k, _)| k == key).and_then(|(_, v)| v.clone());
            let (from, to) = (find(&transfer.from), find(&transfer.to));
            if let Some(moved) = transfer.writes(from.as_deref(), to.as_deref()) {
                derived = moved
                    .into_iter()
                    .map(|(key, balance)| {
                        let tag = format!("{txid}:{}", text(&key));
                        (key, Transfer::value(balance, &tag))
                    })
                    .collect();
            }
        }
        let mut writes = Vec::with_capacity(plan.writes.len() + derived.len());
        for (key, value) in derived {
            if self.record {
                ops.push(Op::write(text(&key), value.clone()));
            }
            plan.writes.push(causeway_workload::PlannedWrite::value(key.clone()));
            writes.push((key, Some(Bytes::from(value))));
        }
        let planned = plan.writes.len() - writes.len();
        for (i, write) in plan.writes[..planned].iter().enumerate() {
            let key = &write.key;
            if write.delete {
                if self.record {
                    ops.push(Op::delete(text(key)));
                }
                writes.push((key.clone(), None));
                continue;
            }
            // Unique values, `txid:key`; an overwritten (intermediate) write gets a suffix.
            let mut value = if plan.writes[i + 1..planned].iter().any(|w| w.key == *key) {
                format!("{txid}:{}:{i}", text(key))
            } else {
                format!("{txid}:{}", text(key))
            };
            if let Some(size) = self.value_size {
                if value.len() < size {
                    value.extend(std::iter::repeat_n('.', size - value.len()));
                } else if !self.record {
                    value.truncate(size);
                }
            }
            if self.record {
                ops.push(Op::write(text(key), value.clone()));
            }
            writes.push((key.clone(), Some(Bytes::from(value))));
        }
        if plan.abort {
            for (key, value) in writes {
                match value {
                    Some(value) => client.write(key, value).await?,
                    None => client.delete(key).await?,
                }
            }
            client.abort().await?;
            return Ok(Outcome::Aborted);
        }
        Ok(Outcome::Committed(client.commit_writes(writes).await?))
    }
}

enum Outcome {
    Committed(Option<causeway_client::wire::Stamp>),
    Aborted,
}
