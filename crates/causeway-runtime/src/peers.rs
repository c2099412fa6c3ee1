//! The node's links to the other nodes of its cluster, over the transport:
//! envelopes go out batched on one TCP connection per peer, FIFO and exactly
//! once across reconnects; a WAN delay stage sits on links to other DCs when
//! emulation is on.

use crate::clock::now_micros;
use crate::envelope::Envelope;
use crate::error::StartError;
use crate::metrics::Metrics;
use crate::plan::ClusterPlan;
use causeway_protocol::contract::newest_timestamp;
use causeway_protocol::Message;
use causeway_protocol::{Addr, ReplicaId};
use causeway_transport::tls::PeerTls;
use causeway_transport::{Inlet, Peer, Transport, TransportConfig, WireMessage};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

impl<M: Message> WireMessage for Envelope<M> {}

/// Frames between servers: room for replication groups of several
/// transactions at the largest size the limits allow.
pub const MAX_PEER_FRAME_BYTES: usize = 64 << 20;

/// A link that was up counts as down (its node unreachable, requests that
/// need it refused at once) once it has been down this long: long enough
/// for a link broken by a blip (or by `DropPeerConnections`) to come back
/// first — it redials after 10 ms — short enough that a client learns of a
/// dead node well before its own timeout.
pub const LINK_DOWN_AFTER: Duration = Duration::from_millis(500);

/// A link that has never been up since this node started counts as down
/// only after this long: the nodes of a cluster start in any order, and a
/// link redials with backoff up to 1 s.
pub const LINK_STARTUP_GRACE: Duration = Duration::from_secs(5);

/// Where what arrives goes, with the index of the node the transport
/// authenticated as its sender.
pub type Sink<M> = Arc<dyn Fn(usize, Arrival<M>) + Send + Sync>;

/// What the node does with its peer links without knowing the message type.
pub trait PeerControl: Send + Sync {
    fn local_addr(&self) -> SocketAddr;
    /// Breaks every connection to other nodes (they reconnect by themselves).
    fn drop_connections(&self);
    fn refresh_metrics(&self, metrics: &Metrics);
}

/// Holds back a peer's message whose newest timestamp runs further ahead of
/// the receiving replica's clock than the cluster's `max_clock_offset`: its
/// link waits, and the message is offered again once the clock has come
/// near enough (never, for a poisoned one). Counted per peer, and logged at
/// most once a minute per peer.
struct ClockGuard {
    max_ahead_us: u64,
    /// Emulated clock offsets of this node's replicas (benchmarks only).
    offsets: BTreeMap<ReplicaId, i64>,
    names: Vec<String>,
    metrics: Arc<Metrics>,
    warned: Mutex<BTreeMap<usize, Instant>>,
}

/// How long a held message waits before it is offered again, at most.
const HELD_RETRY_MAX: Duration = Duration::from_secs(1);

impl ClockGuard {
    fn new(plan: &ClusterPlan, names: Vec<String>, metrics: Arc<Metrics>) -> Self {
        ClockGuard {
            max_ahead_us: plan.max_clock_offset.as_micros() as u64,
            offsets: plan.clock_offsets_us.clone(),
            names,
            metrics,
            warned: Mutex::new(BTreeMap::new()),
        }
    }

    /// `None`: take the message; `Some(wait)`: hold it, and ask again after `wait`.
    fn admit<M: Message>(&self, from: usize, e: &Envelope<M>) -> Option<Duration> {
        let reach = newest_timestamp(&e.msg).physical();
        let offset = match e.to {
            Addr::Replica(r) => self.offsets.get(&r).copied().unwrap_or(0),
            Addr::Client(_) => 0,
        };
        let now = now_micros().saturating_add_signed(offset);
        let limit = now.saturating_add(self.max_ahead_us);
        if reach <= limit {
            return None;
        }
        let peer = self.names.get(from).map_or("?", String::as_str);
        self.metrics.peer_messages_held.get_or_create(&vec![("peer", peer.to_string())]).inc();
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        let due = warned.get(&from).is_none_or(|at| at.elapsed() >= Duration::from_secs(60));
        if due {
            warned.insert(from, Instant::now());
            tracing::warn!(
                "holding back messages from node {peer}: a timestamp in them is {:.3} s ahead of this node's clock, \
                 over max_clock_offset_ms = {}; its link waits until the clocks agree (check both nodes' clock \
                 synchronization)",
                (reach - now) as f64 / 1e6,
                self.max_ahead_us / 1000
            );
        }
        Some(Duration::from_micros(reach - limit).clamp(Duration::from_millis(1), HELD_RETRY_MAX))
    }
}

/// What arrives from a peer node: an envelope, or word that it dropped
/// messages it had sent (a shed backlog), before anything it sent after.
pub enum Arrival<M> {
    Envelope(Envelope<M>),
    Gap,
}

/// Peers may speak before the node is ready to take their messages (the
/// transport must listen first): what they say waits here, in order.
struct Inbound<M> {
    sink: OnceLock<Sink<M>>,
    early: Mutex<Vec<(usize, Arrival<M>)>>,
}

impl<M: Message> Inbound<M> {
    fn deliver(&self, from: usize, a: Arrival<M>) {
        if let Some(sink) = self.sink.get() {
            return sink(from, a);
        }
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        // Checked again under the lock: `attach` drains and sets under it.
        match self.sink.get() {
            Some(sink) => sink(from, a),
            None => early.push((from, a)),
        }
    }
}

/// The links to every other node.
pub struct Peers<M: Message> {
    transport: Transport<Envelope<M>>,
    inbound: Arc<Inbound<M>>,
    names: Vec<String>,
}

impl<M: Message> Peers<M> {
    /// Listens for the other nodes and dials them.
    /// Under `tls`, every link is mutual TLS and a peer must show a
    /// certificate that names it.
    pub async fn start(
        plan: &ClusterPlan,
        node: usize,
        tls: Option<PeerTls>,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Peers<M>>, StartError> {
        let me = &plan.nodes[node];
        let listen =
            me.peer.as_ref().ok_or_else(|| StartError::Invalid(format!("node {:?} has no peer address", me.name)))?;
        let listen = me.listen_addr("peer", listen).await?;
        let my_dc = plan.dc_of_node(node);
        let mut peers = Vec::new();
        for (i, other) in plan.nodes.iter().enumerate().filter(|(i, _)| *i != node) {
            let addr = other
                .peer
                .clone()
                .ok_or_else(|| StartError::Invalid(format!("node {:?} has no peer address", other.name)))?;
            let mut peer = Peer::new(i as u32, addr).named(other.name.clone());
            if let (Some(wan), Some(a), Some(b)) = (&plan.wan, my_dc, plan.dc_of_node(i)) {
                if let Some(spec) = wan.spec(a, b) {
                    peer = peer.with_delay(spec);
                }
            }
            peers.push(peer);
        }
        let mut config = TransportConfig::new(node as u32, plan.name.clone(), listen, peers);
        config.terms = plan.peer_terms();
        config.tls = tls;
        // The limits keep one transaction's writes or one read answer under
        // 12 MiB; a replication group may carry several transactions.
        config.max_frame_bytes = MAX_PEER_FRAME_BYTES;
        config.max_backlog_bytes = plan.max_peer_backlog_bytes;
        let inbound = Arc::new(Inbound { sink: OnceLock::new(), early: Mutex::new(Vec::new()) });
        let (to_inbound, gaps_inbound) = (inbound.clone(), inbound.clone());
        let names: Vec<String> = plan.nodes.iter().map(|n| n.name.clone()).collect();
        let guard = ClockGuard::new(plan, names.clone(), metrics);
        let inlet = Inlet {
            deliver: Arc::new(move |from, e: Envelope<M>| to_inbound.deliver(from as usize, Arrival::Envelope(e))),
            admit: Some(Arc::new(move |from, e: &Envelope<M>| guard.admit(from as usize, e))),
            on_gap: Some(Arc::new(move |from| gaps_inbound.deliver(from as usize, Arrival::Gap))),
        };
        let transport = Transport::start_inlet(config, inlet).await.map_err(|source| StartError::Bind {
            what: "peers",
            addr: listen,
            source,
        })?;
        Ok(Arc::new(Peers { transport, inbound, names }))
    }

    /// Arriving envelopes go to `sink` from now on (and those that came
    /// early, first).
    pub fn attach(&self, sink: Sink<M>) {
        let mut early = self.inbound.early.lock().unwrap_or_else(|e| e.into_inner());
        for (from, e) in early.drain(..) {
            sink(from, e);
        }
        let _ = self.inbound.sink.set(sink);
    }

    /// What the links to every peer node carried, summed (the client
    /// fields left at zero).
    pub fn link_counts(&self) -> causeway_wire::LinkCounts {
        let mut c = causeway_wire::LinkCounts::default();
        for p in self.transport.stats().peers {
            c.peer_messages_sent += p.msgs_sent;
            c.peer_frames_sent += p.frames_sent;
            c.peer_writes += p.writes;
            c.peer_acks_sent += p.acks_sent;
            c.peer_frames_received += p.frames_received;
        }
        c
    }

    /// Whether node `node` counts as unreachable: its link is down, and
    /// has been for [`LINK_DOWN_AFTER`] ([`LINK_STARTUP_GRACE`] if it never
    /// came up). Cheap: checked on client requests.
    pub fn is_down(&self, node: usize) -> bool {
        let Some(link) = self.transport.link(node as u32) else { return false };
        let grace = if link.ever_connected { LINK_DOWN_AFTER } else { LINK_STARTUP_GRACE };
        !link.connected && link.since.elapsed() >= grace
    }

    /// A node's name, for messages.
    pub fn name(&self, node: usize) -> &str {
        self.names.get(node).map_or("?", |s| s.as_str())
    }

    pub fn send(&self, node: usize, envelope: Envelope<M>) {
        if let Err(e) = self.transport.send(node as u32, envelope) {
            // Unreachable within the limits; if it happens, the protocol
            // above has lost a message on a FIFO link and must be told loudly.
            tracing::error!(
                "message to node {} dropped: {e}; this replica's protocol state is now suspect",
                self.names.get(node).map_or("?", |s| s.as_str())
            );
        }
    }
}

impl<M: Message> PeerControl for Peers<M> {
    fn local_addr(&self) -> SocketAddr {
        self.transport.local_addr()
    }

    fn drop_connections(&self) {
        self.transport.drop_connections();
    }

    fn refresh_metrics(&self, metrics: &Metrics) {
        for p in self.transport.stats().peers {
            let peer = self.names.get(p.node as usize).cloned().unwrap_or_else(|| p.node.to_string());
            metrics
                .queue_length
                .get_or_create(&vec![("queue", "peer_unacked".into()), ("peer", peer.clone())])
                .set(p.unacked as i64);
            metrics.peer_connected.get_or_create(&vec![("peer", peer.clone())]).set(i64::from(p.connected));
            metrics.peer_backlog_bytes.get_or_create(&vec![("peer", peer.clone())]).set(p.backlog_bytes as i64);
            let shed = metrics.peer_backlogs_shed.get_or_create(&vec![("peer", peer.clone())]);
            shed.inner().fetch_max(p.backlogs_shed, std::sync::atomic::Ordering::Relaxed);
            let shed = metrics.peer_messages_shed.get_or_create(&vec![("peer", peer.clone())]);
            shed.inner().fetch_max(p.msgs_shed, std::sync::atomic::Ordering::Relaxed);
            // The transport's count only grows: the counter takes its value.
            let reconnects = metrics.peer_reconnects.get_or_create(&vec![("peer", peer)]);
            reconnects.inner().fetch_max(p.reconnects, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
