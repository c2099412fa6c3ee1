//! The protocols that run inside one DC (PrompTCC, PrompTCC-naive, Eiger;
//! each refuses more) under many seeds: 1–8 partitions, clock skew and
//! drift, latency spikes, hot keys on a third of the seeds, and on half of
//! them crashes and restarts from disk; on half, a short transaction
//! timeout, so that versions are collected within the run and slow
//! transactions meet it. Every history goes through the TCC checker, the
//! DC must end holding the acknowledged winner of every key; PrompTCC's
//! reads never wait and never take a third round, Eiger's take one.
//!
//! `CAUSEWAY_SEEDS=5000 cargo test --release -p causeway-sim --test sim one_dc_properties::`
//! runs a longer soak.

use crate::common;

use causeway_protocol::eiger::{Eiger, EigerConfig, EigerFault};
use causeway_protocol::promptcc::{PrompTcc, PrompTccNaive, PtccConfig, PtccFault};
use causeway_protocol::Protocol;
use causeway_sim::{random_crashes, SimConfig};
use common::{lost_writes, par_seeds, problems, random_config, run, seeds};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// A seed's failure, if any; crashes, commits, read requests, the
/// read-only transactions by round trips, and versions collected.
type Outcome = (Option<String>, u64, u64, u64, BTreeMap<u32, u64>, u64);

fn one_dc_config(seed: u64) -> SimConfig {
    let mut config = random_config(seed, 1_500);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9_7cc);
    config.dcs = 1;
    config.cuts.clear();
    if let causeway_workload::WorkloadKind::Random(w) = &mut config.workload {
        w.multi_dc_fraction = 0.0;
        if rng.random_bool(0.33) {
            // Contention: few keys, several partitions written at once.
            w.keys_per_partition = rng.random_range(2..=8);
            w.partitions_per_txn = w.partitions_per_txn.max(2);
            w.writes_per_txn = w.writes_per_txn.max(2);
        }
    }
    if rng.random_bool(0.5) {
        let topology = config.topology().expect("a valid placement");
        config.faults.crashes = random_crashes(seed, &topology, rng.random_range(1..=4), 400_000);
        config.faults.client_timeout_us = 1_500_000;
        config.settle_limit_us = 10_000_000;
        config.duration_us = Some(3_000_000);
    }
    config
}

/// A short transaction timeout on half the seeds (20–300 ms), else 5 s.
fn txn_timeout(seed: u64) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6c);
    if rng.random_bool(0.5) {
        rng.random_range(20_000..300_000)
    } else {
        5_000_000
    }
}

fn promptcc(seed: u64) -> PtccConfig {
    PtccConfig { txn_timeout_us: txn_timeout(seed), ..PtccConfig::default() }
}

#[test]
fn promptcc_is_tcc_never_waits_and_keeps_every_acknowledged_write_over_many_seeds() {
    mostly_one_round(&survives::<PrompTcc>(promptcc, 2));
}

/// PrompTCC's point: a second round is rare, even under contention.
fn mostly_one_round(rounds: &BTreeMap<u32, u64>) {
    let (one, two) = (rounds.get(&1).copied().unwrap_or(0), rounds.get(&2).copied().unwrap_or(0));
    assert!(one > 10 * two, "mostly one round: {rounds:?}");
}

/// The same protocol with its vectors whole and the paper's test of a
/// first round (`S_i` covers the snapshot).
#[test]
fn promptcc_naive_is_tcc_never_waits_and_keeps_every_acknowledged_write_over_many_seeds() {
    mostly_one_round(&survives::<PrompTccNaive>(promptcc, 2));
}

/// Eiger: up to three rounds, and some seeds must need the third.
#[test]
fn eiger_is_tcc_and_keeps_every_acknowledged_write_over_many_seeds() {
    let rounds =
        survives::<Eiger>(|seed| EigerConfig { txn_timeout_us: txn_timeout(seed), ..EigerConfig::default() }, 3);
    assert!(rounds.get(&3).copied().unwrap_or(0) > 0, "no third round in any seed: {rounds:?}");
}

/// Runs the seeds; `most` is the most round trips a read-only transaction
/// may take. Returns the read-only transactions by round trips.
fn survives<P: Protocol>(config_of: impl Fn(u64) -> P::Config + Sync, most: u32) -> BTreeMap<u32, u64> {
    let n = seeds(500);
    let results = par_seeds(n, |seed| {
        let config = one_dc_config(seed);
        let shape = format!(
            "seed {seed}: {} partitions, skew {} us, crashes {:?}",
            config.partitions, config.max_skew_us, config.faults.crashes
        );
        let crashes = config.faults.crashes.len();
        let (report, verdict) = run::<P>(config, &config_of(seed));
        let mut problems = problems::<P>(&report, &verdict);
        problems.extend(lost_writes(&report, |_, _| true));
        if crashes > 0 && report.faults.crashes != report.faults.restarts {
            problems.push(format!("crashes and restarts: {:?}", report.faults));
        }
        // PrompTCC: one round, or two when the first was not from one
        // snapshot, never a third. Eiger: three at most.
        if let Some((&took, _)) = report.read_only_rounds.last_key_value() {
            if took > most {
                problems.push(format!("read-only transactions by round trips: {:?}", report.read_only_rounds));
            }
        }
        let failure = (!problems.is_empty()).then(|| format!("{shape}\n{}", problems.join("\n")));
        let rounds = report.read_only_rounds;
        let collected = report.counters.versions_collected;
        (failure, report.faults.crashes, report.committed as u64, report.reads, rounds, collected)
    });
    let failures: Vec<&str> = results.iter().filter_map(|r| r.0.as_deref()).collect();
    let sum = |f: fn(&Outcome) -> u64| results.iter().map(f).sum::<u64>();
    let mut rounds: BTreeMap<u32, u64> = BTreeMap::new();
    for (r, n) in results.iter().flat_map(|r| r.4.iter()) {
        *rounds.entry(*r).or_default() += n;
    }
    println!(
        "{}: {n} seeds, {} crashes, {} committed, {} read requests, {} versions collected; \
         read-only transactions by round trips {rounds:?}",
        P::NAME,
        sum(|r| r.1),
        sum(|r| r.2),
        sum(|r| r.3),
        sum(|r| r.5)
    );
    assert!(failures.is_empty(), "{} of {n} seeds failed:\n{}", failures.len(), failures.join("\n\n"));
    // Contention makes first rounds miss: some read-only transactions must
    // have needed the second (or the test does not reach it).
    assert!(rounds.get(&2).copied().unwrap_or(0) > 0, "no second round in {n} seeds: {rounds:?}");
    assert!(sum(|r| r.5) > 0, "no version collected in {n} seeds");
    rounds
}

/// Whether the checker sees a planted fault in 40 contended one-DC runs.
fn caught<P: Protocol>(config: P::Config) -> bool {
    (0..40).any(|seed| {
        let mut sim = common::hot_keys(seed);
        sim.dcs = 1;
        let (_, verdict) = run::<P>(sim, &config);
        !verdict.upholds(causeway_protocol::Guarantee::Causal)
    })
}

#[test]
fn a_client_that_never_takes_a_second_round_is_caught() {
    let config = PtccConfig { fault: PtccFault::OneRound, ..PtccConfig::default() };
    assert!(caught::<PrompTcc>(config), "the checker must see fractured reads when the second round is skipped");
}

#[test]
fn a_frontier_that_runs_ahead_of_prepared_transactions_is_caught() {
    let config = PtccConfig { fault: PtccFault::EarlyFrontier, ..PtccConfig::default() };
    assert!(caught::<PrompTcc>(config), "the checker must see a transaction appear in the middle of a snapshot");
}

#[test]
fn eiger_partitions_that_overlook_open_transactions_are_caught() {
    let config = EigerConfig { fault: EigerFault::IgnoreOpen, ..EigerConfig::default() };
    assert!(caught::<Eiger>(config), "the checker must see a write seen at one partition and not at another");
}

#[test]
fn more_than_one_dc_is_refused_with_a_reason() {
    let mut config = common::hot_keys(1);
    config.dcs = 2;
    let err = causeway_sim::Simulation::<PrompTcc>::new(config.clone(), &PtccConfig::default()).err().expect("refused");
    assert!(err.to_string().contains("one DC"), "{err}");
    let err = causeway_sim::Simulation::<Eiger>::new(config, &EigerConfig::default()).err().expect("refused");
    assert!(err.to_string().contains("one DC"), "{err}");
}
