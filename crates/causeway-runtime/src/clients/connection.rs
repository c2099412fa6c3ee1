//! One client connection: the handshake, then requests read ahead within a
//! byte budget (the client may pipeline them), served one at a time by the
//! session driver and answered in order — also after the client half-closes.
//! Answers are buffered and leave in one write when the connection is about
//! to wait (hot path: one syscall per round trip).

use super::admin::{self, DumpParts};
use super::driver::{Served, SessionDriver};
use super::host::{ClientHost, Mailbox};
use bytes::Bytes;
use causeway_protocol::{DcId, Protocol};
use causeway_wire::{Request, RequestFrame, Response, ResponseFrame, Welcome, WireError, WIRE_VERSION};
use futures_util::{SinkExt, StreamExt};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// Bytes of requests read ahead of the one being served (pipelining); past
/// this the server stops reading the socket until it catches up, so one
/// client cannot make it buffer without bound.
const MAX_QUEUED_BYTES: usize = 32 << 20;
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

type Wire = Framed<TcpStream, LengthDelimitedCodec>;

fn codec(max_frame: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().max_frame_length(max_frame).new_codec()
}

/// Accepts the clients of DC `dc` until the task is aborted.
pub async fn accept_loop<P: Protocol>(host: Arc<ClientHost<P>>, listener: TcpListener, dc: DcId) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve(host.clone(), stream, dc));
            }
            // Out of file descriptors, typically: wait rather than spin.
            Err(e) => {
                tracing::warn!("accepting a client failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves one connection of a client of `dc` until either side closes it.
pub async fn serve<P: Protocol>(host: Arc<ClientHost<P>>, stream: TcpStream, dc: DcId) {
    let _ = stream.set_nodelay(true);
    let mut framed = Framed::new(stream, codec(host.max_frame_bytes));
    let Some(id) = handshake(&mut framed).await else { return };
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
    };
    if send_now(&mut framed, id, Response::Welcome(welcome)).await.is_ok() {
        host.metrics.client_connections.inc();
        let coordinator = host.next_coordinator(&coordinators);
        let mut driver = SessionDriver::new(&host, client, dc, coordinator);
        run(&mut driver, framed, mailbox).await;
        driver.close();
        host.metrics.client_connections.dec();
    }
    host.router.unregister_session(client);
}

/// Reads `Hello`; answers anything else (or another wire version) with an
/// error. Returns the request id to answer with `Welcome`.
async fn handshake(framed: &mut Wire) -> Option<u64> {
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, framed.next()).await {
        Ok(Some(Ok(frame))) => frame,
        _ => return None,
    };
    let refusal = match postcard::from_bytes::<RequestFrame>(&hello) {
        Ok(RequestFrame { id, request: Request::Hello { version, .. } }) if version == WIRE_VERSION => return Some(id),
        Ok(RequestFrame { id, request: Request::Hello { version, .. } }) => {
            (id, WireError::VersionMismatch { server: WIRE_VERSION, client: version })
        }
        Ok(RequestFrame { id, .. }) => (id, WireError::HelloExpected),
        Err(e) => (0, WireError::Malformed(e.to_string())),
    };
    let _ = send_now(framed, refusal.0, Response::Error(refusal.1)).await;
    None
}

/// Sends an answer at once (handshake answers, last words).
async fn send_now(framed: &mut Wire, id: u64, response: Response) -> std::io::Result<()> {
    send(framed, id, response).await?;
    SinkExt::<Bytes>::flush(framed).await
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
    framed.feed(Bytes::from(bytes)).await
}

async fn run<P: Protocol>(driver: &mut SessionDriver<'_, P>, mut framed: Wire, mut mailbox: Mailbox<P>) {
    let mut queued: VecDeque<Bytes> = VecDeque::new();
    let mut queued_bytes = 0usize;
    // The client closed its side: answer what it sent, then close ours.
    let mut half_closed = false;
    let (dump_tx, mut dump_rx) = mpsc::unbounded_channel::<DumpParts>();
    // The session's next deadline; see `Alarm` for why one timer.
    let mut alarm = crate::alarm::Alarm::new();
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
                    if send(&mut framed, id, r).await.is_err() {
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
        // Answers wait in the buffer while an operation of this client is
        // at the cluster: a client that pipelined it after them reads them
        // with its answer, in one write. Otherwise they go now, before this
        // connection sleeps.
        if !driver.is_waiting() && SinkExt::<Bytes>::flush(&mut framed).await.is_err() {
            return;
        }
        if half_closed && !driver.is_waiting() {
            return;
        }
        alarm.cover(driver.next_timer());
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
                let answer = driver.on_message(from, msg);
                driver.flush();
                if let Some((id, r)) = answer {
                    if send(&mut framed, id, r).await.is_err() { return; }
                }
            }
            () = alarm.ring() => {
                let answer = driver.on_timers();
                driver.flush();
                if let Some((id, r)) = answer {
                    if send(&mut framed, id, r).await.is_err() { return; }
                }
            }
            Some(parts) = dump_rx.recv() => {
                let response = admin::dump_response(driver.host(), driver.dc(), parts);
                if let Some((id, r)) = driver.finish(response) {
                    if send(&mut framed, id, r).await.is_err() { return; }
                }
            }
        }
    }
}
