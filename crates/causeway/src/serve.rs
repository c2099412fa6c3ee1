//! `causeway server` (one node of a cluster from a config file) and
//! `causeway dev` (a whole cluster in this process).

use crate::args::{shape_of, ClusterArgs};
use anyhow::{Context, Result};
use causeway_client::Role;
use causeway_runtime::auth::{AuthPlan, Users};
use causeway_runtime::plan::{client_ports, TlsPlan};
use causeway_runtime::{config, start, start_with, StartOptions};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// The cluster config file (TOML), the same for every node; see docs/OPERATIONS.md.
    #[arg(long)]
    config: PathBuf,
    /// Which node of the config this process is (optional with --check).
    #[arg(long, required_unless_present = "check")]
    node: Option<String>,
    /// Only check the config file and print the cluster it describes.
    #[arg(long)]
    check: bool,
    /// Worker threads (default: one per core). One suits several server
    /// processes sharing a small machine: no wake-ups between threads.
    #[arg(long)]
    threads: Option<usize>,
    /// Where this node keeps its logs (overrides the node's data_dir in the
    /// config file). A node without one keeps nothing across a restart.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// This node's disk was lost: start it on an empty data directory and
    /// have its replicas fetch their partitions' data from the other DCs
    /// (see "Replacing a node whose disk is gone" in docs/OPERATIONS.md).
    /// Once started, restart it without --reseed.
    #[arg(long)]
    reseed: bool,
}

#[derive(Args, Debug)]
pub struct DevArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Client port of DC 0; DC i listens on PORT+i, so every DC's port must
    /// be at most 65535 (0: any free ports).
    #[arg(long, default_value_t = 7100)]
    port: u16,
    /// Serve Prometheus metrics on this address (for example 127.0.0.1:9100),
    /// on a port no DC's clients use.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Keep the cluster's logs here, to restart it with its data (default:
    /// a temporary directory, deleted on exit).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

/// Where an embedded cluster keeps its logs: `--data-dir`, or a temporary
/// directory that lives as long as this does.
pub(crate) struct EmbeddedDataDir {
    pub path: PathBuf,
    temporary: Option<tempfile::TempDir>,
}

impl EmbeddedDataDir {
    pub fn new(given: Option<PathBuf>) -> Result<EmbeddedDataDir> {
        match given {
            Some(path) => Ok(EmbeddedDataDir { path, temporary: None }),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("causeway-")
                    .tempdir()
                    .context("cannot create a temporary data directory (give one with --data-dir)")?;
                Ok(EmbeddedDataDir { path: temp.path().to_path_buf(), temporary: Some(temp) })
            }
        }
    }
}

/// The directory, and whether it goes when the command ends.
impl std::fmt::Display for EmbeddedDataDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path.display())?;
        if self.temporary.is_some() {
            f.write_str(" (temporary: give --data-dir to keep it)")?;
        }
        Ok(())
    }
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    runtime_with(None)
}

/// A runtime with `threads` workers (default: one per core). One thread
/// is tokio's current-thread scheduler: every task — the replicas, the
/// client sessions, the transport's readers and writers — runs on the
/// thread that started the server, so handing a message from one to the
/// next is a queue push, never a wake-up of another thread (a futex). (The
/// multi-threaded scheduler with one worker would still run the server's
/// main future on a thread of its own.)
pub fn runtime_with(threads: Option<usize>) -> Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            anyhow::ensure!((1..=1024).contains(&n), "--threads must be 1 to 1024, got {n}");
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all().build().context("cannot start the tokio runtime")
}

pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).try_init();
}

async fn until_interrupted() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// Who may connect, as `--check` tells it; the users file must load, as the
/// nodes will load it.
fn who_may_connect(auth: &AuthPlan) -> Result<String> {
    let users = match &auth.users_file {
        Some(path) => {
            let users = Users::load(path).map_err(anyhow::Error::msg)?;
            format!("{} in {}", crate::args::count(users.len() as u64, "user"), path.display())
        }
        None => "no users".to_string(),
    };
    Ok(match auth.anonymous {
        Some(role) => format!("{users}, anonymous clients as {role}"),
        None => format!("{users}, anonymous clients refused"),
    })
}

pub fn server(args: ServerArgs) -> Result<ExitCode> {
    init_logging();
    let plan = config::load(&args.config)?;
    let names: Vec<_> = plan.nodes.iter().map(|n| n.name.as_str()).collect();
    if let Some(node) = &args.node {
        if plan.node_index(node).is_none() {
            anyhow::bail!("no node named {node:?} in {} (nodes: {})", args.config.display(), names.join(", "));
        }
    }
    if args.check {
        let tls = match &plan.tls {
            TlsPlan::Off => "TLS off".to_string(),
            TlsPlan::Dir { dir, clients } => {
                let whose = match &args.node {
                    // The node's own certificate must load, or it would not start.
                    Some(node) => {
                        causeway_runtime::tls::NodeTls::load(
                            &plan.tls,
                            &plan.nodes[plan.node_index(node).expect("checked above")],
                        )?;
                        format!("{node}'s certificate")
                    }
                    None => "the certificates".to_string(),
                };
                format!("TLS with {whose} in {}{}", dir.display(), if *clients { "" } else { " (peers only)" })
            }
        };
        println!(
            "{}: cluster {:?}, protocol {}, {}, {}: {}; {tls}; {}",
            args.config.display(),
            plan.name,
            plan.protocol,
            shape_of(&plan.topology),
            crate::args::count(names.len() as u64, "node"),
            names.join(", "),
            who_may_connect(&plan.auth)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let node_name = args.node.expect("clap requires --node without --check");
    if let Some(role) = plan.auth.anonymous {
        eprintln!(
            "warning: {} admits clients without credentials as {role} ([auth] anonymous): anyone who reaches \
             a client port may {}",
            args.config.display(),
            match role {
                Role::Read => "read every key",
                Role::Write => "read and write every key",
                Role::Admin => "read and write every key, dump the data and break the node's peer links",
            }
        );
    }
    if plan.tls == TlsPlan::Off && plan.nodes.len() > 1 {
        eprintln!(
            "warning: {} says tls = \"off\": links between nodes and to clients are neither encrypted nor \
             authenticated; any process that reaches a peer port can join as a peer",
            args.config.display()
        );
    }
    let mut plan = plan;
    let index = plan.node_index(&node_name).expect("checked above");
    if let Some(dir) = args.data_dir {
        plan.nodes[index].data_dir = Some(dir);
    }
    match &plan.nodes[index].data_dir {
        Some(dir) => println!("node {node_name} keeps its data in {} (fsync = {})", dir.display(), plan.fsync.name()),
        None => eprintln!(
            "warning: node {node_name} has no data_dir (in the config file or --data-dir): it keeps nothing across a restart"
        ),
    }
    let rt = runtime_with(args.threads)?;
    rt.block_on(async {
        let node = start_with(Arc::new(plan), &node_name, StartOptions { reseed: args.reseed }).await?;
        if args.reseed {
            println!("node {} re-seeds its replicas from the other DCs; restart it without --reseed", node.name);
        }
        for (dc, addr) in &node.clients {
            println!("node {} serving clients of DC {} on {addr}", node.name, dc.0);
        }
        if let Some(addr) = node.peer {
            println!("peers connect to {addr}");
        }
        if let Some(addr) = node.metrics_addr {
            println!("metrics on http://{addr}/metrics");
        }
        until_interrupted().await;
        println!("shutting down");
        Ok(ExitCode::SUCCESS)
    })
}

pub fn dev(args: DevArgs) -> Result<ExitCode> {
    init_logging();
    let c = &args.cluster;
    let ports = client_ports(args.port, c.dcs).map_err(|e| anyhow::anyhow!("--port {}: {e}", args.port))?;
    if let Some(addr) = args.metrics.filter(|a| ports.contains(a.port())) {
        anyhow::bail!(
            "--metrics {addr}: port {} is a DC's client port ({} DCs listen on {}); give the metrics another port",
            addr.port(),
            c.dcs,
            ports.range()
        );
    }
    let mut plan = c.plan(args.port)?;
    plan.nodes[0].metrics = args.metrics.map(Into::into);
    let data_dir = EmbeddedDataDir::new(args.data_dir)?;
    plan.nodes[0].data_dir = Some(data_dir.path.clone());
    let rt = runtime()?;
    rt.block_on(async {
        let (protocol, cluster) = (plan.protocol, shape_of(&plan.topology));
        let wan = plan.wan.is_some();
        let node = start(Arc::new(plan), "embedded").await?;
        println!(
            "causeway dev: {protocol} on {cluster} in this process, WAN emulation {}",
            if wan { "on" } else { "off" }
        );
        for (dc, addr) in &node.clients {
            println!("  DC {}  clients: {addr}", dc.0);
        }
        println!("  data:    {data_dir}");
        if let Some(addr) = node.metrics_addr {
            println!("  metrics: http://{addr}/metrics");
        }
        if let Some((_, first)) = node.clients.first() {
            println!("try: causeway shell --connect {first}");
        }
        println!("serving until interrupted (Ctrl-C)");
        until_interrupted().await;
        println!("shutting down");
        Ok(ExitCode::SUCCESS)
    })
}
