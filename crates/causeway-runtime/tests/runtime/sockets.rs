//! What a node's client sockets carry: requests a client pipelines are
//! answered together, and a node's readings say when its stable times
//! changed (what benchmarks count and time with).

use crate::common::Raw;

use bytes::Bytes;
use causeway_client::wire::{LinkCounts, NodeStats, ReplicaReading, Request, Response};
use causeway_protocol::{DcId, ProtocolKind};
use causeway_runtime::{start, ClusterPlan};
use futures_util::SinkExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn stats(c: &mut Raw) -> NodeStats {
    match c.call(Request::Stats { waited_txns: false }).await {
        Some(Response::Stats(s)) => s,
        other => panic!("stats answered {other:?}"),
    }
}

fn unix_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// A write and the commit sent in one write are answered in one write:
/// the server takes every request it read together before it flushes, so
/// the write's answer waits for the commit's (served one frame at a time,
/// the write's answer left alone, a write more per transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_pipelined_with_its_commit_is_answered_with_it() {
    let plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 2, None, None, 0).unwrap();
    let node = start(Arc::new(plan), "embedded").await.unwrap();
    let (mut c, _) = Raw::hello(node.client_addr(DcId(0)).unwrap()).await;
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    let before: LinkCounts = stats(&mut c).await.links;
    for (id, request) in [Request::Write { key: b("k"), value: b("v") }, Request::Commit].into_iter().enumerate() {
        let body =
            postcard::to_allocvec(&causeway_client::wire::RequestFrame { id: 100 + id as u64, request }).unwrap();
        c.framed.feed(Bytes::from(body)).await.unwrap();
    }
    SinkExt::<Bytes>::flush(&mut c.framed).await.unwrap();
    let (written, committed) = (c.recv().await.expect("an answer"), c.recv().await.expect("an answer"));
    assert_eq!(written.response, Response::Written);
    assert!(matches!(committed.response, Response::Committed(Some(_))), "{committed:?}");
    let after = stats(&mut c).await.links;
    // Since the first reading: its own answer (a frame, a write), then the
    // two answers in one write; two requests and the second Stats read.
    assert_eq!(after.client_frames_received - before.client_frames_received, 3, "{before:?} {after:?}");
    assert_eq!(after.client_frames_sent - before.client_frames_sent, 3, "{before:?} {after:?}");
    assert_eq!(after.client_writes - before.client_writes, 2, "{before:?} {after:?}");
    assert_eq!(after.peer_writes, 0, "an embedded node has no peer links");
}

/// A reading carries each replica's latest changes of its stable times,
/// oldest first, with when each was published: a write committed at `ts`
/// shows up in a change published after the commit was sent and no later
/// than the reading that shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readings_say_when_the_stable_times_changed() {
    let plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 2, None, None, 0).unwrap();
    let written = plan.topology.partition_of(b"k");
    let node = start(Arc::new(plan), "embedded").await.unwrap();
    let (mut c, _) = Raw::hello(node.client_addr(DcId(0)).unwrap()).await;
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    assert_eq!(c.call(Request::Write { key: b("k"), value: b("v") }).await, Some(Response::Written));
    let sent_us = unix_us();
    let Some(Response::Committed(Some(stamp))) = c.call(Request::Commit).await else { panic!("not committed") };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let reading = stats(&mut c).await;
        let read_us = unix_us();
        for r in &reading.replicas {
            check_changes(r, sent_us.saturating_sub(10_000_000), read_us);
        }
        let r = reading.replicas.iter().find(|r| r.partition == written.0).expect("the written partition");
        if r.visible_upto[0] >= stamp.ts {
            let first = r.changes.iter().find(|c| c.visible_upto[0] >= stamp.ts).expect("a change that covers it");
            assert!(
                (sent_us..=read_us).contains(&first.at_us),
                "visible at {}, sent {sent_us}, read {read_us}",
                first.at_us
            );
            // The change before it did not cover the write.
            let i = r.changes.iter().position(|c| c.at_us == first.at_us).unwrap();
            if i > 0 {
                assert!(r.changes[i - 1].visible_upto[0] < stamp.ts);
            }
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the write never became visible: {r:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// One replica's changes: at most `MAX_CHANGES`, in time order, stable
/// times that never go back, the last what the reading says (read
/// together), all between `from_us` and `to_us`.
fn check_changes(r: &ReplicaReading, from_us: u64, to_us: u64) {
    assert!(r.changes.len() <= ReplicaReading::MAX_CHANGES);
    for pair in r.changes.windows(2) {
        assert!(pair[0].at_us <= pair[1].at_us, "{r:?}");
        for (a, b) in pair[0].visible_upto.iter().zip(&pair[1].visible_upto) {
            assert!(a <= b, "a stable time went back: {r:?}");
        }
    }
    if let Some(last) = r.changes.last() {
        assert!((from_us..=to_us).contains(&last.at_us), "{r:?}");
        assert_eq!(last.visible_upto, r.visible_upto, "{r:?}");
    }
}
