//! The client session every protocol shares: one transaction at a time, one
//! operation at a time, a write set buffered until commit, a read set, and
//! read-only transactions as one call. What differs between protocols —
//! what a session asks the cluster and what it keeps between transactions —
//! is a [`ClientRole`]; [`SessionCore`] drives it through the phases:
//!
//! ```text
//! Idle ──begin──▶ Starting ──Started──▶ Active ──read──▶ Reading ──Values──▶ Active
//!                                         │ ──commit──▶ Committing ──Committed──▶ Idle
//!                                         └ ──abort / commit without writes──────▶ Idle
//! ```
//!
//! A failure, or an abort by the store, in any waiting phase ends the
//! transaction. A read-only transaction runs the same phases inside one call
//! and completes with the values.
//!
//! An operation the session refuses while a transaction is active (a key
//! over the limits, a second `begin`, …) leaves that transaction unable to
//! commit: its commit aborts it and fails with
//! [`SessionError::RefusedEarlier`]. Committing the rest would make part of
//! what the client meant visible as if it were the whole.

use crate::contract::session::{CallResult, SessionEffects};
use crate::contract::{
    AbortReason, CommitStamp, Effects, Key, Limits, Message, Session, SessionError, SessionEvent, SessionSetup, Value,
};
use crate::hlc::PhysicalMicros;
use crate::ids::{Addr, ClientId};
use crate::txn::TxnBuffer;
use rustc_hash::FxHashMap;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// What a session waits for from the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Awaiting {
    Start,
    Read,
    Commit,
}

/// The transaction timeout of the protocols whose partitions keep old
/// versions only that long (PrompTCC's §VII, Eiger's): a transaction that
/// reads past it after its first read may need what was collected, and is
/// aborted (the client starts it again).
#[derive(Debug, Default)]
pub struct ReadDeadline(Option<PhysicalMicros>);

impl ReadDeadline {
    /// A read call of the running transaction at `now`: whether it comes
    /// more than `timeout` after the transaction's first.
    pub fn passed(&mut self, now: PhysicalMicros, timeout: u64) -> bool {
        let first = *self.0.get_or_insert(now);
        now > first + timeout
    }

    /// A transaction starts: its first read is still to come.
    pub fn reset(&mut self) {
        self.0 = None;
    }

    /// The session's answer to the timer a passed deadline armed: the
    /// transaction aborts if the session still waits for its read call
    /// (`current`: the timer is of the running transaction; `reading`: a
    /// round is under way, so the timer was not the one that stopped it).
    pub fn expired(awaiting: Option<Awaiting>, current: bool, reading: bool) -> Option<Reply> {
        if awaiting != Some(Awaiting::Read) || !current || reading {
            return None;
        }
        Some(Reply::Aborted(AbortReason::Expired("it read past the transaction timeout".into())))
    }
}

/// What a protocol's answer means to the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Started,
    /// The values of a read round, for the keys the session asked for.
    Values(Vec<(Key, Option<Value>)>),
    Committed(CommitStamp),
    Aborted(AbortReason),
    Failed(SessionError),
}

/// The effects of a role's step.
pub type RoleEffects<R> = Effects<<R as ClientRole>::Message, <R as ClientRole>::Timer>;

/// What a protocol adds to the shared session: how it starts a transaction,
/// asks for reads, commits, and what it keeps between transactions.
pub trait ClientRole {
    type Message: Message;
    type Timer: Copy + Debug + Eq + Send;
    type State: Clone + Debug + Serialize + DeserializeOwned + Send + 'static;

    /// Whether reads join the read set, so that a key read twice in a
    /// transaction reads the same value. An eventually consistent store asks
    /// again instead.
    const REPEATABLE_READS: bool = true;

    /// Whether a transaction that read from the cluster and wrote nothing
    /// must still commit through the cluster (a serializable store
    /// certifies its reads): its commit goes to [`ClientRole::request_commit`]
    /// with no writes, and completes as a read-only transaction (no stamp).
    const CERTIFIES_READS: bool = false;

    /// Starts a transaction: `true` if it started at once, `false` if a
    /// [`Reply::Started`] will say so.
    fn start(&mut self, now: PhysicalMicros, out: &mut RoleEffects<Self>) -> bool;

    /// What the session knows of `key` beyond its transaction (Wren's cache
    /// of its own writes); `None` to ask the cluster.
    fn cached(&self, _key: &Key) -> Option<Option<Value>> {
        None
    }

    /// Asks the cluster for `keys`, in read round `round` of the transaction.
    fn request_read(&mut self, now: PhysicalMicros, round: u32, keys: Vec<Key>, out: &mut RoleEffects<Self>);

    /// Asks the cluster to commit `writes` (one per key).
    fn request_commit(&mut self, now: PhysicalMicros, writes: &[(Key, Option<Value>)], out: &mut RoleEffects<Self>);

    /// The transaction ends without a commit to send: it was read-only, or
    /// the client aborted it.
    fn release(&mut self, now: PhysicalMicros, out: &mut RoleEffects<Self>);

    /// A message from the cluster while the session waits for `awaiting`;
    /// `None` if it is not the answer (stale, from a stranger, partial).
    fn on_reply(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        msg: Self::Message,
        awaiting: Awaiting,
        out: &mut RoleEffects<Self>,
    ) -> Option<Reply>;

    /// A timer the role armed is due; `awaiting` is what the session waits
    /// for, if anything.
    fn on_timer(
        &mut self,
        _now: PhysicalMicros,
        _timer: Self::Timer,
        _awaiting: Option<Awaiting>,
        _out: &mut RoleEffects<Self>,
    ) -> Option<Reply> {
        None
    }

    /// The transaction committed at `stamp` with `writes`.
    fn committed(&mut self, stamp: &CommitStamp, writes: Vec<(Key, Option<Value>)>);

    /// How many of its own writes the session would cache once `writes`
    /// commit, if it keeps a cache and they would be more than `limit`
    /// ([`Limits::max_cached_writes`]).
    fn cached_beyond(&self, _writes: &[(Key, Option<Value>)], _limit: usize) -> Option<usize> {
        None
    }

    /// The transaction is over, however it ended.
    fn finished(&mut self);

    fn export_state(&self) -> Self::State;

    fn import_state(&mut self, state: Self::State) -> Result<(), SessionError>;
}

#[derive(Debug)]
enum Phase {
    Idle,
    Starting,
    Active,
    /// Waiting for a read round; `local` holds what the session could answer
    /// itself, `keys` the order the caller asked in.
    Reading {
        keys: Vec<Key>,
        local: FxHashMap<Key, Option<Value>>,
    },
    /// Waiting for the commit of these writes.
    Committing {
        writes: Vec<(Key, Option<Value>)>,
    },
}

/// A session: the shared phases around a protocol's [`ClientRole`].
pub struct SessionCore<R: ClientRole> {
    id: ClientId,
    limits: Limits,
    phase: Phase,
    /// The first operation of the running transaction that was refused: the
    /// transaction can no longer commit.
    refused: Option<SessionError>,
    /// Write set and read set of the running transaction.
    txn: TxnBuffer,
    /// Read rounds the running transaction has asked the cluster for.
    rounds: u32,
    /// The keys of a read-only transaction in progress: its phases complete
    /// the call, not the caller.
    read_only: Option<Vec<Key>>,
    /// A read-only transaction's values, while its reads are certified.
    read_only_values: Option<Vec<(Key, Option<Value>)>>,
    role: R,
}

impl<R: ClientRole> SessionCore<R> {
    pub fn new(setup: &SessionSetup, role: R) -> Self {
        SessionCore {
            id: setup.id,
            limits: setup.limits,
            phase: Phase::Idle,
            refused: None,
            txn: TxnBuffer::default(),
            rounds: 0,
            read_only: None,
            read_only_values: None,
            role,
        }
    }

    /// Passes `result` on; an error refuses an operation of the running
    /// transaction (even one refused because another is in progress),
    /// which can then no longer commit.
    fn refusing<T>(&mut self, result: Result<T, SessionError>) -> Result<T, SessionError> {
        if let Err(e) = &result {
            if !matches!(self.phase, Phase::Idle) && self.refused.is_none() {
                self.refused = Some(e.clone());
            }
        }
        result
    }

    pub fn role(&self) -> &R {
        &self.role
    }

    fn awaiting(&self) -> Option<Awaiting> {
        match self.phase {
            Phase::Starting => Some(Awaiting::Start),
            Phase::Reading { .. } => Some(Awaiting::Read),
            Phase::Committing { .. } => Some(Awaiting::Commit),
            Phase::Idle | Phase::Active => None,
        }
    }

    fn active(&self) -> Result<(), SessionError> {
        match self.phase {
            Phase::Active => Ok(()),
            Phase::Idle => Err(SessionError::NoActiveTransaction),
            _ => Err(SessionError::OperationInProgress),
        }
    }

    fn idle(&self) -> Result<(), SessionError> {
        match self.phase {
            Phase::Idle => Ok(()),
            Phase::Active => Err(SessionError::TransactionActive),
            _ => Err(SessionError::OperationInProgress),
        }
    }

    fn end_transaction(&mut self) {
        self.phase = Phase::Idle;
        self.refused = None;
        self.txn.clear();
        self.rounds = 0;
        self.read_only = None;
        self.read_only_values = None;
        self.role.finished();
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut RoleEffects<R>) -> Option<SessionEvent> {
        self.phase = Phase::Starting;
        if self.role.start(now, out) {
            self.phase = Phase::Active;
            return Some(SessionEvent::Started);
        }
        None
    }

    fn read_keys(&mut self, now: PhysicalMicros, keys: &[Key], out: &mut RoleEffects<R>) -> CallResult {
        self.active()?;
        self.limits.check_read(keys)?;
        let (txn, role) = (&self.txn, &self.role);
        let (local, ask) = if R::REPEATABLE_READS {
            txn.plan_read(keys, |k| txn.known(k).or_else(|| role.cached(k)))
        } else {
            txn.plan_read(keys, |k| txn.written(k).cloned())
        };
        if ask.is_empty() {
            return Ok(Some(self.finish_read(keys.to_vec(), local)));
        }
        self.phase = Phase::Reading { keys: keys.to_vec(), local };
        let round = self.rounds;
        self.rounds += 1;
        self.role.request_read(now, round, ask, out);
        Ok(None)
    }

    /// Completes a read: the values in the order the keys were asked for.
    fn finish_read(&mut self, keys: Vec<Key>, values: FxHashMap<Key, Option<Value>>) -> SessionEvent {
        // A read-only call ends with this read: nothing will read it again.
        let remember = R::REPEATABLE_READS && self.read_only.is_none();
        match self.txn.finish_read(keys, values, remember) {
            Some(values) => {
                self.phase = Phase::Active;
                SessionEvent::Read(values)
            }
            None => {
                // The cluster left a key out: the transaction cannot trust
                // this answer.
                self.end_transaction();
                SessionEvent::Failed(SessionError::InvalidArgument("the cluster's reply misses a key".into()))
            }
        }
    }

    fn commit_writes(&mut self, now: PhysicalMicros, out: &mut RoleEffects<R>) -> CallResult {
        self.active()?;
        if let Some(e) = self.refused.take() {
            self.role.release(now, out);
            self.end_transaction();
            return Ok(Some(SessionEvent::Failed(SessionError::RefusedEarlier { cause: e.to_string() })));
        }
        if self.txn.writes().is_empty() && !(R::CERTIFIES_READS && self.rounds > 0) {
            self.role.release(now, out);
            self.end_transaction();
            return Ok(Some(SessionEvent::Committed(None)));
        }
        let writes = self.txn.take_writes();
        let limit = self.limits.max_cached_writes as usize;
        if let Some(Err(e)) = self.role.cached_beyond(&writes, limit).map(|n| self.limits.check_cached(n)) {
            self.role.release(now, out);
            self.end_transaction();
            return Ok(Some(SessionEvent::Failed(e)));
        }
        self.role.request_commit(now, &writes, out);
        self.phase = Phase::Committing { writes };
        Ok(None)
    }

    /// What a reply of the role does to the waiting phase.
    fn on_reply(&mut self, reply: Reply) -> Option<SessionEvent> {
        match (reply, std::mem::replace(&mut self.phase, Phase::Idle)) {
            (Reply::Started, Phase::Starting) => {
                self.phase = Phase::Active;
                Some(SessionEvent::Started)
            }
            (Reply::Values(values), Phase::Reading { keys, mut local }) => {
                local.extend(values);
                Some(self.finish_read(keys, local))
            }
            (Reply::Committed(stamp), Phase::Committing { writes }) => {
                // A certified read-only transaction wrote nothing: no stamp.
                let stamped = (!writes.is_empty()).then_some(stamp);
                self.role.committed(&stamp, writes);
                let values = self.read_only_values.take();
                let keys = self.read_only.take();
                self.end_transaction();
                self.read_only = keys;
                self.read_only_values = values;
                Some(SessionEvent::Committed(stamped))
            }
            (Reply::Aborted(why), phase) if !matches!(phase, Phase::Idle | Phase::Active) => {
                self.end_transaction();
                Some(SessionEvent::Aborted(why))
            }
            (Reply::Failed(e), phase) if !matches!(phase, Phase::Idle | Phase::Active) => {
                self.end_transaction();
                Some(SessionEvent::Failed(e))
            }
            (_, phase) => {
                // An answer to nothing this phase waits for: keep the phase.
                self.phase = phase;
                None
            }
        }
    }

    /// Carries a read-only transaction on from `event`, one of its own
    /// phases: begin is followed by the read, the read by the commit; the
    /// call completes with the values or the failure.
    fn continue_read_only(
        &mut self,
        now: PhysicalMicros,
        event: SessionEvent,
        out: &mut RoleEffects<R>,
    ) -> Option<SessionEvent> {
        let mut event = event;
        loop {
            let Some(keys) = self.read_only.as_ref() else { return Some(event) };
            let next = match event {
                SessionEvent::Started => {
                    let keys = keys.clone();
                    self.read_keys(now, &keys, out)
                }
                SessionEvent::Read(values) if self.read_only_values.is_none() => {
                    // Nothing was written: the commit ends it here and now,
                    // or, where reads are certified, once they are.
                    match self.commit_writes(now, out) {
                        Ok(None) => {
                            self.read_only_values = Some(values);
                            return None;
                        }
                        Ok(Some(SessionEvent::Committed(_))) => {
                            self.read_only = None;
                            return Some(SessionEvent::Read(values));
                        }
                        Ok(Some(other)) => {
                            self.read_only = None;
                            return Some(other);
                        }
                        Err(e) => {
                            self.end_transaction();
                            return Some(SessionEvent::Failed(e));
                        }
                    }
                }
                SessionEvent::Committed(_) if self.read_only_values.is_some() => {
                    let values = self.read_only_values.take().expect("checked");
                    self.read_only = None;
                    return Some(SessionEvent::Read(values));
                }
                other => {
                    self.read_only = None;
                    self.read_only_values = None;
                    return Some(other);
                }
            };
            match next {
                Ok(Some(e)) => event = e,
                Ok(None) => return None,
                Err(e) => {
                    self.end_transaction();
                    return Some(SessionEvent::Failed(e));
                }
            }
        }
    }
}

impl<R: ClientRole> Session for SessionCore<R> {
    type Message = R::Message;
    type Timer = R::Timer;
    type State = R::State;

    fn id(&self) -> ClientId {
        self.id
    }

    fn begin(&mut self, now: PhysicalMicros, out: &mut SessionEffects<Self>) -> CallResult {
        let idle = self.idle();
        self.refusing(idle)?;
        Ok(self.start(now, out))
    }

    fn read(&mut self, now: PhysicalMicros, keys: &[Key], out: &mut SessionEffects<Self>) -> CallResult {
        let read = self.read_keys(now, keys, out);
        self.refusing(read)
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), SessionError> {
        let written = self.active().and_then(|()| {
            let rewrite = self.txn.written(&key).is_some();
            self.limits.check_write(&key, value.as_deref(), self.txn.writes().len() as u64, rewrite)?;
            self.txn.write(key, value);
            Ok(())
        });
        self.refusing(written)
    }

    fn commit(&mut self, now: PhysicalMicros, out: &mut SessionEffects<Self>) -> CallResult {
        self.commit_writes(now, out)
    }

    fn abort(&mut self, now: PhysicalMicros, out: &mut SessionEffects<Self>) -> Result<(), SessionError> {
        self.active()?;
        self.role.release(now, out);
        self.end_transaction();
        Ok(())
    }

    fn abandon(&mut self, now: PhysicalMicros, out: &mut SessionEffects<Self>) -> Result<(), SessionError> {
        match self.phase {
            Phase::Starting | Phase::Reading { .. } => {
                self.role.release(now, out);
                self.end_transaction();
                Ok(())
            }
            Phase::Committing { .. } => Err(SessionError::OperationInProgress),
            Phase::Idle | Phase::Active => self.abort(now, out),
        }
    }

    fn read_only(&mut self, now: PhysicalMicros, keys: &[Key], out: &mut SessionEffects<Self>) -> CallResult {
        let idle = self.idle();
        self.refusing(idle)?;
        self.limits.check_read(keys)?;
        self.read_only = Some(keys.to_vec());
        Ok(self.start(now, out).and_then(|started| self.continue_read_only(now, started, out)))
    }

    fn on_message(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        msg: R::Message,
        out: &mut SessionEffects<Self>,
    ) -> Option<SessionEvent> {
        let awaiting = self.awaiting()?;
        let reply = self.role.on_reply(now, from, msg, awaiting, out)?;
        let event = self.on_reply(reply)?;
        self.continue_read_only(now, event, out)
    }

    fn on_timer(
        &mut self,
        now: PhysicalMicros,
        timer: R::Timer,
        out: &mut SessionEffects<Self>,
    ) -> Option<SessionEvent> {
        let awaiting = self.awaiting();
        let reply = self.role.on_timer(now, timer, awaiting, out)?;
        let event = self.on_reply(reply)?;
        self.continue_read_only(now, event, out)
    }

    fn export_state(&self) -> Result<R::State, SessionError> {
        self.idle()?;
        Ok(self.role.export_state())
    }

    fn import_state(&mut self, state: R::State) -> Result<(), SessionError> {
        self.idle()?;
        self.role.import_state(state)
    }
}
