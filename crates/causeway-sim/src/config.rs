//! What a simulation runs: cluster shape, WAN, clocks, faults and workload.

use serde::Deserialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// The default WAN model, read from the repository's `config/wan.toml`.
pub const DEFAULT_WAN_TOML: &str = include_str!("../../../config/wan.toml");

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("WAN file: {0}")]
    WanSyntax(String),
    #[error("WAN file: region {0:?} appears twice")]
    DuplicateRegion(String),
    #[error("WAN file: unknown region {0:?} in rtt_ms")]
    UnknownRegion(String),
    #[error("WAN file: no round-trip time between {0} and {1}")]
    MissingRtt(String, String),
    #[error("WAN file: intra_dc_one_way_us must be [min, max] with 0 < min <= max")]
    BadIntraDc,
    #[error("WAN file: jitter must be in [0, 1)")]
    BadJitter,
    #[error("{dcs} DCs asked for, but the WAN model has only {regions} regions")]
    TooManyDcs { dcs: u16, regions: usize },
    #[error("{0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WanFile {
    regions: Vec<String>,
    intra_dc_one_way_us: [u64; 2],
    jitter: f64,
    rtt_ms: BTreeMap<String, BTreeMap<String, f64>>,
}

/// Latencies between and inside DCs.
#[derive(Clone, Debug, PartialEq)]
pub struct WanModel {
    pub regions: Vec<String>,
    /// Round-trip times in microseconds, `rtt_us[a][b]`, symmetric.
    pub rtt_us: Vec<Vec<u64>>,
    pub intra_dc_one_way_us: (u64, u64),
    pub jitter: f64,
}

impl WanModel {
    pub fn parse(text: &str) -> Result<WanModel, ConfigError> {
        let file: WanFile = toml::from_str(text).map_err(|e| ConfigError::WanSyntax(e.to_string()))?;
        let n = file.regions.len();
        let index = |name: &str| file.regions.iter().position(|r| r == name);
        for (i, r) in file.regions.iter().enumerate() {
            if file.regions[..i].contains(r) {
                return Err(ConfigError::DuplicateRegion(r.clone()));
            }
        }
        let mut rtt = vec![vec![None; n]; n];
        for (a, row) in &file.rtt_ms {
            let i = index(a).ok_or_else(|| ConfigError::UnknownRegion(a.clone()))?;
            for (b, ms) in row {
                let j = index(b).ok_or_else(|| ConfigError::UnknownRegion(b.clone()))?;
                if !ms.is_finite() || *ms < 0.0 {
                    return Err(ConfigError::Invalid(format!("WAN file: bad rtt {ms} between {a} and {b}")));
                }
                let us = (ms * 1000.0).round() as u64;
                rtt[i][j] = Some(us);
                rtt[j][i] = Some(us);
            }
        }
        let mut rtt_us = vec![vec![0; n]; n];
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    rtt_us[i][j] = rtt[i][j]
                        .ok_or_else(|| ConfigError::MissingRtt(file.regions[i].clone(), file.regions[j].clone()))?;
                }
            }
        }
        let [lo, hi] = file.intra_dc_one_way_us;
        if lo == 0 || lo > hi {
            return Err(ConfigError::BadIntraDc);
        }
        if !(0.0..1.0).contains(&file.jitter) {
            return Err(ConfigError::BadJitter);
        }
        Ok(WanModel { regions: file.regions, rtt_us, intra_dc_one_way_us: (lo, hi), jitter: file.jitter })
    }

    pub fn default_model() -> WanModel {
        WanModel::parse(DEFAULT_WAN_TOML).expect("the bundled WAN model is valid")
    }

    /// The model in `path`, or the bundled one; errors name the file.
    pub fn load(path: Option<&std::path::Path>) -> Result<WanModel, String> {
        let Some(path) = path else { return Ok(WanModel::default_model()) };
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        WanModel::parse(&text).map_err(|e| format!("in {}: {e}", path.display()))
    }
}

/// A data center cut off from all others during `[start_us, end_us)` of
/// simulated time (measured from the start of the run). Links hold their
/// messages until the cut heals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    pub dc: u16,
    pub start_us: u64,
    pub end_us: u64,
}

/// Fault injection on the network: now and then a message takes much
/// longer than its link's latency (a slow server, a retransmission, a GC
/// pause). Links stay FIFO, so a spike also delays what follows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencySpikes {
    /// Chance that one message is delayed.
    pub probability: f64,
    /// The extra delay is drawn uniformly up to this.
    pub max_extra_us: u64,
}

/// The workload of the closed-loop clients.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadConfig {
    /// Reads per update transaction (and per read-only transaction).
    pub reads_per_txn: u32,
    /// Writes per update transaction.
    pub writes_per_txn: u32,
    /// Partitions one transaction touches (capped at the partition count).
    pub partitions_per_txn: u32,
    /// Keys in each partition.
    pub keys_per_partition: u32,
    /// Zipf exponent of key popularity inside a partition (0 = uniform).
    pub zipf: f64,
    /// Share of transactions that only read.
    pub read_only_fraction: f64,
    /// Share of update transactions the client aborts instead of committing.
    pub abort_fraction: f64,
    /// Share of update transactions that write one key twice (the first
    /// value is an intermediate write nobody may read).
    pub rewrite_fraction: f64,
    /// Reads are issued in this many READ calls at most (split at random).
    pub max_read_rounds: u32,
    /// Think time between a client's transactions, in microseconds.
    pub think_time_us: u64,
}

impl Default for WorkloadConfig {
    /// The Wren paper's default transaction (19 reads + 1 write over 4
    /// partitions, zipf 0.99), with a few read-only and aborted ones mixed in
    /// so their paths are exercised too.
    fn default() -> Self {
        WorkloadConfig {
            reads_per_txn: 19,
            writes_per_txn: 1,
            partitions_per_txn: 4,
            keys_per_partition: 1000,
            zipf: 0.99,
            read_only_fraction: 0.1,
            abort_fraction: 0.02,
            rewrite_fraction: 0.02,
            max_read_rounds: 2,
            think_time_us: 0,
        }
    }
}

/// How clients choose keys.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadKind {
    /// Random keys per [`WorkloadConfig`].
    Random(WorkloadConfig),
    /// The atomicity invariant workload: `groups` groups of keys, each group
    /// one key per partition; update transactions overwrite a whole group with
    /// one fresh value, read-only ones read a whole group.
    Groups { groups: u32, read_only_fraction: f64 },
}

/// Everything a simulation run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    pub dcs: u16,
    pub partitions: u32,
    /// Closed-loop clients per partition in every DC; each uses its
    /// partition's replica as coordinator, as in the paper's set-up.
    pub clients_per_partition: u32,
    /// Stop starting transactions once this many have finished...
    pub txns: Option<u64>,
    /// ...or once this much simulated time has passed.
    pub duration_us: Option<u64>,
    pub wan: WanModel,
    /// Physical clock offsets are drawn uniformly from `±max_skew_us / 2`.
    pub max_skew_us: u64,
    /// Clock drift is drawn uniformly from `±max_drift_ppm`.
    pub max_drift_ppm: u32,
    pub cuts: Vec<Cut>,
    pub spikes: Option<LatencySpikes>,
    pub workload: WorkloadKind,
    /// After the workload, how long the cluster may take to settle (apply
    /// and replicate everything) before the run counts as stuck.
    pub settle_limit_us: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            dcs: 3,
            partitions: 4,
            clients_per_partition: 2,
            txns: Some(10_000),
            duration_us: None,
            wan: WanModel::default_model(),
            max_skew_us: 10_000,
            max_drift_ppm: 50,
            cuts: Vec::new(),
            spikes: None,
            workload: WorkloadKind::Random(WorkloadConfig::default()),
            settle_limit_us: 120_000_000,
        }
    }
}

impl SimConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.dcs == 0 || self.partitions == 0 {
            return invalid("a cluster needs at least one DC and one partition");
        }
        if self.dcs as usize > self.wan.regions.len() {
            return Err(ConfigError::TooManyDcs { dcs: self.dcs, regions: self.wan.regions.len() });
        }
        if self.clients_per_partition == 0 {
            return invalid("at least one client per partition is needed");
        }
        if self.txns.is_none() && self.duration_us.is_none() {
            return invalid("give a number of transactions or a duration");
        }
        for cut in &self.cuts {
            if cut.dc >= self.dcs {
                return Err(ConfigError::Invalid(format!("cut of dc{} but the cluster has {} DCs", cut.dc, self.dcs)));
            }
            if cut.start_us >= cut.end_us {
                return invalid("a cut must end after it starts");
            }
        }
        if let Some(s) = self.spikes {
            if !(0.0..=1.0).contains(&s.probability) {
                return invalid("the latency spike probability must be between 0 and 1");
            }
        }
        match &self.workload {
            WorkloadKind::Random(w) => {
                if w.keys_per_partition == 0 {
                    return invalid("keys per partition must be at least 1");
                }
                if w.reads_per_txn == 0 && w.writes_per_txn == 0 {
                    return invalid("a transaction needs at least one read or write");
                }
                if w.partitions_per_txn == 0 {
                    return invalid("a transaction touches at least one partition");
                }
                if !(w.zipf >= 0.0 && w.zipf.is_finite()) {
                    return invalid("the zipf constant must be a finite number >= 0");
                }
                for (name, f) in [
                    ("read-only fraction", w.read_only_fraction),
                    ("abort fraction", w.abort_fraction),
                    ("rewrite fraction", w.rewrite_fraction),
                ] {
                    if !(0.0..=1.0).contains(&f) {
                        return Err(ConfigError::Invalid(format!("the {name} must be between 0 and 1")));
                    }
                }
                if w.max_read_rounds == 0 {
                    return invalid("at least one read round");
                }
            }
            WorkloadKind::Groups { groups, read_only_fraction } => {
                if *groups == 0 || !(0.0..=1.0).contains(read_only_fraction) {
                    return invalid("the groups workload needs at least one group and a fraction in [0, 1]");
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_wan_model_has_the_design_table() {
        let wan = WanModel::default_model();
        assert_eq!(wan.regions.len(), 5);
        assert_eq!(wan.rtt_us[0][1], 70_000);
        assert_eq!(wan.rtt_us[2][0], 75_000);
        assert_eq!(wan.rtt_us[2][4], 270_000);
        assert_eq!(wan.rtt_us[3][4], 145_000);
    }

    #[test]
    fn wan_errors_say_what_is_wrong() {
        let bad = DEFAULT_WAN_TOML.replace("mumbai = { sydney = 145 }", "");
        assert_eq!(WanModel::parse(&bad), Err(ConfigError::MissingRtt("mumbai".into(), "sydney".into())));
        let bad = DEFAULT_WAN_TOML.replace("oregon = { ireland", "atlantis = { ireland");
        assert_eq!(WanModel::parse(&bad), Err(ConfigError::UnknownRegion("atlantis".into())));
        assert!(matches!(WanModel::parse("regions = 3"), Err(ConfigError::WanSyntax(_))));
    }

    #[test]
    fn config_validation_rejects_impossible_runs() {
        let mut c = SimConfig { dcs: 6, ..SimConfig::default() };
        assert_eq!(c.validate(), Err(ConfigError::TooManyDcs { dcs: 6, regions: 5 }));
        c.dcs = 2;
        c.cuts.push(Cut { dc: 2, start_us: 0, end_us: 1 });
        assert!(c.validate().is_err());
        assert!(SimConfig::default().validate().is_ok());
    }
}
