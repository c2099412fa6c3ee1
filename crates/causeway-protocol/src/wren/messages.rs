//! Every message Wren sends, named after the paper's listings.

use super::snapshot::Snapshot;
use crate::engine::{Key, Message, MsgClass, SessionError, Value};
use crate::hlc::Timestamp;
use crate::ids::TxId;
use serde::{Deserialize, Serialize};

/// The writes of one transaction to one partition, as replicated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxWrites {
    pub txid: TxId,
    /// The remote dependency time of every version the transaction creates.
    pub rdt: Timestamp,
    pub writes: Vec<(Key, Value)>,
}

/// What one subtree of the BiST tree reports to its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StableReport {
    /// Minimum of the local version clocks `VV[m]` in the subtree.
    pub local: Timestamp,
    /// Minimum of the remote entries `VV[i], i ≠ m` in the subtree.
    pub remote: Timestamp,
    /// The oldest snapshot a running transaction in the subtree may read.
    pub oldest: Snapshot,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WrenMsg {
    // Client → coordinator (Alg. 1).
    StartTxReq {
        lst: Timestamp,
        rst: Timestamp,
    },
    TxReadReq {
        tx: TxId,
        keys: Vec<Key>,
    },
    CommitReq {
        tx: TxId,
        hwt: Timestamp,
        writes: Vec<(Key, Value)>,
    },
    /// One-way: a read-only or aborted transaction is over, so the
    /// coordinator can drop its context (and stop holding back GC).
    EndTx {
        tx: TxId,
    },

    // Coordinator → client.
    StartTxResp {
        tx: TxId,
        snapshot: Snapshot,
    },
    TxReadResp {
        tx: TxId,
        values: Vec<(Key, Option<Value>)>,
    },
    CommitResp {
        tx: TxId,
        ct: Timestamp,
    },
    TxError {
        tx: Option<TxId>,
        error: SessionError,
    },

    // Coordinator ↔ cohorts (Alg. 2 and 3).
    SliceReq {
        tx: TxId,
        keys: Vec<Key>,
        snapshot: Snapshot,
    },
    SliceResp {
        tx: TxId,
        values: Vec<(Key, Option<Value>)>,
    },
    PrepareReq {
        tx: TxId,
        snapshot: Snapshot,
        ht: Timestamp,
        writes: Vec<(Key, Value)>,
    },
    PrepareResp {
        tx: TxId,
        pt: Timestamp,
    },
    Commit {
        tx: TxId,
        ct: Timestamp,
    },

    // Between replicas of a partition in different DCs (Alg. 4).
    Replicate {
        ct: Timestamp,
        txs: Vec<TxWrites>,
    },
    Heartbeat {
        t: Timestamp,
    },

    // BiST inside a DC.
    StableUp(StableReport),
    StableDown {
        lst: Timestamp,
        rst: Timestamp,
        oldest: Snapshot,
    },
}

impl Message for WrenMsg {
    const CLASSES: &'static [MsgClass] =
        &[MsgClass::CLIENT, MsgClass::TRANSACTION, MsgClass::REPLICATION, MsgClass::STABILIZATION];

    fn class(&self) -> MsgClass {
        use WrenMsg::*;
        match self {
            StartTxReq { .. }
            | TxReadReq { .. }
            | CommitReq { .. }
            | EndTx { .. }
            | StartTxResp { .. }
            | TxReadResp { .. }
            | CommitResp { .. }
            | TxError { .. } => MsgClass::CLIENT,
            SliceReq { .. } | SliceResp { .. } | PrepareReq { .. } | PrepareResp { .. } | Commit { .. } => {
                MsgClass::TRANSACTION
            }
            Replicate { .. } | Heartbeat { .. } => MsgClass::REPLICATION,
            StableUp(_) | StableDown { .. } => MsgClass::STABILIZATION,
        }
    }

    fn is_background(&self) -> bool {
        matches!(self, WrenMsg::Heartbeat { .. } | WrenMsg::StableUp(_) | WrenMsg::StableDown { .. })
    }

    fn read_request_tag(&self) -> Option<u64> {
        match self {
            WrenMsg::SliceReq { tx, .. } => Some(tx.0),
            _ => None,
        }
    }

    fn read_reply_tag(&self) -> Option<u64> {
        match self {
            WrenMsg::SliceResp { tx, .. } => Some(tx.0),
            _ => None,
        }
    }
}
