//! Peak throughput of the transport between two processes on loopback.
//!
//! ```sh
//! cargo run --release -p causeway-transport --example throughput [-- MESSAGES]
//! ```
//!
//! The process re-executes itself as the receiver, then streams MESSAGES
//! (default 2,000,000) small messages (a 30-byte payload and a sequence
//! number) to it as fast as `send` accepts them. The receiver checks FIFO
//! order and answers `Done` when it has them all. Reported: messages per
//! second from the first `send` to the receiver's last delivery, and the
//! receiver's own rate from its first delivery to its last.

use std::env;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use causeway_transport::{Peer, Transport, TransportConfig, WireMessage};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

const SENDER: u32 = 1;
const RECEIVER: u32 = 2;
const CLUSTER: &str = "throughput";

#[derive(Serialize, Deserialize)]
enum Bench {
    Data {
        seq: u64,
        payload: [u8; 30],
    },
    /// The receiver's answer: how many arrived in order, and its first-to-last time.
    Done {
        in_order: u64,
        nanos: u64,
    },
}

impl WireMessage for Bench {}

#[tokio::main]
async fn main() {
    let args: Vec<String> = env::args().collect();
    if args.get(1).map(String::as_str) == Some("--receiver") {
        receiver(args[2].parse().expect("sender address"), args[3].parse().expect("message count")).await;
    } else {
        let n = args.get(1).map_or(2_000_000, |a| a.parse().expect("usage: throughput [MESSAGES]"));
        sender(n).await;
    }
}

fn config(node: u32, peer: u32, peer_addr: SocketAddr) -> TransportConfig {
    TransportConfig::new(node, CLUSTER, "127.0.0.1:0".parse().unwrap(), vec![Peer::new(peer, peer_addr)])
}

async fn sender(n: u64) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let me = listener.local_addr().unwrap();
    let mut child = Command::new(env::current_exe().unwrap())
        .args(["--receiver", &me.to_string(), &n.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the receiver process");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let peer: SocketAddr = line.trim().strip_prefix("LISTEN ").expect("receiver address").parse().unwrap();

    let done = Arc::new(Notify::new());
    let answer = Arc::new(Mutex::new(None));
    let deliver: causeway_transport::Deliver<Bench> = {
        let (done, answer) = (done.clone(), answer.clone());
        Arc::new(move |_, msg: Bench| {
            if let Bench::Done { in_order, nanos } = msg {
                *answer.lock().unwrap() = Some((in_order, nanos));
                done.notify_one();
            }
        })
    };
    let t = Transport::start_with_listener(config(SENDER, RECEIVER, peer), listener, deliver).await.unwrap();
    while !t.stats().peer(RECEIVER).unwrap().connected {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    let start = Instant::now();
    let payload = [0x5a; 30];
    for seq in 0..n {
        t.send(RECEIVER, Bench::Data { seq, payload }).unwrap();
    }
    let queued = start.elapsed();
    done.notified().await;
    let total = start.elapsed();
    let (in_order, nanos) = answer.lock().unwrap().unwrap();
    let s = t.stats().peer(RECEIVER).unwrap().clone();
    child.wait().unwrap();
    t.shutdown().await;

    assert_eq!(in_order, n, "receiver saw messages out of order or missing");
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    let receiver = Duration::from_nanos(nanos);
    println!(
        "{n} messages of {} bytes encoded ({} frames, {:.0} messages/frame)",
        s.bytes_sent as f64 / n as f64,
        s.frames_sent,
        n as f64 / s.frames_sent as f64
    );
    println!("queued by send:      {:>9.0} msgs/s ({queued:.2?})", rate(queued));
    println!(
        "end to end:          {:>9.0} msgs/s, {:.1} MB/s on the wire ({total:.2?})",
        rate(total),
        s.wire_bytes_sent as f64 / total.as_secs_f64() / 1e6
    );
    println!("receiver first→last: {:>9.0} msgs/s ({receiver:.2?})", rate(receiver));
}

async fn receiver(sender_addr: SocketAddr, n: u64) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("LISTEN {}", listener.local_addr().unwrap());
    let (received, in_order) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let first = Arc::new(Mutex::new(None::<Instant>));
    let all_in = Arc::new(Notify::new());
    let deliver: causeway_transport::Deliver<Bench> = {
        let (received, in_order, first, all_in) = (received.clone(), in_order.clone(), first.clone(), all_in.clone());
        Arc::new(move |_, msg: Bench| {
            if let Bench::Data { seq, .. } = msg {
                let count = received.fetch_add(1, Relaxed);
                if count == 0 {
                    *first.lock().unwrap() = Some(Instant::now());
                }
                if seq == count {
                    in_order.fetch_add(1, Relaxed);
                }
                if count + 1 == n {
                    all_in.notify_one();
                }
            }
        })
    };
    let t = Transport::start_with_listener(config(RECEIVER, SENDER, sender_addr), listener, deliver).await.unwrap();
    all_in.notified().await;
    let nanos = first.lock().unwrap().unwrap().elapsed().as_nanos() as u64;
    t.send(SENDER, Bench::Done { in_order: in_order.load(Relaxed), nanos }).unwrap();
    while t.stats().peer(SENDER).unwrap().unacked > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    t.shutdown().await;
}
