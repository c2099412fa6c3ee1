//! `causeway demo`: an embedded cluster under a closed-loop workload, with a
//! live progress line, a summary and the checker's verdict on the history.

use crate::serve::{init_logging, runtime, EmbeddedArgs};
use crate::verdict;
use anyhow::{Context, Result};
use causeway_history::History;
use causeway_load::{settle, visibility, LoadConfig};
use causeway_runtime::metrics::{class_name, Metrics};
use causeway_runtime::start;
use causeway_sim::{WorkloadConfig, WorkloadKind};
use clap::Args;
use hdrhistogram::Histogram;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    cluster: EmbeddedArgs,
    /// How long the workload runs, in seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Closed-loop clients in each DC (one session each).
    #[arg(long, default_value_t = 8)]
    clients: u32,
    /// Reads per transaction.
    #[arg(long, default_value_t = 19)]
    reads: u32,
    /// Writes per update transaction.
    #[arg(long, default_value_t = 1)]
    writes: u32,
    /// Keys per partition.
    #[arg(long, default_value_t = 1000)]
    keys: u32,
    /// Zipf exponent of key popularity (0: uniform).
    #[arg(long, default_value_t = 0.99)]
    zipf: f64,
    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the recorded history (JSON lines, docs/HISTORY.md) to this file.
    #[arg(long)]
    history: Option<PathBuf>,
}

fn ms(us: f64) -> String {
    format!("{:.1}", us / 1000.0)
}

fn percentiles(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "none".into();
    }
    format!(
        "mean {} ms   p50 {}   p90 {}   p99 {}   max {} ms",
        ms(h.mean()),
        ms(h.value_at_quantile(0.5) as f64),
        ms(h.value_at_quantile(0.9) as f64),
        ms(h.value_at_quantile(0.99) as f64),
        ms(h.max() as f64)
    )
}

fn bytes_by_class(metrics: &Metrics) -> String {
    use causeway_protocol::MsgClass::*;
    [Client, Transaction, Replication, Stabilization]
        .into_iter()
        .map(|c| format!("{} {:.1} MB", class_name(c), metrics.bytes_sent_of(c) as f64 / 1e6))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    init_logging();
    anyhow::ensure!(
        args.duration.is_finite() && args.duration > 0.0 && args.duration <= 86_400.0,
        "--duration must be more than 0 and at most 86400 seconds"
    );
    anyhow::ensure!(args.clients >= 1, "--clients must be at least 1");
    anyhow::ensure!(args.keys >= 1, "--keys must be at least 1");
    anyhow::ensure!(args.reads + args.writes >= 1, "a transaction needs at least one read or write");
    anyhow::ensure!(args.zipf.is_finite() && args.zipf >= 0.0, "--zipf must be 0 or more");
    let plan = args.cluster.plan(0)?;
    let limits = plan.limits;
    anyhow::ensure!(
        args.reads <= limits.max_keys_per_read && args.writes <= limits.max_writes_per_txn,
        "--reads and --writes must be at most {} and {} (the server's limits)",
        limits.max_keys_per_read,
        limits.max_writes_per_txn
    );
    let workload = WorkloadKind::Random(WorkloadConfig {
        reads_per_txn: args.reads,
        writes_per_txn: args.writes,
        keys_per_partition: args.keys,
        zipf: args.zipf,
        ..WorkloadConfig::default()
    });
    let rt = runtime()?;
    rt.block_on(async move {
        let topology = plan.topology.clone();
        let (protocol, dcs, partitions, wan) =
            (plan.protocol, topology.dc_count(), topology.partition_count(), plan.wan.is_some());
        let node = start(Arc::new(plan), "embedded").await?;
        println!(
            "causeway demo: {protocol}, {dcs} DCs × {partitions} partitions in this process, WAN emulation {}, \
             {} clients per DC, {} s",
            if wan { "on" } else { "off" },
            args.clients,
            args.duration
        );
        for (dc, addr) in &node.clients {
            println!("  DC {} serves clients on {addr}", dc.0);
        }
        let (commit_tx, commit_rx) = tokio::sync::mpsc::unbounded_channel();
        let tracker = tokio::spawn(visibility::track(node.replicas.clone(), dcs, commit_rx, Duration::from_secs(5)));
        let config = LoadConfig {
            endpoints: node.clients.clone(),
            clients_per_dc: args.clients,
            duration: Duration::from_secs_f64(args.duration),
            workload,
            seed: args.seed,
            record: true,
        };
        let terminal = std::io::stderr().is_terminal();
        let report = causeway_load::run(config, topology, Some(commit_tx), |p| {
            let line = format!(
                "  {:>5.1} s  {:>9} committed  {:>8.0} txn/s  mean latency {:.2} ms",
                p.elapsed.as_secs_f64(),
                p.committed,
                p.throughput,
                p.mean_latency_ms
            );
            if terminal {
                eprint!("\r\x1b[2K{line}");
            } else if p.elapsed.as_secs() % 5 == 0 {
                eprintln!("{line}");
            }
        })
        .await
        .context("the workload could not run")?;
        if terminal {
            eprint!("\r\x1b[2K");
        }
        let seen = tracker.await.context("the visibility tracker failed")?;
        let endpoints: Vec<_> = node.clients.iter().map(|(dc, a)| (dc.0, *a)).collect();
        let finals = settle::final_states(&endpoints, Duration::from_secs(10)).await?;
        let secs = report.elapsed.as_secs_f64();
        println!(
            "  transactions   {} committed ({:.0}/s), {} aborted by the workload, {} errors",
            report.committed,
            report.committed as f64 / secs,
            report.aborted,
            report.errors.len()
        );
        for e in report.errors.iter().take(5) {
            println!("    error: {e}");
        }
        println!("  latency        {}", percentiles(&report.latency));
        println!("  visible here   {}", percentiles(&seen.local));
        println!("  visible remote {}", percentiles(&seen.remote));
        if seen.unfinished > 0 {
            println!("  {} commits were still not visible everywhere 5 s after the run", seen.unfinished);
        }
        println!("  reads waited   {}", node.metrics.reads_waited.get());
        println!("  bytes sent     {}", bytes_by_class(&node.metrics));

        let history = History { txns: report.records, finals };
        if let Some(path) = &args.history {
            verdict::write_history(&history, path)?;
        }
        let ok = verdict::judge(&history, protocol) && report.errors.is_empty() && seen.unfinished == 0;
        Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
    })
}
