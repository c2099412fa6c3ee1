//! What a partition's log delivers: one partition's part of a transaction,
//! or a fence; and the snapshot a transaction read a partition at.

use super::bloom::Bloom;
use crate::contract::{Key, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{DcId, PartitionId, ReplicaId};
use crate::write_only::WtxId;
use serde::{Deserialize, Serialize};

/// The transaction ids of Geo-SDUR are the sessions' (unique across
/// restarts: the session's first clock reading is in them).
pub type SdurTxId = WtxId;

/// What a transaction read a partition at (step 1): the positions whose
/// writes it saw — every one up to `upto` but the holes — and the largest
/// commit timestamp among them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snap {
    pub upto: u64,
    /// Positions at or below `upto` not applied when the snapshot was
    /// taken, sorted.
    pub holes: Vec<u64>,
    pub ts: Timestamp,
}

impl Snap {
    /// Whether the writes of the entry at `pos` are in this snapshot.
    pub fn sees(&self, pos: u64) -> bool {
        pos <= self.upto && self.holes.binary_search(&pos).is_err()
    }

    /// A snapshot that saw nothing after `floor` (a partition the
    /// transaction only writes: it read nothing there).
    pub fn at(floor: u64) -> Snap {
        Snap { upto: floor, holes: Vec::new(), ts: Timestamp::ZERO }
    }

    /// Well formed: holes sorted, distinct, at or below `upto`.
    pub fn is_well_formed(&self) -> bool {
        self.holes.windows(2).all(|w| w[0] < w[1]) && self.holes.last().is_none_or(|&h| h <= self.upto)
    }
}

/// The keys a part read at its partition, or a filter of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadSet {
    Keys(Vec<Key>),
    /// A bloom filter of the keys; `audit` keeps the keys as well, so that a
    /// member can tell the aborts only the filter caused.
    Filter {
        filter: Bloom,
        audit: Option<Vec<Key>>,
    },
}

impl ReadSet {
    /// Whether `key` may be in the set (a filter can say yes wrongly).
    pub fn may_contain(&self, key: &[u8]) -> bool {
        match self {
            ReadSet::Keys(keys) => keys.iter().any(|k| k.as_ref() == key),
            ReadSet::Filter { filter, .. } => filter.may_contain(key),
        }
    }

    /// The keys, when they are known exactly.
    pub fn keys(&self) -> Option<&[Key]> {
        match self {
            ReadSet::Keys(keys) => Some(keys),
            ReadSet::Filter { audit, .. } => audit.as_deref(),
        }
    }
}

/// One partition's part of a transaction (step 3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub tx: SdurTxId,
    /// The DC of the client: the stamp's second element.
    pub origin: DcId,
    /// Every partition of the transaction, sorted; one for a local.
    pub parts: Vec<PartitionId>,
    pub snap: Snap,
    pub reads: ReadSet,
    /// `None`: a delete.
    pub writes: Vec<(Key, Option<Value>)>,
    /// The largest commit timestamp the transaction read or its session
    /// committed before.
    pub deps: Timestamp,
    /// The member that answers the session.
    pub reply_to: ReplicaId,
    /// When the session gives the commit up (its clock): delivered later
    /// (by the leader's clock, give or take the skew the cluster allows),
    /// the part aborts.
    pub deadline: PhysicalMicros,
}

impl Part {
    pub fn is_global(&self) -> bool {
        self.parts.len() > 1
    }
}

/// What one position of a partition's log carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogEntry {
    Part(Box<Part>),
    /// The transaction (of these partitions) is to abort here: a member of
    /// another of its partitions asked this one's vote, and this one never
    /// delivered its part (step 7).
    Fence(SdurTxId, Vec<PartitionId>),
}

impl LogEntry {
    pub fn tx(&self) -> SdurTxId {
        match self {
            LogEntry::Part(p) => p.tx,
            LogEntry::Fence(tx, _) => *tx,
        }
    }
}
