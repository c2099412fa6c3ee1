//! What a member of a Geo-SDUR group makes durable: its share of the log
//! (Raft's records), and, in a checkpoint or a snapshot it installed, the
//! certifier's state at a position. Replayed in order they rebuild the
//! member ([`super::SdurReplica::recover`]); the log's entries after that
//! position are delivered again once the leader says they are committed.

use super::entry::{LogEntry, SdurTxId};
use super::slot::{CertifierCounters, Known, Slot, Vote};
use crate::consensus::RaftRecord;
use crate::contract::{CommitStamp, Key, Value};
use crate::hlc::Timestamp;
use crate::ids::PartitionId;
use serde::{Deserialize, Serialize};

/// The certifier's scalars at `processed`: the first record of its state;
/// the slots, versions and early votes follow in records of their own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineHead {
    pub processed: u64,
    /// The first position whose slot follows.
    pub first: u64,
    pub applied_max: u64,
    pub max_ts: Timestamp,
    pub gc_floor: u64,
    /// The time of the last delivery it forgot.
    pub forgotten_time: Timestamp,
    pub counters: CertifierCounters,
    /// How many records of this state follow: a state cut short by a
    /// crash (its records not all durable) is not taken.
    pub records: u32,
}

/// A version of a key: its value (`None`: a delete), stamp and position.
pub type StoredVersion = (Option<Value>, CommitStamp, u64);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum SdurRecord {
    Raft(RaftRecord<LogEntry>),
    /// The certifier starts over from this state.
    Machine(MachineHead),
    /// The next slots of that state, in position order.
    Slots(Vec<Slot>),
    /// Versions of that state, oldest first per key.
    Versions(Vec<(Key, Vec<StoredVersion>)>),
    /// Votes of that state for parts not delivered yet.
    EarlyVotes(Vec<(SdurTxId, PartitionId, Vote)>),
    /// The transactions of that state it remembers having delivered, with
    /// the time of each delivery.
    Delivered(Vec<(SdurTxId, Timestamp, Known)>),
}

impl PartialEq for SdurRecord {
    /// Records compare by their encoding (slots hold no float, so this is
    /// equality of content).
    fn eq(&self, other: &Self) -> bool {
        postcard::to_allocvec(self).ok() == postcard::to_allocvec(other).ok()
    }
}

impl Eq for SdurRecord {}
