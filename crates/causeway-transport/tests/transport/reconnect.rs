//! Broken connections and late peers: nothing lost, nothing twice, order kept.

use crate::common;

use std::time::Duration;

use causeway_transport::{Peer, Transport};
use common::{config, eventually, listener, Inbox, Msg};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_lose_and_duplicate_nothing() {
    const N: u64 = 200_000;
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let (ia, ib) = (Inbox::default(), Inbox::default());
    let a = Transport::start_with_listener(config(1, vec![Peer::new(2, ab)]), la, ia.deliver()).await.unwrap();
    let b = Transport::start_with_listener(config(2, vec![Peer::new(1, aa)]), lb, ib.deliver()).await.unwrap();

    // Both directions stream, paced so the drops land mid-stream.
    let streams: Vec<_> = [(a.clone(), 2), (b.clone(), 1)]
        .into_iter()
        .map(|(t, to)| {
            tokio::spawn(async move {
                for seq in 0..N {
                    t.send(to, Msg::new(seq)).unwrap();
                    if seq % 1000 == 999 {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                }
            })
        })
        .collect();
    let mut drops = 0;
    while !streams.iter().all(|s| s.is_finished()) || drops < 6 {
        tokio::time::sleep(Duration::from_millis(25)).await;
        // Alternate the side that breaks the connections: the dialer or the acceptor of each link.
        if drops % 2 == 0 { &a } else { &b }.drop_connections();
        drops += 1;
    }
    ib.wait_for(1, N as usize, Duration::from_secs(15)).await;
    ia.wait_for(2, N as usize, Duration::from_secs(15)).await;
    ib.assert_exactly(1, N);
    ia.assert_exactly(2, N);

    let (sa, sb) = (a.stats(), b.stats());
    let (pa, pb) = (sa.peer(2).unwrap(), sb.peer(1).unwrap());
    println!("{drops} drops; a->b {pa:?}; b->a {pb:?}");
    assert!(pa.reconnects >= 3 && pb.reconnects >= 3, "reconnects {} {}", pa.reconnects, pb.reconnects);
    assert!(pb.inbound_connections > pa.reconnects, "every reconnect is a new inbound connection");
    // First transmissions are counted once, however often a message was re-sent.
    assert_eq!((pa.msgs_sent, pb.msgs_sent), (N, N));
    assert_eq!((pa.msgs_received, pb.msgs_received), (N, N));
    eventually("reconnected and all acked", Duration::from_secs(5), || {
        let (pa, pb) = (a.stats().peer(2).cloned().unwrap(), b.stats().peer(1).cloned().unwrap());
        pa.connected && pb.connected && pa.unacked == 0 && pb.unacked == 0
    })
    .await;
    assert_eq!(sa.protocol_errors + sb.protocol_errors, 0);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_starts_late_gets_everything() {
    const N: u64 = 5_000;
    let (la, aa) = listener();
    // A free port nobody listens on yet: connecting is refused until B starts.
    let (lb, ab) = listener();
    drop(lb);
    let ib = Inbox::default();
    let a = Transport::start_with_listener(config(1, vec![Peer::new(2, ab)]), la, Inbox::default().deliver())
        .await
        .unwrap();
    for seq in 0..N {
        a.send(2, Msg::new(seq)).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = a.stats().peer(2).cloned().unwrap();
    assert!(!s.connected);
    // Backoff: 5, 10, 20, 40, 80, 100, 100 ms... a handful of attempts, not hundreds.
    assert!((2..=12).contains(&s.connect_failures), "{} attempts in 300 ms", s.connect_failures);
    assert_eq!((s.unacked, s.msgs_sent), (N, 0));

    let mut cfg = config(2, vec![Peer::new(1, aa)]);
    cfg.listen = ab;
    let b = Transport::start(cfg, ib.deliver()).await.unwrap();
    ib.wait_for(1, N as usize, Duration::from_secs(5)).await;
    ib.assert_exactly(1, N);
    eventually("acked", Duration::from_secs(5), || a.stats().peer(2).unwrap().unacked == 0).await;
    a.shutdown().await;
    b.shutdown().await;
}

/// A receiver that restarts is a new process: what was sent to the one
/// that died — delivered or not, acknowledged or not — is not handed to it
/// (it might be a request its predecessor already took). The sender drops it
/// when the handshake shows the new incarnation, counts it, and the link
/// goes on with what is sent from then on, in order — also when it breaks
/// again before the first of those reached the new receiver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_receiver_gets_only_what_is_sent_to_it() {
    let (la, aa) = listener();
    let (lb, ab) = listener();
    drop(lb);
    let a = Transport::start_with_listener(config(1, vec![Peer::new(2, ab)]), la, Inbox::default().deliver())
        .await
        .unwrap();
    let start_b = |inbox: &Inbox| {
        let mut cfg = config(2, vec![Peer::new(1, aa)]);
        cfg.listen = ab;
        Transport::start(cfg, inbox.deliver())
    };
    let first = Inbox::default();
    let b = start_b(&first).await.unwrap();
    for seq in 0..100 {
        a.send(2, Msg::new(seq)).unwrap();
    }
    first.wait_for(1, 100, Duration::from_secs(5)).await;
    // What B acknowledged is not B's to lose: only what it had not yet is
    // dropped for the restart below.
    eventually("B acked the first 100", Duration::from_secs(5), || a.stats().peer(2).unwrap().unacked == 0).await;
    b.shutdown().await;
    // Sent while B is down: meant for the process that died.
    for seq in 100..150 {
        a.send(2, Msg::new(seq)).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(50)).await;

    let second = Inbox::default();
    let b = start_b(&second).await.unwrap();
    eventually("connected to the new B", Duration::from_secs(5), || a.stats().peer(2).unwrap().connected).await;
    // The link breaks before anything reached the new B: A comes back where
    // it skipped to, and B takes it from there (it had nothing from A yet).
    let reconnects = a.stats().peer(2).unwrap().reconnects;
    a.drop_connections();
    eventually("reconnected to the new B", Duration::from_secs(5), || {
        let s = a.stats().peer(2).cloned().unwrap();
        s.connected && s.reconnects > reconnects
    })
    .await;
    for seq in 150..160 {
        a.send(2, Msg::new(seq)).unwrap();
    }
    second.wait_for(1, 10, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(second.from(1).seqs, (150..160).collect::<Vec<_>>());
    let s = a.stats().peer(2).cloned().unwrap();
    assert_eq!(s.dropped_for_restart, 50, "{s:?}");
    assert_eq!(first.count(1), 100);
    a.shutdown().await;
    b.shutdown().await;
}
