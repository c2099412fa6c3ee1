//! Every protocol under crashes: random replicas and whole DCs crash at any
//! step and restart, on a disk that loses what it had not synced (a prefix
//! of it may survive, the record after it torn), while clients keep
//! committing, clocks are skewed and DCs are cut off now and then.
//!
//! Each run must uphold its protocol's guarantee (a transaction caught by a
//! crash is `unknown` in the history: possibly committed), lose no
//! acknowledged write (every DC's final state holds, for each key, the
//! last-writer-wins winner among the acknowledged writes — or a write of a
//! transaction whose outcome is unknown, which may have beaten it), and
//! heal: once the last crash is over the cluster settles — every replica's
//! stable time passes the newest acknowledged commit of every DC (EC, which
//! has none: every replica is quiescent, every write held everywhere) —
//! within the settle limit the test sets.

use crate::common;

use causeway_history::{check, check_for, Report};
use causeway_protocol::cure::{Cure, HCure};
use causeway_protocol::ec::Ec;
use causeway_protocol::eiger::Eiger;
use causeway_protocol::promptcc::PrompTcc;
use causeway_protocol::wren::Wren;
use causeway_protocol::{Protocol, Topology, Tuning};
use causeway_sim::{
    random_crashes, ComesBack, Crash, CrashTarget, Cut, DiskModel, Faults, Readers, SimConfig, SimReport, Simulation,
};
use causeway_workload::{WorkloadConfig, WorkloadKind};
use common::{lost_writes, par_seeds, seeds};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How long after the workload ends the cluster may take to heal and
/// settle: the coordinator's commit timeout and the cohorts' resolve delay
/// (1 s each) plus the WAN's round trips, with room to spare.
const SETTLE_LIMIT_US: u64 = 10_000_000;

/// A small cluster (1–3 DCs × 1–4 partitions), 1–4 crashes in the first
/// 400 ms (a fifth of them of a whole DC), a disk that takes 0–3 ms to
/// sync and checkpoints every 8–64 records (so most restarts replay a
/// checkpoint and the records after it), skew up to 50 ms, and on a third of the seeds a DC cut.
fn crash_config(seed: u64) -> SimConfig {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0c4a_54e5);
    let dcs = rng.random_range(1..=3u16);
    let partitions = rng.random_range(1..=4u32);
    let topology = Topology::full(dcs, partitions).unwrap();
    let crashes = random_crashes(seed, &topology, rng.random_range(1..=4), 400_000);
    let sync_max = rng.random_range(0..=3_000);
    let mut cuts = Vec::new();
    if dcs > 1 && rng.random_bool(0.33) {
        let start_us = rng.random_range(0..300_000);
        cuts.push(Cut { dc: rng.random_range(0..dcs), start_us, end_us: start_us + rng.random_range(20_000..300_000) });
    }
    let workload = WorkloadConfig {
        reads_per_txn: rng.random_range(1..=4),
        writes_per_txn: rng.random_range(1..=3),
        partitions_per_txn: rng.random_range(1..=3),
        keys_per_partition: rng.random_range(5..=30),
        delete_fraction: if rng.random_bool(0.3) { 0.1 } else { 0.0 },
        think_time_us: rng.random_range(2_000..20_000),
        ..WorkloadConfig::default()
    };
    let mut config = SimConfig {
        seed,
        dcs,
        partitions,
        clients_per_partition: rng.random_range(1..=2),
        txns: Some(400),
        duration_us: Some(2_000_000),
        max_skew_us: rng.random_range(0..=50_000),
        max_drift_ppm: rng.random_range(0..=100),
        cuts,
        settle_limit_us: SETTLE_LIMIT_US,
        faults: Faults {
            crashes,
            disk: DiskModel { sync_us: (sync_max / 4, sync_max), ..DiskModel::default() },
            // Longer than the coordinator's commit timeout (1 s): a live
            // coordinator's abort reaches the client first.
            client_timeout_us: 1_500_000,
            ..Faults::default()
        },
        workload: WorkloadKind::Random(workload),
        ..SimConfig::default()
    };
    // Drawn last, so the rest of a seed's run is what it was before.
    config.faults.disk.checkpoint_every = rng.random_range(8..=64);
    config
}

/// What is wrong with one crash run of `P`.
fn problems<P: Protocol>(report: &SimReport, verdict: &Report) -> Vec<String> {
    let mut problems = Vec::new();
    if !verdict.upholds(P::GUARANTEE) {
        problems.push(format!("checker:\n{verdict}"));
    }
    if !report.settled() {
        problems
            .push(format!("did not heal and settle within {} s of the workload's end", SETTLE_LIMIT_US / 1_000_000));
    }
    problems.extend(lost_writes(report, |_, _| true));
    if report.counters.inputs_refused > 0 {
        problems.push(format!("{} inputs refused in an honest run", report.counters.inputs_refused));
    }
    if report.faults.crashes == 0 || report.faults.crashes != report.faults.restarts {
        problems.push(format!("crashes and restarts: {:?}", report.faults));
    }
    problems
}

/// Runs `n` seeds of `P` with crashes; panics with every failing seed, and
/// prints the totals.
fn survives_crashes<P: Protocol>(n: u64) {
    survives::<P>(n, crash_config);
}

/// Runs `n` seeds of `P`, each configured by `config`; panics with every
/// failing seed, and prints the totals.
fn survives<P: Protocol>(n: u64, config: impl Fn(u64) -> SimConfig + Sync) {
    survives_as::<P>(n, config, &P::Config::default());
}

/// [`survives`] with the protocol configured as `protocol` says; returns
/// the reports.
fn survives_as<P: Protocol>(n: u64, config: impl Fn(u64) -> SimConfig + Sync, protocol: &P::Config) -> Vec<SimReport> {
    let results = par_seeds(n, |seed| {
        let config = config(seed);
        let loses_a_disk = config.faults.crashes.iter().any(|c| c.comes_back != ComesBack::FromItsDisk);
        let report = Simulation::<P>::new(config, protocol).expect("valid config").run();
        let mut problems = problems::<P>(&report, &check_for(&report.history, P::GUARANTEE));
        if loses_a_disk && report.faults.disks_lost == 0 {
            problems.push("no disk was lost".into());
        }
        (seed, report, problems)
    });
    let failed: Vec<String> = results
        .iter()
        .filter(|(_, _, p)| !p.is_empty())
        .map(|(seed, _, p)| format!("{} seed {seed}: {}", P::NAME, p.join("\n  ")))
        .collect();
    assert!(failed.is_empty(), "{} of {n} seeds failed:\n{}", failed.len(), failed.join("\n"));
    let reports: Vec<SimReport> = results.into_iter().map(|(_, r, _)| r).collect();
    summarize(P::NAME, &reports);
    reports
}

/// The totals the closing note quotes, printed with `--nocapture`.
fn summarize(name: &str, reports: &[SimReport]) {
    let sum = |f: fn(&SimReport) -> u64| reports.iter().map(f).sum::<u64>();
    println!(
        "{name}: {} seeds, {} crashes ({} of them losing the disk, {} restarts from a checkpoint, {} checkpoints), {} unsynced records lost, {} committed, {} unknown outcome",
        reports.len(),
        sum(|r| r.faults.crashes),
        sum(|r| r.faults.disks_lost),
        sum(|r| r.faults.restarts_from_checkpoint),
        sum(|r| r.faults.checkpoints),
        sum(|r| r.faults.records_lost),
        sum(|r| r.committed as u64),
        sum(|r| r.unknown as u64),
    );
    assert!(sum(|r| r.faults.records_lost) > 0, "{name}: no crash caught a record before its sync");
    assert!(sum(|r| r.faults.restarts_from_checkpoint) > 0, "{name}: no restart from a checkpoint");
}

#[test]
fn wren_survives_crashes() {
    survives_crashes::<Wren>(seeds(500));
}

#[test]
fn cure_survives_crashes() {
    survives_crashes::<Cure>(seeds(500));
}

#[test]
fn h_cure_survives_crashes() {
    survives_crashes::<HCure>(seeds(500));
}

/// EC has no stable time: its run settles when every replica is quiescent
/// — every write applied anywhere acknowledged by every peer — so settling
/// is converging. A commit whose partition did not answer in time is
/// `unknown`, as EC commits nothing atomically.
#[test]
fn ec_survives_crashes() {
    survives_crashes::<Ec>(seeds(500));
}

/// PrompTCC in one DC (it runs in one): the same crashes drawn for it. A
/// transaction whose coordinator crashed between the votes and the
/// decision is ended by the participants that wait for it.
#[test]
fn promptcc_survives_crashes() {
    survives::<PrompTcc>(seeds(500), one_dc_crash_config);
}

/// Eiger in one DC, with the same crashes and the same end of silent
/// coordinators (the write-only transactions are PrompTCC's); a third
/// round whose coordinator crashed times out and its transaction starts
/// again.
#[test]
fn eiger_survives_crashes() {
    survives::<Eiger>(seeds(500), one_dc_crash_config);
}

/// A run of [`crash_config`] with at least two DCs and a DC cut off for
/// a while, so that the streams to its replicas back up; on half the seeds
/// DC 1 is cut off from 20 to 600 ms on a slow disk (1–3 ms a sync) while
/// DC 0's replicas — the ones spilling for it — crash again and again,
/// so that crashes land between a spill and the records before it being
/// durable, and between a batch on disk and the record that says so.
fn cut_crash_config(seed: u64) -> SimConfig {
    let mut config = crash_config(seed);
    config.dcs = config.dcs.max(2);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5b111);
    if rng.random_bool(0.5) {
        config.cuts = vec![Cut { dc: 1, start_us: 20_000, end_us: 600_000 }];
        config.faults.disk.sync_us = (1_000, 3_000);
        config.faults.crashes = (0..rng.random_range(3..=6))
            .map(|_| Crash {
                target: CrashTarget::Replica { dc: 0, partition: rng.random_range(0..config.partitions) },
                at_us: rng.random_range(40_000..550_000),
                down_us: rng.random_range(1_000..30_000),
                comes_back: ComesBack::FromItsDisk,
            })
            .collect();
    } else if config.cuts.is_empty() {
        config.cuts.push(Cut { dc: 1, start_us: 50_000, end_us: 350_000 });
    }
    config
}

/// With a bound of 512 bytes on the groups a replica keeps in memory for
/// its peers, the streams spill to disk on every cut and are read back
/// when it heals — through crashes of either side, restarts from
/// checkpoints that hold only how far they spilled, and peers that resume
/// below the spill — and every run keeps its guarantee, loses no
/// acknowledged write and settles.
fn survives_crashes_spilling<P: Protocol>(n: u64) {
    let tuning = Tuning { max_kept_bytes: 512, ..Tuning::default() };
    let reports = survives_as::<P>(n, cut_crash_config, &P::configure(&tuning));
    let (spills, read_back) =
        reports.iter().fold((0, 0), |(s, r), x| (s + x.faults.spills, r + x.faults.unspilled_batches));
    println!("{}: {spills} spills, {read_back} batches read back", P::NAME);
    assert!(spills > 0 && read_back > 0, "{}: {spills} spills, {read_back} batches read back", P::NAME);
}

#[test]
fn wren_survives_crashes_with_its_streams_spilled() {
    survives_crashes_spilling::<Wren>(seeds(150));
}

#[test]
fn cure_and_h_cure_survive_crashes_with_their_streams_spilled() {
    survives_crashes_spilling::<Cure>(seeds(75));
    survives_crashes_spilling::<HCure>(seeds(75));
}

#[test]
fn ec_survives_crashes_with_its_streams_spilled() {
    survives_crashes_spilling::<Ec>(seeds(150));
}

fn one_dc_crash_config(seed: u64) -> SimConfig {
    let mut config = crash_config(seed);
    config.dcs = 1;
    config.cuts.clear();
    let topology = Topology::full(1, config.partitions).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9_7cc);
    config.faults.crashes = random_crashes(seed, &topology, rng.random_range(1..=4), 400_000);
    config
}

/// A partition down longer than EC's commit timeout (1 s, shorter than the
/// clients' 1.5 s): the coordinators whose commits wrote to it tell their
/// clients that the outcome is unknown — recorded `unknown`, not aborted,
/// as part of the writes may have taken effect — and every run still keeps
/// its promises once the partition is back.
#[test]
fn ec_tells_its_clients_the_outcome_is_unknown_when_a_partition_stays_down() {
    let reports = par_seeds(seeds(20), |seed| {
        let mut config = crash_config(seed);
        (config.dcs, config.partitions) = (2, 3);
        config.cuts.clear();
        let target = CrashTarget::Replica { dc: 0, partition: 1 };
        config.faults.crashes =
            vec![Crash { target, at_us: 100_000, down_us: 1_500_000, comes_back: Default::default() }];
        if let WorkloadKind::Random(w) = &mut config.workload {
            (w.partitions_per_txn, w.writes_per_txn) = (3, 3);
        }
        let report = Simulation::<Ec>::new(config, &Default::default()).expect("valid config").run();
        let problems = problems::<Ec>(&report, &check(&report.history));
        assert!(problems.is_empty(), "seed {seed}: {}", problems.join("\n  "));
        report
    });
    let told = reports.iter().map(|r| r.unknown as u64 - r.faults.transactions_abandoned).sum::<u64>();
    assert!(told > 0, "no coordinator told a client that the outcome is unknown");
}

/// A run of [`crash_config`] in which a replica of DC 0 also loses its
/// disk, 3.2–4 s in, and comes back as `comes_back` says; sometimes it
/// crashes again soon after (while it re-seeds), sometimes a peer restarted
/// from its disk shortly before, and sometimes (with 3 DCs) DC 1's replica
/// of the partition loses its disk at about the same time. From 200 ms on the
/// clients of DC 0 only read, so by then every write of that DC has reached
/// another DC (the only state the replica held alone, and that a re-seed
/// cannot bring back — docs/OPERATIONS.md). The others keep writing
/// throughout, and DC 0 reads what the replica serves after it is back.
/// Keys are many (500–2,000 per partition), so that many are written once
/// before the loss and never again: a replica that came back without them
/// would be caught.
fn lost_disk_config(seed: u64, comes_back: ComesBack) -> SimConfig {
    let mut config = crash_config(seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1057_d15c);
    if let WorkloadKind::Random(w) = &mut config.workload {
        w.keys_per_partition = rng.random_range(500..=2_000);
    }
    config.dcs = config.dcs.max(2);
    (config.txns, config.duration_us) = (None, Some(6_000_000));
    config.readers = vec![Readers { dc: 0, from_us: 200_000 }];
    let partition = rng.random_range(0..config.partitions);
    let target = CrashTarget::Replica { dc: 0, partition };
    let (at_us, down_us) = (rng.random_range(3_200_000..4_000_000), rng.random_range(5_000..500_000));
    config.faults.crashes.push(Crash { target, at_us, down_us, comes_back });
    let from_disk = ComesBack::FromItsDisk;
    if rng.random_bool(0.3) {
        // Again, while it re-seeds.
        let again = at_us + down_us + rng.random_range(0..300_000);
        let down_us = rng.random_range(5_000..200_000);
        config.faults.crashes.push(Crash { target, at_us: again, down_us, comes_back: from_disk });
    }
    let peer = CrashTarget::Replica { dc: rng.random_range(1..config.dcs), partition };
    if rng.random_bool(0.5) {
        // A peer restarts from its disk first, after its stream was
        // acknowledged: it no longer remembers how far it sent it.
        let (at_us, down_us) = (rng.random_range(1_000_000..3_000_000), rng.random_range(5_000..200_000));
        config.faults.crashes.push(Crash { target: peer, at_us, down_us, comes_back: from_disk });
    }
    if config.dcs == 3 && rng.random_bool(0.3) {
        // Another DC loses its replica of the partition at about the same
        // time: the third has everything.
        config.readers.push(Readers { dc: 1, from_us: 200_000 });
        let target = CrashTarget::Replica { dc: 1, partition };
        let at_us = at_us + rng.random_range(0..300_000);
        config.faults.crashes.push(Crash { target, at_us, down_us: rng.random_range(5_000..500_000), comes_back });
    }
    config
}

/// Runs `n` seeds of [`lost_disk_config`]: every one must keep every
/// promise a run with crashes keeps.
fn survives_lost_disks<P: Protocol>(n: u64) {
    survives::<P>(n, |seed| lost_disk_config(seed, ComesBack::Reseeded));
}

#[test]
fn wren_re_seeds_a_replica_whose_disk_is_lost() {
    survives_lost_disks::<Wren>(seeds(100));
}

#[test]
fn cure_re_seeds_a_replica_whose_disk_is_lost() {
    survives_lost_disks::<Cure>(seeds(100));
}

#[test]
fn h_cure_re_seeds_a_replica_whose_disk_is_lost() {
    survives_lost_disks::<HCure>(seeds(100));
}

/// What the re-seed is for: the same runs with the replica started empty
/// instead lose acknowledged writes (or break the guarantee), and the
/// test above would say so.
#[test]
fn a_replica_started_empty_in_place_of_a_lost_one_loses_acknowledged_writes() {
    let broken = par_seeds(10, |seed| {
        let config = lost_disk_config(seed, ComesBack::Empty);
        let report = Simulation::<Wren>::new(config, &Default::default()).expect("valid config").run();
        !problems::<Wren>(&report, &check(&report.history)).is_empty()
    });
    assert!(broken.iter().all(|&b| b), "seeds whose empty restart went unnoticed: {broken:?}");
}

/// EC cannot re-seed a replica yet: a run that asks it to is refused.
#[test]
fn ec_refuses_a_run_that_re_seeds() {
    let config = lost_disk_config(1, ComesBack::Reseeded);
    let refused = Simulation::<Ec>::new(config, &Default::default()).err().map(|e| e.to_string());
    assert!(refused.is_some_and(|e| e.contains("cannot re-seed")), "EC accepted a re-seed");
}

/// Replays one seed of the runs above with its report and every violation:
/// `CAUSEWAY_SEED=24 CAUSEWAY_PROTOCOL=wren cargo test -p causeway-sim
/// --test sim crashes::replay_a_seed -- --ignored --nocapture`.
#[test]
#[ignore = "a tool: replays the seed CAUSEWAY_SEED names"]
fn replay_a_seed() {
    let seed: u64 = std::env::var("CAUSEWAY_SEED").expect("CAUSEWAY_SEED").parse().expect("a seed");
    // CAUSEWAY_LOST_DISK=1: the runs in which a disk is lost.
    let config = match std::env::var("CAUSEWAY_LOST_DISK").is_ok() {
        true => lost_disk_config(seed, ComesBack::Reseeded),
        false => crash_config(seed),
    };
    println!("crashes {:?}, cuts {:?}", config.faults.crashes, config.cuts);
    let report = match std::env::var("CAUSEWAY_PROTOCOL").as_deref() {
        Ok("cure") => Simulation::<Cure>::new(config, &Default::default()).unwrap().run(),
        Ok("h-cure") => Simulation::<HCure>::new(config, &Default::default()).unwrap().run(),
        Ok("ec") => Simulation::<Ec>::new(config, &Default::default()).unwrap().run(),
        _ => Simulation::<Wren>::new(config, &Default::default()).unwrap().run(),
    };
    println!("{report}\n{:#?}\nlost: {:?}", check(&report.history), lost_writes(&report, |_, _| true));
    // CAUSEWAY_SESSION=dc1-c1 prints that session's transactions, the first
    // thing to read when a violation names one of them.
    if let Ok(session) = std::env::var("CAUSEWAY_SESSION") {
        for txn in report.history.txns.iter().filter(|t| t.session.starts_with(&session)) {
            println!(
                "{} {:?} [{} .. {} us] ts {:?} {:?}",
                txn.txid, txn.status, txn.start_us, txn.end_us, txn.commit_ts, txn.ops
            );
        }
    }
}
