//! What a simulation run reports.

use crate::network::TransportCounts;
use causeway_history::{Guarantee, History};
use causeway_protocol::{MsgClass, ReplicaCounters};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Summary of a distribution of microsecond values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub count: usize,
    pub mean: f64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(mut values: Vec<u64>) -> Self {
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_unstable();
        let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
        Percentiles {
            count: values.len(),
            mean: values.iter().sum::<u64>() as f64 / values.len() as f64,
            p50: at(0.5),
            p99: at(0.99),
            max: *values.last().unwrap(),
        }
    }
}

/// What the injected faults did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultReport {
    pub crashes: u64,
    pub restarts: u64,
    /// Crashes that took the replica's disk too.
    pub disks_lost: u64,
    /// Records appended but not synced when their replica crashed.
    pub records_lost: u64,
    /// Checkpoints taken: a replica's log up to then replaced by its
    /// compacted state, made durable at once.
    pub checkpoints: u64,
    /// Restarts that recovered from a checkpoint and the records after it.
    pub restarts_from_checkpoint: u64,
    /// Messages that waited for those records, never sent.
    pub messages_lost: u64,
    /// Messages on their way to a replica when it crashed, or sent to it
    /// while it was down: lost with its connections.
    pub messages_to_down: u64,
    /// Backlogs shed between replicas, and the messages they held.
    pub backlogs_shed: u64,
    pub messages_shed: u64,
    /// Groups of replication streams spilled to disk past the bound on
    /// what a replica keeps in memory for its peers, their bytes, and the
    /// batches read back for peers that were behind.
    pub spills: u64,
    pub spilled_bytes: u64,
    pub unspilled_batches: u64,
    /// Commits their clients gave up waiting for (no answer after a
    /// crash), recorded `unknown`.
    pub transactions_abandoned: u64,
    /// Times a protocol's fault point fired.
    pub fault_points_fired: u64,
    /// Crashes that took down a group's leader.
    pub leader_crashes: u64,
    /// Log positions delivered by a member of a group and checked against
    /// the others' (protocols of replica groups).
    pub log_positions_checked: u64,
    pub transport: TransportCounts,
}

pub struct SimReport {
    pub protocol: &'static str,
    /// What the protocol promises of the history.
    pub guarantee: Guarantee,
    /// Whether the protocol promises that no read waits.
    pub reads_never_wait: bool,
    pub seed: u64,
    pub dcs: u16,
    pub partitions: u32,
    /// Replicas per partition under partial replication; `None`: full.
    pub replication: Option<u16>,
    pub clients: usize,
    pub committed: usize,
    pub aborted: usize,
    /// Transactions whose clients gave up waiting for the commit's answer:
    /// possibly committed.
    pub unknown: usize,
    /// Committed transactions that wrote.
    pub updates: usize,
    /// Simulated time the workload ran.
    pub sim_time_us: u64,
    /// Simulated time from the end of the workload until every write was
    /// applied everywhere; `None` if the cluster did not settle in time.
    pub settle_time_us: Option<u64>,
    pub wall: Duration,
    pub events: u64,
    pub messages_by_class: BTreeMap<MsgClass, u64>,
    /// Bytes sent per message class: the postcard encoding of each message.
    pub bytes_by_class: BTreeMap<MsgClass, u64>,
    /// Bytes of visibility metadata each version carries (the same for every
    /// replica of a run).
    pub version_metadata_bytes: u64,
    /// Read requests that reached a replica.
    pub reads: u64,
    /// Of those, how many the replica did not answer at once.
    pub reads_waited: u64,
    /// The furthest a delivered message's newest timestamp reached past its
    /// receiver's clock, in microseconds (clock skew, and what a hybrid
    /// clock ran ahead): below a cluster's `max_clock_offset_ms`, or honest
    /// messages would be held.
    pub max_reach_ahead_us: u64,
    /// The widest gap between two nodes' clocks during the run, in
    /// microseconds.
    pub clock_spread_us: u64,
    /// How long each read that waited was held, in simulated microseconds
    /// (from its arrival at the replica until its reply left).
    pub read_wait_us: Percentiles,
    /// Read-only transactions (of one call) by how many round trips they
    /// took: the steps in which the session sent requests, counted from
    /// outside the protocol (Wren: 2, its snapshot and its reads; EC: 1;
    /// PrompTCC: 1, or 2 when the first did not come from one snapshot).
    pub read_only_rounds: BTreeMap<u32, u64>,
    pub txn_latency_us: Percentiles,
    /// Every replica's counters, summed.
    pub counters: ReplicaCounters,
    pub faults: FaultReport,
    pub history: History,
}

impl SimReport {
    pub fn settled(&self) -> bool {
        self.settle_time_us.is_some()
    }

    /// Waiting time averaged over every read request, those answered at
    /// once counting zero.
    pub fn mean_read_wait_us(&self) -> f64 {
        self.read_wait_us.mean * self.read_wait_us.count as f64 / (self.reads as f64).max(1.0)
    }

    /// Mean round trips of the read-only transactions, and the share that
    /// took at least 2 and at least 3.
    pub fn read_only_round_summary(&self) -> Option<(f64, f64, f64)> {
        causeway_protocol::contract::round_trip_summary(self.read_only_rounds.iter().map(|(&r, &n)| (r, n)))
    }

    /// Transactions finished per second of wall-clock time.
    pub fn txns_per_wall_second(&self) -> f64 {
        (self.committed + self.aborted) as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// A byte count with a binary unit.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.committed + self.aborted + self.unknown;
        let replication = self.replication.map(|r| format!(", R = {r}")).unwrap_or_default();
        writeln!(
            f,
            "{} on {} DCs x {} partitions{replication}, {} clients, seed {}",
            self.protocol, self.dcs, self.partitions, self.clients, self.seed
        )?;
        writeln!(
            f,
            "  transactions   {total} finished: {} committed ({} with writes), {} aborted{}",
            self.committed,
            self.updates,
            self.aborted,
            if self.unknown > 0 { format!(", {} outcome unknown", self.unknown) } else { String::new() }
        )?;
        let sim_s = self.sim_time_us as f64 / 1e6;
        writeln!(
            f,
            "  simulated      {:.3} s ({:.0} txn/s simulated); settled {}",
            sim_s,
            total as f64 / sim_s.max(1e-9),
            match self.settle_time_us {
                Some(us) => format!("{} after the workload", ms(us as f64)),
                None => "NOT within the settle limit".into(),
            }
        )?;
        writeln!(
            f,
            "  wall time      {:.3} s ({:.0} simulated txn per wall second, {} events)",
            self.wall.as_secs_f64(),
            self.txns_per_wall_second(),
            self.events
        )?;
        let l = &self.txn_latency_us;
        writeln!(f, "  txn latency    mean {}, p50 {}, p99 {}", ms(l.mean), ms(l.p50 as f64), ms(l.p99 as f64))?;
        let w = &self.read_wait_us;
        writeln!(
            f,
            "  reads waited   {} of {} read requests{}",
            self.reads_waited,
            self.reads,
            if self.reads_waited > 0 {
                format!(
                    " (mean wait {}, p99 {}, max {}; {} per read request overall)",
                    ms(w.mean),
                    ms(w.p99 as f64),
                    ms(w.max as f64),
                    ms(self.mean_read_wait_us())
                )
            } else {
                String::new()
            }
        )?;
        if let Some((mean, two, three)) = self.read_only_round_summary() {
            let spread: Vec<String> = self.read_only_rounds.iter().map(|(r, n)| format!("{r}: {n}")).collect();
            writeln!(
                f,
                "  read-only      {mean:.3} round trips each ({}); {:.2} % took 2 or more, {:.2} % 3 or more",
                spread.join(", "),
                two * 100.0,
                three * 100.0
            )?;
        }
        let classes: Vec<String> = self.messages_by_class.iter().map(|(c, n)| format!("{} {n}", c.name())).collect();
        writeln!(f, "  messages       {}", classes.join(", "))?;
        let bytes: Vec<String> =
            self.bytes_by_class.iter().map(|(c, n)| format!("{} {}", c.name(), size(*n))).collect();
        writeln!(f, "  bytes sent     {}", bytes.join(", "))?;
        let s = &self.counters;
        write!(
            f,
            "  versions       {} stored, {} garbage-collected, {} bytes of metadata each; {} stale contexts expired",
            s.versions, s.versions_collected, self.version_metadata_bytes, s.contexts_expired
        )?;
        let x = &self.faults;
        if x.crashes > 0 {
            write!(
                f,
                "\n  crashes        {} crashes, {} restarts ({} from a checkpoint); {} unsynced records, {} held messages and {} messages to a downed replica lost; {} commits given up by their clients; {} checkpoints",
                x.crashes,
                x.restarts,
                x.restarts_from_checkpoint,
                x.records_lost,
                x.messages_lost,
                x.messages_to_down,
                x.transactions_abandoned,
                x.checkpoints
            )?;
        }
        if x.transport.packets > 0 {
            let t = &x.transport;
            write!(
                f,
                "\n  transport      {} packets: {} duplicates dropped, {} arrived early and waited, {} resent",
                t.packets, t.duplicates_dropped, t.arrived_early, t.resent
            )?;
        }
        if x.spills > 0 {
            write!(
                f,
                "\n  spilled        {} times ({} bytes) past the bound on groups kept for peers; {} batches read back",
                x.spills, x.spilled_bytes, x.unspilled_batches
            )?;
        }
        if x.fault_points_fired > 0 {
            write!(f, "\n  fault points   fired {} times", x.fault_points_fired)?;
        }
        if s.inputs_refused > 0 {
            write!(f, "\n  refused        {} messages no honest peer sends", s.inputs_refused)?;
        }
        Ok(())
    }
}
