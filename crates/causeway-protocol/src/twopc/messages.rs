//! Every message of the family, named after the papers' listings.

use super::Family;
use crate::contract::{AbortReason, Key, Message, MsgClass, ReadTag, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::TxId;
use crate::recovery::{Control, SeedMsg, StreamMsg};
use serde::{Deserialize, Serialize};

/// The messages of a protocol of the family: `S` its snapshot, `Q` what a
/// client starts a transaction with, `W` a replicated transaction, `G` its
/// stabilization messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnMsg<S, Q, W, G> {
    // Client → coordinator (Alg. 1).
    StartTxReq(Q),
    TxReadReq {
        tx: TxId,
        keys: Vec<Key>,
    },
    CommitReq {
        tx: TxId,
        /// The commit time of the client's last update: the proposal
        /// exceeds it.
        hwt: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
    },
    /// One-way: a read-only or aborted transaction is over, so the
    /// coordinator can drop its context (and stop holding back GC).
    EndTx {
        tx: TxId,
    },

    // Coordinator → client.
    StartTxResp {
        tx: TxId,
        snapshot: S,
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
    /// The commit of `tx` was given up: it never takes effect.
    CommitAborted {
        tx: TxId,
        reason: AbortReason,
    },

    // Coordinator ↔ cohorts (Alg. 2 and 3).
    SliceReq {
        tx: TxId,
        /// The transaction's read round, repeated in the answer.
        round: u32,
        keys: Vec<Key>,
        snapshot: S,
    },
    SliceResp {
        tx: TxId,
        round: u32,
        values: Vec<(Key, Option<Value>)>,
    },
    /// `ht`: the proposal must exceed it (the snapshot and the client's
    /// last commit).
    ///
    /// `alone`: the transaction writes only this partition, so its proposal
    /// is its commit time and the cohort commits it by itself once its
    /// prepare is durable (one phase): the coordinator has nothing to
    /// decide, make durable or send back. Given with the cohort-clock time
    /// past which the cohort must not take it (the coordinator has given
    /// up on it, or will: the client is told its outcome is unknown, and it
    /// must not commit after that).
    PrepareReq {
        tx: TxId,
        snapshot: S,
        ht: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
        alone: Option<PhysicalMicros>,
    },
    PrepareResp {
        tx: TxId,
        pt: Timestamp,
    },
    /// Cohort → coordinator: the prepare of `tx` was not taken, and never
    /// will be (the cohort is re-seeding, or the prepare came past its
    /// deadline): the commit fails now rather than at the timeout.
    PrepareRefused {
        tx: TxId,
    },
    Commit {
        tx: TxId,
        ct: Timestamp,
    },

    // Recovery of a transaction caught by a crash.
    /// Cohort → coordinator: `tx` has been prepared here a long time; was
    /// it decided?
    Resolve {
        tx: TxId,
    },
    /// Coordinator → cohort: `tx` never commits.
    Abort {
        tx: TxId,
    },

    // Between replicas of a partition in different DCs (Alg. 4).
    Replicate {
        ct: Timestamp,
        txs: Vec<W>,
    },
    Heartbeat {
        t: Timestamp,
    },
    /// The resume and acknowledgement of the stream of `Replicate`s
    /// ([`crate::recovery::stream`]); positions are commit times.
    Stream(Control<Timestamp>),

    // Inside a DC.
    Stabilization(G),

    /// A replica whose disk is gone asks its partition's replicas in the
    /// other DCs, and its DC's, for its state ([`crate::recovery::seed`]).
    Seed(SeedMsg<Timestamp, W>),
}

impl<S, Q, W, G> From<SeedMsg<Timestamp, W>> for TxnMsg<S, Q, W, G> {
    fn from(m: SeedMsg<Timestamp, W>) -> Self {
        TxnMsg::Seed(m)
    }
}

/// The family's replication streams: positions are commit times.
impl<S, Q, W, G> StreamMsg<Timestamp, W> for TxnMsg<S, Q, W, G> {
    fn group(ct: Timestamp, txs: Vec<W>) -> Self {
        TxnMsg::Replicate { ct, txs }
    }

    fn control(c: Control<Timestamp>) -> Self {
        TxnMsg::Stream(c)
    }
}

/// The messages of family `F`.
pub type FamilyMsg<F> =
    TxnMsg<<F as Family>::Snapshot, <F as Family>::Start, <F as Family>::Writes, <F as Family>::Gossip>;

impl<S, Q, W, G> Message for TxnMsg<S, Q, W, G>
where
    S: super::Payload,
    Q: super::Payload,
    W: super::Payload,
    G: super::Payload,
{
    const CLASSES: &'static [MsgClass] =
        &[MsgClass::CLIENT, MsgClass::TRANSACTION, MsgClass::REPLICATION, MsgClass::STABILIZATION];

    fn class(&self) -> MsgClass {
        use TxnMsg::*;
        match self {
            StartTxReq(_)
            | TxReadReq { .. }
            | CommitReq { .. }
            | EndTx { .. }
            | StartTxResp { .. }
            | TxReadResp { .. }
            | CommitResp { .. }
            | TxError { .. }
            | CommitAborted { .. } => MsgClass::CLIENT,
            SliceReq { .. }
            | SliceResp { .. }
            | PrepareReq { .. }
            | PrepareResp { .. }
            | PrepareRefused { .. }
            | Commit { .. }
            | Resolve { .. }
            | Abort { .. } => MsgClass::TRANSACTION,
            Replicate { .. } | Heartbeat { .. } | Stream(_) | Seed(_) => MsgClass::REPLICATION,
            Stabilization(_) => MsgClass::STABILIZATION,
        }
    }

    fn is_background(&self) -> bool {
        matches!(
            self,
            TxnMsg::Heartbeat { .. }
                | TxnMsg::Stream(Control::Ack { .. })
                | TxnMsg::Resolve { .. }
                | TxnMsg::Stabilization(_)
        )
    }

    fn read_request(&self) -> Option<ReadTag> {
        match self {
            TxnMsg::SliceReq { tx, round, .. } => Some(ReadTag { tx: tx.0, round: *round }),
            _ => None,
        }
    }

    fn read_reply(&self) -> Option<ReadTag> {
        match self {
            TxnMsg::SliceResp { tx, round, .. } => Some(ReadTag { tx: tx.0, round: *round }),
            _ => None,
        }
    }
}
