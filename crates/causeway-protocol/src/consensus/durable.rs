//! What a member makes durable: its term and vote, its entries, and where
//! its log begins. Replayed in order they rebuild the log
//! ([`super::Raft::recover`]).

use super::log::Entry;
use crate::ids::ReplicaId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaftRecord<E> {
    /// The member's current term and whom it voted for in it: made durable
    /// before any message of the term leaves, so that a restart never votes
    /// twice in one term nor goes back to an older one.
    Hard { term: u64, vote: Option<ReplicaId> },
    /// Entries from index `from` on; whatever the log held at `from` and
    /// after is gone (a follower's disagreeing suffix).
    Append { from: u64, entries: Vec<Entry<E>> },
    /// The log begins after `index` (of `term`): what came before is in the
    /// owner's snapshot, persisted with this record.
    Base { index: u64, term: u64 },
}
