//! What a store holds: keys, values, and the order of their versions.

use crate::hlc::Timestamp;
use crate::ids::{DcId, TxId};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Keys and values are byte strings; `Bytes` makes copies into replication
/// messages cheap.
pub type Key = Bytes;
pub type Value = Bytes;

/// The total order of last-writer-wins: commit timestamp, then the DC the
/// write comes from, then the transaction id. Field order is the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CommitStamp {
    pub ts: Timestamp,
    pub dc: DcId,
    pub txid: TxId,
}
