//! Bad input from a client gets an error reply or a closed connection, never
//! a crash or a corrupted state: after each case, a well-behaved client is
//! still served.

mod common;

use bytes::Bytes;
use causeway_client::wire::{Limits, Request, Response, SessionError, WireError, WIRE_VERSION};
use causeway_protocol::{DcId, ProtocolKind};
use causeway_runtime::{start, ClusterPlan, NodeHandle};
use common::Raw;
use std::net::SocketAddr;
use std::sync::Arc;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn cluster() -> NodeHandle {
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 2, 2, None, 0).unwrap();
    plan.limits = Limits { max_key_bytes: 8, max_value_bytes: 16, max_keys_per_read: 3, max_writes_per_txn: 2 };
    start(Arc::new(plan), "embedded").await.unwrap()
}

fn error(r: Option<Response>) -> WireError {
    match r {
        Some(Response::Error(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A normal transaction still works.
async fn still_serves(addr: SocketAddr) {
    let (mut c, _) = Raw::hello(addr).await;
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    assert_eq!(c.call(Request::Write { key: b("ok"), value: b("v") }).await, Some(Response::Written));
    assert!(matches!(c.call(Request::Commit).await, Some(Response::Committed(Some(_)))));
    assert_eq!(c.call(Request::ReadOnly { keys: vec![b("ok")] }).await, Some(Response::Values(vec![Some(b("v"))])));
}

#[tokio::test]
async fn another_wire_version_is_refused_and_the_connection_closed() {
    let node = cluster().await;
    let addr = node.client_addr(DcId(0)).unwrap();
    let mut c = Raw::connect(addr).await;
    let e = error(c.call(Request::Hello { version: WIRE_VERSION + 1, client: "future".into() }).await);
    assert_eq!(e, WireError::VersionMismatch { server: WIRE_VERSION, client: WIRE_VERSION + 1 });
    assert!(c.recv().await.is_none(), "the server closes the connection");
    still_serves(addr).await;
}

#[tokio::test]
async fn requests_before_hello_and_a_second_hello_are_refused() {
    let node = cluster().await;
    let addr = node.client_addr(DcId(0)).unwrap();
    let mut c = Raw::connect(addr).await;
    assert_eq!(error(c.call(Request::Begin).await), WireError::HelloExpected);
    assert!(c.recv().await.is_none());
    let (mut c, _) = Raw::hello(addr).await;
    let e = error(c.call(Request::Hello { version: WIRE_VERSION, client: "again".into() }).await);
    assert!(matches!(e, WireError::Session(SessionError::InvalidArgument(_))));
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started), "the connection stays usable");
    still_serves(addr).await;
}

#[tokio::test]
async fn malformed_and_oversized_frames_close_the_connection() {
    let node = cluster().await;
    let addr = node.client_addr(DcId(0)).unwrap();
    // Garbage where Hello should be.
    let mut c = Raw::connect(addr).await;
    c.send_bytes(vec![0xff; 7]).await;
    assert!(matches!(c.recv().await.map(|r| r.response), Some(Response::Error(WireError::Malformed(_)))));
    assert!(c.recv().await.is_none());
    // Garbage after a good Hello.
    let (mut c, _) = Raw::hello(addr).await;
    c.send_bytes(vec![1, 200, 200, 200]).await;
    assert!(matches!(c.recv().await.map(|r| r.response), Some(Response::Error(WireError::Malformed(_)))));
    assert!(c.recv().await.is_none());
    // A length prefix far over the frame limit.
    let (mut c, _) = Raw::hello(addr).await;
    use tokio::io::AsyncWriteExt;
    c.framed.get_mut().write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
    let answer = c.recv().await;
    assert!(answer.is_none() || matches!(answer.unwrap().response, Response::Error(WireError::Malformed(_))));
    still_serves(addr).await;
}

#[tokio::test]
async fn empty_and_oversized_keys_and_values_get_errors() {
    let node = cluster().await;
    let addr = node.client_addr(DcId(0)).unwrap();
    let (mut c, _) = Raw::hello(addr).await;
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    assert!(matches!(
        error(c.call(Request::Read { keys: vec![b("")] }).await),
        WireError::Session(SessionError::InvalidArgument(_))
    ));
    assert!(matches!(
        error(c.call(Request::Read { keys: vec![] }).await),
        WireError::Session(SessionError::InvalidArgument(_))
    ));
    let e = error(c.call(Request::Write { key: b(""), value: b("v") }).await);
    assert!(matches!(e, WireError::Session(SessionError::InvalidArgument(_))));
    let e = error(c.call(Request::Write { key: b("waytoolongkey"), value: b("v") }).await);
    assert_eq!(e, WireError::Session(SessionError::TooLarge { what: "key (bytes)".into(), size: 13, limit: 8 }));
    let e = error(c.call(Request::Write { key: b("k"), value: Bytes::from(vec![7u8; 17]) }).await);
    assert_eq!(e, WireError::Session(SessionError::TooLarge { what: "value (bytes)".into(), size: 17, limit: 16 }));
    let e = error(c.call(Request::Read { keys: vec![b("a"), b("b"), b("c"), b("d")] }).await);
    assert!(matches!(e, WireError::Session(SessionError::TooLarge { size: 4, limit: 3, .. })));
    assert_eq!(c.call(Request::Write { key: b("a"), value: b("1") }).await, Some(Response::Written));
    assert_eq!(c.call(Request::Write { key: b("b"), value: b("2") }).await, Some(Response::Written));
    let e = error(c.call(Request::Write { key: b("c"), value: b("3") }).await);
    assert!(matches!(e, WireError::Session(SessionError::TooLarge { limit: 2, .. })), "{e:?}");
    // None of the refused writes got in: the transaction commits a and b only.
    assert!(matches!(c.call(Request::Commit).await, Some(Response::Committed(Some(_)))));
    let r = c.call(Request::ReadOnly { keys: vec![b("a"), b("b"), b("c")] }).await;
    assert_eq!(r, Some(Response::Values(vec![Some(b("1")), Some(b("2")), None])));
    still_serves(addr).await;
}

#[tokio::test]
async fn operations_outside_a_transaction_and_after_commit_are_refused() {
    let node = cluster().await;
    let addr = node.client_addr(DcId(0)).unwrap();
    let (mut c, _) = Raw::hello(addr).await;
    assert_eq!(
        error(c.call(Request::Read { keys: vec![b("k")] }).await),
        WireError::Session(SessionError::NoActiveTransaction)
    );
    assert_eq!(
        error(c.call(Request::Write { key: b("k"), value: b("v") }).await),
        WireError::Session(SessionError::NoActiveTransaction)
    );
    assert_eq!(error(c.call(Request::Commit).await), WireError::Session(SessionError::NoActiveTransaction));
    assert_eq!(error(c.call(Request::Abort).await), WireError::Session(SessionError::NoActiveTransaction));
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    assert_eq!(error(c.call(Request::Begin).await), WireError::Session(SessionError::TransactionActive));
    assert_eq!(error(c.call(Request::ExportSession).await), WireError::Session(SessionError::TransactionActive));
    assert_eq!(c.call(Request::Write { key: b("k"), value: b("v") }).await, Some(Response::Written));
    assert!(matches!(c.call(Request::Commit).await, Some(Response::Committed(Some(_)))));
    assert_eq!(
        error(c.call(Request::Write { key: b("k"), value: b("w") }).await),
        WireError::Session(SessionError::NoActiveTransaction)
    );
    assert_eq!(error(c.call(Request::Commit).await), WireError::Session(SessionError::NoActiveTransaction));
    // An aborted transaction leaves nothing behind.
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    assert_eq!(c.call(Request::Write { key: b("k"), value: b("x") }).await, Some(Response::Written));
    assert_eq!(c.call(Request::Abort).await, Some(Response::Aborted));
    assert_eq!(c.call(Request::ReadOnly { keys: vec![b("k")] }).await, Some(Response::Values(vec![Some(b("v"))])));
    still_serves(addr).await;
}

#[tokio::test]
async fn session_tokens_resume_in_the_same_dc_only() {
    let node = cluster().await;
    let (dc0, dc1) = (node.client_addr(DcId(0)).unwrap(), node.client_addr(DcId(1)).unwrap());
    let (mut a, _) = Raw::hello(dc0).await;
    assert_eq!(a.call(Request::Begin).await, Some(Response::Started));
    assert_eq!(a.call(Request::Write { key: b("t"), value: b("mine") }).await, Some(Response::Written));
    assert!(matches!(a.call(Request::Commit).await, Some(Response::Committed(Some(_)))));
    let Some(Response::Token(token)) = a.call(Request::ExportSession).await else { panic!("no token") };

    // Resumed on another connection of DC 0, the session reads its own write
    // at once (the token carries the cache of writes not yet stable).
    let (mut b0, _) = Raw::hello(dc0).await;
    assert_eq!(b0.call(Request::ResumeSession { token: token.clone() }).await, Some(Response::Resumed));
    assert_eq!(b0.call(Request::ReadOnly { keys: vec![b("t")] }).await, Some(Response::Values(vec![Some(b("mine"))])));

    let (mut c1, _) = Raw::hello(dc1).await;
    assert!(matches!(error(c1.call(Request::ResumeSession { token }).await), WireError::BadToken(_)));
    let e = error(c1.call(Request::ResumeSession { token: b("not a token at all") }).await);
    assert!(matches!(e, WireError::BadToken(_)));
    assert_eq!(c1.call(Request::Begin).await, Some(Response::Started), "the connection stays usable");
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let node = cluster().await;
    let (mut c, _) = Raw::hello(node.client_addr(DcId(0)).unwrap()).await;
    let ids = [
        c.send(Request::Begin).await,
        c.send(Request::Write { key: b("p"), value: b("1") }).await,
        c.send(Request::Write { key: b(""), value: b("1") }).await,
        c.send(Request::Commit).await,
        c.send(Request::ReadOnly { keys: vec![b("p")] }).await,
    ];
    let mut got = Vec::new();
    for _ in ids {
        got.push(c.recv().await.unwrap());
    }
    assert_eq!(got.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    assert_eq!(got[0].response, Response::Started);
    assert_eq!(got[1].response, Response::Written);
    assert!(matches!(got[2].response, Response::Error(WireError::Session(SessionError::InvalidArgument(_)))));
    assert!(matches!(got[3].response, Response::Committed(Some(_))));
    assert_eq!(got[4].response, Response::Values(vec![Some(b("1"))]));
}

#[tokio::test]
async fn a_client_that_closes_its_side_still_gets_every_answer() {
    use tokio::io::AsyncWriteExt;
    let node = cluster().await;
    let (mut c, _) = Raw::hello(node.client_addr(DcId(0)).unwrap()).await;
    c.send(Request::Begin).await;
    c.send(Request::Write { key: b("h"), value: b("1") }).await;
    c.send(Request::Commit).await;
    c.framed.get_mut().shutdown().await.unwrap();
    assert_eq!(c.recv().await.map(|r| r.response), Some(Response::Started));
    assert_eq!(c.recv().await.map(|r| r.response), Some(Response::Written));
    assert!(matches!(c.recv().await.map(|r| r.response), Some(Response::Committed(Some(_)))));
    assert!(c.recv().await.is_none(), "then the server closes");
}
