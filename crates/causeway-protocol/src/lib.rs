//! Causeway's protocol core: deterministic, sans-IO state machines.
//!
//! Architecture invariant: nothing in this crate performs I/O, reads a clock,
//! spawns a thread or draws randomness. Time comes in as an argument; effects
//! go out through [`Effects`]. Iteration order never depends on a randomly
//! seeded hasher (we use `FxHashMap` or ordered maps), so a driver that feeds
//! the same inputs gets the same outputs.
//!
//! * [`contract`] — what every protocol meets and every driver relies on.
//! * [`kind`] — protocols by the names users type.
//! * Shared parts: [`session_core`] (the client session every protocol
//!   uses), [`twopc`] (coordinator, cohort, replication and client of the
//!   protocols that commit through a coordinator), [`txn`] (a transaction's
//!   write and read sets), [`mvstore`] (version chains), [`hlc`],
//!   [`topology`], [`ids`], [`recovery`] (clock and id reservations, and
//!   replication streams that resume after a crash), [`write_only`]
//!   (write-only transactions through a coordinator the client picks, of
//!   the protocols whose clients read partitions directly).
//!   [`consensus`] (the ordered log of a replica group: Raft).
//! * The protocols: [`wren`], [`cure`] (with H-Cure), [`ec`], [`paris`] (with BPR), [`promptcc`], [`eiger`],
//!   [`sdur`] (Geo-SDUR: serializable).

pub mod consensus;
pub mod contract;
pub mod cure;
pub mod ec;
pub mod eiger;
pub mod hlc;
pub mod ids;
pub mod kind;
pub mod mvstore;
pub mod paris;
pub mod promptcc;
pub mod recovery;
pub mod sdur;
pub mod session_core;
pub mod topology;
pub mod twopc;
pub mod txn;
pub mod wren;
pub mod write_only;

pub use contract::{
    AbortReason, CommitStamp, DelayTuning, Effects, FaultPoints, Guarantee, Key, Limits, Message, MsgClass, NoRecord,
    OrderedTuning, Protocol, ReadTag, ReadWaitProbe, Replica, ReplicaCounters, Session, SessionError, SessionEvent,
    SessionSetup, Tuning, Value,
};
pub use hlc::{Hlc, PhysicalMicros, Timestamp};
pub use ids::{Addr, ClientId, DcId, PartitionId, ReplicaId, TxId};
pub use kind::{ProtocolKind, ProtocolVisitor};
pub use topology::Topology;

/// The encoding of the protocols' messages between replicas: raised when a
/// message changes (2: `PrepareReq` says when its cohort commits alone).
/// Nodes that differ refuse each other by name at the handshake, rather
/// than misread each other's messages.
pub const MESSAGE_FORMAT: u32 = 2;
