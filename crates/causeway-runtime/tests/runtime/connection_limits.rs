//! The bounds on a node's client connections ([`ConnectionLimits`]), each
//! reproduced as the attack it stops: too many connections, a frame that
//! never ends (before and after the hello), a session that holds a
//! connection doing nothing.

use causeway_client::{Client, Error};
use causeway_protocol::{DcId, ProtocolKind};
use causeway_runtime::plan::ConnectionLimits;
use causeway_runtime::{start, ClusterPlan, NodeHandle};
use causeway_wire::{Request, RequestFrame, Response, ResponseFrame, WireError, WIRE_VERSION};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn node(limits: ConnectionLimits) -> (NodeHandle, SocketAddr) {
    let mut plan = ClusterPlan::embedded(ProtocolKind::Wren, 1, 2, None, None, 0).unwrap();
    plan.connections = limits;
    let node = start(Arc::new(plan), "embedded").await.unwrap();
    let addr = node.client_addr(DcId(0)).unwrap();
    (node, addr)
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

fn hello() -> Vec<u8> {
    let request = RequestFrame {
        id: 1,
        request: Request::Hello { version: WIRE_VERSION, client: "raw".into(), credentials: None },
    };
    frame(&postcard::to_allocvec(&request).unwrap())
}

/// Reads frames until the server closes; returns the last error it sent, if
/// any, and how long the close took.
async fn until_closed(s: &mut TcpStream) -> (Option<WireError>, Duration) {
    let start = Instant::now();
    let mut last = None;
    loop {
        let mut len = [0; 4];
        if tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut len))
            .await
            .expect("still open after 10 s")
            .is_err()
        {
            return (last, start.elapsed());
        }
        let mut body = vec![0; u32::from_be_bytes(len) as usize];
        if s.read_exact(&mut body).await.is_err() {
            return (last, start.elapsed());
        }
        if let Ok(ResponseFrame { response: Response::Error(e), .. }) = postcard::from_bytes(&body) {
            last = Some(e);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_past_max_clients_is_refused_with_an_error_not_a_hang() {
    let (node, addr) = node(ConnectionLimits { max_clients: 2, ..ConnectionLimits::default() }).await;
    let first = Client::connect(addr).await.unwrap();
    let mut second = Client::connect(addr).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(5), Client::connect(addr)).await.expect("a hang") {
        Err(Error::Unavailable(why)) => assert!(why.contains("at most 2 client connections"), "{why}"),
        other => panic!("the third connection got {other:?}"),
    }
    // The two keep working, and a slot freed is taken again.
    second.read_only(&["k"]).await.unwrap();
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut third = loop {
        match Client::connect(addr).await {
            Ok(c) => break c,
            Err(Error::Unavailable(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("after a slot was freed: {e}"),
        }
    };
    third.read_only(&["k"]).await.unwrap();
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_that_never_ends_is_cut_off_before_and_after_the_hello() {
    let timeout = Duration::from_millis(300);
    let (node, addr) = node(ConnectionLimits { frame_timeout: timeout, ..ConnectionLimits::default() }).await;
    // Before the hello: a few bytes of a frame, then nothing.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&hello()[..5]).await.unwrap();
    let (_, took) = until_closed(&mut s).await;
    assert!(took < timeout * 10, "closed after {took:?}");
    // Nothing at all is no better.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let (_, took) = until_closed(&mut s).await;
    assert!(took < timeout * 10, "closed after {took:?}");
    // A hello that announces more than a hello can be: closed at once.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&(16u32 << 20).to_be_bytes()).await.unwrap();
    let (_, took) = until_closed(&mut s).await;
    assert!(took < timeout, "closed after {took:?}");

    // After the hello: 16 MiB announced, 100 bytes sent, then nothing.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&hello()).await.unwrap();
    let mut partial = (16u32 << 20).to_be_bytes().to_vec();
    partial.extend_from_slice(&[0; 100]);
    s.write_all(&partial).await.unwrap();
    let (error, took) = until_closed(&mut s).await;
    match error {
        Some(WireError::Unavailable(why)) => assert!(why.contains("did not arrive whole"), "{why}"),
        other => panic!("expected an error that says why, got {other:?}"),
    }
    assert!(took >= timeout && took < timeout * 10, "closed after {took:?}");
    // A client that keeps its requests whole is not affected.
    let mut client = Client::connect(addr).await.unwrap();
    for _ in 0..5 {
        client.read_only(&["k"]).await.unwrap();
        tokio::time::sleep(timeout / 2).await;
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_closed_and_told_why() {
    let idle = Duration::from_millis(300);
    let (node, addr) = node(ConnectionLimits { idle_timeout: Some(idle), ..ConnectionLimits::default() }).await;
    let mut client = Client::connect(addr).await.unwrap();
    // Busy within the limit: kept.
    for _ in 0..4 {
        client.read_only(&["k"]).await.unwrap();
        tokio::time::sleep(idle / 3).await;
    }
    tokio::time::sleep(idle * 4).await;
    match client.read_only(&["k"]).await {
        Err(Error::Unavailable(why)) => assert!(why.contains("idle"), "{why}"),
        other => panic!("an idle session's next call got {other:?}"),
    }
    node.stop().await;
}

/// A client that asks for large answers and never reads them: the server's
/// writes stall, and within the frame timeout it gives up on the client,
/// freeing the slot and what the connection held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_answers_is_cut_off() {
    let timeout = Duration::from_millis(300);
    let (node, addr) = node(ConnectionLimits { frame_timeout: timeout, ..ConnectionLimits::default() }).await;
    let keys: Vec<bytes::Bytes> = (0..100).map(|i| bytes::Bytes::from(format!("big{i}"))).collect();
    let mut writer = Client::connect(addr).await.unwrap();
    writer.begin().await.unwrap();
    for k in &keys {
        writer.write(k.clone(), vec![b'x'; 60_000]).await.unwrap();
    }
    writer.commit().await.unwrap();
    // Wait until the values are in a new session's snapshot (the writer's
    // own session sees them at once).
    let mut reader = Client::connect(addr).await.unwrap();
    while reader.read_only(&keys[99..]).await.unwrap()[0].is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&hello()).await.unwrap();
    // 10 answers of 6 MB each: far more than the socket buffers hold.
    for id in 2..12 {
        let request = RequestFrame { id, request: Request::ReadOnly { keys: keys.clone() } };
        s.write_all(&frame(&postcard::to_allocvec(&request).unwrap())).await.unwrap();
    }
    tokio::time::sleep(timeout * 6).await;
    // Reading now drains what was sent, then meets the close: a server
    // still serving would go on answering, and never close.
    let mut sink = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut sink)).await;
    assert!(read.is_ok(), "the connection is still open after the client stopped reading ({} bytes read)", sink.len());
    assert!(sink.len() < 10 * 6_000_000, "every answer was sent: {} bytes", sink.len());
    node.stop().await;
}
