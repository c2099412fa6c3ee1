//! The sans-IO contract between protocols and their drivers.
//!
//! A protocol is two kinds of state machine: the [`Replica`] of a partition
//! (`p_n^m`) and the client [`Session`]. Both take inputs — a message, a timer,
//! a client call — together with the current physical clock reading, and
//! answer with outputs in an [`Outbox`]: messages to send and timers to set.
//! They own no sockets, threads, clocks or random sources; the deterministic
//! simulator and the runtime drive the very same values.

use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, ClientId, DcId, ReplicaId, TxId};
use crate::topology::Topology;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;
use thiserror::Error;

/// Keys and values are byte strings; `Bytes` makes copies into replication
/// messages cheap.
pub type Key = Bytes;
pub type Value = Bytes;

/// The total order of last-writer-wins: commit timestamp, then the DC the
/// write comes from, then the transaction id. Field order is the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CommitStamp {
    pub ts: Timestamp,
    pub dc: DcId,
    pub txid: TxId,
}

/// What a message is for: drivers count messages and bytes per class. The
/// set is open: each protocol declares its classes ([`Message::CLASSES`]),
/// and drivers count whatever classes there are. The four of the papers'
/// measurements are here for the protocols that share them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MsgClass {
    /// Its place in the protocol's [`Message::CLASSES`].
    index: u8,
    name: &'static str,
}

impl MsgClass {
    /// Between a client and its coordinator.
    pub const CLIENT: MsgClass = MsgClass::new(0, "client");
    /// Coordinator to cohorts: read slices, prepare, commit.
    pub const TRANSACTION: MsgClass = MsgClass::new(1, "transaction");
    /// Between replicas of a partition in different DCs: updates and heartbeats.
    pub const REPLICATION: MsgClass = MsgClass::new(2, "replication");
    /// Inside a DC: stable-time gossip and garbage-collection bounds.
    pub const STABILIZATION: MsgClass = MsgClass::new(3, "stabilization");

    /// The class at `index` of a protocol's list, named `name` (lower case,
    /// one word: it labels metrics and report fields).
    pub const fn new(index: u8, name: &'static str) -> MsgClass {
        MsgClass { index, name }
    }

    pub fn index(self) -> usize {
        usize::from(self.index)
    }

    pub fn name(self) -> &'static str {
        self.name
    }
}

/// Whether a list of classes is well formed: each at its own index, names
/// distinct. Drivers assert it of a protocol's [`Message::CLASSES`].
pub fn classes_are_indexed(classes: &[MsgClass]) -> bool {
    classes.iter().enumerate().all(|(i, c)| c.index() == i && classes[..i].iter().all(|d| d.name != c.name))
}

pub trait Message: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// Every class this protocol's messages fall in, each at its index.
    const CLASSES: &'static [MsgClass];

    fn class(&self) -> MsgClass;

    /// A read that a replica must answer (a read slice), named by a tag that
    /// its reply repeats. Drivers use the pair to measure, from the outside,
    /// whether a replica answered a read at once or made it wait.
    fn read_request_tag(&self) -> Option<u64> {
        None
    }

    /// Periodic traffic that never stops on its own (heartbeats, stable-time
    /// gossip). Drivers wait for the other messages to drain before they
    /// call a cluster settled.
    fn is_background(&self) -> bool {
        self.class() == MsgClass::STABILIZATION
    }

    /// The tag of the read request this message answers.
    fn read_reply_tag(&self) -> Option<u64> {
        None
    }
}

/// Outputs of one step of a replica.
#[derive(Debug)]
pub struct Outbox<M, T> {
    pub messages: Vec<(Addr, M)>,
    /// Timers to arm: fire `timer` after this many microseconds.
    pub timers: Vec<(T, u64)>,
}

impl<M, T> Default for Outbox<M, T> {
    fn default() -> Self {
        Outbox { messages: Vec::new(), timers: Vec::new() }
    }
}

impl<M, T> Outbox<M, T> {
    pub fn send(&mut self, to: Addr, msg: M) {
        self.messages.push((to, msg));
    }

    /// Sends `msg` to every address, cloning it for all but the last.
    pub fn send_all(&mut self, to: &[Addr], msg: M)
    where
        M: Clone,
    {
        if let Some((last, others)) = to.split_last() {
            for &peer in others {
                self.messages.push((peer, msg.clone()));
            }
            self.messages.push((*last, msg));
        }
    }

    pub fn set_timer(&mut self, timer: T, after_us: u64) {
        self.timers.push((timer, after_us));
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.timers.is_empty()
    }
}

impl<M: Message, T> Outbox<M, T> {
    /// Whether this step answered the read request `tag` from `requester`:
    /// how drivers tell, from outside the protocol, that a read waited.
    pub fn answers_read(&self, requester: Addr, tag: u64) -> bool {
        self.messages.iter().any(|(to, m)| *to == requester && m.read_reply_tag() == Some(tag))
    }
}

/// Counters every replica keeps, whatever its protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    /// Versions currently stored, over all keys.
    pub versions: u64,
    /// Versions removed by garbage collection so far.
    pub versions_collected: u64,
    /// Coordinator contexts dropped because their client went silent.
    pub contexts_expired: u64,
    /// Transactions this replica has applied (local and replicated).
    pub transactions_applied: u64,
}

/// A partition replica.
pub trait Replica {
    type Message: Message;
    type Timer: Copy + Debug + Eq;

    fn id(&self) -> ReplicaId;

    /// Called once before any other input; arms the periodic timers.
    fn start(&mut self, now: PhysicalMicros, out: &mut Outbox<Self::Message, Self::Timer>);

    fn on_message(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        msg: Self::Message,
        out: &mut Outbox<Self::Message, Self::Timer>,
    );

    fn on_timer(&mut self, now: PhysicalMicros, timer: Self::Timer, out: &mut Outbox<Self::Message, Self::Timer>);

    /// True when no transaction is between prepare and apply here.
    fn is_quiescent(&self) -> bool;

    /// The newest applied value of every key this replica stores, by
    /// last-writer-wins; what the history's `final` lines list.
    fn latest_values(&self) -> Vec<(Key, Value)>;

    fn stats(&self) -> ReplicaStats;

    /// The timestamp up to which writes that originate in DC `origin` are
    /// visible to transactions starting here now (Wren: LST for the local DC,
    /// RST for the others; Cure: the entry of the stable vector; EC: the last
    /// write applied from that DC). Drivers sample it to measure how long an
    /// update takes to become visible, locally and remotely.
    fn visible_upto(&self, origin: DcId) -> Timestamp;

    /// Bytes of protocol metadata every version carries besides its key,
    /// value and last-writer-wins tie-breakers: the timestamps that decide
    /// its visibility (Wren: `ut` and `rdt`, 16; Cure: one per DC, 8·M; EC:
    /// its commit time, 8). Drivers report it next to the message bytes.
    fn version_metadata_bytes(&self) -> u64;
}

/// Errors a client session reports. Operational errors, not bugs: a driver
/// shows them to the user.
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
}

/// The completion of a session call, delivered either at once (the call
/// returns it) or later (from [`Session::on_message`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    Started,
    /// Values in the order the keys were asked for; `None`: no version exists.
    Read(Vec<(Key, Option<Value>)>),
    /// The transaction committed; `None` for a transaction without writes.
    Committed(Option<CommitStamp>),
    /// The transaction failed and is over.
    Failed(SessionError),
}

pub type SessionOut<M> = Vec<(Addr, M)>;

/// A client session: one transaction at a time, one operation at a time.
pub trait Session {
    type Message: Message;
    /// The session's causal past between transactions (its snapshot, the
    /// time of its last commit, and whatever else reads must respect, such as
    /// Wren's cache of its own writes). A session token carries it so a
    /// client can resume on another connection to the same DC.
    type State: Clone + Debug + Serialize + DeserializeOwned + Send + 'static;

    fn id(&self) -> ClientId;

    fn begin(&mut self, out: &mut SessionOut<Self::Message>) -> Result<Option<SessionEvent>, SessionError>;

    fn read(&mut self, keys: &[Key], out: &mut SessionOut<Self::Message>)
        -> Result<Option<SessionEvent>, SessionError>;

    /// Buffers a write; it is sent at commit.
    fn write(&mut self, key: Key, value: Value) -> Result<(), SessionError>;

    fn commit(&mut self, out: &mut SessionOut<Self::Message>) -> Result<Option<SessionEvent>, SessionError>;

    fn abort(&mut self, out: &mut SessionOut<Self::Message>) -> Result<(), SessionError>;

    /// A message from the cluster; returns the completion it brings, if any.
    fn on_message(
        &mut self,
        from: Addr,
        msg: Self::Message,
        out: &mut SessionOut<Self::Message>,
    ) -> Option<SessionEvent>;

    /// The causal state to resume elsewhere; only between transactions.
    fn export_state(&self) -> Result<Self::State, SessionError>;

    /// Adopts a state exported by a session of the same DC, merged with this
    /// session's own (the result has seen everything both have seen). Only
    /// between transactions.
    fn import_state(&mut self, state: Self::State) -> Result<(), SessionError>;
}

/// Settings every protocol understands, so drivers can configure whichever
/// protocol a user picked from one set of flags or config keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Δ_R: how often replicas apply committed transactions and replicate
    /// them (or send a heartbeat), in microseconds.
    pub apply_interval_us: u64,
    /// Δ_G: how often stable times are gossiped inside a DC, in microseconds.
    pub stabilization_interval_us: u64,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { apply_interval_us: 5_000, stabilization_interval_us: 5_000 }
    }
}

/// A protocol of the engine: its replica, its session and its messages.
pub trait Protocol: 'static {
    const NAME: &'static str;
    type Config: Clone + Debug + Default + Send + Sync + 'static;
    type Message: Message;
    type Replica: Replica<Message = Self::Message, Timer: Send> + Send + 'static;
    type Session: Session<Message = Self::Message> + Send + 'static;

    /// This protocol's configuration with the shared settings applied.
    fn configure(tuning: &Tuning) -> Self::Config;

    /// Says why this protocol cannot run on this topology, if it cannot.
    fn validate(topology: &Topology, config: &Self::Config) -> Result<(), String>;

    fn replica(id: ReplicaId, topology: Arc<Topology>, config: &Self::Config) -> Self::Replica;

    /// A session attached to a coordinator replica in the client's DC.
    fn session(id: ClientId, coordinator: ReplicaId, topology: Arc<Topology>, config: &Self::Config) -> Self::Session;
}
