//! One client connection: the handshake and the login, then requests read ahead within a
//! byte budget (the client may pipeline them), served one at a time by the
//! session driver and answered in order — also after the client half-closes.
//! Answers are buffered and leave in one write when the connection is about
//! to wait (hot path: one syscall per round trip).

use super::admin::{self, DumpParts};
use super::driver::{Served, SessionDriver};
use super::frame_codec::FrameCodec;
use super::host::{ClientHost, Mailbox};
use bytes::Bytes;
use causeway_protocol::{DcId, Protocol};
use causeway_wire::{Credentials, Request, RequestFrame, Response, ResponseFrame, Welcome, WireError, WIRE_VERSION};
use futures_util::{SinkExt, StreamExt};
use std::collections::VecDeque;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::Framed;

/// Bytes of requests read ahead of the one being served (pipelining); past
/// this the server stops reading the socket until it catches up, so one
/// client cannot make it buffer without bound.
const MAX_QUEUED_BYTES: usize = 32 << 20;

/// The largest frame before the hello is through: a hello is small, and a
/// stranger must not make us buffer megabytes.
const MAX_HELLO_BYTES: usize = 64 << 10;

/// A client's byte stream: plain TCP or TLS.
pub trait ClientStream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<S: AsyncRead + AsyncWrite + Send + Unpin> ClientStream for S {}

type Wire = Framed<Box<dyn ClientStream>, FrameCodec>;

/// Serves one connection of a client of `dc` until either side closes it.
/// `deadline`: when the hello must have come; `received`: the bytes read
/// from the socket so far (under TLS, some may sit in a record not yet
/// whole, which the frame buffer does not show).
pub async fn serve<P: Protocol>(
    host: Arc<ClientHost<P>>,
    stream: Box<dyn ClientStream>,
    from: IpAddr,
    dc: DcId,
    deadline: Instant,
    received: Arc<AtomicU64>,
) {
    let mut framed = Framed::new(stream, FrameCodec::new(MAX_HELLO_BYTES, host.connections.frame_timeout));
    let (id, credentials) = match handshake(&mut framed, deadline).await {
        Ok(hello) => hello,
        Err(timed_out) => {
            if timed_out {
                host.metrics.closed_by_limit("frame_timeout");
            }
            return;
        }
    };
    // The login too must be over by the deadline (a verification may wait
    // behind others).
    let role = match tokio::time::timeout_at(deadline, host.auth.login(from, credentials)).await {
        Ok(Ok(role)) => role,
        Ok(Err(refused)) => {
            let _ = send_now(&mut framed, id, Response::Error(refused)).await;
            return;
        }
        Err(_) => {
            host.metrics.closed_by_limit("frame_timeout");
            let why = format!("node {} could not check the login in time; try again", host.node_name);
            let _ = send_now(&mut framed, id, Response::Error(WireError::Unavailable(why))).await;
            return;
        }
    };
    framed.codec_mut().set_max_frame_length(host.max_frame_bytes);
    let coordinators = host.coordinators(dc);
    if coordinators.is_empty() {
        let e = WireError::Unavailable(format!("node {} runs no replica of DC {}", host.node_name, dc.0));
        let _ = send_now(&mut framed, id, Response::Error(e)).await;
        return;
    }
    let Some((client, mailbox)) = host.register_session(dc) else {
        let e = WireError::Unavailable(format!("node {} has no free session id", host.node_name));
        let _ = send_now(&mut framed, id, Response::Error(e)).await;
        return;
    };
    let welcome = Welcome {
        version: WIRE_VERSION,
        protocol: P::NAME.into(),
        dc: dc.0,
        node: host.node_name.clone(),
        limits: host.limits,
        role,
    };
    if send_now(&mut framed, id, Response::Welcome(welcome)).await.is_ok() {
        host.metrics.client_connections.inc();
        let coordinator = host.next_coordinator(&coordinators);
        let mut driver = SessionDriver::new(&host, client, dc, coordinator, role);
        run(&mut driver, framed, mailbox, &received).await;
        driver.close();
        host.metrics.client_connections.dec();
    }
    host.router.unregister_session(client);
}

/// A connection over `max_clients`: its hello is answered with an error
/// that says so, and it is closed.
pub async fn refuse<P: Protocol>(host: Arc<ClientHost<P>>, stream: Box<dyn ClientStream>, deadline: Instant) {
    host.metrics.closed_by_limit("max_clients");
    let mut framed = Framed::new(stream, FrameCodec::new(MAX_HELLO_BYTES, host.connections.frame_timeout));
    if let Ok((id, _)) = handshake(&mut framed, deadline).await {
        let why = format!(
            "node {} serves at most {} client connections ([connections] max_clients), and has them",
            host.node_name, host.connections.max_clients
        );
        let _ = send_now(&mut framed, id, Response::Error(WireError::Unavailable(why))).await;
    }
}

/// Reads `Hello` (whole, by `deadline`); answers anything else (or another
/// wire version) with an error. Returns the request id to answer with
/// `Welcome` and the credentials, or whether it failed for time.
async fn handshake(framed: &mut Wire, deadline: Instant) -> Result<(u64, Option<Credentials>), bool> {
    let hello = match tokio::time::timeout_at(deadline, framed.next()).await {
        Ok(Some(Ok(frame))) => frame,
        Ok(_) => return Err(false),
        Err(_) => return Err(true),
    };
    let refusal = match postcard::from_bytes::<RequestFrame>(&hello) {
        Ok(RequestFrame { id, request: Request::Hello { version, credentials, .. } }) if version == WIRE_VERSION => {
            return Ok((id, credentials))
        }
        Ok(RequestFrame { id, request: Request::Hello { version, .. } }) => {
            (id, WireError::VersionMismatch { server: WIRE_VERSION, client: version })
        }
        Ok(RequestFrame { id, .. }) => (id, WireError::HelloExpected),
        Err(e) => (0, WireError::Malformed(e.to_string())),
    };
    let _ = send_now(framed, refusal.0, Response::Error(refusal.1)).await;
    Err(false)
}

/// Sends an answer at once (handshake answers, last words).
async fn send_now(framed: &mut Wire, id: u64, response: Response) -> std::io::Result<()> {
    send(framed, id, response).await?;
    flush(framed).await
}

/// Writes what is buffered, within the frame timeout.
async fn flush(framed: &mut Wire) -> std::io::Result<()> {
    let limit = framed.codec().timeout();
    within(limit, SinkExt::<Bytes>::flush(framed)).await
}

/// A write to the client, given up after `limit`: a client that does not
/// read its answers must not hold the connection (and what it queued).
async fn within(limit: Duration, write: impl Future<Output = std::io::Result<()>>) -> std::io::Result<()> {
    match tokio::time::timeout(limit, write).await {
        Ok(done) => done,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the client reads no answers")),
    }
}

/// Moves the whole frames already read into the connection's buffer to
/// `queued`, up to about `budget` bytes, without touching the socket (a
/// read that found nothing would cost a system call); returns their bytes.
/// A frame over the size limit is left where it is, for the next read to
/// report.
fn take_buffered(framed: &mut Wire, queued: &mut VecDeque<Bytes>, budget: usize) -> usize {
    let mut codec = framed.codec().clone();
    let mut taken = 0;
    while taken < budget {
        match tokio_util::codec::Decoder::decode(&mut codec, framed.read_buffer_mut()) {
            Ok(Some(frame)) => {
                taken += frame.len();
                queued.push_back(frame.freeze());
            }
            Ok(None) | Err(_) => break,
        }
    }
    taken
}

/// Queues an answer in the connection's write buffer; [`run`] flushes it
/// before it waits, so answers to pipelined requests leave in one write. An
/// answer too large for one frame is replaced by an error that says so: the
/// client hears why, and the connection lives on.
async fn send(framed: &mut Wire, id: u64, response: Response) -> std::io::Result<()> {
    let mut bytes = postcard::to_allocvec(&ResponseFrame { id, response }).map_err(std::io::Error::other)?;
    let limit = framed.codec().max_frame_length();
    if bytes.len() > limit {
        tracing::warn!(size = bytes.len(), limit, "an answer does not fit in one frame; the client gets an error");
        let e = WireError::AnswerTooLarge { size: bytes.len() as u64, limit: limit as u64 };
        bytes = postcard::to_allocvec(&ResponseFrame { id, response: Response::Error(e) })
            .map_err(std::io::Error::other)?;
    }
    // `feed` writes out when the buffer is full: within the limit too.
    let limit = framed.codec().timeout();
    within(limit, framed.feed(Bytes::from(bytes))).await
}

async fn run<P: Protocol>(
    driver: &mut SessionDriver<'_, P>,
    mut framed: Wire,
    mut mailbox: Mailbox<P>,
    received: &AtomicU64,
) {
    let metrics = driver.host().metrics.clone();
    // Answers queued, counted as they are (the handshake's are not).
    macro_rules! answer {
        ($id:expr, $r:expr) => {{
            metrics.client_frames_sent.inc();
            send(&mut framed, $id, $r).await
        }};
    }
    let mut queued: VecDeque<Bytes> = VecDeque::new();
    let mut queued_bytes = 0usize;
    // The client closed its side: answer what it sent, then close ours.
    let mut half_closed = false;
    let (dump_tx, mut dump_rx) = mpsc::unbounded_channel::<DumpParts>();
    // The session's next deadline; see `Alarm` for why one timer.
    let mut alarm = crate::alarm::Alarm::new();
    // Limits on time: a frame begun must end within `frame_timeout`, and a
    // session with nothing asked or pending is closed after `idle_timeout`.
    // Checked a few times per timeout, not per frame: off the hot path.
    let limits = driver.host().connections;
    let period = limits.frame_timeout.min(limits.idle_timeout.unwrap_or(Duration::MAX)) / 4;
    let mut check = tokio::time::interval(period.clamp(Duration::from_millis(5), Duration::from_secs(1)));
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut partial_since: Option<tokio::time::Instant> = None;
    let mut active_at = tokio::time::Instant::now();
    // A frame came since the last check (which then reads the clock, so
    // that a frame costs no clock read).
    let mut active = false;
    // The socket's bytes read when the last frame came whole: more since
    // is a frame begun, in the frame buffer or in a TLS record.
    let mut received_at_frame = received.load(Relaxed);
    loop {
        // Serve queued requests while nothing waits for the cluster.
        while !driver.is_waiting() {
            let Some(frame) = queued.pop_front() else { break };
            queued_bytes -= frame.len();
            let (id, step) = match postcard::from_bytes::<RequestFrame>(&frame) {
                Ok(RequestFrame { id, request }) => (id, driver.serve(id, request, &dump_tx)),
                Err(e) => (0, Served::Close(Response::Error(WireError::Malformed(e.to_string())))),
            };
            driver.flush();
            match step {
                Served::Reply(r) => {
                    if answer!(id, r).is_err() {
                        return;
                    }
                }
                Served::Wait => {}
                Served::Close(r) => {
                    let _ = send_now(&mut framed, id, r).await;
                    return;
                }
            }
        }
        // Requests the last read brought in beyond the frame taken (a
        // client pipelines its writes with its commit) are served before
        // anything is flushed: their answers leave with the others'.
        if !driver.is_waiting() && !half_closed && queued_bytes < MAX_QUEUED_BYTES {
            let before = queued.len();
            queued_bytes += take_buffered(&mut framed, &mut queued, MAX_QUEUED_BYTES - queued_bytes);
            let taken = queued.len() - before;
            if taken > 0 {
                metrics.client_frames_received.inc_by(taken as u64);
                partial_since = None;
                active = true;
                received_at_frame = received.load(Relaxed);
                continue;
            }
        }
        // Answers wait in the buffer while an operation of this client is
        // at the cluster: a client that pipelined it after them reads them
        // with its answer, in one write. Otherwise they go now, before this
        // connection sleeps.
        if !driver.is_waiting() {
            if !framed.write_buffer().is_empty() {
                metrics.client_writes.inc();
            }
            if flush(&mut framed).await.is_err() {
                return;
            }
        }
        if half_closed && !driver.is_waiting() {
            return;
        }
        alarm.cover(driver.next_timer());
        tokio::select! {
            frame = framed.next(), if !half_closed && queued_bytes < MAX_QUEUED_BYTES => match frame {
                Some(Ok(frame)) => {
                    // Frames come one after another: whatever was partial is whole now.
                    partial_since = None;
                    active = true;
                    received_at_frame = received.load(Relaxed);
                    metrics.client_frames_received.inc();
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
                let answer = driver.on_message(from, msg);
                driver.flush();
                if let Some((id, r)) = answer {
                    if answer!(id, r).is_err() { return; }
                }
            }
            () = alarm.ring() => {
                let answer = driver.on_timers();
                driver.flush();
                if let Some((id, r)) = answer {
                    if answer!(id, r).is_err() { return; }
                }
            }
            now = check.tick() => {
                let reading = !half_closed && queued_bytes < MAX_QUEUED_BYTES;
                let begun = !framed.read_buffer().is_empty() || received.load(Relaxed) != received_at_frame;
                partial_since = if reading && begun { Some(partial_since.unwrap_or(now)) } else { None };
                let busy = active || driver.is_waiting() || !queued.is_empty() || partial_since.is_some();
                active = false;
                if busy {
                    active_at = now;
                }
                let why = if partial_since.is_some_and(|t| now - t > limits.frame_timeout) {
                    Some(("frame_timeout", format!("a request did not arrive whole within {:?}", limits.frame_timeout)))
                } else if limits.idle_timeout.is_some_and(|idle| now - active_at > idle) {
                    Some(("idle_timeout", format!("the session was idle for {:?}", limits.idle_timeout.unwrap_or_default())))
                } else {
                    None
                };
                if let Some((what, why)) = why {
                    driver.host().metrics.closed_by_limit(what);
                    let why = format!("node {} closed the connection: {why} ([connections] {what}_s)", driver.host().node_name);
                    let _ = send_now(&mut framed, 0, Response::Error(WireError::Unavailable(why))).await;
                    return;
                }
            }
            Some(parts) = dump_rx.recv() => {
                let response = admin::dump_response(driver.host(), driver.dc(), parts);
                if let Some((id, r)) = driver.finish(response) {
                    if answer!(id, r).is_err() { return; }
                }
            }
        }
    }
}
