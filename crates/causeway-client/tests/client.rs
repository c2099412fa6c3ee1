//! The client against a mock server speaking the wire protocol.

use causeway_client::testing::{Behavior, MockConfig, MockServer};
use causeway_client::wire::{Limits, WIRE_VERSION};
use causeway_client::{Bytes, Client, ClientOptions, Error, SessionToken};
use futures_util::{SinkExt, StreamExt};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

async fn mock(behavior: Behavior, limits: Limits) -> MockServer {
    MockServer::start_with(MockConfig { behavior, limits, dc: 3 }).await.unwrap()
}

fn quick() -> ClientOptions {
    ClientOptions { request_timeout: Duration::from_millis(300), ..ClientOptions::default() }
}

fn some(v: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(v.as_bytes()))
}

#[tokio::test]
async fn handshake_returns_the_welcome() {
    let server = MockServer::start_with(MockConfig { dc: 3, ..MockConfig::default() }).await.unwrap();
    let client = Client::connect(server.addr()).await.unwrap();
    let welcome = client.server();
    assert_eq!(welcome.version, WIRE_VERSION);
    assert_eq!(welcome.dc, 3);
    assert_eq!(welcome.protocol, "mock");
    assert_eq!(welcome.limits, Limits::default());
    assert!(!client.is_closed());
    // A String address works too.
    Client::connect(server.addr().to_string()).await.unwrap();
}

#[tokio::test]
async fn a_server_of_another_version_is_a_version_mismatch() {
    let server = mock(Behavior::VersionMismatch, Limits::default()).await;
    match Client::connect(server.addr()).await {
        Err(Error::VersionMismatch { server, client }) => {
            assert_eq!(client, WIRE_VERSION);
            assert_eq!(server, WIRE_VERSION + 1);
        }
        other => panic!("expected a version mismatch, got {other:?}"),
    }
}

#[tokio::test]
async fn begin_read_write_commit_round_trip() {
    let server = MockServer::start().await.unwrap();
    let mut c = Client::connect(server.addr()).await.unwrap();
    c.begin().await.unwrap();
    assert_eq!(c.read(&["x", "y"]).await.unwrap(), vec![None, None]);
    c.write("x", "1").await.unwrap();
    c.write(Bytes::from_static(b"y"), vec![0xff, 0x00]).await.unwrap();
    // The transaction reads its own writes; others do not see them yet.
    assert_eq!(c.read(&["y", "x", "z"]).await.unwrap(), vec![Some(Bytes::from_static(&[0xff, 0])), some("1"), None]);
    assert_eq!(server.get("x"), None);
    let stamp = c.commit().await.unwrap().expect("a transaction with writes has a commit stamp");
    assert_eq!(stamp.dc, 0);
    assert_eq!(server.get("x"), some("1"));

    // A new transaction sees the commit; one without writes has no stamp.
    c.begin().await.unwrap();
    assert_eq!(c.get("x").await.unwrap(), some("1"));
    assert_eq!(c.commit().await.unwrap(), None);

    // Abort drops the writes.
    c.begin().await.unwrap();
    c.write("x", "2").await.unwrap();
    c.abort().await.unwrap();
    assert_eq!(server.get("x"), some("1"));

    // The server's transaction errors are typed.
    assert!(matches!(c.commit().await, Err(Error::NoActiveTransaction)));
    assert!(matches!(c.read(&["x"]).await, Err(Error::NoActiveTransaction)));
    c.begin().await.unwrap();
    assert!(matches!(c.begin().await, Err(Error::TransactionActive)));
    assert!(matches!(c.read_only(&["x"]).await, Err(Error::TransactionActive)));
    assert!(matches!(c.export_session().await, Err(Error::TransactionActive)));
    c.abort().await.unwrap();
    assert!(!c.is_closed());
}

#[tokio::test]
async fn a_pipelined_write_error_surfaces_at_the_next_call() {
    let server = mock(Behavior::Normal, Limits { max_writes_per_txn: 2, ..Limits::default() }).await;
    let mut c = Client::connect(server.addr()).await.unwrap();

    // No transaction: the server rejects the write; the next call says so
    // instead of doing its own work.
    c.write("x", "1").await.unwrap_or_else(|e| panic!("the write is not awaited: {e}"));
    assert!(matches!(c.begin().await, Err(Error::NoActiveTransaction)));
    // ... and it is reported once: begin now works.
    c.begin().await.unwrap();
    c.abort().await.unwrap();

    // A later write reports an error that has already arrived, without waiting.
    let mut sent = 0;
    let error = loop {
        match c.write("x", "1").await {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 1000, "the error never surfaced");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(matches!(error, Error::NoActiveTransaction), "{error}");
    assert!(sent >= 1);
    let _ = c.confirm_writes().await; // the other writes' errors
    c.begin().await.unwrap();

    // The third write is over the server's limit: the commit aborts the
    // transaction instead (committing two of three writes would be a
    // partial transaction) and names the refusal; nothing is left open.
    for k in ["a", "b", "c"] {
        c.write(k, "v").await.unwrap();
    }
    match c.commit().await {
        Err(Error::RefusedEarlier { cause }) => {
            assert!(cause.contains("writes in one transaction: 3, over the limit of 2"), "{cause}")
        }
        other => panic!("expected the transaction to be aborted, got {other:?}"),
    }
    assert_eq!(server.get("a"), None);
    assert!(matches!(c.read(&["a"]).await, Err(Error::NoActiveTransaction)));

    // confirm_writes reports it without doing anything else; abort discards it.
    c.begin().await.unwrap();
    for k in ["a", "b", "c"] {
        c.write(k, "v").await.unwrap();
    }
    assert!(matches!(c.confirm_writes().await, Err(Error::TooLarge { .. })));
    c.confirm_writes().await.unwrap();
    c.write("d", "v").await.unwrap();
    c.abort().await.unwrap();

    // Many pipelined writes (more than the client lets go unacknowledged):
    // all acknowledged, all committed.
    let limits = Limits { max_writes_per_txn: 5000, ..Limits::default() };
    let server = MockServer::start_with(MockConfig { limits, ..MockConfig::default() }).await.unwrap();
    let mut c = Client::connect(server.addr()).await.unwrap();
    c.begin().await.unwrap();
    for i in 0..2000 {
        c.write(format!("k{i}"), format!("v{i}")).await.unwrap();
    }
    assert!(c.commit().await.unwrap().is_some());
    assert_eq!(server.get("k1999"), some("v1999"));
}

#[tokio::test]
async fn read_only_transactions_take_one_request() {
    let server = MockServer::start().await.unwrap();
    let mut c = Client::connect(server.addr()).await.unwrap();
    c.begin().await.unwrap();
    c.write("x", "1").await.unwrap();
    c.commit().await.unwrap();
    let before = server.requests();
    assert_eq!(c.read_only(&["x", "nope"]).await.unwrap(), vec![some("1"), None]);
    assert_eq!(server.requests(), before + 1);
    // A read of no key is refused here, as the server would refuse it.
    assert!(matches!(c.read_only::<&str>(&[]).await, Err(Error::InvalidArgument(_))));
    assert_eq!(server.requests(), before + 1);
}

#[tokio::test]
async fn session_tokens_carry_over_to_another_connection() {
    let server = MockServer::start().await.unwrap();
    let mut first = Client::connect(server.addr()).await.unwrap();
    first.begin().await.unwrap();
    first.write("x", "1").await.unwrap();
    first.commit().await.unwrap();
    let token = first.export_session().await.unwrap();
    assert!(token.as_bytes().starts_with(b"mock"), "the server's bytes, as they were");

    // Text form round trip.
    let text = token.to_string();
    assert!(text.chars().all(|c| c.is_ascii_hexdigit()), "{text}");
    let parsed: SessionToken = text.parse().unwrap();
    assert_eq!(parsed, token);
    assert_eq!(parsed.as_bytes(), token.as_bytes());
    assert_eq!(format!(" {} \n", text.to_uppercase()).parse::<SessionToken>().unwrap(), token);
    assert!(matches!("abc".parse::<SessionToken>(), Err(Error::BadToken(_))));
    assert!(matches!("zz".parse::<SessionToken>(), Err(Error::BadToken(_))));

    let mut second = Client::connect(server.addr()).await.unwrap();
    second.resume_session(&parsed).await.unwrap();
    assert_eq!(second.read_only(&["x"]).await.unwrap(), vec![some("1")]);
    // The mock's tokens carry the last commit: re-exported, it is the same.
    assert_eq!(second.export_session().await.unwrap(), token);

    // The server judges the bytes.
    let junk = SessionToken::from_bytes(&b"junk"[..]);
    assert!(matches!(second.resume_session(&junk).await, Err(Error::BadToken(_))));
    second.begin().await.unwrap();
    assert!(matches!(second.resume_session(&token).await, Err(Error::TransactionActive)));
}

#[tokio::test]
async fn invalid_arguments_are_rejected_without_contacting_the_server() {
    let limits = Limits {
        max_key_bytes: 8,
        max_value_bytes: 16,
        max_keys_per_read: 3,
        max_writes_per_txn: 10,
        ..Limits::default()
    };
    let server = mock(Behavior::Normal, limits).await;
    let mut c = Client::connect(server.addr()).await.unwrap();
    c.begin().await.unwrap();
    let sent = server.requests();

    assert!(matches!(c.write("", "v").await, Err(Error::InvalidArgument(_))));
    assert!(matches!(c.read(&["a", ""]).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(c.get("").await, Err(Error::InvalidArgument(_))));
    assert!(matches!(c.read_only(&[""]).await, Err(Error::InvalidArgument(_))));
    match c.write("k", vec![0u8; 17]).await {
        Err(Error::TooLarge { what, size: 17, limit: 16 }) => assert_eq!(what, "value (bytes)"),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    match c.write("123456789", "v").await {
        Err(Error::TooLarge { what, size: 9, limit: 8 }) => assert_eq!(what, "key (bytes)"),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(matches!(c.read(&["a", "b", "c", "d"]).await, Err(Error::TooLarge { size: 4, limit: 3, .. })));
    assert_eq!(server.requests(), sent, "nothing reached the server");
    // The refused operations leave the transaction unable to commit.
    match c.commit().await {
        Err(Error::RefusedEarlier { cause }) => assert_eq!(cause, "invalid argument: empty key"),
        other => panic!("expected the transaction to be aborted, got {other:?}"),
    }

    // The client is still fine; the limits themselves are allowed.
    c.begin().await.unwrap();
    c.write("12345678", vec![1u8; 16]).await.unwrap();
    assert_eq!(c.read(&["12345678", "b", "c"]).await.unwrap()[0].as_ref().map(|v| v.len()), Some(16));
    c.commit().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_address_is_unreachable() {
    // A port nobody listens on: bind one, then free it.
    let addr = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    match Client::connect(addr).await {
        Err(Error::Unreachable { addr: a, source }) => {
            assert_eq!(a, addr.to_string());
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    // A name that does not resolve (a resolver without network may time out instead).
    let quick_connect = ClientOptions { connect_timeout: Duration::from_secs(2), ..ClientOptions::default() };
    match Client::connect_with("no-such-host.invalid:7100", quick_connect).await {
        Err(Error::Unreachable { .. } | Error::Timeout { what: "connect", .. }) => {}
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_the_client_is_closed() {
    let server = mock(Behavior::Silent, Limits::default()).await;
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    let started = Instant::now();
    match c.begin().await {
        Err(Error::Timeout { what: "begin", after }) => assert_eq!(after, Duration::from_millis(300)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(c.is_closed());
    assert!(matches!(c.read_only(&["x"]).await, Err(Error::Disconnected)));
    assert!(matches!(c.write("x", "1").await, Err(Error::Disconnected)));

    // A call cancelled while it waits leaves the answers out of step: the client is closed.
    let mut c = Client::connect(server.addr()).await.unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(50), c.begin()).await.is_err());
    assert!(matches!(c.begin().await, Err(Error::Disconnected)));
    assert!(c.is_closed());

    // A handshake that is never answered times out too.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _hold = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(s);
    });
    assert!(matches!(Client::connect_with(addr, quick()).await, Err(Error::Timeout { what: "hello", .. })));
}

#[tokio::test]
async fn a_server_closing_mid_request_is_a_disconnect() {
    let server = mock(Behavior::CloseAfterHello, Limits::default()).await;
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    assert!(matches!(c.begin().await, Err(Error::Disconnected)));
    assert!(c.is_closed());
    assert!(matches!(c.begin().await, Err(Error::Disconnected)));

    // Pipelined writes whose answers never come: the next call sees the close.
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    let _ = c.write("x", "1").await;
    assert!(matches!(c.commit().await, Err(Error::Disconnected)));
}

#[tokio::test]
async fn a_connection_lost_with_a_commit_in_flight_leaves_its_outcome_unknown() {
    // The server applies the commit, then dies before answering.
    let server = mock(Behavior::CommitThenClose { every: 1 }, Limits::default()).await;
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    c.begin().await.unwrap();
    c.write("x", "1").await.unwrap();
    match c.commit().await {
        Err(e @ Error::OutcomeUnknown { connection_lost: true, .. }) => assert!(e.is_fatal(), "{e}"),
        other => panic!("expected an unknown outcome, got {other:?}"),
    }
    assert!(c.is_closed());
    assert_eq!(server.get("x"), some("1"), "it did commit: the client could not know");
    assert!(matches!(c.begin().await, Err(Error::Disconnected)));

    // The same through commit_writes, writes and commit in one round trip.
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    c.begin().await.unwrap();
    let e = c.commit_writes(vec![(Bytes::from("y"), some("2"))]).await.unwrap_err();
    assert!(matches!(e, Error::OutcomeUnknown { connection_lost: true, .. }), "{e:?}");
    assert_eq!(server.get("y"), some("2"));

    // A read whose connection breaks is no commit: it stays a disconnect.
    let server = mock(Behavior::CloseAfterHello, Limits::default()).await;
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    assert!(matches!(c.read_only(&["x"]).await, Err(Error::Disconnected)));
}

#[tokio::test]
async fn a_killed_server_restarts_on_its_address_with_its_data() {
    let mut server = mock(Behavior::Normal, Limits::default()).await;
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    c.begin().await.unwrap();
    c.write("x", "1").await.unwrap();
    c.commit().await.unwrap();
    server.kill();
    assert!(c.read_only(&["x"]).await.unwrap_err().is_fatal());
    assert!(matches!(Client::connect_with(server.addr(), quick()).await, Err(Error::Unreachable { .. })));
    server.restart().await.unwrap();
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    assert_eq!(c.read_only(&["x"]).await.unwrap(), vec![some("1")]);
}

#[tokio::test]
async fn answers_that_make_no_sense_are_protocol_errors() {
    // A raw server: welcomes, then answers every request with `Aborted` under a wrong id.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use causeway_client::wire::*;
        let (s, _) = listener.accept().await.unwrap();
        let mut framed = Framed::new(s, LengthDelimitedCodec::new());
        let mut first = true;
        while let Some(Ok(body)) = framed.next().await {
            let req: RequestFrame = postcard::from_bytes(&body).unwrap();
            let response = if first {
                first = false;
                ResponseFrame {
                    id: req.id,
                    response: Response::Welcome(Welcome {
                        version: WIRE_VERSION,
                        protocol: "raw".into(),
                        dc: 0,
                        node: "raw".into(),
                        limits: Limits::default(),
                        role: causeway_client::Role::Admin,
                    }),
                }
            } else {
                ResponseFrame { id: req.id + 7, response: Response::Aborted }
            };
            framed.send(Bytes::from(postcard::to_allocvec(&response).unwrap())).await.unwrap();
        }
    });
    let mut c = Client::connect(addr).await.unwrap();
    assert_eq!(c.server().protocol, "raw");
    assert!(matches!(c.begin().await, Err(Error::Protocol(_))));
    assert!(matches!(c.begin().await, Err(Error::Disconnected)));
}

#[tokio::test]
async fn admin_hooks() {
    let server = MockServer::start().await.unwrap();
    let mut c = Client::connect(server.addr()).await.unwrap();
    c.begin().await.unwrap();
    c.write("b", "2").await.unwrap();
    c.write("a", "1").await.unwrap();
    c.commit().await.unwrap();
    let dump = c.dump().await.unwrap();
    assert!(!dump.is_partial());
    assert_eq!(dump.entries, vec![(Bytes::from("a"), Bytes::from("1")), (Bytes::from("b"), Bytes::from("2"))]);
    c.drop_peer_connections().await.unwrap();
    assert_eq!(server.peer_drops(), 1);
}

#[test]
fn session_tokens_serialize_as_hex_text_or_bytes() {
    let token = SessionToken::from_bytes(vec![0xde, 0xad, 0x01]);
    assert_eq!(format!("{token}"), "dead01");
    assert_eq!(format!("{token:?}"), "SessionToken(dead01)");
    let bin = postcard::to_allocvec(&token).unwrap();
    assert_eq!(bin, [3, 0xde, 0xad, 0x01]);
    assert_eq!(postcard::from_bytes::<SessionToken>(&bin).unwrap(), token);
    assert_eq!(SessionToken::from_bytes(Bytes::new()).to_string(), "");
    let json = serde_json::to_string(&token).unwrap();
    assert_eq!(json, r#""dead01""#);
    assert_eq!(serde_json::from_str::<SessionToken>(&json).unwrap(), token);
    assert!(serde_json::from_str::<SessionToken>(r#""xyz""#).is_err());
}

#[tokio::test]
async fn begin_read_and_commit_writes_are_one_round_trip_each() {
    let server = MockServer::start().await.unwrap();
    let mut c = Client::connect(server.addr()).await.unwrap();
    assert_eq!(c.begin_read(&["x", "y"]).await.unwrap(), vec![None, None]);
    let writes = vec![(Bytes::from_static(b"x"), some("1")), (Bytes::from_static(b"y"), some("2"))];
    assert!(c.commit_writes(writes).await.unwrap().is_some(), "a commit with writes has a stamp");
    assert_eq!((server.get("x"), server.get("y")), (some("1"), some("2")));
    // The next transaction sees them; a begin inside a transaction fails
    // and the read's answer is dropped, keeping the connection in step.
    assert_eq!(c.begin_read(&["y", "x"]).await.unwrap(), vec![some("2"), some("1")]);
    assert!(matches!(c.begin_read(&["x"]).await, Err(Error::TransactionActive)));
    assert_eq!(c.read(&["x"]).await.unwrap(), vec![some("1")]);
    // The refused begin left the transaction unable to commit.
    let refused = c.commit_writes(Vec::new()).await;
    assert!(matches!(refused, Err(Error::RefusedEarlier { .. })), "{refused:?}");
    // Deletes travel with the commit too.
    c.begin().await.unwrap();
    assert!(c.commit_writes(vec![(Bytes::from_static(b"y"), None)]).await.unwrap().is_some());
    assert_eq!(server.get("y"), None);
    // Outside a transaction the writes are refused and nothing commits.
    let refused = c.commit_writes(vec![(Bytes::from_static(b"x"), some("3"))]).await;
    assert!(matches!(refused, Err(Error::NoActiveTransaction)), "{refused:?}");
    assert_eq!(server.get("x"), some("1"));
    assert!(!c.is_closed());
}

#[tokio::test]
async fn commit_writes_checks_the_limits_before_sending_anything() {
    let limits = Limits { max_writes_per_txn: 3, max_value_bytes: 4, ..Limits::default() };
    let server = mock(Behavior::Normal, limits).await;
    let mut c = Client::connect(server.addr()).await.unwrap();
    c.begin().await.unwrap();
    c.write("a", "1").await.unwrap();
    c.write("b", "2").await.unwrap();
    // Two written already: two more would pass the limit of three.
    let two = vec![(Bytes::from_static(b"c"), some("3")), (Bytes::from_static(b"d"), some("4"))];
    assert!(matches!(c.commit_writes(two).await, Err(Error::TooLarge { .. })));
    let big = vec![(Bytes::from_static(b"c"), some("12345"))];
    assert!(matches!(c.commit_writes(big).await, Err(Error::TooLarge { .. })));
    assert_eq!(server.get("a"), None, "nothing was committed");
    // The refusals leave the transaction unable to commit: what follows
    // is aborted, with the first refusal as the reason.
    let one = vec![(Bytes::from_static(b"c"), some("3"))];
    match c.commit_writes(one).await {
        Err(Error::RefusedEarlier { cause }) => assert!(cause.contains("writes in one transaction"), "{cause}"),
        other => panic!("expected the transaction to be aborted, got {other:?}"),
    }
    assert_eq!((server.get("a"), server.get("c")), (None, None), "nothing of it committed");
    // The transaction is over: the next one starts and commits.
    c.begin().await.unwrap();
    assert!(c.commit_writes(vec![(Bytes::from_static(b"c"), some("3"))]).await.unwrap().is_some());
    assert_eq!(server.get("c"), some("3"));
}

#[tokio::test]
async fn a_refused_write_leaves_the_transaction_unable_to_commit() {
    let limits = Limits { max_writes_per_txn: 2, max_value_bytes: 4, ..Limits::default() };
    let server = mock(Behavior::Normal, limits).await;
    let mut c = Client::connect(server.addr()).await.unwrap();
    // Refused by the client itself (a value over the limit): nothing is sent.
    c.begin().await.unwrap();
    c.write("a", "1").await.unwrap();
    assert!(matches!(c.write("b", "12345").await, Err(Error::TooLarge { .. })));
    match c.commit().await {
        Err(Error::RefusedEarlier { cause }) => assert!(cause.contains("value (bytes)"), "{cause}"),
        other => panic!("expected the transaction to be aborted, got {other:?}"),
    }
    assert_eq!(server.get("a"), None, "the write before the refused one did not commit");
    // Refused by the server (one write too many, which only it counts),
    // the write pipelined and its error reported later.
    c.begin().await.unwrap();
    for key in ["a", "b", "c"] {
        let _ = c.write(key, "1").await;
    }
    match c.commit().await {
        Err(Error::RefusedEarlier { cause }) => assert!(cause.contains("writes in one transaction"), "{cause}"),
        other => panic!("expected the transaction to be aborted, got {other:?}"),
    }
    assert_eq!((server.get("a"), server.get("b")), (None, None), "no part of it committed");
    // A refused read counts too; a new transaction starts clean.
    c.begin().await.unwrap();
    c.write("a", "2").await.unwrap();
    assert!(matches!(c.read(&[""]).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(c.commit().await, Err(Error::RefusedEarlier { .. })));
    c.begin().await.unwrap();
    c.write("a", "3").await.unwrap();
    assert!(c.commit().await.unwrap().is_some());
    assert_eq!(server.get("a"), some("3"));
    assert!(!c.is_closed());
}

#[tokio::test]
async fn deletes_remove_keys_and_dumps_come_in_pages() {
    let server = MockServer::start().await.unwrap();
    let mut c = Client::connect(server.addr()).await.unwrap();
    c.begin().await.unwrap();
    for i in 0..10 {
        c.write(format!("k{i}"), format!("v{i}")).await.unwrap();
    }
    c.commit().await.unwrap();
    c.begin().await.unwrap();
    c.delete("k3").await.unwrap();
    assert_eq!(c.read(&["k3", "k4"]).await.unwrap(), vec![None, some("v4")], "the transaction sees its delete");
    c.commit().await.unwrap();
    assert_eq!(server.get("k3"), None);
    // The mock answers 3 entries a page: the client reads them all.
    let first = c.dump_page(None).await.unwrap();
    assert_eq!(first.entries.len(), 3);
    assert!(first.next.is_some());
    let dump = c.dump().await.unwrap();
    let keys: Vec<String> = dump.entries.iter().map(|(k, _)| String::from_utf8_lossy(k).into_owned()).collect();
    assert_eq!(keys, ["k0", "k1", "k2", "k4", "k5", "k6", "k7", "k8", "k9"]);
    assert_eq!(dump.next, None);
}

#[tokio::test]
async fn a_key_written_again_counts_once_against_the_writes_limit() {
    let limits = Limits { max_writes_per_txn: 3, ..Limits::default() };
    let server = mock(Behavior::Normal, limits).await;
    let mut c = Client::connect(server.addr()).await.unwrap();
    c.begin().await.unwrap();
    for i in 0..10 {
        c.write("a", format!("{i}")).await.unwrap();
    }
    // a, b, c: three keys, however often a was written, and b twice here.
    let writes = vec![
        (Bytes::from_static(b"b"), some("1")),
        (Bytes::from_static(b"b"), some("2")),
        (Bytes::from_static(b"c"), None),
    ];
    assert!(c.commit_writes(writes).await.unwrap().is_some());
    assert_eq!((server.get("a"), server.get("b")), (some("9"), some("2")));
}

#[tokio::test]
async fn a_dump_whose_cursor_does_not_move_is_refused_not_read_forever() {
    let server = mock(Behavior::StuckDump, Limits::default()).await;
    let mut c = Client::connect_with(server.addr(), quick()).await.unwrap();
    match c.dump().await {
        Err(Error::Protocol(why)) => assert!(why.contains("does not move forward"), "{why}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

/// A serializable store's certification aborts a commit; `retry` runs the
/// whole transaction again (its reads too) until it commits, and gives the
/// abort back when the attempts run out.
#[tokio::test]
async fn retry_runs_an_aborted_transaction_again_until_it_commits() {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicU32, Ordering};
    static ATTEMPTS: AtomicU32 = AtomicU32::new(0);
    type Txn<'c> = Pin<Box<dyn Future<Output = Result<Option<causeway_client::Stamp>, Error>> + Send + 'c>>;
    fn increment(c: &mut Client) -> Txn<'_> {
        ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            c.begin().await?;
            let v = c.read(&["n"]).await?;
            let n: u64 = v[0].as_deref().and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()).unwrap_or(0);
            c.write("n", (n + 1).to_string()).await?;
            c.commit().await
        })
    }
    let server =
        MockServer::start_with(MockConfig { behavior: Behavior::AbortCommits { first: 3 }, ..Default::default() })
            .await
            .unwrap();
    let mut client = Client::connect(&server.addr().to_string()).await.unwrap();
    let short = client.retry(2, increment).await;
    assert!(matches!(&short, Err(e @ Error::Aborted(_)) if e.is_retryable()), "{short:?}");
    assert_eq!(ATTEMPTS.load(Ordering::Relaxed), 2, "two attempts, both aborted");
    let stamp = client.retry(10, increment).await.expect("commits once the aborts end");
    assert!(stamp.is_some());
    assert_eq!(ATTEMPTS.load(Ordering::Relaxed), 4, "the third abort, then the commit");
    assert_eq!(server.get("n").as_deref(), Some(&b"1"[..]), "one increment took effect, not four");
    assert!(!Error::Disconnected.is_retryable(), "only aborts are retried");
}
