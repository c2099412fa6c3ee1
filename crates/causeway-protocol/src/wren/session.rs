//! The Wren client session (Alg. 1): the shared session and coordinator
//! client, with Wren's causal past — the snapshot it has seen, the time of
//! its last commit, and the cache of its own writes not yet in the local
//! stable snapshot (CANToR).

use super::messages::{StartFrom, WrenFamily};
use super::snapshot::Snapshot;
use super::Fault;
use crate::contract::{Key, SessionError, Value};
use crate::hlc::Timestamp;
use crate::session_core::SessionCore;
use crate::twopc::{CausalPast, CoordinatedClient, WriteCache};
use serde::{Deserialize, Serialize};

/// A Wren session.
pub type WrenSession = SessionCore<CoordinatedClient<WrenPast>>;

/// What a Wren session keeps between transactions.
#[derive(Debug, Default)]
pub struct WrenPast {
    fault: Fault,
    lst: Timestamp,
    rst: Timestamp,
    /// Commit time of the client's last update transaction.
    hwt: Timestamp,
    /// The client cache `WC`: own writes with their commit time (`None`:
    /// a delete).
    wc: WriteCache,
}

impl WrenPast {
    pub fn new(fault: Fault) -> Self {
        WrenPast { fault, ..WrenPast::default() }
    }

    /// Number of entries in the client cache.
    pub fn cache_len(&self) -> usize {
        self.wc.len()
    }

    /// The snapshot of the running (or last) transaction: `(lst, rst)`.
    pub fn snapshot(&self) -> (Timestamp, Timestamp) {
        (self.lst, self.rst)
    }
}

/// What a Wren session token carries: the snapshot, the last commit time and
/// the cache of own writes the local stable snapshot may not include yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrenSessionState {
    pub lst: Timestamp,
    pub rst: Timestamp,
    pub hwt: Timestamp,
    pub cache: Vec<(Key, Option<Value>, Timestamp)>,
}

impl CausalPast for WrenPast {
    type Family = WrenFamily;
    type State = WrenSessionState;

    fn start_request(&self) -> StartFrom {
        StartFrom { lst: self.lst, rst: self.rst }
    }

    /// Alg. 1, lines 5–7: the new snapshot, and what it includes leaves
    /// the cache.
    fn adopt(&mut self, snapshot: Snapshot) -> bool {
        self.lst = snapshot.lt;
        self.rst = snapshot.rt;
        self.wc.prune_upto(self.lst);
        true
    }

    /// Alg. 1, line 11: after the write set and read set, the cache.
    fn cached(&self, key: &Key) -> Option<Option<Value>> {
        if self.fault == Fault::SkipClientCache {
            return None;
        }
        self.wc.get(key)
    }

    /// Alg. 1, lines 30–32: the writes join the cache with their commit time.
    fn committed(&mut self, ct: Timestamp, writes: Vec<(Key, Option<Value>)>) {
        self.hwt = ct;
        self.wc.committed(ct, writes);
    }

    fn cached_beyond(&self, writes: &[(Key, Option<Value>)], limit: usize) -> Option<usize> {
        self.wc.len_after_beyond(writes, limit)
    }

    fn last_commit(&self) -> Timestamp {
        self.hwt
    }

    fn export(&self) -> WrenSessionState {
        let cache = self.wc.export();
        WrenSessionState { lst: self.lst, rst: self.rst, hwt: self.hwt, cache }
    }

    fn import(&mut self, state: WrenSessionState) -> Result<(), SessionError> {
        self.lst = self.lst.max(state.lst);
        self.rst = self.rst.max(state.rst);
        self.hwt = self.hwt.max(state.hwt);
        self.wc.import(state.cache);
        Ok(())
    }
}
