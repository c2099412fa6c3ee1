//! The frames of a connection: requests, responses and what they carry.

use crate::role::Role;
use crate::stats::NodeStats;
use crate::WireError;
use bytes::Bytes;
use causeway_protocol::{AbortReason, Limits};
use serde::{Deserialize, Serialize};

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
    /// Must come first. `client` is a free-form name for logs;
    /// `credentials` log in as a user of the cluster (`None`: anonymously,
    /// which a cluster allows only when its config says so).
    Hello { version: u32, client: String, credentials: Option<Credentials> },
    /// Starts a transaction. Answered with [`Response::Started`].
    Begin,
    /// Reads keys in the running transaction. Answered with
    /// [`Response::Values`], in the order asked.
    Read { keys: Vec<Bytes> },
    /// Buffers a write in the running transaction; sent to the cluster at
    /// commit. Answered with [`Response::Written`].
    Write { key: Bytes, value: Bytes },
    /// Buffers a delete of `key` in the running transaction: once
    /// committed, reads find no value. Answered with [`Response::Written`].
    Delete { key: Bytes },
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
    /// Operator and test hook (role `admin`): the server breaks all its
    /// connections to peer servers (they reconnect on their own). Answered
    /// with [`Response::Done`].
    DropPeerConnections,
    /// Operator and test hook (role `admin`): the newest applied value of the keys the
    /// server's replicas hold, in key order, one page at a time: the keys
    /// after `after` (from the first with `None`). Answered with
    /// [`Response::Dump`], whose `next` asks for the following page.
    Dump { after: Option<Bytes> },
    /// Measurement hook for benchmarks (role `admin`): the node's counters and each of its
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
    /// The store aborted the transaction (a conflict under a serializable
    /// protocol): the request was sound, and the transaction is over.
    TxnAborted(AbortReason),
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
    /// What this connection may do: the user's role, or the role the
    /// cluster gives anonymous clients.
    pub role: Role,
}

/// A user's name and password, sent in [`Request::Hello`]. Send them only
/// over TLS (a cluster whose config has `[tls]`): in the clear, anyone on
/// the path reads them. `Debug` does not show the password.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("user", &self.user).field("password", &"…").finish()
    }
}

impl Request {
    /// The least role that may make this request.
    pub fn needs(&self) -> Role {
        match self {
            Request::Write { .. } | Request::Delete { .. } => Role::Write,
            Request::DropPeerConnections | Request::Dump { .. } | Request::Stats { .. } => Role::Admin,
            _ => Role::Read,
        }
    }

    /// Its name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "Hello",
            Request::Begin => "Begin",
            Request::Read { .. } => "Read",
            Request::Write { .. } => "Write",
            Request::Delete { .. } => "Delete",
            Request::Commit => "Commit",
            Request::Abort => "Abort",
            Request::ReadOnly { .. } => "ReadOnly",
            Request::ExportSession => "ExportSession",
            Request::ResumeSession { .. } => "ResumeSession",
            Request::DropPeerConnections => "DropPeerConnections",
            Request::Dump { .. } => "Dump",
            Request::Stats { .. } => "Stats",
        }
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

/// A page of the newest applied values the answering server holds (a
/// commit is applied at the next apply round, Δ_R, for Wren), in key order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dump {
    pub dc: u16,
    /// The partitions of the DC whose data this dump holds.
    pub partitions: Vec<u32>,
    /// The partitions the DC holds in all; fewer in `partitions`: a partial dump.
    pub partition_count: u32,
    /// The partitions of the key space (keys hash over them): more than
    /// `partition_count` under partial replication, where a DC holds only
    /// some.
    pub cluster_partitions: u32,
    pub entries: Vec<(Bytes, Bytes)>,
    /// More keys follow: ask again with `after: next`. `None` on the last page.
    pub next: Option<Bytes>,
}

/// The most bytes of keys and values one page of a dump carries, well
/// under the frame limit.
pub const DUMP_PAGE_BYTES: usize = 1 << 20;

impl Dump {
    /// Whether the answering server holds only some of its DC's partitions.
    pub fn is_partial(&self) -> bool {
        (self.partitions.len() as u32) < self.partition_count
    }
}
