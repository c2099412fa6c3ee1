//! Helpers shared by the integration tests: a test message, configs on
//! loopback, and an inbox that records what each node received.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use causeway_transport::{Deliver, NodeId, Peer, TransportConfig, WireMessage};
use serde::{Deserialize, Serialize};

pub const CLUSTER: &str = "test-cluster";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msg {
    pub seq: u64,
    /// `now_nanos()` when sent, for latency checks.
    pub sent: u64,
    pub pad: Vec<u8>,
}

impl WireMessage for Msg {}

impl Msg {
    pub fn new(seq: u64) -> Self {
        Msg { seq, sent: now_nanos(), pad: Vec::new() }
    }
}

/// Nanoseconds since the first call in this test process.
pub fn now_nanos() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// A listener on a free loopback port.
pub fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    (l, addr)
}

/// Fast reconnects and acks, so tests exercise them often.
pub fn config(node: NodeId, peers: Vec<Peer>) -> TransportConfig {
    let mut cfg = TransportConfig::new(node, CLUSTER, "127.0.0.1:0".parse().unwrap(), peers);
    cfg.reconnect_min = Duration::from_millis(5);
    cfg.reconnect_max = Duration::from_millis(100);
    cfg.ack_interval = Duration::from_millis(2);
    cfg
}

/// What one node received: sequence numbers and latencies, by sender.
#[derive(Clone, Default)]
pub struct Inbox(Arc<Mutex<HashMap<NodeId, Received>>>);

#[derive(Clone, Default)]
pub struct Received {
    pub seqs: Vec<u64>,
    pub latencies: Vec<Duration>,
}

impl Inbox {
    pub fn deliver(&self) -> Deliver<Msg> {
        let inbox = self.0.clone();
        Arc::new(move |from, msg: Msg| {
            let latency = Duration::from_nanos(now_nanos().saturating_sub(msg.sent));
            let mut map = inbox.lock().unwrap();
            let r = map.entry(from).or_default();
            r.seqs.push(msg.seq);
            r.latencies.push(latency);
        })
    }

    pub fn from(&self, node: NodeId) -> Received {
        self.0.lock().unwrap().get(&node).cloned().unwrap_or_default()
    }

    pub fn count(&self, node: NodeId) -> usize {
        self.0.lock().unwrap().get(&node).map_or(0, |r| r.seqs.len())
    }

    /// Waits until `n` messages from `node` arrived; panics after `limit`.
    pub async fn wait_for(&self, node: NodeId, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.count(node) < n {
            assert!(
                Instant::now() < deadline,
                "got {} of {n} messages from node {node} within {limit:?}",
                self.count(node)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Asserts that node `from` delivered exactly `0..n`, in order.
    pub fn assert_exactly(&self, from: NodeId, n: u64) {
        let seqs = self.from(from).seqs;
        assert_eq!(seqs.len() as u64, n, "count from node {from}");
        if let Some(i) = seqs.iter().enumerate().position(|(i, s)| *s != i as u64) {
            panic!(
                "from node {from}: position {i} holds {}, around: {:?}",
                seqs[i],
                &seqs[i.saturating_sub(3)..(i + 3).min(seqs.len())]
            );
        }
    }
}

/// Polls `cond` until it holds; panics with `what` after `limit`.
pub async fn eventually(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Node `from` sends another 100 messages to node `to` over `link`; they
/// arrive in `inbox`, in order, after the `sent` before them.
pub async fn hundred_more(
    link: &causeway_transport::Transport<Msg>,
    from: NodeId,
    to: NodeId,
    inbox: &Inbox,
    sent: &mut u64,
) {
    for _ in 0..100 {
        link.send(to, Msg::new(*sent)).unwrap();
        *sent += 1;
    }
    inbox.wait_for(from, *sent as usize, Duration::from_secs(10)).await;
    inbox.assert_exactly(from, *sent);
}
