//! A replica's version vector `VV` (Wren's and PaRiS's Alg. 4): how far it
//! has installed its own commits, and how far it has received each peer's.
//! Under partial replication (PaRiS) only the DCs that hold the partition
//! have entries that count.

use crate::hlc::Timestamp;
use crate::ids::DcId;

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
    /// With no remote DC, the local entry: nothing from elsewhere is
    /// missing below it. (Not `Timestamp::MAX`: the value travels in
    /// stabilization messages, where a timestamp that far ahead of every
    /// clock would be held back as a poisoned one.)
    pub fn remote_min(&self) -> Timestamp {
        self.remote.iter().map(|&dc| self.get(dc)).min().unwrap_or_else(|| self.local())
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
