//! The Wren client session (Alg. 1): the snapshot it has seen, its write
//! set, read set and the cache of its own writes not yet in the local stable
//! snapshot (CANToR).

use super::messages::WrenMsg;
use super::Fault;
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

pub struct WrenSession {
    id: ClientId,
    coordinator: ReplicaId,
    fault: Fault,
    state: State,
    tx: Option<TxId>,
    lst: Timestamp,
    rst: Timestamp,
    /// Commit time of the client's last update transaction.
    hwt: Timestamp,
    /// Write set WS and read set RS of the running transaction.
    txn: TxnBuffer,
    /// The client cache `WC`: own writes with their commit time.
    wc: FxHashMap<Key, (Value, Timestamp)>,
}

impl WrenSession {
    pub fn new(id: ClientId, coordinator: ReplicaId, fault: Fault) -> Self {
        assert_eq!(id.dc, coordinator.dc, "a session talks to a coordinator in its own DC");
        WrenSession {
            id,
            coordinator,
            fault,
            state: State::Idle,
            tx: None,
            lst: Timestamp::ZERO,
            rst: Timestamp::ZERO,
            hwt: Timestamp::ZERO,
            txn: TxnBuffer::default(),
            wc: FxHashMap::default(),
        }
    }

    /// Number of entries in the client cache.
    pub fn cache_len(&self) -> usize {
        self.wc.len()
    }

    /// The snapshot of the running (or last) transaction: `(lst, rst)`.
    pub fn snapshot(&self) -> (Timestamp, Timestamp) {
        (self.lst, self.rst)
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

    /// Alg. 1, line 11: write set, read set, cache — in this order.
    fn local_value(&self, key: &Key) -> Option<Option<Value>> {
        if let Some(v) = self.txn.known(key) {
            return Some(v);
        }
        if self.fault == Fault::SkipClientCache {
            return None;
        }
        self.wc.get(key).map(|(v, _)| Some(v.clone()))
    }

    /// Completes a READ: what was read joins the read set (Alg. 1, line 18)
    /// and the values come back in the order the keys were asked for.
    fn finish_read(&mut self, keys: Vec<Key>, values: FxHashMap<Key, Option<Value>>) -> SessionEvent {
        match self.txn.finish_read(keys, values, true) {
            Some(values) => {
                self.state = State::Active;
                SessionEvent::Read(values)
            }
            None => {
                // The coordinator left a key out: the transaction cannot
                // trust this answer.
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

/// What a Wren session token carries: the snapshot, the last commit time and
/// the cache of own writes the local stable snapshot may not include yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrenSessionState {
    pub lst: Timestamp,
    pub rst: Timestamp,
    pub hwt: Timestamp,
    pub cache: Vec<(Key, Value, Timestamp)>,
}

impl Session for WrenSession {
    type Message = WrenMsg;
    type State = WrenSessionState;

    fn id(&self) -> ClientId {
        self.id
    }

    /// Alg. 1, lines 1–7 (the reply is handled in `on_message`).
    fn begin(&mut self, out: &mut SessionOut<WrenMsg>) -> Result<Option<SessionEvent>, SessionError> {
        self.idle()?;
        self.state = State::Starting;
        out.push((self.to_coordinator(), WrenMsg::StartTxReq { lst: self.lst, rst: self.rst }));
        Ok(None)
    }

    /// Alg. 1, lines 8–20.
    fn read(&mut self, keys: &[Key], out: &mut SessionOut<WrenMsg>) -> Result<Option<SessionEvent>, SessionError> {
        let tx = self.active_tx()?;
        let (local, remote) = self.txn.plan_read(keys, |k| self.local_value(k))?;
        if remote.is_empty() {
            return Ok(Some(self.finish_read(keys.to_vec(), local)));
        }
        self.state = State::Reading { keys: keys.to_vec(), local };
        out.push((self.to_coordinator(), WrenMsg::TxReadReq { tx, keys: remote }));
        Ok(None)
    }

    /// Alg. 1, lines 21–25.
    fn write(&mut self, key: Key, value: Value) -> Result<(), SessionError> {
        self.active_tx()?;
        self.txn.write(key, value)
    }

    /// Alg. 1, lines 26–32. A transaction without writes commits locally.
    fn commit(&mut self, out: &mut SessionOut<WrenMsg>) -> Result<Option<SessionEvent>, SessionError> {
        let tx = self.active_tx()?;
        if self.txn.writes().is_empty() {
            out.push((self.to_coordinator(), WrenMsg::EndTx { tx }));
            self.end_transaction();
            return Ok(Some(SessionEvent::Committed(None)));
        }
        self.state = State::Committing;
        out.push((self.to_coordinator(), WrenMsg::CommitReq { tx, hwt: self.hwt, writes: self.txn.writes().to_vec() }));
        Ok(None)
    }

    fn abort(&mut self, out: &mut SessionOut<WrenMsg>) -> Result<(), SessionError> {
        let tx = self.active_tx()?;
        out.push((self.to_coordinator(), WrenMsg::EndTx { tx }));
        self.end_transaction();
        Ok(())
    }

    fn export_state(&self) -> Result<WrenSessionState, SessionError> {
        self.idle()?;
        let mut cache: Vec<_> = self.wc.iter().map(|(k, (v, ct))| (k.clone(), v.clone(), *ct)).collect();
        cache.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(WrenSessionState { lst: self.lst, rst: self.rst, hwt: self.hwt, cache })
    }

    fn import_state(&mut self, state: WrenSessionState) -> Result<(), SessionError> {
        self.idle()?;
        self.lst = self.lst.max(state.lst);
        self.rst = self.rst.max(state.rst);
        self.hwt = self.hwt.max(state.hwt);
        for (key, value, ct) in state.cache {
            match self.wc.get(&key) {
                Some((_, mine)) if *mine >= ct => {}
                _ => {
                    self.wc.insert(key, (value, ct));
                }
            }
        }
        Ok(())
    }

    fn on_message(&mut self, from: Addr, msg: WrenMsg, _out: &mut SessionOut<WrenMsg>) -> Option<SessionEvent> {
        if from != self.to_coordinator() {
            return None;
        }
        match (msg, std::mem::replace(&mut self.state, State::Idle)) {
            (WrenMsg::StartTxResp { tx, snapshot }, State::Starting) => {
                self.lst = snapshot.lt;
                self.rst = snapshot.rt;
                self.tx = Some(tx);
                // (The write and read sets were emptied when the last
                // transaction ended.)
                // Alg. 1, line 7: what the snapshot includes leaves the cache.
                let lst = self.lst;
                self.wc.retain(|_, (_, ct)| *ct > lst);
                self.state = State::Active;
                Some(SessionEvent::Started)
            }
            (WrenMsg::TxReadResp { tx, values }, State::Reading { keys, mut local }) if Some(tx) == self.tx => {
                local.extend(values);
                Some(self.finish_read(keys, local))
            }
            (WrenMsg::CommitResp { tx, ct }, State::Committing) if Some(tx) == self.tx => {
                self.hwt = ct;
                for (k, v) in self.txn.take_writes() {
                    self.wc.insert(k, (v, ct));
                }
                self.end_transaction();
                Some(SessionEvent::Committed(Some(CommitStamp { ts: ct, dc: self.coordinator.dc, txid: tx })))
            }
            (WrenMsg::TxError { tx, error }, state)
                if state != State::Idle && state != State::Active && (tx.is_none() || tx == self.tx) =>
            {
                self.end_transaction();
                Some(SessionEvent::Failed(error))
            }
            (_, state) => {
                // Stale or unexpected: keep the state as it was.
                self.state = state;
                None
            }
        }
    }
}
