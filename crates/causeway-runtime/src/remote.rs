//! Links to the other nodes of the cluster, over the transport.

use crate::envelope::Envelope;
use crate::metrics::Metrics;
use crate::node::StartError;
use crate::plan::ClusterPlan;
use crate::router::{Remote, Router};
use causeway_protocol::Message;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, Weak};

/// What a node needs of its peer links without knowing the message type.
pub trait PeerLinks: Send + Sync {
    fn local_addr(&self) -> SocketAddr;
    fn drop_all(&self);
    fn refresh_metrics(&self, metrics: &Metrics);
}

pub struct Link<M> {
    router: OnceLock<Weak<Router<M>>>,
}

impl<M: Message> Link<M> {
    /// Messages that arrive go to `router` from now on.
    pub fn attach(&self, router: Weak<Router<M>>) {
        let _ = self.router.set(router);
    }
}

pub async fn start<M: Message>(_plan: &ClusterPlan, _node: usize) -> Result<Arc<Link<M>>, StartError> {
    Err(StartError::Invalid("multi-node clusters need the transport, which is not wired yet".into()))
}

impl<M: Message> Remote<M> for Link<M> {
    fn send(&self, _node: usize, _envelope: Envelope<M>) {}
    fn drop_connections(&self) {}
}

impl<M: Message> PeerLinks for Link<M> {
    fn local_addr(&self) -> SocketAddr {
        SocketAddr::from(([0, 0, 0, 0], 0))
    }
    fn drop_all(&self) {}
    fn refresh_metrics(&self, _metrics: &Metrics) {}
}
