//! What Wren brings to the family's messages ([`crate::twopc::TxnMsg`]):
//! a client starts a transaction with the stable times it has seen, a
//! replicated transaction carries the remote dependency time of its
//! versions, and BiST's reports go up and down the tree of a DC.

use super::snapshot::Snapshot;
use crate::contract::{Key, Value};
use crate::hlc::Timestamp;
use crate::ids::TxId;
use crate::twopc::{Family, FamilyMsg};
use serde::{Deserialize, Serialize};

/// Wren's types in the family.
pub struct WrenFamily;

impl Family for WrenFamily {
    type Snapshot = Snapshot;
    type Start = StartFrom;
    type Writes = TxWrites;
    type Gossip = BistMsg;
}

/// Every message Wren sends.
pub type WrenMsg = FamilyMsg<WrenFamily>;

/// `StartTxReq` (Alg. 1, line 3): the stable times the client has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartFrom {
    pub lst: Timestamp,
    pub rst: Timestamp,
}

/// The writes of one transaction to one partition, as replicated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxWrites {
    pub txid: TxId,
    /// The remote dependency time of every version the transaction creates.
    pub rdt: Timestamp,
    pub writes: Vec<(Key, Option<Value>)>,
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

/// BiST inside a DC (Alg. 4, lines 29–32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BistMsg {
    /// A subtree's minima, to its parent.
    Up(StableReport),
    /// The DC-wide minima, from the root down: the new LST, RST and `S_old`.
    Down { lst: Timestamp, rst: Timestamp, oldest: Snapshot },
}
