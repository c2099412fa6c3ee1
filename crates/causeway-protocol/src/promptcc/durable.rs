//! What a PrompTCC partition makes durable, and the messages that wait for
//! it.
//!
//! * `Committed` and `Aborted` of a prepared transaction before it takes
//!   effect (versions installed, `S_i[i]` past it): a partition tells
//!   itself (`Logged`) once they are durable, so that no read, report or
//!   vote shows an outcome a crash could take back.
//! * `Prepared` before the participant's `Prepared` vote leaves: a
//!   coordinator that heard every vote commits, so a vote must survive the
//!   voter's crash (with its sequence number: the decision names it).
//! * `Committed` before the client hears the commit: an acknowledged write
//!   survives.
//! * `Aborted` before a `Vote` of none leaves: the participant fenced the
//!   id, and a late `Write` of it must still be refused after a restart, or
//!   a transaction the coordinator gave up could commit in part.
//! * The clock's reservations ([`crate::recovery::reservations`]) before a
//!   sequence number above them is revealed (a vote, a stable-time report):
//!   a restarted partition must never hand out a number another partition
//!   already counts as committed.
//!
//! A checkpoint is the versions held, the prepared transactions, the fences,
//! the recent commits (a late `Query` must still hear their numbers), the
//! newest stamp collected of each key (only a checkpoint drops versions:
//! records replayed after it collect nothing) and the reservations.

use super::vclock::VClock;
use crate::contract::{CommitStamp, Key, Value};
use crate::recovery::{Reserved, Reserving};
use crate::write_only::{self, Decided, TxnRecords, WtxId};
use serde::{Deserialize, Serialize};

/// A transaction prepared at a partition, with the writer's `D_c`.
pub type PreparedTx = write_only::PreparedTx<VClock>;

/// One record of a PrompTCC partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PtccRecord {
    Reserved(Reserved),
    Prepared(PreparedTx),
    /// The prepared `tx` committed with these numbers.
    Committed {
        tx: WtxId,
        decided: Decided,
    },
    /// `tx` is given up here: dropped if prepared, refused if it comes.
    Aborted {
        tx: WtxId,
    },
    /// In a checkpoint: a version held.
    Version {
        key: Key,
        value: Option<Value>,
        stamp: CommitStamp,
        ts: VClock,
        decided: Decided,
    },
    /// In a checkpoint: versions of `key` up to `upto` were collected (a
    /// read that would return an older one answers `TooOld`).
    Collected {
        key: Key,
        upto: CommitStamp,
    },
    /// In a checkpoint: a transaction committed here lately, with every
    /// participant's number.
    Recent {
        tx: WtxId,
        decided: Decided,
    },
}

impl From<Reserved> for PtccRecord {
    fn from(r: Reserved) -> Self {
        PtccRecord::Reserved(r)
    }
}

impl Reserving for PtccRecord {
    fn reservation(&self) -> Option<Reserved> {
        match self {
            PtccRecord::Reserved(r) => Some(*r),
            _ => None,
        }
    }
}

/// What the shared write-only transactions keep, in PrompTCC's records.
impl TxnRecords<VClock> for PtccRecord {
    fn prepared(p: PreparedTx) -> Self {
        PtccRecord::Prepared(p)
    }
    fn committed(tx: WtxId, decided: Decided) -> Self {
        PtccRecord::Committed { tx, decided }
    }
    fn aborted(tx: WtxId) -> Self {
        PtccRecord::Aborted { tx }
    }
    /// Its coordinator is not kept: PrompTCC forgets commits by `S_i`.
    fn recent(tx: WtxId, decided: Decided, _coordinator: crate::ids::PartitionId) -> Self {
        PtccRecord::Recent { tx, decided }
    }
}
