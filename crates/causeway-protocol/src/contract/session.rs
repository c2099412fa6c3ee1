//! A client session: one transaction at a time, one operation at a time.

use super::data::{CommitStamp, Key, Value};
use super::effects::Effects;
use super::message::Message;
use crate::hlc::PhysicalMicros;
use crate::ids::{Addr, ClientId};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use thiserror::Error;

/// Errors a session reports. Operational errors, not bugs: a driver shows
/// them to the user.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum SessionError {
    #[error("no transaction is active; call begin first")]
    NoActiveTransaction,
    #[error("a transaction is already active; commit or abort it first")]
    TransactionActive,
    #[error("the previous operation has not finished")]
    OperationInProgress,
    #[error("the coordinator does not know this transaction (it may have expired)")]
    UnknownTransaction,
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("{what}: {size}, over the limit of {limit}")]
    TooLarge { what: String, size: u64, limit: u64 },
    /// The transaction asked to commit had an operation refused (with
    /// `cause`): committing the rest would apply part of what the client
    /// meant, so the transaction was aborted instead.
    #[error("the transaction was aborted, not committed: an operation in it was refused ({cause})")]
    RefusedEarlier { cause: String },
    /// The commit was sent but its outcome is not known: the store could
    /// not confirm it in time (a partition it wrote, or the coordinator,
    /// did not answer). It may have taken effect — under a protocol without
    /// atomic commits (EC) even in part — or not at all; read the keys to
    /// find out. The transaction is over.
    #[error("the outcome of the commit is unknown: it may have taken effect, in whole or in part, or not at all")]
    OutcomeUnknown,
}

/// Why the store aborted a transaction the client wanted to commit. Not an
/// error of the call: the transaction was well formed, and another attempt
/// may commit.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum AbortReason {
    /// Certification found a conflicting transaction (serializable
    /// protocols).
    #[error("aborted: it conflicts with a concurrent transaction ({0})")]
    Conflict(String),
    /// A partition the transaction needed did not answer in time (it may
    /// have crashed, or lost its majority): the transaction was given up.
    /// The text says what did not answer, as a sentence.
    #[error("aborted: {0}")]
    Unavailable(String),
    /// The transaction ran longer than the store keeps the versions its
    /// snapshot may need (PrompTCC's transaction timeout): start it again.
    #[error("aborted: the transaction outlived its snapshot ({0}); start it again")]
    Expired(String),
}

/// The completion of a session call, delivered either at once (the call
/// returns it) or later (from [`Session::on_message`] or
/// [`Session::on_timer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    Started,
    /// Values in the order the keys were asked for; `None`: no version
    /// exists. Also the completion of [`Session::read_only`].
    Read(Vec<(Key, Option<Value>)>),
    /// The transaction committed; `None` for a transaction without writes.
    Committed(Option<CommitStamp>),
    /// The store aborted the transaction; it is over.
    Aborted(AbortReason),
    /// The call failed; its transaction is over.
    Failed(SessionError),
}

/// What a session call returns: a completion now, or `None` when the
/// completion comes later, or why the call was refused (the session is
/// unchanged then).
pub type CallResult = Result<Option<SessionEvent>, SessionError>;

/// The effects of one session step: messages and timers (a session makes
/// nothing durable).
pub type SessionEffects<S> = Effects<<S as Session>::Message, <S as Session>::Timer>;

pub trait Session {
    type Message: Message;
    type Timer: Copy + Debug + Eq + Send;
    /// The session's causal past between transactions (its snapshot, the
    /// time of its last commit, and whatever else reads must respect, such as
    /// Wren's cache of its own writes). A session token carries it so a
    /// client can resume on another connection to the same DC.
    type State: Clone + Debug + Serialize + DeserializeOwned + Send + 'static;

    fn id(&self) -> ClientId;

    fn begin(&mut self, now: PhysicalMicros, out: &mut SessionEffects<Self>) -> CallResult;

    fn read(&mut self, now: PhysicalMicros, keys: &[Key], out: &mut SessionEffects<Self>) -> CallResult;

    /// Buffers a write of `key`, sent at commit: a value, or `None` to
    /// delete the key (later reads find no value).
    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), SessionError>;

    fn commit(&mut self, now: PhysicalMicros, out: &mut SessionEffects<Self>) -> CallResult;

    fn abort(&mut self, now: PhysicalMicros, out: &mut SessionEffects<Self>) -> Result<(), SessionError>;

    /// Gives up the begin or read in flight (a read-only transaction's
    /// too), whose answer the driver no longer expects — a partition it
    /// needs is down. The transaction is over, as after [`abort`]; a late
    /// answer is ignored. A commit in flight is never given up (it may
    /// already be decided): `OperationInProgress`; nothing in flight:
    /// whatever [`abort`] says.
    ///
    /// [`abort`]: Session::abort
    fn abandon(&mut self, now: PhysicalMicros, out: &mut SessionEffects<Self>) -> Result<(), SessionError>;

    /// A read-only transaction as one call, between transactions: reads
    /// `keys` from one snapshot and completes with [`SessionEvent::Read`].
    fn read_only(&mut self, now: PhysicalMicros, keys: &[Key], out: &mut SessionEffects<Self>) -> CallResult;

    /// A message from the cluster; returns the completion it brings, if any.
    fn on_message(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        msg: Self::Message,
        out: &mut SessionEffects<Self>,
    ) -> Option<SessionEvent>;

    /// A timer the session armed is due.
    fn on_timer(
        &mut self,
        now: PhysicalMicros,
        timer: Self::Timer,
        out: &mut SessionEffects<Self>,
    ) -> Option<SessionEvent>;

    /// The causal state to resume elsewhere; only between transactions.
    fn export_state(&self) -> Result<Self::State, SessionError>;

    /// Adopts a state exported by a session of the same DC, merged with this
    /// session's own (the result has seen everything both have seen). Only
    /// between transactions.
    fn import_state(&mut self, state: Self::State) -> Result<(), SessionError>;
}
