//! One DC of two partitions on nodes n0 and n1, and a third node — the
//! test — that speaks the peer transport as node 2: a peer server that can
//! say what an honest one never would.

use causeway_protocol::wren::WrenMsg;
use causeway_protocol::{DcId, ProtocolKind, ReplicaId, Topology};
use causeway_runtime::envelope::Envelope;
use causeway_runtime::plan::{ClusterPlan, NodePlan};
use causeway_runtime::{start, NodeHandle};
use causeway_transport::{Deliver, Peer, Transport, TransportConfig};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Starts the two nodes of cluster `name` with `plan` adjusted by `tune`,
/// and the fake node, whose messages from them go to `deliver`.
pub async fn two_nodes_and_a_fake(
    name: &str,
    tune: impl FnOnce(&mut ClusterPlan),
    deliver: Deliver<Envelope<WrenMsg>>,
) -> (NodeHandle, NodeHandle, Transport<Envelope<WrenMsg>>) {
    let held: Vec<_> = (0..5).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let ports: Vec<u16> = held.iter().map(|l| l.local_addr().unwrap().port()).collect();
    drop(held);
    let node = |name: &str, replicas: Vec<ReplicaId>, peer: u16, client: Option<u16>| NodePlan {
        name: name.into(),
        replicas,
        clients: client.map(|c| (DcId(0), local(c).into())).into_iter().collect(),
        peer: Some(local(peer).into()),
        metrics: None,
        data_dir: None,
    };
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 2, None, None, 0).unwrap();
    plan.name = name.into();
    plan.topology = Arc::new(Topology::full(1, 2).unwrap());
    plan.nodes = vec![
        node("n0", vec![ReplicaId::new(0, 0)], ports[0], Some(ports[1])),
        node("n1", vec![ReplicaId::new(0, 1)], ports[2], Some(ports[3])),
        node("fake", vec![], ports[4], None),
    ];
    tune(&mut plan);
    let plan = Arc::new(plan);
    let n0 = start(plan.clone(), "n0").await.unwrap();
    let n1 = start(plan.clone(), "n1").await.unwrap();
    let peers = vec![Peer::new(0, local(ports[0])), Peer::new(1, local(ports[2]))];
    let mut config = TransportConfig::new(2, name, local(ports[4]), peers);
    config.terms = plan.peer_terms();
    let fake = Transport::start(config, deliver).await.unwrap();
    (n0, n1, fake)
}
