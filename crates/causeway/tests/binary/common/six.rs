//! The six-process cluster of the process tests: 3 DCs (Virginia, Oregon,
//! Ireland) × 2 partitions of Wren, one `causeway server` per partition
//! replica, WAN latency emulated — its configuration, waiting for it to
//! serve, and its history once the load is over.

use super::free_ports;
use causeway_client::Client;
use causeway_history::{History, TxnRecord};
use causeway_load::{settle, LoadConfig, LoadReport};
use causeway_protocol::{DcId, Topology};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const REGIONS: [&str; 3] = ["virginia", "oregon", "ireland"];

/// A node as the tests reach it.
pub struct Node {
    pub name: String,
    pub dc: usize,
    pub client: SocketAddr,
    pub metrics: SocketAddr,
}

/// Where a node listens: peer, client and metrics addresses.
pub type Addrs = (SocketAddr, SocketAddr, SocketAddr);

/// Addresses on 127.0.0.1, on free ports, for the node of DC `d` and
/// partition `p`.
pub fn loopback() -> impl Fn(usize, usize) -> Addrs {
    let ports = free_ports(18);
    move |d, p| {
        let i = 3 * (2 * d + p);
        let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        (at(ports[i]), at(ports[i + 1]), at(ports[i + 2]))
    }
}

/// Writes `dir/cluster.toml`: cluster `name` running `protocol`, then
/// `extra` (more top-level keys and tables), then the DCs and the nodes at
/// `addrs`; with `data_dirs`, each node keeps its data under
/// `dir/data/NAME`.
pub fn write_config(
    dir: &Path,
    name: &str,
    protocol: &str,
    extra: &str,
    addrs: impl Fn(usize, usize) -> Addrs,
    data_dirs: bool,
) -> (PathBuf, Vec<Node>) {
    write_config_placed(dir, name, protocol, extra, addrs, data_dirs, |_, _| true)
}

/// [`write_config`] with only the nodes of the replicas `holds(dc,
/// partition)` admits: partial replication.
pub fn write_config_placed(
    dir: &Path,
    name: &str,
    protocol: &str,
    extra: &str,
    addrs: impl Fn(usize, usize) -> Addrs,
    data_dirs: bool,
    holds: impl Fn(usize, usize) -> bool,
) -> (PathBuf, Vec<Node>) {
    let mut text = format!(
        "name = \"{name}\"\nprotocol = \"{protocol}\"\npartitions = 2\ntoken_key = \"a shared secret for tests\"\n\n\
         {extra}\n[tls]\ndir = \"certs\"\nclients = false\n\n[auth]\nanonymous = \"admin\"\n\n[wan]\nemulate = true\n\n"
    );
    // A DC none of whose replicas are admitted is left out (PrompTCC runs
    // in one DC).
    for (d, r) in REGIONS.iter().enumerate().filter(|&(d, _)| (0..2).any(|p| holds(d, p))) {
        let _ = d;
        text += &format!("[[dc]]\nname = \"{r}\"\n\n");
    }
    let mut nodes = Vec::new();
    for (d, r) in REGIONS.iter().enumerate() {
        for p in (0..2).filter(|&p| holds(d, p)) {
            let name = format!("{r}-{p}");
            let (peer, client, metrics) = addrs(d, p);
            text += &format!(
                "[[node]]\nname = \"{name}\"\ndc = \"{r}\"\npartitions = [{p}]\npeer = \"{peer}\"\n\
                 client = \"{client}\"\nmetrics = \"{metrics}\"\n"
            );
            if data_dirs {
                text += &format!("data_dir = \"data/{name}\"\n");
            }
            text += "\n";
            nodes.push(Node { name, dc: d, client, metrics });
        }
    }
    let config = dir.join("cluster.toml");
    std::fs::write(&config, text).unwrap();
    // The nodes link by mutual TLS, with certificates as an operator makes them.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["certs", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "causeway certs: {}", String::from_utf8_lossy(&out.stderr));
    (config, nodes)
}

/// The transactions the process tests' load runs: 4 reads and `writes`
/// writes over both partitions of 200 keys each, zipf 0.99.
pub fn workload(writes: u32) -> WorkloadConfig {
    WorkloadConfig {
        reads_per_txn: 4,
        writes_per_txn: writes,
        partitions_per_txn: 2,
        keys_per_partition: 200,
        ..WorkloadConfig::default()
    }
}

/// Starts the load the process tests put on the cluster: 4 clients per
/// DC for `duration`, running [`workload`]`(writes)` (keys under `load-`),
/// every transaction recorded.
pub fn start_load(
    nodes: &[Node],
    duration: Duration,
    writes: u32,
    seed: u64,
) -> tokio::task::JoinHandle<Result<LoadReport, causeway_client::Error>> {
    start_load_named(nodes, duration, writes, seed, "")
}

/// [`start_load`] with its sessions and keys named after `run` (keys under
/// `load-RUN-`): two runs write keys of their own.
pub fn start_load_named(
    nodes: &[Node],
    duration: Duration,
    writes: u32,
    seed: u64,
    run: &str,
) -> tokio::task::JoinHandle<Result<LoadReport, causeway_client::Error>> {
    start_load_sized(nodes, duration, writes, seed, run, None)
}

/// [`start_load_named`] with written values padded to `value_size` bytes.
pub fn start_load_sized(
    nodes: &[Node],
    duration: Duration,
    writes: u32,
    seed: u64,
    run: &str,
    value_size: Option<usize>,
) -> tokio::task::JoinHandle<Result<LoadReport, causeway_client::Error>> {
    start_load_of(nodes, duration, workload(writes), seed, run, value_size)
}

/// The load of [`start_load_sized`] running `transactions` instead.
pub fn start_load_of(
    nodes: &[Node],
    duration: Duration,
    transactions: WorkloadConfig,
    seed: u64,
    run: &str,
    value_size: Option<usize>,
) -> tokio::task::JoinHandle<Result<LoadReport, causeway_client::Error>> {
    let load = LoadConfig {
        endpoints: nodes.iter().map(|n| (DcId(n.dc as u16), n.client)).collect(),
        clients_per_dc: 4,
        warmup: Duration::ZERO,
        duration,
        workload: WorkloadKind::Random(transactions),
        seed,
        run_id: run.into(),
        key_prefix: if run.is_empty() { "load-".into() } else { format!("load-{run}-") },
        record: true,
        value_size,
        phases: None,
        connect: Default::default(),
    };
    let dcs = nodes.iter().map(|n| n.dc + 1).max().unwrap_or(1);
    let topology = Arc::new(Topology::full(dcs as u16, 2).unwrap());
    tokio::spawn(causeway_load::run(load, topology, None, |_| {}))
}

/// Waits until `node` accepts clients, for at most `within`; `alive` panics
/// if a server it watches has exited.
pub async fn wait_serving(node: &Node, within: Duration, mut alive: impl FnMut()) {
    let deadline = Instant::now() + within;
    while Client::connect(node.client).await.is_err() {
        alive();
        assert!(Instant::now() < deadline, "node {} did not come up", node.name);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The history of a run: its transactions, and the final state of every
/// DC once two rounds of dumps agree (or `limit` has passed) — one line
/// per DC, each covering both partitions.
pub async fn history(txns: Vec<TxnRecord>, nodes: &[Node], prefix: &str, limit: Duration) -> History {
    let history = history_of_some(txns, nodes, prefix, limit).await;
    assert!(history.finals.iter().all(|f| !f.partial), "the two nodes of each DC cover both partitions");
    history
}

/// [`history`] of a cluster whose DCs may each hold some partitions only.
pub async fn history_of_some(txns: Vec<TxnRecord>, nodes: &[Node], prefix: &str, limit: Duration) -> History {
    let finals_at: Vec<_> = nodes.iter().map(|n| (n.dc as u16, n.client)).collect();
    let finals = settle::final_states(&finals_at, prefix, limit, &Default::default()).await.expect("dumps");
    let dcs = nodes.iter().map(|n| n.dc + 1).max().unwrap_or(1);
    assert_eq!(finals.len(), dcs, "one final line per DC");
    History { txns, finals }
}
