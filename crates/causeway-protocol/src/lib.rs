//! Causeway's protocol core: deterministic, sans-IO state machines.
//!
//! Architecture invariant: nothing in this crate performs I/O, reads a clock,
//! spawns a thread or draws randomness. Time comes in as an argument; effects
//! go out through an [`engine::Outbox`]. Iteration order never depends on a
//! randomly seeded hasher (we use `FxHashMap` or ordered maps), so a driver
//! that feeds the same inputs gets the same outputs.

pub mod commit_order;
pub mod coordination;
pub mod cure;
pub mod ec;
pub mod engine;
pub mod hlc;
pub mod ids;
pub mod kind;
pub mod limits;
pub mod mvstore;
pub mod topology;
pub mod txn;
pub mod wren;

pub use engine::{
    CommitStamp, Key, Message, MsgClass, Outbox, Protocol, Replica, Session, SessionError, SessionEvent, Tuning, Value,
};
pub use hlc::{Hlc, PhysicalMicros, Timestamp};
pub use ids::{Addr, ClientId, DcId, PartitionId, ReplicaId, TxId};
pub use kind::{ProtocolKind, ProtocolVisitor};
pub use limits::Limits;
pub use topology::Topology;
