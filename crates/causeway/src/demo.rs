//! `causeway demo`: an embedded cluster under a closed-loop workload, with a
//! live progress line, a summary and the checker's verdict on the history.
//! It is a benchmark run (`causeway-bench`) that records its history and
//! mixes in read-only and aborted transactions, so every path is shown.

use crate::args::{count, placed, ClientArgs, ClusterArgs};
use crate::bench::run_and_summarize;
use crate::output::OutputFile;
use crate::serve::{init_logging, EmbeddedDataDir};
use crate::verdict;
use anyhow::Result;
use causeway_bench::{BenchSpec, Deployment};
use causeway_workload::WorkloadConfig;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// How long the workload runs, in seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    #[command(flatten)]
    clients: ClientArgs,
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
    /// Keep the cluster's logs here (default: a temporary directory,
    /// deleted on exit).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    init_logging();
    anyhow::ensure!(
        args.duration.is_finite() && args.duration > 0.0 && args.duration <= 86_400.0,
        "--duration must be more than 0 and at most 86400 seconds"
    );
    let c = &args.cluster;
    let (delta_r_ms, delta_g_ms) = c.net.intervals_ms()?;
    let spec = BenchSpec {
        protocol: c.protocol,
        dcs: c.dcs,
        partitions: c.partitions,
        replication: c.replication,
        deployment: Deployment::Embedded,
        clients_per_partition: args.clients.clients,
        clients_per_dc: None,
        workload: WorkloadConfig {
            reads_per_txn: args.reads,
            writes_per_txn: args.writes,
            keys_per_partition: args.keys,
            zipf: args.zipf,
            ..WorkloadConfig::default()
        },
        value_size: 1,
        warmup: Duration::ZERO,
        duration: Duration::from_secs_f64(args.duration),
        wan: c.net.wan()?,
        skew_ms: 0.0,
        delta_r_ms,
        delta_g_ms,
        seed: args.seed,
        record: true,
        visibility_interval: Duration::from_millis(10),
        preload: false,
        // Geo-SDUR's replica groups and log (the flags mean nothing to the others).
        groups: c.ordered.groups(c.dcs, c.partitions)?,
        ordered: c.ordered.tuning(c.net.model()?.as_ref(), c.dcs)?,
        ..BenchSpec::default()
    };
    spec.validate().map_err(anyhow::Error::msg)?;
    // Checked before the run: a path that cannot be written fails now.
    let out = args.history.as_deref().map(|p| OutputFile::open(p, "--history")).transpose()?;
    // The temporary directory lives until the demo ends.
    let data_dir = EmbeddedDataDir::new(args.data_dir)?;
    let spec = BenchSpec { data_dir: Some(data_dir.path.clone()), ..spec };
    println!(
        "causeway demo: {} on {} in this process, WAN emulation {}, {} per DC ({} per partition), {} s",
        spec.protocol,
        placed(spec.dcs, spec.partitions, spec.replication),
        if spec.wan.is_some() { "on" } else { "off" },
        count(spec.clients_per_dc(), "client"),
        spec.clients_per_partition,
        args.duration
    );
    println!("  data: {data_dir}");
    let outcome = run_and_summarize(&spec)?;
    let history = outcome.history.expect("the demo records its history");
    if let Some(out) = out {
        verdict::write_history_of(&history, spec.protocol.name(), spec.protocol.guarantee(), out)?;
    }
    // The demo's cluster is healthy: an outage is a failure here, as an
    // error is.
    let ok = verdict::judge(&history, spec.protocol.guarantee())
        && outcome.errors.is_empty()
        && !outcome.report.had_outages()
        && outcome.report.visibility.unfinished == 0;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
