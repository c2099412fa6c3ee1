//! A protocol of the engine: its types, its promise, its construction.

use super::guarantee::Guarantee;
use super::limits::Limits;
use super::message::Message;
use super::replica::Replica;
use super::session::Session;
use crate::ids::{ClientId, ReplicaId};
use crate::topology::Topology;
use std::fmt::Debug;
use std::sync::Arc;

/// Settings every protocol understands, so drivers can configure whichever
/// protocol a user picked from one set of flags or config keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Δ_R: how often replicas apply committed transactions and replicate
    /// them (or send a heartbeat), in microseconds.
    pub apply_interval_us: u64,
    /// Δ_G: how often stable times are gossiped inside a DC, in microseconds.
    pub stabilization_interval_us: u64,
    /// Of the groups a replica keeps for its peers in the other DCs until
    /// they acknowledge them, how many bytes stay in memory before the
    /// oldest are spilled to disk ([`crate::recovery::stream`]).
    pub max_kept_bytes: u64,
    /// The protocols that certify transactions over an ordered log per
    /// partition (Geo-SDUR); the others ignore it.
    pub ordered: OrderedTuning,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            apply_interval_us: 5_000,
            stabilization_interval_us: 5_000,
            max_kept_bytes: super::spill::DEFAULT_MAX_KEPT_BYTES,
            ordered: OrderedTuning::default(),
        }
    }
}

/// Settings of the protocols whose partitions are replica groups agreeing
/// on an ordered log (Geo-SDUR): the log's rhythm, and the techniques that
/// cut what global transactions cost local ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderedTuning {
    /// How often a group's leader reaches its followers, in microseconds.
    pub heartbeat_us: u64,
    /// How long followers wait for a leader before they elect another, in
    /// microseconds (spread over up to twice that).
    pub election_us: u64,
    /// How many log positions a local transaction may be applied ahead of
    /// a global still pending (0: in log order).
    pub reorder_threshold: u64,
    /// How global transactions' parts are held back at the partitions that
    /// would deliver them first.
    pub delaying: DelayTuning,
    /// Certify read sets as bloom filters of this many bits (with a history
    /// of the last `bloom_history` entries) instead of their keys.
    pub bloom_bits: Option<u32>,
    pub bloom_history: u32,
    /// Count the aborts only the filters cause (certifies exactly too).
    pub bloom_audit: bool,
    /// How far apart the cluster's clocks may be, in microseconds.
    pub clock_allowance_us: u64,
}

impl Default for OrderedTuning {
    fn default() -> Self {
        OrderedTuning {
            heartbeat_us: 50_000,
            election_us: 1_000_000,
            reorder_threshold: 0,
            delaying: DelayTuning::Off,
            bloom_bits: None,
            bloom_history: 10_000,
            bloom_audit: false,
            clock_allowance_us: 500_000,
        }
    }
}

/// How global transactions are delayed (Geo-SDUR's *delaying*).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DelayTuning {
    #[default]
    Off,
    /// The parts for the partitions near the client leave this late.
    Fixed { delay_us: u64 },
    /// From the round-trip times between DCs (microseconds, `[from][to]`):
    /// each part leaves as late as its partition would deliver it before
    /// the farthest one.
    FromRtt { rtt_us: Vec<Vec<u64>> },
}

/// Where a new session lives: its id, the replica of its DC it talks to
/// first (its coordinator, for the protocols that have one), the shape of
/// the cluster, and the sizes it accepts.
#[derive(Clone, Debug)]
pub struct SessionSetup {
    pub id: ClientId,
    pub coordinator: ReplicaId,
    pub topology: Arc<Topology>,
    pub limits: Limits,
}

/// The records a protocol's replica makes durable.
pub type RecordOf<P> = <<P as Protocol>::Replica as Replica>::Record;

/// A protocol of the engine: its replica, its session and its messages.
pub trait Protocol: 'static {
    const NAME: &'static str;
    /// What every history of this protocol must uphold: drivers and tests
    /// judge its histories against it, and know no protocol by name.
    const GUARANTEE: Guarantee;
    /// Whether a replica answers every read in the step that receives it
    /// (Wren's nonblocking reads): drivers count a read that waited as a
    /// failure of such a protocol.
    const READS_NEVER_WAIT: bool;
    /// Whether each partition is a replica group whose sessions go to
    /// another member when theirs is down (Geo-SDUR): a member unreachable
    /// is no partition unavailable, and drivers do not refuse requests for
    /// it.
    const REPLICA_GROUPS: bool = false;
    type Config: Clone + Debug + Default + Send + Sync + 'static;
    type Message: Message;
    type Replica: Replica<Message = Self::Message> + Send + 'static;
    type Session: Session<Message = Self::Message> + Send + 'static;

    /// This protocol's configuration with the shared settings applied.
    fn configure(tuning: &Tuning) -> Self::Config;

    /// Says why this protocol cannot run on this topology, if it cannot.
    fn validate(topology: &Topology, config: &Self::Config) -> Result<(), String>;

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &Self::Config) -> Self::Replica;

    /// A replica rebuilt after a crash from the records it had made
    /// durable, in the order it persisted them (the synced ones only). A
    /// protocol that persists nothing comes back empty — the default, until
    /// a protocol keeps records and says how they rebuild it.
    fn recover(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &Self::Config,
        records: Vec<RecordOf<Self>>,
    ) -> Self::Replica {
        let _ = records;
        Self::replica(id, topology, config)
    }

    /// A replica that lost its durable state (its disk is gone), to be
    /// rebuilt from the replicas of its partition in the other DCs
    /// ([`crate::recovery::seed`]), with the records to make durable before
    /// it starts: they say it is re-seeding, so that a restart before it is
    /// done (through [`Protocol::recover`]) asks again. `None` if this
    /// protocol cannot re-seed a replica — the default — or the cluster has
    /// no other DC to re-seed from.
    fn reseed(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &Self::Config,
    ) -> Option<(Self::Replica, Vec<RecordOf<Self>>)> {
        let _ = (id, topology, config);
        None
    }

    /// A session of a client of `setup.coordinator`'s DC.
    fn session(setup: SessionSetup, config: &Self::Config) -> Self::Session;
}
