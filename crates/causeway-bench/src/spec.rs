//! What one benchmark run is: the cluster, where it runs, the workload, how
//! long. Every field has the paper's default.

use causeway_client::wire::Limits;
use causeway_protocol::{DcId, DelayTuning, OrderedTuning, ProtocolKind, Topology};
use causeway_workload::{TxnShape, WorkloadConfig};
use std::path::PathBuf;
use std::time::Duration;

/// Where the cluster under test runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Deployment {
    /// Every replica in this process (one node), clients too.
    Embedded,
    /// Each partition replica its own `causeway server` process, started
    /// from `exe` and stopped after the run; the clients stay here.
    Processes { exe: PathBuf },
    /// A running cluster described by this config file; nothing is started.
    Config(PathBuf),
}

impl Deployment {
    pub fn name(&self) -> &'static str {
        match self {
            Deployment::Embedded => "embedded",
            Deployment::Processes { .. } => "processes",
            Deployment::Config(_) => "config",
        }
    }
}

#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub protocol: ProtocolKind,
    pub dcs: u16,
    /// Partitions of the key space.
    pub partitions: u32,
    /// Replicas per partition under partial replication (dealt
    /// round-robin); `None`: every DC holds every partition.
    pub replication: Option<u16>,
    pub deployment: Deployment,
    /// Closed-loop clients per partition (so `partitions ×` this per DC).
    pub clients_per_partition: u32,
    /// Clients per DC instead, when set: loads below one client per
    /// partition (a small machine saturates before that).
    pub clients_per_dc: Option<u32>,
    pub workload: WorkloadConfig,
    /// Bytes per written value.
    pub value_size: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// WAN emulation between DCs: `None` off; `Some(None)` the built-in
    /// model (`config/wan.toml`); `Some(Some(file))` another RTT matrix.
    pub wan: Option<Option<PathBuf>>,
    /// Emulated clock skew: each replica's clock is off by a fixed amount
    /// drawn from `[-skew/2, skew/2]` (seeded), in milliseconds.
    pub skew_ms: f64,
    /// Δ_R and Δ_G in milliseconds.
    pub delta_r_ms: f64,
    pub delta_g_ms: f64,
    pub seed: u64,
    /// Record the history (every transaction, and the final states).
    pub record: bool,
    /// Count the system calls of the servers and the clients over the
    /// measured time (`perf stat`; see [`crate::syscalls`]).
    pub syscalls: bool,
    /// How often every node is asked for its stable times, to measure
    /// update visibility: its cost on the servers (the answers carry when
    /// each change of the last 16 ms or more happened, so within that
    /// not its resolution).
    pub visibility_interval: Duration,
    /// Write every key once before the warm-up (not with `record`: the
    /// history would not know who wrote those values).
    pub preload: bool,
    /// Names this run: its sessions and transactions carry it
    /// (`RUN-dc0-c1-5`), so the histories of two runs never share an id.
    pub run_id: String,
    /// Keys are named `PREFIX k0`, `PREFIX k1`, …; `None`: against a running
    /// cluster (which may hold other data, and other runs' keys) a prefix of
    /// this run's own, `RUN/`; in a cluster the run starts, none.
    pub key_prefix: Option<String>,
    /// Where a cluster the run starts keeps its logs (`causeway demo` gives
    /// a temporary directory; `bench --data-dir`): an embedded cluster in
    /// it, server processes in a directory each under it. `None`: in
    /// memory only. A running cluster (`--config`) keeps its own.
    pub data_dir: Option<std::path::PathBuf>,
    /// When the logs under `data_dir` count as durable.
    pub fsync: causeway_runtime::disk::Fsync,
    /// Server processes link by mutual TLS and serve the clients over TLS
    /// (with certificates made for the run).
    pub tls: bool,
    /// Log in as this user of a running cluster (`--config`); clusters the
    /// run starts admit its clients anonymously.
    pub credentials: Option<causeway_client::Credentials>,
    /// Replica groups (Geo-SDUR, `--members`): the DC of each member of
    /// each partition; `None`: one replica per partition and DC.
    pub groups: Option<Vec<Vec<u16>>>,
    /// The ordered log's settings (Geo-SDUR): Raft timing, reordering,
    /// delaying, bloom filters.
    pub ordered: OrderedTuning,
    /// Which repetition of a sweep's runs this is (`sweep --rounds`; 0 for
    /// a single run).
    pub round: u32,
}

impl Default for BenchSpec {
    /// The Wren paper's default workload: 19 reads + 1 write over 4
    /// partitions per transaction, zipf 0.99 inside a partition, 8-byte
    /// values, no read-only or aborted transactions; 3 DCs × 4 partitions
    /// with WAN emulation, 2 clients per partition, 2 s of warm-up, 10 s
    /// measured.
    fn default() -> Self {
        BenchSpec {
            protocol: ProtocolKind::Wren,
            dcs: 3,
            partitions: 4,
            replication: None,
            deployment: Deployment::Embedded,
            clients_per_partition: 2,
            clients_per_dc: None,
            workload: paper_workload(19, 1),
            value_size: 8,
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(10),
            wan: Some(None),
            skew_ms: 0.0,
            delta_r_ms: 5.0,
            delta_g_ms: 5.0,
            seed: 1,
            record: false,
            syscalls: false,
            visibility_interval: Duration::from_millis(10),
            preload: false,
            run_id: new_run_id(),
            key_prefix: None,
            data_dir: None,
            fsync: causeway_runtime::disk::Fsync::default(),
            tls: false,
            credentials: None,
            groups: None,
            ordered: OrderedTuning::default(),
            round: 0,
        }
    }
}

/// A name for a run, unique enough that two runs never share it: 8
/// lowercase letters and digits drawn from the clock, the process and a
/// counter.
pub fn new_run_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos
        ^ u64::from(std::process::id()).rotate_left(40)
        ^ RUNS.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // SplitMix64's finalizer spreads the bits.
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..8).map(|i| DIGITS[(z >> (i * 6)) as usize % 36] as char).collect()
}

/// `2,2,1/0,0,1`: the DC of each member, partition by partition.
pub fn members_spec(groups: &[Vec<u16>]) -> String {
    groups.iter().map(|g| g.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")).collect::<Vec<_>>().join("/")
}

/// The paper's transaction: `reads` + `writes` over 4 partitions, zipf
/// 0.99, 100,000 keys per partition, every transaction an update, none
/// aborted, reads in one call; under partial replication 95 % of them
/// local-DC (the PaRiS paper's default).
pub fn paper_workload(reads: u32, writes: u32) -> WorkloadConfig {
    WorkloadConfig {
        reads_per_txn: reads,
        writes_per_txn: writes,
        partitions_per_txn: 4,
        keys_per_partition: 100_000,
        zipf: 0.99,
        read_only_fraction: 0.0,
        abort_fraction: 0.0,
        rewrite_fraction: 0.0,
        delete_fraction: 0.0,
        max_read_rounds: 1,
        think_time_us: 0,
        multi_dc_fraction: 0.05,
        shape: TxnShape::ReadThenWrite,
    }
}

/// The PrompTCC paper's workload (its Table II defaults): a transaction
/// reads `keys` keys, or — a share `write_fraction` of them — writes `keys`
/// keys, drawn by zipf 0.99 over the whole key space (100,000 keys per
/// partition here, as the Wren workload).
pub fn promptcc_workload(keys: u32, write_fraction: f64) -> WorkloadConfig {
    let wren = paper_workload(keys, keys);
    WorkloadConfig {
        keys_per_partition: wren.keys_per_partition,
        zipf: wren.zipf,
        ..WorkloadConfig::read_or_write(keys, write_fraction)
    }
}

impl BenchSpec {
    /// The cluster's shape: every partition in every DC, or in
    /// `replication` of them, or in the replica groups asked for.
    pub fn topology(&self) -> Result<Topology, String> {
        match &self.groups {
            Some(groups) => {
                let groups = groups.iter().map(|g| g.iter().map(|&dc| DcId(dc)).collect()).collect();
                Topology::with_groups(self.dcs, self.partitions, groups).map_err(|e| e.to_string())
            }
            None => Topology::placed(self.dcs, self.partitions, self.replication).map_err(|e| e.to_string()),
        }
    }

    /// The replica groups as `--members` writes them (`2,2,1/0,0,1`): the DC
    /// of each member, partition by partition; one member per DC without
    /// groups.
    pub fn members_spec(&self) -> String {
        match &self.groups {
            Some(groups) => members_spec(groups),
            None => (0..self.partitions)
                .map(|_| (0..self.dcs).map(|d| d.to_string()).collect::<Vec<_>>().join(","))
                .collect::<Vec<_>>()
                .join("/"),
        }
    }

    /// The delay of `--delay-ms`, as the report gives it: milliseconds, or
    /// `rtt`; `None` off.
    pub fn delay(&self) -> Option<String> {
        match &self.ordered.delaying {
            DelayTuning::Off => None,
            DelayTuning::Fixed { delay_us } => Some(format!("{}", *delay_us as f64 / 1000.0)),
            DelayTuning::FromRtt { .. } => Some("rtt".into()),
        }
    }

    /// The prefix of every key the run reads and writes ([`BenchSpec::key_prefix`]).
    pub fn key_prefix(&self) -> String {
        match (&self.key_prefix, &self.deployment) {
            (Some(prefix), _) => prefix.clone(),
            (None, Deployment::Config(_)) => format!("{}/", self.run_id),
            (None, _) => String::new(),
        }
    }

    /// Closed-loop clients in each DC.
    pub fn clients_per_dc(&self) -> u32 {
        self.clients_per_dc.unwrap_or_else(|| self.clients_per_partition.saturating_mul(self.partitions))
    }

    /// Checks the numbers, with messages that name the flag.
    pub fn validate(&self) -> Result<(), String> {
        let w = &self.workload;
        let check = |ok: bool, msg: &str| if ok { Ok(()) } else { Err(msg.to_string()) };
        check(self.dcs >= 1, "--dcs must be at least 1")?;
        check(self.partitions >= 1, "--partitions must be at least 1")?;
        check(
            !self.tls || matches!(self.deployment, Deployment::Processes { .. }),
            "--tls needs --processes (a cluster from --config speaks TLS if its file says so)",
        )?;
        check(self.clients_per_partition >= 1, "--clients must be at least 1 per partition")?;
        check(self.clients_per_dc() >= 1, "--clients-per-dc must be at least 1")?;
        check(
            self.clients_per_dc() <= 4096,
            "at most 4096 clients per DC (--clients × --partitions, or --clients-per-dc)",
        )?;
        // The flags that set the transaction's size.
        let (reads, writes) = match w.shape {
            TxnShape::ReadOrWrite => ("--keys-per-txn", "--keys-per-txn"),
            _ => ("--reads", "--writes"),
        };
        let empty = match w.shape {
            TxnShape::ReadOrWrite => "--keys-per-txn must be at least 1 (the paper: 5, from 2 to 64)",
            _ => "a transaction needs at least one read or write (--reads, --writes)",
        };
        if let Some(groups) = &self.groups {
            check(
                groups.len() == self.partitions as usize,
                &format!(
                    "--members places {} partitions; the cluster has {} (--partitions)",
                    groups.len(),
                    self.partitions
                ),
            )?;
            check(self.replication.is_none(), "--members places the replicas itself: leave out --replication")?;
            check(
                groups.iter().all(|g| !g.is_empty() && g.iter().all(|&dc| dc < self.dcs)),
                &format!(
                    "--members names a DC the cluster does not have (DCs are 0 to {})",
                    self.dcs.saturating_sub(1)
                ),
            )?;
        }
        match w.shape {
            TxnShape::SdurMicro { global_ppm } => {
                check(
                    global_ppm <= 1_000_000,
                    "--global-fraction must be between 0 and 1 (the paper: 0, 0.01, 0.1, 0.5)",
                )?;
                check(
                    global_ppm == 0 || self.partitions >= 2,
                    "--global-fraction above 0 needs two partitions or more (a global transaction touches two)",
                )?;
            }
            TxnShape::Social(_) => {
                check(
                    !self.preload,
                    "--preload does not apply to --workload social (a user's lists start as its id says)",
                )?;
                check(w.keys_per_partition >= 2, "--users must be at least 2 per partition")?;
            }
            TxnShape::ReadThenWrite | TxnShape::ReadOrWrite => {}
        }
        check(w.reads_per_txn + w.writes_per_txn >= 1, empty)?;
        if w.shape == TxnShape::ReadOrWrite {
            check(
                (0.0..=1.0).contains(&w.write_fraction()),
                "--write-fraction must be between 0 and 1 (the paper: 0.1)",
            )?;
        }
        // The servers' default limits (docs/OPERATIONS.md).
        let limits = Limits::default();
        check(
            w.reads_per_txn <= limits.max_keys_per_read,
            &format!("{reads} must be at most {} (the servers' keys per read)", limits.max_keys_per_read),
        )?;
        check(
            w.writes_per_txn <= limits.max_writes_per_txn,
            &format!("{writes} must be at most {} (the servers' writes per transaction)", limits.max_writes_per_txn),
        )?;
        check(
            u64::from(w.keys_per_partition) * u64::from(self.partitions) <= 100_000_000,
            "--keys × --partitions must be at most 100,000,000 (the clients hold every key name)",
        )?;
        check(w.partitions_per_txn >= 1, "--partitions-per-txn must be at least 1")?;
        check(w.keys_per_partition >= 1, "--keys must be at least 1")?;
        check(w.keys_per_partition <= 10_000_000, "--keys must be at most 10,000,000 per partition")?;
        check(w.zipf.is_finite() && w.zipf >= 0.0, "--zipf must be 0 (uniform) or more")?;
        check(self.value_size >= 1 && self.value_size <= 64 << 10, "--value-size must be 1 to 65536 bytes")?;
        // Room for the key's own name under the servers' key limit.
        check(self.key_prefix().len() <= 256, "--key-prefix must be at most 256 bytes")?;
        check(
            !(self.preload && self.record),
            "--preload cannot go with --history (the history would not know who wrote the preloaded values)",
        )?;
        let secs = |d: Duration| d.as_secs_f64();
        check(secs(self.duration) > 0.0 && secs(self.duration) <= 86_400.0, "--duration must be in (0, 86400] s")?;
        check(secs(self.warmup) <= 3_600.0, "--warmup must be at most 3600 s")?;
        check(
            (0.1..=1000.0).contains(&(secs(self.visibility_interval) * 1000.0)),
            "--visibility-interval-ms must be 0.1 to 1000",
        )?;
        // The clocks of a DC must agree within half the commit timeout: a
        // replica takes a one-partition commit only until then by its own
        // clock.
        let max_ms = causeway_protocol::twopc::Rhythm::MAX_CLOCK_SPREAD_US as f64 / 1000.0;
        check(
            self.skew_ms.is_finite() && self.skew_ms >= 0.0 && self.skew_ms < max_ms,
            &format!("--skew-ms must be at least 0 and less than {max_ms} (the clocks of a DC must agree within half the commit timeout)"),
        )?;
        for (v, flag) in [(self.delta_r_ms, "--delta-r-ms"), (self.delta_g_ms, "--delta-g-ms")] {
            check(v.is_finite() && v > 0.0 && v <= 60_000.0, &format!("{flag} must be in (0, 60000] ms"))?;
        }
        // What the flags above do not name (the workload's own rules).
        causeway_workload::WorkloadKind::Random(w.clone()).validate()
    }

    /// Each replica's emulated clock offset in microseconds, drawn from the
    /// seed: the same spec gives the same offsets.
    pub fn clock_offset_us(&self, dc: u16, partition: u32) -> i64 {
        if self.skew_ms == 0.0 {
            return 0;
        }
        // SplitMix64 of (seed, replica): uniform in [0, 1).
        let mut z = self.seed ^ (u64::from(dc) << 32 | u64::from(partition)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64;
        ((u - 0.5) * self.skew_ms * 1000.0) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_papers_workload_and_valid() {
        let s = BenchSpec::default();
        assert_eq!((s.workload.reads_per_txn, s.workload.writes_per_txn, s.workload.partitions_per_txn), (19, 1, 4));
        assert_eq!(s.workload.read_only_fraction, 0.0);
        assert_eq!(s.value_size, 8);
        assert_eq!(s.clients_per_dc(), 8);
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn validation_names_the_flag() {
        let bad = |f: fn(&mut BenchSpec), flag: &str| {
            let mut s = BenchSpec::default();
            f(&mut s);
            let e = s.validate().unwrap_err();
            assert!(e.contains(flag), "{e} should name {flag}");
        };
        bad(|s| s.clients_per_partition = 0, "--clients");
        bad(|s| s.workload.zipf = f64::NAN, "--zipf");
        bad(|s| s.value_size = 0, "--value-size");
        bad(|s| s.duration = Duration::ZERO, "--duration");
        bad(|s| s.skew_ms = -1.0, "--skew-ms");
        bad(|s| s.skew_ms = 500.0, "--skew-ms");
        bad(|s| s.delta_g_ms = 0.0, "--delta-g-ms");
        bad(|s| s.workload.keys_per_partition = 0, "--keys");
    }

    #[test]
    fn runs_have_ids_of_their_own_and_a_running_cluster_a_key_prefix_of_the_run() {
        let (a, b) = (BenchSpec::default(), BenchSpec::default());
        assert_ne!(a.run_id, b.run_id);
        assert_eq!(a.run_id.len(), 8);
        assert_eq!(a.key_prefix(), "", "a cluster the run starts holds nothing else");
        let running = BenchSpec { deployment: Deployment::Config("c.toml".into()), ..a.clone() };
        assert_eq!(running.key_prefix(), format!("{}/", a.run_id));
        let chosen = BenchSpec { key_prefix: Some("mine/".into()), ..running };
        assert_eq!(chosen.key_prefix(), "mine/");
    }

    #[test]
    fn clock_offsets_are_seeded_bounded_and_spread() {
        let s = BenchSpec { skew_ms: 10.0, ..BenchSpec::default() };
        let offsets: Vec<i64> =
            (0..3).flat_map(|d| (0..8).map(move |p| (d, p))).map(|(d, p)| s.clock_offset_us(d, p)).collect();
        assert!(offsets.iter().all(|o| o.abs() <= 5_000), "{offsets:?}");
        assert!(offsets.iter().max().unwrap() - offsets.iter().min().unwrap() > 5_000, "spread: {offsets:?}");
        let s2 = &s;
        assert_eq!(offsets, (0..3).flat_map(|d| (0..8).map(move |p| s2.clock_offset_us(d, p))).collect::<Vec<_>>());
        let other = BenchSpec { seed: 2, ..s.clone() };
        assert_ne!(s.clock_offset_us(0, 0), other.clock_offset_us(0, 0));
        assert_eq!(BenchSpec::default().clock_offset_us(1, 1), 0, "no skew asked, none given");
    }
}
