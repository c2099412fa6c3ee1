//! Bad input from a client gets an error reply or a closed connection, never
//! a crash or a corrupted state: after each case, a well-behaved client is
//! still served.

use crate::common;

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
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 2, 2, None, None, 0).unwrap();
    plan.limits = Limits {
        max_key_bytes: 8,
        max_value_bytes: 16,
        max_keys_per_read: 3,
        max_writes_per_txn: 2,
        ..Limits::default()
    };
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
    let e =
        error(c.call(Request::Hello { version: WIRE_VERSION + 1, client: "future".into(), credentials: None }).await);
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
    let e = error(c.call(Request::Hello { version: WIRE_VERSION, client: "again".into(), credentials: None }).await);
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
    // Operations were refused: committing a and b alone would apply part of
    // the transaction, so it is aborted and the commit says why.
    match error(c.call(Request::Commit).await) {
        WireError::Session(SessionError::RefusedEarlier { cause }) => {
            assert_eq!(cause, "invalid argument: empty key", "the first refusal is named")
        }
        other => panic!("expected the transaction to be aborted, got {other:?}"),
    }
    let r = c.call(Request::ReadOnly { keys: vec![b("a"), b("b"), b("c")] }).await;
    assert_eq!(r, Some(Response::Values(vec![None, None, None])), "nothing of it committed");
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
    assert_eq!(c.call(Request::Write { key: b("k"), value: b("u") }).await, Some(Response::Written));
    // The second begin was refused inside the transaction: it cannot commit.
    let e = error(c.call(Request::Commit).await);
    assert!(matches!(e, WireError::Session(SessionError::RefusedEarlier { .. })), "{e:?}");
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
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
    // The refused write leaves the transaction unable to commit.
    assert!(matches!(got[3].response, Response::Error(WireError::Session(SessionError::RefusedEarlier { .. }))));
    assert_eq!(got[4].response, Response::Values(vec![None]));
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

/// Keys `prefix0..prefixN`, written `per_txn` to a transaction, with
/// values of `size` bytes.
async fn fill(addr: SocketAddr, prefix: &str, n: usize, per_txn: usize, size: usize) {
    let (mut c, _) = Raw::hello(addr).await;
    for chunk in (0..n).collect::<Vec<_>>().chunks(per_txn) {
        assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
        for i in chunk {
            let write = Request::Write { key: b(&format!("{prefix}{i:05}")), value: Bytes::from(vec![b'v'; size]) };
            assert_eq!(c.call(write).await, Some(Response::Written));
        }
        assert!(matches!(c.call(Request::Commit).await, Some(Response::Committed(Some(_)))));
    }
}

#[tokio::test]
async fn a_dump_larger_than_a_frame_comes_in_pages() {
    let plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 2, None, None, 0).unwrap();
    let node = start(Arc::new(plan), "embedded").await.unwrap();
    let addr = node.client_addr(DcId(0)).unwrap();
    // 17 MiB: more than one 16 MiB frame could carry.
    let n = 17 * 16;
    fill(addr, "big", n, 64, 64 << 10).await;
    let (mut c, _) = Raw::hello(addr).await;
    // Applied at the next Δ_R: wait until the dump holds every key.
    let mut keys = Vec::new();
    for _ in 0..100 {
        keys.clear();
        let (mut after, mut pages) = (None, 0);
        loop {
            let Some(Response::Dump(page)) = c.call(Request::Dump { after }).await else { panic!("no dump page") };
            pages += 1;
            assert!(page.entries.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() <= 1 << 20, "a page is bounded");
            keys.extend(page.entries.into_iter().map(|(k, _)| k));
            after = page.next;
            if after.is_none() {
                break;
            }
        }
        if keys.len() == n {
            assert!(pages >= 17, "{pages} pages");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!((keys.len(), sorted), (n, keys), "every key once, in order");
}

#[tokio::test]
async fn an_answer_larger_than_a_frame_is_an_error_that_says_so() {
    // Limits no config file accepts (a read answer could pass the frame
    // size); the server must still answer rather than drop the connection.
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 1, None, None, 0).unwrap();
    plan.limits = Limits { max_value_bytes: 1 << 20, max_keys_per_read: 32, ..Limits::default() };
    let node = start(Arc::new(plan), "embedded").await.unwrap();
    let addr = node.client_addr(DcId(0)).unwrap();
    fill(addr, "huge", 20, 1, 1 << 20).await;
    let (mut c, _) = Raw::hello(addr).await;
    // Visible at the next Δ_R, in commit order: wait for the last one.
    let last = || Request::ReadOnly { keys: vec![b("huge00019")] };
    while !matches!(c.call(last()).await, Some(Response::Values(v)) if v[0].is_some()) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(c.call(Request::Begin).await, Some(Response::Started));
    let keys: Vec<Bytes> = (0..20).map(|i| b(&format!("huge{i:05}"))).collect();
    match error(c.call(Request::Read { keys }).await) {
        WireError::AnswerTooLarge { size, limit } => assert!(size > limit && limit == 16 << 20, "{size} {limit}"),
        other => panic!("expected AnswerTooLarge, got {other:?}"),
    }
    assert_eq!(c.call(Request::Read { keys: vec![b("huge00001")] }).await.map(|_| ()), Some(()), "still served");
}

#[tokio::test]
async fn the_metrics_endpoint_tells_a_non_http_client_at_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = Arc::new(causeway_runtime::metrics::Metrics::new(&[]));
    tokio::spawn(causeway_runtime::metrics::serve(listener, metrics, Arc::new(|| {})));
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    // What a Causeway client sends first: a length-prefixed binary frame.
    stream.write_all(&[0, 0, 0, 9, 0, 0, 4, 3, b'r', b'a', b'w', 0, 0]).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(std::time::Duration::from_secs(1), stream.read_to_string(&mut answer))
        .await
        .expect("answered at once, not after the endpoint's read timeout")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request"), "{answer}");
}
