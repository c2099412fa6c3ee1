//! Eventual consistency, the baseline of the PrompTCC paper: reads return
//! the newest version a partition has applied, writes apply at once and
//! replicate asynchronously, and concurrent writes converge by
//! last-writer-wins. No snapshot, no stabilization, no waiting — and no
//! promise: its histories are not TCC under concurrency, which is how the
//! tests prove that the checker can see.
//!
//! * [`session`] — the client: reads fan out straight to the partitions of
//!   its DC, one round; writes are buffered until commit.
//! * [`replica`] — a partition: serves reads, assigns commit times as a
//!   coordinator, applies writes, replicates them every Δ_R.
//! * [`commits`] — the commits a coordinator waits on, until every
//!   partition written holds the writes durably.
//! * [`durable`] — what a replica makes durable ([`EcRecord`]), and the
//!   messages that wait for it: a commit is acknowledged only once every
//!   partition it wrote holds it on disk, and a crashed replica is rebuilt
//!   from its records and gets back from its peers what it lost.

pub mod commits;
pub mod durable;
pub mod messages;
pub mod replica;
pub mod session;
#[cfg(test)]
mod tests;

use crate::contract::protocol::RecordOf;
use crate::contract::Guarantee;
use crate::contract::{Protocol, SessionSetup, Tuning};
use crate::ids::ReplicaId;
use crate::session_core::SessionCore;
use crate::topology::Topology;
use std::sync::Arc;

pub use durable::EcRecord;
pub use messages::EcMsg;
pub use replica::{EcReplica, EcTimer};
pub use session::{EcClient, EcSession, EcSessionState};

/// Tunables of EC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EcConfig {
    /// Δ_R: how often a replica sends the writes applied here to the other
    /// DCs, in microseconds.
    pub apply_interval_us: u64,
    /// A coordinator gives up waiting for a partition that does not say it
    /// holds a commit's writes after this long (it crashed, or its answer
    /// did): the client hears that the outcome is unknown.
    pub commit_timeout_us: u64,
    /// How often the heal round runs: writes a partition has not answered
    /// are sent again, replication streams acknowledged and resumed.
    pub heal_interval_us: u64,
    /// Writes kept in memory for the peers, in bytes, before the oldest
    /// are spilled to disk ([`crate::recovery::stream`]).
    pub max_kept_bytes: u64,
    /// Deliberate protocol bugs, for tests that prove the checker can see.
    /// Never set outside tests.
    #[doc(hidden)]
    pub fault: EcFault,
}

impl Default for EcConfig {
    fn default() -> Self {
        EcConfig {
            apply_interval_us: 5_000,
            commit_timeout_us: 1_000_000,
            heal_interval_us: 100_000,
            max_kept_bytes: crate::recovery::DEFAULT_MAX_KEPT_BYTES,
            fault: EcFault::None,
        }
    }
}

/// Bugs that can be switched on to check that tests and checker catch them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EcFault {
    #[default]
    None,
    /// A replicated write does not replace a key whose newest version was
    /// written in this DC, whatever their commit times: last-writer-wins
    /// is broken, and the DCs end apart.
    LocalWins,
}

/// The eventually consistent store.
pub struct Ec;

impl Protocol for Ec {
    const NAME: &'static str = "ec";
    const GUARANTEE: Guarantee = Guarantee::Eventual;
    const READS_NEVER_WAIT: bool = true;
    type Config = EcConfig;
    type Message = EcMsg;
    type Replica = EcReplica;
    type Session = EcSession;

    /// Δ_R applies; EC has no stabilization, so Δ_G is unused.
    fn configure(tuning: &Tuning) -> EcConfig {
        EcConfig {
            apply_interval_us: tuning.apply_interval_us,
            max_kept_bytes: tuning.max_kept_bytes,
            ..EcConfig::default()
        }
    }

    fn validate(topology: &Topology, config: &EcConfig) -> Result<(), String> {
        topology.one_replica_per_dc()?;
        if !topology.is_fully_replicated() {
            return Err("EC needs full replication: every DC must hold every partition (PaRiS runs on partial replication: --protocol paris)".into());
        }
        if config.apply_interval_us == 0 {
            return Err("Δ_R must be positive".into());
        }
        if config.commit_timeout_us == 0 || config.heal_interval_us == 0 {
            return Err("the commit timeout and the heal interval must be positive".into());
        }
        if config.max_kept_bytes == 0 {
            return Err("the bound on writes kept in memory for the peers must be positive".into());
        }
        Ok(())
    }

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &EcConfig) -> EcReplica {
        EcReplica::new(id, topology, config.clone())
    }

    fn recover(id: ReplicaId, topology: Arc<Topology>, config: &EcConfig, records: Vec<RecordOf<Self>>) -> EcReplica {
        replica::recover(Self::replica(id, topology, config), records)
    }

    fn session(setup: SessionSetup, _config: &EcConfig) -> EcSession {
        debug_assert_eq!(setup.id.dc, setup.coordinator.dc, "a session talks to replicas in its own DC");
        SessionCore::new(&setup, EcClient::new(setup.id, setup.coordinator, setup.topology.clone()))
    }
}
