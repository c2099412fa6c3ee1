//! WAN emulation: delays are applied, jitter never reorders.

use crate::common;

use std::time::{Duration, Instant};

use causeway_transport::{DelayLine, DelaySpec, Peer, Transport};
use common::{config, listener, Inbox, Msg};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_way_delay_holds_every_message_on_that_link_only() {
    const N: u64 = 200;
    let one_way = Duration::from_millis(50);
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let (ia, ib) = (Inbox::default(), Inbox::default());
    let delay = DelaySpec::new(one_way, Duration::ZERO);
    let a = Transport::start_with_listener(config(1, vec![Peer::new(2, ab).with_delay(delay)]), la, ia.deliver())
        .await
        .unwrap();
    let b = Transport::start_with_listener(config(2, vec![Peer::new(1, aa)]), lb, ib.deliver()).await.unwrap();
    for seq in 0..N {
        a.send(2, Msg::new(seq)).unwrap();
        b.send(1, Msg::new(seq)).unwrap();
        if seq % 20 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    ib.wait_for(1, N as usize, Duration::from_secs(5)).await;
    ia.wait_for(2, N as usize, Duration::from_secs(5)).await;
    ib.assert_exactly(1, N);
    ia.assert_exactly(2, N);
    let delayed = ib.from(1).latencies;
    let min = delayed.iter().min().unwrap();
    assert!(*min >= one_way, "a message crossed the delayed link in {min:?}");
    let direct = ia.from(2).latencies;
    let min = direct.iter().min().unwrap();
    assert!(*min < one_way, "the link without delay took at least {min:?}");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jitter_stretches_delays_but_keeps_fifo() {
    const N: u64 = 5_000;
    let spec = DelaySpec::new(Duration::from_millis(20), Duration::from_millis(30));
    let ((la, aa), (lb, ab)) = (listener(), listener());
    let ib = Inbox::default();
    let a = Transport::start_with_listener(
        config(1, vec![Peer::new(2, ab).with_delay(spec)]),
        la,
        Inbox::default().deliver(),
    )
    .await
    .unwrap();
    let b = Transport::start_with_listener(config(2, vec![Peer::new(1, aa)]), lb, ib.deliver()).await.unwrap();
    for seq in 0..N {
        a.send(2, Msg::new(seq)).unwrap();
        if seq % 100 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    ib.wait_for(1, N as usize, Duration::from_secs(5)).await;
    ib.assert_exactly(1, N);
    let lat = ib.from(1).latencies;
    let (min, max) = (lat.iter().min().unwrap(), lat.iter().max().unwrap());
    assert!(*min >= spec.one_way, "{min:?}");
    assert!(*max > spec.one_way + Duration::from_millis(5), "jitter never drawn: max {max:?}");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_line_alone_forwards_in_order_after_the_delay() {
    let spec = DelaySpec::from_rtt(Duration::from_millis(60), Duration::from_millis(10));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let line = DelayLine::new(spec, move |item: (u32, Instant)| {
        let _ = tx.send((item.0, item.1.elapsed()));
    });
    for i in 0..1000 {
        line.push((i, Instant::now()));
        if i % 100 == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    for i in 0..1000 {
        let (got, waited) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        assert_eq!(got, i);
        assert!(waited >= Duration::from_millis(30), "item {i} waited {waited:?}");
    }
    // Dropping the line discards what it still holds.
    line.push((1000, Instant::now()));
    drop(line);
    assert!(tokio::time::timeout(Duration::from_millis(100), rx.recv()).await.unwrap().is_none());
}
