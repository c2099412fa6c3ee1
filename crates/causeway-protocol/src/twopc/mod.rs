//! What the protocols that run a transaction through a coordinator and
//! two-phase commit over a snapshot share (Wren, Cure, H-Cure; PaRiS next):
//! the messages, the coordinator, the cohort's prepared transactions, the
//! replication of commits in commit order, and the client's side.
//!
//! A protocol of the family brings its snapshot type ([`Snapshot`]: Wren's
//! pair, Cure's vector, PaRiS's single timestamp), what a client sends to
//! start a transaction, what a replicated transaction carries, and its
//! stabilization messages ([`Family`]); it keeps its own files for the rules
//! that make it what it is — which snapshot a transaction gets, when a
//! version is visible, how stable times are agreed on.
//!
//! * [`messages`] — [`TxnMsg`], every message of the family.
//! * [`tx_table`] — what a coordinator keeps of its running transactions.
//! * [`durable`] — what a replica makes durable and the messages that wait
//!   for it (the clock and id reservations, and the resume of replication
//!   streams, are [`crate::recovery`]'s, shared with EC).
//! * [`coordinator`] — read fan-out and two-phase commit (the papers' Alg. 2).
//! * [`replica_core`] — what every replica of the family has: place, rhythm, clock,
//!   store, and the three shared roles.
//! * [`family_replica`] — what a protocol brings ([`FamilyReplica`]).
//! * [`replica`] — the `Replica` it gets: which role takes which message.
//! * [`parked`] — read slices waiting for their snapshot (Cure, BPR).
//! * [`prepared`] — a cohort's prepared transactions and their proposals.
//! * [`replication`] — commits in commit order to the other DCs, heartbeats.
//! * [`tree`] — the tree of a DC's partitions that stabilization runs on.
//! * [`version_vector`] — `VV`: how far a replica has installed its own
//!   commits and received its peers'.
//! * [`rhythm`] — Δ_R, Δ_G, the expiry of silent clients, and their timers.
//! * [`reseed`] — what a replica answers one that lost its state, and how
//!   the answers become that one's records ([`crate::recovery::seed`]).
//! * [`rejoin`] — a restarted replica holds back new transactions until its
//!   DC's stabilization has told it the stable times again.
//! * [`write_cache`] — a session's own writes its snapshots may miss.
//! * [`client`] — the session's side ([`CoordinatedClient`]).

pub mod client;
pub mod coordinator;
pub mod durable;
pub mod family_replica;
pub mod messages;
pub mod parked;
pub mod prepared;
pub mod rejoin;
pub mod replica;
pub mod replica_core;
pub mod replication;
pub mod reseed;
pub mod rhythm;
pub mod tree;
pub mod tx_table;
pub mod version_vector;
pub mod write_cache;

pub use client::{CausalPast, CoordinatedClient};
pub use coordinator::Coordinator;
pub use durable::FamilyRecord;
pub use family_replica::{CoreOf, FamilyEffects, FamilyReplica, RecordOf, SliceRequest};
pub use messages::{FamilyMsg, TxnMsg};
pub use parked::ParkedReads;
pub use prepared::PreparedSet;
pub use replica::{recover, reseeding};
pub use replica_core::FamilyCore;
pub use replication::Replicator;
pub use rhythm::{FamilyTimer, Rhythm};
pub use tree::Tree;
pub use tx_table::TxTable;
pub use version_vector::VersionVector;
pub use write_cache::WriteCache;

use crate::hlc::Timestamp;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// What a message of the family may carry.
pub trait Payload: Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static {}
impl<T: Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static> Payload for T {}

/// A transaction's snapshot: what it may read.
pub trait Snapshot: Payload {
    /// The largest timestamp the snapshot holds: a transaction that read
    /// from it commits above it.
    fn ceiling(&self) -> Timestamp;

    /// The smallest timestamp the snapshot holds: a version whose
    /// timestamps are all at or below it is visible in the snapshot.
    fn floor(&self) -> Timestamp;

    /// Component-wise minimum: a snapshot that sees no more than either.
    fn meet(&self, other: &Self) -> Self;
}

/// The types a protocol of the family brings to the shared messages.
pub trait Family: 'static {
    type Snapshot: Snapshot;
    /// What a client sends to start a transaction (what it has seen).
    type Start: Payload;
    /// One transaction's writes to one partition, as replicated.
    type Writes: Payload;
    /// The protocol's stabilization messages inside a DC.
    type Gossip: Payload;
}
