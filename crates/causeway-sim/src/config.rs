//! What a simulation runs: cluster shape, WAN, clocks, faults and workload.

use crate::faults::Faults;
use causeway_protocol::topology::TopologyError;
use causeway_protocol::{DcId, Limits, PartitionId, Topology};
use causeway_workload::{WanError, WanModel, WorkloadConfig, WorkloadKind};
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error(transparent)]
    Wan(#[from] WanError),
    #[error("{dcs} DCs asked for, but the WAN model has only {regions} regions")]
    TooManyDcs { dcs: u16, regions: usize },
    #[error("{0}")]
    Invalid(String),
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

/// Everything a simulation run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    pub dcs: u16,
    pub partitions: u32,
    /// Replicas per partition (R ≤ `dcs`), placed round-robin
    /// ([`Topology::round_robin`]); `None`: every DC holds every partition.
    pub replication: Option<u16>,
    /// Replica groups: for each partition, the DC of each member of its
    /// group, a DC listed twice holding two members (Geo-SDUR's
    /// deployments; [`Topology::with_groups`]). Replaces `replication`.
    pub groups: Option<Vec<Vec<u16>>>,
    /// Under partial replication, `(from, partition, dc)`: DC `from` reads
    /// and prepares `partition` at its replica in `dc` rather than at the
    /// round-robin choice ([`Topology::prefer`]).
    pub preferred: Vec<(u16, u32, u16)>,
    /// Closed-loop clients per partition in every DC that holds it; each
    /// uses its partition's replica as coordinator, as in the papers'
    /// set-ups.
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
    /// Crashes, transport faults below the FIFO links, fault points.
    pub faults: Faults,
    /// The sizes sessions accept, as a server's do.
    pub limits: Limits,
    /// DCs whose clients only read from some time on.
    pub readers: Vec<Readers>,
}

/// From `from_us` on, the clients of DC `dc` only read: once what they
/// wrote has reached the other DCs, a replica of that DC holds nothing the
/// others do not, and its disk may be lost without losing an acknowledged
/// write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readers {
    pub dc: u16,
    pub from_us: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            dcs: 3,
            partitions: 4,
            replication: None,
            groups: None,
            preferred: Vec::new(),
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
            faults: Faults::default(),
            limits: Limits::default(),
            readers: Vec::new(),
        }
    }
}

impl SimConfig {
    /// The workload's transactions must fit the sessions' limits, or every
    /// one would be refused.
    fn check_workload_limits(&self) -> Result<(), ConfigError> {
        let (reads, writes) = match &self.workload {
            // A rewrite writes a key again: the key counts once.
            WorkloadKind::Random(w) => (w.reads_per_txn, w.writes_per_txn),
            WorkloadKind::Groups { .. } => (self.partitions, self.partitions),
            WorkloadKind::Bank { accounts, .. } => (*accounts, 2),
        };
        let l = &self.limits;
        if reads > l.max_keys_per_read {
            let m = format!("{reads} reads per transaction, over the limit of {} keys per read", l.max_keys_per_read);
            return Err(ConfigError::Invalid(m));
        }
        if writes > l.max_writes_per_txn {
            let m = format!("{writes} writes per transaction, over the limit of {}", l.max_writes_per_txn);
            return Err(ConfigError::Invalid(m));
        }
        Ok(())
    }

    /// The cluster's shape: `dcs` × `partitions`, each partition in
    /// `replication` DCs.
    pub fn topology(&self) -> Result<Topology, ConfigError> {
        let invalid = |e: TopologyError| ConfigError::Invalid(e.to_string());
        let mut topology = match &self.groups {
            Some(groups) => {
                let groups = groups.iter().map(|g| g.iter().map(|&dc| DcId(dc)).collect()).collect();
                Topology::with_groups(self.dcs, self.partitions, groups).map_err(invalid)?
            }
            None => Topology::placed(self.dcs, self.partitions, self.replication).map_err(invalid)?,
        };
        for &(from, p, dc) in &self.preferred {
            topology = topology.prefer(DcId(from), PartitionId(p), DcId(dc)).map_err(invalid)?;
        }
        Ok(topology)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.dcs == 0 || self.partitions == 0 {
            return invalid("a cluster needs at least one DC and one partition");
        }
        let topology = self.topology()?;
        if self.dcs as usize > self.wan.regions.len() {
            return Err(ConfigError::TooManyDcs { dcs: self.dcs, regions: self.wan.regions.len() });
        }
        if self.clients_per_partition == 0 {
            return invalid("at least one client per partition is needed");
        }
        if self.txns.is_none() && self.duration_us.is_none() {
            return invalid("give a number of transactions or a duration");
        }
        if let Some(r) = self.readers.iter().find(|r| r.dc >= self.dcs) {
            return Err(ConfigError::Invalid(format!("readers in dc{} but the cluster has {} DCs", r.dc, self.dcs)));
        }
        for cut in &self.cuts {
            if cut.dc >= self.dcs {
                return Err(ConfigError::Invalid(format!("cut of dc{} but the cluster has {} DCs", cut.dc, self.dcs)));
            }
            if cut.start_us >= cut.end_us {
                return invalid("a cut must end after it starts");
            }
        }
        self.check_clock_spread()?;
        if let Some(s) = self.spikes {
            if !(0.0..=1.0).contains(&s.probability) {
                return invalid("the latency spike probability must be between 0 and 1");
            }
        }
        self.workload.validate().map_err(ConfigError::Invalid)?;
        self.check_workload_limits()?;
        self.faults.validate(&topology).map_err(ConfigError::Invalid)?;
        Ok(())
    }

    /// The clocks of a DC must agree within
    /// [`Rhythm::MAX_CLOCK_SPREAD_US`](causeway_protocol::twopc::Rhythm::MAX_CLOCK_SPREAD_US),
    /// as on real clusters. Offsets spread over up to `max_skew_us`, and
    /// drift widens that over the run's duration, when the run has one.
    fn check_clock_spread(&self) -> Result<(), ConfigError> {
        let max = causeway_protocol::twopc::Rhythm::MAX_CLOCK_SPREAD_US;
        let drifted = self.duration_us.unwrap_or(0).saturating_mul(2 * u64::from(self.max_drift_ppm)) / 1_000_000;
        let spread = self.max_skew_us.saturating_add(drifted);
        if spread >= max {
            return Err(ConfigError::Invalid(format!(
                "clocks may spread over {} ms (skew {} ms, drift {} ppm over the run), but the clocks of a DC must \
                 agree within {} ms: half the commit timeout, after which a replica no longer takes a one-partition \
                 commit",
                spread / 1000,
                self.max_skew_us / 1000,
                self.max_drift_ppm,
                max / 1000
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation_rejects_impossible_runs() {
        let mut c = SimConfig { dcs: 6, ..SimConfig::default() };
        assert_eq!(c.validate(), Err(ConfigError::TooManyDcs { dcs: 6, regions: 5 }));
        c.dcs = 2;
        c.cuts.push(Cut { dc: 2, start_us: 0, end_us: 1 });
        assert!(c.validate().is_err());
        assert!(SimConfig::default().validate().is_ok());
    }

    /// Clocks further apart than half the commit timeout are refused,
    /// counting the drift over the run's duration.
    #[test]
    fn clocks_further_apart_than_half_the_commit_timeout_are_refused() {
        let c = SimConfig { max_skew_us: 499_000, max_drift_ppm: 0, ..SimConfig::default() };
        assert!(c.validate().is_ok());
        let c = SimConfig { max_skew_us: 500_000, ..c };
        let Err(ConfigError::Invalid(why)) = c.validate() else { panic!("a 500 ms skew was accepted") };
        assert!(why.contains("within 500 ms"), "{why}");
        // 400 ms of skew and 100 ppm of drift over 1000 s: 600 ms apart.
        let c = SimConfig { max_skew_us: 400_000, max_drift_ppm: 100, duration_us: Some(1_000_000_000), ..c };
        assert!(c.validate().is_err());
        assert!(SimConfig { duration_us: Some(100_000_000), ..c }.validate().is_ok());
    }
}
