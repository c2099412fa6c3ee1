//! The EC client session: reads go straight to the partitions of its DC in
//! one round and return whatever each has applied; writes are buffered and
//! sent to the coordinator at commit.

use super::messages::EcMsg;
use crate::engine::{CommitStamp, Key, Session, SessionError, SessionEvent, SessionOut, Value};
use crate::hlc::Timestamp;
use crate::ids::{Addr, ClientId, ReplicaId};
use crate::topology::Topology;
use crate::txn::TxnBuffer;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Active,
    /// Waiting for `waiting` partitions to answer read `tag`.
    Reading {
        tag: u64,
        waiting: usize,
        keys: Vec<Key>,
        values: FxHashMap<Key, Option<Value>>,
    },
    Committing,
}

pub struct EcSession {
    id: ClientId,
    coordinator: ReplicaId,
    topology: Arc<Topology>,
    state: State,
    next_tag: u64,
    /// Commit time of the last update transaction: the next one is later.
    hwt: Timestamp,
    /// The write set (EC keeps no read set: every read returns the newest
    /// version, even of a key read before).
    txn: TxnBuffer,
}

/// What an EC session token carries: only the time of its last commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcSessionState {
    pub hwt: Timestamp,
}

impl EcSession {
    pub fn new(id: ClientId, coordinator: ReplicaId, topology: Arc<Topology>) -> Self {
        assert_eq!(id.dc, coordinator.dc, "a session talks to replicas in its own DC");
        EcSession {
            id,
            coordinator,
            topology,
            state: State::Idle,
            next_tag: 0,
            hwt: Timestamp::ZERO,
            txn: TxnBuffer::default(),
        }
    }

    fn active(&self) -> Result<(), SessionError> {
        match self.state {
            State::Active => Ok(()),
            State::Idle => Err(SessionError::NoActiveTransaction),
            _ => Err(SessionError::OperationInProgress),
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
        self.txn.clear();
    }

    fn finish_read(&mut self, keys: Vec<Key>, values: FxHashMap<Key, Option<Value>>) -> SessionEvent {
        match self.txn.finish_read(keys, values, false) {
            Some(values) => {
                self.state = State::Active;
                SessionEvent::Read(values)
            }
            None => {
                self.end_transaction();
                SessionEvent::Failed(SessionError::InvalidArgument("a reply misses a key".into()))
            }
        }
    }
}

impl Session for EcSession {
    type Message = EcMsg;
    type State = EcSessionState;

    fn id(&self) -> ClientId {
        self.id
    }

    /// No snapshot to fetch: the transaction starts at once.
    fn begin(&mut self, _out: &mut SessionOut<EcMsg>) -> Result<Option<SessionEvent>, SessionError> {
        self.idle()?;
        self.state = State::Active;
        Ok(Some(SessionEvent::Started))
    }

    fn read(&mut self, keys: &[Key], out: &mut SessionOut<EcMsg>) -> Result<Option<SessionEvent>, SessionError> {
        self.active()?;
        let (values, remote) = self.txn.plan_read(keys, |k| self.txn.written(k).map(|v| Some(v.clone())))?;
        if remote.is_empty() {
            return Ok(Some(self.finish_read(keys.to_vec(), values)));
        }
        self.next_tag += 1;
        let tag = self.next_tag;
        let slices = self.topology.group_by_partition(remote, |k| k);
        let waiting = slices.len();
        for (partition, keys) in slices {
            out.push((Addr::Replica(ReplicaId { dc: self.id.dc, partition }), EcMsg::ReadReq { tag, keys }));
        }
        self.state = State::Reading { tag, waiting, keys: keys.to_vec(), values };
        Ok(None)
    }

    fn write(&mut self, key: Key, value: Value) -> Result<(), SessionError> {
        self.active()?;
        self.txn.write(key, value)
    }

    fn commit(&mut self, out: &mut SessionOut<EcMsg>) -> Result<Option<SessionEvent>, SessionError> {
        self.active()?;
        if self.txn.writes().is_empty() {
            self.end_transaction();
            return Ok(Some(SessionEvent::Committed(None)));
        }
        self.state = State::Committing;
        let writes = self.txn.take_writes();
        out.push((Addr::Replica(self.coordinator), EcMsg::CommitReq { hwt: self.hwt, writes }));
        Ok(None)
    }

    fn abort(&mut self, _out: &mut SessionOut<EcMsg>) -> Result<(), SessionError> {
        self.active()?;
        self.end_transaction();
        Ok(())
    }

    fn export_state(&self) -> Result<EcSessionState, SessionError> {
        self.idle()?;
        Ok(EcSessionState { hwt: self.hwt })
    }

    fn import_state(&mut self, state: EcSessionState) -> Result<(), SessionError> {
        self.idle()?;
        self.hwt = self.hwt.max(state.hwt);
        Ok(())
    }

    fn on_message(&mut self, from: Addr, msg: EcMsg, _out: &mut SessionOut<EcMsg>) -> Option<SessionEvent> {
        let from_my_dc = matches!(from, Addr::Replica(r) if r.dc == self.id.dc);
        match (msg, &mut self.state) {
            (EcMsg::ReadResp { tag, values: slice }, State::Reading { tag: want, waiting, values, .. })
                if from_my_dc && tag == *want =>
            {
                values.extend(slice);
                *waiting -= 1;
                if *waiting > 0 {
                    return None;
                }
                let State::Reading { keys, values, .. } = std::mem::replace(&mut self.state, State::Active) else {
                    unreachable!()
                };
                Some(self.finish_read(keys, values))
            }
            (EcMsg::CommitResp { tx, ct }, State::Committing) if from == Addr::Replica(self.coordinator) => {
                self.hwt = self.hwt.max(ct);
                self.end_transaction();
                Some(SessionEvent::Committed(Some(CommitStamp { ts: ct, dc: self.id.dc, txid: tx })))
            }
            (EcMsg::TxError { error }, State::Committing) if from == Addr::Replica(self.coordinator) => {
                self.end_transaction();
                Some(SessionEvent::Failed(error))
            }
            _ => None,
        }
    }
}
