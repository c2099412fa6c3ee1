//! The accepting side: handshakes, batches in, duplicates out, acks back.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use rustls::pki_types::CertificateDer;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout_at, Instant};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tracing::{debug, warn};

use crate::conn::{self, Reader, Writer};
use crate::frame;
use crate::handshake::{
    self, HandshakeError, Hello, Refusal, Reply, HANDSHAKE_TIMEOUT, MAX_HANDSHAKE_BYTES, TRANSPORT_VERSION,
};
use crate::outbox::lock;
use crate::peer::PeerShared;
use crate::shared::{Inlet, Shared};
use crate::tls::PeerTls;
use crate::WireMessage;

type Frames = FramedRead<Reader, LengthDelimitedCodec>;

/// Why an inbound connection ended.
enum End {
    /// Normal: the peer closed, a newer connection took over, or a drop was requested.
    Quiet(&'static str),
    Io(io::Error),
    /// Bad input: counted, logged, connection closed.
    Bad(String),
    /// A caller that did not authenticate (no TLS handshake with a
    /// certificate of our CA, in time): counted, logged quietly — anyone
    /// can cause these, and a log must not be theirs to flood.
    Stranger(String),
}

/// Connections still shaking hands (TLS and hello), at most: past this a
/// new one is closed at once, so strangers cannot make us hold many.
const MAX_HANDSHAKING: usize = 64;

impl From<io::Error> for End {
    fn from(e: io::Error) -> Self {
        End::Io(e)
    }
}

/// A frame error from the codec: an oversized length is bad input, the rest is I/O.
fn frame_error(e: io::Error) -> End {
    match e.kind() {
        io::ErrorKind::InvalidData => End::Bad(e.to_string()),
        _ => End::Io(e),
    }
}

/// Runs for the life of the transport; dropping it (abort) closes every inbound connection.
pub(crate) async fn accept_loop<M: WireMessage>(listener: TcpListener, shared: Arc<Shared>, inlet: Arc<Inlet<M>>) {
    let mut conns = JoinSet::new();
    let handshaking = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKING));
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, from)) => match handshaking.clone().try_acquire_owned() {
                    Ok(permit) => {
                        conns.spawn(serve(shared.clone(), inlet.clone(), stream, permit));
                    }
                    Err(_) => {
                        shared.protocol_errors.fetch_add(1, Relaxed);
                        debug!(node = shared.cfg.node, %from, "{MAX_HANDSHAKING} connections are shaking hands: closed");
                    }
                },
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(node = shared.cfg.node, "accept failed: {e}");
                    sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn serve<M: WireMessage>(
    shared: Arc<Shared>,
    inlet: Arc<Inlet<M>>,
    stream: TcpStream,
    handshaking: tokio::sync::OwnedSemaphorePermit,
) {
    let from = stream.peer_addr().ok();
    let node = shared.cfg.node;
    match serve_conn(&shared, &inlet, stream, handshaking).await {
        End::Quiet(why) => debug!(node, ?from, "inbound connection closed: {why}"),
        End::Io(e) => debug!(node, ?from, "inbound connection failed: {e}"),
        End::Bad(why) => {
            shared.protocol_errors.fetch_add(1, Relaxed);
            warn!(node, ?from, "closing inbound connection on bad input: {why}");
        }
        End::Stranger(why) => {
            shared.protocol_errors.fetch_add(1, Relaxed);
            debug!(node, ?from, "closing an unauthenticated connection: {why}");
        }
    }
}

async fn serve_conn<M: WireMessage>(
    shared: &Shared,
    inlet: &Inlet<M>,
    stream: TcpStream,
    handshaking: tokio::sync::OwnedSemaphorePermit,
) -> End {
    if let Err(e) = stream.set_nodelay(true) {
        return End::Io(e);
    }
    // One deadline for the TLS handshake and the hello together.
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let mut epoch = shared.epoch.subscribe();
    // Under TLS, nothing of ours is read or written before the caller has
    // shown a certificate of our CA.
    let (rd, mut wr, cert) = match &shared.cfg.tls {
        None => {
            let (rd, wr) = conn::plain(stream);
            (rd, wr, None)
        }
        Some(tls) => {
            match timeout_at(deadline, tokio_rustls::TlsAcceptor::from(tls.server.clone()).accept(stream)).await {
                Err(_) => return End::Stranger("no TLS handshake in time".into()),
                Ok(Err(e)) => return End::Stranger(format!("TLS handshake: {e}")),
                Ok(Ok(stream)) => {
                    let cert =
                        stream.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.clone().into_owned());
                    let (rd, wr) = conn::split(stream);
                    (rd, wr, cert)
                }
            }
        }
    };
    // Small limit until we know who this is.
    let mut frames = FramedRead::new(rd, frame::codec(MAX_HANDSHAKE_BYTES));
    let body = match timeout_at(deadline, frames.next()).await {
        Err(_) => return End::Bad("no handshake in time".into()),
        Ok(None) => return End::Quiet("closed before the handshake"),
        Ok(Some(Err(e))) => return frame_error(e),
        Ok(Some(Ok(body))) => body,
    };
    let (peer, generation, next, gap) = match accept(shared, &body, cert.as_ref()) {
        Ok(accepted) => accepted,
        Err(Rejection::Silent(e)) => return End::Bad(e.to_string()),
        Err(Rejection::Refuse(why)) => {
            // Best effort: the peer learns why, then we close either way.
            let _ =
                conn::write(&mut wr, &handshake::encode_frame(TRANSPORT_VERSION, &Reply::Refuse(why.clone()))).await;
            return End::Bad(format!("refused: {why}"));
        }
    };
    if let Err(e) = conn::write(
        &mut wr,
        &handshake::encode_frame(TRANSPORT_VERSION, &Reply::Accept { next, incarnation: shared.incarnation }),
    )
    .await
    {
        return End::Io(e);
    }
    drop(handshaking);
    peer.counters.inbound_connections.fetch_add(1, Relaxed);
    // Before anything this connection delivers: what the sender dropped
    // came before all of it.
    if gap {
        if let Some(on_gap) = &inlet.on_gap {
            on_gap(peer.node);
        }
    }
    frames.decoder_mut().set_max_frame_length(shared.cfg.max_frame_bytes);
    match receive(shared, inlet, &peer, generation, next, frames, wr, &mut epoch).await {
        Ok(why) => End::Quiet(why),
        Err(end) => end,
    }
}

enum Rejection {
    /// Not our protocol at all: close without a word.
    Silent(HandshakeError),
    Refuse(Refusal),
}

/// Checks a hello (and, under TLS, that the certificate the caller showed
/// names the node it claims to be) and registers the connection as the
/// current one from its sender. Returns the peer, the connection's
/// generation, the next sequence number expected, and whether the sender
/// dropped messages not delivered here (a gap to tell of).
fn accept(
    shared: &Shared,
    body: &[u8],
    cert: Option<&CertificateDer<'_>>,
) -> Result<(Arc<PeerShared>, u64, u64, bool), Rejection> {
    let hello: Hello = handshake::decode(body).map_err(|e| match e {
        HandshakeError::Version { theirs } => Rejection::Refuse(Refusal::Version { ours: TRANSPORT_VERSION, theirs }),
        e => Rejection::Silent(e),
    })?;
    if hello.cluster != shared.cfg.cluster {
        return Err(Rejection::Refuse(Refusal::Cluster { theirs: hello.cluster }));
    }
    if let Some(why) = handshake::compare_terms(&shared.cfg.terms, &hello.terms) {
        return Err(Rejection::Refuse(why));
    }
    let peer = shared.peer(hello.node).ok_or(Rejection::Refuse(Refusal::UnknownNode(hello.node)))?;
    if shared.cfg.tls.is_some() && !cert.is_some_and(|c| PeerTls::names(c, &peer.name)) {
        return Err(Rejection::Refuse(Refusal::NotThatNode(hello.node)));
    }
    let mut st = lock(&peer.inbound);
    let mut gap = false;
    match st.incarnation {
        Some(known) if hello.incarnation < known => {
            return Err(Rejection::Refuse(Refusal::Stale { node: hello.node, theirs: hello.incarnation }));
        }
        // It shed its backlog: what it dropped is lost, and the stream goes
        // on past it.
        Some(known) if hello.incarnation == known && hello.skipped && hello.base > st.next => {
            st.next = hello.base;
            gap = true;
        }
        Some(known) if hello.incarnation == known => {
            // It may have missed acks (base below next), never skipped past
            // what we delivered — unless nothing was delivered yet: a sender
            // that skipped what it held for our predecessor, and lost the
            // connection before its first batch, starts where it skipped to.
            if !st.start_at(hello.base) {
                return Err(Rejection::Refuse(Refusal::Sequence { base: hello.base, next: st.next }));
            }
        }
        // First contact, or the sender restarted: its numbering starts afresh at its base.
        _ => {
            st.incarnation = Some(hello.incarnation);
            st.next = hello.base;
            st.fresh = true;
        }
    }
    // Supersede any older connection from this sender before telling where to resume,
    // so nothing else can deliver on this link from now on.
    st.generation += 1;
    // The reply acknowledges everything before `next`.
    st.carried = st.next;
    Ok((peer.clone(), st.generation, st.next, gap))
}

/// Delivers batches until the connection ends; `Ok` for a quiet end.
#[allow(clippy::too_many_arguments)]
async fn receive<M: WireMessage>(
    shared: &Shared,
    inlet: &Inlet<M>,
    peer: &PeerShared,
    generation: u64,
    next: u64,
    mut frames: Frames,
    mut wr: Writer,
    epoch: &mut watch::Receiver<u64>,
) -> Result<&'static str, End> {
    // Armed only while something is delivered and unacknowledged: an idle link costs no wake-ups.
    let ack_timer = sleep(shared.cfg.ack_interval);
    tokio::pin!(ack_timer);
    let mut armed = false;
    // `acked`: the last ack this connection wrote (or its handshake's
    // `next`). Acks also ride on our own batches to the sender
    // ([`frame::put_batch`]): while those keep carrying new ones, this
    // connection writes none, except after `ack_every` messages (the other
    // direction may be queued behind a backlog). Once they stop, one ack of
    // its own confirms what they carried, which a connection lost with
    // its last batches would not have delivered.
    let (mut acked, mut delivered) = (next, next);
    // The carried ack when the timer was set.
    let mut carried_when_armed = 0;
    let mut batch: Vec<(M, usize)> = Vec::new();
    let mut ack = Vec::with_capacity(16);
    loop {
        tokio::select! {
            biased;
            _ = epoch.changed() => return Ok("dropped on request"),
            body = frames.next() => {
                let body = match body {
                    None => return Ok("peer closed"),
                    Some(Err(e)) => return Err(frame_error(e)),
                    Some(Ok(body)) => body,
                };
                let (mut first, reverse) = decode_batch(&body, &mut batch).map_err(End::Bad)?;
                peer.counters.frames_received.fetch_add(1, Relaxed);
                if reverse > 0 && !peer.take_ack(reverse, false) {
                    return Err(End::Bad(format!("reverse ack {reverse} beyond what was sent")));
                }
                loop {
                    match deliver_batch(inlet, peer, generation, first, &mut batch)? {
                        Delivered::Upto(n) => {
                            delivered = n;
                            break;
                        }
                        Delivered::Superseded => return Ok("superseded by a newer connection"),
                        // The rest of the batch waits here, and the socket
                        // is not read meanwhile: the link holds still.
                        Delivered::Held { next, wait } => {
                            delivered = next;
                            first = next;
                            if delivered > acked {
                                ack.clear();
                                frame::put_ack(&mut ack, delivered);
                                conn::write(&mut wr, &ack).await?;
                                peer.counters.acks_sent.fetch_add(1, Relaxed);
                                acked = delivered;
                                armed = false;
                            }
                            tokio::select! {
                                biased;
                                _ = epoch.changed() => return Ok("dropped on request"),
                                () = sleep(wait) => {}
                            }
                        }
                    }
                }
                if delivered.saturating_sub(acked) < shared.cfg.ack_every {
                    if !armed && delivered > acked {
                        ack_timer.as_mut().reset(Instant::now() + shared.cfg.ack_interval);
                        (armed, carried_when_armed) = (true, peer.carried_acks());
                    }
                    continue;
                }
            }
            () = &mut ack_timer, if armed => {
                armed = false;
                // Our batches carried new acks within the interval: the
                // rest rides on the next, as long as they keep going.
                let carried = peer.carried_acks();
                if carried > carried_when_armed && delivered > acked {
                    ack_timer.as_mut().reset(Instant::now() + shared.cfg.ack_interval);
                    (armed, carried_when_armed) = (true, carried);
                    continue;
                }
                if delivered <= acked {
                    continue;
                }
            }
        }
        armed = false;
        ack.clear();
        frame::put_ack(&mut ack, delivered);
        conn::write(&mut wr, &ack).await?;
        peer.counters.acks_sent.fetch_add(1, Relaxed);
        acked = delivered;
    }
}

/// Decodes a whole batch before delivering any of it: a batch with a bad
/// message delivers nothing. Returns the first message's sequence number
/// and the batch's reverse ack.
fn decode_batch<M: WireMessage>(body: &[u8], batch: &mut Vec<(M, usize)>) -> Result<(u64, u64), String> {
    batch.clear();
    let (first, reverse, mut rest) = frame::batch_head(body).map_err(|e| format!("batch header: {e}"))?;
    if rest.is_empty() {
        return Err("empty batch".into());
    }
    while !rest.is_empty() {
        let (msg, tail) = postcard::take_from_bytes::<M>(rest)
            .map_err(|e| format!("message {} of batch at {first}: {e}", batch.len()))?;
        batch.push((msg, rest.len() - tail.len()));
        rest = tail;
    }
    first.checked_add(batch.len() as u64).ok_or("sequence number overflow")?;
    Ok((first, reverse))
}

/// What became of a batch.
enum Delivered {
    /// All of it: the next sequence number expected.
    Upto(u64),
    /// The messages before `next` (the batch keeps `next` and what follows):
    /// the one at `next` is held, to be offered again after `wait`.
    Held { next: u64, wait: Duration },
    /// This connection was superseded: nothing delivered.
    Superseded,
}

/// Delivers the messages of `batch` (numbered from `first`) not delivered
/// yet, in order, up to the first the inlet holds.
fn deliver_batch<M: WireMessage>(
    inlet: &Inlet<M>,
    peer: &PeerShared,
    generation: u64,
    first: u64,
    batch: &mut Vec<(M, usize)>,
) -> Result<Delivered, End> {
    let len = batch.len() as u64;
    let (mut msgs, mut bytes) = (0, 0);
    let mut st = lock(&peer.inbound);
    if st.generation != generation {
        return Ok(Delivered::Superseded);
    }
    // A sender that dropped what it held for our predecessor (we are a new
    // process) starts its stream to us past it.
    if !st.start_at(first) {
        return Err(End::Bad(format!("gap: batch starts at {first}, expected {}", st.next)));
    }
    st.fresh = false;
    let skip = (st.next - first).min(len) as usize;
    let (mut end, mut held) = (batch.len(), None);
    if let Some(admit) = &inlet.admit {
        if let Some((i, wait)) =
            batch.iter().enumerate().skip(skip).find_map(|(i, (m, _))| admit(peer.node, m).map(|w| (i, w)))
        {
            (end, held) = (i, Some(wait));
        }
    }
    for (msg, size) in batch.drain(..end).skip(skip) {
        msgs += 1;
        bytes += size as u64;
        (inlet.deliver)(peer.node, msg);
    }
    let delivered_to = first + end as u64;
    st.next = st.next.max(delivered_to);
    let next = st.next;
    drop(st);

    let c = &peer.counters;
    c.duplicates_dropped.fetch_add(skip.min(end) as u64, Relaxed);
    c.msgs_received.fetch_add(msgs, Relaxed);
    c.bytes_received.fetch_add(bytes, Relaxed);
    Ok(match held {
        Some(wait) => {
            c.held.fetch_add(1, Relaxed);
            Delivered::Held { next, wait }
        }
        None => Delivered::Upto(next),
    })
}
