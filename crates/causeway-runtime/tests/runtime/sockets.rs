//! What a node's client sockets carry: requests a client pipelines are
//! answered together (what benchmarks count).

use crate::common::Raw;

use bytes::Bytes;
use causeway_client::wire::{LinkCounts, NodeStats, Request, Response};
use causeway_protocol::{DcId, ProtocolKind};
use causeway_runtime::{start, ClusterPlan};
use futures_util::SinkExt;
use std::sync::Arc;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn stats(c: &mut Raw) -> NodeStats {
    match c.call(Request::Stats { waited_txns: false }).await {
        Some(Response::Stats(s)) => s,
        other => panic!("stats answered {other:?}"),
    }
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
