//! The PaRiS client session (Alg. 1): the family's session and coordinator
//! client, with PaRiS's causal past — the UST it has seen, the time of its
//! last commit, and the cache `WC` of its own writes the UST does not
//! include yet.

use super::messages::ParisFamily;
use super::Fault;
use crate::contract::{Key, SessionError, Value};
use crate::hlc::Timestamp;
use crate::session_core::SessionCore;
use crate::twopc::{CausalPast, CoordinatedClient, WriteCache};
use serde::{Deserialize, Serialize};

/// A PaRiS session.
pub type ParisSession = SessionCore<CoordinatedClient<ParisPast>>;

/// What a PaRiS session keeps between transactions.
#[derive(Debug, Default)]
pub struct ParisPast {
    fault: Fault,
    /// BPR: no cache — the next snapshot is at least the last commit, and
    /// reads wait until it is installed.
    blocking: bool,
    /// `ust_c`: the newest snapshot the session has read from.
    ust: Timestamp,
    /// `hwt_c`: the commit time of its last update transaction.
    hwt: Timestamp,
    /// `WC_c`: own writes with their commit time (`None`: a delete).
    wc: WriteCache,
}

impl ParisPast {
    /// A PaRiS session's past, or with `blocking` a BPR one's.
    pub fn new(fault: Fault, blocking: bool) -> Self {
        ParisPast { fault, blocking, ..ParisPast::default() }
    }

    /// Number of entries in the client cache.
    pub fn cache_len(&self) -> usize {
        self.wc.len()
    }

    /// The snapshot of the running (or last) transaction.
    pub fn ust(&self) -> Timestamp {
        self.ust
    }
}

/// What a PaRiS session token carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParisSessionState {
    pub ust: Timestamp,
    pub hwt: Timestamp,
    pub cache: Vec<(Key, Option<Value>, Timestamp)>,
}

impl CausalPast for ParisPast {
    type Family = ParisFamily;
    type State = ParisSessionState;

    /// Alg. 1, line 2. BPR's causal past includes its last commit.
    fn start_request(&self) -> Timestamp {
        if self.blocking {
            self.ust.max(self.hwt)
        } else {
            self.ust
        }
    }

    /// Alg. 1, lines 4–6: the new snapshot, and what it includes leaves
    /// the cache.
    fn adopt(&mut self, ust: Timestamp) -> bool {
        self.ust = ust;
        self.wc.prune_upto(ust);
        true
    }

    /// Alg. 1, line 12: after the write set and read set, the cache.
    fn cached(&self, key: &Key) -> Option<Option<Value>> {
        if self.fault == Fault::SkipClientCache || self.blocking {
            return None;
        }
        self.wc.get(key)
    }

    /// Alg. 1, lines 32–34: the writes join the cache with their commit
    /// time, replacing older entries of the same keys.
    fn committed(&mut self, ct: Timestamp, writes: Vec<(Key, Option<Value>)>) {
        self.hwt = ct;
        if !self.blocking {
            self.wc.committed(ct, writes);
        }
    }

    fn cached_beyond(&self, writes: &[(Key, Option<Value>)], limit: usize) -> Option<usize> {
        (!self.blocking).then(|| self.wc.len_after_beyond(writes, limit)).flatten()
    }

    fn last_commit(&self) -> Timestamp {
        self.hwt
    }

    fn export(&self) -> ParisSessionState {
        let cache = self.wc.export();
        ParisSessionState { ust: self.ust, hwt: self.hwt, cache }
    }

    fn import(&mut self, state: ParisSessionState) -> Result<(), SessionError> {
        self.ust = self.ust.max(state.ust);
        self.hwt = self.hwt.max(state.hwt);
        self.wc.import(state.cache);
        Ok(())
    }
}
