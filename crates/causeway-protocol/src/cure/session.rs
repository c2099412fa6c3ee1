//! The Cure client session: the last snapshot it has seen (with its last
//! commit folded into the local entry), its write set and read set. No
//! cache is needed: the next snapshot covers the client's own writes, and
//! partitions make reads wait until they have installed them.

use super::messages::CureMsg;
use super::vector::VectorTs;
use crate::engine::{CommitStamp, Key, Session, SessionError, SessionEvent, SessionOut, Value};
use crate::hlc::Timestamp;
use crate::ids::{Addr, ClientId, ReplicaId, TxId};
use crate::txn::TxnBuffer;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Starting,
    Active,
    /// Waiting for the coordinator's answer to a read; `local` holds what the
    /// session could answer itself, `keys` the order the caller asked in.
    Reading {
        keys: Vec<Key>,
        local: FxHashMap<Key, Option<Value>>,
    },
    Committing,
}

pub struct CureSession {
    id: ClientId,
    coordinator: ReplicaId,
    state: State,
    tx: Option<TxId>,
    /// The last snapshot, raised by the last commit in the local entry.
    seen: VectorTs,
    /// Commit time of the client's last update transaction.
    hwt: Timestamp,
    /// Write set and read set of the running transaction.
    txn: TxnBuffer,
}

/// What a Cure session token carries: the snapshot vector and the time of
/// the last commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CureSessionState {
    pub snapshot: VectorTs,
    pub hwt: Timestamp,
}

impl CureSession {
    pub fn new(id: ClientId, coordinator: ReplicaId, dcs: u16) -> Self {
        assert_eq!(id.dc, coordinator.dc, "a session talks to a coordinator in its own DC");
        CureSession {
            id,
            coordinator,
            state: State::Idle,
            tx: None,
            seen: VectorTs::zero(dcs),
            hwt: Timestamp::ZERO,
            txn: TxnBuffer::default(),
        }
    }

    /// The snapshot of the running (or last) transaction.
    pub fn snapshot(&self) -> &VectorTs {
        &self.seen
    }

    fn to_coordinator(&self) -> Addr {
        Addr::Replica(self.coordinator)
    }

    fn active_tx(&self) -> Result<TxId, SessionError> {
        match (&self.state, self.tx) {
            (State::Active, Some(tx)) => Ok(tx),
            (State::Idle, _) => Err(SessionError::NoActiveTransaction),
            _ => Err(SessionError::OperationInProgress),
        }
    }

    fn finish_read(&mut self, keys: Vec<Key>, values: FxHashMap<Key, Option<Value>>) -> SessionEvent {
        match self.txn.finish_read(keys, values, true) {
            Some(values) => {
                self.state = State::Active;
                SessionEvent::Read(values)
            }
            None => {
                self.end_transaction();
                SessionEvent::Failed(SessionError::InvalidArgument("the coordinator's reply misses a key".into()))
            }
        }
    }

    fn idle(&self) -> Result<(), SessionError> {
        match self.state {
            State::Idle => Ok(()),
            State::Active => Err(SessionError::TransactionActive),
            _ => Err(SessionError::OperationInProgress),
        }
    }

    fn end_transaction(&mut self) {
        self.state = State::Idle;
        self.tx = None;
        self.txn.clear();
    }
}

impl Session for CureSession {
    type Message = CureMsg;
    type State = CureSessionState;

    fn id(&self) -> ClientId {
        self.id
    }

    fn begin(&mut self, out: &mut SessionOut<CureMsg>) -> Result<Option<SessionEvent>, SessionError> {
        self.idle()?;
        self.state = State::Starting;
        out.push((self.to_coordinator(), CureMsg::StartTxReq { seen: self.seen.clone() }));
        Ok(None)
    }

    fn read(&mut self, keys: &[Key], out: &mut SessionOut<CureMsg>) -> Result<Option<SessionEvent>, SessionError> {
        let tx = self.active_tx()?;
        let (local, remote) = self.txn.plan_read(keys, |k| self.txn.known(k))?;
        if remote.is_empty() {
            return Ok(Some(self.finish_read(keys.to_vec(), local)));
        }
        self.state = State::Reading { keys: keys.to_vec(), local };
        out.push((self.to_coordinator(), CureMsg::TxReadReq { tx, keys: remote }));
        Ok(None)
    }

    fn write(&mut self, key: Key, value: Value) -> Result<(), SessionError> {
        self.active_tx()?;
        self.txn.write(key, value)
    }

    fn commit(&mut self, out: &mut SessionOut<CureMsg>) -> Result<Option<SessionEvent>, SessionError> {
        let tx = self.active_tx()?;
        if self.txn.writes().is_empty() {
            out.push((self.to_coordinator(), CureMsg::EndTx { tx }));
            self.end_transaction();
            return Ok(Some(SessionEvent::Committed(None)));
        }
        self.state = State::Committing;
        out.push((self.to_coordinator(), CureMsg::CommitReq { tx, hwt: self.hwt, writes: self.txn.take_writes() }));
        Ok(None)
    }

    fn abort(&mut self, out: &mut SessionOut<CureMsg>) -> Result<(), SessionError> {
        let tx = self.active_tx()?;
        out.push((self.to_coordinator(), CureMsg::EndTx { tx }));
        self.end_transaction();
        Ok(())
    }

    fn export_state(&self) -> Result<CureSessionState, SessionError> {
        self.idle()?;
        Ok(CureSessionState { snapshot: self.seen.clone(), hwt: self.hwt })
    }

    fn import_state(&mut self, state: CureSessionState) -> Result<(), SessionError> {
        self.idle()?;
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

    fn on_message(&mut self, from: Addr, msg: CureMsg, _out: &mut SessionOut<CureMsg>) -> Option<SessionEvent> {
        if from != self.to_coordinator() {
            return None;
        }
        match (msg, std::mem::replace(&mut self.state, State::Idle)) {
            (CureMsg::StartTxResp { tx, snapshot }, State::Starting) if snapshot.len() == self.seen.len() => {
                self.seen.join(&snapshot);
                self.tx = Some(tx);
                self.state = State::Active;
                Some(SessionEvent::Started)
            }
            (CureMsg::TxReadResp { tx, values }, State::Reading { keys, mut local }) if Some(tx) == self.tx => {
                local.extend(values);
                Some(self.finish_read(keys, local))
            }
            (CureMsg::CommitResp { tx, ct }, State::Committing) if Some(tx) == self.tx => {
                self.hwt = ct;
                self.seen.raise(self.coordinator.dc, ct);
                self.end_transaction();
                Some(SessionEvent::Committed(Some(CommitStamp { ts: ct, dc: self.coordinator.dc, txid: tx })))
            }
            (CureMsg::TxError { tx, error }, state)
                if state != State::Idle && state != State::Active && (tx.is_none() || tx == self.tx) =>
            {
                self.end_transaction();
                Some(SessionEvent::Failed(error))
            }
            (_, state) => {
                self.state = state;
                None
            }
        }
    }
}
