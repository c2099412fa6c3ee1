//! FIFO and exactly-once on healthy links, byte statistics, send errors.

mod common;

use std::time::Duration;

use causeway_transport::{Peer, SendError, Transport};
use common::{config, eventually, listener, Inbox, Msg};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_thousand_messages_arrive_once_in_order() {
    const N: u64 = 200_000;
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let (ia, ib) = (Inbox::default(), Inbox::default());
    let a = Transport::start_with_listener(config(1, vec![Peer::new(2, ab)]), la, ia.deliver()).await.unwrap();
    let b = Transport::start_with_listener(config(2, vec![Peer::new(1, aa)]), lb, ib.deliver()).await.unwrap();
    assert_eq!(a.local_addr(), aa);

    for seq in 0..N {
        a.send(2, Msg::new(seq)).unwrap();
    }
    ib.wait_for(1, N as usize, Duration::from_secs(15)).await;
    ib.assert_exactly(1, N);
    assert_eq!(ia.count(2), 0);

    // Acks come back, and what was sent and received adds up.
    eventually("all acked", Duration::from_secs(5), || a.stats().peer(2).unwrap().unacked == 0).await;
    let (sa, sb) = (a.stats().peer(2).unwrap().clone(), b.stats().peer(1).unwrap().clone());
    assert_eq!((sa.msgs_sent, sa.msgs_resent, sb.msgs_received, sb.duplicates_dropped), (N, 0, N, 0));
    assert_eq!(sa.bytes_sent, sb.bytes_received);
    // Coalescing: many messages per frame, and frames counted the same on both sides.
    assert_eq!(sa.frames_sent, sb.frames_received);
    assert!(sa.frames_sent * 20 < N, "{} frames for {N} messages", sa.frames_sent);
    assert!(sa.wire_bytes_sent > sa.bytes_sent);
    assert!(sa.connected && sa.reconnects == 0);
    assert_eq!(a.stats().protocol_errors + b.stats().protocol_errors, 0);

    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_talk_both_ways() {
    const N: u64 = 20_000;
    let ls: Vec<_> = (0..3).map(|_| listener()).collect();
    let addrs: Vec<_> = ls.iter().map(|(_, a)| *a).collect();
    let inboxes: Vec<Inbox> = (0..3).map(|_| Inbox::default()).collect();
    let mut nodes = Vec::new();
    for (i, (l, _)) in ls.into_iter().enumerate() {
        let me = i as u32 + 1;
        let peers = (0..3).filter(|j| *j != i).map(|j| Peer::new(j as u32 + 1, addrs[j])).collect();
        nodes.push(Transport::start_with_listener(config(me, peers), l, inboxes[i].deliver()).await.unwrap());
    }
    // Every node sends to both others at once, interleaved, from its own task.
    let senders: Vec<_> = nodes
        .iter()
        .cloned()
        .map(|t| {
            tokio::spawn(async move {
                let others: Vec<u32> = (1..=3).filter(|n| *n != t.node()).collect();
                for seq in 0..N {
                    for to in &others {
                        t.send(*to, Msg::new(seq)).unwrap();
                    }
                    if seq % 1000 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.await.unwrap();
    }
    for (i, inbox) in inboxes.iter().enumerate() {
        for from in (1..=3).filter(|n| *n != i as u32 + 1) {
            inbox.wait_for(from, N as usize, Duration::from_secs(10)).await;
            inbox.assert_exactly(from, N);
        }
    }
    for t in nodes {
        t.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_errors_are_values_and_leave_the_link_working() {
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let ib = Inbox::default();
    let mut cfg = config(1, vec![Peer::new(2, ab)]);
    cfg.max_frame_bytes = 1024;
    let a = Transport::start_with_listener(cfg, la, Inbox::default().deliver()).await.unwrap();
    let mut cfg = config(2, vec![Peer::new(1, aa)]);
    cfg.max_frame_bytes = 1024;
    let b = Transport::start_with_listener(cfg, lb, ib.deliver()).await.unwrap();

    assert_eq!(a.send(7, Msg::new(0)), Err(SendError::UnknownPeer(7)));
    assert_eq!(a.send(1, Msg::new(0)), Err(SendError::UnknownPeer(1)), "self is not a peer");
    let big = Msg { pad: vec![7; 2000], ..Msg::new(0) };
    assert!(matches!(a.send(2, big), Err(SendError::TooLarge { max: 1014, .. })));
    // The biggest message that fits goes through, alone in its frame.
    let mut fits = Msg { pad: vec![], ..Msg::new(0) };
    let overhead = postcard::to_allocvec(&fits).unwrap().len() + 1; // +1: the pad length needs 2 bytes
    fits.pad = vec![1; 1014 - overhead];
    assert_eq!(postcard::to_allocvec(&fits).unwrap().len(), 1014);
    a.send(2, fits).unwrap();
    for seq in 1..100 {
        a.send(2, Msg::new(seq)).unwrap();
    }
    ib.wait_for(1, 100, Duration::from_secs(5)).await;
    ib.assert_exactly(1, 100);

    let a2 = a.clone();
    a.shutdown().await;
    assert_eq!(a2.send(2, Msg::new(100)), Err(SendError::Closed));
    // Its listener is gone with it.
    assert!(tokio::net::TcpStream::connect(aa).await.is_err());
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_named_by_host_name_is_dialed_by_its_name() {
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let ib = Inbox::default();
    // `localhost` as a config file would say it: resolved at every dial.
    let named = causeway_transport::HostAddr::Name(format!("localhost:{}", ab.port()));
    assert!(named.resolve().unwrap().ip().is_loopback());
    let a = Transport::start_with_listener(config(1, vec![Peer::new(2, named)]), la, Inbox::default().deliver())
        .await
        .unwrap();
    let _b = Transport::start_with_listener(config(2, vec![Peer::new(1, aa)]), lb, ib.deliver()).await.unwrap();
    for seq in 0..100 {
        a.send(2, Msg::new(seq)).unwrap();
    }
    ib.wait_for(1, 100, Duration::from_secs(5)).await;
    ib.assert_exactly(1, 100);
    let unknown = causeway_transport::HostAddr::Name("no-such-host.invalid:7000".into());
    assert!(unknown.resolve().is_err());
}
