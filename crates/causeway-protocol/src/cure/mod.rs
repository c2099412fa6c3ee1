//! Cure (Akkoorath et al., ICDCS 2016) and H-Cure, the baselines of the Wren
//! paper (§III-A, §V): transactional causal consistency with one timestamp
//! per DC in snapshots and versions, and reads that may block.
//!
//! A transaction's snapshot is a vector with one entry per DC. Its local
//! entry is fresh — the coordinator's clock, or the client's last snapshot if
//! that is newer — so a partition may be asked to read a snapshot it has not
//! installed yet; the read then waits until the partition's clock has passed
//! the entry and no transaction prepared at or below it is still pending.
//! Remote entries come from the DC's global stable vector (GSV), which every
//! partition has installed by construction.
//!
//! H-Cure is the same protocol on hybrid logical clocks: a partition whose
//! clock is behind the snapshot moves its HLC up instead of waiting for the
//! physical clock; it still waits for pending transactions. The two share
//! every line of code but the clock rule ([`ClockMode`]).
//!
//! The modules follow a transaction's way:
//!
//! * [`session`] — the client: snapshot vector, write set, read set.
//! * [`coordinator`] — snapshot assignment, read fan-out, 2PC.
//! * [`cohort`] — read slices (parked until their snapshot is installed),
//!   prepare, commit.
//! * [`apply`] — replication in commit order and heartbeats (Δ_R).
//! * [`stabilization`] — all-to-all exchange of version vectors inside a DC
//!   (Δ_G): the GSV, and the oldest snapshot in use for garbage collection.
//! * [`vector`] — vector timestamps and the visibility rule.
//! * [`replica`] — the replica state and the dispatch of inputs.

pub mod apply;
pub mod cohort;
pub mod coordinator;
pub mod messages;
pub mod replica;
pub mod session;
pub mod stabilization;
#[cfg(test)]
mod tests;
pub mod vector;

use crate::engine::{Protocol, Tuning};
use crate::ids::{ClientId, ReplicaId};
use crate::topology::Topology;
use std::sync::Arc;

pub use messages::CureMsg;
pub use replica::{CureReplica, CureTimer};
pub use session::{CureSession, CureSessionState};
pub use vector::VectorTs;

/// Which clock bounds the snapshots a partition may serve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockMode {
    /// Cure: physical clocks. A read whose snapshot lies ahead of the
    /// partition's physical clock waits for the clock to catch up.
    #[default]
    Physical,
    /// H-Cure: hybrid logical clocks. The partition's HLC jumps to the
    /// snapshot instead; only pending transactions make a read wait.
    Hybrid,
}

/// Tunables of Cure and H-Cure. Intervals are in microseconds of the
/// replica's clock.
///
/// The clock rule is not a setting: it is what tells Cure and H-Cure apart,
/// so the protocol type ([`Cure`] or [`HCure`]) fixes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CureConfig {
    /// Δ_R: how often a replica replicates the transactions committed here
    /// (or sends a heartbeat).
    pub apply_interval_us: u64,
    /// Δ_G: how often each partition sends its version vector to the other
    /// partitions of its DC.
    pub stabilization_interval_us: u64,
    /// A coordinator forgets a transaction whose client has been silent this
    /// long, so that a vanished client cannot hold back garbage collection.
    pub tx_context_timeout_us: u64,
}

impl Default for CureConfig {
    fn default() -> Self {
        CureConfig { apply_interval_us: 5_000, stabilization_interval_us: 5_000, tx_context_timeout_us: 10_000_000 }
    }
}

impl CureConfig {
    fn tuned(tuning: &Tuning) -> Self {
        CureConfig {
            apply_interval_us: tuning.apply_interval_us,
            stabilization_interval_us: tuning.stabilization_interval_us,
            ..CureConfig::default()
        }
    }
}

fn validate(topology: &Topology, config: &CureConfig) -> Result<(), String> {
    if !topology.is_fully_replicated() {
        return Err("Cure needs full replication: every DC must hold every partition".into());
    }
    if config.apply_interval_us == 0 || config.stabilization_interval_us == 0 {
        return Err("Δ_R and Δ_G must be positive".into());
    }
    Ok(())
}

/// The Cure family: `HYBRID` picks the clock rule (the only difference).
pub struct CureOn<const HYBRID: bool>;

/// Cure, on physical clocks.
pub type Cure = CureOn<false>;

/// H-Cure: Cure on hybrid logical clocks.
pub type HCure = CureOn<true>;

impl<const HYBRID: bool> Protocol for CureOn<HYBRID> {
    const NAME: &'static str = if HYBRID { "h-cure" } else { "cure" };
    type Config = CureConfig;
    type Message = CureMsg;
    type Replica = CureReplica;
    type Session = CureSession;

    fn configure(tuning: &Tuning) -> CureConfig {
        CureConfig::tuned(tuning)
    }

    fn validate(topology: &Topology, config: &CureConfig) -> Result<(), String> {
        validate(topology, config)
    }

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &CureConfig) -> CureReplica {
        let mode = if HYBRID { ClockMode::Hybrid } else { ClockMode::Physical };
        CureReplica::new(id, topology, config.clone(), mode)
    }

    fn session(id: ClientId, coordinator: ReplicaId, topology: Arc<Topology>, _config: &CureConfig) -> CureSession {
        CureSession::new(id, coordinator, topology.dc_count())
    }
}
