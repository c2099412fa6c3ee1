//! The apply loop's state (Alg. 4, lines 5–28): the version vector `VV`,
//! and how a group of transactions committed at one time becomes versions.

use super::messages::TxWrites;
use super::snapshot::{self, Snapshot};
use crate::contract::CommitStamp;
use crate::hlc::Timestamp;
use crate::ids::DcId;
use crate::mvstore::{MvStore, Version};

/// `VV`: for the local DC the version clock (the local snapshot this replica
/// has installed); for another DC `i` the latest update or heartbeat
/// received from the replica of this partition there.
#[derive(Clone, Debug)]
pub struct VersionVector {
    here: DcId,
    vv: Vec<Timestamp>,
    /// The DCs that hold a replica of this partition, but this one.
    remote: Vec<DcId>,
}

impl VersionVector {
    pub fn new(here: DcId, dcs: u16, remote: Vec<DcId>) -> Self {
        VersionVector { here, vv: vec![Timestamp::ZERO; usize::from(dcs)], remote }
    }

    pub fn get(&self, dc: DcId) -> Timestamp {
        self.vv[usize::from(dc.0)]
    }

    pub fn local(&self) -> Timestamp {
        self.get(self.here)
    }

    /// Moves entry `dc` up to `t` (never down).
    pub fn raise(&mut self, dc: DcId, t: Timestamp) {
        let e = &mut self.vv[usize::from(dc.0)];
        *e = (*e).max(t);
    }

    /// The smallest remote entry; a single DC has no remote items.
    pub fn remote_min(&self) -> Timestamp {
        self.remote.iter().map(|&dc| self.get(dc)).min().unwrap_or(Timestamp::MAX)
    }

    /// A time up to which this replica has every write of every DC: no
    /// version stamped at or below it can still arrive (FIFO links).
    pub fn settled(&self) -> Timestamp {
        self.local().min(self.remote_min())
    }

    pub fn as_slice(&self) -> &[Timestamp] {
        &self.vv
    }
}

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
