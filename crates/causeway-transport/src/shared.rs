//! What the transport's tasks share: the configuration, the peers and their
//! state, and the callback that takes delivered messages. Below the
//! transport, the inbound and outbound sides — they never import each other.

use crate::peer::PeerShared;
use crate::{NodeId, TransportConfig};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Called for every message received, with its sender, in per-link FIFO
/// order, from the connection's task: it must not block.
pub type Deliver<M> = Arc<dyn Fn(NodeId, M) + Send + Sync>;

/// Asked of every message before it is delivered: `None` delivers it;
/// `Some(wait)` holds it — and, the link being FIFO, everything behind it
/// from that sender — unacknowledged, and asks again after `wait`. (The
/// runtime holds a message whose timestamps run further ahead of the
/// node's clock than the cluster allows.) It must not block.
pub type Admit<M> = Arc<dyn Fn(NodeId, &M) -> Option<Duration> + Send + Sync>;

/// Told that messages between us and a peer were dropped: the peer shed
/// its backlog to us ([`crate::TransportConfig::max_backlog_bytes`]) — told
/// before anything it sent after them is delivered — or we shed ours to it
/// (told as we drop them). It must not block.
pub type OnGap = Arc<dyn Fn(NodeId) + Send + Sync>;

/// Where received messages go.
pub struct Inlet<M> {
    pub deliver: Deliver<M>,
    /// `None`: every message is delivered as it comes.
    pub admit: Option<Admit<M>>,
    /// `None`: gaps go untold (a user that cannot lose a message must
    /// give one).
    pub on_gap: Option<OnGap>,
}

impl<M> From<Deliver<M>> for Inlet<M> {
    fn from(deliver: Deliver<M>) -> Self {
        Inlet { deliver, admit: None, on_gap: None }
    }
}

/// What the tasks share.
pub(crate) struct Shared {
    pub cfg: TransportConfig,
    pub incarnation: u64,
    /// Sorted by node id.
    pub peers: Vec<Arc<PeerShared>>,
    /// Bumped by `drop_connections`; every connection watches it.
    pub epoch: watch::Sender<u64>,
    pub protocol_errors: AtomicU64,
    /// The inlet's, for the gaps this side makes by shedding.
    pub on_gap: Option<OnGap>,
}

impl Shared {
    pub fn index(&self, node: NodeId) -> Option<usize> {
        self.peers.binary_search_by_key(&node, |p| p.node).ok()
    }

    pub fn peer(&self, node: NodeId) -> Option<&Arc<PeerShared>> {
        self.index(node).map(|i| &self.peers[i])
    }
}
