//! What Geo-SDUR's sessions and members say.

use super::certifier::Outcome;
use super::durable::SdurRecord;
use super::entry::{LogEntry, Part, SdurTxId, Snap};
use super::slot::Vote;
use crate::consensus::RaftMsg;
use crate::contract::{CommitStamp, Key, Message, MsgClass, ReadTag, Value};
use crate::ids::PartitionId;
use serde::{Deserialize, Serialize};

/// A value read, with the stamp of its version (`None`: no version).
pub type ReadValue = Option<(Option<Value>, CommitStamp)>;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SdurMsg {
    /// Between the members of a group: the log.
    Raft(RaftMsg<LogEntry>),
    /// Session → member: read `keys` of the member's partition, at `snap`
    /// (a later read of the transaction) or at a fresh snapshot once the
    /// member has applied the session's `floor`.
    Read { tag: ReadTag, keys: Vec<Key>, snap: Option<Snap>, floor: u64 },
    /// Member → session: the values in the order asked, the snapshot they
    /// were read at, and how far the member had applied everything.
    Values { tag: ReadTag, partition: PartitionId, values: Vec<ReadValue>, snap: Snap, prefix: u64 },
    /// Member → session: the snapshot asked is older than what it keeps.
    TooOld { tag: ReadTag, partition: PartitionId },
    /// Session → member: a transaction's part to deliver.
    Submit(Box<Part>),
    /// Member → its leader: a part to propose.
    Forward(Box<Part>),
    /// Member → session: how the transaction ended.
    Outcome(Outcome),
    /// Member → session: the read cannot be answered here: this member
    /// has not applied what the session saw, and has no leader to learn it
    /// from (a majority of its group is unreachable).
    Unreadable { tag: ReadTag, partition: PartitionId, why: String },
    /// Member → session: the part was never proposed (its group has no
    /// leader): the transaction cannot commit.
    Refused { tx: SdurTxId, partition: PartitionId, why: String },
    /// Member → the members of a global's other partitions: its
    /// partition's vote.
    Vote { tx: SdurTxId, from: PartitionId, vote: Vote },
    /// Member → the members of a partition whose vote a pending global
    /// lacks, and of its own group (step 7).
    VoteAsk { tx: SdurTxId, parts: Vec<PartitionId>, deadline: u64 },
    /// Member → a member of its own group that asked: the votes it holds.
    Votes { tx: SdurTxId, votes: Vec<(PartitionId, Vote)> },
    /// Leader → follower: part `seq` of the certifier's state at `index`
    /// (of `snap_term`), for a follower its log can no longer bring up to
    /// date.
    Snapshot { term: u64, index: u64, snap_term: u64, seq: u32, last: bool, records: Vec<SdurRecord> },
}

impl SdurMsg {
    /// Between a session and the members it reads and commits at.
    pub const CLIENT: MsgClass = MsgClass::CLIENT;
    /// Inside a group: the log, forwarded parts, snapshots.
    pub const CONSENSUS: MsgClass = MsgClass::new(1, "consensus");
    /// Between the groups of a global transaction.
    pub const VOTES: MsgClass = MsgClass::new(2, "votes");
}

impl Message for SdurMsg {
    const CLASSES: &'static [MsgClass] = &[SdurMsg::CLIENT, SdurMsg::CONSENSUS, SdurMsg::VOTES];

    fn class(&self) -> MsgClass {
        match self {
            SdurMsg::Read { .. }
            | SdurMsg::Values { .. }
            | SdurMsg::TooOld { .. }
            | SdurMsg::Unreadable { .. }
            | SdurMsg::Submit(_)
            | SdurMsg::Outcome(_)
            | SdurMsg::Refused { .. } => SdurMsg::CLIENT,
            SdurMsg::Raft(_) | SdurMsg::Forward(_) | SdurMsg::Snapshot { .. } => SdurMsg::CONSENSUS,
            SdurMsg::Vote { .. } | SdurMsg::VoteAsk { .. } | SdurMsg::Votes { .. } => SdurMsg::VOTES,
        }
    }

    fn read_request(&self) -> Option<ReadTag> {
        match self {
            SdurMsg::Read { tag, .. } => Some(*tag),
            _ => None,
        }
    }

    fn read_reply(&self) -> Option<ReadTag> {
        match self {
            SdurMsg::Values { tag, .. } | SdurMsg::TooOld { tag, .. } | SdurMsg::Unreadable { tag, .. } => Some(*tag),
            _ => None,
        }
    }

    fn is_background(&self) -> bool {
        matches!(self, SdurMsg::Raft(m) if m.is_background())
    }
}
