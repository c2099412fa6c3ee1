//! The bank invariant: transfers between a few hot accounts conserve the
//! money and leave no balance below zero — under Geo-SDUR (serializable),
//! over many seeds with leaders crashed; and not under Wren on the same
//! workload: TCC lets two transfers that read the same balance both commit,
//! and one of the updates is lost. The test proves the difference.

use crate::common;

use crate::sdur_properties::sim_sdur;
use causeway_history::{OpKind, Status};
use causeway_protocol::sdur::Sdur;
use causeway_protocol::wren::Wren;
use causeway_sim::{random_leader_crashes, SimConfig, SimReport};
use causeway_workload::{Transfer, WorkloadKind};
use common::{par_seeds, run, seeds};

const ACCOUNTS: u32 = 6;
const INITIAL: u64 = 100;

fn bank(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        dcs: 3,
        partitions: 2,
        clients_per_partition: 3,
        txns: None,
        duration_us: Some(3_000_000),
        max_skew_us: 10_000,
        workload: WorkloadKind::Bank { accounts: ACCOUNTS, initial: INITIAL, max_amount: 40, audit_fraction: 0.2 },
        settle_limit_us: 30_000_000,
        ..SimConfig::default()
    }
}

/// What a run did to the bank: whether every DC's final state holds all
/// the money and no balance below zero, and whether every committed audit
/// (a read of every account) saw all of it; with the transfers committed.
#[derive(Debug)]
struct Books {
    finals_conserved: bool,
    audits_conserved: bool,
    audits: u64,
    transfers: u64,
}

fn books(report: &SimReport) -> Books {
    let total = u64::from(ACCOUNTS) * INITIAL;
    let balance = |v: Option<&String>| Transfer::balance(v.map(|s| s.as_bytes()), INITIAL);
    let finals_conserved = report.history.finals.iter().all(|f| {
        let balances: Vec<Option<u64>> = f
            .state
            .values()
            .map(|v| balance(Some(v)))
            .chain((f.state.len()..ACCOUNTS as usize).map(|_| Some(INITIAL)))
            .collect();
        balances.iter().all(Option::is_some) && balances.iter().flatten().sum::<u64>() == total
    });
    let (mut audits, mut audits_conserved, mut transfers) = (0, true, 0);
    for t in report.history.txns.iter().filter(|t| t.status == Status::Committed) {
        let reads: Vec<_> = t.ops.iter().filter(|o| o.op == OpKind::Read).collect();
        if t.ops.iter().any(|o| o.op == OpKind::Write) {
            transfers += 1;
        } else if reads.len() == ACCOUNTS as usize {
            audits += 1;
            let sum: Option<u64> = reads.iter().map(|o| balance(o.value.as_ref())).sum();
            audits_conserved &= sum == Some(total);
        }
    }
    Books { finals_conserved, audits_conserved, audits, transfers }
}

#[test]
fn the_bank_conserves_money_under_sdur_and_loses_it_under_wren() {
    let n = seeds(20);
    let sdur = par_seeds(n, |seed| {
        let mut config = bank(seed);
        if seed % 2 == 1 {
            let topology = config.topology().expect("a valid placement");
            config.faults.crashes = random_leader_crashes(seed, &topology, 2, 2_000_000);
            config.faults.client_timeout_us = 5_000_000;
        }
        let (report, verdict) = run::<Sdur>(config, &sim_sdur());
        assert!(verdict.keeps_model(), "seed {seed}: {verdict}");
        assert!(report.settled(), "seed {seed}: did not settle");
        books(&report)
    });
    for (seed, b) in sdur.iter().enumerate() {
        assert!(b.finals_conserved && b.audits_conserved, "seed {seed} under sdur: {b:?}");
    }
    let transfers: u64 = sdur.iter().map(|b| b.transfers).sum();
    let audits: u64 = sdur.iter().map(|b| b.audits).sum();
    // Hot accounts, half the transfers and every audit global: most
    // globals abort (two that cross in two logs abort each other), but
    // enough commit for the books to mean something.
    assert!(transfers > 10 * n && audits > 0, "sdur committed {transfers} transfers and {audits} audits");

    // The same bank under TCC: money appears or vanishes.
    let wren = par_seeds(n.min(6), |seed| {
        let (report, verdict) = run::<Wren>(bank(seed), &Default::default());
        assert!(verdict.keeps_model(), "seed {seed}: Wren broke TCC itself:\n{verdict}");
        books(&report)
    });
    let broken = wren.iter().filter(|b| !b.finals_conserved || !b.audits_conserved).count();
    assert!(broken > 0, "no lost update under Wren in {} seeds: {wren:?}", wren.len());
}
