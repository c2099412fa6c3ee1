//! A real network cut. Each DC's two `causeway server` processes run in a
//! network namespace of their own; the DCs reach each other only through a
//! bridge in a "WAN" namespace, and the test reaches each DC's client ports
//! through a link of their own. Under load, Ireland's WAN link is taken down
//! for 20 seconds — packets to and from it are dropped in silence, as on a
//! real cut — while its clients keep committing; then it is healed. Every DC
//! must converge and the history must pass the checker.
//!
//! It needs root and `ip` (iproute2) with network namespaces, veth and
//! bridges, so it is ignored by `cargo test`; `.ci/run` runs it where the
//! machine allows (`cargo test -p causeway --test binary network_cut:: -- --ignored`).

use crate::common;

use causeway_client::Client;
use causeway_history::check;
use common::six::{self, REGIONS};
use common::{metric, metrics_text, Servers};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The DC that is cut off.
const CUT: usize = 2;
const CUT_AFTER: Duration = Duration::from_secs(5);
const CUT_FOR: Duration = Duration::from_secs(20);

/// Runs `ip` with `args`; panics with its stderr if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("`ip` runs (iproute2)");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// The namespaces and links of the test; deleting the namespaces on drop
/// removes every link (a veth pair goes with either end).
struct Network {
    tag: String,
    /// The third octet of the client links' subnet, chosen per run so two
    /// runs on one machine do not clash in the root namespace.
    net: u32,
}

impl Network {
    fn wan(&self) -> String {
        format!("cw{}w", self.tag)
    }
    fn dc(&self, d: usize) -> String {
        format!("cw{}d{d}", self.tag)
    }
    /// The DC's address on the WAN (its peer links).
    fn wan_ip(d: usize) -> String {
        format!("10.215.0.{}", d + 1)
    }
    /// The DC's address on its client link, and the root side's.
    fn client_ip(&self, d: usize) -> (String, String) {
        (format!("10.216.{}.{}", self.net, 4 * d + 2), format!("10.216.{}.{}", self.net, 4 * d + 1))
    }
    /// The bridge port of DC `d` in the WAN namespace: down is the cut.
    fn wan_port(&self, d: usize) -> String {
        format!("w{d}")
    }

    fn build() -> Network {
        let pid = std::process::id();
        let net = Network { tag: format!("{}", pid % 100_000), net: 20 + pid % 200 };
        let wan = net.wan();
        ip(&["netns", "add", &wan]);
        ip(&["-n", &wan, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &wan, "link", "set", "br0", "up"]);
        for d in 0..REGIONS.len() {
            let ns = net.dc(d);
            ip(&["netns", "add", &ns]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            // The WAN link: one end in the DC, the other a bridge port.
            let port = net.wan_port(d);
            ip(&["-n", &ns, "link", "add", "wan", "type", "veth", "peer", "name", &port, "netns", &wan]);
            ip(&["-n", &wan, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &wan, "link", "set", &port, "up"]);
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", Network::wan_ip(d)), "dev", "wan"]);
            ip(&["-n", &ns, "link", "set", "wan", "up"]);
            // The client link, to the root namespace where the test runs.
            let (inside, outside) = net.client_ip(d);
            let root_end = format!("{ns}c");
            ip(&["-n", &ns, "link", "add", "clients", "type", "veth", "peer", "name", &root_end, "netns", "1"]);
            ip(&["-n", &ns, "addr", "add", &format!("{inside}/30"), "dev", "clients"]);
            ip(&["-n", &ns, "link", "set", "clients", "up"]);
            ip(&["addr", "add", &format!("{outside}/30"), "dev", &root_end]);
            ip(&["link", "set", &root_end, "up"]);
        }
        net
    }

    fn set_wan(&self, d: usize, up: bool) {
        ip(&["-n", &self.wan(), "link", "set", &self.wan_port(d), if up { "up" } else { "down" }]);
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for d in 0..REGIONS.len() {
            let _ = Command::new("ip").args(["netns", "del", &self.dc(d)]).status();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.wan()]).status();
    }
}

/// Transactions committed by the coordinators of DC `dc`.
async fn committed_in(nodes: &[six::Node], dc: usize) -> f64 {
    let mut sum = 0.0;
    for n in nodes.iter().filter(|n| n.dc == dc) {
        sum += metric(&metrics_text(n.metrics).await, "causeway_transactions_committed_total");
    }
    sum
}

async fn read_key(addr: SocketAddr, key: &str) -> Option<String> {
    let mut c = Client::connect(addr).await.expect("a client connects");
    c.read_only(&[key]).await.expect("a read").pop().flatten().map(|v| String::from_utf8_lossy(&v).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; .ci/run runs it where the machine allows"]
async fn a_dc_cut_off_at_the_network_keeps_committing_and_converges_after_the_heal() {
    let net = Network::build();
    let dir = std::env::temp_dir().join(format!("causeway-network-cut-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Peers on the WAN addresses, clients and metrics on the client links.
    let addrs = |d: usize, p: usize| {
        let (wan, clients) = (Network::wan_ip(d), net.client_ip(d).0);
        let at = |ip: &str, port: usize| -> SocketAddr { format!("{ip}:{port}").parse().unwrap() };
        (at(&wan, 7000 + p), at(&clients, 7100 + p), at(&clients, 9100 + p))
    };
    let (config, nodes) = six::write_config(&dir, "cut", "wren", "", addrs, true);
    let mut servers = Servers(Vec::new());
    for n in &nodes {
        let log = std::fs::File::create(dir.join(format!("{}.log", n.name))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &net.dc(n.dc), env!("CARGO_BIN_EXE_causeway")])
            .args(["server", "--config", config.to_str().unwrap(), "--node", &n.name])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("a server starts");
        servers.0.push(child);
    }
    for n in &nodes {
        six::wait_serving(n, Duration::from_secs(30), || {
            for c in &mut servers.0 {
                assert!(c.try_wait().unwrap().is_none(), "a server exited early (see {})", dir.display());
            }
        })
        .await;
    }

    let started = Instant::now();
    let run = six::start_load(&nodes, CUT_AFTER + CUT_FOR + Duration::from_secs(5), 2, 5);

    tokio::time::sleep(CUT_AFTER).await;
    let cut_at = Instant::now();
    net.set_wan(CUT, false);
    let before = committed_in(&nodes, CUT).await;
    // A write made in the cut DC during the cut: no other DC may see it
    // before the heal — the cut is real — and every one must after.
    let (cut_client, far_client) = (nodes[2 * CUT].client, nodes[0].client);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut writer = Client::connect(cut_client).await.unwrap();
    writer.begin().await.unwrap();
    writer.write("cut-probe", "written in the cut DC").await.unwrap();
    writer.commit().await.expect("the cut DC commits on its own");
    while cut_at.elapsed() < CUT_FOR - Duration::from_secs(1) {
        assert_eq!(read_key(far_client, "cut-probe").await, None, "a write crossed the cut");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let during = committed_in(&nodes, CUT).await - before;
    tokio::time::sleep(CUT_FOR.saturating_sub(cut_at.elapsed())).await;
    net.set_wan(CUT, true);
    let healed_at = Instant::now();
    assert!(during > 100.0, "the cut DC's clients committed only {during} transactions during the cut");

    let seen = loop {
        if read_key(far_client, "cut-probe").await.is_some() {
            break healed_at.elapsed();
        }
        assert!(healed_at.elapsed() < Duration::from_secs(30), "the cut DC's write never arrived after the heal");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    let report = run.await.unwrap().expect("the load runs");
    assert!(report.errors.is_empty(), "client errors: {:?}", report.errors);
    // No client lost its server: outages are no longer errors, so say so.
    let outages = (report.unknown, report.unavailable, report.reconnects);
    assert_eq!(outages, (0, 0, 0), "(unknown outcomes, unavailable, reconnects)");
    let history = six::history(report.records, &nodes, "load-", Duration::from_secs(60)).await;
    let finals = &history.finals;
    assert!(finals.windows(2).all(|w| w[0].state == w[1].state), "the DCs did not converge after the heal");
    let verdict = check(&history);
    assert!(verdict.is_tcc(), "{verdict}");
    eprintln!(
        "network cut: {} transactions committed in {:.0?} ({during} in the cut DC during the {CUT_FOR:?} cut); \
         the cut DC's write seen elsewhere {seen:.1?} after the heal; verdict: TCC",
        report.committed,
        started.elapsed()
    );
}
