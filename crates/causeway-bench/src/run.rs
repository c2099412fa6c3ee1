//! One benchmark run: bring the cluster up, run closed-loop clients through
//! a warm-up and the measured time, read every node's counters at both
//! ends, follow commits until they are visible everywhere, and report.

use crate::cpu::{self, CpuTime};
use crate::deploy::{self, Servers, Target};
use crate::report::{
    BenchReport, ByClass, ClassReport, Cpu, CpuReport, DcLatency, Distribution, LinksPerTxn, OrderedReport, ReadWaits,
    Syscalls, Traffic, Visibility, WorkloadReport,
};
use crate::spec::BenchSpec;
use crate::syscalls;
use anyhow::{Context, Result};
use causeway_client::wire::NodeStats;
use causeway_history::History;
use causeway_load::driver::ClassMeasure;
use causeway_load::probe::Probe;
use causeway_load::visibility::Witness;
use causeway_load::{settle, visibility, LoadConfig, Phase, Progress};
use causeway_protocol::{ProtocolKind, Topology};
use causeway_workload::{TxnShape, WorkloadKind};
use std::collections::BTreeSet;
use std::time::Duration;

/// A run's report, and its history when the spec asked to record one.
pub struct Outcome {
    pub report: BenchReport,
    pub history: Option<History>,
    /// Errors the clients met (the first few), for the user.
    pub errors: Vec<String>,
}

/// The counters of every node and the CPU times, at one moment.
struct Snapshot {
    nodes: Vec<NodeStats>,
    servers: Option<CpuTime>,
    clients: Option<CpuTime>,
}

/// Every node's counters; a node that cannot be reached (it is down)
/// counts nothing, and one that restarted starts over (hence the
/// saturating differences below).
async fn snapshot(probes: &mut [Probe], servers: &Servers, waited: bool) -> Result<Snapshot> {
    let mut nodes = Vec::new();
    for p in probes.iter_mut() {
        let stats = p.stats(waited).await.context("cannot read a node's counters")?;
        nodes.push(stats.unwrap_or_default());
    }
    let (servers, clients) = match servers {
        Servers::ThisProcess => (cpu::this_process(), None),
        Servers::Processes(pids) => (cpu::of_processes(pids), cpu::this_process()),
        Servers::Elsewhere => (None, cpu::this_process()),
    };
    Ok(Snapshot { nodes, servers, clients })
}

/// `perf stat` on the servers and on the clients (this process), apart;
/// embedded, on this process alone, as `servers`.
struct SyscallCounting {
    servers: Option<syscalls::Counting>,
    clients: Option<syscalls::Counting>,
}

impl SyscallCounting {
    fn start(servers: &Servers) -> Result<Self> {
        let me = [std::process::id()];
        let (server_pids, clients_apart): (Option<&[u32]>, bool) = match servers {
            Servers::ThisProcess => (Some(&me), false),
            Servers::Processes(pids) => (Some(pids), true),
            Servers::Elsewhere => (None, true),
        };
        Ok(SyscallCounting {
            servers: server_pids.map(syscalls::Counting::start).transpose()?,
            clients: clients_apart.then(|| syscalls::Counting::start(&me)).transpose()?,
        })
    }

    fn stop(self) -> Result<(Option<syscalls::Rates>, Option<syscalls::Rates>)> {
        Ok((
            self.servers.map(syscalls::Counting::stop).transpose()?,
            self.clients.map(syscalls::Counting::stop).transpose()?,
        ))
    }
}

fn sum(nodes: &[NodeStats], f: impl Fn(&NodeStats) -> u64) -> u64 {
    nodes.iter().map(f).sum()
}

/// Messages and bytes per class over every node, in the order the nodes
/// list their protocol's classes.
fn classes(nodes: &[NodeStats]) -> Vec<(String, u64, u64)> {
    let mut total: Vec<(String, u64, u64)> = Vec::new();
    for c in nodes.iter().flat_map(|n| &n.sent) {
        match total.iter_mut().find(|(class, ..)| *class == c.class) {
            Some((_, m, b)) => {
                *m += c.messages;
                *b += c.bytes;
            }
            None => total.push((c.class.clone(), c.messages, c.bytes)),
        }
    }
    total
}

/// The nodes' socket counters over the measured time, per transaction.
fn links_per_txn(first: &[NodeStats], last: &[NodeStats], committed: u64) -> LinksPerTxn {
    let per = |f: fn(&causeway_client::wire::LinkCounts) -> u64| {
        let at = |ns: &[NodeStats]| sum(ns, |n| f(&n.links));
        at(last).saturating_sub(at(first)) as f64 / committed.max(1) as f64
    };
    LinksPerTxn {
        peer_messages: per(|l| l.peer_messages_sent),
        peer_frames: per(|l| l.peer_frames_sent),
        peer_writes: per(|l| l.peer_writes),
        peer_acks: per(|l| l.peer_acks_sent),
        client_requests: per(|l| l.client_frames_received),
        client_answers: per(|l| l.client_frames_sent),
        client_writes: per(|l| l.client_writes),
    }
}

fn waited_txns(nodes: &[NodeStats]) -> BTreeSet<(u16, u64)> {
    nodes.iter().flat_map(|n| n.waited_txns.iter().copied()).collect()
}

/// Per class, over every DC and by DC, in the classes' order.
fn class_reports(measures: &[ClassMeasure], secs: f64) -> ByClass<ClassReport> {
    let mut out: Vec<(String, ClassReport, hdrhistogram::Histogram<u64>)> = Vec::new();
    for m in measures {
        let name = m.class.name();
        let i = match out.iter().position(|(c, ..)| c == name) {
            Some(i) => i,
            None => {
                out.push((name.to_string(), ClassReport::default(), visibility::histogram()));
                out.len() - 1
            }
        };
        let (_, c, all) = &mut out[i];
        c.committed += m.committed;
        c.aborted += m.aborted;
        let _ = all.add(&m.latency);
        let h = &m.latency;
        c.by_dc.push(DcLatency {
            dc: m.dc.0,
            committed: m.committed,
            mean_ms: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
            p99_ms: if h.is_empty() { 0.0 } else { h.value_at_quantile(0.99) as f64 / 1000.0 },
        });
    }
    ByClass(
        out.into_iter()
            .map(|(name, mut c, all)| {
                c.throughput_tps = c.committed as f64 / secs.max(1e-9);
                c.latency = Distribution::of(&all);
                (name, c)
            })
            .collect(),
    )
}

/// Runs `spec`; `progress` is called about once a second.
pub async fn run(spec: &BenchSpec, progress: impl FnMut(Progress) + Send) -> Result<Outcome> {
    spec.validate().map_err(anyhow::Error::msg)?;
    let target = deploy::bring_up(spec).await?;
    measure(spec, target, progress).await
}

async fn measure(spec: &BenchSpec, target: Target, progress: impl FnMut(Progress) + Send) -> Result<Outcome> {
    let Target { protocol, topology, endpoints, nodes, servers, connect, .. } = &target;
    let dcs = topology.dc_count();
    let partitions = topology.partition_count();
    if spec.preload {
        let (_, endpoint) = endpoints.first().context("the cluster has no client endpoint")?;
        let keys = spec.workload.keys_per_partition;
        causeway_load::preload::preload(*endpoint, topology, &spec.key_prefix(), keys, spec.value_size, 8, connect)
            .await
            .context("preloading the keys failed")?;
    }
    if spec.syscalls {
        syscalls::check()?;
    }
    let mut probes = Probe::connect_all(nodes, connect).await.context("cannot connect to the cluster")?;
    let tracker_probes = Probe::connect_all(nodes, connect).await.context("cannot connect to the cluster")?;
    let (commit_tx, commit_rx) = tokio::sync::mpsc::unbounded_channel();
    let (phase_tx, mut phase_rx) = tokio::sync::mpsc::unbounded_channel();
    let tracker = tokio::spawn(visibility::track(
        tracker_probes,
        Topology::clone(topology),
        // PaRiS's snapshot is its DC's UST, whichever replica serves a read.
        match protocol {
            ProtocolKind::Paris => Witness::OwnReplicas,
            _ => Witness::ServingReplicas,
        },
        commit_rx,
        spec.visibility_interval,
        Duration::from_secs(10),
    ));
    let clients_per_dc = spec.clients_per_dc.unwrap_or(spec.clients_per_partition.saturating_mul(partitions));
    let config = LoadConfig {
        endpoints: endpoints.clone(),
        clients_per_dc,
        warmup: spec.warmup,
        duration: spec.duration,
        workload: WorkloadKind::Random(spec.workload.clone()),
        seed: spec.seed,
        run_id: spec.run_id.clone(),
        key_prefix: spec.key_prefix(),
        record: spec.record,
        value_size: Some(spec.value_size),
        phases: Some(phase_tx),
        connect: connect.clone(),
    };
    let load = causeway_load::run(config, topology.clone(), Some(commit_tx), progress);
    // The counters at the end of the warm-up and at the end of the measured
    // time, read while the load runs, at the moments the driver says.
    let counters = async {
        let mut first = None;
        let mut counting = None;
        while let Some(phase) = phase_rx.recv().await {
            match phase {
                Phase::Measuring => {
                    first = Some(snapshot(&mut probes, servers, true).await?);
                    if spec.syscalls {
                        counting = Some(SyscallCounting::start(servers)?);
                    }
                }
                Phase::Stopped => {
                    // Before the snapshot: the clients have stopped.
                    let calls = counting.take().map(SyscallCounting::stop).transpose()?;
                    let last = snapshot(&mut probes, servers, true).await?;
                    return Ok(first.map(|f| (f, last, calls)));
                }
            }
        }
        Ok::<_, anyhow::Error>(None)
    };
    let (report, counters) = tokio::join!(load, counters);
    let report = report.context("the workload could not run")?;
    let (first, last, calls) = counters?.context("the run ended before its measured time")?;
    let seen = tracker.await.context("the visibility tracker failed")?.context("cannot read stable times")?;

    let secs = report.elapsed.as_secs_f64();
    let (a, b) = (&first.nodes, &last.nodes);
    // Counters only grow while the servers live; a restarted server's
    // would not, hence the saturating differences.
    let slices = sum(b, |n| n.read_slices).saturating_sub(sum(a, |n| n.read_slices));
    let slices_waited = sum(b, |n| n.read_slices_waited).saturating_sub(sum(a, |n| n.read_slices_waited));
    let wait_us = sum(b, |n| n.read_wait_us).saturating_sub(sum(a, |n| n.read_wait_us));
    // Each snapshot drains the nodes' sets: the last one holds the measured
    // time's transactions.
    let waited = waited_txns(b).len() as u64;
    let before = classes(a);
    let delta = |f: fn(&(String, u64, u64)) -> u64| {
        let at_start = |class: &str| before.iter().find(|c| c.0 == class).map_or(0, f);
        ByClass(classes(b).iter().map(|c| (c.0.clone(), f(c).saturating_sub(at_start(&c.0)))).collect())
    };
    let messages = delta(|c| c.1);
    let bytes = delta(|c| c.2);
    let lat = &report.latency;
    let q = |x: f64| if lat.is_empty() { 0.0 } else { lat.value_at_quantile(x) as f64 / 1000.0 };
    let cpu_of = |x: Option<CpuTime>, y: Option<CpuTime>| Some(CpuReport::of(y?.since(x?), secs, report.committed));
    let w = &spec.workload;
    let out = BenchReport {
        protocol: protocol.to_string(),
        deployment: spec.deployment.name().into(),
        tls: connect.tls.is_some(),
        dcs,
        partitions,
        replication: spec.replication,
        clients_per_partition: spec.clients_per_partition,
        clients_per_dc,
        clients: clients_per_dc * u32::from(dcs),
        workload: WorkloadReport {
            reads_per_txn: w.reads_per_txn,
            writes_per_txn: w.writes_per_txn,
            partitions_per_txn: w.partitions_per_txn.min(partitions),
            keys_per_partition: w.keys_per_partition,
            zipf: w.zipf,
            value_size: spec.value_size,
            multi_dc_fraction: (!topology.is_fully_replicated()).then_some(w.multi_dc_fraction),
            write_fraction: (w.shape == TxnShape::ReadOrWrite).then_some(w.write_fraction()),
            kind: matches!(w.shape, TxnShape::SdurMicro { .. } | TxnShape::Social(_)).then(|| w.shape.name().into()),
            global_fraction: w.shape.global_fraction(),
        },
        wan: spec.wan.is_some(),
        preload: spec.preload,
        skew_ms: spec.skew_ms,
        delta_r_ms: spec.delta_r_ms,
        delta_g_ms: spec.delta_g_ms,
        warmup_s: spec.warmup.as_secs_f64(),
        duration_s: secs,
        throughput_tps: report.committed as f64 / secs.max(1e-9),
        committed: report.committed,
        aborted: report.aborted,
        errors: report.errors.len() as u64,
        unknown: report.unknown,
        unavailable: report.unavailable,
        reconnects: report.reconnects,
        latency_mean_ms: if lat.is_empty() { 0.0 } else { lat.mean() / 1000.0 },
        latency_p50_ms: q(0.5),
        latency_p90_ms: q(0.9),
        latency_p99_ms: q(0.99),
        latency_max_ms: if lat.is_empty() { 0.0 } else { lat.max() as f64 / 1000.0 },
        reads: ReadWaits {
            slices,
            slices_waited,
            wait_mean_ms: wait_us as f64 / 1000.0 / slices.max(1) as f64,
            wait_mean_of_waited_ms: wait_us as f64 / 1000.0 / slices_waited.max(1) as f64,
            txns_waited_share: waited as f64 / report.attempted.max(1) as f64,
            read_only_rounds: (0..4)
                .map(|i| {
                    let at = |ns: &[causeway_client::wire::NodeStats]| {
                        ns.iter().map(|n| n.read_only_rounds.get(i).copied().unwrap_or(0)).sum::<u64>()
                    };
                    at(b).saturating_sub(at(a))
                })
                .collect(),
        },
        visibility: Visibility {
            local: Distribution::of(&seen.local),
            remote: Distribution::of(&seen.remote),
            unfinished: seen.unfinished,
        },
        traffic: Traffic {
            bytes_per_txn: bytes.per(report.committed),
            messages_per_txn: messages.per(report.committed),
            links_per_txn: links_per_txn(a, b, report.committed),
            bytes,
            messages,
        },
        metadata_bytes_per_version: b
            .iter()
            .flat_map(|n| n.replicas.iter().map(|r| r.metadata_bytes_per_version))
            .max()
            .unwrap_or(0),
        cpu: Cpu { servers: cpu_of(first.servers, last.servers), clients: cpu_of(first.clients, last.clients) },
        syscalls: calls.map(|(servers, clients)| {
            let tps = report.committed as f64 / secs.max(1e-9);
            Syscalls { servers: servers.map(|r| r.per_txn(tps)), clients: clients.map(|r| r.per_txn(tps)) }
        }),
        ordered: (*protocol == ProtocolKind::Sdur).then(|| OrderedReport {
            members: spec.members_spec(),
            reorder_threshold: spec.ordered.reorder_threshold,
            delay: spec.delay(),
            heartbeat_ms: spec.ordered.heartbeat_us as f64 / 1000.0,
            election_ms: spec.ordered.election_us as f64 / 1000.0,
            bloom_bits: spec.ordered.bloom_bits,
        }),
        txn_classes: class_reports(&report.classes, secs),
        round: spec.round,
    };
    let history = if spec.record {
        let endpoints: Vec<_> = endpoints.iter().map(|(dc, a)| (dc.0, *a)).collect();
        // The run's own keys: a running cluster may hold others.
        let finals = settle::final_states(&endpoints, &spec.key_prefix(), Duration::from_secs(10), connect).await?;
        Some(History { txns: report.records, finals })
    } else {
        None
    };
    drop(target);
    Ok(Outcome { report: out, history, errors: report.errors })
}
