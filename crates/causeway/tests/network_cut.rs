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
//! machine allows (`cargo test -p causeway --test network_cut -- --ignored`).

mod common;

use causeway_client::Client;
use causeway_history::{check, History};
use causeway_load::{settle, LoadConfig};
use causeway_protocol::{DcId, Topology};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use common::Servers;
use common::{metric, metrics_text};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const REGIONS: [&str; 3] = ["virginia", "oregon", "ireland"];
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

struct Node {
    name: String,
    dc: usize,
    client: SocketAddr,
    metrics: SocketAddr,
}

fn write_config(net: &Network, dir: &std::path::Path) -> (PathBuf, Vec<Node>) {
    let mut text = String::from(
        "name = \"cut\"\nprotocol = \"wren\"\npartitions = 2\ntoken_key = \"a shared secret for tests\"\n\n\
         [wan]\nemulate = true\n\n",
    );
    for r in REGIONS {
        text += &format!("[[dc]]\nname = \"{r}\"\n\n");
    }
    let mut nodes = Vec::new();
    for (d, r) in REGIONS.iter().enumerate() {
        let (client_ip, _) = net.client_ip(d);
        for p in 0..2u16 {
            let name = format!("{r}-{p}");
            let (peer, client, metrics) = (7000 + p, 7100 + p, 9100 + p);
            text += &format!(
                "[[node]]\nname = \"{name}\"\ndc = \"{r}\"\npartitions = [{p}]\npeer = \"{}:{peer}\"\n\
                 client = \"{client_ip}:{client}\"\nmetrics = \"{client_ip}:{metrics}\"\ndata_dir = \"{name}\"\n\n",
                Network::wan_ip(d)
            );
            nodes.push(Node {
                name,
                dc: d,
                client: format!("{client_ip}:{client}").parse().unwrap(),
                metrics: format!("{client_ip}:{metrics}").parse().unwrap(),
            });
        }
    }
    let config = dir.join("cluster.toml");
    std::fs::write(&config, text).unwrap();
    (config, nodes)
}

/// Transactions committed by the coordinators of DC `dc`.
async fn committed_in(nodes: &[Node], dc: usize) -> f64 {
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
    let (config, nodes) = write_config(&net, &dir);
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
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in &nodes {
        while Client::connect(n.client).await.is_err() {
            for c in &mut servers.0 {
                assert!(c.try_wait().unwrap().is_none(), "a server exited early (see {})", dir.display());
            }
            assert!(Instant::now() < deadline, "node {} did not come up", n.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    let endpoints: Vec<_> = nodes.iter().map(|n| (DcId(n.dc as u16), n.client)).collect();
    let load = LoadConfig {
        endpoints: endpoints.clone(),
        clients_per_dc: 4,
        warmup: Duration::ZERO,
        duration: CUT_AFTER + CUT_FOR + Duration::from_secs(5),
        workload: WorkloadKind::Random(WorkloadConfig {
            reads_per_txn: 4,
            writes_per_txn: 2,
            partitions_per_txn: 2,
            keys_per_partition: 200,
            ..WorkloadConfig::default()
        }),
        seed: 5,
        run_id: String::new(),
        key_prefix: "load-".into(),
        record: true,
        value_size: None,
        phases: None,
    };
    let topology = Arc::new(Topology::full(3, 2).unwrap());
    let started = Instant::now();
    let run = tokio::spawn(causeway_load::run(load, topology, None, |_| {}));

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
    let finals_at: Vec<_> = endpoints.iter().map(|(d, a)| (d.0, *a)).collect();
    let finals = settle::final_states(&finals_at, "load-", Duration::from_secs(60)).await.expect("dumps");
    assert_eq!(finals.len(), 3, "one final line per DC");
    assert!(finals.iter().all(|f| !f.partial), "the two nodes of each DC cover both partitions");
    assert!(finals.windows(2).all(|w| w[0].state == w[1].state), "the DCs did not converge after the heal");
    let history = History { txns: report.records, finals };
    let verdict = check(&history);
    assert!(verdict.is_tcc(), "{verdict}");
    eprintln!(
        "network cut: {} transactions committed in {:.0?} ({during} in the cut DC during the {CUT_FOR:?} cut); \
         the cut DC's write seen elsewhere {seen:.1?} after the heal; verdict: TCC",
        report.committed,
        started.elapsed()
    );
}
