//! A peer whose messages carry a timestamp far ahead of this node's clock —
//! a poisoned clock, or a compromised node — moves no clock here: the
//! message is held back, unacknowledged, with everything behind it from that
//! peer, counted and logged; clients commit at the time of their own clocks.
//! With the guard opened wide, the same message does move the clock: the
//! test sees what the guard prevents.

use crate::common::fake_peer::two_nodes_and_a_fake;
use causeway_client::{Client, Stamp};
use causeway_protocol::wren::messages::StartFrom;
use causeway_protocol::wren::WrenMsg;
use causeway_protocol::{Addr, ClientId, DcId, ReplicaId, Timestamp, TxId};
use causeway_runtime::clock::now_micros;
use causeway_runtime::envelope::Envelope;
use causeway_runtime::plan::ClusterPlan;
use causeway_runtime::NodeHandle;
use causeway_transport::Transport;
use std::sync::Arc;
use std::time::Duration;

const YEAR_US: u64 = 365 * 24 * 3600 * 1_000_000;

/// One DC of two partitions on n0 and n1, and a third node — the test —
/// speaking the transport as node 2; the guard allows `max_offset`.
async fn cluster(max_offset: Duration) -> (NodeHandle, NodeHandle, Transport<Envelope<WrenMsg>>) {
    let tune = |plan: &mut ClusterPlan| plan.max_clock_offset = max_offset;
    two_nodes_and_a_fake("clocks", tune, Arc::new(|_, _| {})).await
}

/// The rogue node, as a client session it hosts, starts a transaction at
/// n0's coordinator claiming stable times a year ahead: Wren's coordinator
/// learns stable times from its clients.
fn poison(rogue: &Transport<Envelope<WrenMsg>>) {
    let me = Addr::Client(ClientId { dc: DcId(0), index: 2 << 24 });
    let far = Timestamp::from_physical(now_micros() + YEAR_US);
    let coordinator = Addr::Replica(ReplicaId::new(0, 0));
    let start = WrenMsg::StartTxReq(StartFrom { lst: far, rst: far });
    rogue.send(0, Envelope { from: me, to: coordinator, msg: start }).unwrap();
    // An innocent message behind it waits with it.
    rogue.send(0, Envelope { from: me, to: coordinator, msg: WrenMsg::EndTx { tx: TxId(1) } }).unwrap();
}

/// A transaction over both partitions by an honest client of n0.
async fn commit(n0: &NodeHandle) -> Stamp {
    let mut c = Client::connect(n0.client_addr(DcId(0)).unwrap()).await.unwrap();
    c.begin().await.unwrap();
    c.write("a", "1").await.unwrap();
    c.write("b", "2").await.unwrap();
    c.commit().await.unwrap().expect("a commit that wrote has a stamp")
}

fn held(n0: &NodeHandle) -> u64 {
    let text = n0.metrics.encode();
    text.lines()
        .filter_map(|l| l.strip_prefix("causeway_peer_messages_held_total{peer=\"fake\"} "))
        .map(|v| v.trim().parse::<u64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_far_future_timestamp_from_a_peer_is_held_and_moves_no_clock() {
    let (n0, _n1, rogue) = cluster(Duration::from_millis(500)).await;
    poison(&rogue);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while held(&n0) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the poisoned message was not held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stamp = commit(&n0).await;
    let ahead = Timestamp(stamp.ts).physical().saturating_sub(now_micros());
    assert!(ahead < 1_000_000, "a commit {ahead} µs ahead of the clock: the poison got through");
    // Held, not taken: unacknowledged, both messages, and still held later.
    let link = rogue.stats().peer(0).unwrap().clone();
    assert_eq!(link.unacked, 2, "{link:?}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(held(&n0) >= 2, "offered again and held again");
    assert_eq!(rogue.stats().peer(0).unwrap().unacked, 2);
    let stamp = commit(&n0).await;
    assert!(Timestamp(stamp.ts).physical() < now_micros() + 1_000_000);
    rogue.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_the_same_message_moves_the_clock() {
    // An offset of an hour lets a timestamp half an hour ahead through.
    let (n0, _n1, rogue) = cluster(Duration::from_secs(3600)).await;
    let me = Addr::Client(ClientId { dc: DcId(0), index: 2 << 24 });
    let far = Timestamp::from_physical(now_micros() + 1_800_000_000);
    let start = WrenMsg::StartTxReq(StartFrom { lst: far, rst: far });
    rogue.send(0, Envelope { from: me, to: Addr::Replica(ReplicaId::new(0, 0)), msg: start }).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while rogue.stats().peer(0).unwrap().unacked > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the message was not taken");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stamp = commit(&n0).await;
    assert!(
        Timestamp(stamp.ts).physical() > now_micros() + 1_000_000_000,
        "the commit was not pushed ahead: the test's poison would prove nothing"
    );
    assert_eq!(held(&n0), 0);
    rogue.shutdown().await;
}
