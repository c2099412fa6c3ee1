//! The sans-IO contract between protocols and their drivers.
//!
//! A protocol is two kinds of state machine: the [`Replica`] of a partition
//! (`p_n^m`, one member of the partition's replica group) and the client
//! [`Session`]. Both take one input at a time — a message, a timer, a client
//! call — together with the current physical clock reading, and answer with
//! [`Effects`]: messages to send, timers to arm, records to make durable,
//! and messages that may leave only once those records are durable. They
//! own no sockets, threads, clocks or random sources; the deterministic
//! simulator and the runtime drive the very same values.
//!
//! * [`data`] — keys, values, and the last-writer-wins [`CommitStamp`].
//! * [`message`] — [`Message`], its declared classes ([`MsgClass`]) and
//!   read tags ([`ReadTag`]) that let drivers measure waiting from outside.
//! * [`effects`] — what a step produces ([`Effects`]), the durability effect,
//!   and the fault points only the simulator switches on ([`FaultPoints`]).
//! * [`replica`] — [`Replica`], and the counters every replica keeps.
//! * [`session`] — [`Session`]: time, timers, read-only transactions, and the
//!   outcomes of a call ([`SessionEvent`], [`AbortReason`], [`SessionError`]).
//! * [`protocol`] — [`Protocol`]: a protocol's types, its guarantee as data,
//!   configuration, construction and recovery from durable records.
//! * [`durability`] — how drivers carry the durability effect out: the
//!   in-memory log and the send gate.
//! * [`spill`] — records a replica keeps on disk instead of in memory
//!   (a cut-off peer's backlog) and reads back when it needs them.
//! * [`limits`] — the sizes a cluster accepts, and their one check.
//! * [`reach`] — [`newest_timestamp`]: how far ahead of a clock a message
//!   reaches, which a node checks before a peer's message moves its clock.
//! * [`probe`] — [`ReadWaitProbe`]: how drivers tell a read that waited;
//!   [`round_trip_summary`] of read-only transactions' round trips.

pub mod data;
pub mod durability;
pub mod effects;
pub mod guarantee;
pub mod limits;
pub mod message;
pub mod probe;
pub mod protocol;
pub mod reach;
pub mod replica;
pub mod session;
pub mod spill;

pub use data::{CommitStamp, Key, Value};
pub use durability::{MemoryLog, RecordLog, SendGate};
pub use effects::{Effects, FaultPoints, NoRecord};
pub use guarantee::Guarantee;
pub use limits::Limits;
pub use message::{classes_are_indexed, Message, MsgClass, ReadTag};
pub use probe::{round_trip_summary, ReadWaitProbe};
pub use protocol::{DelayTuning, OrderedTuning, Protocol, SessionSetup, Tuning};
pub use reach::newest_timestamp;
pub use replica::{Replica, ReplicaCounters};
pub use session::{AbortReason, Session, SessionError, SessionEvent};
pub use spill::{Done, MemorySpill, Next, Spill, SpillQueue};
