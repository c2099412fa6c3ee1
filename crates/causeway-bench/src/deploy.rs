//! Bringing up the cluster a benchmark runs against, and taking it down:
//! in this process, as one `causeway server` process per replica, or a
//! running cluster named by a config file.

use crate::spec::{BenchSpec, Deployment};
use anyhow::{bail, Context, Result};
use causeway_client::{ClientOptions, ClientTls, Credentials};
use causeway_protocol::{DcId, PartitionId, ProtocolKind, ReplicaId, Topology};
use causeway_runtime::plan::{ConnectionLimits, TlsPlan};
use causeway_runtime::{config, start, ClusterPlan, NodeHandle};
use causeway_workload::WanModel;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A cluster ready for clients.
pub struct Target {
    pub protocol: ProtocolKind,
    pub topology: Arc<Topology>,
    /// Where each DC's clients connect (several per DC: clients take turns).
    pub endpoints: Vec<(DcId, SocketAddr)>,
    /// One client address per node, for its counters and stable times.
    pub nodes: Vec<SocketAddr>,
    /// Whose CPU time the run measures as the servers'.
    pub servers: Servers,
    /// How clients connect to the servers: TLS to their client ports
    /// (`None`: plain TCP), credentials.
    pub connect: ClientOptions,
    /// Keeps the cluster alive; dropping it stops what was started.
    _running: Running,
}

/// Where the servers run, for CPU accounting.
pub enum Servers {
    /// In this process, with the clients: CPU time is not split.
    ThisProcess,
    /// Child processes.
    Processes(Vec<u32>),
    /// Somewhere else: not measured.
    Elsewhere,
}

/// Held for what dropping it stops.
#[allow(dead_code)]
enum Running {
    Embedded(NodeHandle),
    Processes(ChildGuard),
    Nothing,
}

/// Kills the server processes when dropped, also on an error path.
struct ChildGuard(Vec<(String, Child)>, PathBuf);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// Brings up the cluster `spec` describes.
pub async fn bring_up(spec: &BenchSpec) -> Result<Target> {
    match &spec.deployment {
        Deployment::Embedded => embedded(spec).await,
        Deployment::Processes { exe } => processes(spec, exe).await,
        Deployment::Config(path) => running(path, spec.credentials.clone()),
    }
}

async fn embedded(spec: &BenchSpec) -> Result<Target> {
    let wan = spec.wan.as_ref().map(|file| WanModel::load(file.as_deref())).transpose().map_err(anyhow::Error::msg)?;
    let mut plan = ClusterPlan::embedded(spec.protocol, spec.dcs, spec.partitions, spec.replication, wan.as_ref(), 0)
        .and_then(|p| p.with_intervals_ms(spec.delta_r_ms, spec.delta_g_ms))
        .and_then(|p| p.with_ordered(spec.ordered.clone()))
        .map_err(anyhow::Error::msg)?;
    if let Some(groups) = &spec.groups {
        plan = plan.with_groups(groups).map_err(anyhow::Error::msg)?;
        let mut topology = Topology::clone(&plan.topology);
        for (from, partition, to) in nearest_holders(&topology, wan.as_ref()) {
            topology = topology.prefer(from, partition, to).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        plan.topology = Arc::new(topology);
    }
    for r in plan.topology.all_replicas() {
        plan.clock_offsets_us.insert(r, spec.clock_offset_us(r.dc.0, r.partition.0));
    }
    plan.nodes[0].data_dir = spec.data_dir.clone();
    plan.fsync = spec.fsync;
    // The one node takes every DC's clients (and the harness's probes).
    plan.connections.max_clients = plan.connections.max_clients.max(max_clients(spec, spec.dcs.into()));
    let topology = plan.topology.clone();
    let node = start(Arc::new(plan), "embedded").await?;
    let endpoints = node.clients.clone();
    let nodes = vec![endpoints[0].1];
    Ok(Target {
        protocol: spec.protocol,
        topology,
        endpoints,
        nodes,
        servers: Servers::ThisProcess,
        connect: ClientOptions::default(),
        _running: Running::Embedded(node),
    })
}

/// For each DC and each partition it holds no member of, the nearest DC
/// that does, by the WAN model's round-trip times (the lowest DC among
/// equals): where a replica group's clients elsewhere read and send their
/// commits (a cluster file's `preferred`). Without a WAN model, none: the
/// engine's round-robin choice.
pub fn nearest_holders(topology: &Topology, wan: Option<&WanModel>) -> Vec<(DcId, PartitionId, DcId)> {
    let Some(rtt) = wan.and_then(|m| m.rtt_matrix(topology.dc_count()).ok()) else { return Vec::new() };
    let mut out = Vec::new();
    for from in topology.dcs() {
        for p in topology.partitions().filter(|&p| !topology.holds(from, p)) {
            let holders = topology.replicas_of(p);
            if let Some(&to) = holders.iter().min_by_key(|d| (rtt[usize::from(from.0)][usize::from(d.0)], d.0)) {
                out.push((from, p, to));
            }
        }
    }
    out
}

/// A server process ends when the benchmark does, however it ends (a
/// killed benchmark leaves no servers behind): Linux's parent-death signal.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}

/// Ports the OS says are free now (a small race with other programs, which
/// a failed start reports).
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners: Vec<TcpListener> =
        (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<Result<_, _>>().context("no free port")?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// The config file of a cluster with one node per replica on loopback.
/// `topology`: [`BenchSpec::topology`].
pub fn processes_config(spec: &BenchSpec, topology: &Topology, ports: &[u16]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Written by causeway bench: one node per partition replica.");
    let _ = writeln!(s, "name = \"bench\"\nprotocol = \"{}\"\npartitions = {}", spec.protocol, spec.partitions);
    let _ = writeln!(s, "token_key = \"causeway bench cluster key\"");
    if spec.data_dir.is_some() {
        let _ = writeln!(s, "fsync = \"{}\"", spec.fsync.name());
    }
    // Loopback only: TLS when its cost is what is measured.
    if spec.tls {
        let _ = writeln!(s, "[tls]\ndir = \"certs\"");
    } else {
        let _ = writeln!(s, "tls = \"off\"");
    }
    // The run's own clients, probes and dumps: anonymous, as admin (its
    // probes read the nodes' counters).
    let _ = writeln!(s, "[auth]\nanonymous = \"admin\"");
    let _ = writeln!(
        s,
        "[tuning]\napply_interval_ms = {}\nstabilization_interval_ms = {}",
        spec.delta_r_ms, spec.delta_g_ms
    );
    if spec.protocol == ProtocolKind::Sdur {
        let o = &spec.ordered;
        let _ = writeln!(
            s,
            "[ordered]\nheartbeat_ms = {}\nelection_ms = {}\nreorder_threshold = {}",
            o.heartbeat_us as f64 / 1000.0,
            o.election_us as f64 / 1000.0,
            o.reorder_threshold
        );
        match spec.delay() {
            Some(rtt) if rtt == "rtt" => s.push_str("delay_ms = \"rtt\"\n"),
            Some(ms) => {
                let _ = writeln!(s, "delay_ms = {ms}");
            }
            None => {}
        }
        if let Some(bits) = o.bloom_bits {
            let _ = writeln!(s, "bloom_bits = {bits}\nbloom_history = {}", o.bloom_history);
        }
    }
    let _ = writeln!(s, "[limits]\nmax_value_bytes = {}", (spec.value_size.max(64 << 10)) as u32);
    // A node takes at most its DC's clients (and the harness's probes).
    let _ = writeln!(
        s,
        "[connections]\nmax_clients = {}",
        ConnectionLimits::default().max_clients.max(max_clients(spec, 1))
    );
    match &spec.wan {
        None => {}
        Some(None) => s.push_str("[wan]\nemulate = true\n"),
        Some(Some(path)) => {
            let _ = writeln!(s, "[wan]\nemulate = true\nfile = {:?}", path.display().to_string());
        }
    }
    // Replica groups: a DC reads and commits a partition it holds no
    // member of at the nearest DC that does.
    let wan = spec.wan.as_ref().and_then(|file| WanModel::load(file.as_deref()).ok());
    let nearest = if spec.groups.is_some() { nearest_holders(topology, wan.as_ref()) } else { Vec::new() };
    for d in 0..spec.dcs {
        let _ = writeln!(s, "[[dc]]\nname = \"dc{d}\"");
        let preferred: Vec<String> = nearest
            .iter()
            .filter(|(from, ..)| from.0 == d)
            .map(|(_, p, to)| format!("{} = \"dc{}\"", p.0, to.0))
            .collect();
        if !preferred.is_empty() {
            let _ = writeln!(s, "preferred = {{ {} }}", preferred.join(", "));
        }
    }
    let mut i = 0;
    // Two nodes of one DC that list a partition are two members of its group.
    for ReplicaId { dc: DcId(d), partition: PartitionId(p), member } in topology.all_replicas() {
        let name = if member == 0 { format!("dc{d}-p{p}") } else { format!("dc{d}-p{p}-m{member}") };
        let _ = writeln!(
            s,
            "[[node]]\nname = \"{name}\"\ndc = \"dc{d}\"\npartitions = [{p}]\npeer = \"127.0.0.1:{}\"\nclient = \"127.0.0.1:{}\"\nclock_offset_ms = {}",
            ports[i],
            ports[i + 1],
            spec.clock_offset_us(d, p) as f64 / 1000.0
        );
        if let Some(dir) = &spec.data_dir {
            let _ = writeln!(s, "data_dir = {:?}", dir.join(&name).display().to_string());
        }
        i += 2;
    }
    s
}

async fn processes(spec: &BenchSpec, exe: &std::path::Path) -> Result<Target> {
    let topology = spec.topology().map_err(anyhow::Error::msg)?;
    let count = topology.all_replicas().len();
    anyhow::ensure!(
        count <= config::MAX_NODES,
        "--processes runs one process per replica: at most {} replicas",
        config::MAX_NODES
    );
    let ports = free_ports(2 * count)?;
    let dir = std::env::temp_dir().join(format!("causeway-bench-{}-{}", std::process::id(), ports[0]));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config_path = dir.join("cluster.toml");
    std::fs::write(&config_path, processes_config(spec, &topology, &ports))?;
    let plan = config::load(&config_path)?;
    if spec.tls {
        // As an operator would: the CA and the nodes' certificates, by the command.
        let out = Command::new(exe)
            .args(["certs", "--config"])
            .arg(&config_path)
            .output()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        anyhow::ensure!(out.status.success(), "causeway certs failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let connect = ClientOptions { tls: client_tls(&plan)?, ..ClientOptions::default() };
    let mut guard = ChildGuard(Vec::new(), dir.clone());
    for node in &plan.nodes {
        let log = std::fs::File::create(dir.join(format!("{}.log", node.name)))?;
        let mut command = Command::new(exe);
        die_with_parent(&mut command);
        let child = command
            .args(["server", "--config"])
            .arg(&config_path)
            .args(["--node", &node.name, "--threads", "1"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        guard.0.push((node.name.clone(), child));
    }
    let endpoints = client_endpoints(&plan)?;
    // Wait until every node accepts clients.
    let deadline = Instant::now() + Duration::from_secs(20);
    for (name, addr) in plan.nodes.iter().map(|n| &n.name).zip(endpoints.iter().map(|e| e.1)) {
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                break;
            }
            for (n, child) in &mut guard.0 {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = std::fs::read_to_string(dir.join(format!("{n}.log"))).unwrap_or_default();
                    bail!("server {n} exited ({status}) before the run:\n{}", log.trim_end());
                }
            }
            if Instant::now() > deadline {
                bail!("server {name} did not accept clients on {addr} within 20 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let pids = guard.0.iter().map(|(_, c)| c.id()).collect();
    Ok(Target {
        protocol: spec.protocol,
        topology: plan.topology.clone(),
        nodes: endpoints.iter().map(|e| e.1).collect(),
        endpoints,
        servers: Servers::Processes(pids),
        connect,
        _running: Running::Processes(guard),
    })
}

/// Client connections a node must take for the run: the clients of `dcs`
/// DCs, with room for the probes, the preload and the final dumps.
fn max_clients(spec: &BenchSpec, dcs: usize) -> usize {
    spec.clients_per_dc() as usize * dcs + 256
}

/// What the clients of a cluster with TLS for clients trust: its CA.
fn client_tls(plan: &ClusterPlan) -> Result<Option<ClientTls>> {
    match &plan.tls {
        TlsPlan::Dir { dir, clients: true } => {
            Ok(Some(ClientTls::from_ca_file(TlsPlan::ca_file(dir)).map_err(|e| anyhow::anyhow!("{e}"))?))
        }
        _ => Ok(None),
    }
}

/// Where the clients of each node of `plan` connect, its names resolved now
/// (one endpoint per node: a node serves the clients of its DC).
fn client_endpoints(plan: &ClusterPlan) -> Result<Vec<(DcId, SocketAddr)>> {
    plan.nodes
        .iter()
        .flat_map(|n| n.clients.iter().map(move |c| (n, c)))
        .map(|(n, (dc, at))| {
            let addr =
                at.resolve().with_context(|| format!("node {:?}: client address {at} does not resolve", n.name))?;
            Ok((*dc, addr))
        })
        .collect()
}

fn running(path: &std::path::Path, credentials: Option<Credentials>) -> Result<Target> {
    let plan = config::load(path)?;
    let endpoints = client_endpoints(&plan)?;
    Ok(Target {
        protocol: plan.protocol,
        topology: plan.topology.clone(),
        nodes: endpoints.iter().map(|e| e.1).collect(),
        endpoints,
        servers: Servers::Elsewhere,
        connect: ClientOptions { tls: client_tls(&plan)?, credentials, ..ClientOptions::default() },
        _running: Running::Nothing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_processes_config_is_a_valid_cluster_of_one_node_per_replica() {
        let spec = BenchSpec { dcs: 3, partitions: 2, skew_ms: 4.0, wan: None, ..BenchSpec::default() };
        let ports: Vec<u16> = (0..12).map(|i| 20_000 + i).collect();
        let text = processes_config(&spec, &spec.topology().unwrap(), &ports);
        let plan = config::parse(&text, std::path::Path::new("bench.toml")).expect("a valid config");
        assert_eq!(plan.nodes.len(), 6);
        assert_eq!(plan.tls, TlsPlan::Off, "plain TCP unless --tls");
        let many = BenchSpec { clients_per_dc: Some(3000), ..spec.clone() };
        let text = processes_config(&many, &many.topology().unwrap(), &ports);
        let plan = config::parse(&text, std::path::Path::new("bench.toml")).expect("a valid config");
        assert!(plan.connections.max_clients >= 3000, "a node must take its DC's clients: {:?}", plan.connections);
        assert_eq!(plan.protocol, spec.protocol);
        assert!(plan.wan.is_none());
        assert_eq!(plan.nodes[3].name, "dc1-p1");
        assert_eq!(plan.nodes[3].clients[0].1.resolve().unwrap().port(), 20_007);
        for r in plan.topology.all_replicas() {
            // Offsets go through the file in milliseconds.
            let want = spec.clock_offset_us(r.dc.0, r.partition.0);
            assert!((plan.clock_offset_us(r) - want).abs() <= 1, "{r:?}");
        }
        assert!(plan.clock_offsets_us.values().any(|&o| o != 0));
    }

    /// Geo-SDUR's "WAN 1" as server processes: a node per member, two of
    /// them in one DC for a partition's majority, and the log's settings.
    #[test]
    fn the_processes_config_places_replica_groups_and_the_logs_settings() {
        let spec = BenchSpec {
            protocol: ProtocolKind::Sdur,
            dcs: 3,
            partitions: 2,
            groups: Some(vec![vec![2, 2, 1], vec![0, 0, 1]]),
            ordered: causeway_protocol::OrderedTuning {
                reorder_threshold: 80,
                delaying: causeway_protocol::DelayTuning::Fixed { delay_us: 20_000 },
                ..Default::default()
            },
            wan: None,
            ..BenchSpec::default()
        };
        let topology = spec.topology().unwrap();
        let ports: Vec<u16> = (0..12).map(|i| 21_000 + i).collect();
        let text = processes_config(&spec, &topology, &ports);
        let plan = config::parse(&text, std::path::Path::new("bench.toml")).expect("a valid config");
        assert_eq!(plan.nodes.len(), 6);
        assert_eq!(*plan.topology, topology, "the groups asked for");
        assert_eq!(plan.tuning.ordered.reorder_threshold, 80);
        assert_eq!(plan.tuning.ordered.delaying, causeway_protocol::DelayTuning::Fixed { delay_us: 20_000 });
        assert!(plan.nodes.iter().any(|n| n.name == "dc2-p0-m1"), "{text}");
        // No WAN model here: the engine's own choice of where DC 0 reads p0.
        assert_eq!(plan.topology.serving_dc(DcId(0), PartitionId(0)), DcId(1));
        // With the paper's RTTs: US-EAST reads partition 0 in EU (90 ms)
        // rather than US-WEST (100 ms), EU partition 1 in US-EAST.
        let model = WanModel::load(Some(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../config/wan-geo-sdur.toml"
        ))))
        .unwrap();
        let near = nearest_holders(&topology, Some(&model));
        assert_eq!(near, vec![(DcId(0), PartitionId(0), DcId(2)), (DcId(2), PartitionId(1), DcId(0))]);
        let file =
            std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/wan-geo-sdur.toml")).unwrap();
        let on_wan = BenchSpec { wan: Some(Some(file)), ..spec.clone() };
        let text = processes_config(&on_wan, &topology, &ports);
        let plan = config::parse(&text, std::path::Path::new("bench.toml")).expect("a valid config");
        assert_eq!(plan.topology.serving_dc(DcId(0), PartitionId(0)), DcId(2), "{text}");
        assert_eq!(plan.topology.serving_dc(DcId(1), PartitionId(0)), DcId(1), "held: its own");
        assert_eq!(spec.members_spec(), "2,2,1/0,0,1");
        assert_eq!(BenchSpec { groups: None, ..spec.clone() }.members_spec(), "0,1,2/0,1,2");
    }
}
