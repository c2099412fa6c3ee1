//! Bad input from a peer closes that connection, is counted, and changes no
//! state; the transport keeps serving its good peers. A raw TCP client plays
//! the bad peer, claiming to be node 9.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use causeway_transport::frame::{encode_into, parse_ack, put_batch};
use causeway_transport::handshake::{self, Hello, Refusal, Reply, TRANSPORT_VERSION};
use causeway_transport::{Peer, Transport};
use common::{config, hundred_more, listener, Inbox, Msg, CLUSTER};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const RAW: u32 = 9;

struct Setup {
    a: Transport<Msg>,
    b: Transport<Msg>,
    /// What B received.
    inbox: Inbox,
    sent: u64,
}

/// A sends to B; B also knows node 9 (the raw client), which never listens.
async fn setup() -> Setup {
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let inbox = Inbox::default();
    let a = Transport::start_with_listener(config(1, vec![Peer::new(2, ab)]), la, Inbox::default().deliver())
        .await
        .unwrap();
    let peers = vec![Peer::new(1, aa), Peer::new(RAW, "127.0.0.1:1".parse::<SocketAddr>().unwrap())];
    let b = Transport::start_with_listener(config(2, peers), lb, inbox.deliver()).await.unwrap();
    let mut s = Setup { a, b, inbox, sent: 0 };
    s.good_traffic_flows().await;
    s
}

impl Setup {
    /// A's link to B delivers another 100 messages, in order.
    async fn good_traffic_flows(&mut self) {
        hundred_more(&self.a, 1, 2, &self.inbox, &mut self.sent).await;
    }

    fn addr(&self) -> SocketAddr {
        self.b.local_addr()
    }

    async fn finish(mut self, protocol_errors: u64) {
        self.good_traffic_flows().await;
        assert_eq!(self.b.stats().protocol_errors, protocol_errors);
        assert_eq!(self.b.stats().peer(1).unwrap().inbound_connections, 1, "A's link was never disturbed");
        self.a.shutdown().await;
        self.b.shutdown().await;
    }
}

fn hello(version: u32, cluster: &str, node: u32, incarnation: u64, base: u64) -> Vec<u8> {
    handshake::encode_frame(
        version,
        &Hello { cluster: cluster.into(), terms: Vec::new(), node, incarnation, base, skipped: false },
    )
}

/// Reads one frame body; `None` if the connection ends first.
async fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0; 4];
    s.read_exact(&mut len).await.ok()?;
    let mut body = vec![0; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).await.ok()?;
    Some(body)
}

/// Connects, shakes hands, returns the reply and the open stream.
async fn shake(addr: SocketAddr, hello: &[u8]) -> (Reply, TcpStream) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(hello).await.unwrap();
    let body = timeout(Duration::from_secs(5), read_frame(&mut s)).await.unwrap().expect("a reply");
    (handshake::decode(&body).unwrap(), s)
}

/// The server closes the connection: reading ends (EOF or reset) with nothing but acks before.
async fn assert_closed(mut s: TcpStream) {
    let read_acks = async {
        while let Some(body) = read_frame(&mut s).await {
            assert!(parse_ack(&body).is_some(), "unexpected frame {body:?}");
        }
    };
    timeout(Duration::from_secs(5), read_acks).await.expect("connection still open after 5 s");
}

/// A batch frame of the given encoded messages.
fn batch(first: u64, msgs: &[Msg]) -> Vec<u8> {
    let mut body = Vec::new();
    for m in msgs {
        encode_into(&mut body, m).unwrap();
    }
    let mut out = Vec::new();
    put_batch(&mut out, first, 0, &body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_client_speaking_correctly_is_delivered() {
    // The control for the tests below: the hand-made frames are right, so when
    // those fail it is for the one thing each breaks.
    let s = setup().await;
    let (reply, mut raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 1, 0)).await;
    assert!(matches!(reply, Reply::Accept { next: 0, .. }), "{reply:?}");
    raw.write_all(&batch(0, &[Msg::new(0), Msg::new(1), Msg::new(2)])).await.unwrap();
    s.inbox.wait_for(RAW, 3, Duration::from_secs(5)).await;
    s.inbox.assert_exactly(RAW, 3);
    s.finish(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_wire_version_is_refused() {
    let s = setup().await;
    let (reply, raw) = shake(s.addr(), &hello(TRANSPORT_VERSION + 1, CLUSTER, RAW, 1, 0)).await;
    assert_eq!(reply, Reply::Refuse(Refusal::Version { ours: TRANSPORT_VERSION, theirs: TRANSPORT_VERSION + 1 }));
    assert_closed(raw).await;
    assert_eq!(s.b.stats().peer(RAW).unwrap().inbound_connections, 0);
    s.finish(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_cluster_and_unknown_nodes_are_refused() {
    let s = setup().await;
    let (reply, raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, "other", RAW, 1, 0)).await;
    assert_eq!(reply, Reply::Refuse(Refusal::Cluster { theirs: "other".into() }));
    assert_closed(raw).await;
    let (reply, raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, 42, 1, 0)).await;
    assert_eq!(reply, Reply::Refuse(Refusal::UnknownNode(42)));
    assert_closed(raw).await;
    // Node 2 is B itself.
    let (reply, raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, 2, 1, 0)).await;
    assert_eq!(reply, Reply::Refuse(Refusal::UnknownNode(2)));
    assert_closed(raw).await;
    s.finish(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_disagrees_on_the_terms_is_refused_with_both_sides_named() {
    let s = setup().await;
    let terms = vec![("protocol".to_string(), "cure".to_string())];
    let body = handshake::encode_frame(
        TRANSPORT_VERSION,
        &Hello { cluster: CLUSTER.into(), terms, node: RAW, incarnation: 1, base: 0, skipped: false },
    );
    let (reply, raw) = shake(s.addr(), &body).await;
    let expected = Refusal::Terms { what: "protocol".into(), ours: None, theirs: Some("cure".into()) };
    assert_eq!(reply, Reply::Refuse(expected));
    assert_closed(raw).await;
    assert_eq!(s.b.stats().peer(RAW).unwrap().inbound_connections, 0);
    s.finish(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_incarnation_is_refused_and_cannot_rewind_the_link() {
    let s = setup().await;
    let (reply, mut raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 1000, 0)).await;
    assert!(matches!(reply, Reply::Accept { next: 0, .. }), "{reply:?}");
    raw.write_all(&batch(0, &[Msg::new(0), Msg::new(1)])).await.unwrap();
    s.inbox.wait_for(RAW, 2, Duration::from_secs(5)).await;
    drop(raw);
    let (reply, raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 999, 0)).await;
    assert_eq!(reply, Reply::Refuse(Refusal::Stale { node: RAW, theirs: 999 }));
    assert_closed(raw).await;
    // Same incarnation claiming to be past what was delivered: refused too.
    let (reply, raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 1000, 5)).await;
    assert_eq!(reply, Reply::Refuse(Refusal::Sequence { base: 5, next: 2 }));
    assert_closed(raw).await;
    // The genuine incarnation resumes where it was.
    let (reply, _raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 1000, 0)).await;
    assert!(matches!(reply, Reply::Accept { next: 2, .. }), "{reply:?}");
    s.finish(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_closes_the_connection() {
    let s = setup().await;
    // An HTTP request: its first four bytes read as a length far above the handshake limit.
    let mut raw = TcpStream::connect(s.addr()).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: causeway\r\n\r\n").await.unwrap();
    assert_closed(raw).await;
    // A well-framed handshake without the magic.
    let mut raw = TcpStream::connect(s.addr()).await.unwrap();
    raw.write_all(b"\0\0\0\x0cnot-causeway").await.unwrap();
    assert_closed(raw).await;
    // The right magic and version, then junk instead of a hello.
    let mut junk = b"CWTP".to_vec();
    junk.extend_from_slice(&TRANSPORT_VERSION.to_be_bytes());
    junk.extend_from_slice(&[0xff; 12]);
    let mut frame = (junk.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&junk);
    let mut raw = TcpStream::connect(s.addr()).await.unwrap();
    raw.write_all(&frame).await.unwrap();
    assert_closed(raw).await;
    s.finish(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_above_the_limit_closes_the_connection() {
    let s = setup().await;
    let (reply, mut raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 1, 0)).await;
    assert!(matches!(reply, Reply::Accept { next: 0, .. }), "{reply:?}");
    // 16 MiB + 1: one byte above the default max_frame_bytes. The length alone condemns it.
    raw.write_all(&((16u32 << 20) + 1).to_be_bytes()).await.unwrap();
    raw.write_all(&[0; 1000]).await.unwrap();
    assert_closed(raw).await;
    assert_eq!(s.inbox.count(RAW), 0);
    s.finish(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_batch_closes_the_connection_and_delivers_none_of_it() {
    let s = setup().await;
    let hi = hello(TRANSPORT_VERSION, CLUSTER, RAW, 1, 0);
    let (_, mut raw) = shake(s.addr(), &hi).await;
    raw.write_all(&batch(0, &[Msg::new(0), Msg::new(1)])).await.unwrap();
    s.inbox.wait_for(RAW, 2, Duration::from_secs(5)).await;

    // A good message, then one cut short: the frame length is right, the message is not.
    let mut bad = batch(2, &[Msg::new(2), Msg::new(3)]);
    bad.pop();
    let len = bad.len() as u32 - 4;
    bad[..4].copy_from_slice(&len.to_be_bytes());
    raw.write_all(&bad).await.unwrap();
    assert_closed(raw).await;

    // Bytes that decode as no message at all (a varint that never ends).
    let (reply, mut raw) = shake(s.addr(), &hi).await;
    assert!(matches!(reply, Reply::Accept { next: 2, .. }), "the bad batch moved nothing: {reply:?}");
    let mut frame = Vec::new();
    put_batch(&mut frame, 2, 0, &[0xff; 12]);
    raw.write_all(&frame).await.unwrap();
    assert_closed(raw).await;

    // A batch header without messages.
    let (_, mut raw) = shake(s.addr(), &hi).await;
    let mut frame = Vec::new();
    put_batch(&mut frame, 2, 0, &[]);
    raw.write_all(&frame).await.unwrap();
    assert_closed(raw).await;

    s.inbox.assert_exactly(RAW, 2);
    let (reply, _raw) = shake(s.addr(), &hi).await;
    assert!(matches!(reply, Reply::Accept { next: 2, .. }), "{reply:?}");
    s.finish(3).await;
}

/// A batch that acknowledges messages never sent to its sender (B wrote
/// nothing to the raw node: its address is not listening) would make B
/// forget what it keeps for a resend: the connection is closed and the
/// batch's messages are not delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reverse_ack_beyond_what_was_sent_closes_the_connection() {
    let s = setup().await;
    let (_, mut raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 1, 0)).await;
    let mut body = Vec::new();
    encode_into(&mut body, &Msg::new(0)).unwrap();
    let mut frame = Vec::new();
    put_batch(&mut frame, 0, 5, &body);
    raw.write_all(&frame).await.unwrap();
    assert_closed(raw).await;
    s.inbox.assert_exactly(RAW, 0);
    s.finish(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequence_gap_closes_the_connection() {
    let s = setup().await;
    let hi = hello(TRANSPORT_VERSION, CLUSTER, RAW, 1, 0);
    let (_, mut raw) = shake(s.addr(), &hi).await;
    raw.write_all(&batch(0, &[Msg::new(0)])).await.unwrap();
    raw.write_all(&batch(5, &[Msg::new(5)])).await.unwrap();
    assert_closed(raw).await;
    assert_eq!(s.inbox.count(RAW), 1);
    let (reply, _raw) = shake(s.addr(), &hi).await;
    assert!(matches!(reply, Reply::Accept { next: 1, .. }), "{reply:?}");
    s.finish(1).await;
}

/// A new sender's first batch may start past where it said it would: a
/// sender whose receiver restarted skips what it held for the one that
/// died. Only the first: a gap after it is still a gap (above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_senders_first_batch_may_skip_ahead() {
    let s = setup().await;
    let (_, mut raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 1, 0)).await;
    raw.write_all(&batch(5, &[Msg::new(5), Msg::new(6)])).await.unwrap();
    s.inbox.wait_for(RAW, 2, Duration::from_secs(5)).await;
    assert_eq!(s.inbox.from(RAW).seqs, vec![5, 6]);
    drop(raw);
    let (reply, _raw) = shake(s.addr(), &hello(TRANSPORT_VERSION, CLUSTER, RAW, 1, 0)).await;
    assert!(matches!(reply, Reply::Accept { next: 7, .. }), "{reply:?}");
    s.finish(0).await;
}
