//! What the transport keeps per peer, shared by `send`, the peer's outbound
//! link task and the inbound connections it makes to us.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

use crate::config::HostAddr;
use crate::outbox::{lock, Outbox};
use crate::stats::PeerCounters;
use crate::NodeId;

pub(crate) struct PeerShared {
    pub node: NodeId,
    /// What its certificate must name ([`crate::tls::identity`]).
    pub name: String,
    pub addr: HostAddr,
    pub outbox: Outbox,
    pub counters: PeerCounters,
    pub inbound: Mutex<InboundState>,
    /// Whether the outbound link is up, and since when.
    pub link: Mutex<LinkState>,
    /// `send` found the backlog past its bound: the outbound task drops it.
    pub shed: std::sync::atomic::AtomicBool,
    pub shed_now: tokio::sync::Notify,
    /// One past the last message the outbound connection handed the kernel
    /// (from where it started, for a new one): no ack, on either
    /// connection, may go beyond it. An honest peer acknowledges no more
    /// than it had delivered when it answered the connection's handshake,
    /// and that is where the connection starts.
    pub written: AtomicU64,
}

impl PeerShared {
    pub fn new(node: NodeId, name: String, addr: HostAddr) -> Self {
        PeerShared {
            node,
            name,
            addr,
            outbox: Outbox::default(),
            counters: PeerCounters::default(),
            inbound: Mutex::new(InboundState::default()),
            link: Mutex::new(LinkState { connected: false, since: Instant::now(), ever_connected: false }),
            shed: std::sync::atomic::AtomicBool::new(false),
            shed_now: tokio::sync::Notify::new(),
            written: AtomicU64::new(0),
        }
    }

    /// The reverse ack for a batch to this peer's `incarnation`: how far we
    /// have delivered what it sends us, if that is news (0 otherwise),
    /// counted as carried from now on. Only for the process we are
    /// connected to: an ack of its predecessor's stream would acknowledge
    /// messages of its own never received. Counted before the write: a
    /// batch that never arrives is covered by the ack the inbound
    /// connection writes once carried acks stop coming.
    pub fn take_reverse_ack(&self, incarnation: u64) -> u64 {
        let mut st = lock(&self.inbound);
        match st.incarnation {
            Some(known) if known == incarnation && st.next > st.carried => {
                st.carried = st.next;
                st.next
            }
            _ => 0,
        }
    }

    /// The highest reverse ack our batches to this peer carried.
    pub fn carried_acks(&self) -> u64 {
        lock(&self.inbound).carried
    }

    /// The peer acknowledges every message of ours below `next`, on either
    /// connection. False if it acknowledges more than the current (or
    /// last) outbound connection wrote, which no honest peer does; an ack
    /// that says less than one already taken is old news and ignored.
    ///
    /// The writer trims what is acknowledged (and the backlog's bytes with
    /// it) when it wakes. With `wake`, an idle one wakes for this: for an
    /// ack frame of its own (rare while acks ride along). An ack that rode on a batch comes while the
    /// link is busy both ways, the writer trims at its next write, and
    /// waking it for every incoming batch would cost a wake-up per message.
    pub fn take_ack(&self, next: u64, wake: bool) -> bool {
        if next > self.written.load(Relaxed) {
            return false;
        }
        self.counters.acked.fetch_max(next, Relaxed);
        // Even for an ack a carried one already took: the writer trims only
        // when it wakes, and nothing else wakes an idle one.
        if wake {
            self.outbox.ready.notify_one();
        }
        true
    }

    /// The outbound link went up or down: for [`crate::Transport::link`]
    /// and the `connected` counter of its stats alike.
    pub fn set_link(&self, connected: bool) {
        self.counters.connected.store(connected, std::sync::atomic::Ordering::Relaxed);
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        link.ever_connected |= connected;
        link.connected = connected;
        link.since = Instant::now();
    }
}

/// The state of the outbound link to a peer, as [`crate::Transport::link`]
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkState {
    /// A connection is up now.
    pub connected: bool,
    /// Since when the link has been up, or down (down: since the
    /// transport started, if it never connected).
    pub since: Instant,
    /// It connected at least once since the transport started.
    pub ever_connected: bool,
}

/// The receiving end of the link from this peer. Survives its connections:
/// that is what lets a new connection resume where the last one stopped.
#[derive(Default)]
pub(crate) struct InboundState {
    /// The peer's incarnation we are receiving from; `None` before its first connection.
    pub incarnation: Option<u64>,
    /// The next sequence number to deliver.
    pub next: u64,
    /// Bumped by every accepted handshake: a connection whose generation is
    /// no longer current has been superseded and must stop delivering.
    pub generation: u64,
    /// Nothing delivered since this incarnation of the sender was first
    /// seen: its first batch may start past `next` — a sender whose
    /// receiver restarted skips what it held for the receiver that died.
    pub fresh: bool,
    /// The highest reverse ack our outbound batches to the sender carried
    /// (or the handshake's `next`). A batch may be lost with its
    /// connection: the inbound connection confirms with an ack of its own
    /// once these stop coming.
    pub carried: u64,
}

impl InboundState {
    /// A sender starting at `at`: taken from there if nothing was
    /// delivered yet from it (see [`InboundState::fresh`]). False if `at`
    /// is past the next message expected: a gap.
    pub fn start_at(&mut self, at: u64) -> bool {
        if at > self.next && self.fresh {
            self.next = at;
        }
        at <= self.next
    }
}
