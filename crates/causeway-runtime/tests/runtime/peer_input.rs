//! Bad input from a peer server: messages about transactions nobody knows,
//! answers nobody asked for. A replica answers with an error or ignores them;
//! it neither crashes nor lets them corrupt what clients see.

use crate::common;

use bytes::Bytes;
use causeway_client::wire::{Request, Response};
use causeway_protocol::wren::WrenMsg;
use causeway_protocol::{Addr, ClientId, DcId, ProtocolKind, ReplicaId, SessionError, Timestamp, TxId};
use causeway_runtime::envelope::Envelope;
use causeway_runtime::plan::{ClusterPlan, NodePlan};
use causeway_runtime::start;
use causeway_transport::{Peer, Transport, TransportConfig};
use common::fake_peer::two_nodes_and_a_fake;
use common::Raw;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_about_unknown_transactions_are_refused_or_ignored() {
    // One DC, two partitions on two nodes, and a third node that is us:
    // the fake peer speaks the transport correctly and says nonsense in it.
    let got: Arc<Mutex<Vec<Envelope<WrenMsg>>>> = Arc::default();
    let sink = got.clone();
    let (n0, _n1, fake) =
        two_nodes_and_a_fake("peers", |_| {}, Arc::new(move |_, e| sink.lock().unwrap().push(e))).await;
    // A client id whose top bits name node 2: replies come back to us.
    let me = Addr::Client(ClientId { dc: DcId(0), index: 2 << 24 });
    let coordinator = Addr::Replica(ReplicaId::new(0, 0));
    let ghost = TxId(0xdead_beef);
    let send = |msg: WrenMsg| fake.send(0, Envelope { from: me, to: coordinator, msg }).unwrap();
    send(WrenMsg::TxReadReq { tx: ghost, keys: vec![b("k")] });
    send(WrenMsg::CommitReq { tx: ghost, hwt: Timestamp(1), writes: vec![(b("k"), Some(b("forged")))] });
    send(WrenMsg::EndTx { tx: ghost });
    // (A plausible timestamp: one far ahead of the clock would be held by
    // the clock guard, and the link behind it, as `clock_guard` shows.)
    send(WrenMsg::PrepareResp { tx: ghost, pt: Timestamp(5) });
    send(WrenMsg::Commit { tx: ghost, ct: Timestamp(5) });
    send(WrenMsg::SliceResp { tx: ghost, round: 0, values: vec![(b("k"), Some(b("forged")))] });

    // Both client requests get UnknownTransaction, addressed to us.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let errors = got
            .lock()
            .unwrap()
            .iter()
            .filter(|e| {
                e.to == me
                    && matches!(&e.msg, WrenMsg::TxError { tx: Some(t), error: SessionError::UnknownTransaction } if *t == ghost)
            })
            .count();
        if errors == 2 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "got {:?}", got.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Every envelope above named an address node 2 hosts (a client id with
    // its index): none was refused.
    assert_eq!(n0.metrics.peer_envelopes_refused.get(), 0);
    // One that names a replica of node n1 — whose connection this is not —
    // is dropped and counted: a node cannot speak for another.
    let impostor =
        Envelope { from: Addr::Replica(ReplicaId::new(0, 1)), to: coordinator, msg: WrenMsg::EndTx { tx: ghost } };
    fake.send(0, impostor).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while n0.metrics.peer_envelopes_refused.get() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the forged envelope was not refused");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(n0.metrics.peer_envelopes_refused.get(), 1);

    // Clients are served as before, and nothing forged became visible.
    let (mut c, _) = Raw::hello(n0.client_addr(DcId(0)).unwrap()).await;
    assert_eq!(c.call(Request::ReadOnly { keys: vec![b("k")] }).await, Some(Response::Values(vec![None])));
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    assert_eq!(c.call(Request::Write { key: b("k"), value: b("real") }).await, Some(Response::Written));
    assert!(matches!(c.call(Request::Commit).await, Some(Response::Committed(Some(_)))));
    assert_eq!(c.call(Request::ReadOnly { keys: vec![b("k")] }).await, Some(Response::Values(vec![Some(b("real"))])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_runs_another_protocol_is_refused_by_name() {
    let held: Vec<_> = (0..3).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let ports: Vec<u16> = held.iter().map(|l| l.local_addr().unwrap().port()).collect();
    drop(held);
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 1, None, None, 0).unwrap();
    plan.name = "mixed".into();
    plan.nodes = vec![
        NodePlan {
            name: "n0".into(),
            replicas: vec![ReplicaId::new(0, 0)],
            clients: vec![(DcId(0), local(ports[1]).into())],
            peer: Some(local(ports[0]).into()),
            metrics: None,
            data_dir: None,
        },
        NodePlan {
            name: "other".into(),
            replicas: vec![],
            clients: vec![],
            peer: Some(local(ports[2]).into()),
            metrics: None,
            data_dir: None,
        },
    ];
    let n0 = start(Arc::new(plan.clone()), "n0").await.unwrap();
    // The other node's config file says Cure, under the same cluster name.
    let mut cure = plan.clone();
    cure.protocol = ProtocolKind::Cure;
    let mut config = TransportConfig::new(1, "mixed", local(ports[2]), vec![Peer::new(0, local(ports[0]))]);
    config.terms = cure.peer_terms();
    let other: Transport<Envelope<WrenMsg>> = Transport::start(config, Arc::new(|_, _| {})).await.unwrap();
    let msg = WrenMsg::EndTx { tx: TxId(1) };
    other
        .send(0, Envelope { from: Addr::Replica(ReplicaId::new(0, 0)), to: Addr::Replica(ReplicaId::new(0, 0)), msg })
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while other.stats().peer(0).unwrap().connect_failures < 2 {
        assert!(tokio::time::Instant::now() < deadline, "the other node was never refused");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = other.stats();
    let link = stats.peer(0).unwrap();
    assert!(!link.connected && link.msgs_sent == 0, "nothing crossed: {link:?}");
    assert_eq!(n0.metrics.peer_envelopes_refused.get(), 0, "nothing was decoded as a Wren message");
    // The terms name what differs, both sides.
    let why = causeway_transport::handshake::compare_terms(&plan.peer_terms(), &cure.peer_terms()).unwrap();
    assert_eq!(why.to_string(), r#"protocol differs: the refusing node has "wren", the connecting node "cure""#);
}

#[tokio::test]
async fn a_node_whose_own_address_does_not_resolve_says_so_at_start() {
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 1, None, None, 0).unwrap();
    plan.nodes[0].clients = vec![(DcId(0), causeway_transport::HostAddr::Name("me.not-yet.invalid:7100".into()))];
    let e = start(Arc::new(plan), "embedded").await.err().expect("no address to listen on");
    let text = e.to_string();
    assert!(text.contains("its clients address me.not-yet.invalid:7100 does not resolve"), "{text}");
}
