//! What the transport keeps per peer, shared by `send`, the peer's outbound
//! link task and the inbound connections it makes to us.

use std::sync::Mutex;
use std::time::Instant;

use crate::config::HostAddr;
use crate::outbox::Outbox;
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
        }
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
