//! The ordered log of a replica group: the members of one partition agree
//! on one sequence of entries by Raft (Ongaro and Ousterhout, "In Search of
//! an Understandable Consensus Algorithm", USENIX ATC 2014), with the
//! pre-vote, leadership transfer and check-quorum of Ongaro's thesis
//! (§9.6, §3.10, §6.2).
//!
//! Why a Raft of our own rather than raft-rs or omnipaxos: raft-rs draws
//! its election timeouts from `rand::thread_rng`, which the core may not
//! (the simulator must replay a run from its seed), and brings protobuf and
//! slog; both libraries keep their own storage abstraction beside the
//! engine's one durability contract (records persisted, messages that wait
//! for them, checkpoints that are records), so every crash path would be
//! theirs to get right twice. This one speaks the contract directly and the
//! simulator is its proof: `tests.rs` here, and the log-agreement check the
//! simulator runs at every step under the protocols that use it.
//!
//! * [`log`] — the entries after the compacted base, each with its term
//!   and the leader's time.
//! * [`raft`] — one member: elections (pre-vote first, so a member coming
//!   back from a cut does not depose a working leader; a preferred member
//!   that times out first and is handed leadership once up to date),
//!   replication (probing until a follower matches, then pipelined within a
//!   window), commitment on a majority of durable copies (the leader counts
//!   itself once its own records are durable), stepping down when no
//!   majority answers, compaction and snapshot installation.
//! * [`messages`], [`durable`] — what members say and what they persist.
//!
//! **Invariants**: at most one leader per term; a member makes its term and
//! vote durable before it votes, and its entries durable before it
//! acknowledges them; an entry committed at an index is the entry every
//! member applies at that index; a leader only commits entries of its own
//! term by counting (earlier ones commit with them).

pub mod durable;
pub mod log;
pub mod messages;
pub mod raft;
#[cfg(test)]
mod tests;

pub use durable::RaftRecord;
pub use log::{Entry, Payload, RaftLog};
pub use messages::RaftMsg;
pub use raft::{Raft, RaftConfig, RaftOut, Role, Send};
