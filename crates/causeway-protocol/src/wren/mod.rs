//! Wren (Spirovska, Didona, Zwaenepoel, DSN 2018): nonblocking reads from a
//! causal snapshot made of the local stable snapshot and a client-side cache.
//!
//! Wren is a protocol of the two-phase-commit family ([`crate::twopc`]): the
//! coordinator, the prepared set, replication in commit order and the
//! session's side are the family's. Its own files hold what makes it Wren,
//! in the order of a transaction's way and the paper's listings:
//!
//! * [`session`] — the client's causal past (Alg. 1): snapshot, last
//!   commit, and the cache of its own writes.
//! * [`snapshot`] — snapshots `(lt, rt)` and the visibility rule (Alg. 3,
//!   8–9).
//! * [`cohort`] — reads from the snapshot, at once (Alg. 3).
//! * [`apply`] — the version vector and the installation of versions
//!   (Alg. 4, 5–28).
//! * [`stabilization`] — BiST over a tree of partitions, and the GC bound
//!   `S_old` it carries (Alg. 4, 29–32; §IV).
//! * [`messages`] — what Wren brings to the family's messages.
//! * [`replica`] — the replica's roles and the dispatch of inputs.

pub mod apply;
pub mod cohort;
pub mod messages;
pub mod replica;
pub mod session;
pub mod snapshot;
pub mod stabilization;
#[cfg(test)]
mod tests;

use crate::contract::protocol::RecordOf;
use crate::contract::Guarantee;
use crate::contract::{Protocol, SessionSetup, Tuning};
use crate::ids::ReplicaId;
use crate::session_core::SessionCore;
use crate::topology::Topology;
use crate::twopc::{CoordinatedClient, Rhythm};
use std::sync::Arc;

pub use messages::WrenMsg;
pub use replica::{WrenReplica, WrenTimer};
pub use session::{WrenPast, WrenSession, WrenSessionState};
pub use snapshot::Snapshot;

/// Tunables of Wren. Intervals are in microseconds of the replica's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrenConfig {
    /// Δ_R; Δ_G, how often the leaves of the BiST tree report their version
    /// vectors, which starts one round of stabilization; the expiry of
    /// silent clients' transactions.
    pub rhythm: Rhythm,
    /// Fan-out of the BiST tree of partitions inside a DC.
    pub tree_fanout: u32,
    /// Deliberate protocol bugs, for tests that prove the checker can see.
    /// Never set outside tests.
    #[doc(hidden)]
    pub fault: Fault,
}

impl Default for WrenConfig {
    fn default() -> Self {
        WrenConfig { rhythm: Rhythm::default(), tree_fanout: 4, fault: Fault::None }
    }
}

/// Bugs that can be switched on to check that tests and checker catch them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    #[default]
    None,
    /// The coordinator hands out its clock as the local snapshot (as Cure
    /// does) but reads do not wait: partitions that have not installed it
    /// return older versions, so multi-partition writes are seen fractured.
    SnapshotFromClock,
    /// The client ignores its cache: it misses its own recent writes.
    SkipClientCache,
    /// Remote versions are visible once `ut ≤ lt`, before their remote
    /// dependencies are known to be installed.
    RemoteVisibleAtLocalTime,
    /// Deletes replicated from other DCs are dropped: the key keeps its
    /// value there.
    DropRemoteDeletes,
    /// A replication stream whose messages were lost on the way (a shed
    /// backlog) is not resumed: the groups lost are never installed.
    IgnorePeerLost,
}

/// The Wren protocol.
pub struct Wren;

impl Protocol for Wren {
    const NAME: &'static str = "wren";
    const GUARANTEE: Guarantee = Guarantee::Causal;
    const READS_NEVER_WAIT: bool = true;
    type Config = WrenConfig;
    type Message = WrenMsg;
    type Replica = WrenReplica;
    type Session = WrenSession;

    fn configure(tuning: &Tuning) -> WrenConfig {
        WrenConfig { rhythm: Rhythm::tuned(tuning), ..WrenConfig::default() }
    }

    fn validate(topology: &Topology, config: &WrenConfig) -> Result<(), String> {
        topology.one_replica_per_dc()?;
        if !topology.is_fully_replicated() {
            return Err(
                "Wren needs full replication: every DC must hold every partition (PaRiS runs on partial replication: --protocol paris)".into()
            );
        }
        config.rhythm.validate()?;
        if config.tree_fanout == 0 {
            return Err("the BiST tree fan-out must be at least 1".into());
        }
        Ok(())
    }

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &WrenConfig) -> WrenReplica {
        WrenReplica::new(id, topology, config.clone())
    }

    fn recover(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &WrenConfig,
        records: Vec<RecordOf<Self>>,
    ) -> WrenReplica {
        crate::twopc::recover(Self::replica(id, topology, config), records)
    }

    fn reseed(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &WrenConfig,
    ) -> Option<(WrenReplica, Vec<RecordOf<Self>>)> {
        crate::twopc::reseeding(Self::replica(id, topology, config))
    }

    fn session(setup: SessionSetup, config: &WrenConfig) -> WrenSession {
        debug_assert_eq!(setup.id.dc, setup.coordinator.dc, "a session talks to a coordinator in its own DC");
        SessionCore::new(&setup, CoordinatedClient::new(setup.coordinator, WrenPast::new(config.fault)))
    }
}
