//! Eiger's read-only and write-only transactions (Lloyd, Freedman,
//! Kaminsky, Andersen: "Stronger Semantics for Low-Latency Geo-Replicated
//! Storage", NSDI 2013, §4–5), inside one DC, as the PrompTCC paper runs it
//! against PrompTCC: the optimistic baseline, whose reads take one round
//! when what they find is of one time, and up to three when it is not.
//!
//! * A first round reads the newest version of every key, each with its
//!   validity interval: from its commit timestamp (EVT) to the latest time
//!   the partition vouches for (LVT: its Lamport clock, or below the next
//!   version, or below a transaction still open there that may commit one).
//! * The client picks the effective time: the largest EVT (and its own
//!   causal past). Every value whose interval holds it is read; the others
//!   are read again at it in a second round (`read_by_time`).
//! * A partition answering at a time may hold transactions still open that
//!   could commit a version at or before it: the client asks their
//!   coordinators how they ended in a third round, and takes their value
//!   if they committed at or before the effective time.
//! * Write-only transactions are [`crate::write_only`]'s: the client picks
//!   the coordinator among the partitions written (Eiger's 2PC-PCI, whose
//!   cohorts vote to the coordinator, not the client), the commit
//!   timestamp is the largest number a participant gave (Lamport: above the
//!   writer's clock), and a version is installed once its commit is
//!   durable, in any order.
//!
//! Where this differs from the paper, and why:
//!
//! * Clocks are Lamport clocks kept as hybrid clocks: they also follow the
//!   physical clock, so that the timestamps of different partitions stay
//!   close, a timestamp from the network can be bounded against the clock
//!   (more than a minute ahead is refused), and the transaction timeout of
//!   garbage collection can be read in them.
//! * The coordinator answers a third-round question once the transaction
//!   is decided — at once if it is (the usual case: the cohort's commit is
//!   in flight) — rather than the cohort asking it; the round is the
//!   client's, so that it is counted where every other round is.
//! * A version whose commit is decided but not yet durable at the partition
//!   read is returned in a second round: every vote is in, so the outcome
//!   cannot change.
//! * When the first round is of one time the effective time is the
//!   earliest LVT, not the largest EVT: the values are the same, and the
//!   later reads of an interactive transaction (read at that time) see a
//!   fresher snapshot, whose versions garbage collection keeps.
//! * Dependencies are sent with writes (the client's nearest ones, at most
//!   [`MAX_DEPS`], the oldest dropped beyond) and kept with the prepare, as
//!   Eiger does, but nobody checks them: inside one DC a version is
//!   installed only where it is written, and replication to other DCs —
//!   where they would be checked — is not run. A multi-DC cluster is
//!   refused.
//! * Clients wait for every participant's commit, as PrompTCC's do (the
//!   write-only transactions are shared), not only the coordinator's.
//! * Garbage collection is PrompTCC's §VII (Eiger's own): versions are kept
//!   for the transaction timeout after a newer one is installed, and a
//!   transaction that reads past it is aborted and started again.
//! * Without replica groups, a coordinator that falls silent is replaced by
//!   the termination of [`crate::write_only`]. A partition forgets a commit
//!   it made twenty resolve intervals (10 s) after it, by time alone: it
//!   has no stable time to tell it that every participant has ended it. A
//!   coordinator down longer than that, holding such a commit prepared but
//!   not yet recorded, could see a termination abort it at its restart.

pub mod durable;
pub mod messages;
pub mod replica;
pub mod session;
#[cfg(test)]
mod tests;

use crate::contract::protocol::RecordOf;
use crate::contract::{Guarantee, Protocol, SessionSetup, Tuning};
use crate::ids::ReplicaId;
use crate::session_core::SessionCore;
use crate::topology::Topology;
use std::sync::Arc;

pub use durable::EigerRecord;
pub use messages::{EigerDeps, EigerMsg};
pub use replica::{EigerReplica, EigerTimer};
pub use session::{EigerClient, EigerSession, EigerSessionState};

/// The most dependencies a write carries: a client that read more since
/// its last write sends its newest.
pub const MAX_DEPS: usize = 256;

/// Tunables of Eiger, in microseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EigerConfig {
    /// A prepared transaction without a decision this long asks its
    /// coordinator to end it.
    pub resolve_after_us: u64,
    /// A client gives a commit up (its outcome unknown) after this long.
    pub commit_timeout_us: u64,
    /// A client gives a third round up (and its transaction, to start it
    /// again) after this long.
    pub status_timeout_us: u64,
    /// A partition keeps a version this long after a newer one is
    /// installed, and a transaction that reads this long after its first
    /// read is aborted.
    pub txn_timeout_us: u64,
    /// Deliberate protocol bugs, for tests that prove the checker can see.
    #[doc(hidden)]
    pub fault: EigerFault,
}

impl Default for EigerConfig {
    fn default() -> Self {
        EigerConfig {
            resolve_after_us: 500_000,
            commit_timeout_us: 2_000_000,
            status_timeout_us: 2_000_000,
            txn_timeout_us: 5_000_000,
            fault: EigerFault::None,
        }
    }
}

/// Bugs that can be switched on to check that tests and checker catch them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EigerFault {
    #[default]
    None,
    /// Partitions overlook transactions still open: a value's validity
    /// runs to the clock though a commit in flight ends it sooner, and a
    /// read at a time never asks for a third round — a reader sees a
    /// multi-partition write at one partition and not at another.
    IgnoreOpen,
}

/// The Eiger protocol.
pub struct Eiger;

impl Protocol for Eiger {
    const NAME: &'static str = "eiger";
    const GUARANTEE: Guarantee = Guarantee::Causal;
    /// A third round waits at the coordinator for its decision.
    const READS_NEVER_WAIT: bool = false;
    type Config = EigerConfig;
    type Message = EigerMsg;
    type Replica = EigerReplica;
    type Session = EigerSession;

    fn configure(_tuning: &Tuning) -> EigerConfig {
        EigerConfig::default()
    }

    fn validate(topology: &Topology, config: &EigerConfig) -> Result<(), String> {
        topology.one_replica_per_dc()?;
        if topology.dc_count() != 1 {
            return Err(format!(
                "Eiger runs inside one DC, as the PrompTCC paper evaluates it; this cluster has {} DCs (use --dcs 1, or wren across DCs)",
                topology.dc_count()
            ));
        }
        if config.resolve_after_us == 0
            || config.commit_timeout_us == 0
            || config.status_timeout_us == 0
            || config.txn_timeout_us == 0
        {
            return Err("the resolve interval and the commit, status and transaction timeouts must be positive".into());
        }
        Ok(())
    }

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &EigerConfig) -> EigerReplica {
        EigerReplica::new(id, topology, config.clone())
    }

    fn recover(
        id: ReplicaId,
        topology: Arc<Topology>,
        config: &EigerConfig,
        records: Vec<RecordOf<Self>>,
    ) -> EigerReplica {
        let mut replica = Self::replica(id, topology, config);
        replica.replay(records);
        replica
    }

    fn session(setup: SessionSetup, config: &EigerConfig) -> EigerSession {
        let client = EigerClient::new(setup.id, setup.topology.clone(), config);
        SessionCore::new(&setup, client)
    }
}
