//! `causeway bench`, `causeway sweep` and `causeway plot`: the benchmark
//! harness from the command line (the work is in `causeway-bench`).

use crate::args::{count, placed, ClientArgs, ClusterArgs, NetworkArgs};
use crate::output::{prepare_dir, OutputFile};
use crate::serve::{init_logging, runtime};
use crate::verdict;
use anyhow::{Context, Result};
use causeway_bench::sweep::{self, Sweep};
use causeway_bench::{figures, paper_workload, promptcc_workload, BenchReport, BenchSpec, Deployment};
use causeway_load::Progress;
use causeway_protocol::ProtocolKind;
use causeway_runtime::disk::Fsync;
use causeway_workload::{Locality, SocialMix, TxnShape, WorkloadConfig};
use clap::Args;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

/// Flags every run takes, in `bench` and in `sweep`.
#[derive(Args, Debug, Clone)]
pub struct RunFlags {
    /// Measured time, in seconds (after the warm-up).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Warm-up, in seconds: transactions run but are not measured.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Run each partition replica as its own `causeway server` process
    /// (this program), talking over loopback TCP; the clients stay here.
    #[arg(long, conflicts_with = "config")]
    processes: bool,
    /// With --processes: the servers link by mutual TLS and serve the
    /// clients over TLS, with certificates made for the run (to measure
    /// what TLS costs). A cluster from --config speaks TLS if its file says so.
    #[arg(long, requires = "processes")]
    tls: bool,
    /// Benchmark a running cluster described by this config file instead
    /// (its protocol, DCs and partitions; nothing is started).
    #[arg(long)]
    config: Option<PathBuf>,
    /// With --config: how the clients log in (a cluster that admits no
    /// anonymous client). The user needs the role admin: the bench reads
    /// the nodes' counters.
    #[command(flatten)]
    login: crate::login::LoginArgs,
    /// Partitions each transaction reads and writes, at most --partitions
    /// [default: 4, or --partitions if fewer; in a sweep, at most each run's
    /// partitions].
    #[arg(long)]
    partitions_per_txn: Option<u32>,
    /// Keys per partition [default: 100,000; 1,000,000 with --workload
    /// sdur-micro, the Geo-SDUR paper's].
    #[arg(long)]
    keys: Option<u32>,
    /// Zipf exponent of key popularity inside a partition (0: uniform); a
    /// sweep takes a comma-separated list (the PrompTCC paper's Figs. 3–4)
    /// [default: 0.99; 0 with --workload sdur-micro, the Geo-SDUR paper's
    /// uniform keys].
    #[arg(long, value_delimiter = ',')]
    zipf: Vec<f64>,
    /// Under partial replication (--replication), LOCAL:MULTI: how many
    /// transactions touch only partitions the client's DC holds against how
    /// many touch random partitions anywhere (the PaRiS paper's 100:0, 95:5,
    /// 90:10, 50:50); a sweep takes a comma-separated list.
    #[arg(long, value_delimiter = ',', default_value = "95:5", value_name = "LOCAL:MULTI")]
    locality: Vec<Locality>,
    /// Bytes per written value [default: 8 for the wren workload, 128 for
    /// promptcc]; a sweep takes a comma-separated list (the PrompTCC
    /// paper's Fig. 2).
    #[arg(long, value_delimiter = ',')]
    value_size: Vec<usize>,
    /// Whose transactions: the Wren paper's (reads then writes: --reads,
    /// --writes over --partitions-per-txn), the PrompTCC paper's (each
    /// either reads or writes --keys-per-txn keys drawn by zipf from the
    /// whole key space; --write-fraction of them write), or the Geo-SDUR
    /// paper's: sdur-micro (two reads then two writes of the same keys, in
    /// the client's home partition or, --global-fraction of them, one there
    /// and one in another; 4-byte values) or social (its social network:
    /// 85 % timelines, 7.5 % posts, 7.5 % follows of which half global,
    /// --users per partition).
    #[arg(long, value_enum, default_value = "wren")]
    workload: WorkloadArg,
    /// Share of global transactions, with --workload sdur-micro (the paper:
    /// 0, 0.01, 0.1, 0.5); a sweep takes a comma-separated list (Fig. 2).
    #[arg(long, value_delimiter = ',', default_value = "0.1")]
    global_fraction: Vec<f64>,
    /// Users per partition, with --workload social (the paper: 100,000).
    #[arg(long, default_value_t = 100_000)]
    users: u32,
    /// Keys each transaction reads or writes, with --workload promptcc (the
    /// paper: 5; 2 to 64); a sweep takes a comma-separated list (Fig. 5).
    #[arg(long, value_delimiter = ',', default_value = "5")]
    keys_per_txn: Vec<u32>,
    /// Share of transactions that write, with --workload promptcc (the
    /// paper: 0.1; 0.01 to 0.5); a sweep takes a comma-separated list
    /// (Fig. 6).
    #[arg(long, value_delimiter = ',', default_value = "0.1")]
    write_fraction: Vec<f64>,
    /// Emulated clock skew: each replica's clock is off by a fixed amount in
    /// [-skew/2, +skew/2] ms (one machine has one clock; real clusters don't).
    #[arg(long, default_value_t = 0.0)]
    skew_ms: f64,
    /// Seed of the workload's random choices and of the clock offsets.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every key once before the warm-up, so reads find values (as
    /// the paper's loaded stores did); not with --history.
    #[arg(long)]
    preload: bool,
    /// How often every node is asked for its stable times to measure
    /// update visibility, in ms (up to 16). Each answer carries the
    /// replicas' changes of the last 16 ms or more, with their times, so
    /// visibility is timed to within 0.5 ms; a shorter interval costs the
    /// servers more polls, a longer one leaves gaps timed late.
    #[arg(long, default_value_t = 10.0)]
    visibility_interval_ms: f64,
    /// Keep the started cluster's logs in this directory (server processes:
    /// one directory each under it), as a server with a data_dir does; it
    /// must be empty or new. Without it the cluster keeps nothing on disk.
    #[arg(long, conflicts_with = "config")]
    data_dir: Option<PathBuf>,
    /// When the logs count as durable: always (a commit is acknowledged
    /// once on disk), batch (synced every few ms) or never; needs --data-dir.
    #[arg(long, requires = "data_dir", value_parser = parse_fsync)]
    fsync: Option<Fsync>,
}

/// The transactions of a run ([`RunFlags::workload`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadArg {
    Wren,
    Promptcc,
    /// The Geo-SDUR paper's microbenchmark.
    SdurMicro,
    /// The Geo-SDUR paper's social network.
    Social,
}

fn parse_fsync(s: &str) -> Result<Fsync, String> {
    s.parse()
}

impl RunFlags {
    /// A run has one of each value a sweep takes a list of.
    fn one_each(&self) -> Result<()> {
        for (flag, n) in [
            ("--locality", self.locality.len()),
            ("--zipf", self.zipf.len().max(1)),
            ("--global-fraction", self.global_fraction.len()),
            ("--value-size", self.value_size.len().max(1)),
            ("--keys-per-txn", self.keys_per_txn.len()),
            ("--write-fraction", self.write_fraction.len()),
        ] {
            anyhow::ensure!(n == 1, "{flag}: a run has one (a list is for `causeway sweep`)");
        }
        Ok(())
    }

    /// The workload parameters a sweep varies, each list as given (empty:
    /// the base run's value).
    fn variants(&self) -> causeway_bench::sweep::Variants {
        let promptcc = self.workload == WorkloadArg::Promptcc;
        causeway_bench::sweep::Variants {
            value_sizes: self.value_size.clone(),
            zipfs: self.zipf.clone(),
            keys_per_txn: if promptcc || self.keys_per_txn.len() > 1 { self.keys_per_txn.clone() } else { vec![] },
            write_fractions: if promptcc || self.write_fraction.len() > 1 {
                self.write_fraction.clone()
            } else {
                vec![]
            },
            global_fractions: if self.workload == WorkloadArg::SdurMicro || self.global_fraction.len() > 1 {
                self.global_fraction.clone()
            } else {
                vec![]
            },
        }
    }

    fn spec(&self, net: &NetworkArgs) -> Result<BenchSpec> {
        let secs = |v: f64, flag: &str| -> Result<Duration> {
            anyhow::ensure!(
                v.is_finite() && (0.0..=86_400.0).contains(&v),
                "{flag} must be 0 to 86400 seconds, got {v}"
            );
            Ok(Duration::from_secs_f64(v))
        };
        let deployment = match (&self.config, self.processes) {
            (Some(path), _) => Deployment::Config(path.clone()),
            (None, true) => Deployment::Processes {
                exe: std::env::current_exe().context("cannot find this program to start server processes")?,
            },
            (None, false) => Deployment::Embedded,
        };
        anyhow::ensure!(
            self.login.user.is_none() || self.config.is_some(),
            "--user logs in to a running cluster (--config); the clusters a bench starts admit its clients"
        );
        if let Some(dir) = &self.data_dir {
            // A benchmark measures a fresh store: logs of an earlier run
            // would be recovered (or refused as another cluster's).
            let used = std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(false);
            anyhow::ensure!(!used, "--data-dir {} is not empty: give a new or empty directory", dir.display());
        }
        let (delta_r_ms, delta_g_ms) = net.intervals_ms()?;
        for g in &self.global_fraction {
            anyhow::ensure!(
                (0.0..=1.0).contains(g),
                "--global-fraction must be between 0 and 1 (the paper: 0, 0.01, 0.1, 0.5), got {g}"
            );
        }
        let first = |v: &[f64]| v.first().copied().unwrap_or_default();
        let mut workload = match self.workload {
            WorkloadArg::Wren => paper_workload(19, 1),
            // Checked with the rest of the spec (BenchSpec::validate).
            WorkloadArg::Promptcc => {
                promptcc_workload(self.keys_per_txn.first().copied().unwrap_or(5), first(&self.write_fraction))
            }
            WorkloadArg::SdurMicro => WorkloadConfig::sdur_micro(first(&self.global_fraction)),
            WorkloadArg::Social => WorkloadConfig::social(self.users, SocialMix::default()),
        };
        // The Geo-SDUR paper's: a million uniform keys per partition, 4-byte
        // values; the Wren paper's otherwise.
        let (keys, zipf, value_size) = match self.workload {
            WorkloadArg::SdurMicro => (1_000_000, 0.0, 4),
            WorkloadArg::Social => (self.users, 0.0, 8),
            WorkloadArg::Wren => (100_000, 0.99, 8),
            WorkloadArg::Promptcc => (100_000, 0.99, 128),
        };
        if self.workload != WorkloadArg::Social {
            workload.keys_per_partition = self.keys.unwrap_or(keys);
        }
        if !matches!(self.workload, WorkloadArg::SdurMicro | WorkloadArg::Social) {
            workload.partitions_per_txn = self.partitions_per_txn.unwrap_or(4);
        }
        workload.zipf = self.zipf.first().copied().unwrap_or(zipf);
        workload.multi_dc_fraction = self.locality.first().copied().unwrap_or_default().multi_dc_fraction();
        Ok(BenchSpec {
            deployment,
            workload,
            value_size: self.value_size.first().copied().unwrap_or(value_size),
            warmup: secs(self.warmup, "--warmup")?,
            duration: secs(self.duration, "--duration")?,
            wan: net.wan()?,
            skew_ms: self.skew_ms,
            delta_r_ms,
            delta_g_ms,
            seed: self.seed,
            preload: self.preload,
            visibility_interval: secs(self.visibility_interval_ms / 1000.0, "--visibility-interval-ms")?,
            data_dir: self.data_dir.clone(),
            fsync: self.fsync.unwrap_or_default(),
            tls: self.tls,
            credentials: self.login.credentials()?,
            ..BenchSpec::default()
        })
    }
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    clients: ClientArgs,
    /// Closed-loop clients per DC instead of per partition (for loads below
    /// one client per partition).
    #[arg(long, conflicts_with = "clients")]
    clients_per_dc: Option<u32>,
    /// Reads per transaction (the paper: 19, 18 or 10).
    #[arg(long, default_value_t = 19)]
    reads: u32,
    /// Writes per transaction (the paper: 1, 2 or 10).
    #[arg(long, default_value_t = 1)]
    writes: u32,
    #[command(flatten)]
    run: RunFlags,
    /// Write the report as JSON to this file (fields: docs/BENCHMARKS.md).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Record the history, write it to this file and check it.
    #[arg(long)]
    history: Option<PathBuf>,
    /// Name every key the run reads and writes PREFIXk0, PREFIXk1, … Against
    /// a running cluster (--config) the default is a prefix of this run's
    /// own, so the run neither overwrites other data nor reads another
    /// run's (its history would not know those values); in a cluster the
    /// run starts, no prefix.
    #[arg(long, value_name = "PREFIX")]
    key_prefix: Option<String>,
    /// Count the system calls of the servers and of the clients over the
    /// measured time, per transaction (read, write, epoll, futex, all),
    /// with `perf stat` on the kernel's tracepoints: needs `perf` installed
    /// and root (or kernel.perf_event_paranoid = -1). It costs the traced
    /// processes a little: compare runs that both count.
    #[arg(long)]
    syscalls: bool,
}

/// A live progress line on a terminal, a line every 5 s otherwise.
pub fn progress(prefix: String) -> impl FnMut(Progress) + Send {
    let terminal = std::io::stderr().is_terminal();
    move |p: Progress| {
        let line = format!(
            "{prefix}{:>5.1} s {} {:>9} committed  {:>8.0} txn/s  mean latency {:.2} ms",
            p.elapsed.as_secs_f64(),
            if p.warming_up { "warm-up  " } else { "measuring" },
            p.committed,
            p.throughput,
            p.mean_latency_ms
        );
        if terminal {
            eprint!("\r\x1b[2K{line}");
        } else if p.elapsed.as_secs().is_multiple_of(5) {
            eprintln!("{line}");
        }
    }
}

/// One run with a progress line, then its summary and first errors printed.
pub fn run_and_summarize(spec: &BenchSpec) -> Result<causeway_bench::Outcome> {
    let rt = runtime_for(&spec.deployment)?;
    let outcome = rt.block_on(causeway_bench::run(spec, progress("  ".into())));
    clear_progress();
    let outcome = outcome?;
    print!("{}", outcome.report.summary());
    for e in outcome.errors.iter().take(5) {
        println!("    error: {e}");
    }
    Ok(outcome)
}

/// The runtime of a run's clients: with the servers elsewhere, one thread
/// (tokio's current-thread scheduler), so that a client's answer, its next
/// request and the progress line wake no other thread (a futex, and an
/// eventfd write to wake the reactor, per transaction otherwise); the
/// clients of an embedded cluster share its threads.
fn runtime_for(deployment: &Deployment) -> Result<tokio::runtime::Runtime> {
    match deployment {
        Deployment::Embedded => runtime(),
        Deployment::Processes { .. } | Deployment::Config(_) => crate::serve::runtime_with(Some(1)),
    }
}

fn clear_progress() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
}

/// The run in one line: `wren on 3 DCs × 4 partitions in this process, …`.
fn describe(spec: &BenchSpec) -> String {
    let w = &spec.workload;
    let cluster = placed(spec.dcs, spec.partitions, spec.replication);
    let place = match &spec.deployment {
        Deployment::Embedded => format!("{cluster} in this process"),
        Deployment::Processes { .. } if spec.tls => format!("{cluster}, one server process per replica, over TLS"),
        Deployment::Processes { .. } => format!("{cluster}, one server process per replica"),
        Deployment::Config(path) => format!("the running cluster of {} ({cluster})", path.display()),
    };
    let disk = match &spec.data_dir {
        Some(dir) => format!(", logs in {} (fsync = {})", dir.display(), spec.fsync.name()),
        None => String::new(),
    };
    let txns = match w.shape {
        TxnShape::ReadThenWrite => format!(
            "{}+{} per txn over {}",
            w.reads_per_txn,
            w.writes_per_txn,
            count(w.partitions_per_txn.min(spec.partitions), "partition")
        ),
        TxnShape::ReadOrWrite => {
            format!("{} keys read or written per txn ({:.0} % write)", w.reads_per_txn, w.write_fraction() * 100.0)
        }
        TxnShape::SdurMicro { .. } => format!(
            "Geo-SDUR microbenchmark ({} reads then the same writes, {} % global)",
            w.reads_per_txn,
            w.shape.global_fraction().unwrap_or(0.0) * 100.0
        ),
        TxnShape::Social(_) => format!("Geo-SDUR social network ({} users per partition)", w.keys_per_partition),
    };
    let keys = match w.shape {
        TxnShape::Social(_) => String::new(),
        _ => format!(", {} keys per partition, zipf {}, {}-byte values", w.keys_per_partition, w.zipf, spec.value_size),
    };
    let ordered = if spec.protocol == ProtocolKind::Sdur {
        let delay = spec.delay().map_or("off".to_string(), |d| if d == "rtt" { d } else { format!("{d} ms") });
        format!(", members {}, reordering {}, delaying {delay}", spec.members_spec(), spec.ordered.reorder_threshold)
    } else {
        String::new()
    };
    format!(
        "{} on {place}{ordered}, WAN emulation {}, {} per DC, {txns}{keys}, warm-up {} s, measured {} s{disk}",
        spec.protocol,
        if spec.wan.is_some() { "on" } else { "off" },
        count(spec.clients_per_dc(), "client"),
        spec.warmup.as_secs_f64(),
        spec.duration.as_secs_f64()
    )
}

fn write_json(out: OutputFile, report: &BenchReport) -> Result<()> {
    let path = out.path().display().to_string();
    out.write(|w| serde_json::to_writer_pretty(w, report).map_err(std::io::Error::from))?;
    println!("  report         {path}");
    Ok(())
}

pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    init_logging();
    args.run.one_each()?;
    let mut spec = args.run.spec(&args.cluster.net)?;
    spec.protocol = args.cluster.protocol;
    spec.dcs = args.cluster.dcs;
    spec.partitions = args.cluster.partitions;
    spec.replication = args.cluster.replication;
    spec.clients_per_partition = args.clients.clients;
    spec.clients_per_dc = args.clients_per_dc;
    // Geo-SDUR's replica groups and log (the flags mean nothing to the others).
    let c = &args.cluster;
    spec.groups = c.ordered.groups(c.dcs, c.partitions)?;
    spec.ordered = c.ordered.tuning(c.net.model()?.as_ref(), c.dcs)?;
    if args.run.workload == WorkloadArg::Wren {
        spec.workload.reads_per_txn = args.reads;
        spec.workload.writes_per_txn = args.writes;
    }
    if args.run.workload == WorkloadArg::SdurMicro && (args.reads, args.writes) != (19, 1) {
        // Keys read, then written: one number.
        spec.workload.reads_per_txn = args.reads;
        spec.workload.writes_per_txn = args.reads;
    }
    spec.record = args.history.is_some();
    spec.syscalls = args.syscalls;
    spec.key_prefix = args.key_prefix.clone();
    if let Deployment::Config(path) = &spec.deployment {
        // The cluster's own shape, for the summary.
        let plan = causeway_runtime::config::load(path)?;
        spec.protocol = plan.protocol;
        spec.dcs = plan.topology.dc_count();
        spec.partitions = plan.topology.partition_count();
        spec.replication = (!plan.topology.is_fully_replicated()).then(|| plan.topology.replication());
        spec.wan = plan.wan.is_some().then_some(None);
    }
    if let Some(p) = args.run.partitions_per_txn.filter(|p| *p > spec.partitions) {
        anyhow::bail!(
            "--partitions-per-txn {p}: a transaction can touch at most the cluster's {} (--partitions)",
            count(spec.partitions, "partition")
        );
    }
    spec.validate().map_err(anyhow::Error::msg)?;
    // Checked before the run: a path that cannot be written fails now.
    let json = args.json.as_deref().map(|p| OutputFile::open(p, "--json")).transpose()?;
    let history = args.history.as_deref().map(|p| OutputFile::open(p, "--history")).transpose()?;
    println!("causeway bench: {}", describe(&spec));
    let prefix = spec.key_prefix();
    if args.key_prefix.is_some() {
        println!("  writes keys under {prefix:?} only (--key-prefix)");
    } else if !prefix.is_empty() {
        println!("  writes keys under {prefix:?} only, a prefix of this run's own (--key-prefix chooses another)");
    }
    if spec.preload {
        let keys = u64::from(spec.workload.keys_per_partition) * u64::from(spec.partitions);
        eprintln!("  preloading {keys} keys…");
    }
    let outcome = run_and_summarize(&spec)?;
    if let Some(out) = json {
        write_json(out, &outcome.report)?;
    }
    let mut ok = outcome.errors.is_empty();
    if let (Some(h), Some(out)) = (&outcome.history, history) {
        verdict::write_history_of(h, spec.protocol.name(), spec.protocol.guarantee(), out)?;
        ok &= verdict::judge(h, spec.protocol.guarantee());
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// A read:write mix, `19:1`.
#[derive(Clone, Copy, Debug)]
pub struct Mix(u32, u32);

impl FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Mix, String> {
        let (r, w) = s.split_once(':').ok_or_else(|| format!("{s:?} is not READS:WRITES, like 19:1"))?;
        let n = |x: &str| x.trim().parse::<u32>().map_err(|_| format!("{s:?} is not READS:WRITES, like 19:1"));
        Ok(Mix(n(r)?, n(w)?))
    }
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Protocols to compare, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "wren,cure,h-cure")]
    protocols: Vec<ProtocolKind>,
    /// Closed-loop clients per partition in each DC, comma-separated: the
    /// load steps of each curve.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    clients: Vec<u32>,
    /// Clients per DC instead, comma-separated (loads below one client per
    /// partition, where a small machine is not yet saturated).
    #[arg(long, value_delimiter = ',', conflicts_with = "clients")]
    clients_per_dc: Vec<u32>,
    /// Partitions per DC, comma-separated (more than one draws the scaling figure).
    #[arg(long, value_delimiter = ',', default_value = "4")]
    partitions: Vec<u32>,
    /// Data centers, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "3")]
    dcs: Vec<u16>,
    /// Partial replication: each partition in this many DCs, in every run
    /// (paris and bpr only; at most the fewest --dcs).
    #[arg(long, value_name = "R")]
    replication: Option<u16>,
    /// Reads:writes per transaction, comma-separated (the paper: 19:1, 18:2, 10:10).
    #[arg(long, value_delimiter = ',', default_value = "19:1")]
    mix: Vec<Mix>,
    /// Geo-SDUR's replica groups (sdur), as `causeway bench --members`
    /// takes them; repeat the flag to compare placements (the paper's WAN 1
    /// and WAN 2: `--members 2,2,1/0,0,1 --members 0,1,2/0,1,2`).
    #[arg(long = "members", value_name = "wan1|wan2|SPEC")]
    members: Vec<String>,
    /// Reordering thresholds (sdur), comma-separated (the paper: 80, 160,
    /// 320; 0: off).
    #[arg(long, value_delimiter = ',', value_name = "POSITIONS")]
    reorder: Vec<u64>,
    /// Delays of global transactions (sdur), comma-separated: milliseconds
    /// or `rtt` (the paper: 20, 40, 60; 0: off).
    #[arg(long, value_delimiter = ',', value_name = "MS|rtt")]
    delay_ms: Vec<String>,
    /// Run the whole series this many times, one round after the other, so
    /// that the runs compared alternate; figures take each setting's
    /// median.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    #[command(flatten)]
    net: NetworkArgs,
    #[command(flatten)]
    run: RunFlags,
    /// Directory for the reports (runs/*.json, sweep.json) and the figures.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

pub fn sweep(args: SweepArgs) -> Result<ExitCode> {
    init_logging();
    anyhow::ensure!(args.run.config.is_none(), "a sweep starts its own clusters; --config is for `causeway bench`");
    if let Some(r) = args.replication {
        let fewest = args.dcs.iter().copied().min().unwrap_or(0);
        anyhow::ensure!(
            (1..=fewest).contains(&r),
            "--replication {r}: each partition must live in 1 to {fewest} DCs (the fewest of --dcs)"
        );
        // A protocol that refuses partial replication says so now, not
        // run by run.
        let partitions = args.partitions.iter().copied().max().unwrap_or(1);
        let topology = causeway_protocol::Topology::round_robin(fewest, partitions, r).map_err(anyhow::Error::msg)?;
        for p in &args.protocols {
            p.check(&topology, &causeway_protocol::Tuning::default()).map_err(anyhow::Error::msg)?;
        }
    }
    if args.run.locality.len() > 1 {
        // At R = M every DC holds every partition: the locality means nothing.
        let full = args.dcs.iter().find(|&&d| args.replication.is_none_or(|r| r >= d));
        anyhow::ensure!(
            full.is_none(),
            "--locality varies only what partial replication serves from other DCs: give --replication R \
             below every --dcs (at {} DCs every DC would hold every partition)",
            full.copied().unwrap_or(0)
        );
    }
    let mut base = args.run.spec(&args.net)?;
    base.replication = args.replication;
    anyhow::ensure!((1..=100).contains(&args.rounds), "--rounds must be 1 to 100");
    let ordered = ordered_variants(&args)?;
    let sweep = Sweep {
        base,
        protocols: args.protocols,
        clients: args.clients,
        clients_per_dc: args.clients_per_dc,
        partitions: args.partitions,
        dcs: args.dcs,
        mixes: args.mix.iter().map(|m| (m.0, m.1)).collect(),
        multi_dc: args.run.locality.iter().map(|l| l.multi_dc_fraction()).collect(),
        variants: args.run.variants(),
        ordered,
        rounds: args.rounds,
    };
    sweep.validate().map_err(anyhow::Error::msg)?;
    // Checked before the runs: a directory that cannot be written fails now.
    prepare_dir(&args.out, "--out")?;
    let specs = sweep.specs();
    let per_run = sweep.base.warmup + sweep.base.duration;
    println!(
        "causeway sweep: {} runs of {:.0} s each (about {:.0} min with start-up), into {}",
        specs.len(),
        per_run.as_secs_f64(),
        (per_run.as_secs_f64() + 3.0) * specs.len() as f64 / 60.0,
        args.out.display()
    );
    let rt = match specs.first() {
        Some(spec) if specs.iter().all(|s| s.deployment == spec.deployment) => runtime_for(&spec.deployment)?,
        _ => runtime()?,
    };
    let mut reports = Vec::new();
    let mut failed = 0;
    for (i, spec) in specs.iter().enumerate() {
        println!("[{}/{}] {}", i + 1, specs.len(), describe(spec));
        let outcome = rt.block_on(causeway_bench::run(spec, progress(format!("  [{}/{}] ", i + 1, specs.len()))));
        clear_progress();
        match outcome {
            Ok(o) => {
                let r = &o.report;
                println!(
                    "  {:.0} txn/s, mean latency {:.2} ms, read wait {:.3} ms, {} errors",
                    r.throughput_tps, r.latency_mean_ms, r.reads.wait_mean_ms, r.errors
                );
                for (class, c) in &r.txn_classes.0 {
                    println!(
                        "    {class:<14} {:.0} txn/s, latency mean {:.1} ms, p99 {:.1} ms ({} committed, {} aborted)",
                        c.throughput_tps, c.latency.mean_ms, c.latency.p99_ms, c.committed, c.aborted
                    );
                }
                if r.errors > 0 {
                    for e in o.errors.iter().take(3) {
                        println!("    error: {e}");
                    }
                }
                sweep::save_run(&args.out, r)?;
                reports.push(o.report);
            }
            Err(e) => {
                failed += 1;
                println!("  failed: {e:#}");
            }
        }
    }
    sweep::save(&args.out, &reports)?;
    let files = figures::draw_all(&reports, &args.out)?;
    println!("  {} reports in {}/sweep.json; figures:", reports.len(), args.out.display());
    for f in files {
        println!("    {}", f.display());
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The Geo-SDUR settings a sweep varies, parsed as `bench` parses each.
fn ordered_variants(args: &SweepArgs) -> Result<causeway_bench::sweep::OrderedVariants> {
    use crate::args::OrderedArgs;
    let one = |flag: &str, n: usize| {
        anyhow::ensure!(
            n == 1,
            "{flag} lists go with one --dcs and one --partitions (the placement names each member)"
        );
        Ok(())
    };
    let mut members = Vec::new();
    if !args.members.is_empty() {
        one("--members", args.dcs.len().max(args.partitions.len()))?;
        for spec in &args.members {
            let o = OrderedArgs { members: Some(spec.clone()), ..OrderedArgs::default() };
            members.push(o.groups(args.dcs[0], args.partitions[0])?);
        }
    }
    let model = args.net.model()?;
    let dcs = args.dcs.iter().copied().max().unwrap_or(1);
    let mut delays = Vec::new();
    for d in &args.delay_ms {
        // The timing is bench's default; only the delay is read here.
        let o = OrderedArgs {
            delay_ms: Some(d.clone()),
            heartbeat_ms: 50.0,
            election_ms: 1000.0,
            bloom_history: 10_000,
            ..OrderedArgs::default()
        };
        delays.push(o.tuning(model.as_ref(), dcs)?.delaying);
    }
    Ok(causeway_bench::sweep::OrderedVariants { members, delays, reorders: args.reorder.clone() })
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// A sweep's output directory (with sweep.json); several draw their
    /// runs together (sweeps of different DC counts, say, on one figure).
    #[arg(required = true, num_args = 1..)]
    dirs: Vec<PathBuf>,
    /// Draw the figures into this directory instead of the first DIR
    /// (docs/figures, say: the names are those docs/BENCHMARKS.md shows).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn plot(args: PlotArgs) -> Result<ExitCode> {
    let mut reports = Vec::new();
    for dir in &args.dirs {
        reports.extend(sweep::load(dir)?);
    }
    let out = args.out.as_deref().unwrap_or(&args.dirs[0]);
    prepare_dir(out, if args.out.is_some() { "--out" } else { "DIR" })?;
    for f in figures::draw_all(&reports, out)? {
        println!("{}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}
