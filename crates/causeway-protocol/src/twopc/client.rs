//! The client's side of a coordinator-based protocol (the papers' Alg. 1):
//! every request goes to one coordinator replica of the client's DC, which
//! answers for the cluster. What differs between the protocols is what the
//! session keeps of its causal past between transactions ([`CausalPast`]).

use super::messages::{FamilyMsg, TxnMsg};
use super::Family;
use crate::contract::{CommitStamp, Effects, Key, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, ReplicaId, TxId};
use crate::session_core::{Awaiting, ClientRole, Reply};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::convert::Infallible;
use std::fmt::Debug;

/// What a session of the family keeps between transactions, and how a new
/// transaction's snapshot and a commit change it.
pub trait CausalPast: Send + 'static {
    type Family: Family;
    /// What a session token carries.
    type State: Clone + Debug + Serialize + DeserializeOwned + Send + 'static;

    /// What a transaction starts with: what the session has seen.
    fn start_request(&self) -> <Self::Family as Family>::Start;

    /// Adopts the snapshot of the transaction that starts; `false` if it is
    /// no snapshot of this cluster (the answer is then ignored).
    fn adopt(&mut self, snapshot: <Self::Family as Family>::Snapshot) -> bool;

    /// What the session knows of `key` from its own past writes, if it
    /// keeps any (Wren's cache).
    fn cached(&self, _key: &Key) -> Option<Option<Value>> {
        None
    }

    /// The session's transaction committed `writes` at `ct`.
    fn committed(&mut self, ct: Timestamp, writes: Vec<(Key, Option<Value>)>);

    /// How many writes the session's cache would hold once `writes`
    /// commit, if it keeps one and they would be more than `limit`.
    fn cached_beyond(&self, _writes: &[(Key, Option<Value>)], _limit: usize) -> Option<usize> {
        None
    }

    /// The commit time of the session's last update: its next one commits
    /// above it.
    fn last_commit(&self) -> Timestamp;

    fn export(&self) -> Self::State;

    fn import(&mut self, state: Self::State) -> Result<(), SessionError>;
}

/// A session's side of the family: one coordinator, one transaction id at
/// a time, and the causal past `C`.
pub struct CoordinatedClient<C> {
    coordinator: ReplicaId,
    tx: Option<TxId>,
    past: C,
}

impl<C: CausalPast> CoordinatedClient<C> {
    pub fn new(coordinator: ReplicaId, past: C) -> Self {
        CoordinatedClient { coordinator, tx: None, past }
    }

    pub fn past(&self) -> &C {
        &self.past
    }

    fn to_coordinator(&self) -> Addr {
        Addr::Replica(self.coordinator)
    }
}

type Out<C> = Effects<FamilyMsg<<C as CausalPast>::Family>, Infallible>;

impl<C: CausalPast> ClientRole for CoordinatedClient<C> {
    type Message = FamilyMsg<C::Family>;
    type Timer = Infallible;
    type State = C::State;

    /// Alg. 1, lines 1–7 (the reply is handled in `on_reply`).
    fn start(&mut self, _now: PhysicalMicros, out: &mut Out<C>) -> bool {
        out.send(self.to_coordinator(), TxnMsg::StartTxReq(self.past.start_request()));
        false
    }

    fn cached(&self, key: &Key) -> Option<Option<Value>> {
        self.past.cached(key)
    }

    /// Alg. 1, lines 8–20: what the session could not answer itself.
    fn request_read(&mut self, _now: PhysicalMicros, _round: u32, keys: Vec<Key>, out: &mut Out<C>) {
        if let Some(tx) = self.tx {
            out.send(self.to_coordinator(), TxnMsg::TxReadReq { tx, keys });
        }
    }

    /// Alg. 1, lines 26–32.
    fn request_commit(&mut self, _now: PhysicalMicros, writes: &[(Key, Option<Value>)], out: &mut Out<C>) {
        if let Some(tx) = self.tx {
            let msg = TxnMsg::CommitReq { tx, hwt: self.past.last_commit(), writes: writes.to_vec() };
            out.send(self.to_coordinator(), msg);
        }
    }

    /// The coordinator may forget the transaction.
    fn release(&mut self, _now: PhysicalMicros, out: &mut Out<C>) {
        if let Some(tx) = self.tx {
            out.send(self.to_coordinator(), TxnMsg::EndTx { tx });
        }
    }

    fn on_reply(
        &mut self,
        _now: PhysicalMicros,
        from: Addr,
        msg: Self::Message,
        awaiting: Awaiting,
        _out: &mut Out<C>,
    ) -> Option<Reply> {
        if from != self.to_coordinator() {
            return None;
        }
        match (msg, awaiting) {
            (TxnMsg::StartTxResp { tx, snapshot }, Awaiting::Start) => {
                if !self.past.adopt(snapshot) {
                    return None;
                }
                self.tx = Some(tx);
                Some(Reply::Started)
            }
            (TxnMsg::TxReadResp { tx, values }, Awaiting::Read) if Some(tx) == self.tx => Some(Reply::Values(values)),
            (TxnMsg::CommitResp { tx, ct }, Awaiting::Commit) if Some(tx) == self.tx => {
                Some(Reply::Committed(CommitStamp { ts: ct, dc: self.coordinator.dc, txid: tx }))
            }
            (TxnMsg::TxError { tx, error }, _) if tx.is_none() || tx == self.tx => Some(Reply::Failed(error)),
            (TxnMsg::CommitAborted { tx, reason }, Awaiting::Commit) if Some(tx) == self.tx => {
                Some(Reply::Aborted(reason))
            }
            // Stale or unexpected.
            _ => None,
        }
    }

    fn committed(&mut self, stamp: &CommitStamp, writes: Vec<(Key, Option<Value>)>) {
        self.past.committed(stamp.ts, writes);
    }

    fn cached_beyond(&self, writes: &[(Key, Option<Value>)], limit: usize) -> Option<usize> {
        self.past.cached_beyond(writes, limit)
    }

    fn finished(&mut self) {
        self.tx = None;
    }

    fn export_state(&self) -> C::State {
        self.past.export()
    }

    fn import_state(&mut self, state: C::State) -> Result<(), SessionError> {
        self.past.import(state)
    }
}
