//! Every message Cure and H-Cure send.

use super::vector::VectorTs;
use crate::engine::{Key, Message, MsgClass, SessionError, Value};
use crate::hlc::Timestamp;
use crate::ids::TxId;
use serde::{Deserialize, Serialize};

/// The writes of one transaction to one partition, as replicated, with the
/// commit vector every version it creates carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxWrites {
    pub txid: TxId,
    pub commit_vector: VectorTs,
    pub writes: Vec<(Key, Value)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CureMsg {
    // Client → coordinator.
    /// `seen`: the client's last snapshot (with its last commit folded into
    /// the local entry); the new snapshot covers it.
    StartTxReq {
        seen: VectorTs,
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
    /// One-way: a read-only or aborted transaction is over.
    EndTx {
        tx: TxId,
    },

    // Coordinator → client.
    StartTxResp {
        tx: TxId,
        snapshot: VectorTs,
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

    // Coordinator ↔ cohorts.
    SliceReq {
        tx: TxId,
        keys: Vec<Key>,
        snapshot: VectorTs,
    },
    SliceResp {
        tx: TxId,
        values: Vec<(Key, Option<Value>)>,
    },
    /// `ht`: the proposal must exceed it (every entry of the snapshot and
    /// the client's last commit).
    PrepareReq {
        tx: TxId,
        snapshot: VectorTs,
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

    // Between replicas of a partition in different DCs.
    Replicate {
        ct: Timestamp,
        txs: Vec<TxWrites>,
    },
    Heartbeat {
        t: Timestamp,
    },

    // Inside a DC: every partition's version vector to every other one,
    // with the oldest snapshot its running transactions may read.
    Gossip {
        vv: VectorTs,
        oldest: VectorTs,
    },
}

impl Message for CureMsg {
    const CLASSES: &'static [MsgClass] =
        &[MsgClass::CLIENT, MsgClass::TRANSACTION, MsgClass::REPLICATION, MsgClass::STABILIZATION];

    fn class(&self) -> MsgClass {
        use CureMsg::*;
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
            Gossip { .. } => MsgClass::STABILIZATION,
        }
    }

    fn is_background(&self) -> bool {
        matches!(self, CureMsg::Heartbeat { .. } | CureMsg::Gossip { .. })
    }

    fn read_request_tag(&self) -> Option<u64> {
        match self {
            CureMsg::SliceReq { tx, .. } => Some(tx.0),
            _ => None,
        }
    }

    fn read_reply_tag(&self) -> Option<u64> {
        match self {
            CureMsg::SliceResp { tx, .. } => Some(tx.0),
            _ => None,
        }
    }
}
