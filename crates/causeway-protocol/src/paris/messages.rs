//! What PaRiS brings to the family's messages ([`crate::twopc::TxnMsg`]):
//! a client starts a transaction with the UST it has seen, a snapshot is
//! one timestamp, a replicated transaction carries the DC that coordinated
//! it (its versions' stamp everywhere), and UST's reports go up each DC's
//! tree, across between the roots of the DCs, and back down.

use crate::contract::{Key, Value};
use crate::hlc::Timestamp;
use crate::ids::{DcId, TxId};
use crate::twopc::{Family, FamilyMsg};
use serde::{Deserialize, Serialize};

/// PaRiS's types in the family: a snapshot and a start request are one
/// timestamp, the UST.
pub struct ParisFamily;

impl Family for ParisFamily {
    type Snapshot = Timestamp;
    type Start = Timestamp;
    type Writes = TxWrites;
    type Gossip = UstMsg;
}

/// Every message PaRiS sends.
pub type ParisMsg = FamilyMsg<ParisFamily>;

/// The writes of one transaction to one partition, as replicated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxWrites {
    pub txid: TxId,
    /// The DC of the transaction's coordinator: with the commit time and
    /// the id, the stamp of its versions in every DC (last-writer-wins by
    /// timestamp, then DC, then id), whichever DC's replica committed them.
    pub origin: DcId,
    pub writes: Vec<(Key, Option<Value>)>,
}

/// What a subtree, or a whole DC, reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UstReport {
    /// The minimum entry of the version vectors in it: every replica there
    /// has installed every transaction up to it, of every DC (Alg. 4,
    /// 38–39, aggregated).
    pub installed: Timestamp,
    /// The oldest snapshot a transaction running there may read.
    pub oldest: Timestamp,
}

impl UstReport {
    /// Both minima: what the two parts together guarantee.
    pub fn meet(self, other: UstReport) -> UstReport {
        UstReport { installed: self.installed.min(other.installed), oldest: self.oldest.min(other.oldest) }
    }

    /// Both maxima: two reports of one DC, the newer being tighter.
    pub fn join(self, other: UstReport) -> UstReport {
        UstReport { installed: self.installed.max(other.installed), oldest: self.oldest.max(other.oldest) }
    }
}

/// UST (Alg. 4, lines 38–43).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UstMsg {
    /// A subtree's minima, to its parent.
    Up(UstReport),
    /// A DC's minima (its GST and oldest snapshot), from its root to the
    /// roots of the other DCs.
    Across(UstReport),
    /// From the root down: the UST, and the oldest snapshot any DC's
    /// transactions may read (`S_old`, the GC bound).
    Down { ust: Timestamp, oldest: Timestamp },
}
