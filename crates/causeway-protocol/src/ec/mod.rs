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

pub mod messages;
pub mod replica;
pub mod session;

use crate::engine::{Protocol, Tuning};
use crate::ids::{ClientId, ReplicaId};
use crate::topology::Topology;
use std::sync::Arc;

pub use messages::EcMsg;
pub use replica::{EcReplica, EcTimer};
pub use session::{EcSession, EcSessionState};

/// Tunables of EC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EcConfig {
    /// Δ_R: how often a replica sends the writes applied here to the other
    /// DCs, in microseconds.
    pub apply_interval_us: u64,
}

impl Default for EcConfig {
    fn default() -> Self {
        EcConfig { apply_interval_us: 5_000 }
    }
}

/// The eventually consistent store.
pub struct Ec;

impl Protocol for Ec {
    const NAME: &'static str = "ec";
    type Config = EcConfig;
    type Message = EcMsg;
    type Replica = EcReplica;
    type Session = EcSession;

    /// Δ_R applies; EC has no stabilization, so Δ_G is unused.
    fn configure(tuning: &Tuning) -> EcConfig {
        EcConfig { apply_interval_us: tuning.apply_interval_us }
    }

    fn validate(topology: &Topology, config: &EcConfig) -> Result<(), String> {
        if !topology.is_fully_replicated() {
            return Err("EC needs full replication: every DC must hold every partition".into());
        }
        if config.apply_interval_us == 0 {
            return Err("Δ_R must be positive".into());
        }
        Ok(())
    }

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &EcConfig) -> EcReplica {
        EcReplica::new(id, topology, config.clone())
    }

    fn session(id: ClientId, coordinator: ReplicaId, topology: Arc<Topology>, _config: &EcConfig) -> EcSession {
        EcSession::new(id, coordinator, topology)
    }
}
