//! The client: one TCP connection, one session.

use crate::tls::host_of;
use crate::wire::{
    Credentials, Dump, NodeStats, Request, RequestFrame, Response, ResponseFrame, Role, Stamp, Welcome, WireError,
    DEFAULT_MAX_FRAME_BYTES, WIRE_VERSION,
};
use crate::{ClientTls, Error, SessionToken};
use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, StreamExt};
use std::collections::HashSet;
use std::fmt::Display;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// Writes sent without waiting for their acknowledgements before a
/// [`Client::write`] first collects the acknowledgements (so that neither
/// side's socket buffers fill up while the other is not reading).
const MAX_UNACKED_WRITES: usize = 256;

/// How a [`Client`] connects and how long it waits.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// A free-form name the server shows in its logs. Default: `causeway-client`.
    pub name: String,
    /// How long to wait for the TCP connection. Default: 5 s.
    pub connect_timeout: Duration,
    /// How long to wait for each answer of the server, the handshake's
    /// included. Default: 10 s.
    pub request_timeout: Duration,
    /// Speak TLS to the server (a cluster whose config has `[tls]` serves
    /// its clients over TLS). Default: none, plain TCP.
    pub tls: Option<ClientTls>,
    /// Log in as this user of the cluster (its users file). Default: none,
    /// anonymously, which only a cluster that says so admits. Over plain
    /// TCP the password crosses in the clear: give `tls` too.
    pub credentials: Option<Credentials>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            name: "causeway-client".into(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            tls: None,
            credentials: None,
        }
    }
}

/// A connection to one Causeway server, and the session it carries.
///
/// A session runs one transaction at a time: [`begin`](Client::begin), any
/// number of [`read`](Client::read)s and [`write`](Client::write)s, then
/// [`commit`](Client::commit) or [`abort`](Client::abort). Reads see a causal
/// snapshot of the DC, never block, and see the transaction's own writes.
/// Between transactions a [`read_only`](Client::read_only) transaction takes
/// one round trip and no commit.
///
/// Every call takes `&mut self`, so a client serves one task; open one client
/// per concurrent session. Requests are answered in order, which lets
/// [`write`](Client::write) return without waiting for the server.
///
/// After a fatal error ([`Error::is_fatal`]: a timeout, a closed connection,
/// a protocol error) the client is unusable: every later call returns
/// [`Error::Disconnected`]. So it is after a call that was cancelled (its
/// future dropped, say by a `select!` or an outer timeout) while waiting
/// for its answer: prefer [`ClientOptions::request_timeout`]. Connect again, and carry the session's causal
/// past over with a [`SessionToken`] exported before the failure if it
/// matters.
/// The connection's bytes: plain TCP or TLS.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<S: AsyncRead + AsyncWrite + Send + Unpin> Stream for S {}

pub struct Client {
    framed: Framed<Box<dyn Stream>, LengthDelimitedCodec>,
    welcome: Welcome,
    options: ClientOptions,
    /// The id of the next request sent.
    next_id: u64,
    /// Writes sent whose answer has not been read yet; their ids are the
    /// `unacked` ids just below `next_id`.
    unacked: usize,
    /// The first error among acknowledgements read but not yet reported.
    deferred: Option<Error>,
    /// Set by a fatal error.
    closed: bool,
    /// Set while a request is on its way and its answer (or, for a write,
    /// its count in `unacked`) is not accounted for: still set at the next
    /// call if a call was cancelled midway.
    busy: bool,
    /// The keys written (or deleted) in the running transaction, as the
    /// server counts them against its limit: a key written again counts once.
    txn_keys: HashSet<Bytes>,
    /// Why the first operation this client refused itself (a limit) since
    /// the last `begin` was refused: the transaction cannot commit.
    refused: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.welcome)
            .field("unacked_writes", &self.unacked)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

async fn tls_handshake(
    tls: &ClientTls,
    addr: &str,
    stream: TcpStream,
    limit: Duration,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Error> {
    let failed = |detail: String| Error::Tls { addr: addr.to_string(), detail };
    let host = tls.server_name.clone().unwrap_or_else(|| host_of(addr).to_string());
    let server_name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| failed(format!("{host:?} cannot be checked against a certificate: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
    match tokio::time::timeout(limit, connector.connect(server_name, stream)).await {
        Err(_) => Err(Error::Timeout { what: "TLS handshake", after: limit }),
        Ok(Err(e)) => Err(failed(match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                format!("{e} (does the server speak TLS? a cluster with tls = \"off\" does not)")
            }
            _ => e.to_string(),
        })),
        Ok(Ok(stream)) => Ok(stream),
    }
}

impl Client {
    /// Connects to the server at `addr` (`"host:port"`, a `SocketAddr`, …) with
    /// default [`ClientOptions`] and opens a session in its DC.
    pub async fn connect(addr: impl ToSocketAddrs + Display) -> Result<Client, Error> {
        Client::connect_with(addr, ClientOptions::default()).await
    }

    /// Connects to the server at `addr` and opens a session in its DC.
    ///
    /// Fails with [`Error::Unreachable`] if no TCP connection can be made,
    /// [`Error::Timeout`] if the connection or the handshake takes too long,
    /// [`Error::NotCauseway`] if what answers closes the connection or does
    /// not speak Causeway's wire protocol, and
    /// [`Error::VersionMismatch`] if the server speaks another wire version.
    pub async fn connect_with(addr: impl ToSocketAddrs + Display, options: ClientOptions) -> Result<Client, Error> {
        let name = addr.to_string();
        let stream = match tokio::time::timeout(options.connect_timeout, TcpStream::connect(addr)).await {
            Err(_) => return Err(Error::Timeout { what: "connect", after: options.connect_timeout }),
            Ok(Err(source)) => return Err(Error::Unreachable { addr: name, source }),
            Ok(Ok(stream)) => stream,
        };
        // Requests are small and latency matters more than packing them.
        stream.set_nodelay(true).map_err(|source| Error::Unreachable { addr: name.clone(), source })?;
        let stream: Box<dyn Stream> = match &options.tls {
            None => Box::new(stream),
            Some(tls) => Box::new(tls_handshake(tls, &name, stream, options.connect_timeout).await?),
        };
        let codec = LengthDelimitedCodec::builder().max_frame_length(DEFAULT_MAX_FRAME_BYTES).new_codec();
        let mut client = Client {
            framed: Framed::new(stream, codec),
            welcome: Welcome {
                version: WIRE_VERSION,
                protocol: String::new(),
                dc: 0,
                node: String::new(),
                limits: Default::default(),
                role: Role::Read,
            },
            options,
            next_id: 0,
            unacked: 0,
            deferred: None,
            closed: false,
            busy: false,
            txn_keys: HashSet::new(),
            refused: None,
        };
        let hello = Request::Hello {
            version: WIRE_VERSION,
            client: client.options.name.clone(),
            credentials: client.options.credentials.clone(),
        };
        let not_causeway = |detail: String| Error::NotCauseway { addr: name.clone(), detail };
        // A silent peer stays a timeout: it may be a Causeway server too busy
        // to answer. One that closes or answers gibberish is not one.
        // A server with TLS for clients answers a hello in the clear with
        // a TLS alert and closes: say what to do about it.
        let hint = if client.options.tls.is_none() {
            " (so does a server of a cluster with TLS for clients: then give the cluster's CA)"
        } else {
            ""
        };
        let answer = match client.call("hello", hello).await {
            Err(Error::Disconnected) => Err(not_causeway(format!("it closed the connection at the handshake{hint}"))),
            Err(Error::Protocol(detail)) => Err(not_causeway(format!("{detail}{hint}"))),
            other => other,
        };
        match answer? {
            Response::Welcome(welcome) => {
                if welcome.version != WIRE_VERSION {
                    return Err(Error::VersionMismatch { server: welcome.version, client: WIRE_VERSION });
                }
                client.welcome = welcome;
                Ok(client)
            }
            other => Err(client.unexpected("hello", other)),
        }
    }

    /// What the server said when the connection opened: its node name, its
    /// DC, the protocol the cluster runs, its size [limits](crate::wire::Limits),
    /// and this connection's [role](crate::wire::Role).
    pub fn server(&self) -> &Welcome {
        &self.welcome
    }

    /// The options this client was connected with.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Whether a fatal error closed the connection (every call now returns
    /// [`Error::Disconnected`]).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Starts a transaction on a causal snapshot of the DC that includes
    /// everything this session wrote or saw before.
    ///
    /// Fails with [`Error::TransactionActive`] if one is already running
    /// (which leaves that one unable to commit, as every refused operation
    /// inside a transaction does).
    pub async fn begin(&mut self) -> Result<(), Error> {
        self.settle().await?;
        match self.call("begin", Request::Begin).await? {
            Response::Started => {
                self.started();
                Ok(())
            }
            other => Err(self.unexpected("begin", other)),
        }
    }

    /// Reads `keys` in the running transaction, in one round trip; the
    /// answer has one entry per key, in the order asked (`None`: the key has
    /// no value).
    ///
    /// Fails with [`Error::NoActiveTransaction`] outside a transaction, and
    /// without contacting the server if a key is empty or the request is
    /// over the server's limits. A failed read leaves the transaction unable
    /// to commit: [`commit`](Client::commit) aborts it.
    pub async fn read<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Bytes>>, Error> {
        let keys = self.check_keys(keys)?;
        self.settle().await?;
        let n = keys.len();
        match self.call("read", Request::Read { keys }).await? {
            Response::Values(values) if values.len() == n => Ok(values),
            other => Err(self.unexpected("read", other)),
        }
    }

    /// Reads one key in the running transaction; see [`read`](Client::read).
    pub async fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>, Error> {
        Ok(self.read(&[key]).await?.pop().flatten())
    }

    /// Writes `value` under `key` in the running transaction; it becomes
    /// visible to others at commit, atomically with the transaction's other
    /// writes. Later reads in the transaction see it.
    ///
    /// The write is pipelined: it is sent without waiting for the server's
    /// acknowledgement. An error the server reports for it (for example
    /// [`Error::NoActiveTransaction`]) is returned by the next call on the
    /// client instead of doing that call — by this method if it has already
    /// arrived, otherwise by a later `write`, [`confirm_writes`](Client::confirm_writes),
    /// `read`, `commit`, … ([`abort`](Client::abort) discards it).
    ///
    /// An empty key or a key or value over the server's limits is rejected
    /// at once, without contacting the server.
    ///
    /// A write that fails, here or at the server, leaves the transaction
    /// unable to commit: [`commit`](Client::commit) aborts it and fails with
    /// [`Error::RefusedEarlier`].
    pub async fn write(&mut self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> Result<(), Error> {
        let (key, value) = (key.into(), value.into());
        self.check_write(&key, &value)?;
        self.txn_keys.insert(key.clone());
        self.send_write(Request::Write { key, value }).await
    }

    /// Deletes `key` in the running transaction: once it commits, reads
    /// find no value. Pipelined like [`write`](Client::write), with the same
    /// rules.
    pub async fn delete(&mut self, key: impl Into<Bytes>) -> Result<(), Error> {
        let key = key.into();
        self.check_write(&key, &[])?;
        self.txn_keys.insert(key.clone());
        self.send_write(Request::Delete { key }).await
    }

    /// Sends a write or delete without waiting for its acknowledgement.
    async fn send_write(&mut self, request: Request) -> Result<(), Error> {
        self.ensure_open()?;
        // Report an error that has already arrived, without waiting.
        while self.unacked > 0 && self.deferred.is_none() {
            match self.framed.next().now_or_never() {
                Some(frame) => self.take_ack(frame)?,
                None => break,
            }
        }
        if self.unacked >= MAX_UNACKED_WRITES {
            self.collect_acks().await?;
        }
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        self.send("write", request).await?;
        self.unacked += 1;
        self.busy = false;
        Ok(())
    }

    /// Waits until the server has acknowledged every [`write`](Client::write)
    /// sent so far, and returns the first error among them.
    ///
    /// Never needed for correctness — [`commit`](Client::commit) does it first —
    /// but it tells which writes failed.
    pub async fn confirm_writes(&mut self) -> Result<(), Error> {
        self.settle().await
    }

    /// Commits the running transaction: its writes become visible together,
    /// first in this DC, then in the others. Returns the commit timestamp, or
    /// `None` if the transaction wrote nothing.
    ///
    /// If any operation of the transaction was refused (a write over a
    /// limit, a pipelined write the server refused, a bad read), nothing
    /// commits: the transaction is aborted and the call fails with
    /// [`Error::RefusedEarlier`], which names the first refusal.
    ///
    /// Fails with [`Error::OutcomeUnknown`] when the transaction may or may
    /// not have committed: the server could not confirm it, or the
    /// connection broke or timed out once the commit was sent (the
    /// connection is then closed). A connection already closed before the
    /// commit was sent gives [`Error::Disconnected`]: nothing was sent.
    pub async fn commit(&mut self) -> Result<Option<Stamp>, Error> {
        self.settle_for_commit().await?;
        if let Some(cause) = self.refused.take() {
            return Err(self.abort_refused(cause).await);
        }
        self.ensure_open()?;
        match self.call("commit", Request::Commit).await {
            Ok(Response::Committed(stamp)) => {
                self.txn_keys.clear();
                Ok(stamp)
            }
            Ok(other) => Err(self.unexpected("commit", other)),
            Err(e) => {
                self.txn_keys.clear();
                Err(e.commit_in_flight())
            }
        }
    }

    /// Runs the transaction `txn` — begin, reads, writes, commit, all of it —
    /// and runs it again, up to `attempts` times in all, while the store
    /// aborts it for a reason another attempt may not meet
    /// ([`Error::is_retryable`]: a serializable protocol's certification
    /// found a conflicting transaction). Between attempts it waits a pause
    /// that doubles from 2 ms up to 250 ms, with jitter, so that two
    /// transactions that keep aborting each other drift apart. Any other
    /// error, or the last attempt's, is returned as it is.
    ///
    /// `txn` must be a whole transaction, and must decide what to write from
    /// what it reads in that attempt (not from an earlier one's):
    ///
    /// ```no_run
    /// # async fn deposit(client: &mut causeway_client::Client) -> Result<(), causeway_client::Error> {
    /// client
    ///     .retry(10, |c| {
    ///         Box::pin(async move {
    ///             c.begin().await?;
    ///             let v = c.read(&["alice"]).await?;
    ///             let balance: i64 = v[0].as_deref().and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()).unwrap_or(0);
    ///             c.write("alice", (balance + 10).to_string()).await?;
    ///             c.commit().await
    ///         })
    ///     })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn retry<T>(
        &mut self,
        attempts: u32,
        mut txn: impl for<'c> FnMut(
            &'c mut Client,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, Error>> + Send + 'c>>,
    ) -> Result<T, Error> {
        let mut pause = std::time::Duration::from_millis(2);
        let mut attempt = 1;
        loop {
            match txn(self).await {
                Err(e) if e.is_retryable() && attempt < attempts => {
                    // The transaction is over (the store aborted it); a
                    // pause of a random share of `pause` up to it whole.
                    let nanos = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_nanos());
                    let jitter = pause.mul_f64(0.5 + f64::from(nanos % 1_000) / 2_000.0);
                    tokio::time::sleep(jitter).await;
                    pause = (pause * 2).min(std::time::Duration::from_millis(250));
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }

    /// Before a commit: the acknowledgements of pipelined writes. An error
    /// among them is the server's to act on (it refuses the commit of a
    /// transaction with a refused write and says why); only a broken
    /// connection stops the commit here.
    async fn settle_for_commit(&mut self) -> Result<(), Error> {
        match self.settle().await {
            Err(e) if e.is_fatal() => Err(e),
            _ => Ok(()),
        }
    }

    /// The transaction had an operation this client refused: abort it at
    /// the server, and say why it did not commit.
    async fn abort_refused(&mut self, cause: String) -> Error {
        self.txn_keys.clear();
        match self.call("abort", Request::Abort).await {
            Ok(Response::Aborted) => Error::RefusedEarlier { cause },
            Ok(other) => self.unexpected("abort", other),
            Err(e) => e,
        }
    }

    /// A transaction started: nothing of it was refused yet.
    fn started(&mut self) {
        self.txn_keys.clear();
        self.refused = None;
    }

    /// Passes `result` on; an error refuses an operation, which leaves the
    /// running transaction (if any) unable to commit.
    fn refusing<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = &result {
            self.refused.get_or_insert_with(|| e.to_string());
        }
        result
    }

    /// Starts a transaction and reads `keys` in it, in one round trip: the
    /// same as [`begin`](Client::begin) then [`read`](Client::read), with the
    /// two requests sent together. If the transaction cannot start, that
    /// error is returned (and the read's answer dropped); if it starts but
    /// the read fails, the read's error is returned and the transaction
    /// stays open, as after `begin` and a failed `read`.
    pub async fn begin_read<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Bytes>>, Error> {
        let keys = self.check_keys(keys)?;
        self.settle().await?;
        let n = keys.len();
        let mut answers = self.call_pipelined("begin and read", vec![Request::Begin, Request::Read { keys }]).await?;
        let read = answers.pop().expect("two answers");
        match answers.pop().expect("two answers") {
            Ok(Response::Started) => self.started(),
            Ok(other) => return Err(self.unexpected("begin", other)),
            Err(e) => return Err(e),
        }
        match read? {
            Response::Values(values) if values.len() == n => Ok(values),
            other => Err(self.unexpected("read", other)),
        }
    }

    /// Writes each `(key, Some(value))`, deletes each `(key, None)`, and
    /// commits, in one round trip: the same as [`write`](Client::write) or
    /// [`delete`](Client::delete) for each then [`commit`](Client::commit),
    /// with every request sent together. Keys, values and the number of
    /// writes in the transaction are checked against the server's limits
    /// first, so that nothing is sent if any is over (and the transaction
    /// can then no longer commit); a write the server still refuses fails
    /// the commit too, and nothing commits. Should the server refuse a
    /// write and commit the rest all the same, the answer is a
    /// [`Error::Protocol`] that says so: the commit happened. As for
    /// [`commit`](Client::commit), a connection that breaks or times out
    /// once the requests are on their way gives [`Error::OutcomeUnknown`].
    pub async fn commit_writes(&mut self, writes: Vec<(Bytes, Option<Bytes>)>) -> Result<Option<Stamp>, Error> {
        for (key, value) in &writes {
            self.check_write(key, value.as_deref().unwrap_or_default())?;
        }
        let new_keys = writes.iter().map(|(k, _)| k).filter(|k| !self.txn_keys.contains(*k)).collect::<HashSet<_>>();
        let count = self.welcome.limits.check_writes((self.txn_keys.len() + new_keys.len()) as u64);
        self.refusing(count.map_err(Error::from))?;
        self.settle_for_commit().await?;
        if let Some(cause) = self.refused.take() {
            return Err(self.abort_refused(cause).await);
        }
        let mut requests: Vec<Request> = writes
            .into_iter()
            .map(|(key, value)| match value {
                Some(value) => Request::Write { key, value },
                None => Request::Delete { key },
            })
            .collect();
        requests.push(Request::Commit);
        self.ensure_open()?;
        // From here the commit may reach the server: a connection that
        // fails leaves its outcome unknown.
        let mut answers = self.call_pipelined("write and commit", requests).await.map_err(Error::commit_in_flight)?;
        let commit = answers.pop().expect("one answer per request");
        if matches!(commit, Ok(Response::Committed(_)) | Err(Error::NoActiveTransaction)) {
            self.txn_keys.clear();
        }
        let refused = answers.into_iter().find_map(|a| match a {
            Ok(Response::Written) => None,
            Ok(other) => Some(Err(other)),
            Err(e) => Some(Ok(e)),
        });
        match (refused, commit) {
            (None, Ok(Response::Committed(stamp))) => Ok(stamp),
            (None, Ok(other)) => Err(self.unexpected("commit", other)),
            (None, Err(e)) => Err(e),
            (Some(Err(other)), _) => Err(self.unexpected("write", other)),
            (Some(Ok(e)), Ok(Response::Committed(_))) => Err(self.fail(Error::Protocol(format!(
                "the server refused a write ({e}) yet committed the transaction's other writes"
            )))),
            (Some(Ok(e)), _) => Err(e),
        }
    }

    /// Abandons the running transaction and its writes, including errors of
    /// pipelined writes not reported yet.
    pub async fn abort(&mut self) -> Result<(), Error> {
        let _ = self.settle().await;
        self.refused = None;
        match self.call("abort", Request::Abort).await? {
            Response::Aborted => {
                self.txn_keys.clear();
                Ok(())
            }
            other => Err(self.unexpected("abort", other)),
        }
    }

    /// A read-only transaction in one round trip: reads `keys` from a causal
    /// snapshot (one entry per key, in order; `None`: no value), with no
    /// commit to send.
    ///
    /// Only between transactions (else [`Error::TransactionActive`]).
    pub async fn read_only<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Bytes>>, Error> {
        let keys = self.check_keys(keys)?;
        self.settle().await?;
        let n = keys.len();
        match self.call("read-only transaction", Request::ReadOnly { keys }).await? {
            Response::Values(values) if values.len() == n => Ok(values),
            other => Err(self.unexpected("read-only transaction", other)),
        }
    }

    /// Exports the session's causal state (only between transactions), for
    /// [`resume_session`](Client::resume_session) on another connection to the
    /// same DC.
    pub async fn export_session(&mut self) -> Result<SessionToken, Error> {
        self.settle().await?;
        match self.call("export session", Request::ExportSession).await? {
            Response::Token(bytes) => Ok(SessionToken::from_bytes(bytes)),
            other => Err(self.unexpected("export session", other)),
        }
    }

    /// Adopts the causal state of a session exported from the same DC (only
    /// between transactions): later transactions see everything the exporting
    /// session wrote or saw. Fails with [`Error::BadToken`] if the server
    /// rejects the token.
    pub async fn resume_session(&mut self, token: &SessionToken) -> Result<(), Error> {
        self.settle().await?;
        match self.call("resume session", Request::ResumeSession { token: token.clone().into_bytes() }).await? {
            Response::Resumed => Ok(()),
            other => Err(self.unexpected("resume session", other)),
        }
    }

    /// Operator and test hook: the server breaks all its connections to
    /// peer servers (they reconnect on their own).
    pub async fn drop_peer_connections(&mut self) -> Result<(), Error> {
        self.settle().await?;
        match self.call("drop peer connections", Request::DropPeerConnections).await? {
            Response::Done => Ok(()),
            other => Err(self.unexpected("drop peer connections", other)),
        }
    }

    /// Operator and test hook: the newest value of every key the server's
    /// replicas hold, in key order, whatever their size (the server answers
    /// in pages; this reads them all).
    pub async fn dump(&mut self) -> Result<Dump, Error> {
        let mut dump = self.dump_page(None).await?;
        let mut cursor: Option<Bytes> = None;
        while let Some(after) = dump.next.take() {
            // The cursor moves forward, or the dump would never end.
            if cursor.as_ref().is_some_and(|c| after <= *c) {
                return Err(self.fail(Error::Protocol("a dump page that does not move forward".into())));
            }
            let page = self.dump_page(Some(after.clone())).await?;
            cursor = Some(after);
            dump.entries.extend(page.entries);
            dump.next = page.next;
        }
        Ok(dump)
    }

    /// One page of [`dump`](Client::dump): the keys after `after` (from the
    /// first with `None`); its `next` asks for the following page.
    pub async fn dump_page(&mut self, after: Option<Bytes>) -> Result<Dump, Error> {
        self.settle().await?;
        match self.call("dump", Request::Dump { after }).await? {
            Response::Dump(dump) => Ok(dump),
            other => Err(self.unexpected("dump", other)),
        }
    }

    /// Measurement hook for benchmarks: the server node's counters and its
    /// replicas' stable times ([`NodeStats`]); with `waited_txns`, also the
    /// transactions whose reads waited.
    pub async fn stats(&mut self, waited_txns: bool) -> Result<NodeStats, Error> {
        self.settle().await?;
        match self.call("stats", Request::Stats { waited_txns }).await? {
            Response::Stats(stats) => Ok(stats),
            other => Err(self.unexpected("stats", other)),
        }
    }

    // ---- validation ----

    /// A write's key and value. How many writes the transaction holds is
    /// the server's to count: an earlier pipelined write may have failed.
    fn check_write(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let checked = self.welcome.limits.check_pair(key, value).map_err(Error::from);
        self.refusing(checked)
    }

    fn check_keys<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Bytes>, Error> {
        let checked = self.welcome.limits.check_read(keys).map_err(Error::from);
        self.refusing(checked)?;
        Ok(keys.iter().map(|k| Bytes::copy_from_slice(k.as_ref())).collect())
    }

    // ---- the connection ----

    fn ensure_open(&mut self) -> Result<(), Error> {
        if self.busy {
            // A call was cancelled (its future dropped) between sending a
            // request and accounting for the answer: the answers no longer
            // match the requests.
            self.closed = true;
        }
        if self.closed {
            Err(Error::Disconnected)
        } else {
            Ok(())
        }
    }

    /// Marks the connection closed if `e` is fatal, and returns it.
    fn fail(&mut self, e: Error) -> Error {
        if e.is_fatal() {
            self.closed = true;
        }
        e
    }

    fn unexpected(&mut self, what: &str, response: Response) -> Error {
        self.fail(Error::Protocol(format!("unexpected answer to {what}: {response:?}")))
    }

    /// Waits for the acknowledgements of all pipelined writes; returns (and
    /// forgets) the first error among them.
    async fn settle(&mut self) -> Result<(), Error> {
        self.ensure_open()?;
        self.collect_acks().await?;
        match self.deferred.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Reads every outstanding write acknowledgement; errors the server
    /// reported go to `deferred`, fatal ones are returned.
    async fn collect_acks(&mut self) -> Result<(), Error> {
        while self.unacked > 0 {
            let frame = self.recv("write").await?;
            self.take_ack(frame)?;
        }
        Ok(())
    }

    fn take_ack(&mut self, frame: Option<Result<bytes::BytesMut, io::Error>>) -> Result<(), Error> {
        let id = self.next_id - self.unacked as u64;
        let response = self.decode(id, frame)?;
        self.unacked -= 1;
        match response {
            Ok(Response::Written) => Ok(()),
            Ok(other) => Err(self.unexpected("write", other)),
            Err(e) => {
                let e = self.fail(e);
                if e.is_fatal() {
                    return Err(e);
                }
                self.deferred.get_or_insert(e);
                Ok(())
            }
        }
    }

    /// Sends `request` and waits for its answer; a server error becomes `Err`.
    async fn call(&mut self, what: &'static str, request: Request) -> Result<Response, Error> {
        self.call_pipelined(what, vec![request]).await?.pop().expect("one answer per request")
    }

    /// Sends `requests` together (one write) and reads their answers in
    /// order; each answer is `Err` if the server reported an error for it.
    async fn call_pipelined(
        &mut self,
        what: &'static str,
        requests: Vec<Request>,
    ) -> Result<Vec<Result<Response, Error>>, Error> {
        self.ensure_open()?;
        debug_assert_eq!(self.unacked, 0, "settled first");
        let mut bodies = Vec::with_capacity(requests.len());
        for request in requests {
            bodies.push(self.encode(self.next_id + bodies.len() as u64, request)?);
        }
        let first = self.next_id;
        self.next_id += bodies.len() as u64;
        self.busy = true;
        let after = self.options.request_timeout;
        let n = bodies.len();
        let mut sink = futures_util::stream::iter(bodies.into_iter().map(Ok));
        match tokio::time::timeout(after, self.framed.send_all(&mut sink)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(self.fail(Error::Disconnected)),
            Err(_) => return Err(self.fail(Error::Timeout { what, after })),
        }
        let mut answers = Vec::with_capacity(n);
        for id in first..first + n as u64 {
            let frame = self.recv(what).await?;
            let response = self.decode(id, frame)?;
            let answer = response.map_err(|e| self.fail(e));
            if self.closed {
                return Err(answer.err().unwrap_or(Error::Disconnected));
            }
            answers.push(answer);
        }
        self.busy = false;
        Ok(answers)
    }

    fn encode(&self, id: u64, request: Request) -> Result<Bytes, Error> {
        let body = postcard::to_allocvec(&RequestFrame { id, request })
            .map_err(|e| Error::InvalidArgument(format!("cannot encode the request: {e}")))?;
        if body.len() > DEFAULT_MAX_FRAME_BYTES {
            return Err(Error::TooLarge {
                what: "request (bytes)".into(),
                size: body.len() as u64,
                limit: DEFAULT_MAX_FRAME_BYTES as u64,
            });
        }
        Ok(Bytes::from(body))
    }

    async fn send(&mut self, what: &'static str, request: Request) -> Result<u64, Error> {
        self.ensure_open()?;
        let id = self.next_id;
        let body = self.encode(id, request)?;
        self.next_id += 1;
        // Cleared by the caller once the answer is accounted for; errors
        // from here on are fatal.
        self.busy = true;
        let after = self.options.request_timeout;
        match tokio::time::timeout(after, self.framed.send(body)).await {
            Ok(Ok(())) => Ok(id),
            Ok(Err(_)) => Err(self.fail(Error::Disconnected)),
            Err(_) => Err(self.fail(Error::Timeout { what, after })),
        }
    }

    /// Reads the next frame under the request timeout.
    async fn recv(&mut self, what: &'static str) -> Result<Option<Result<bytes::BytesMut, io::Error>>, Error> {
        let after = self.options.request_timeout;
        match tokio::time::timeout(after, self.framed.next()).await {
            Ok(frame) => Ok(frame),
            Err(_) => Err(self.fail(Error::Timeout { what, after })),
        }
    }

    /// Decodes the answer to request `id`: `Ok(Err(_))` is an error the
    /// server reported; `Err(_)` ends the connection.
    fn decode(
        &mut self,
        id: u64,
        frame: Option<Result<bytes::BytesMut, io::Error>>,
    ) -> Result<Result<Response, Error>, Error> {
        let body = match frame {
            None => return Err(self.fail(Error::Disconnected)),
            Some(Err(e)) if e.kind() == io::ErrorKind::InvalidData => {
                // The codec refuses a frame over its limit before reading it.
                return Err(self.fail(Error::Protocol(format!(
                    "bad frame from the server ({e}; this client accepts frames up to {DEFAULT_MAX_FRAME_BYTES} bytes)"
                ))));
            }
            Some(Err(_)) => return Err(self.fail(Error::Disconnected)),
            Some(Ok(body)) => body,
        };
        let frame: ResponseFrame = match postcard::from_bytes(&body) {
            Ok(frame) => frame,
            Err(e) => return Err(self.fail(Error::Protocol(format!("cannot decode the server's answer: {e}")))),
        };
        match frame.response {
            // A server may not know the id of a request it could not decode.
            Response::Error(e) if frame.id != id => {
                self.closed = true;
                Ok(Err(e.into()))
            }
            _ if frame.id != id => {
                Err(self.fail(Error::Protocol(format!("answer to request {} while expecting {id}", frame.id))))
            }
            Response::Error(WireError::VersionMismatch { server, client }) => {
                Err(self.fail(Error::VersionMismatch { server, client }))
            }
            Response::Error(e) => Ok(Err(e.into())),
            Response::TxnAborted(why) => Ok(Err(Error::Aborted(why))),
            response => Ok(Ok(response)),
        }
    }
}
