//! The outbound link to one peer: dial, handshake, stream batches, read acks,
//! and on any failure redial with backoff and resume where the peer says.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{sleep, timeout};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tracing::{debug, warn};

use crate::config::HostAddr;
use crate::conn::{self, Reader, Writer};
use crate::frame::{self, MAX_VARINT_BYTES};
use crate::handshake::{self, Hello, Reply, HANDSHAKE_TIMEOUT, MAX_HANDSHAKE_BYTES, TRANSPORT_VERSION};
use crate::outbox::Retained;
use crate::peer::PeerShared;
use crate::shared::Shared;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Payload bytes per frame at most (unless one message is bigger): large
/// enough to amortise headers and wake-ups, small enough that the receiver
/// starts delivering before the whole backlog has crossed.
const FRAME_TARGET: usize = 256 << 10;

/// Bytes handed to the kernel per write at most, so a writer with a big
/// backlog still comes back often to take new messages and trim acked ones.
const WRITE_TARGET: usize = 1 << 20;

type Acks = FramedRead<Reader, LengthDelimitedCodec>;

/// Runs for the life of the transport.
const DOWN_FIRST_WARNING: std::time::Duration = std::time::Duration::from_secs(5);
const DOWN_REPEAT_WARNING: std::time::Duration = std::time::Duration::from_secs(60);

pub(crate) async fn run(shared: Arc<Shared>, peer: Arc<PeerShared>) {
    let mut epoch = shared.epoch.subscribe();
    let mut retained = Retained::default();
    // Messages below this were written at least once: writing them again is a re-send.
    let mut high_water = 0;
    let mut backoff = shared.cfg.reconnect_min;
    let mut established = false;
    // The peer's incarnation at our last connection: a new one means the
    // process we were sending to died.
    let mut peer_incarnation: Option<u64> = None;
    // Since when the peer cannot be reached, and when an operator was last told.
    let mut down: Option<(std::time::Instant, std::time::Instant)> = None;
    // The last refusal told to an operator, and when: a peer that refuses
    // us keeps refusing, and once a minute is enough to hear it.
    let mut refused: Option<(String, std::time::Instant)> = None;
    // The backlog was shed since the last accepted handshake: the next one
    // says so, for the peer to hear of the gap.
    let mut skipped = false;
    loop {
        // Connection drops requested before this attempt do not concern it.
        epoch.borrow_and_update();
        if peer.shed.load(Relaxed) {
            shed(&shared, &peer, &mut retained);
            skipped = true;
        }
        match connect(&shared, &peer, &retained, skipped).await {
            Ok((acks, wr, next, incarnation)) => {
                if let Some((since, _)) = down.take() {
                    tracing::info!(
                        node = shared.cfg.node,
                        peer = peer.node,
                        "connected to {} after {:.0} s",
                        peer.addr,
                        since.elapsed().as_secs_f64()
                    );
                }
                if established {
                    peer.counters.reconnects.fetch_add(1, Relaxed);
                }
                established = true;
                refused = None;
                skipped = false;
                backoff = shared.cfg.reconnect_min;
                let restarted = peer_incarnation.is_some_and(|known| known != incarnation);
                peer_incarnation = Some(incarnation);
                let from = if restarted {
                    // What the peer had not acknowledged was for the process
                    // that died: lost with it, as a message to a crashed
                    // process is (the protocols resend what matters — the
                    // simulator loses it the same way). Handing it to the new
                    // process would deliver, say, a prepare its predecessor
                    // had already prepared and resolved.
                    // Every message handed out so far, whether retained,
                    // still in the outbox or in a WAN delay line.
                    // (Counted after it is queued: never below `next`.)
                    let skip_to = peer.counters.enqueued.load(Relaxed).max(next);
                    peer.counters.acked.store(skip_to, Relaxed);
                    peer.counters.dropped_for_restart.fetch_add(skip_to - next, Relaxed);
                    retained.trim(skip_to, &peer.counters.backlog_bytes);
                    skip_to
                } else {
                    retained.trim(next, &peer.counters.backlog_bytes);
                    next
                };
                peer.set_link(true);
                let why =
                    stream(&shared, &peer, incarnation, &mut retained, &mut high_water, acks, wr, from, &mut epoch)
                        .await;
                peer.set_link(false);
                debug!(node = shared.cfg.node, peer = peer.node, "outbound connection closed: {why}");
            }
            Err(e) => {
                peer.counters.connect_failures.fetch_add(1, Relaxed);
                if e.kind() == io::ErrorKind::PermissionDenied {
                    let why = e.to_string();
                    let now = std::time::Instant::now();
                    let again = refused
                        .as_ref()
                        .is_some_and(|(last, at)| *last == why && now.duration_since(*at) < DOWN_REPEAT_WARNING);
                    if again {
                        debug!(node = shared.cfg.node, peer = peer.node, "peer refused us: {why}");
                    } else {
                        warn!(node = shared.cfg.node, peer = peer.node, "peer {} refused us: {why}", peer.addr);
                        refused = Some((why, now));
                    }
                } else {
                    debug!(node = shared.cfg.node, peer = peer.node, "cannot connect: {e}");
                }
                // An unreachable peer stalls what waits on it (its DC's
                // stable time, transactions it takes part in): say so after
                // a few seconds, then once a minute.
                let now = std::time::Instant::now();
                let (since, told) = down.get_or_insert((now, now));
                let quiet = if *told == *since { DOWN_FIRST_WARNING } else { DOWN_REPEAT_WARNING };
                if now.duration_since(*told) >= quiet {
                    *told = now;
                    warn!(
                        node = shared.cfg.node,
                        peer = peer.node,
                        "peer {} unreachable for {:.0} s ({e}); messages to it are queued",
                        peer.addr,
                        now.duration_since(*since).as_secs_f64()
                    );
                }
            }
        }
        // A backlog past its bound is shed at once, not after the backoff.
        tokio::select! {
            () = sleep(backoff) => {}
            () = peer.shed_now.notified() => {}
        }
        backoff = (backoff * 2).min(shared.cfg.reconnect_max);
    }
}

/// The backlog for `peer` passed [`crate::TransportConfig::max_backlog_bytes`]:
/// every message handed out so far — retained, still in the outbox or in
/// a WAN delay line — is dropped, as for a peer that restarted, and the
/// next handshake says so. Told to the operator.
fn shed(shared: &Shared, peer: &PeerShared, retained: &mut Retained) {
    let c = &peer.counters;
    let backlog = c.backlog_bytes.load(Relaxed);
    let acked = c.acked.load(Relaxed);
    let skip_to = c.enqueued.load(Relaxed).max(acked);
    c.acked.store(skip_to, Relaxed);
    retained.trim(skip_to, &c.backlog_bytes);
    c.backlogs_shed.fetch_add(1, Relaxed);
    c.msgs_shed.fetch_add(skip_to - acked, Relaxed);
    peer.shed.store(false, Relaxed);
    // Our side learns of the gap too: what we sent may have been a request
    // the peer must answer, and we stop waiting for the answer.
    if let Some(on_gap) = &shared.on_gap {
        on_gap(peer.node);
    }
    warn!(
        node = shared.cfg.node,
        peer = peer.node,
        "the backlog for peer {} passed {} MiB ({} messages, {:.1} MiB): dropped; the link reconnects, and the \
         peer is told that messages were lost",
        peer.addr,
        shared.cfg.max_backlog_bytes >> 20,
        skip_to - acked,
        backlog as f64 / (1 << 20) as f64
    );
}

/// Dials and shakes hands; returns the sequence number to send from and
/// the peer's incarnation.
async fn connect(
    shared: &Shared,
    peer: &PeerShared,
    retained: &Retained,
    skipped: bool,
) -> io::Result<(Acks, Writer, u64, u64)> {
    // A name is resolved anew at every attempt.
    let dial = async {
        match &peer.addr {
            HostAddr::Ip(a) => TcpStream::connect(*a).await,
            HostAddr::Name(host) => TcpStream::connect(host.as_str()).await,
        }
    };
    let stream = timeout(CONNECT_TIMEOUT, dial)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    // We coalesce ourselves; Nagle would only add latency to the last frame of a burst.
    stream.set_nodelay(true)?;
    let (rd, mut wr) = match &shared.cfg.tls {
        None => conn::plain(stream),
        Some(tls) => {
            // The peer must show a certificate of our CA that names it.
            let name = ServerName::try_from(crate::tls::identity(&peer.name))
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let stream =
                timeout(HANDSHAKE_TIMEOUT, tokio_rustls::TlsConnector::from(tls.client.clone()).connect(name, stream))
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no TLS handshake in time"))?
                    .map_err(tls_refused)?;
            conn::split(stream)
        }
    };
    let mut acks = FramedRead::new(rd, frame::codec(MAX_HANDSHAKE_BYTES));

    let base = peer.counters.acked.load(Relaxed);
    let hello = Hello {
        cluster: shared.cfg.cluster.clone(),
        terms: shared.cfg.terms.clone(),
        node: shared.cfg.node,
        incarnation: shared.incarnation,
        base,
        skipped,
    };
    conn::write(&mut wr, &handshake::encode_frame(TRANSPORT_VERSION, &hello)).await?;
    // Under TLS 1.3 the acceptor judges our certificate after our side of
    // the handshake is done: its verdict arrives here, as an alert.
    let body = timeout(HANDSHAKE_TIMEOUT, acks.next())
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no handshake reply"))?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "closed during handshake"))?
        .map_err(tls_refused)?;
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    match handshake::decode::<Reply>(&body).map_err(|e| invalid(e.to_string()))? {
        // The peer cannot expect less than it acknowledged, nor more than we ever took.
        // (A base past what was taken — a skip over messages still in a WAN
        // delay line — may be answered with itself.)
        Reply::Accept { next, incarnation } if (base..=retained.end().max(base)).contains(&next) => {
            peer.counters.acked.store(next, Relaxed);
            Ok((acks, wr, next, incarnation))
        }
        Reply::Accept { next, .. } => Err(invalid(format!("peer expects {next}, outside {base}..={}", retained.end()))),
        Reply::Refuse(why) => Err(io::Error::new(io::ErrorKind::PermissionDenied, why)),
    }
}

/// A TLS failure (a certificate refused either way) is a refusal an
/// operator must hear of, like a refused handshake; other errors pass.
fn tls_refused(e: io::Error) -> io::Error {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(tls) => io::Error::new(io::ErrorKind::PermissionDenied, format!("TLS: {tls}")),
        None => e,
    }
}

/// Streams until the connection fails or is dropped; says why it ended.
#[allow(clippy::too_many_arguments)]
async fn stream(
    shared: &Shared,
    peer: &PeerShared,
    incarnation: u64,
    retained: &mut Retained,
    high_water: &mut u64,
    mut acks: Acks,
    mut wr: Writer,
    next: u64,
    epoch: &mut watch::Receiver<u64>,
) -> String {
    let counters = &peer.counters;
    // No ack may pass what this connection wrote: a peer that claims more
    // would make the writer trim past where it resumes.
    peer.written.store(next, Relaxed);

    let read_acks = async {
        while let Some(body) = acks.next().await {
            let n = frame::parse_ack(&body?).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad ack"))?;
            if !peer.take_ack(n, true) {
                let written = peer.written.load(Relaxed);
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("ack {n} past {written} written")));
            }
        }
        Ok(())
    };

    let frame_target = FRAME_TARGET.min(shared.cfg.max_frame_bytes - 2 * MAX_VARINT_BYTES);
    let write = async {
        let mut out = Vec::with_capacity(WRITE_TARGET + frame_target + 2 * MAX_VARINT_BYTES);
        let mut from = next;
        loop {
            retained.trim(counters.acked.load(Relaxed), &counters.backlog_bytes);
            if let Some(chunk) = peer.outbox.take() {
                retained.push(chunk);
            }
            // Past the end after a skip, until the skipped messages have
            // left the outbox (and the trim above dropped them).
            if from >= retained.end() {
                peer.outbox.ready.notified().await;
                continue;
            }
            out.clear();
            // How far we have delivered what the peer sends us rides along.
            let reverse = peer.take_reverse_ack(incarnation);
            let fill = fill(retained, from, &mut out, frame_target, *high_water, reverse);
            // Before the write: the peer may ack these before write_all returns.
            peer.written.fetch_max(fill.to, Relaxed);
            if let Err(e) = conn::write(&mut wr, &out).await {
                return e;
            }
            if reverse > 0 {
                counters.acks_carried.fetch_add(1, Relaxed);
            }
            from = fill.to;
            *high_water = (*high_water).max(fill.to);
            counters.frames_sent.fetch_add(fill.frames, Relaxed);
            counters.writes.fetch_add(1, Relaxed);
            counters.wire_bytes_sent.fetch_add(out.len() as u64, Relaxed);
            counters.msgs_sent.fetch_add(fill.msgs, Relaxed);
            counters.bytes_sent.fetch_add(fill.bytes, Relaxed);
            counters.msgs_resent.fetch_add(fill.resent, Relaxed);
        }
    };

    tokio::select! {
        r = read_acks => match r {
            Ok(()) => "peer closed".into(),
            Err(e) => format!("reading acks: {e}"),
        },
        e = write => format!("writing: {e}"),
        _ = epoch.changed() => "dropped on request".into(),
        () = peer.shed_now.notified() => "shedding its backlog".into(),
    }
}

/// What one call of [`fill`] put in the buffer.
#[derive(Default)]
struct Fill {
    /// One past the last message.
    to: u64,
    frames: u64,
    /// First transmissions, and their bytes.
    msgs: u64,
    bytes: u64,
    resent: u64,
}

/// Appends batch frames for the retained messages from `from` on, until
/// about `WRITE_TARGET` bytes; frames split only between messages. The
/// first carries `reverse`.
fn fill(
    retained: &Retained,
    from: u64,
    out: &mut Vec<u8>,
    frame_target: usize,
    high_water: u64,
    mut reverse: u64,
) -> Fill {
    let mut f = Fill { to: from, ..Fill::default() };
    for chunk in retained.from(from) {
        while f.to < chunk.end() {
            if out.len() >= WRITE_TARGET {
                return f;
            }
            let i = (f.to - chunk.first) as usize;
            let start = chunk.offset(f.to);
            // As many messages as fit in frame_target, and at least one.
            let j = i + chunk.ends[i..].partition_point(|&e| e - start <= frame_target).max(1);
            frame::put_batch(out, f.to, std::mem::take(&mut reverse), &chunk.bytes[start..chunk.ends[j - 1]]);
            f.frames += 1;
            for k in i..j {
                if chunk.first + k as u64 >= high_water {
                    let len = (chunk.ends[k] - chunk.offset(chunk.first + k as u64)) as u64;
                    f.msgs += 1;
                    f.bytes += len;
                } else {
                    f.resent += 1;
                }
            }
            f.to = chunk.first + j as u64;
        }
    }
    f
}
