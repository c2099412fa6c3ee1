//! What one message between two processes costs on this machine: the floor
//! under every message a transaction sends (issue 17, item 5).
//!
//! ```sh
//! cargo run --release -p causeway-bench --example pingpong [-- --rounds N --size BYTES --repeat K]
//! ```
//!
//! The process re-executes itself as the echoer, connects to it over
//! loopback TCP (`TCP_NODELAY` on both ends) and sends one small message
//! (`--size`, default 32 bytes), waits for the same bytes back, and again,
//! `--rounds` times (default 100,000). Two ways of doing it, each run
//! `--repeat` times (default 3), alternating:
//!
//! * `blocking`: `std::net`, a thread that sleeps in `read` — two system
//!   calls per message (a `write`, a `read`), the least a process can do;
//! * `tokio`: a current-thread tokio runtime on each side, as a
//!   `causeway server --threads 1` runs — the reactor adds an `epoll_wait`,
//!   and a read that finds nothing yet, per message.
//!
//! Reported per round trip: wall time, and the CPU of both processes
//! (user + kernel, from `/proc` as the bench reads it:
//! [`causeway_bench::cpu`]), and per message (half a round trip). The
//! medians over the repeats are printed last.

use std::env;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Instant;

/// CPU seconds of this process so far, user and kernel (zero where there
/// is no `/proc`).
fn cpu_self() -> (f64, f64) {
    causeway_bench::cpu::this_process().map_or((0.0, 0.0), |t| (t.user_s, t.system_s))
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Blocking,
    Tokio,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Blocking => "blocking",
            Mode::Tokio => "tokio",
        }
    }

    fn parse(s: &str) -> Mode {
        if s == "tokio" {
            Mode::Tokio
        } else {
            Mode::Blocking
        }
    }
}

struct Settings {
    rounds: u64,
    size: usize,
    repeat: usize,
}

fn settings() -> Settings {
    let mut s = Settings { rounds: 100_000, size: 32, repeat: 3 };
    let args: Vec<String> = env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).and_then(|v| v.parse::<u64>().ok());
        match (args[i].as_str(), value) {
            ("--rounds", Some(n)) if n > 0 => s.rounds = n,
            ("--size", Some(n)) if (1..=65536).contains(&n) => s.size = n as usize,
            ("--repeat", Some(n)) if n > 0 => s.repeat = n as usize,
            ("--help" | "-h", _) => {
                println!("usage: pingpong [--rounds N (100000)] [--size BYTES 1..=65536 (32)] [--repeat K (3)]");
                std::process::exit(0);
            }
            (flag, _) => {
                eprintln!("pingpong: bad argument {flag:?} (or its value); see --help");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    s
}

fn main() {
    let args: Vec<String> = env::args().collect();
    if args.get(1).map(String::as_str) == Some("--echo") {
        echo(&args[2], args[3].parse().expect("size"), Mode::parse(&args[4]));
        return;
    }
    let s = settings();
    println!(
        "ping-pong over loopback TCP: {} rounds of {} bytes each way, {} repeats per mode, alternating",
        s.rounds, s.size, s.repeat
    );
    let mut results: Vec<(Mode, Measure)> = Vec::new();
    for _ in 0..s.repeat {
        for mode in [Mode::Blocking, Mode::Tokio] {
            let m = run(mode, s.rounds, s.size);
            println!(
                "  {:<8} {:>7.0} round trips/s  {:>5.1} µs wall  CPU per round trip {:>5.1} µs ({:>4.1} user + {:>4.1} kernel), per message {:>5.1} µs",
                mode.name(),
                1e6 / m.wall_us,
                m.wall_us,
                m.cpu_us(),
                m.user_us,
                m.kernel_us,
                m.cpu_us() / 2.0
            );
            results.push((mode, m));
        }
    }
    println!("medians (min–max):");
    for mode in [Mode::Blocking, Mode::Tokio] {
        let of = |f: fn(&Measure) -> f64| {
            let mut v: Vec<f64> = results.iter().filter(|(m, _)| *m == mode).map(|(_, x)| f(x)).collect();
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0], v[v.len() - 1])
        };
        let (wall, wmin, wmax) = of(|m| m.wall_us);
        let (cpu, cmin, cmax) = of(|m| m.cpu_us() / 2.0);
        println!(
            "  {:<8} {:.1} µs wall per round trip ({wmin:.1}–{wmax:.1}); CPU per message {cpu:.1} µs ({cmin:.1}–{cmax:.1}), both processes",
            mode.name(),
            wall
        );
    }
}

/// One mode's run: CPU of both processes per round trip, and wall time.
struct Measure {
    wall_us: f64,
    user_us: f64,
    kernel_us: f64,
}

impl Measure {
    fn cpu_us(&self) -> f64 {
        self.user_us + self.kernel_us
    }
}

fn run(mode: Mode, rounds: u64, size: usize) -> Measure {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local addr").to_string();
    let exe = env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .args(["--echo", &addr, &size.to_string(), mode.name()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the echoer");
    let (mut sock, _) = listener.accept().expect("accept the echoer");
    sock.set_nodelay(true).expect("nodelay");
    let msg = vec![7u8; size];
    let mut back = vec![0u8; size];
    // A few round trips to warm both sides up before measuring.
    for _ in 0..1000 {
        sock.write_all(&msg).expect("write");
        sock.read_exact(&mut back).expect("read");
    }
    let (u0, k0) = cpu_self();
    let start = Instant::now();
    match mode {
        Mode::Blocking => {
            for _ in 0..rounds {
                sock.write_all(&msg).expect("write");
                sock.read_exact(&mut back).expect("read");
            }
        }
        Mode::Tokio => {
            sock.set_nonblocking(true).expect("nonblocking");
            let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("runtime");
            sock = rt.block_on(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::from_std(sock).expect("tokio stream");
                for _ in 0..rounds {
                    s.write_all(&msg).await.expect("write");
                    s.read_exact(&mut back).await.expect("read");
                }
                s.into_std().expect("std stream")
            });
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let (u1, k1) = cpu_self();
    // Closing our end tells the echoer to report its CPU and exit.
    drop(sock);
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("echoer's stdout")).read_line(&mut line).expect("echoer's report");
    child.wait().expect("echoer exits");
    let mut theirs = line.split_whitespace().map(|v| v.parse::<f64>().unwrap_or(0.0));
    let (cu, ck) = (theirs.next().unwrap_or(0.0), theirs.next().unwrap_or(0.0));
    let per = 1e6 / rounds as f64;
    Measure { wall_us: wall * per, user_us: (u1 - u0 + cu) * per, kernel_us: (k1 - k0 + ck) * per }
}

/// The echoer: answers every message with the same bytes until the other
/// side closes, then prints the CPU it used since the connection opened.
fn echo(addr: &str, size: usize, mode: Mode) {
    let sock = TcpStream::connect(addr).expect("connect");
    sock.set_nodelay(true).expect("nodelay");
    let (u0, k0) = cpu_self();
    match mode {
        Mode::Blocking => {
            let mut sock = sock;
            let mut buf = vec![0u8; size];
            while sock.read_exact(&mut buf).is_ok() {
                sock.write_all(&buf).expect("write");
            }
        }
        Mode::Tokio => {
            sock.set_nonblocking(true).expect("nonblocking");
            let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("runtime");
            rt.block_on(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::from_std(sock).expect("tokio stream");
                let mut buf = vec![0u8; size];
                while s.read_exact(&mut buf).await.is_ok() {
                    s.write_all(&buf).await.expect("write");
                }
            });
        }
    }
    let (u1, k1) = cpu_self();
    println!("{} {}", u1 - u0, k1 - k0);
}
