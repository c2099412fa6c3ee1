//! Write-only transactions as the protocols whose clients read partitions
//! directly run them inside one DC (PrompTCC, Eiger): the client sends each
//! partition it writes its part, naming a coordinator among them; each
//! participant numbers the transaction above what the writer depends on (a
//! reading of its hybrid clock), makes the prepare durable and votes to the
//! coordinator; once every vote is in, the coordinator decides the commit
//! with every participant's number. The largest number is the commit
//! timestamp, and with the partition that gave it the last-writer-wins
//! stamp ([`stamp_of`]).
//!
//! A participant whose prepared transaction has no decision after a while
//! asks the coordinator, which asks every participant for its vote (PrompTCC
//! §VIII, without replica groups): one that has not prepared the id fences
//! it, durably, and the transaction is aborted; if all prepared it, it
//! commits with their numbers. Once every vote is in, commit is the only
//! outcome, whoever decides it.
//!
//! An outcome takes effect (the protocol installs the versions) only once
//! its record is durable: a participant tells itself (`logged`) when it is.
//!
//! * [`partition`] — a participant's and a coordinator's side ([`WriteOnly`]).
//! * [`client`] — the client's side of one commit ([`Commit`]).
//!
//! The protocol brings what a writer's dependencies are ([`Deps`]), and its
//! own messages and records for what this module sends and keeps
//! ([`TxnMessages`], [`TxnRecords`]): their encodings stay the protocol's.

pub mod client;
pub mod partition;

use crate::contract::{CommitStamp, Key, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{ClientId, DcId, PartitionId, TxId};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;

pub use client::{Commit, CommitTimer};
pub use partition::{Refused, Rules, Status, WriteOnly};

/// A write-only transaction, as the client names it: every participant
/// learns it from the client before any id could be handed out. `epoch` is
/// the session's first clock reading, so that a client id reused after a
/// restart names new transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WtxId {
    pub client: ClientId,
    pub epoch: u64,
    pub n: u64,
}

/// How far ahead of a partition's clock a timestamp from a client or a peer
/// may be: more is refused as impossible from an honest one (the clocks of
/// a DC agree far better), so that no input moves a clock, a snapshot or a
/// validity interval arbitrarily far.
pub const MAX_AHEAD_US: u64 = 60_000_000;

/// The latest timestamp a partition whose clock reads `now` accepts.
pub fn horizon(now: PhysicalMicros) -> Timestamp {
    Timestamp::from_physical(now.saturating_add(MAX_AHEAD_US))
}

/// A decided commit: each participant, in order, with the number it gave.
pub type Decided = Vec<(PartitionId, Timestamp)>;

/// The last-writer-wins stamp of a decided commit: its largest number, and
/// the first partition that gave it as the tie-breaker (two transactions
/// never get the same number from one partition, so the pair is unique). It
/// grows along causality: a transaction's numbers are above everything its
/// writer depended on.
pub fn stamp_of(dc: DcId, decided: &[(PartitionId, Timestamp)]) -> CommitStamp {
    let top = commit_ts(decided);
    let by = decided.iter().find(|&&(_, t)| t == top).map_or(PartitionId(0), |&(p, _)| p);
    CommitStamp { ts: top, dc, txid: TxId::new(by, top.0 & ((1 << 40) - 1)) }
}

/// The partition that gave a [`stamp_of`] stamp its number: a participant
/// whose entry is the stamp's timestamp.
pub fn top_partition(stamp: &CommitStamp) -> PartitionId {
    stamp.txid.coordinator()
}

/// A decided commit's timestamp: the largest number a participant gave.
pub fn commit_ts(decided: &[(PartitionId, Timestamp)]) -> Timestamp {
    decided.iter().map(|&(_, t)| t).max().unwrap_or(Timestamp::ZERO)
}

/// The number partition `me` gave a decided transaction.
pub fn own_number(decided: &[(PartitionId, Timestamp)], me: PartitionId) -> Option<Timestamp> {
    decided.iter().find(|&&(p, _)| p == me).map(|&(_, t)| t)
}

/// What a writer depends on, as a partition numbering its transaction
/// needs it: the number must exceed its ceiling.
pub trait Deps: Clone + Debug {
    fn ceiling(&self) -> Timestamp;
}

impl Deps for Timestamp {
    fn ceiling(&self) -> Timestamp {
        *self
    }
}

/// A transaction prepared at a partition (PrompTCC Alg. 2 lines 3–7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedTx<D> {
    pub tx: WtxId,
    pub seq: Timestamp,
    pub coordinator: PartitionId,
    pub participants: Vec<PartitionId>,
    pub deps: D,
    pub writes: Vec<(Key, Option<Value>)>,
}

/// The protocol's messages for what the write-only transactions say.
pub trait TxnMessages: Sized {
    /// To the client: `tx` committed at the sending partition, with every
    /// participant's number.
    fn committed(tx: WtxId, decided: Decided) -> Self;
    /// To the client: `tx` was given up; nothing of it will be visible.
    fn aborted(tx: WtxId) -> Self;
    /// A participant's vote to the coordinator, repeating what the
    /// coordinator needs if the client's own message to it is late.
    fn prepared(tx: WtxId, seq: Timestamp, participants: Vec<PartitionId>, client: ClientId) -> Self;
    /// The coordinator's decision: every participant's number.
    fn commit(tx: WtxId, decided: Decided) -> Self;
    /// A participant has waited too long for the decision of `tx`.
    fn resolve(tx: WtxId, participants: Vec<PartitionId>, client: ClientId) -> Self;
    /// The coordinator asks for a participant's vote in a termination.
    fn query(tx: WtxId) -> Self;
    /// The answer: the number `tx` got there, or none (fenced).
    fn vote(tx: WtxId, seq: Option<Timestamp>) -> Self;
    /// `tx` is given up: drop what was prepared.
    fn abort(tx: WtxId) -> Self;
    /// To itself: the outcome records up to the `upto`-th are durable.
    fn logged(upto: u64) -> Self;
    /// To a coordinator, where commits are acknowledged ([`Rules`]): the
    /// sender has committed `txs`. `None`: the protocol does not.
    fn done(txs: Vec<WtxId>) -> Option<Self> {
        let _ = txs;
        None
    }
    /// To the coordinator, where it gathers the commits ([`Rules`]): the
    /// sender has committed `tx`. `None`: the protocol does not.
    fn committed_here(tx: WtxId) -> Option<Self> {
        let _ = tx;
        None
    }
    /// From a coordinator: it has forgotten `txs`, and so may the
    /// participant.
    fn forget(txs: Vec<WtxId>) -> Option<Self> {
        let _ = txs;
        None
    }
}

/// The protocol's records for what the write-only transactions keep.
pub trait TxnRecords<D>: Sized {
    fn prepared(p: PreparedTx<D>) -> Self;
    /// The prepared `tx` committed with these numbers.
    fn committed(tx: WtxId, decided: Decided) -> Self;
    /// `tx` is given up here: dropped if prepared, refused if it comes.
    fn aborted(tx: WtxId) -> Self;
    /// In a checkpoint: a transaction committed here lately, and its
    /// coordinator.
    fn recent(tx: WtxId, decided: Decided, coordinator: PartitionId) -> Self;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_the_largest_number_and_the_partition_that_gave_it() {
        let s = stamp_of(DcId(0), &[(PartitionId(1), Timestamp(9)), (PartitionId(3), Timestamp(9))]);
        assert_eq!(s.ts, Timestamp(9));
        assert_eq!(s.txid, TxId::new(PartitionId(1), 9));
        let t = stamp_of(DcId(0), &[(PartitionId(3), Timestamp(9))]);
        assert_ne!(s, t, "same number from two partitions: two transactions, two stamps");
    }
}
