//! What the transport's tasks share: the configuration, the peers and their
//! state, and the callback that takes delivered messages. Below the
//! transport, the inbound and outbound sides — they never import each other.

use crate::peer::PeerShared;
use crate::{NodeId, TransportConfig};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::sync::watch;

/// Called for every message received, with its sender, in per-link FIFO
/// order, from the connection's task: it must not block.
pub type Deliver<M> = Arc<dyn Fn(NodeId, M) + Send + Sync>;

/// What the tasks share.
pub(crate) struct Shared {
    pub cfg: TransportConfig,
    pub incarnation: u64,
    /// Sorted by node id.
    pub peers: Vec<Arc<PeerShared>>,
    /// Bumped by `drop_connections`; every connection watches it.
    pub epoch: watch::Sender<u64>,
    pub protocol_errors: AtomicU64,
}

impl Shared {
    pub fn index(&self, node: NodeId) -> Option<usize> {
        self.peers.binary_search_by_key(&node, |p| p.node).ok()
    }

    pub fn peer(&self, node: NodeId) -> Option<&Arc<PeerShared>> {
        self.index(node).map(|i| &self.peers[i])
    }
}
