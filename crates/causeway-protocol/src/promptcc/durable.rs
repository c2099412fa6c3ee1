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

use super::messages::PtxId;
use super::vclock::{Decided, VClock};
use crate::contract::{CommitStamp, Key, Value};
use crate::hlc::Timestamp;
use crate::ids::PartitionId;
use crate::recovery::{Reserved, Reserving};
use serde::{Deserialize, Serialize};

/// A transaction prepared at a partition (Alg. 2 lines 3–7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedTx {
    pub tx: PtxId,
    pub seq: Timestamp,
    pub coordinator: PartitionId,
    pub participants: Vec<PartitionId>,
    pub deps: VClock,
    pub writes: Vec<(Key, Option<Value>)>,
}

/// One record of a PrompTCC partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PtccRecord {
    Reserved(Reserved),
    Prepared(PreparedTx),
    /// The prepared `tx` committed with these numbers.
    Committed {
        tx: PtxId,
        decided: Decided,
    },
    /// `tx` is given up here: dropped if prepared, refused if it comes.
    Aborted {
        tx: PtxId,
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
        tx: PtxId,
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
