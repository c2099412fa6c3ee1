//! Every message EC sends.

use crate::contract::{Key, Message, MsgClass, ReadTag, SessionError, Value};
use crate::hlc::Timestamp;
use crate::ids::TxId;
use serde::{Deserialize, Serialize};

/// The writes of one transaction to one partition, as replicated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcWrites {
    pub txid: TxId,
    pub ct: Timestamp,
    pub writes: Vec<(Key, Option<Value>)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EcMsg {
    // Client ↔ partitions of its DC: reads go straight to the partitions;
    // `tag` tells a session's read rounds apart.
    ReadReq { tag: ReadTag, keys: Vec<Key> },
    ReadResp { tag: ReadTag, values: Vec<(Key, Option<Value>)> },
    // Client ↔ its coordinator.
    CommitReq { hwt: Timestamp, writes: Vec<(Key, Option<Value>)> },
    CommitResp { tx: TxId, ct: Timestamp },
    TxError { error: SessionError },
    // Coordinator → the other partitions written: apply at once.
    Apply(EcWrites),
    // Between replicas of a partition in different DCs, every Δ_R.
    Replicate { txs: Vec<EcWrites> },
}

impl Message for EcMsg {
    const CLASSES: &'static [MsgClass] = &[MsgClass::CLIENT, MsgClass::TRANSACTION, MsgClass::REPLICATION];

    fn class(&self) -> MsgClass {
        match self {
            EcMsg::ReadReq { .. }
            | EcMsg::ReadResp { .. }
            | EcMsg::CommitReq { .. }
            | EcMsg::CommitResp { .. }
            | EcMsg::TxError { .. } => MsgClass::CLIENT,
            EcMsg::Apply(_) => MsgClass::TRANSACTION,
            EcMsg::Replicate { .. } => MsgClass::REPLICATION,
        }
    }

    fn read_request(&self) -> Option<ReadTag> {
        match self {
            EcMsg::ReadReq { tag, .. } => Some(*tag),
            _ => None,
        }
    }

    fn read_reply(&self) -> Option<ReadTag> {
        match self {
            EcMsg::ReadResp { tag, .. } => Some(*tag),
            _ => None,
        }
    }
}
