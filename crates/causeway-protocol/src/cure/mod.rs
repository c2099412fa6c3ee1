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
//! Cure is a protocol of the two-phase-commit family ([`crate::twopc`]):
//! coordinator, prepared set, replication in commit order and the session's
//! side are the family's. Its own files, in the order of a transaction's way:
//!
//! * [`session`] — the client's causal past: its last snapshot vector.
//! * [`vector`] — vector timestamps and the visibility rule.
//! * [`cohort`] — read slices, parked until their snapshot is installed.
//! * [`stabilization`] — all-to-all exchange of version vectors inside a DC
//!   (Δ_G): the GSV, and the oldest snapshot in use for garbage collection.
//! * [`messages`] — what Cure brings to the family's messages.
//! * [`replica`] — the replica's roles and the dispatch of inputs.

pub mod cohort;
pub mod messages;
pub mod replica;
pub mod session;
pub mod stabilization;
#[cfg(test)]
mod tests;
pub mod vector;

use crate::contract::protocol::RecordOf;
use crate::contract::Guarantee;
use crate::contract::{Protocol, SessionSetup, Tuning};
use crate::ids::ReplicaId;
use crate::session_core::SessionCore;
use crate::topology::Topology;
use crate::twopc::{CoordinatedClient, Rhythm};
use std::sync::Arc;

pub use messages::CureMsg;
pub use replica::{CureReplica, CureTimer, WakeReads};
pub use session::{CurePast, CureSession, CureSessionState};
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
    /// Δ_R, how often a replica replicates the transactions committed here
    /// (or sends a heartbeat); Δ_G, how often each partition sends its
    /// version vector to the other partitions of its DC; the expiry of
    /// silent clients' transactions.
    pub rhythm: Rhythm,
    /// Deliberate protocol bugs, for tests that prove the checker can see.
    /// Never set outside tests.
    #[doc(hidden)]
    pub fault: CureFault,
}

impl Default for CureConfig {
    fn default() -> Self {
        CureConfig { rhythm: Rhythm::default(), fault: CureFault::None }
    }
}

/// Bugs that can be switched on to check that tests and checker catch them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CureFault {
    #[default]
    None,
    /// A partition serves a read slice at once, whether or not it has
    /// installed the snapshot: Cure's clock condition and H-Cure's pending
    /// transactions are ignored, so a commit can still land inside a
    /// snapshot that was read.
    ServeAhead,
}

fn validate(topology: &Topology, config: &CureConfig) -> Result<(), String> {
    topology.one_replica_per_dc()?;
    if !topology.is_fully_replicated() {
        return Err("Cure needs full replication: every DC must hold every partition (PaRiS runs on partial replication: --protocol paris)".into());
    }
    config.rhythm.validate()
}

/// The Cure family: `HYBRID` picks the clock rule (the only difference).
pub struct CureOn<const HYBRID: bool>;

/// Cure, on physical clocks.
pub type Cure = CureOn<false>;

/// H-Cure: Cure on hybrid logical clocks.
pub type HCure = CureOn<true>;

impl<const HYBRID: bool> Protocol for CureOn<HYBRID> {
    const NAME: &'static str = if HYBRID { "h-cure" } else { "cure" };
    const GUARANTEE: Guarantee = Guarantee::Causal;
    const READS_NEVER_WAIT: bool = false;
    type Config = CureConfig;
    type Message = CureMsg;
    type Replica = CureReplica;
    type Session = CureSession;

    fn configure(tuning: &Tuning) -> CureConfig {
        CureConfig { rhythm: Rhythm::tuned(tuning), ..CureConfig::default() }
    }

    fn validate(topology: &Topology, config: &CureConfig) -> Result<(), String> {
        validate(topology, config)
    }

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &CureConfig) -> CureReplica {
        let mode = if HYBRID { ClockMode::Hybrid } else { ClockMode::Physical };
        CureReplica::new(id, topology, config.clone(), mode)
    }

    fn recover(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &CureConfig,
        records: Vec<RecordOf<Self>>,
    ) -> CureReplica {
        crate::twopc::recover(Self::replica(id, topology, config), records)
    }

    fn reseed(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &CureConfig,
    ) -> Option<(CureReplica, Vec<RecordOf<Self>>)> {
        crate::twopc::reseeding(Self::replica(id, topology, config))
    }

    fn session(setup: SessionSetup, _config: &CureConfig) -> CureSession {
        debug_assert_eq!(setup.id.dc, setup.coordinator.dc, "a session talks to a coordinator in its own DC");
        let past = CurePast::new(setup.coordinator.dc, setup.topology.dc_count());
        SessionCore::new(&setup, CoordinatedClient::new(setup.coordinator, past))
    }
}
