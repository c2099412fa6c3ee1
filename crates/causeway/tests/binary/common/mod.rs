//! What the tests that start `causeway server` processes share.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the servers however the test ends.
pub struct Servers(pub Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Distinct free ports, for servers started after this returns. Taken
/// below the kernel's ephemeral range (32768 and up): a port asked of the
/// kernel (`bind` to port 0, as `causeway bench --processes` does for its
/// servers, running beside these tests) or given to an outgoing connection
/// could be the one just picked here, before our server binds it — the
/// server then failed, and the test connected to someone else's. Each test
/// process walks its own stretch of 20000..32000 (by its pid) and never
/// hands out a port twice; ports found busy are skipped.
pub fn free_ports(n: usize) -> Vec<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(2_654_435_761) % 12_000;
    let mut ports = Vec::with_capacity(n);
    while ports.len() < n {
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(i < 12_000, "no free port left below the ephemeral range");
        let port = 20_000 + ((start + i) % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    ports
}

/// A Cure cluster of one DC and two nodes on `ports` (peer, client, peer,
/// client).
pub fn cluster_config(ports: &[u16]) -> String {
    cluster_config_keeping(ports, None)
}

/// [`cluster_config`], each node keeping its data in `data/NODE` if given.
pub fn cluster_config_keeping(ports: &[u16], data: Option<&Path>) -> String {
    let mut text =
        "name = \"t\"\nprotocol = \"cure\"\npartitions = 2\ntls = \"off\"\n[auth]\nanonymous = \"admin\"\n[[dc]]\nname = \"a\"\n".to_string();
    for p in 0..2 {
        text += &format!(
            "[[node]]\nname = \"a{p}\"\ndc = \"a\"\npartitions = [{p}]\npeer = \"127.0.0.1:{}\"\nclient = \"127.0.0.1:{}\"\n",
            ports[2 * p],
            ports[2 * p + 1]
        );
        if let Some(data) = data {
            text += &format!("data_dir = {:?}\n", data.join(format!("a{p}")).display().to_string());
        }
    }
    text
}

/// Starts `causeway server` as `node` of the cluster of `config`.
pub fn server(config: &Path, node: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["server", "--config", config.to_str().unwrap(), "--node", node])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Starts the cluster of `config`; it stops when the guard is dropped.
pub fn running_cluster(config: &Path, ports: &[u16]) -> Servers {
    let servers = Servers(vec![server(config, "a0"), server(config, "a1")]);
    for port in [ports[1], ports[3]] {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "server on {port} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    servers
}

/// The text of a server's metrics endpoint.
pub async fn metrics_text(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body
}

/// The sum of the samples of metric `name` (every label set).
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines().filter(|l| l.starts_with(name)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}
pub mod cluster;
pub mod six;
