//! A mock server for tests (cargo feature `testing`): it speaks the wire
//! protocol over TCP on `127.0.0.1` and keeps one in-memory map, with none
//! of the replication. Transactions buffer their writes and apply them at
//! commit; reads see the transaction's own writes, then the map.
//!
//! Its answers follow the protocol's rules as a real server would: `Hello`
//! first, one transaction at a time, the [`Limits`] it advertises enforced
//! (`max_writes_per_txn` too, which a client cannot check), a transaction
//! with a refused operation aborted at its commit, deletes, dumps in pages,
//! export and resume only between transactions. A [`Behavior`] makes it
//! misbehave.

use crate::wire::{
    Dump, Limits, NodeStats, Request, RequestFrame, Response, ResponseFrame, SessionError, Stamp, Welcome, WireError,
    DEFAULT_MAX_FRAME_BYTES, WIRE_VERSION,
};

/// Entries per page of the mock's dumps: small, so tests page.
pub const MOCK_DUMP_PAGE: usize = 3;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// How the mock server behaves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Behavior {
    /// Answers as a server should.
    #[default]
    Normal,
    /// Answers `Hello` with [`WireError::VersionMismatch`] (claiming version
    /// `WIRE_VERSION + 1`) and closes the connection.
    VersionMismatch,
    /// Answers `Hello`, then reads requests and never answers.
    Silent,
    /// Answers `Hello`, then closes the connection when the next request arrives.
    CloseAfterHello,
    /// Answers every `Dump` page with the same cursor, so it never ends.
    StuckDump,
    /// Applies every `every`-th commit of the server (counted over all
    /// connections), then closes that connection without answering it: a
    /// coordinator that died mid-commit. Other requests are answered.
    CommitThenClose {
        /// Which commits: every one with 1.
        every: u64,
    },
    /// Aborts the first `first` commits of the server (counted over all
    /// connections) as a serializable store's certification would, with
    /// [`AbortReason::Conflict`](crate::wire::AbortReason::Conflict);
    /// commits the later ones.
    AbortCommits { first: u64 },
}

/// The mock server's settings.
#[derive(Clone, Debug)]
pub struct MockConfig {
    /// How it behaves.
    pub behavior: Behavior,
    /// The limits it advertises and enforces.
    pub limits: Limits,
    /// The DC it claims to be in.
    pub dc: u16,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig { behavior: Behavior::Normal, limits: Limits::default(), dc: 0 }
    }
}

#[derive(Default)]
struct Shared {
    store: Mutex<BTreeMap<Bytes, Bytes>>,
    /// Commit timestamps, and transaction ids.
    clock: AtomicU64,
    /// Frames received, `Hello`s included.
    requests: AtomicU64,
    connections: AtomicU64,
    peer_drops: AtomicU64,
    /// Commit requests received.
    commits: AtomicU64,
    /// The tasks serving connections, so that [`MockServer::kill`] ends them.
    serving: Mutex<Vec<tokio::task::AbortHandle>>,
}

/// A running mock server; it stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    config: MockConfig,
    task: JoinHandle<()>,
}

impl MockServer {
    /// Starts a well-behaved mock server with default limits on a free port.
    pub async fn start() -> io::Result<MockServer> {
        MockServer::start_with(MockConfig::default()).await
    }

    /// Starts a mock server with `config` on a free port.
    pub async fn start_with(config: MockConfig) -> io::Result<MockServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let task = accept(listener, shared.clone(), config.clone());
        Ok(MockServer { addr, shared, config, task })
    }

    /// Kills the server as a crash would: it stops listening and every
    /// connection closes at once, unanswered. Its data stays, for
    /// [`restart`](MockServer::restart).
    pub fn kill(&self) {
        self.task.abort();
        for t in self.shared.serving.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    /// Starts a killed server again on the same address, with the data it had.
    pub async fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let listener = TcpListener::bind(self.addr).await?;
        self.task = accept(listener, self.shared.clone(), self.config.clone());
        Ok(())
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The committed value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Option<Bytes> {
        self.shared.store.lock().unwrap().get(key.as_ref()).cloned()
    }

    /// Request frames received so far on all connections, `Hello`s included.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// `DropPeerConnections` requests served so far.
    pub fn peer_drops(&self) -> u64 {
        self.shared.peer_drops.load(Ordering::Relaxed)
    }
}

fn accept(listener: TcpListener, shared: Arc<Shared>, config: MockConfig) -> JoinHandle<()> {
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            shared.connections.fetch_add(1, Ordering::Relaxed);
            let task = tokio::spawn(serve(stream, shared.clone(), config.clone()));
            let mut serving = shared.serving.lock().unwrap();
            serving.retain(|t| !t.is_finished());
            serving.push(task.abort_handle());
        }
    })
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The running transaction.
#[derive(Default)]
struct Txn {
    /// Its writes; `None` deletes the key.
    writes: BTreeMap<Bytes, Option<Bytes>>,
    /// The first of its operations that was refused: it cannot commit.
    refused: Option<SessionError>,
}

/// One connection's session.
struct Session {
    hello: bool,
    txn: Option<Txn>,
    /// The session's last commit timestamp (what its token carries).
    last: u64,
}

enum Step {
    Answer(Response),
    AnswerAndClose(Response),
    Close,
    Ignore,
}

async fn serve(stream: TcpStream, shared: Arc<Shared>, config: MockConfig) {
    let _ = stream.set_nodelay(true);
    let codec = LengthDelimitedCodec::builder().max_frame_length(DEFAULT_MAX_FRAME_BYTES).new_codec();
    let mut framed = Framed::new(stream, codec);
    let mut session = Session { hello: false, txn: None, last: 0 };
    while let Some(Ok(body)) = framed.next().await {
        shared.requests.fetch_add(1, Ordering::Relaxed);
        let (id, step) = match postcard::from_bytes::<RequestFrame>(&body) {
            Ok(frame) => (frame.id, answer(&mut session, &shared, &config, frame.request)),
            Err(e) => (0, Step::AnswerAndClose(Response::Error(WireError::Malformed(e.to_string())))),
        };
        let (response, close) = match step {
            Step::Answer(r) => (r, false),
            Step::AnswerAndClose(r) => (r, true),
            Step::Close => return,
            Step::Ignore => continue,
        };
        let body = postcard::to_allocvec(&ResponseFrame { id, response }).expect("responses encode");
        if framed.send(Bytes::from(body)).await.is_err() || close {
            return;
        }
    }
}

fn answer(session: &mut Session, shared: &Shared, config: &MockConfig, request: Request) -> Step {
    use Response as R;
    use Step::*;
    let limits = config.limits;
    if let Request::Hello { version, .. } = request {
        if session.hello {
            return AnswerAndClose(R::Error(WireError::Malformed("a second Hello".into())));
        }
        session.hello = true;
        if config.behavior == Behavior::VersionMismatch || version != WIRE_VERSION {
            let server = if version == WIRE_VERSION { WIRE_VERSION + 1 } else { WIRE_VERSION };
            return AnswerAndClose(R::Error(WireError::VersionMismatch { server, client: version }));
        }
        return Answer(R::Welcome(Welcome {
            version: WIRE_VERSION,
            protocol: "mock".into(),
            dc: config.dc,
            node: "mock".into(),
            limits,
            role: causeway_wire::Role::Admin,
        }));
    }
    if !session.hello {
        return AnswerAndClose(R::Error(WireError::HelloExpected));
    }
    match config.behavior {
        Behavior::Silent => return Ignore,
        Behavior::CloseAfterHello => return Close,
        Behavior::Normal
        | Behavior::VersionMismatch
        | Behavior::StuckDump
        | Behavior::CommitThenClose { .. }
        | Behavior::AbortCommits { .. } => {}
    }
    let close_after = match (&config.behavior, &request) {
        (Behavior::CommitThenClose { every }, Request::Commit) => {
            (shared.commits.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of((*every).max(1))
        }
        (Behavior::AbortCommits { .. }, Request::Commit) => {
            shared.commits.fetch_add(1, Ordering::Relaxed);
            false
        }
        _ => false,
    };
    let in_txn = session.txn.is_some();
    // Session tokens are not operations of the transaction.
    let of_txn = !matches!(request, Request::ExportSession | Request::ResumeSession { .. });
    let result = match request {
        Request::Hello { .. } => unreachable!("answered above"),
        Request::Begin => match session.txn {
            Some(_) => Err(SessionError::TransactionActive),
            None => {
                session.txn = Some(Txn::default());
                Ok(R::Started)
            }
        },
        Request::Read { keys } => match &session.txn {
            None => Err(SessionError::NoActiveTransaction),
            Some(txn) => limits.check_read(&keys).map(|()| {
                let store = shared.store.lock().unwrap();
                R::Values(
                    keys.iter().map(|k| txn.writes.get(k).cloned().unwrap_or_else(|| store.get(k).cloned())).collect(),
                )
            }),
        },
        Request::Write { key, value } => write(&mut session.txn, &limits, key, Some(value)),
        Request::Delete { key } => write(&mut session.txn, &limits, key, None),
        Request::Commit => match session.txn.take() {
            None => Err(SessionError::NoActiveTransaction),
            Some(Txn { refused: Some(e), .. }) => Err(SessionError::RefusedEarlier { cause: e.to_string() }),
            Some(txn) if txn.writes.is_empty() => Ok(R::Committed(None)),
            Some(_)
                if matches!(config.behavior, Behavior::AbortCommits { first }
                    if shared.commits.load(Ordering::Relaxed) <= first) =>
            {
                let why = "a concurrent transaction wrote what it read".to_string();
                Ok(R::TxnAborted(crate::wire::AbortReason::Conflict(why)))
            }
            Some(txn) => {
                let ts = shared.clock.fetch_add(1, Ordering::Relaxed) + 1;
                let mut store = shared.store.lock().unwrap();
                for (k, v) in txn.writes {
                    match v {
                        Some(v) => store.insert(k, v),
                        None => store.remove(&k),
                    };
                }
                session.last = ts;
                Ok(R::Committed(Some(Stamp { ts, dc: config.dc, txid: ts })))
            }
        },
        Request::Abort => match session.txn.take() {
            None => Err(SessionError::NoActiveTransaction),
            Some(_) => Ok(R::Aborted),
        },
        Request::ReadOnly { keys } => match session.txn {
            Some(_) => Err(SessionError::TransactionActive),
            None => limits.check_read(&keys).map(|()| {
                let store = shared.store.lock().unwrap();
                R::Values(keys.iter().map(|k| store.get(k).cloned()).collect())
            }),
        },
        Request::ExportSession => match session.txn {
            Some(_) => Err(SessionError::TransactionActive),
            None => {
                let mut token = b"mock".to_vec();
                token.extend_from_slice(&config.dc.to_be_bytes());
                token.extend_from_slice(&session.last.to_be_bytes());
                Ok(R::Token(token.into()))
            }
        },
        Request::ResumeSession { token } => match session.txn {
            Some(_) => Err(SessionError::TransactionActive),
            None => match parse_token(&token, config.dc) {
                Ok(last) => {
                    session.last = session.last.max(last);
                    Ok(R::Resumed)
                }
                Err(e) => return Answer(R::Error(WireError::BadToken(e.into()))),
            },
        },
        Request::DropPeerConnections => {
            shared.peer_drops.fetch_add(1, Ordering::Relaxed);
            Ok(R::Done)
        }
        Request::Dump { after } => {
            let store = shared.store.lock().unwrap();
            let from = match &after {
                Some(a) => std::ops::Bound::Excluded(a.clone()),
                None => std::ops::Bound::Unbounded,
            };
            let mut rest = store.range((from, std::ops::Bound::Unbounded)).map(|(k, v)| (k.clone(), v.clone()));
            let entries: Vec<(Bytes, Bytes)> = rest.by_ref().take(MOCK_DUMP_PAGE).collect();
            let mut next = rest.next().and(entries.last().map(|(k, _)| k.clone()));
            if config.behavior == Behavior::StuckDump {
                next = Some(Bytes::from_static(b"stuck"));
            }
            Ok(R::Dump(Dump {
                dc: config.dc,
                partitions: vec![0],
                partition_count: 1,
                cluster_partitions: 1,
                entries,
                next,
            }))
        }
        Request::Stats { .. } => Ok(R::Stats(NodeStats { node: "mock".into(), ..NodeStats::default() })),
    };
    // As a real session does: an operation refused inside a transaction
    // leaves it unable to commit.
    if let (Err(e), true, true, Some(txn)) = (&result, in_txn, of_txn, session.txn.as_mut()) {
        txn.refused.get_or_insert_with(|| e.clone());
    }
    if close_after {
        return Close;
    }
    Answer(result.unwrap_or_else(|e| R::Error(e.into())))
}

/// A write (`Some`) or delete (`None`) of `key` in the running transaction.
fn write(txn: &mut Option<Txn>, limits: &Limits, key: Bytes, value: Option<Bytes>) -> Result<Response, SessionError> {
    let Some(txn) = txn else { return Err(SessionError::NoActiveTransaction) };
    limits.check_write(&key, value.as_deref(), txn.writes.len() as u64, txn.writes.contains_key(&key))?;
    txn.writes.insert(key, value);
    Ok(Response::Written)
}

fn parse_token(token: &[u8], dc: u16) -> Result<u64, &'static str> {
    if token.len() != 14 || &token[..4] != b"mock" {
        return Err("not a token of this server");
    }
    if u16::from_be_bytes([token[4], token[5]]) != dc {
        return Err("a token of another DC");
    }
    Ok(u64::from_be_bytes(token[6..].try_into().expect("8 bytes")))
}
