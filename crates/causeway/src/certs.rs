//! `causeway certs`: the cluster's CA and a certificate for each node of a
//! config file, in the directory its `[tls] dir` names.

use crate::output::write_private;
use anyhow::{bail, Context, Result};
use causeway_runtime::config;
use causeway_runtime::plan::{NodePlan, TlsPlan};
use causeway_runtime::tls::{Authority, NODE_CERT_DAYS};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(after_help = "\
The directory gets ca.pem and ca.key (the CA: kept to sign more nodes later),
and <node>.pem and <node>.key for each node. A node's certificate names it and
the hosts of its peer and client addresses. Nodes that have a certificate keep
it unless --renew is given; a CA already there is reused. Keys are written
readable by their owner only. docs/OPERATIONS.md, \"Security\", tells how to
rotate certificates and where the CA key belongs in production.")]
pub struct CertsArgs {
    /// The cluster config file; its [tls] dir says where the files go.
    #[arg(long)]
    config: PathBuf,
    /// Only these nodes (repeat the flag; default: every node of the file).
    #[arg(long = "node", value_name = "NAME")]
    nodes: Vec<String>,
    /// Issue new certificates for nodes that have one (same CA).
    #[arg(long)]
    renew: bool,
}

pub fn run(args: CertsArgs) -> Result<ExitCode> {
    let plan = config::load(&args.config)?;
    let TlsPlan::Dir { dir, .. } = &plan.tls else {
        bail!(
            "{} says tls = \"off\": give it a [tls] table with dir = \"certs\" (say) for the certificates",
            args.config.display()
        );
    };
    for name in &args.nodes {
        if plan.node_index(name).is_none() {
            let names: Vec<_> = plan.nodes.iter().map(|n| n.name.as_str()).collect();
            bail!("no node named {name:?} in {} (nodes: {})", args.config.display(), names.join(", "));
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (ca, ca_pem) = authority(&plan.name, dir)?;
    let mut written = 0;
    for node in plan.nodes.iter().filter(|n| args.nodes.is_empty() || args.nodes.contains(&n.name)) {
        let (cert, key) = TlsPlan::node_files(dir, &node.name);
        if cert.exists() && !args.renew {
            println!("kept     {} (give --renew for a new one)", cert.display());
            continue;
        }
        let issued = ca.issue(&node.name, &hosts(node), &ca_pem).with_context(|| format!("node {:?}", node.name))?;
        write_private(&key, &issued.key_pem)?;
        write(&cert, &issued.cert_pem)?;
        println!("wrote    {} and its key (valid {NODE_CERT_DAYS} days)", cert.display());
        written += 1;
    }
    println!("{written} node certificate(s) written; the nodes load them when they start");
    Ok(ExitCode::SUCCESS)
}

/// The CA in `dir`, or a new one written there; and its certificate's PEM.
fn authority(cluster: &str, dir: &Path) -> Result<(Authority, String)> {
    let (cert, key) = (TlsPlan::ca_file(dir), TlsPlan::ca_key_file(dir));
    match (cert.exists(), key.exists()) {
        (true, true) => {
            let pem = std::fs::read_to_string(&cert).with_context(|| format!("cannot read {}", cert.display()))?;
            let key_pem = std::fs::read_to_string(&key).with_context(|| format!("cannot read {}", key.display()))?;
            let ca = Authority::from_key(&key_pem).with_context(|| format!("the CA key {}", key.display()))?;
            println!("reusing  the CA in {}", cert.display());
            Ok((ca, pem))
        }
        (false, false) => {
            let ca = Authority::new()?;
            write_private(&key, &ca.key_pem())?;
            write(&cert, &ca.cert_pem())?;
            println!("wrote    a new CA for cluster {cluster:?}: {}", cert.display());
            let pem = ca.cert_pem();
            Ok((ca, pem))
        }
        (has_cert, _) => {
            let (there, missing) = if has_cert { (&cert, &key) } else { (&key, &cert) };
            bail!(
                "{} is there but {} is not: restore it, or move both aside to make a new CA \
                 (every node then needs a new certificate)",
                there.display(),
                missing.display()
            )
        }
    }
}

/// The hosts clients and peers reach `node` by: its addresses without ports.
fn hosts(node: &NodePlan) -> Vec<String> {
    let mut hosts = Vec::new();
    let addrs = node.peer.iter().chain(node.clients.iter().map(|(_, a)| a));
    for addr in addrs {
        let host = addr.host();
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
