//! The faults the simulator can inject beyond slow links and DC cuts: replica
//! crashes and restarts with a disk that loses what it had not synced, a
//! transport below the FIFO links whose packets are duplicated, reordered
//! and lost (and resent), and the protocols' fault points (buggify). Every
//! one of them is drawn from the run's seed, so a failure replays.

use causeway_protocol::{DcId, PartitionId, ReplicaId, Topology};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What a crash takes down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashTarget {
    /// One replica: partition `partition` of DC `dc` (its first member there).
    Replica { dc: u16, partition: u32 },
    /// One member of a partition's group (a DC may hold several).
    Member(ReplicaId),
    /// Whichever member of the partition's group leads its log when the
    /// crash comes (protocols of replica groups; if none leads then, its
    /// first member).
    Leader { partition: u32 },
    /// Every replica of a DC at once.
    Dc(u16),
}

/// A crash at `at_us` of simulated time (from the start of the run), and a
/// restart `down_us` later. The replica loses its memory and the records it
/// had not synced, and comes back as `comes_back` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crash {
    pub target: CrashTarget,
    pub at_us: u64,
    pub down_us: u64,
    pub comes_back: ComesBack,
}

/// How a crashed replica comes back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ComesBack {
    /// From its disk, through the protocol's `recover`.
    #[default]
    FromItsDisk,
    /// Its disk is lost: it comes back through the protocol's `reseed`,
    /// rebuilt from its partition's replicas in the other DCs.
    Reseeded,
    /// Its disk is lost and it starts empty, as a new replica would: what
    /// it held is gone. For the tests that show why `Reseeded` exists.
    Empty,
}

/// Faults of the network below the FIFO links the protocols see, which the
/// transport's sequence numbers, resends and deduplication hide: a packet
/// may arrive twice, overtake the one before it, or be lost and resent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransportFaults {
    /// Chance that a packet arrives twice.
    pub duplicate: f64,
    /// Chance that a packet is held up long enough for later ones to overtake it.
    pub reorder: f64,
    /// Chance that a packet is lost; the sender resends it after `resend_us`.
    pub loss: f64,
    /// How long a sender waits for an acknowledgement before resending.
    pub resend_us: u64,
}

impl Default for TransportFaults {
    fn default() -> Self {
        TransportFaults { duplicate: 0.02, reorder: 0.05, loss: 0.01, resend_us: 2_000 }
    }
}

/// Backlogs shed, as the runtime sheds what waits for a peer past its
/// bound (`max_backlog_mb`): a link between two replicas drops everything
/// on its way and marks the gap, which its receiver learns of
/// (`Replica::on_peer_lost`) before anything sent after it. Drawn from the
/// fault seed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shedding {
    /// Chance that a link between replicas of two DCs, holding messages a
    /// cut held back, sheds them as the cut heals (the backlog a DC cut
    /// piles up is what the bound is for).
    pub at_heal: f64,
    /// A link between two replicas that holds messages sheds them this
    /// often on average (a slow or unreachable node inside a DC too); 0:
    /// never.
    pub mean_interval_us: u64,
}

impl Default for Shedding {
    fn default() -> Self {
        Shedding { at_heal: 0.5, mean_interval_us: 200_000 }
    }
}

/// How long a replica's disk takes to make appended records durable, drawn
/// uniformly per sync (zero: records are durable at the end of the step that
/// persisted them), and how often a replica's log is replaced by a
/// checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskModel {
    pub sync_us: (u64, u64),
    /// A replica checkpoints once this many records were appended since its
    /// last checkpoint, plus an offset of its own below this (so replicas
    /// do not checkpoint in step); 0: never. Only a run with crashes
    /// checkpoints (nothing else reads a checkpoint, and taking one copies
    /// the replica's store). Small by default so that crashes often restart
    /// a replica from a checkpoint and its tail — the runtime checkpoints
    /// by bytes, rarely.
    pub checkpoint_every: usize,
}

impl Default for DiskModel {
    fn default() -> Self {
        DiskModel { sync_us: (0, 0), checkpoint_every: 64 }
    }
}

/// Every fault beyond the network's latency and cuts; none by default.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    pub crashes: Vec<Crash>,
    pub transport: Option<TransportFaults>,
    /// Backlogs shed between replicas.
    pub shedding: Option<Shedding>,
    /// Arm the protocols' fault points.
    pub buggify: bool,
    pub disk: DiskModel,
    /// With crashes, how long a client waits for a transaction to finish
    /// before it gives up on it (its coordinator may have died with its
    /// request) and goes on with a new session.
    pub client_timeout_us: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            crashes: Vec::new(),
            transport: None,
            shedding: None,
            buggify: false,
            disk: DiskModel::default(),
            client_timeout_us: 2_000_000,
        }
    }
}

impl Faults {
    /// Whether a client may wait for an answer that never comes (its
    /// coordinator crashed with its request): clients then give a
    /// transaction up after a timeout, as real clients do.
    pub fn can_lose_requests(&self) -> bool {
        !self.crashes.is_empty() || self.shedding.is_some()
    }

    /// Says what is wrong, if anything, for a cluster of `topology`.
    pub fn validate(&self, topology: &Topology) -> Result<(), String> {
        let (dcs, partitions) = (topology.dc_count(), topology.partition_count());
        for c in &self.crashes {
            match c.target {
                CrashTarget::Dc(dc) | CrashTarget::Replica { dc, .. } if dc >= dcs => {
                    return Err(format!("a crash of dc{dc}, but the cluster has {dcs} DCs"));
                }
                CrashTarget::Replica { partition, .. } if partition >= partitions => {
                    return Err(format!("a crash of partition {partition}, but the cluster has {partitions}"));
                }
                CrashTarget::Replica { dc, partition } if !topology.holds(DcId(dc), PartitionId(partition)) => {
                    return Err(format!("a crash of partition {partition} in dc{dc}, which does not hold it"));
                }
                CrashTarget::Member(id)
                    if id.partition.0 >= partitions || !topology.members_of(id.partition).contains(&id) =>
                {
                    return Err(format!("a crash of {id}, which the cluster does not have"));
                }
                CrashTarget::Leader { partition } if partition >= partitions => {
                    return Err(format!("a crash of partition {partition}'s leader, but the cluster has {partitions}"));
                }
                _ => {}
            }
            if c.down_us == 0 {
                return Err("a crashed replica must stay down for some time".into());
            }
        }
        if let Some(t) = self.transport {
            for (what, p) in [("duplicate", t.duplicate), ("reorder", t.reorder), ("loss", t.loss)] {
                if !(0.0..1.0).contains(&p) {
                    return Err(format!("the {what} probability must be in [0, 1)"));
                }
            }
            if t.resend_us == 0 {
                return Err("the transport's resend interval must be positive".into());
            }
        }
        if let Some(s) = self.shedding {
            if !(0.0..=1.0).contains(&s.at_heal) {
                return Err("the chance of shedding at a heal must be in [0, 1]".into());
            }
        }
        if self.disk.sync_us.0 > self.disk.sync_us.1 {
            return Err("the disk's sync time must be a range [min, max]".into());
        }
        Ok(())
    }
}

/// `count` crashes drawn from `seed`: each of a random replica of
/// `topology` (a whole DC one time in five), starting in the first
/// `window_us` of the run, down for 5 to 200 ms.
pub fn random_crashes(seed: u64, topology: &Topology, count: u32, window_us: u64) -> Vec<Crash> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc7a5_4ed0_0d1e);
    (0..count)
        .map(|_| {
            let dc = rng.random_range(0..topology.dc_count());
            let held = topology.replicas_in(DcId(dc));
            let target = if rng.random_bool(0.2) || held.is_empty() {
                CrashTarget::Dc(dc)
            } else {
                match held[rng.random_range(0..held.len())] {
                    id if id.member == 0 => CrashTarget::Replica { dc, partition: id.partition.0 },
                    id => CrashTarget::Member(id),
                }
            };
            let (at_us, down_us) = (rng.random_range(0..window_us.max(1)), rng.random_range(5_000..200_000));
            Crash { target, at_us, down_us, comes_back: ComesBack::FromItsDisk }
        })
        .collect()
}

/// `count` crashes drawn from `seed` of the member leading a random
/// partition's log at the time (protocols of replica groups), starting in
/// the first `window_us` of the run, down for 5 to 400 ms.
pub fn random_leader_crashes(seed: u64, topology: &Topology, count: u32, window_us: u64) -> Vec<Crash> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1ead_e7c7_a5ed);
    (0..count)
        .map(|_| {
            let partition = rng.random_range(0..topology.partition_count());
            let (at_us, down_us) = (rng.random_range(0..window_us.max(1)), rng.random_range(5_000..400_000));
            Crash { target: CrashTarget::Leader { partition }, at_us, down_us, comes_back: ComesBack::FromItsDisk }
        })
        .collect()
}
