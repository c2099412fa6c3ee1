//! PaRiS (Spirovska, Didona, Zwaenepoel, ICDCS 2019): Transactional Causal
//! Consistency under **partial replication** — each partition lives in R of
//! the M DCs — with reads that never block, from the Universal Stable Time
//! (UST: one timestamp, a snapshot every replica in every DC has
//! installed) and a client-side cache of the client's own writes the UST
//! does not include yet.
//!
//! PaRiS is a protocol of the two-phase-commit family ([`crate::twopc`]):
//! the coordinator (which sends reads and prepares of a partition its DC
//! does not hold to the DC's preferred replica elsewhere,
//! [`crate::topology::Topology::serving_dc`]), the prepared set,
//! replication in commit order to the partition's other replicas, and the
//! session's side are the family's. Its own files hold what makes it PaRiS,
//! in the order of the paper's listings:
//!
//! * [`session`] — the client's causal past (Alg. 1): `ust_c`, `hwt_c`,
//!   and the cache `WC_c`.
//! * [`snapshot`] — one timestamp, and the visibility rule (Alg. 3, 5).
//! * [`cohort`] — reads from the snapshot, at once (Alg. 3).
//! * [`stabilization`] — UST over each DC's tree and between the DCs'
//!   roots, and the GC bound `S_old` it carries (Alg. 4, 38–43).
//! * [`messages`] — what PaRiS brings to the family's messages.
//! * [`replica`] — the version vector (R entries), the apply loop and the
//!   replica's roles (Alg. 4).
//!
//! BPR, the paper's blocking baseline, is the same code with its snapshot
//! and read rule ([`ParisOn`]); its parked reads are the family's
//! ([`crate::twopc::ParkedReads`], as Cure's).
//!
//! Where this differs from the listings: proposals come from the family's
//! prepare (above the snapshot and `hwt`, as Alg. 3 line 13 asks), and a
//! transaction that writes one partition commits in one phase, as the
//! family's do; the GST is aggregated as the minimum of every entry of the
//! DC's version vectors rather than entry by entry (the UST, their minimum
//! over all DCs, is the same); a replica's DC is fixed per partition, not
//! chosen per request.

pub mod cohort;
pub mod messages;
pub mod replica;
pub mod session;
pub mod snapshot;
pub mod stabilization;

use crate::contract::protocol::RecordOf;
use crate::contract::Guarantee;
use crate::contract::{Protocol, SessionSetup, Tuning};
use crate::ids::ReplicaId;
use crate::session_core::SessionCore;
use crate::topology::Topology;
use crate::twopc::{CoordinatedClient, Rhythm};
use std::sync::Arc;

pub use messages::ParisMsg;
pub use replica::{ParisReplica, ParisTimer};
pub use session::{ParisPast, ParisSession, ParisSessionState};

/// Tunables of PaRiS. Intervals are in microseconds of the replica's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParisConfig {
    /// Δ_R; Δ_G (Δ_U is the same: the roots compute the UST as their DCs'
    /// reports arrive); the expiry of silent clients' transactions.
    pub rhythm: Rhythm,
    /// Fan-out of the tree of partitions inside a DC.
    pub tree_fanout: u32,
    /// Deliberate protocol bugs, for tests that prove the checker can see.
    /// Never set outside tests.
    #[doc(hidden)]
    pub fault: Fault,
}

impl Default for ParisConfig {
    fn default() -> Self {
        ParisConfig { rhythm: Rhythm::default(), tree_fanout: 4, fault: Fault::None }
    }
}

/// Bugs that can be switched on to check that tests and checker catch them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    #[default]
    None,
    /// Replicas report only their own version clock, not what they have
    /// received from the partition's other replicas: the UST passes
    /// transactions still on their way to some replicas.
    LocalEntriesOnly,
    /// The coordinator hands out its clock as the snapshot.
    SnapshotFromClock,
    /// The client ignores its cache: it misses its own recent writes.
    SkipClientCache,
    /// BPR: a replica serves a read once its own commits pass the snapshot,
    /// without waiting for what the partition's other replicas send.
    BprOwnClockOnly,
}

/// PaRiS, or with `BLOCKING` its baseline BPR (the paper's §V-A): the same
/// code with another snapshot and read rule — a transaction's snapshot is
/// its coordinator's clock (at least the client's last snapshot and
/// commit), fresher than the UST, and a read at a replica waits until that
/// replica has installed every local and remote transaction up to it. BPR
/// has no client cache: its snapshots include the client's own writes.
pub struct ParisOn<const BLOCKING: bool>;

/// PaRiS: nonblocking reads from the UST.
pub type Paris = ParisOn<false>;

/// BPR: blocking reads from the coordinator's clock.
pub type Bpr = ParisOn<true>;

impl<const BLOCKING: bool> Protocol for ParisOn<BLOCKING> {
    const NAME: &'static str = if BLOCKING { "bpr" } else { "paris" };
    const GUARANTEE: Guarantee = Guarantee::Causal;
    const READS_NEVER_WAIT: bool = !BLOCKING;
    type Config = ParisConfig;
    type Message = ParisMsg;
    type Replica = ParisReplica;
    type Session = ParisSession;

    fn configure(tuning: &Tuning) -> ParisConfig {
        ParisConfig { rhythm: Rhythm::tuned(tuning), ..ParisConfig::default() }
    }

    fn validate(topology: &Topology, config: &ParisConfig) -> Result<(), String> {
        topology.one_replica_per_dc()?;
        if let Some(dc) = topology.empty_dcs().first() {
            return Err(format!(
                "{dc} holds no partition: its clients would have no coordinator (raise the replication factor or the number of partitions)"
            ));
        }
        config.rhythm.validate()?;
        if config.tree_fanout == 0 {
            return Err("the UST tree fan-out must be at least 1".into());
        }
        Ok(())
    }

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &ParisConfig) -> ParisReplica {
        ParisReplica::new(id, topology, config.clone(), BLOCKING)
    }

    fn recover(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &ParisConfig,
        records: Vec<RecordOf<Self>>,
    ) -> ParisReplica {
        crate::twopc::recover(Self::replica(id, topology, config), records)
    }

    /// Not yet: a replica that lost its disk would take decisions only
    /// from its own DC's siblings, while under partial replication its
    /// coordinators and cohorts live in other DCs too.
    fn reseed(
        _id: ReplicaId,
        _topology: Arc<Topology>,
        _config: &ParisConfig,
    ) -> Option<(ParisReplica, Vec<RecordOf<Self>>)> {
        None
    }

    fn session(setup: SessionSetup, config: &ParisConfig) -> ParisSession {
        debug_assert_eq!(setup.id.dc, setup.coordinator.dc, "a session talks to a coordinator in its own DC");
        SessionCore::new(&setup, CoordinatedClient::new(setup.coordinator, ParisPast::new(config.fault, BLOCKING)))
    }
}
