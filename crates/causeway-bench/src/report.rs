//! What a run measured, as JSON (the fields are documented in
//! docs/BENCHMARKS.md) and as the summary `causeway bench` prints.

use crate::cpu::CpuTime;
use crate::syscalls::SyscallsPerTxn;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// One run. `throughput_tps` and `latency_*_ms` are at the top level so a
/// script can read them without knowing the rest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchReport {
    pub protocol: String,
    /// `embedded`, `processes` or `config`.
    pub deployment: String,
    /// The clients reached the servers over TLS (the cluster, as started
    /// or as its config file says, serves them so).
    #[serde(default)]
    pub tls: bool,
    pub dcs: u16,
    pub partitions: u32,
    /// Replicas per partition under partial replication (absent: every DC
    /// holds every partition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<u16>,
    /// As asked (`--clients`); `clients_per_dc` is what ran.
    pub clients_per_partition: u32,
    pub clients_per_dc: u32,
    /// In all DCs.
    pub clients: u32,
    pub workload: WorkloadReport,
    pub wan: bool,
    /// Every key was written once before the warm-up (absent in reports
    /// written before the flag existed: false).
    #[serde(default)]
    pub preload: bool,
    pub skew_ms: f64,
    pub delta_r_ms: f64,
    pub delta_g_ms: f64,
    pub warmup_s: f64,
    /// The measured time (after the warm-up).
    pub duration_s: f64,

    /// Committed transactions per second over the measured time.
    pub throughput_tps: f64,
    pub committed: u64,
    pub aborted: u64,
    /// Clients whose transactions met an error other than an outage (a
    /// lost connection, an unavailable partition); they carry on.
    pub errors: u64,
    /// Transactions whose commit outcome the client could not know (its
    /// server died or went silent mid-commit): `unknown` in the history.
    /// Over the whole run, warm-up included (absent in reports written
    /// before outages were counted: 0).
    #[serde(default)]
    pub unknown: u64,
    /// Transactions refused or given up because a partition or a server
    /// was unavailable, over the whole run.
    #[serde(default)]
    pub unavailable: u64,
    /// Client connections made again after one broke, over the whole run.
    #[serde(default)]
    pub reconnects: u64,
    /// Latency of committed transactions, from begin to the commit's answer.
    pub latency_mean_ms: f64,
    pub latency_p50_ms: f64,
    pub latency_p90_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_max_ms: f64,

    pub reads: ReadWaits,
    pub visibility: Visibility,
    /// Bytes and messages sent between servers and to clients, by class.
    pub traffic: Traffic,
    /// Bytes of protocol metadata per stored version (Wren: 16, two
    /// timestamps; Cure: 8 per DC).
    pub metadata_bytes_per_version: u64,
    pub cpu: Cpu,
    /// System calls per committed transaction (`--syscalls`; absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<Syscalls>,
    /// The ordered log's setting (Geo-SDUR runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordered: Option<OrderedReport>,
    /// Throughput and latency by transaction class (`local`, `global`;
    /// `timeline`, `post`, `follow-local`, `follow-global`), for workloads
    /// that class their transactions; absent otherwise. The top level's
    /// `latency_*` are over every class.
    #[serde(default, skip_serializing_if = "ByClass::is_empty")]
    pub txn_classes: ByClass<ClassReport>,
    /// Which repetition of a sweep's runs (`sweep --rounds`); 0 (absent)
    /// for a single run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub round: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Geo-SDUR's replica groups, log timing and techniques in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderedReport {
    /// The DC of each member, partition by partition (`--members`:
    /// `2,2,1/0,0,1` is the paper's WAN 1, `0,1,2/0,1,2` its WAN 2).
    pub members: String,
    /// Log positions a local may be applied ahead of a pending global
    /// (`--reorder`; 0: off).
    pub reorder_threshold: u64,
    /// `--delay-ms`: milliseconds, or `rtt`; absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    pub heartbeat_ms: f64,
    pub election_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bloom_bits: Option<u32>,
}

impl OrderedReport {
    /// The DCs of each partition's members.
    pub fn groups(&self) -> Vec<Vec<u16>> {
        self.members.split('/').map(|g| g.split(',').filter_map(|d| d.trim().parse().ok()).collect()).collect()
    }

    /// The paper's name for the placement: `WAN 1` when every partition
    /// has a majority of its members in one DC, `WAN 2` when every member
    /// of a partition is in a DC of its own; `None` otherwise.
    pub fn deployment(&self) -> Option<&'static str> {
        let groups = self.groups();
        let majority_in_one = |g: &Vec<u16>| g.iter().any(|d| g.iter().filter(|x| *x == d).count() * 2 > g.len());
        let all_apart = |g: &Vec<u16>| {
            let mut d = g.clone();
            d.sort_unstable();
            d.dedup();
            d.len() == g.len()
        };
        if groups.iter().all(|g| g.len() > 1 && majority_in_one(g)) {
            Some("WAN 1")
        } else if groups.iter().all(|g| g.len() > 1 && all_apart(g)) {
            Some("WAN 2")
        } else {
            None
        }
    }

    /// The delay in milliseconds, if a fixed one.
    pub fn delay_ms(&self) -> Option<f64> {
        self.delay.as_deref().and_then(|d| d.parse().ok())
    }
}

/// One class of transactions in a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClassReport {
    /// Committed per measured second.
    pub throughput_tps: f64,
    pub committed: u64,
    pub aborted: u64,
    /// Of the committed ones, begin to the commit's answer.
    pub latency: Distribution,
    /// Mean and p99 by the clients' DC.
    #[serde(default)]
    pub by_dc: Vec<DcLatency>,
}

/// A class's latency from the clients of one DC.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DcLatency {
    pub dc: u16,
    pub committed: u64,
    pub mean_ms: f64,
    pub p99_ms: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadReport {
    pub reads_per_txn: u32,
    pub writes_per_txn: u32,
    pub partitions_per_txn: u32,
    pub keys_per_partition: u32,
    pub zipf: f64,
    pub value_size: usize,
    /// Under partial replication, the share of transactions that touch
    /// random partitions anywhere rather than only those the client's DC
    /// holds (`--locality 95:5`: 0.05).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_dc_fraction: Option<f64>,
    /// With the PrompTCC paper's transactions (each reads or writes
    /// `reads_per_txn` keys), the share that write; `None`: the Wren
    /// paper's (reads then writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_fraction: Option<f64>,
    /// The Geo-SDUR paper's workloads: `sdur-micro` or `social`; absent
    /// for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The microbenchmark's share of global transactions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_fraction: Option<f64>,
}

impl WorkloadReport {
    /// The percent of multi-DC transactions, under partial replication.
    pub fn multi_dc_percent(&self) -> Option<u32> {
        self.multi_dc_fraction.map(|f| (f * 100.0).round() as u32)
    }

    /// `LOCAL:MULTI` in percent, as `--locality` takes it (`95:5`), under
    /// partial replication.
    pub fn locality(&self) -> Option<String> {
        self.multi_dc_percent().map(|multi| format!("{}:{multi}", 100u32.saturating_sub(multi)))
    }
}

/// Reads that waited: a read request (slice) a replica could not answer in
/// the step that received it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReadWaits {
    pub slices: u64,
    pub slices_waited: u64,
    /// Waiting time averaged over every slice (the paper's blocking time).
    pub wait_mean_ms: f64,
    /// Waiting time averaged over the slices that waited.
    pub wait_mean_of_waited_ms: f64,
    /// Share of measured transactions with at least one slice that waited.
    pub txns_waited_share: f64,
    /// Read-only transactions measured, by the round trips their session
    /// took: `[1, 2, 3, 4 or more]` (empty in reports from before).
    #[serde(default)]
    pub read_only_rounds: Vec<u64>,
}

impl ReadWaits {
    /// Mean round trips of the read-only transactions, and the shares that
    /// took 2 or more and 3 or more; `None` without any.
    pub fn read_only_round_summary(&self) -> Option<(f64, f64, f64)> {
        let counts = self.read_only_rounds.iter().enumerate().map(|(i, &n)| (i as u32 + 1, n));
        causeway_protocol::contract::round_trip_summary(counts)
    }
}

/// How long a commit takes to become visible to new transactions, in its
/// own DC (`local`) and in each other DC (`remote`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Visibility {
    pub local: Distribution,
    pub remote: Distribution,
    /// Commits still not visible everywhere some seconds after the run.
    pub unfinished: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Distribution {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// `[milliseconds, fraction at or below]`, 100 points.
    pub cdf: Vec<[f64; 2]>,
}

impl Distribution {
    /// From a histogram of microseconds.
    pub fn of(h: &Histogram<u64>) -> Distribution {
        if h.is_empty() {
            return Distribution::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        let cdf = (1..=100).map(|i| [ms(h.value_at_quantile(f64::from(i) / 100.0)), f64::from(i) / 100.0]).collect();
        Distribution {
            count: h.len(),
            mean_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.5)),
            p90_ms: ms(h.value_at_quantile(0.9)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            cdf,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Traffic {
    pub bytes: ByClass<u64>,
    pub messages: ByClass<u64>,
    /// `bytes` divided by committed transactions.
    pub bytes_per_txn: ByClass<f64>,
    /// `messages` divided by committed transactions (absent from older
    /// reports).
    #[serde(default)]
    pub messages_per_txn: ByClass<f64>,
    /// Frames and writes on the servers' sockets per committed transaction
    /// (absent from older reports: zeros).
    #[serde(default)]
    pub links_per_txn: LinksPerTxn,
}

/// What the servers' sockets carried per committed transaction, summed
/// over every node: between servers (`peer_*`) and to and from clients
/// (`client_*`). A write is one flush of what a link had ready: one
/// system call as a rule, more for a large or TLS write (`--syscalls`
/// counts the calls). Client requests include the bench's own `Stats`
/// polls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinksPerTxn {
    /// Protocol messages between servers; batch frames carrying them;
    /// the writes carrying those frames; acknowledgement frames (a write
    /// each).
    pub peer_messages: f64,
    pub peer_frames: f64,
    pub peer_writes: f64,
    pub peer_acks: f64,
    /// Request frames from clients; answer frames; writes carrying answers.
    pub client_requests: f64,
    pub client_answers: f64,
    pub client_writes: f64,
}

/// One number per message class, in the order the protocol declares its
/// classes. In JSON, an object keyed by class name (`client`,
/// `transaction`, `replication`, `stabilization` for the protocols of the
/// Wren paper; other protocols declare their own).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ByClass<T>(pub Vec<(String, T)>);

impl<T> ByClass<T> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entry of class `name`, if any.
    pub fn find(&self, name: &str) -> Option<&T> {
        self.0.iter().find(|(c, _)| c == name).map(|(_, v)| v)
    }
}

impl<T: Copy + Default> ByClass<T> {
    /// The number of class `name`; zero for a class the protocol does not have.
    pub fn get(&self, name: &str) -> T {
        self.0.iter().find(|(c, _)| c == name).map(|(_, v)| *v).unwrap_or_default()
    }
}

impl ByClass<u64> {
    pub fn per(&self, n: u64) -> ByClass<f64> {
        let d = n.max(1) as f64;
        ByClass(self.0.iter().map(|(c, v)| (c.clone(), *v as f64 / d)).collect())
    }
}

impl<T: Serialize> Serialize for ByClass<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (class, v) in &self.0 {
            map.serialize_entry(class, v)?;
        }
        map.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ByClass<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Entries<T> {
            type Value = ByClass<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of numbers keyed by message class")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ByClass<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(ByClass(out))
            }
        }
        d.deserialize_map(Entries(std::marker::PhantomData))
    }
}

/// CPU time over the measured time. Embedded: servers and clients share one
/// process, reported as `servers`, with `clients` absent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cpu {
    pub servers: Option<CpuReport>,
    pub clients: Option<CpuReport>,
}

/// System calls per committed transaction over the measured time, as
/// [`Cpu`] splits them: servers and clients (embedded: one process, as
/// `servers`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Syscalls {
    pub servers: Option<SyscallsPerTxn>,
    pub clients: Option<SyscallsPerTxn>,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct CpuReport {
    pub user_s: f64,
    pub system_s: f64,
    /// Share of the CPU time spent in the kernel.
    pub system_share: f64,
    /// CPU seconds per second: how many cores were busy.
    pub cores: f64,
    /// CPU microseconds per committed transaction.
    pub us_per_txn: f64,
    /// Per committed transaction: voluntary and involuntary context
    /// switches (see `cpu.rs`; absent from older reports).
    #[serde(default)]
    pub voluntary_switches_per_txn: f64,
    #[serde(default)]
    pub involuntary_switches_per_txn: f64,
}

impl CpuReport {
    pub fn of(t: CpuTime, secs: f64, committed: u64) -> CpuReport {
        let total = t.total_s();
        let per_txn = |n: u64| n as f64 / committed.max(1) as f64;
        CpuReport {
            voluntary_switches_per_txn: per_txn(t.voluntary_switches),
            involuntary_switches_per_txn: per_txn(t.involuntary_switches),
            user_s: t.user_s,
            system_s: t.system_s,
            system_share: if total > 0.0 { t.system_s / total } else { 0.0 },
            cores: total / secs.max(1e-9),
            us_per_txn: total * 1e6 / committed.max(1) as f64,
        }
    }
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

impl BenchReport {
    /// Whether clients met outages: unknown outcomes, unavailable
    /// partitions or servers, broken connections.
    pub fn had_outages(&self) -> bool {
        self.unknown + self.unavailable + self.reconnects > 0
    }

    /// The summary `causeway bench` prints.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let line = |s: &mut String, l: String| {
            s.push_str(&l);
            s.push('\n');
        };
        line(
            &mut s,
            format!(
                "  throughput     {:.0} txn/s ({} committed in {:.1} s, {} aborted, {} errors)",
                self.throughput_tps, self.committed, self.duration_s, self.aborted, self.errors
            ),
        );
        if self.had_outages() {
            line(
                &mut s,
                format!(
                    "  outages        {} unknown outcomes, {} unavailable, {} reconnects",
                    self.unknown, self.unavailable, self.reconnects
                ),
            );
        }
        line(
            &mut s,
            format!(
                "  latency        mean {:.2} ms   p50 {:.2}   p90 {:.2}   p99 {:.2}   max {:.1} ms",
                self.latency_mean_ms,
                self.latency_p50_ms,
                self.latency_p90_ms,
                self.latency_p99_ms,
                self.latency_max_ms
            ),
        );
        for (class, c) in &self.txn_classes.0 {
            let d = &c.latency;
            line(
                &mut s,
                format!(
                    "  {class:<14} {:.0} txn/s ({} committed, {} aborted), latency mean {:.2} ms   p50 {:.2}   p99 {:.2}   max {:.1} ms",
                    c.throughput_tps, c.committed, c.aborted, d.mean_ms, d.p50_ms, d.p99_ms, d.max_ms
                ),
            );
            if c.by_dc.len() > 1 {
                let dcs: Vec<String> = c
                    .by_dc
                    .iter()
                    .map(|x| format!("dc{} {:.1}/{:.1} ms ({})", x.dc, x.mean_ms, x.p99_ms, x.committed))
                    .collect();
                line(&mut s, format!("  {:<14}   mean/p99 by DC: {}", "", dcs.join(", ")));
            }
        }
        let r = &self.reads;
        line(
            &mut s,
            format!(
                "  reads waited   {} of {} slices ({:.2} %), mean wait {:.3} ms over all, {:.3} ms over those; {:.2} % of transactions",
                r.slices_waited,
                r.slices,
                100.0 * r.slices_waited as f64 / r.slices.max(1) as f64,
                r.wait_mean_ms,
                r.wait_mean_of_waited_ms,
                100.0 * r.txns_waited_share
            ),
        );
        if let Some((mean, two, three)) = r.read_only_round_summary() {
            line(
                &mut s,
                format!(
                    "  read-only      {mean:.3} round trips each; {:.2} % took 2 or more, {:.2} % 3 or more ({} transactions)",
                    100.0 * two,
                    100.0 * three,
                    r.read_only_rounds.iter().sum::<u64>()
                ),
            );
        }
        for (name, d) in [("visible here  ", &self.visibility.local), ("visible remote", &self.visibility.remote)] {
            if d.count > 0 {
                line(
                    &mut s,
                    format!(
                        "  {name} mean {:.1} ms   p50 {:.1}   p90 {:.1}   p99 {:.1}   max {:.1} ms",
                        d.mean_ms, d.p50_ms, d.p90_ms, d.p99_ms, d.max_ms
                    ),
                );
            }
        }
        if self.visibility.unfinished > 0 {
            line(
                &mut s,
                format!("  {} commits were still not visible everywhere after the run", self.visibility.unfinished),
            );
        }
        let bytes: Vec<String> =
            self.traffic.bytes.0.iter().map(|(class, b)| format!("{class} {:.1} MB", mb(*b))).collect();
        line(&mut s, format!("  bytes sent     {}", bytes.join(", ")));
        if self.committed > 0 && !self.traffic.messages_per_txn.is_empty() {
            let msgs: Vec<String> =
                self.traffic.messages_per_txn.0.iter().map(|(class, n)| format!("{class} {n:.2}")).collect();
            line(&mut s, format!("  messages/txn   {}", msgs.join(", ")));
            let l = &self.traffic.links_per_txn;
            line(
                &mut s,
                format!(
                    "  sockets/txn    servers: {:.2} messages in {:.2} frames, {:.2} writes, {:.2} acks; clients: {:.2} requests, {:.2} answers in {:.2} writes",
                    l.peer_messages,
                    l.peer_frames,
                    l.peer_writes,
                    l.peer_acks,
                    l.client_requests,
                    l.client_answers,
                    l.client_writes
                ),
            );
        }
        line(&mut s, format!("  metadata       {} bytes per version", self.metadata_bytes_per_version));
        for (who, c) in [("servers", &self.cpu.servers), ("clients", &self.cpu.clients)] {
            if let Some(c) = c {
                let who = if self.cpu.clients.is_none() { "process" } else { who };
                line(
                    &mut s,
                    format!(
                        "  cpu {who:<10} {:.1} s user + {:.1} s system ({:.0} % kernel), {:.2} cores, {:.0} µs per txn",
                        c.user_s,
                        c.system_s,
                        100.0 * c.system_share,
                        c.cores,
                        c.us_per_txn
                    ),
                );
                line(
                    &mut s,
                    format!(
                        "  switches {who:<8} {:.1} voluntary + {:.1} involuntary context switches per txn",
                        c.voluntary_switches_per_txn, c.involuntary_switches_per_txn
                    ),
                );
            }
        }
        if let Some(calls) = &self.syscalls {
            for (who, c) in [("servers", &calls.servers), ("clients", &calls.clients)] {
                if let Some(c) = c {
                    let who = if calls.clients.is_none() { "process" } else { who };
                    line(
                        &mut s,
                        format!(
                            "  syscalls {who:<8} {:.1} per txn: {:.1} read, {:.1} write, {:.1} epoll, {:.1} futex",
                            c.all, c.read, c.write, c.epoll, c.futex
                        ),
                    );
                }
            }
        }
        s
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A report of nothing in particular, for tests to change.
    pub(crate) fn sample() -> BenchReport {
        BenchReport {
            protocol: "sdur".into(),
            deployment: "embedded".into(),
            tls: false,
            dcs: 3,
            partitions: 2,
            replication: None,
            clients_per_partition: 1,
            clients_per_dc: 2,
            clients: 6,
            workload: WorkloadReport {
                reads_per_txn: 2,
                writes_per_txn: 2,
                partitions_per_txn: 2,
                keys_per_partition: 1000,
                zipf: 0.0,
                value_size: 4,
                multi_dc_fraction: None,
                write_fraction: None,
                kind: Some("sdur-micro".into()),
                global_fraction: Some(0.1),
            },
            wan: true,
            preload: false,
            skew_ms: 0.0,
            delta_r_ms: 5.0,
            delta_g_ms: 5.0,
            warmup_s: 1.0,
            duration_s: 1.0,
            throughput_tps: 10.0,
            committed: 10,
            aborted: 0,
            errors: 0,
            unknown: 0,
            unavailable: 0,
            reconnects: 0,
            latency_mean_ms: 1.0,
            latency_p50_ms: 1.0,
            latency_p90_ms: 1.0,
            latency_p99_ms: 1.0,
            latency_max_ms: 1.0,
            reads: ReadWaits::default(),
            visibility: Visibility::default(),
            traffic: Traffic::default(),
            metadata_bytes_per_version: 8,
            cpu: Cpu::default(),
            syscalls: None,
            ordered: Some(OrderedReport { members: "2,2,1/0,0,1".into(), ..OrderedReport::default() }),
            txn_classes: ByClass(vec![(
                "local".into(),
                ClassReport { throughput_tps: 9.0, committed: 9, ..ClassReport::default() },
            )]),
            round: 0,
        }
    }

    /// The classes and the log's setting go into the JSON under their names
    /// and come back; reports without them read as before.
    #[test]
    fn classes_and_the_logs_setting_round_trip_through_json() {
        let r = sample();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["txn_classes"]["local"]["throughput_tps"], 9.0);
        assert_eq!(v["txn_classes"]["local"]["latency"]["cdf"], serde_json::json!([]));
        assert_eq!(v["ordered"]["members"], "2,2,1/0,0,1");
        assert_eq!(v["workload"]["kind"], "sdur-micro");
        assert!(v.get("round").is_none(), "a single run has no round");
        let back: BenchReport = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back.txn_classes.find("local").map(|c| c.committed), Some(9));
        assert_eq!(back.ordered.as_ref().and_then(OrderedReport::deployment), Some("WAN 1"));
        let mut old = v;
        for field in ["txn_classes", "ordered"] {
            old.as_object_mut().unwrap().remove(field);
        }
        let old: BenchReport = serde_json::from_value(old).unwrap();
        assert!(old.txn_classes.is_empty() && old.ordered.is_none());
        assert!(r.summary().contains("local "), "{}", r.summary());
        let wan2 = OrderedReport { members: "0,1,2/0,1,2".into(), ..OrderedReport::default() };
        assert_eq!(wan2.deployment(), Some("WAN 2"));
        assert_eq!(OrderedReport { members: "0,0/1".into(), ..OrderedReport::default() }.deployment(), None);
    }

    #[test]
    fn read_only_rounds_summarize_to_a_mean_and_the_shares_of_second_and_third_rounds() {
        let r = ReadWaits { read_only_rounds: vec![90, 8, 2, 0], ..ReadWaits::default() };
        let (mean, two, three) = r.read_only_round_summary().unwrap();
        assert!((mean - 1.12).abs() < 1e-9, "{mean}");
        assert!((two - 0.10).abs() < 1e-9 && (three - 0.02).abs() < 1e-9, "{two} {three}");
        assert!(ReadWaits::default().read_only_round_summary().is_none(), "none from older reports");
    }
}
