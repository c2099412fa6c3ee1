//! The apply loop (Alg. 4, lines 5–28): how a group of transactions
//! committed at one time becomes versions (the version vector `VV` is the
//! family's, [`crate::twopc::VersionVector`]).

use super::messages::TxWrites;
use super::snapshot::{self, Snapshot};
use crate::contract::CommitStamp;
use crate::hlc::Timestamp;
use crate::ids::DcId;
use crate::mvstore::{MvStore, Version};

/// `UPDATE` of Alg. 4 for every write of a group of transactions that
/// committed at `ct` in DC `source`: create the versions, then collect what
/// `s_old` no longer needs on their chains. Returns how many transactions.
pub fn install(
    store: &mut MvStore<Timestamp>,
    here: DcId,
    s_old: Snapshot,
    ct: Timestamp,
    source: DcId,
    txs: &[TxWrites],
) -> u64 {
    for tx in txs {
        let stamp = CommitStamp { ts: ct, dc: source, txid: tx.txid };
        for (key, value) in &tx.writes {
            let version = Version { value: value.clone(), stamp, meta: tx.rdt };
            store.insert(key.clone(), version, |v| snapshot::visible(here, v, s_old));
        }
    }
    txs.len() as u64
}
