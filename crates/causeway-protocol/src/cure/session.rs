//! The Cure client session: the shared session and coordinator client,
//! with Cure's causal past — the last snapshot it has seen, with its last
//! commit folded into the local entry. No cache is needed: the next snapshot
//! covers the client's own writes, and partitions make reads wait until
//! they have installed them.

use super::messages::CureFamily;
use super::vector::VectorTs;
use crate::contract::{Key, SessionError, Value};
use crate::hlc::Timestamp;
use crate::ids::DcId;
use crate::session_core::SessionCore;
use crate::twopc::{CausalPast, CoordinatedClient};
use serde::{Deserialize, Serialize};

/// A Cure (or H-Cure) session.
pub type CureSession = SessionCore<CoordinatedClient<CurePast>>;

/// What a Cure session keeps between transactions.
#[derive(Debug)]
pub struct CurePast {
    dc: DcId,
    /// The last snapshot, raised by the last commit in the local entry.
    seen: VectorTs,
    /// Commit time of the client's last update transaction.
    hwt: Timestamp,
}

impl CurePast {
    pub fn new(dc: DcId, dcs: u16) -> Self {
        CurePast { dc, seen: VectorTs::zero(dcs), hwt: Timestamp::ZERO }
    }

    /// The snapshot of the running (or last) transaction.
    pub fn snapshot(&self) -> &VectorTs {
        &self.seen
    }
}

/// What a Cure session token carries: the snapshot vector and the time of
/// the last commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CureSessionState {
    pub snapshot: VectorTs,
    pub hwt: Timestamp,
}

impl CausalPast for CurePast {
    type Family = CureFamily;
    type State = CureSessionState;

    fn start_request(&self) -> VectorTs {
        self.seen.clone()
    }

    fn adopt(&mut self, snapshot: VectorTs) -> bool {
        if snapshot.len() != self.seen.len() {
            return false;
        }
        self.seen.join(&snapshot);
        true
    }

    fn committed(&mut self, ct: Timestamp, _writes: Vec<(Key, Option<Value>)>) {
        self.hwt = ct;
        self.seen.raise(self.dc, ct);
    }

    fn last_commit(&self) -> Timestamp {
        self.hwt
    }

    fn export(&self) -> CureSessionState {
        CureSessionState { snapshot: self.seen.clone(), hwt: self.hwt }
    }

    fn import(&mut self, state: CureSessionState) -> Result<(), SessionError> {
        if state.snapshot.len() != self.seen.len() {
            return Err(SessionError::InvalidArgument(format!(
                "a snapshot of {} entries in a cluster of {} DCs",
                state.snapshot.len(),
                self.seen.len()
            )));
        }
        self.seen.join(&state.snapshot);
        self.hwt = self.hwt.max(state.hwt);
        Ok(())
    }
}
