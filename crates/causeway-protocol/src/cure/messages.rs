//! What Cure and H-Cure bring to the family's messages
//! ([`crate::twopc::TxnMsg`]): a client starts a transaction with the last
//! snapshot it has seen (its last commit folded into the local entry), a
//! replicated transaction carries its commit vector, and every partition
//! gossips its version vector to the others of its DC.

use super::vector::VectorTs;
use crate::contract::{Key, Value};
use crate::ids::TxId;
use crate::twopc::{Family, FamilyMsg};
use serde::{Deserialize, Serialize};

/// Cure's types in the family.
pub struct CureFamily;

impl Family for CureFamily {
    type Snapshot = VectorTs;
    /// The client's last snapshot: the new one covers it.
    type Start = VectorTs;
    type Writes = TxWrites;
    type Gossip = Gossip;
}

/// Every message Cure and H-Cure send.
pub type CureMsg = FamilyMsg<CureFamily>;

/// The writes of one transaction to one partition, as replicated, with the
/// commit vector every version it creates carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxWrites {
    pub txid: TxId,
    pub commit_vector: VectorTs,
    pub writes: Vec<(Key, Option<Value>)>,
}

/// Inside a DC: a partition's version vector, to every other partition,
/// with the oldest snapshot its running transactions may read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gossip {
    pub vv: VectorTs,
    pub oldest: VectorTs,
}
