//! Starting a node: its replica tasks, its client endpoints, its links to the
//! other nodes and its metrics endpoint, all from a [`ClusterPlan`].

use crate::auth::Authenticator;
use crate::clients::host::{ClientHost, HostSetup};
use crate::clients::listener;
use crate::disk::{self, NodeDisk, ReplicaLog, ReplicaSpill};
use crate::error::StartError;
use crate::metrics::{self, Metrics};
use crate::peers::{Arrival, PeerControl, Peers, Sink};
use crate::plan::{ClusterPlan, NodePlan};
use crate::replica_task::{self, ReplicaGauges};
use crate::router::Router;
use causeway_protocol::contract::protocol::RecordOf;
use causeway_protocol::{DcId, Message, Protocol, ProtocolVisitor, ReplicaId, Timestamp};
use causeway_transport::HostAddr;
use rustc_hash::FxHashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// A running node. Dropping it stops every task it started.
pub struct NodeHandle {
    pub name: String,
    /// Where each DC's clients connect, as bound (a port 0 in the plan is
    /// replaced by the one the OS chose).
    pub clients: Vec<(DcId, SocketAddr)>,
    pub peer: Option<SocketAddr>,
    pub metrics_addr: Option<SocketAddr>,
    pub metrics: Arc<Metrics>,
    /// What each replica of this node publishes (stable times, sizes).
    pub replicas: Vec<(ReplicaId, Arc<ReplicaGauges>)>,
    tasks: Vec<AbortHandle>,
    /// End when the replica tasks have ended.
    replicas_ended: Vec<tokio::task::JoinHandle<()>>,
    /// Links to the other nodes, kept alive with the node.
    peers: Option<Arc<dyn PeerControl>>,
}

impl NodeHandle {
    /// Breaks every connection to other nodes (they reconnect by themselves).
    pub fn drop_peer_connections(&self) {
        if let Some(p) = &self.peers {
            p.drop_connections();
        }
    }

    /// Stops every task, as dropping the handle does, and waits until the
    /// replicas' tasks have ended and their logs are closed: another node
    /// may then open the same data directory.
    pub async fn stop(mut self) {
        for t in &self.tasks {
            t.abort();
        }
        for ended in std::mem::take(&mut self.replicas_ended) {
            let _ = ended.await;
        }
    }

    pub fn client_addr(&self, dc: DcId) -> Option<SocketAddr> {
        self.clients.iter().find(|(d, _)| *d == dc).map(|(_, a)| *a)
    }
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Listens where `at` says; a host name is resolved now.
async fn bind(me: &NodePlan, what: &'static str, at: &HostAddr) -> Result<TcpListener, StartError> {
    let addr = me.listen_addr(what, at).await?;
    TcpListener::bind(addr).await.map_err(|source| StartError::Bind { what, addr, source })
}

/// Starts node `name` of `plan` on the current tokio runtime.
pub async fn start(plan: Arc<ClusterPlan>, name: &str) -> Result<NodeHandle, StartError> {
    start_with(plan, name, StartOptions::default()).await
}

/// How a node starts, beyond its plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartOptions {
    /// The node's disk was lost: its replicas start from nothing and fetch
    /// their partitions' state from the other DCs
    /// ([`causeway_protocol::recovery::seed`]). Its data directory must hold
    /// no log yet; once started, the node restarts without it (a re-seed a
    /// crash interrupted carries on from its log).
    pub reseed: bool,
}

/// Starts node `name` of `plan` as `options` say.
pub async fn start_with(plan: Arc<ClusterPlan>, name: &str, options: StartOptions) -> Result<NodeHandle, StartError> {
    let node = plan.node_index(name).ok_or_else(|| StartError::UnknownNode(name.into()))?;
    plan.protocol.visit(Start { plan: plan.clone(), node, options }).await
}

type StartFuture = Pin<Box<dyn Future<Output = Result<NodeHandle, StartError>> + Send>>;

struct Start {
    plan: Arc<ClusterPlan>,
    node: usize,
    options: StartOptions,
}

impl ProtocolVisitor for Start {
    type Output = StartFuture;
    fn visit<P: Protocol>(self) -> StartFuture {
        Box::pin(start_typed::<P>(self.plan, self.node, self.options))
    }
}

async fn start_typed<P: Protocol>(
    plan: Arc<ClusterPlan>,
    node: usize,
    options: StartOptions,
) -> Result<NodeHandle, StartError> {
    let me = &plan.nodes[node];
    let config = P::configure(&plan.tuning);
    P::validate(&plan.topology, &config).map_err(|e| StartError::Invalid(format!("protocol {}: {e}", P::NAME)))?;
    let metrics = Arc::new(Metrics::new(<P::Message as Message>::CLASSES));
    let mut tasks = Vec::new();
    let mut replicas_ended = Vec::new();

    // Certificates and users first, then bind everything, so a missing
    // file or a taken port fails the start cleanly.
    let tls = crate::tls::NodeTls::load(&plan.tls, me)?;
    let auth = Arc::new(Authenticator::new(plan.auth.clone(), metrics.clone()).map_err(StartError::Invalid)?);
    let mut client_listeners = Vec::new();
    for (dc, at) in &me.clients {
        client_listeners.push((*dc, bind(me, "clients", at).await?));
    }
    let metrics_listener = match &me.metrics {
        Some(at) => Some(bind(me, "metrics", at).await?),
        None => None,
    };

    // Every replica's log is opened (and its replica rebuilt) before
    // anything runs: a refused or damaged directory fails the start with
    // nothing left behind.
    let mut reseeding = if options.reseed { Some(reseeds::<P>(&plan, me, &config)?.into_iter()) } else { None };
    let mut disk = match &me.data_dir {
        Some(dir) => {
            Some(NodeDisk::open(dir, &plan.name, &me.name, &me.replicas, plan.fsync, plan.checkpoint_min_bytes)?)
        }
        None => None,
    };
    let mut restored = Vec::new();
    for &id in &me.replicas {
        let (replica, log) = match (&mut reseeding, disk.as_mut()) {
            (Some(seeds), Some(disk)) => reseed::<P>(id, seeds.next().expect("one per replica"), disk)?,
            _ => restore::<P>(&plan, id, &config, disk.as_mut())?,
        };
        let spill = ReplicaSpill::open(me.data_dir.as_deref(), id).map_err(|e| StartError::Storage(e.to_string()))?;
        restored.push((replica, log, spill));
    }
    // The replicas hold the log now: it closes when the last one ends.
    drop(disk);

    let mut inboxes = FxHashMap::default();
    let mut receivers = Vec::new();
    for &r in &me.replicas {
        let (tx, rx) = mpsc::unbounded_channel();
        inboxes.insert(r, tx);
        receivers.push((r, rx));
    }
    let links = if plan.nodes.len() > 1 {
        Some(Peers::<P::Message>::start(&plan, node, tls.peers.clone(), metrics.clone()).await?)
    } else {
        None
    };
    let router = Router::new(&plan, node, inboxes, links.clone(), metrics.clone());
    if let Some(links) = &links {
        let router = Arc::downgrade(&router);
        let sink: Sink<P::Message> = Arc::new(move |sender, arrival| {
            if let Some(router) = router.upgrade() {
                match arrival {
                    Arrival::Envelope(envelope) => router.deliver_from_peer(sender, envelope),
                    Arrival::Gap => router.peer_lost(sender),
                }
            }
        });
        links.attach(sink);
    }
    let peers = links.map(|l| l as Arc<dyn PeerControl>);
    let peer = peers.as_ref().map(|p| p.local_addr());

    let dcs = plan.topology.dc_count();
    let mut replicas = Vec::new();
    for ((id, rx), (replica, log, spill)) in receivers.into_iter().zip(restored) {
        let gauges = Arc::new(ReplicaGauges::new(dcs, P::REPLICA_GROUPS));
        replicas.push((id, gauges.clone()));
        let task = tokio::spawn(replica_task::run::<P>(
            replica,
            log,
            spill,
            plan.clock_offset_us(id),
            rx,
            router.clone(),
            gauges,
            metrics.clone(),
        ));
        tasks.push(task.abort_handle());
        replicas_ended.push(tokio::spawn(crash_stop(id, task)));
    }

    let host = Arc::new(ClientHost::<P>::new(HostSetup {
        node,
        node_name: me.name.clone(),
        topology: plan.topology.clone(),
        config,
        limits: plan.limits,
        connections: plan.connections,
        auth,
        token_key: plan.token_key.clone().unwrap_or_else(crate::token::random_key),
        router: router.clone(),
        metrics: metrics.clone(),
        replicas: replicas.clone(),
    }));
    let mut clients = Vec::new();
    for (dc, listener) in client_listeners {
        clients.push((dc, listener.local_addr().expect("a bound listener has an address")));
        tasks.push(tokio::spawn(listener::accept_loop(host.clone(), listener, dc, tls.clients.clone())).abort_handle());
    }

    let metrics_addr = match metrics_listener {
        Some(listener) => {
            let addr = listener.local_addr().ok();
            let refresh = scrape_refresh(metrics.clone(), replicas.clone(), peers.clone());
            tasks.push(tokio::spawn(metrics::serve(listener, metrics.clone(), refresh)).abort_handle());
            addr
        }
        None => None,
    };
    Ok(NodeHandle {
        name: me.name.clone(),
        clients,
        peer,
        metrics_addr,
        metrics,
        replicas,
        tasks,
        replicas_ended,
        peers,
    })
}

/// Replica `id` of node `me` with its log: rebuilt from the records in its
/// data directory, or new (and without a log when the node has no data
/// directory).
fn restore<P: Protocol>(
    plan: &ClusterPlan,
    id: ReplicaId,
    config: &P::Config,
    disk: Option<&mut NodeDisk<RecordOf<P>>>,
) -> Result<(P::Replica, ReplicaLog<RecordOf<P>>), StartError> {
    let Some(disk) = disk else {
        return Ok((P::replica(id, plan.topology.clone(), config), ReplicaLog::Nowhere { appended: 0 }));
    };
    let opened = disk.replica(id, Vec::new())?;
    let replica = if opened.records.is_empty() {
        P::replica(id, plan.topology.clone(), config)
    } else {
        let count = opened.records.len();
        let started = std::time::Instant::now();
        let replica = P::recover(id, plan.topology.clone(), config, opened.records);
        let (dc, p, took) = (id.dc.0, id.partition.0, started.elapsed());
        match opened.from_checkpoint {
            Some(n) => tracing::info!(
                "replica dc{dc}-p{p} recovered from a checkpoint of {n} records and {} after it in {took:?}",
                count - n
            ),
            None => tracing::info!("replica dc{dc}-p{p} recovered from {count} records in {took:?}"),
        }
        replica
    };
    Ok((replica, opened.log))
}

/// The replicas of node `me`, whose disk was lost, ready to re-seed, and
/// the mark each leaves in its new log first. Refused, before anything is
/// written, if the cluster has one DC, if the node has no data directory,
/// if the directory holds anything of the node already (its data, or a
/// re-seed that began before: either is recovered by an ordinary start), or
/// if the protocol cannot re-seed.
#[allow(clippy::type_complexity)]
fn reseeds<P: Protocol>(
    plan: &ClusterPlan,
    me: &NodePlan,
    config: &P::Config,
) -> Result<Vec<(P::Replica, Vec<RecordOf<P>>)>, StartError> {
    if plan.topology.dc_count() < 2 {
        return Err(StartError::Invalid(
            "--reseed: the cluster has one DC, so no other DC holds a copy of this node's data to re-seed from".into(),
        ));
    }
    let Some(dir) = &me.data_dir else {
        return Err(StartError::Invalid(format!(
            "--reseed: node {} has no data directory to keep what it fetches (give data_dir or --data-dir)",
            me.name
        )));
    };
    if let Some(there) = disk::existing(dir, &me.replicas) {
        return Err(StartError::Invalid(format!(
            "--reseed: {} is there already — the node's data, or a re-seed that began before; start without \
             --reseed to recover it (an unfinished re-seed carries on), or move the data directory away to re-seed \
             anew",
            there.display()
        )));
    }
    me.replicas
        .iter()
        .map(|&id| {
            P::reseed(id, plan.topology.clone(), config).ok_or_else(|| {
                StartError::Invalid(format!(
                    "--reseed: protocol {} cannot re-seed a replica yet; start the node without it (it comes back \
                     empty)",
                    P::NAME
                ))
            })
        })
        .collect()
}

/// Replica `id`, re-seeding ([`reseeds`]), with a new log in the node's
/// data directory, which held nothing of the node.
fn reseed<P: Protocol>(
    id: ReplicaId,
    (replica, first): (P::Replica, Vec<RecordOf<P>>),
    disk: &mut NodeDisk<RecordOf<P>>,
) -> Result<(P::Replica, ReplicaLog<RecordOf<P>>), StartError> {
    let opened = disk.replica(id, first)?;
    let name = disk::replica_name(id);
    tracing::warn!("replica {name} re-seeds: it asks its partition's replicas in the other DCs for its state");
    Ok((replica, opened.log))
}

/// A replica whose task panicked has lost protocol state its peers rely on;
/// serving on would stall its DC or worse. Crash-stop: say why and end the
/// process, as a node of a replicated store should.
async fn crash_stop(id: ReplicaId, task: tokio::task::JoinHandle<()>) {
    if let Err(e) = task.await {
        if e.is_panic() {
            let why = e.into_panic();
            let why = why
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| why.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            disk::crash_stop(id, &format_args!("failed: {why}"));
        }
    }
}

/// Scrape-time gauges: stable-time lag and queue lengths.
fn scrape_refresh(
    metrics: Arc<Metrics>,
    replicas: Vec<(ReplicaId, Arc<ReplicaGauges>)>,
    peers: Option<Arc<dyn PeerControl>>,
) -> Arc<dyn Fn() + Send + Sync> {
    Arc::new(move || {
        let now = crate::clock::now_micros();
        let lag = |ts: u64| now.saturating_sub(Timestamp(ts).physical()) as f64 / 1e6;
        for (id, g) in &replicas {
            let name = disk::replica_name(*id);
            let local = g.visible_upto(id.dc);
            metrics
                .stable_lag
                .get_or_create(&vec![("replica", name.clone()), ("origin", "local".into())])
                .set(lag(local));
            let remote_min =
                (0..g.visible.len() as u16).map(DcId).filter(|d| *d != id.dc).map(|d| g.visible_upto(d)).min();
            if let Some(r) = remote_min {
                metrics
                    .stable_lag
                    .get_or_create(&vec![("replica", name.clone()), ("origin", "remote".into())])
                    .set(lag(r));
            }
            metrics
                .queue_length
                .get_or_create(&vec![("queue", "replica_inbox".into()), ("replica", name.clone())])
                .set(g.inbox.load(std::sync::atomic::Ordering::Relaxed) as i64);
            metrics
                .versions
                .get_or_create(&vec![("replica", name.clone())])
                .set(g.versions.load(std::sync::atomic::Ordering::Relaxed) as i64);
            metrics
                .stream_spilled
                .get_or_create(&vec![("replica", name.clone())])
                .set(g.spilled.load(std::sync::atomic::Ordering::Relaxed) as i64);
            if let Some(leads) = &g.leads {
                metrics
                    .group_leader
                    .get_or_create(&vec![("replica", name.clone())])
                    .set(leads.load(std::sync::atomic::Ordering::Relaxed).into());
            }
            metrics
                .metadata_per_version
                .get_or_create(&vec![("replica", name)])
                .set(g.metadata_per_version.load(std::sync::atomic::Ordering::Relaxed) as i64);
        }
        if let Some(peers) = &peers {
            peers.refresh_metrics(&metrics);
        }
    })
}
