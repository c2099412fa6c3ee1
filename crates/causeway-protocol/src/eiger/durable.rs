//! What an Eiger partition makes durable, and the messages that wait for
//! it: the write-only transactions' records ([`crate::write_only`] says
//! what waits for each), the clock's reservations (a restarted partition
//! must never number a write at or below a validity interval it vouched
//! for), and in a checkpoint the versions held and the newest stamp
//! collected of each key.

use super::messages::EigerDeps;
use crate::contract::{CommitStamp, Key, Value};
use crate::ids::PartitionId;
use crate::recovery::{Reserved, Reserving};
use crate::write_only::{self, Decided, TxnRecords, WtxId};
use serde::{Deserialize, Serialize};

/// A transaction prepared at a partition, with the writer's dependencies.
pub type PreparedTx = write_only::PreparedTx<EigerDeps>;

/// One record of an Eiger partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EigerRecord {
    Reserved(Reserved),
    Prepared(PreparedTx),
    Committed {
        tx: WtxId,
        decided: Decided,
    },
    Aborted {
        tx: WtxId,
    },
    /// In a checkpoint: a version held.
    Version {
        key: Key,
        value: Option<Value>,
        stamp: CommitStamp,
    },
    /// In a checkpoint: versions of `key` up to `upto` were collected.
    Collected {
        key: Key,
        upto: CommitStamp,
    },
    /// In a checkpoint: a transaction committed here lately, and its
    /// coordinator (to which the commit is acknowledged).
    Recent {
        tx: WtxId,
        decided: Decided,
        coordinator: PartitionId,
    },
}

impl From<Reserved> for EigerRecord {
    fn from(r: Reserved) -> Self {
        EigerRecord::Reserved(r)
    }
}

impl Reserving for EigerRecord {
    fn reservation(&self) -> Option<Reserved> {
        match self {
            EigerRecord::Reserved(r) => Some(*r),
            _ => None,
        }
    }
}

impl TxnRecords<EigerDeps> for EigerRecord {
    fn prepared(p: PreparedTx) -> Self {
        EigerRecord::Prepared(p)
    }
    fn committed(tx: WtxId, decided: Decided) -> Self {
        EigerRecord::Committed { tx, decided }
    }
    fn aborted(tx: WtxId) -> Self {
        EigerRecord::Aborted { tx }
    }
    fn recent(tx: WtxId, decided: Decided, coordinator: PartitionId) -> Self {
        EigerRecord::Recent { tx, decided, coordinator }
    }
}
