//! Every message EC sends.

use crate::contract::{Key, Message, MsgClass, ReadTag, SessionError, Value};
use crate::hlc::Timestamp;
use crate::ids::TxId;
use crate::recovery::{Control, StreamMsg};
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
    ReadReq {
        tag: ReadTag,
        keys: Vec<Key>,
    },
    ReadResp {
        tag: ReadTag,
        values: Vec<(Key, Option<Value>)>,
    },
    // Client ↔ its coordinator.
    CommitReq {
        hwt: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
    },
    /// Every partition written holds the writes durably.
    CommitResp {
        tx: TxId,
        ct: Timestamp,
    },
    /// A partition written did not say in time that it holds the writes:
    /// they may have taken effect at some partitions, at all or at none
    /// (EC commits nothing atomically). If they did, it is at `ct`.
    CommitUnknown {
        tx: TxId,
        ct: Timestamp,
    },
    TxError {
        error: SessionError,
    },
    // Coordinator ↔ the other partitions written.
    /// Apply at once (resent while unanswered: applying twice is harmless).
    Apply(EcWrites),
    /// The writes of `tx` are durable here.
    Applied {
        tx: TxId,
    },
    // Between replicas of a partition in different DCs: the writes of the
    // sender's DC, every Δ_R, at increasing positions `upto` of its stream
    // (the position of the last one), and the resume and acknowledgement
    // of that stream ([`crate::recovery::stream`]).
    Replicate {
        upto: u64,
        txs: Vec<EcWrites>,
    },
    Stream(Control<u64>),
}

/// EC's replication streams: positions count the writes of the sender's DC
/// it applied, from 1.
impl StreamMsg<u64, EcWrites> for EcMsg {
    fn group(upto: u64, txs: Vec<EcWrites>) -> Self {
        EcMsg::Replicate { upto, txs }
    }

    fn control(c: Control<u64>) -> Self {
        EcMsg::Stream(c)
    }
}

impl Message for EcMsg {
    const CLASSES: &'static [MsgClass] = &[MsgClass::CLIENT, MsgClass::TRANSACTION, MsgClass::REPLICATION];

    fn class(&self) -> MsgClass {
        match self {
            EcMsg::ReadReq { .. }
            | EcMsg::ReadResp { .. }
            | EcMsg::CommitReq { .. }
            | EcMsg::CommitResp { .. }
            | EcMsg::CommitUnknown { .. }
            | EcMsg::TxError { .. } => MsgClass::CLIENT,
            EcMsg::Apply(_) | EcMsg::Applied { .. } => MsgClass::TRANSACTION,
            EcMsg::Replicate { .. } | EcMsg::Stream(_) => MsgClass::REPLICATION,
        }
    }

    fn is_background(&self) -> bool {
        matches!(self, EcMsg::Stream(Control::Ack { .. }))
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
