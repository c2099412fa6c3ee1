//! What every client connection of a node shares: the allocation of client
//! ids and coordinators.

use crate::auth::Authenticator;
use crate::metrics::Metrics;
use crate::plan::ConnectionLimits;
use crate::replica_task::ReplicaGauges;
use crate::router::{client_id, Router};
use causeway_protocol::{Addr, ClientId, DcId, Limits, Protocol, ReplicaId, Topology};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, Semaphore};

/// Connections over `max_clients` being told so at once, at most: past
/// this they are closed without a word.
const MAX_REFUSING: usize = 64;

/// What every client connection of a node shares.
pub struct ClientHost<P: Protocol> {
    pub node: usize,
    pub node_name: String,
    pub topology: Arc<Topology>,
    pub config: P::Config,
    pub limits: Limits,
    pub max_frame_bytes: usize,
    pub connections: ConnectionLimits,
    /// Logins: who a client is, and what it may do.
    pub auth: Arc<Authenticator>,
    /// One per open client connection, node-wide (`connections.max_clients`).
    pub slots: Arc<Semaphore>,
    /// One per connection being told there is no slot.
    pub refusing: Arc<Semaphore>,
    /// Authenticates session tokens ([`crate::token`]).
    pub token_key: Vec<u8>,
    pub router: Arc<Router<P::Message>>,
    pub metrics: Arc<Metrics>,
    /// This node's replicas' published state, for the `Stats` hook.
    pub replicas: Vec<(ReplicaId, Arc<ReplicaGauges>)>,
    next_client: AtomicU32,
    next_coordinator: AtomicUsize,
}

/// What a node gives its client host.
pub struct HostSetup<P: Protocol> {
    pub node: usize,
    pub node_name: String,
    pub topology: Arc<Topology>,
    pub config: P::Config,
    pub limits: Limits,
    pub connections: ConnectionLimits,
    pub auth: Arc<Authenticator>,
    pub token_key: Vec<u8>,
    pub router: Arc<Router<P::Message>>,
    pub metrics: Arc<Metrics>,
    pub replicas: Vec<(ReplicaId, Arc<ReplicaGauges>)>,
}

/// A session's mailbox: what the cluster sends it.
pub type Mailbox<P> = mpsc::UnboundedReceiver<(Addr, <P as Protocol>::Message)>;

impl<P: Protocol> ClientHost<P> {
    pub fn new(setup: HostSetup<P>) -> Self {
        let HostSetup {
            node,
            node_name,
            topology,
            config,
            limits,
            connections,
            auth,
            token_key,
            router,
            metrics,
            replicas,
        } = setup;
        ClientHost {
            node,
            node_name,
            topology,
            config,
            limits,
            max_frame_bytes: causeway_wire::DEFAULT_MAX_FRAME_BYTES,
            connections,
            auth,
            slots: Arc::new(Semaphore::new(connections.max_clients)),
            refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
            token_key,
            router,
            metrics,
            replicas,
            next_client: AtomicU32::new(0),
            next_coordinator: AtomicUsize::new(0),
        }
    }

    /// Starts the client counter at `counter`, as after that many sessions:
    /// lets a test reach the wrap-around of client ids.
    #[doc(hidden)]
    pub fn with_client_counter(self, counter: u32) -> Self {
        self.next_client.store(counter, Ordering::Relaxed);
        self
    }

    /// The coordinators a session of `dc` may use: this node's replicas there.
    pub fn coordinators(&self, dc: DcId) -> Vec<ReplicaId> {
        let mut local: Vec<_> = self.router.local_replicas().filter(|r| r.dc == dc).collect();
        local.sort();
        local
    }

    /// A coordinator for the next session, round-robin over `coordinators`.
    pub fn next_coordinator(&self, coordinators: &[ReplicaId]) -> ReplicaId {
        coordinators[self.next_coordinator.fetch_add(1, Ordering::Relaxed) % coordinators.len()]
    }

    /// A client id no live session of this node has, and its mailbox.
    /// Counters wrap after 2^24 sessions; ids still in use are skipped.
    pub fn register_session(&self, dc: DcId) -> Option<(ClientId, Mailbox<P>)> {
        // Every live session holds one id; the node cannot hold 2^24 of them.
        for _ in 0..1 << 20 {
            let id = client_id(dc, self.node, self.next_client.fetch_add(1, Ordering::Relaxed));
            if let Some(mailbox) = self.router.register_session(id) {
                return Some((id, mailbox));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AuthPlan;
    use crate::plan::ClusterPlan;
    use causeway_protocol::wren::{Wren, WrenConfig};
    use causeway_protocol::{Message, ProtocolKind};

    #[test]
    fn client_ids_skip_live_sessions_when_the_counter_wraps() {
        let plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 1, None, None, 0).unwrap();
        let metrics = Arc::new(Metrics::new(<<Wren as Protocol>::Message as Message>::CLASSES));
        let router = Router::new(&plan, 0, Default::default(), None, metrics.clone());
        let host = ClientHost::<Wren>::new(HostSetup {
            node: 0,
            node_name: "n".into(),
            topology: plan.topology.clone(),
            config: WrenConfig::default(),
            limits: plan.limits,
            connections: plan.connections,
            auth: Arc::new(
                Authenticator::new(AuthPlan::anonymous(causeway_wire::Role::Admin), metrics.clone()).unwrap(),
            ),
            token_key: vec![1; 16],
            router: router.clone(),
            metrics,
            replicas: Vec::new(),
        })
        .with_client_counter((1 << 24) - 1);
        let dc = DcId(0);
        // The very first session of the node is still connected.
        let first = client_id(dc, 0, 0);
        let _live = router.register_session(first).expect("a fresh id");
        let (last_before_wrap, _a) = host.register_session(dc).unwrap();
        assert_eq!(last_before_wrap, client_id(dc, 0, (1 << 24) - 1));
        let (after_wrap, _b) = host.register_session(dc).unwrap();
        assert_ne!(after_wrap, first, "the counter wrapped onto a live session");
        assert_eq!(after_wrap, client_id(dc, 0, 1));
        // Once the first session is gone, its id is free again.
        router.unregister_session(first);
        assert!(router.register_session(first).is_some());
    }
}
