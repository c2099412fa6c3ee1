//! FIFO and exactly-once on healthy links, byte statistics, send errors.

use crate::common;

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
    // The backlog's count of bytes neither ran below zero nor shed a
    // healthy link (acks racing the sends that count them).
    assert_eq!(sa.backlogs_shed, 0, "{sa:?}");
    eventually("the backlog emptied", Duration::from_secs(5), || a.stats().peer(2).unwrap().backlog_bytes == 0).await;

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
    assert!(matches!(a.send(2, big), Err(SendError::TooLarge { max: 1004, .. })));
    // The biggest message that fits goes through, alone in its frame.
    let mut fits = Msg { pad: vec![], ..Msg::new(0) };
    let overhead = postcard::to_allocvec(&fits).unwrap().len() + 1; // +1: the pad length needs 2 bytes
    fits.pad = vec![1; 1004 - overhead];
    assert_eq!(postcard::to_allocvec(&fits).unwrap().len(), 1004);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_message_holds_its_link_until_admitted_and_nothing_is_lost() {
    use causeway_transport::Inlet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const N: u64 = 1_000;
    const HELD: u64 = 500;
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let (ia, ib) = (Inbox::default(), Inbox::default());
    let open = Arc::new(AtomicBool::new(false));
    let gate = open.clone();
    let inlet = Inlet {
        deliver: ib.deliver(),
        admit: Some(Arc::new(move |_, m: &Msg| {
            (m.seq == HELD && !gate.load(Ordering::SeqCst)).then_some(Duration::from_millis(20))
        })),
        on_gap: None,
    };
    let a = Transport::start_with_listener(config(1, vec![Peer::new(2, ab)]), la, ia.deliver()).await.unwrap();
    let b = Transport::start_with_listener(config(2, vec![Peer::new(1, aa)]), lb, inlet).await.unwrap();
    for seq in 0..N {
        a.send(2, Msg::new(seq)).unwrap();
    }
    ib.wait_for(1, HELD as usize, Duration::from_secs(10)).await;
    eventually("held more than once", Duration::from_secs(5), || b.stats().peer(1).unwrap().held >= 3).await;
    assert_eq!(ib.count(1), HELD as usize, "nothing behind the held message is delivered");
    // What came before it is acknowledged; it and what follows are not.
    eventually("acked up to it", Duration::from_secs(5), || a.stats().peer(2).unwrap().unacked == N - HELD).await;
    // A broken connection changes nothing: the link resumes at the held message.
    a.drop_connections();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(ib.count(1), HELD as usize);

    open.store(true, Ordering::SeqCst);
    ib.wait_for(1, N as usize, Duration::from_secs(10)).await;
    ib.assert_exactly(1, N);
    assert_eq!(a.stats().protocol_errors + b.stats().protocol_errors, 0);
    a.shutdown().await;
    b.shutdown().await;
}

/// A peer that takes nothing (its link held): the sender's backlog grows
/// to its bound, is shed, and the link goes on past the gap — which the
/// receiver hears of before anything sent after it; nothing is delivered
/// twice and memory stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_past_its_bound_is_shed_and_the_receiver_told_of_the_gap() {
    use causeway_transport::Inlet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    const MAX: usize = 256 << 10;
    let ((la, aa), (lb, ab)) = (listener(), listener());
    // What b saw, in order: a message's number, or a gap (u64::MAX).
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let stuck = Arc::new(AtomicBool::new(true));
    let (on_msg, on_gap, gate) = (seen.clone(), seen.clone(), stuck.clone());
    let inlet = Inlet {
        deliver: Arc::new(move |_, m: Msg| on_msg.lock().unwrap().push(m.seq)),
        // Message 100 and all behind it wait while `stuck`.
        admit: Some(Arc::new(move |_, m: &Msg| {
            (m.seq == 100 && gate.load(Ordering::SeqCst)).then_some(Duration::from_millis(10))
        })),
        on_gap: Some(Arc::new(move |_| on_gap.lock().unwrap().push(u64::MAX))),
    };
    let mut ca = config(1, vec![Peer::new(2, ab)]);
    ca.max_frame_bytes = 64 << 10;
    ca.max_backlog_bytes = MAX;
    // The sender is told of each gap it makes too.
    let sender_gaps = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = sender_gaps.clone();
    let a_inlet = Inlet {
        deliver: Inbox::default().deliver(),
        admit: None,
        on_gap: Some(Arc::new(move |peer| {
            assert_eq!(peer, 2, "the gap is to b");
            counted.fetch_add(1, Ordering::SeqCst);
        })),
    };
    let a = Transport::start_with_listener(ca, la, a_inlet).await.unwrap();
    let b = Transport::start_with_listener(config(2, vec![Peer::new(1, aa)]), lb, inlet).await.unwrap();
    let msg = |seq| Msg { seq, sent: 0, pad: vec![7; 1000] };
    for seq in 0..100 {
        a.send(2, msg(seq)).unwrap();
    }
    eventually("the first hundred", Duration::from_secs(10), || seen.lock().unwrap().len() == 100).await;
    // Some 2 MB more, held behind message 100: shed on the way, several times.
    let mut peak = 0;
    for seq in 100..2_100 {
        a.send(2, msg(seq)).unwrap();
        peak = peak.max(a.stats().peer(2).unwrap().backlog_bytes);
        if seq % 200 == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    eventually("a shed", Duration::from_secs(10), || a.stats().peer(2).unwrap().backlogs_shed > 0).await;
    // The link's task sheds as soon as it runs: the sends of that moment (a
    // burst of 200 here, without a yield) may take the backlog past the bound.
    assert!(peak < (MAX + 200 * 1024) as u64, "the backlog reached {peak} bytes");
    stuck.store(false, Ordering::SeqCst);
    // Then the link is well again.
    for seq in 2_100..2_200 {
        a.send(2, msg(seq)).unwrap();
    }
    eventually("the last message", Duration::from_secs(10), || seen.lock().unwrap().last() == Some(&2_199)).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(&seen[..100], &(0..100).collect::<Vec<_>>()[..], "what came before the gap, in order");
    let gap = seen.iter().position(|&s| s == u64::MAX).expect("the receiver was told of the gap");
    assert_eq!(gap, 100, "told before anything sent after it");
    let after: Vec<u64> = seen[gap + 1..].iter().copied().filter(|&s| s != u64::MAX).collect();
    assert!(after.windows(2).all(|w| w[0] < w[1]), "in order, once each: {after:?}");
    assert!(after.first().is_some_and(|&s| s > 100), "the held message went with the backlog");
    let s = a.stats().peer(2).unwrap().clone();
    assert_eq!(100 + after.len() as u64 + s.msgs_shed, 2_200, "every message was delivered or shed: {s:?}");
    assert_eq!(sender_gaps.load(Ordering::SeqCst), s.backlogs_shed, "the sender heard of every shed");
    eventually("the backlog emptied", Duration::from_secs(5), || a.stats().peer(2).unwrap().backlog_bytes == 0).await;
    a.shutdown().await;
    b.shutdown().await;
}

/// When both nodes send, each one's acknowledgements ride on its own
/// batches to the other: almost none needs a write of its own, and
/// everything is still acknowledged. Once one side falls quiet, its acks go
/// alone again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_ride_on_traffic_the_other_way() {
    const ROUNDS: u64 = 600;
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let (ia, ib) = (Inbox::default(), Inbox::default());
    // An ack of its own after 20 ms without one: traffic goes both ways
    // every millisecond, for 600 ms or more, and carries them all.
    let slow_acks = |mut cfg: causeway_transport::TransportConfig| {
        cfg.ack_interval = Duration::from_millis(20);
        cfg
    };
    let a =
        Transport::start_with_listener(slow_acks(config(1, vec![Peer::new(2, ab)])), la, ia.deliver()).await.unwrap();
    let b =
        Transport::start_with_listener(slow_acks(config(2, vec![Peer::new(1, aa)])), lb, ib.deliver()).await.unwrap();
    for seq in 0..ROUNDS {
        a.send(2, Msg::new(seq)).unwrap();
        b.send(1, Msg::new(seq)).unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    ib.wait_for(1, ROUNDS as usize, Duration::from_secs(10)).await;
    ia.wait_for(2, ROUNDS as usize, Duration::from_secs(10)).await;
    ia.assert_exactly(2, ROUNDS);
    ib.assert_exactly(1, ROUNDS);
    eventually("all acked both ways", Duration::from_secs(5), || {
        a.stats().peer(2).unwrap().unacked == 0 && b.stats().peer(1).unwrap().unacked == 0
    })
    .await;
    // Once the traffic stops, an ack of its own confirms what the last
    // batches carried (they could have been lost with their connection),
    // and wakes the writer to forget what it kept for a resend.
    eventually("the backlogs emptied", Duration::from_secs(5), || {
        a.stats().peer(2).unwrap().backlog_bytes == 0 && b.stats().peer(1).unwrap().backlog_bytes == 0
    })
    .await;
    for (t, peer) in [(&a, 2), (&b, 1)] {
        let s = t.stats().peer(peer).unwrap().clone();
        assert!(s.acks_sent > 0, "nothing confirmed the carried acks: {s:?}");
        assert!(s.acks_carried > ROUNDS / 4, "few acks rode along: {s:?}");
        // One per interval would be 30 or more; a few for the end of the
        // traffic and for stalls of the machine.
        assert!(s.acks_sent <= ROUNDS / 40, "acks still went alone: {s:?}");
    }
    // Now only A sends: B's acks have nothing to ride on, and go alone.
    let alone = b.stats().peer(1).unwrap().acks_sent;
    for seq in ROUNDS..ROUNDS + 10 {
        a.send(2, Msg::new(seq)).unwrap();
    }
    ib.wait_for(1, ROUNDS as usize + 10, Duration::from_secs(10)).await;
    eventually("acked without traffic back", Duration::from_secs(5), || a.stats().peer(2).unwrap().unacked == 0).await;
    assert!(b.stats().peer(1).unwrap().acks_sent > alone);
    assert_eq!(a.stats().protocol_errors + b.stats().protocol_errors, 0);
    a.shutdown().await;
    b.shutdown().await;
}
