//! `causeway sim`: a simulated cluster from flags.

use crate::args::{ClientArgs, ClusterArgs};
use crate::output::OutputFile;
use crate::verdict;
use anyhow::{bail, Result};
use causeway_protocol::{Protocol, ProtocolVisitor, Topology, Tuning};
use causeway_sim::{
    random_crashes, Crash, CrashTarget, Cut, Faults, LatencySpikes, Progress, SimConfig, Simulation, TransportFaults,
};
use causeway_workload::{Locality, WanModel, WorkloadConfig, WorkloadKind};
use clap::{Args, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WorkloadName {
    /// Random keys: reads, then writes, over a few partitions per transaction.
    Random,
    /// Atomicity invariant: each update writes one value to a whole group of keys.
    Groups,
    /// The PrompTCC paper's: each transaction reads or writes --keys-per-txn
    /// keys drawn by zipf from the whole key space; --write-fraction write.
    Promptcc,
}

/// A crash and its restart: `DC:PARTITION:START_MS-END_MS`,
/// `DC:PARTITION.MEMBER:START_MS-END_MS` for another member of a replica
/// group in that DC, `DC:*:START_MS-END_MS` for a whole DC, or
/// `leader:PARTITION:START_MS-END_MS` for whichever member leads the
/// partition's group then.
#[derive(Clone, Copy, Debug)]
pub struct CrashArg(Crash);

impl FromStr for CrashArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            format!(
                "expected DC:PARTITION:START_MS-END_MS, DC:PARTITION.MEMBER:…, DC:*:… or leader:PARTITION:…, got {s:?}"
            )
        };
        let mut parts = s.splitn(3, ':');
        let (dc, partition, span) = match (parts.next(), parts.next(), parts.next()) {
            (Some(d), Some(p), Some(span)) => (d, p, span),
            _ => return Err(usage()),
        };
        let number = |p: &str| p.trim_start_matches('p').parse::<u32>().map_err(|_| usage());
        let target = if dc == "leader" {
            CrashTarget::Leader { partition: number(partition)? }
        } else {
            let dc: u16 = dc.trim_start_matches("dc").parse().map_err(|_| usage())?;
            match partition.split_once('.') {
                _ if partition == "*" => CrashTarget::Dc(dc),
                Some((p, m)) => {
                    let member: u8 = m.parse().map_err(|_| usage())?;
                    let partition = causeway_protocol::PartitionId(number(p)?);
                    CrashTarget::Member(causeway_protocol::ReplicaId {
                        dc: causeway_protocol::DcId(dc),
                        partition,
                        member,
                    })
                }
                None => CrashTarget::Replica { dc, partition: number(partition)? },
            }
        };
        let (start, end) = span.split_once('-').ok_or_else(usage)?;
        let start: f64 = start.parse().map_err(|_| usage())?;
        let end: f64 = end.parse().map_err(|_| usage())?;
        if !(start >= 0.0 && end > start) {
            return Err(format!("the replica must restart after it crashes: {s:?}"));
        }
        let at_us = (start * 1000.0) as u64;
        let down_us = (end * 1000.0) as u64 - at_us;
        Ok(CrashArg(Crash { target, at_us, down_us, comes_back: Default::default() }))
    }
}

/// A DC cut off from the others for an interval: `DC:START_MS-END_MS`.
#[derive(Clone, Copy, Debug)]
pub struct CutArg(Cut);

impl FromStr for CutArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || format!("expected DC:START_MS-END_MS (for example 1:200-900), got {s:?}");
        let (dc, span) = s.split_once(':').ok_or_else(usage)?;
        let (start, end) = span.split_once('-').ok_or_else(usage)?;
        let dc: u16 = dc.trim_start_matches("dc").parse().map_err(|_| usage())?;
        let start: f64 = start.parse().map_err(|_| usage())?;
        let end: f64 = end.parse().map_err(|_| usage())?;
        if !(start >= 0.0 && end > start) {
            return Err(format!("the cut must end after it starts: {s:?}"));
        }
        Ok(CutArg(Cut { dc, start_us: (start * 1000.0) as u64, end_us: (end * 1000.0) as u64 }))
    }
}

/// Transactions a run stops after when neither --txns nor --duration-ms is given.
const DEFAULT_TXNS: u64 = 10_000;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    clients: ClientArgs,
    /// Stop after this many transactions have finished (with neither --txns
    /// nor --duration-ms: after 10000 transactions).
    #[arg(long, conflicts_with = "duration_ms")]
    txns: Option<u64>,
    /// Stop after this much simulated time, in milliseconds.
    #[arg(long)]
    duration_ms: Option<u64>,
    /// Seed of the run: the same seed gives the same history, byte for byte.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Clock skew: node clock offsets are drawn from ±SKEW/2 milliseconds.
    /// With the drift over --duration-ms, less than 500 (half the commit
    /// timeout: the clocks of a DC must agree within it).
    #[arg(long, default_value_t = 10.0)]
    skew_ms: f64,
    /// Clock drift: drawn from ±DRIFT parts per million.
    #[arg(long, default_value_t = 50)]
    drift_ppm: u32,
    /// Cut a DC off from the others: DC:START_MS-END_MS of simulated time (repeatable).
    #[arg(long = "cut", value_name = "DC:START_MS-END_MS")]
    cuts: Vec<CutArg>,
    /// Crash a replica (or a whole DC with `*`) and restart it from what
    /// it had made durable: DC:PARTITION:START_MS-END_MS (repeatable);
    /// DC:PARTITION.MEMBER:… for another member of a replica group in that
    /// DC, leader:PARTITION:… for whichever member leads its group then.
    #[arg(long = "crash", value_name = "DC:PARTITION:START_MS-END_MS")]
    crash: Vec<CrashArg>,
    /// Crash this many random replicas (a whole DC one time in five), drawn
    /// from the seed, within the first 500 ms (or the duration).
    #[arg(long, default_value_t = 0)]
    crashes: u32,
    /// Below the FIFO links: the chance that a packet arrives twice.
    #[arg(long, default_value_t = 0.0)]
    duplicate_prob: f64,
    /// Below the FIFO links: the chance that a packet is overtaken.
    #[arg(long, default_value_t = 0.0)]
    reorder_prob: f64,
    /// Below the FIFO links: the chance that a packet is lost and resent.
    #[arg(long, default_value_t = 0.0)]
    loss_prob: f64,
    /// Arm the protocols' fault points (rare but legal behaviour: skipped
    /// rounds, late reports), drawn from the seed.
    #[arg(long)]
    buggify: bool,
    /// Fault injection: the chance that a message is delayed by a latency spike.
    #[arg(long, default_value_t = 0.0)]
    spike_prob: f64,
    /// The longest latency spike, in milliseconds.
    #[arg(long, default_value_t = 20.0)]
    spike_max_ms: f64,
    /// Bytes of replication groups a replica keeps in memory for its peers
    /// in other DCs, in KiB, before it spills the oldest to its disk
    /// ([peers] max_kept_mb of a server); small values exercise the spill
    /// and its read-back when a cut heals.
    #[arg(long, default_value_t = 65_536, value_name = "KIB")]
    max_kept_kb: u64,
    /// Write the history (JSON Lines) to this file.
    #[arg(long, value_name = "FILE")]
    history: Option<PathBuf>,
    /// Workload kind.
    #[arg(long, value_enum, default_value = "random")]
    workload: WorkloadName,
    /// Reads per transaction.
    #[arg(long, default_value_t = 19)]
    reads: u32,
    /// Writes per update transaction.
    #[arg(long, default_value_t = 1)]
    writes: u32,
    /// Partitions each transaction touches, at most --partitions [default:
    /// 4, or --partitions if fewer].
    #[arg(long)]
    partitions_per_txn: Option<u32>,
    /// Keys per partition.
    #[arg(long, default_value_t = 1000)]
    keys: u32,
    /// Zipf constant of key popularity (0 for uniform).
    #[arg(long, default_value_t = 0.99)]
    zipf: f64,
    /// Under partial replication (--replication), LOCAL:MULTI: how many
    /// transactions touch only partitions the client's DC holds against how
    /// many touch random partitions anywhere (the PaRiS paper's 100:0, 95:5,
    /// 90:10, 50:50).
    #[arg(long, default_value = "95:5", value_name = "LOCAL:MULTI")]
    locality: Locality,
    /// Fraction of read-only transactions.
    #[arg(long, default_value_t = 0.1)]
    read_only: f64,
    /// Fraction of update transactions the client aborts.
    #[arg(long, default_value_t = 0.02)]
    aborts: f64,
    /// Fraction of writes that delete their key instead (tombstones,
    /// replicated and collected like versions).
    #[arg(long, default_value_t = 0.0)]
    deletes: f64,
    /// Key groups of the `groups` workload.
    #[arg(long, default_value_t = 20)]
    groups: u32,
    /// Keys each transaction reads or writes (the `promptcc` workload).
    #[arg(long, default_value_t = 5)]
    keys_per_txn: u32,
    /// Share of transactions that write (the `promptcc` workload).
    #[arg(long, default_value_t = 0.1)]
    write_fraction: f64,
}

/// A one-line progress display on a terminal; nothing when piped.
fn show_progress(p: Progress) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    let target = match (p.target_txns, p.target_sim_time_us) {
        (Some(n), _) => format!("{} / {n} transactions", p.finished_txns),
        (None, Some(d)) => format!("{:.2} / {:.2} simulated s", p.sim_time_us as f64 / 1e6, d as f64 / 1e6),
        (None, None) => format!("{} transactions", p.finished_txns),
    };
    let phase = if p.settling { " (settling)" } else { "" };
    eprint!("\r\x1b[2Ksimulating: {target}{phase}");
}

fn micros(ms: f64, what: &str) -> Result<u64> {
    if !(ms.is_finite() && ms >= 0.0) {
        bail!("{what} must be a non-negative number of milliseconds");
    }
    Ok((ms * 1000.0).round() as u64)
}

/// The faults the flags ask for.
fn faults(args: &SimArgs) -> Result<Faults> {
    let mut crashes: Vec<Crash> = args.crash.iter().map(|c| c.0).collect();
    if args.crashes > 0 {
        let window_us = args.duration_ms.map_or(500_000, |ms| ms * 1000);
        let c = &args.cluster;
        let topology = Topology::placed(c.dcs, c.partitions, c.replication).map_err(anyhow::Error::msg)?;
        crashes.extend(random_crashes(args.seed, &topology, args.crashes, window_us));
    }
    let (dup, reorder, loss) = (args.duplicate_prob, args.reorder_prob, args.loss_prob);
    let transport = (dup > 0.0 || reorder > 0.0 || loss > 0.0).then(|| TransportFaults {
        duplicate: dup,
        reorder,
        loss,
        ..TransportFaults::default()
    });
    Ok(Faults { crashes, transport, buggify: args.buggify, ..Faults::default() })
}

/// Runs the simulation with whichever protocol the user picked.
struct RunSim {
    config: SimConfig,
    tuning: Tuning,
}

impl ProtocolVisitor for RunSim {
    type Output = Result<causeway_sim::SimReport>;
    fn visit<P: Protocol>(self) -> Self::Output {
        Ok(Simulation::<P>::new(self.config, &P::configure(&self.tuning))?.with_progress(show_progress).run())
    }
}

/// The partitions each transaction touches: as asked, at most every
/// partition; by default 4, or every partition if there are fewer.
fn partitions_per_txn(args: &SimArgs) -> Result<u32> {
    let partitions = args.cluster.partitions;
    match args.partitions_per_txn {
        None => Ok(partitions.min(4)),
        Some(0) => bail!("--partitions-per-txn must be at least 1"),
        Some(p) if p > partitions => bail!(
            "--partitions-per-txn {p}: a transaction can touch at most the cluster's {partitions} partitions \
             (--partitions {partitions})"
        ),
        Some(p) => Ok(p),
    }
}

/// `100`, `100.5`: milliseconds of a cut, as the user wrote them.
fn ms(us: u64) -> String {
    format!("{}", us as f64 / 1000.0)
}

pub fn run(args: SimArgs) -> Result<ExitCode> {
    if args.txns == Some(0) {
        bail!("--txns must be at least 1 (without it, a run stops after {DEFAULT_TXNS} transactions)");
    }
    if args.duration_ms == Some(0) {
        bail!("--duration-ms must be at least 1");
    }
    let c = &args.cluster;
    let wan = match c.net.model()? {
        Some(model) => model,
        None => WanModel::default_model().without_wan(c.dcs),
    };
    let workload = match args.workload {
        WorkloadName::Random => WorkloadKind::Random(WorkloadConfig {
            reads_per_txn: args.reads,
            writes_per_txn: args.writes,
            partitions_per_txn: partitions_per_txn(&args)?,
            keys_per_partition: args.keys,
            zipf: args.zipf,
            multi_dc_fraction: args.locality.multi_dc_fraction(),
            read_only_fraction: args.read_only,
            abort_fraction: args.aborts,
            delete_fraction: args.deletes,
            ..WorkloadConfig::default()
        }),
        WorkloadName::Groups => WorkloadKind::Groups { groups: args.groups, read_only_fraction: 0.5 },
        // Checked with the rest of the configuration (WorkloadKind::validate).
        WorkloadName::Promptcc => WorkloadKind::Random(WorkloadConfig {
            keys_per_partition: args.keys,
            zipf: args.zipf,
            ..WorkloadConfig::read_or_write(args.keys_per_txn, args.write_fraction)
        }),
    };
    let txns = match (args.txns, args.duration_ms) {
        (None, None) => Some(DEFAULT_TXNS),
        (t, _) => t,
    };
    let (delta_r_ms, delta_g_ms) = c.net.intervals_ms()?;
    let config = SimConfig {
        seed: args.seed,
        dcs: c.dcs,
        partitions: c.partitions,
        replication: c.replication,
        clients_per_partition: args.clients.clients,
        txns,
        duration_us: args.duration_ms.map(|ms| ms * 1000),
        wan,
        max_skew_us: micros(args.skew_ms, "--skew-ms")?,
        max_drift_ppm: args.drift_ppm,
        cuts: args.cuts.iter().map(|c| c.0).collect(),
        spikes: (args.spike_prob > 0.0).then_some(LatencySpikes {
            probability: args.spike_prob,
            max_extra_us: micros(args.spike_max_ms, "--spike-max-ms")?,
        }),
        workload,
        faults: faults(&args)?,
        groups: c.ordered.groups(c.dcs, c.partitions)?,
        ..SimConfig::default()
    };
    let ordered = c.ordered.tuning(Some(&config.wan), c.dcs)?;
    let tuning = Tuning {
        apply_interval_us: micros(delta_r_ms, "--delta-r-ms")?.max(1),
        stabilization_interval_us: micros(delta_g_ms, "--delta-g-ms")?.max(1),
        max_kept_bytes: match args.max_kept_kb {
            0 => anyhow::bail!("--max-kept-kb must be at least 1"),
            kb => kb.saturating_mul(1024),
        },
        ordered,
    };
    config.validate()?;
    // Checked before the run: a path that cannot be written fails now.
    let history = args.history.as_deref().map(|p| OutputFile::open(p, "--history")).transpose()?;
    let report = c.protocol.visit(RunSim { config, tuning })?;
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    println!("{report}");
    for cut in &args.cuts {
        let cut = cut.0;
        println!(
            "  cut            DC {} cut off from {} to {} ms (simulated)",
            cut.dc,
            ms(cut.start_us),
            ms(cut.end_us)
        );
    }
    if let Some(out) = history {
        verdict::write_history_of(&report.history, report.protocol, report.guarantee, out)?;
    }
    let mut ok = verdict::judge(&report.history, report.guarantee) && report.settled();
    if !report.settled() {
        println!("  the cluster did not settle: writes were still unapplied at the settle limit");
    }
    if report.reads_never_wait && report.reads_waited > 0 {
        println!("  {} reads must never wait, but {} did", report.protocol, report.reads_waited);
        ok = false;
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
