//! The client wire protocol: what a client and a server say to each other.
//!
//! A TCP connection carries length-delimited frames (a 4-byte big-endian
//! length, then the body); each body is one postcard-encoded
//! [`RequestFrame`] (client → server) or [`ResponseFrame`] (server →
//! client). The first request must be [`Request::Hello`]; a server answers a
//! different [`WIRE_VERSION`] with [`WireError::VersionMismatch`] and closes
//! the connection. Requests on one connection are answered in order, so a
//! client may pipeline them (send several before reading the answers).
//!
//! One connection is one session: one transaction at a time, which the
//! server runs against a coordinator in its DC.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Bumped on any incompatible change of the frames below.
pub const WIRE_VERSION: u32 = 2;

/// The largest frame either side accepts by default (16 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 << 20;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFrame {
    /// Chosen by the client, repeated in the response.
    pub id: u64,
    pub request: Request,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseFrame {
    pub id: u64,
    pub response: Response,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Must come first. `client` is a free-form name for logs.
    Hello { version: u32, client: String },
    /// Starts a transaction. Answered with [`Response::Started`].
    Begin,
    /// Reads keys in the running transaction. Answered with
    /// [`Response::Values`], in the order asked.
    Read { keys: Vec<Bytes> },
    /// Buffers a write in the running transaction; sent to the cluster at
    /// commit. Answered with [`Response::Written`].
    Write { key: Bytes, value: Bytes },
    /// Commits the running transaction. Answered with [`Response::Committed`].
    Commit,
    /// Abandons the running transaction. Answered with [`Response::Aborted`].
    Abort,
    /// A read-only transaction in one round trip: begin, read, commit.
    /// Answered with [`Response::Values`].
    ReadOnly { keys: Vec<Bytes> },
    /// Exports the session's causal state (only between transactions).
    /// Answered with [`Response::Token`].
    ExportSession,
    /// Adopts a token exported by a session of the same DC (only between
    /// transactions). Answered with [`Response::Resumed`].
    ResumeSession { token: Bytes },
    /// Operator and test hook: the server breaks all its connections to
    /// peer servers (they reconnect on their own). Answered with
    /// [`Response::Done`].
    DropPeerConnections,
    /// Operator and test hook: the newest applied value of every key the server's
    /// replicas hold. Answered with [`Response::Dump`].
    Dump,
    /// Measurement hook for benchmarks: the node's counters and each of its
    /// replicas' stable times. Answered with [`Response::Stats`];
    /// `waited_txns` asks for the transactions whose reads waited since the
    /// last such request, too (the node forgets them as it answers).
    Stats { waited_txns: bool },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    Welcome(Welcome),
    Started,
    /// One entry per key asked for; `None`: the key has no version.
    Values(Vec<Option<Bytes>>),
    Written,
    /// `None` for a transaction without writes.
    Committed(Option<Stamp>),
    Aborted,
    Token(Bytes),
    Resumed,
    Done,
    Dump(Dump),
    Stats(NodeStats),
    Error(WireError),
}

/// What the server tells a client after `Hello`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub version: u32,
    /// The protocol the cluster runs (`wren`, `cure`, …).
    pub protocol: String,
    /// The DC this connection's session lives in.
    pub dc: u16,
    /// The server node's name.
    pub node: String,
    pub limits: Limits,
}

/// Sizes a server accepts; larger requests get [`WireError::TooLarge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_key_bytes: u32,
    pub max_value_bytes: u32,
    /// Keys in one `Read` or `ReadOnly`.
    pub max_keys_per_read: u32,
    /// Writes buffered in one transaction.
    pub max_writes_per_txn: u32,
}

impl Limits {
    /// The most bytes of keys and values one read answer or one
    /// transaction's write set can hold under these limits. Servers keep it
    /// well under the frame size, so every message fits in one frame.
    pub fn max_batch_bytes(&self) -> u64 {
        let pair = u64::from(self.max_key_bytes) + u64::from(self.max_value_bytes);
        pair * u64::from(self.max_keys_per_read.max(self.max_writes_per_txn))
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_key_bytes: 1024, max_value_bytes: 64 << 10, max_keys_per_read: 128, max_writes_per_txn: 128 }
    }
}

/// A commit timestamp, in last-writer-wins order: `ts`, then `dc`, then `txid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp {
    /// Hybrid logical clock: microseconds since the Unix epoch in the high
    /// 52 bits, a logical counter in the low 12.
    pub ts: u64,
    pub dc: u16,
    pub txid: u64,
}

/// The newest applied values the answering server holds (a commit is
/// applied at the next apply round, Δ_R, for Wren).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dump {
    pub dc: u16,
    /// The partitions of the DC whose data this dump holds.
    pub partitions: Vec<u32>,
    /// The partitions the DC holds in all; fewer in `partitions`: a partial dump.
    pub partition_count: u32,
    pub entries: Vec<(Bytes, Bytes)>,
}

impl Dump {
    /// Whether the answering server holds only some of its DC's partitions.
    pub fn is_partial(&self) -> bool {
        (self.partitions.len() as u32) < self.partition_count
    }
}

/// A node's measurements since it started, for benchmarks: take two and
/// subtract. Counters cover every replica and client of the node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStats {
    pub node: String,
    pub replicas: Vec<ReplicaStats>,
    /// Protocol message bytes sent, by class: client, transaction,
    /// replication, stabilization (postcard size of each message).
    pub bytes_sent: [u64; 4],
    /// Protocol messages sent, by the same classes.
    pub messages_sent: [u64; 4],
    /// Read requests (slices) the node's replicas received.
    pub read_slices: u64,
    /// Those that were not answered in the step that received them.
    pub read_slices_waited: u64,
    /// Their waiting, summed, in microseconds.
    pub read_wait_us: u64,
    /// `(DC, transaction id)` of transactions with a read that waited since
    /// the last request that asked for them (with `waited_txns`; at most
    /// [`NodeStats::MAX_WAITED_TXNS`] are kept between two requests).
    pub waited_txns: Vec<(u16, u64)>,
}

impl NodeStats {
    /// How many waited transactions a node remembers.
    pub const MAX_WAITED_TXNS: usize = 1 << 20;
}

/// One replica's state, as the stable times the protocol publishes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaStats {
    pub dc: u16,
    pub partition: u32,
    /// `visible_upto[d]`: every write from DC `d` with a commit time up to
    /// this is visible to new transactions here.
    pub visible_upto: Vec<u64>,
    pub versions: u64,
    pub metadata_bytes_per_version: u64,
}

/// Errors a server reports; the connection stays usable unless said otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum WireError {
    /// The connection is closed after this one.
    #[error("wire version mismatch: server speaks {server}, client {client}")]
    VersionMismatch { server: u32, client: u32 },
    #[error("the first request must be Hello")]
    HelloExpected,
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
    #[error("invalid session token: {0}")]
    BadToken(String),
    /// The connection is closed after this one.
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("server unavailable: {0}")]
    Unavailable(String),
}
