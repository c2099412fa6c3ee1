//! Every message Eiger sends.

use crate::contract::{CommitStamp, Key, Message, MsgClass, ReadTag, Value};
use crate::hlc::Timestamp;
use crate::ids::{ClientId, PartitionId};
use crate::write_only::{Decided, TxnMessages, WtxId};
use serde::{Deserialize, Serialize};

/// What a writer depends on: its Lamport clock, which every number its
/// transaction gets exceeds, and its nearest dependencies — the versions
/// it read and its last write since that write — as Eiger's client library
/// sends them with every write. Inside one DC nobody checks them (they are
/// what another DC would check before applying the write); they are sent
/// and kept for what they cost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EigerDeps {
    pub clock: Timestamp,
    pub deps: Vec<(Key, Timestamp)>,
}

impl crate::write_only::Deps for EigerDeps {
    fn ceiling(&self) -> Timestamp {
        self.clock
    }
}

/// A value from a first round, with its validity interval: it is the
/// key's value at every time from `evt` (its commit timestamp, the earliest
/// valid time) to `lvt` (the latest valid time the partition can vouch
/// for: one below the next version, or below an open transaction that may
/// commit one, or its clock).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Valid {
    pub key: Key,
    pub value: Option<Value>,
    pub evt: Timestamp,
    pub lvt: Timestamp,
}

/// A key read at a time: its newest committed version at or before it
/// (`None` stamp: no version), and the transactions still open at the
/// partition that may commit a newer one at or before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AtTime {
    pub key: Key,
    pub value: Option<Value>,
    pub stamp: Option<CommitStamp>,
    pub open: Vec<OpenWrite>,
}

/// A write of a transaction still open at the partition read: the third
/// round asks its coordinator how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenWrite {
    pub tx: WtxId,
    pub coordinator: PartitionId,
    pub value: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EigerMsg {
    // Client ↔ partitions: read-only transactions.
    /// A first round (`at: None`): the newest value of each key with its
    /// validity interval. A second round (`at: Some(t)`, Eiger's
    /// `read_by_time`): each key's value at the effective time `t`. `clock`
    /// is the client's Lamport clock.
    Read {
        tag: ReadTag,
        keys: Vec<Key>,
        clock: Timestamp,
        at: Option<Timestamp>,
    },
    /// The answer to a first round.
    Valid {
        tag: ReadTag,
        values: Vec<Valid>,
    },
    /// The answer to a read at a time.
    AtTime {
        tag: ReadTag,
        values: Vec<AtTime>,
    },
    /// A read at a time whose version may have been collected (the
    /// transaction timeout): the transaction must start again.
    TooOld {
        tag: ReadTag,
    },
    /// The third round, to a coordinator: how did `txs` end?
    Status {
        tag: ReadTag,
        txs: Vec<WtxId>,
    },
    /// The answer, once it is decided: the commit's numbers, or `None`
    /// (aborted).
    Outcome {
        tag: ReadTag,
        tx: WtxId,
        decided: Option<Decided>,
    },
    // Client ↔ partitions: write-only transactions.
    Write {
        tx: WtxId,
        writes: Vec<(Key, Option<Value>)>,
        participants: Vec<PartitionId>,
        coordinator: PartitionId,
        deps: EigerDeps,
    },
    Committed {
        tx: WtxId,
        decided: Decided,
    },
    Aborted {
        tx: WtxId,
    },
    // Between the partitions of a write-only transaction.
    Prepared {
        tx: WtxId,
        seq: Timestamp,
        participants: Vec<PartitionId>,
        client: ClientId,
    },
    Commit {
        tx: WtxId,
        decided: Decided,
    },
    Resolve {
        tx: WtxId,
        participants: Vec<PartitionId>,
        client: ClientId,
    },
    Query {
        tx: WtxId,
    },
    Vote {
        tx: WtxId,
        seq: Option<Timestamp>,
    },
    Abort {
        tx: WtxId,
    },
    /// To itself: the outcome records up to the `upto`-th are durable.
    Logged {
        upto: u64,
    },
    /// To a coordinator: the sender has committed `txs` (again every resolve
    /// interval, until told to forget them).
    Done {
        txs: Vec<WtxId>,
    },
    /// From a coordinator: every participant of `txs` has committed them;
    /// they are forgotten.
    Forget {
        txs: Vec<WtxId>,
    },
}

impl TxnMessages for EigerMsg {
    fn committed(tx: WtxId, decided: Decided) -> Self {
        EigerMsg::Committed { tx, decided }
    }
    fn aborted(tx: WtxId) -> Self {
        EigerMsg::Aborted { tx }
    }
    fn prepared(tx: WtxId, seq: Timestamp, participants: Vec<PartitionId>, client: ClientId) -> Self {
        EigerMsg::Prepared { tx, seq, participants, client }
    }
    fn commit(tx: WtxId, decided: Decided) -> Self {
        EigerMsg::Commit { tx, decided }
    }
    fn resolve(tx: WtxId, participants: Vec<PartitionId>, client: ClientId) -> Self {
        EigerMsg::Resolve { tx, participants, client }
    }
    fn query(tx: WtxId) -> Self {
        EigerMsg::Query { tx }
    }
    fn vote(tx: WtxId, seq: Option<Timestamp>) -> Self {
        EigerMsg::Vote { tx, seq }
    }
    fn abort(tx: WtxId) -> Self {
        EigerMsg::Abort { tx }
    }
    fn logged(upto: u64) -> Self {
        EigerMsg::Logged { upto }
    }
    fn done(txs: Vec<WtxId>) -> Option<Self> {
        Some(EigerMsg::Done { txs })
    }
    fn forget(txs: Vec<WtxId>) -> Option<Self> {
        Some(EigerMsg::Forget { txs })
    }
}

impl Message for EigerMsg {
    const CLASSES: &'static [MsgClass] = &[MsgClass::CLIENT, MsgClass::TRANSACTION];

    fn class(&self) -> MsgClass {
        match self {
            EigerMsg::Read { .. }
            | EigerMsg::Valid { .. }
            | EigerMsg::AtTime { .. }
            | EigerMsg::TooOld { .. }
            | EigerMsg::Status { .. }
            | EigerMsg::Outcome { .. }
            | EigerMsg::Write { .. }
            | EigerMsg::Committed { .. }
            | EigerMsg::Aborted { .. } => MsgClass::CLIENT,
            EigerMsg::Prepared { .. }
            | EigerMsg::Commit { .. }
            | EigerMsg::Resolve { .. }
            | EigerMsg::Query { .. }
            | EigerMsg::Vote { .. }
            | EigerMsg::Abort { .. }
            | EigerMsg::Logged { .. }
            | EigerMsg::Done { .. }
            | EigerMsg::Forget { .. } => MsgClass::TRANSACTION,
        }
    }

    fn is_background(&self) -> bool {
        matches!(self, EigerMsg::Done { .. } | EigerMsg::Forget { .. })
    }

    fn read_request(&self) -> Option<ReadTag> {
        match self {
            EigerMsg::Read { tag, .. } | EigerMsg::Status { tag, .. } => Some(*tag),
            _ => None,
        }
    }

    fn read_reply(&self) -> Option<ReadTag> {
        match self {
            EigerMsg::Valid { tag, .. }
            | EigerMsg::AtTime { tag, .. }
            | EigerMsg::TooOld { tag }
            | EigerMsg::Outcome { tag, .. } => Some(*tag),
            _ => None,
        }
    }
}
