//! Where a message goes: a replica task of this node, a client session of
//! this node, or another node through the transport — through a WAN delay
//! line first when it crosses DCs inside this process.

use crate::envelope::Envelope;
use crate::metrics::Metrics;
use crate::peers::Peers;
use crate::plan::ClusterPlan;
use causeway_protocol::{Addr, ClientId, DcId, Key, Message, ReplicaId, Value};
use causeway_transport::DelayLine;
use rustc_hash::FxHashMap;
use std::sync::{Arc, RwLock};
use tokio::sync::{mpsc, oneshot};

/// Inputs of a replica task.
pub enum ReplicaInput<M> {
    Message(Addr, M),
    /// What these addresses (the replicas of one peer node) sent may have
    /// been lost: that node shed its backlog to this one.
    PeerLost(Vec<Addr>),
    /// A page of the newest values, for `Dump`: the keys after `after`, in
    /// order, up to `max_bytes`; and whether more follow.
    Dump {
        after: Option<Key>,
        max_bytes: usize,
        reply: oneshot::Sender<(Vec<(Key, Value)>, bool)>,
    },
}

/// Client ids carry the index of the node that hosts the session in their
/// top bits, so replies find their way without a directory.
const NODE_SHIFT: u32 = 24;

/// The id of the `counter`th session of `node` in `dc`. Counters wrap after
/// 2^24 sessions: [`Router::register_session`] refuses an id still in use.
pub fn client_id(dc: DcId, node: usize, counter: u32) -> ClientId {
    ClientId { dc, index: ((node as u32) << NODE_SHIFT) | (counter & ((1 << NODE_SHIFT) - 1)) }
}

fn node_of_client(id: ClientId) -> usize {
    (id.index >> NODE_SHIFT) as usize
}

pub struct Router<M: Message> {
    node: usize,
    replicas: FxHashMap<ReplicaId, mpsc::UnboundedSender<ReplicaInput<M>>>,
    replica_host: FxHashMap<ReplicaId, usize>,
    sessions: RwLock<FxHashMap<ClientId, mpsc::UnboundedSender<(Addr, M)>>>,
    /// `wan[from][to]`: the delay line between two DCs of this process.
    wan: Vec<Vec<Option<DelayLine<Envelope<M>>>>>,
    peers: Option<Arc<Peers<M>>>,
    metrics: Arc<Metrics>,
}

impl<M: Message> Router<M> {
    pub fn new(
        plan: &ClusterPlan,
        node: usize,
        replicas: FxHashMap<ReplicaId, mpsc::UnboundedSender<ReplicaInput<M>>>,
        peers: Option<Arc<Peers<M>>>,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let mut replica_host = FxHashMap::default();
        for (i, n) in plan.nodes.iter().enumerate() {
            for &r in &n.replicas {
                replica_host.insert(r, i);
            }
        }
        Arc::new_cyclic(|weak: &std::sync::Weak<Router<M>>| {
            let dcs = usize::from(plan.topology.dc_count());
            let wan = (0..dcs)
                .map(|a| {
                    (0..dcs)
                        .map(|b| {
                            let spec = plan.wan.as_ref()?.spec(DcId(a as u16), DcId(b as u16))?;
                            let weak = weak.clone();
                            Some(DelayLine::new(spec, move |e: Envelope<M>| {
                                if let Some(router) = weak.upgrade() {
                                    router.deliver_here(e);
                                }
                            }))
                        })
                        .collect()
                })
                .collect();
            Router { node, replicas, replica_host, sessions: RwLock::new(FxHashMap::default()), wan, peers, metrics }
        })
    }

    /// The mailbox of a new session, or `None` if a live session has this
    /// id already (its counter wrapped around): the caller takes another.
    pub fn register_session(&self, id: ClientId) -> Option<mpsc::UnboundedReceiver<(Addr, M)>> {
        let mut sessions = self.sessions.write().unwrap_or_else(|e| e.into_inner());
        if sessions.contains_key(&id) {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        sessions.insert(id, tx);
        Some(rx)
    }

    pub fn unregister_session(&self, id: ClientId) {
        self.sessions.write().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    pub fn replica_inbox(&self, id: ReplicaId) -> Option<&mpsc::UnboundedSender<ReplicaInput<M>>> {
        self.replicas.get(&id)
    }

    pub fn local_replicas(&self) -> impl Iterator<Item = ReplicaId> + '_ {
        self.replicas.keys().copied()
    }

    /// The node that hosts `replica`, if it is another node this one
    /// cannot reach now ([`Peers::is_down`]): its name. `None` for a
    /// replica of this node, or of a node whose link is up.
    pub fn unreachable_host(&self, replica: ReplicaId) -> Option<&str> {
        let host = *self.replica_host.get(&replica)?;
        let peers = self.peers.as_ref()?;
        (host != self.node && peers.is_down(host)).then(|| peers.name(host))
    }

    /// Whether another node hosts `replica`.
    pub fn hosted_elsewhere(&self, replica: ReplicaId) -> bool {
        self.host_of(Addr::Replica(replica)).is_some_and(|host| host != self.node)
    }

    /// This node's index in the plan.
    pub fn node(&self) -> usize {
        self.node
    }

    /// Counts a message that does not go through [`Router::send`] (one a
    /// replica sends itself), so the per-class counts stay whole.
    pub fn count_sent(&self, msg: &M) {
        self.metrics.count_sent(msg);
    }

    /// What this node's links to other nodes carried (zero without any).
    pub fn link_counts(&self) -> causeway_wire::LinkCounts {
        self.peers.as_ref().map(|p| p.link_counts()).unwrap_or_default()
    }

    /// Whether other nodes host some of the cluster's replicas.
    pub fn has_peers(&self) -> bool {
        self.peers.is_some()
    }

    pub fn drop_peer_connections(&self) {
        if let Some(peers) = &self.peers {
            crate::peers::PeerControl::drop_connections(peers.as_ref());
        }
    }

    fn dc_of(addr: Addr) -> DcId {
        match addr {
            Addr::Replica(r) => r.dc,
            Addr::Client(c) => c.dc,
        }
    }

    /// The node that hosts `addr`, if any does.
    pub fn host_of(&self, addr: Addr) -> Option<usize> {
        match addr {
            Addr::Replica(r) => self.replica_host.get(&r).copied(),
            Addr::Client(c) => Some(node_of_client(c)),
        }
    }

    /// Sends a message produced by a replica or a session of this node.
    pub fn send(&self, from: Addr, to: Addr, msg: M) {
        self.metrics.count_sent(&msg);
        let envelope = Envelope { from, to, msg };
        match self.host_of(to) {
            Some(host) if host == self.node => {
                let (a, b) = (Self::dc_of(from), Self::dc_of(to));
                match self.wan.get(usize::from(a.0)).and_then(|row| row.get(usize::from(b.0))) {
                    Some(Some(line)) => line.push(envelope),
                    _ => self.deliver_here(envelope),
                }
            }
            Some(host) => match &self.peers {
                Some(peers) => peers.send(host, envelope),
                None => tracing::warn!(?to, "no transport to node {host}; message dropped"),
            },
            None => tracing::warn!(?to, "no node hosts this address; message dropped"),
        }
    }

    /// Takes an envelope that node `sender` sent, as the transport
    /// authenticated it. An envelope is only as good as its sender: one that
    /// names an address another node hosts (a replica it does not run, a
    /// client of another node) is dropped and counted, so one node cannot
    /// speak for another.
    pub fn deliver_from_peer(&self, sender: usize, e: Envelope<M>) {
        if self.host_of(e.from) != Some(sender) {
            self.metrics.peer_envelopes_refused.inc();
            tracing::warn!(from = ?e.from, sender, "an envelope from a node that does not host its sender; dropped");
            return;
        }
        self.deliver_here(e);
    }

    /// Messages between this node and node `sender` were dropped: it shed
    /// its backlog to us (told before anything it sent after them), or we
    /// shed ours to it. Every replica of this node hears that messages to
    /// or from the replicas of `sender` may be lost. (A session waiting on
    /// such a message times out as for a node that died.)
    pub fn peer_lost(&self, sender: usize) {
        let mut lost: Vec<Addr> =
            self.replica_host.iter().filter(|&(_, &host)| host == sender).map(|(&r, _)| Addr::Replica(r)).collect();
        lost.sort();
        tracing::warn!(
            node = sender,
            "messages between this node and a peer node were dropped (a backlog shed): replicas resume what they lost"
        );
        self.metrics.peer_gaps.inc();
        for inbox in self.replicas.values() {
            let _ = inbox.send(ReplicaInput::PeerLost(lost.clone()));
        }
    }

    /// Hands a message addressed to this node to its task. Messages for
    /// sessions that have gone are dropped: their client left.
    pub fn deliver_here(&self, e: Envelope<M>) {
        match e.to {
            Addr::Replica(r) => match self.replicas.get(&r) {
                Some(inbox) => {
                    let _ = inbox.send(ReplicaInput::Message(e.from, e.msg));
                }
                None => tracing::warn!(to = ?e.to, "message for a replica this node does not run; dropped"),
            },
            Addr::Client(c) => {
                let sessions = self.sessions.read().unwrap_or_else(|e| e.into_inner());
                if let Some(tx) = sessions.get(&c) {
                    let _ = tx.send((e.from, e.msg));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ClusterPlan, NodePlan};
    use causeway_protocol::wren::WrenMsg;
    use causeway_protocol::{Message, ProtocolKind};

    /// A node told that a peer shed its backlog tells each of its replicas
    /// which addresses may have lost messages to it: the peer's replicas,
    /// and no others.
    #[test]
    fn a_gap_from_a_peer_reaches_every_local_replica_with_that_peers_replicas() {
        let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 2, 2, None, None, 0).unwrap();
        let node = |name: &str, replicas: Vec<ReplicaId>| NodePlan {
            name: name.into(),
            replicas,
            clients: Vec::new(),
            peer: None,
            metrics: None,
            data_dir: None,
        };
        plan.nodes = vec![
            node("a", vec![ReplicaId::new(0, 0), ReplicaId::new(0, 1)]),
            node("b", vec![ReplicaId::new(1, 0)]),
            node("c", vec![ReplicaId::new(1, 1)]),
        ];
        let metrics = Arc::new(Metrics::new(<WrenMsg as Message>::CLASSES));
        let mut inboxes = FxHashMap::default();
        let mut receivers = Vec::new();
        for r in [ReplicaId::new(0, 0), ReplicaId::new(0, 1)] {
            let (tx, rx) = mpsc::unbounded_channel();
            inboxes.insert(r, tx);
            receivers.push(rx);
        }
        let router: Arc<Router<WrenMsg>> = Router::new(&plan, 0, inboxes, None, metrics.clone());
        router.peer_lost(1);
        for rx in &mut receivers {
            match rx.try_recv() {
                Ok(ReplicaInput::PeerLost(lost)) => assert_eq!(lost, vec![Addr::Replica(ReplicaId::new(1, 0))]),
                _ => panic!("no PeerLost for a local replica"),
            }
            assert!(rx.try_recv().is_err(), "told once");
        }
        assert_eq!(metrics.peer_gaps.get(), 1);
    }
}
