//! Client connections. A server runs each client's session state machine
//! (the paper's client library) next to its coordinator, so clients speak
//! one small protocol-independent wire protocol ([`causeway_client::wire`])
//! whatever protocol the cluster runs. One connection is one session.
//!
//! Every request is checked before it reaches the protocol: a bad one gets an
//! error reply (or, for a malformed frame or a wrong version, an error reply
//! and a closed connection), never a panic.

use crate::metrics::Metrics;
use crate::replica_task::ReplicaGauges;
use crate::router::{client_id, ReplicaInput, Router};
use crate::token;
use bytes::Bytes;
use causeway_protocol::{
    Addr, ClientId, CommitStamp, DcId, Key, Limits, Protocol, ReplicaId, Session, SessionError, SessionEvent, Topology,
};
use causeway_wire::{Dump, Request, RequestFrame, Response, ResponseFrame, Stamp, Welcome, WireError, WIRE_VERSION};
use futures_util::{SinkExt, StreamExt};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// What every client connection of a node shares.
pub struct SessionHost<P: Protocol> {
    pub node: usize,
    pub node_name: String,
    pub topology: Arc<Topology>,
    pub config: P::Config,
    pub limits: Limits,
    pub max_frame_bytes: usize,
    /// Authenticates session tokens ([`token`]).
    pub token_key: Vec<u8>,
    pub router: Arc<Router<P::Message>>,
    pub metrics: Arc<Metrics>,
    /// This node's replicas' published state, for [`Request::Stats`].
    pub replicas: Vec<(ReplicaId, Arc<ReplicaGauges>)>,
    next_client: AtomicU32,
    next_coordinator: AtomicUsize,
}

/// Bytes of requests read ahead of the one being served (pipelining); past
/// this the server stops reading the socket until it catches up, so one
/// client cannot make it buffer without bound.
const MAX_QUEUED_BYTES: usize = 32 << 20;
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

fn codec(max_frame: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().max_frame_length(max_frame).new_codec()
}

fn stamp(s: CommitStamp) -> Stamp {
    Stamp { ts: s.ts.0, dc: s.dc.0, txid: s.txid.0 }
}

impl<P: Protocol> SessionHost<P> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node: usize,
        node_name: String,
        topology: Arc<Topology>,
        config: P::Config,
        limits: Limits,
        token_key: Vec<u8>,
        router: Arc<Router<P::Message>>,
        metrics: Arc<Metrics>,
        replicas: Vec<(ReplicaId, Arc<ReplicaGauges>)>,
    ) -> Self {
        SessionHost {
            node,
            node_name,
            topology,
            config,
            limits,
            max_frame_bytes: causeway_wire::DEFAULT_MAX_FRAME_BYTES,
            token_key,
            router,
            metrics,
            replicas,
            next_client: AtomicU32::new(0),
            next_coordinator: AtomicUsize::new(0),
        }
    }

    /// Accepts the clients of DC `dc` until the task is aborted.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, dc: DcId) {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let host = self.clone();
                    tokio::spawn(async move { host.connection(stream, dc).await });
                }
                // Out of file descriptors, typically: wait rather than spin.
                Err(e) => {
                    tracing::warn!("accepting a client failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// The coordinators a session of `dc` may use: this node's replicas there.
    fn coordinators(&self, dc: DcId) -> Vec<ReplicaId> {
        let mut local: Vec<_> = self.router.local_replicas().filter(|r| r.dc == dc).collect();
        local.sort();
        local
    }

    async fn connection(self: Arc<Self>, stream: TcpStream, dc: DcId) {
        let _ = stream.set_nodelay(true);
        let mut framed = Framed::new(stream, codec(self.max_frame_bytes));
        // The handshake.
        let hello = match tokio::time::timeout(HELLO_TIMEOUT, framed.next()).await {
            Ok(Some(Ok(frame))) => frame,
            _ => return,
        };
        let id = match postcard::from_bytes::<RequestFrame>(&hello) {
            Ok(RequestFrame { id, request: Request::Hello { version, .. } }) if version == WIRE_VERSION => id,
            Ok(RequestFrame { id, request: Request::Hello { version, .. } }) => {
                let e = WireError::VersionMismatch { server: WIRE_VERSION, client: version };
                let _ = send_now(&mut framed, id, Response::Error(e)).await;
                return;
            }
            Ok(RequestFrame { id, .. }) => {
                let _ = send_now(&mut framed, id, Response::Error(WireError::HelloExpected)).await;
                return;
            }
            Err(e) => {
                let _ = send_now(&mut framed, 0, Response::Error(WireError::Malformed(e.to_string()))).await;
                return;
            }
        };
        let coordinators = self.coordinators(dc);
        if coordinators.is_empty() {
            let e = WireError::Unavailable(format!("node {} runs no replica of DC {}", self.node_name, dc.0));
            let _ = send_now(&mut framed, id, Response::Error(e)).await;
            return;
        }
        let welcome = Welcome {
            version: WIRE_VERSION,
            protocol: P::NAME.into(),
            dc: dc.0,
            node: self.node_name.clone(),
            limits: self.limits,
        };
        if send_now(&mut framed, id, Response::Welcome(welcome)).await.is_err() {
            return;
        }
        let client = client_id(dc, self.node, self.next_client.fetch_add(1, Ordering::Relaxed));
        let coordinator = coordinators[self.next_coordinator.fetch_add(1, Ordering::Relaxed) % coordinators.len()];
        let mailbox = self.router.register_session(client);
        self.metrics.client_connections.inc();
        let session = P::session(client, coordinator, self.topology.clone(), &self.config);
        let mut conn = Connection { host: &self, client, dc, session, pending: None, writes: 0, out: Vec::new() };
        conn.run(framed, mailbox).await;
        conn.close();
        self.router.unregister_session(client);
        self.metrics.client_connections.dec();
    }
}

/// Sends an answer at once (handshake answers, last words).
async fn send_now(
    framed: &mut Framed<TcpStream, LengthDelimitedCodec>,
    id: u64,
    response: Response,
) -> std::io::Result<()> {
    send(framed, id, response).await?;
    SinkExt::<Bytes>::flush(framed).await
}

/// Queues an answer in the connection's write buffer; [`Connection::run`]
/// flushes it before it waits, so answers to pipelined requests leave in
/// one write.
async fn send(
    framed: &mut Framed<TcpStream, LengthDelimitedCodec>,
    id: u64,
    response: Response,
) -> std::io::Result<()> {
    let bytes = postcard::to_allocvec(&ResponseFrame { id, response }).map_err(std::io::Error::other)?;
    framed.feed(Bytes::from(bytes)).await
}

/// An operation that waits for the cluster.
enum Pending {
    Begin,
    Read,
    Commit,
    /// A read-only transaction: begin, read, commit in one request.
    ReadOnly {
        keys: Vec<Key>,
        values: Option<Vec<Option<Bytes>>>,
    },
    Dump,
}

struct InFlight {
    id: u64,
    op: Pending,
    since: Instant,
}

struct Connection<'h, P: Protocol> {
    host: &'h SessionHost<P>,
    client: ClientId,
    dc: DcId,
    session: P::Session,
    pending: Option<InFlight>,
    /// Writes buffered in the running transaction, against the limit.
    writes: u32,
    out: Vec<(Addr, P::Message)>,
}

/// What serving one request produced.
enum Step {
    Reply(Response),
    /// The answer comes later, from the cluster (the operation is in
    /// `pending`).
    Wait,
    /// Reply, then close the connection.
    Close(Response),
}

impl<P: Protocol> Connection<'_, P> {
    async fn run(&mut self, mut framed: Framed<TcpStream, LengthDelimitedCodec>, mut mailbox: MailboxOf<P>) {
        let mut queued: VecDeque<Bytes> = VecDeque::new();
        let mut queued_bytes = 0usize;
        // The client closed its side: answer what it sent, then close ours.
        let mut half_closed = false;
        let (dump_tx, mut dump_rx) = mpsc::unbounded_channel::<Vec<(Key, Bytes)>>();
        loop {
            // Serve queued requests while nothing waits for the cluster.
            while self.pending.is_none() {
                let Some(frame) = queued.pop_front() else { break };
                queued_bytes -= frame.len();
                let (id, step) = match postcard::from_bytes::<RequestFrame>(&frame) {
                    Ok(RequestFrame { id, request }) => (id, self.serve(id, request, &dump_tx)),
                    Err(e) => (0, Step::Close(Response::Error(WireError::Malformed(e.to_string())))),
                };
                self.flush();
                match step {
                    Step::Reply(r) => {
                        if send(&mut framed, id, r).await.is_err() {
                            return;
                        }
                    }
                    Step::Wait => {}
                    Step::Close(r) => {
                        let _ = send_now(&mut framed, id, r).await;
                        return;
                    }
                }
            }
            // Answers wait in the buffer while an operation of this client
            // is at the cluster: a client that pipelined it after them
            // reads them with its answer, in one write. Otherwise they go
            // now, before this connection sleeps.
            if self.pending.is_none() && SinkExt::<Bytes>::flush(&mut framed).await.is_err() {
                return;
            }
            if half_closed && self.pending.is_none() {
                return;
            }
            tokio::select! {
                frame = framed.next(), if !half_closed && queued_bytes < MAX_QUEUED_BYTES => match frame {
                    Some(Ok(frame)) => {
                        queued_bytes += frame.len();
                        queued.push_back(frame.freeze());
                    }
                    // Closed, or a frame over the size limit: nothing sensible to answer.
                    Some(Err(e)) => {
                        let e = WireError::Malformed(format!("bad frame: {e}"));
                        let _ = send_now(&mut framed, 0, Response::Error(e)).await;
                        return;
                    }
                    None => half_closed = true,
                },
                Some((from, msg)) = mailbox.recv() => {
                    let event = self.session.on_message(from, msg, &mut self.out);
                    let reply = event.and_then(|ev| self.advance(ev));
                    self.flush();
                    if let Some(reply) = reply {
                        if self.finish(&mut framed, reply).await.is_err() { return; }
                    }
                }
                Some(entries) = dump_rx.recv() => {
                    let topology = &self.host.topology;
                    let mut partitions: Vec<u32> =
                        self.host.router.local_replicas().filter(|r| r.dc == self.dc).map(|r| r.partition.0).collect();
                    partitions.sort_unstable();
                    let partition_count = topology.partitions().filter(|&p| topology.holds(self.dc, p)).count() as u32;
                    let dump = Dump { dc: self.dc.0, partitions, partition_count, entries };
                    if self.finish(&mut framed, Response::Dump(dump)).await.is_err() { return; }
                }
            }
        }
    }

    async fn finish(
        &mut self,
        framed: &mut Framed<TcpStream, LengthDelimitedCodec>,
        r: Response,
    ) -> std::io::Result<()> {
        let Some(flight) = self.pending.take() else { return Ok(()) };
        let op = match flight.op {
            Pending::Begin => "begin",
            Pending::Read => "read",
            Pending::Commit => "commit",
            Pending::ReadOnly { .. } => "read_only",
            Pending::Dump => "dump",
        };
        self.host.metrics.observe_op(op, flight.since.elapsed().as_secs_f64());
        send(framed, flight.id, r).await
    }

    fn flush(&mut self) {
        for (to, msg) in self.out.drain(..) {
            self.host.router.send(Addr::Client(self.client), to, msg);
        }
    }

    fn check_read(&self, keys: &[Bytes]) -> Result<(), WireError> {
        Ok(self.host.limits.check_read(keys)?)
    }

    /// Serves one request: answers it now, or starts what the cluster answers.
    fn serve(&mut self, id: u64, request: Request, dump_tx: &mpsc::UnboundedSender<Vec<(Key, Bytes)>>) -> Step {
        let result = match request {
            Request::Hello { .. } => Err(WireError::invalid("Hello was already received")),
            Request::Begin => self.call(id, Pending::Begin, |s, out| s.begin(out)),
            Request::Read { keys } => match self.check_read(&keys) {
                Ok(()) => self.call(id, Pending::Read, |s, out| s.read(&keys, out)),
                Err(e) => Err(e),
            },
            Request::Write { key, value } => self.write(key, value).map(|()| Step::Reply(Response::Written)),
            Request::Commit => self.call(id, Pending::Commit, |s, out| s.commit(out)),
            Request::Abort => match self.session.abort(&mut self.out) {
                Ok(()) => {
                    self.writes = 0;
                    self.host.metrics.txns_aborted.inc();
                    Ok(Step::Reply(Response::Aborted))
                }
                Err(e) => Err(WireError::from(e)),
            },
            Request::ReadOnly { keys } => match self.check_read(&keys) {
                Ok(()) => self.call(id, Pending::ReadOnly { keys, values: None }, |s, out| s.begin(out)),
                Err(e) => Err(e),
            },
            Request::ExportSession => self
                .session
                .export_state()
                .map_err(WireError::from)
                .and_then(|state| token::encode::<P>(&self.host.token_key, self.dc, &state))
                .map(|t| Step::Reply(Response::Token(t))),
            Request::ResumeSession { token } => token::decode::<P>(&self.host.token_key, self.dc, &token)
                .and_then(|state| self.session.import_state(state).map_err(WireError::from))
                .map(|()| Step::Reply(Response::Resumed)),
            Request::DropPeerConnections => {
                self.host.router.drop_peer_connections();
                Ok(Step::Reply(Response::Done))
            }
            Request::Stats { waited_txns } => Ok(Step::Reply(Response::Stats(crate::stats::node_stats(
                &self.host.node_name,
                &self.host.metrics,
                &self.host.replicas,
                waited_txns,
            )))),
            Request::Dump => {
                self.start_dump(dump_tx.clone());
                self.pending = Some(InFlight { id, op: Pending::Dump, since: Instant::now() });
                Ok(Step::Wait)
            }
        };
        result.unwrap_or_else(|e| Step::Reply(Response::Error(e)))
    }

    fn write(&mut self, key: Bytes, value: Bytes) -> Result<(), WireError> {
        self.host.limits.check_write(&key, &value, u64::from(self.writes))?;
        self.session.write(key, value).map_err(WireError::from)?;
        self.writes += 1;
        Ok(())
    }

    /// Calls the session; an immediate completion is answered at once.
    fn call(
        &mut self,
        id: u64,
        op: Pending,
        f: impl FnOnce(&mut P::Session, &mut Vec<(Addr, P::Message)>) -> Result<Option<SessionEvent>, SessionError>,
    ) -> Result<Step, WireError> {
        let event = f(&mut self.session, &mut self.out).map_err(WireError::from)?;
        self.pending = Some(InFlight { id, op, since: Instant::now() });
        match event.and_then(|ev| self.advance(ev)) {
            Some(reply) => {
                // Answered without the cluster (a read of the client's own
                // writes, a commit without writes).
                self.pending = None;
                Ok(Step::Reply(reply))
            }
            None => Ok(Step::Wait),
        }
    }

    /// Feeds a session completion to the operation in flight; returns the
    /// reply when the operation is over.
    fn advance(&mut self, event: SessionEvent) -> Option<Response> {
        let flight = self.pending.as_mut()?;
        let metrics = &self.host.metrics;
        let mut event = Some(event);
        while let Some(ev) = event.take() {
            if let SessionEvent::Failed(e) = ev {
                self.writes = 0;
                return Some(Response::Error(WireError::from(e)));
            }
            match (&mut flight.op, ev) {
                (Pending::Begin, SessionEvent::Started) => {
                    metrics.txns_started.inc();
                    return Some(Response::Started);
                }
                (Pending::Read, SessionEvent::Read(values)) => {
                    return Some(Response::Values(values.into_iter().map(|(_, v)| v).collect()));
                }
                (Pending::Commit, SessionEvent::Committed(s)) => {
                    self.writes = 0;
                    metrics.txns_committed.inc();
                    return Some(Response::Committed(s.map(stamp)));
                }
                (Pending::ReadOnly { keys, values: None }, SessionEvent::Started) => {
                    metrics.txns_started.inc();
                    match self.session.read(keys, &mut self.out) {
                        Ok(next) => event = next,
                        Err(e) => return Some(Response::Error(WireError::from(e))),
                    }
                }
                (Pending::ReadOnly { values: slot @ None, .. }, SessionEvent::Read(values)) => {
                    *slot = Some(values.into_iter().map(|(_, v)| v).collect());
                    match self.session.commit(&mut self.out) {
                        Ok(next) => event = next,
                        Err(e) => return Some(Response::Error(WireError::from(e))),
                    }
                }
                (Pending::ReadOnly { values: Some(values), .. }, SessionEvent::Committed(_)) => {
                    metrics.txns_committed.inc();
                    return Some(Response::Values(std::mem::take(values)));
                }
                (_, ev) => {
                    tracing::warn!(client = ?self.client, ?ev, "unexpected session event; ignored");
                }
            }
        }
        None
    }

    fn start_dump(&self, reply: mpsc::UnboundedSender<Vec<(Key, Bytes)>>) {
        let replicas: Vec<_> = self.host.router.local_replicas().filter(|r| r.dc == self.dc).collect();
        let mut waits = Vec::new();
        for r in replicas {
            let (tx, rx) = oneshot::channel();
            if let Some(inbox) = self.host.router.replica_inbox(r) {
                let _ = inbox.send(ReplicaInput::Dump(tx));
                waits.push(rx);
            }
        }
        tokio::spawn(async move {
            let mut entries = Vec::new();
            for w in waits {
                entries.extend(w.await.unwrap_or_default());
            }
            entries.sort();
            let _ = reply.send(entries);
        });
    }

    /// The client went away: end its transaction so the coordinator can
    /// forget it at once.
    fn close(&mut self) {
        let _ = self.session.abort(&mut self.out);
        self.flush();
    }
}

type MailboxOf<P> = mpsc::UnboundedReceiver<(Addr, <P as Protocol>::Message)>;
