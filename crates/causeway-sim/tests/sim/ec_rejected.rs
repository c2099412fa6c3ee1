//! The eventually consistent baseline must fail the TCC check under
//! contention: reads see part of a transaction's writes, or miss writes in
//! their causal past. This is the proof that the checker can see what the
//! TCC protocols are spared — and EC must still converge by last-writer-wins.

use crate::common;

use causeway_history::ViolationKind;
use causeway_protocol::cure::{Cure, HCure};
use causeway_protocol::ec::{Ec, EcConfig};
use causeway_protocol::{Protocol, Tuning};
use causeway_sim::SimConfig;
use causeway_workload::WorkloadKind;
use common::{hot_keys, run};
use std::collections::BTreeSet;

/// Every update overwrites a whole group of keys, one per partition; most
/// transactions read a whole group.
fn groups(seed: u64) -> SimConfig {
    SimConfig {
        clients_per_partition: 2,
        txns: None,
        duration_us: Some(400_000),
        workload: WorkloadKind::Groups { groups: 3, read_only_fraction: 0.8 },
        ..hot_keys(seed)
    }
}

/// Every seed is rejected; returns the kinds found over all of them.
fn rejected(workload: fn(u64) -> SimConfig) -> BTreeSet<ViolationKind> {
    let mut kinds = BTreeSet::new();
    for seed in 0..4 {
        let (report, verdict) = run::<Ec>(workload(seed), &EcConfig::default());
        assert!(report.settled(), "seed {seed}: EC did not settle");
        assert_eq!(report.reads_waited, 0, "seed {seed}: EC reads never wait");
        assert!(!verdict.is_tcc(), "seed {seed}: the checker accepted an EC history under contention");
        // What EC does promise — committed values, convergence by
        // last-writer-wins — it keeps.
        assert!(verdict.upholds(Ec::GUARANTEE), "seed {seed}: EC broke its own promise: {verdict}");
        kinds.extend(verdict.violations.iter().map(|v| v.kind));
    }
    kinds
}

#[test]
fn ec_under_hot_keys_is_rejected_for_causally_stale_reads() {
    let kinds = rejected(hot_keys);
    assert!(kinds.contains(&ViolationKind::CausalViolation), "{kinds:?}");
}

#[test]
fn ec_under_the_groups_workload_is_rejected_for_fractured_reads() {
    let kinds = rejected(groups);
    assert!(kinds.contains(&ViolationKind::FracturedRead), "{kinds:?}");
}

/// The control: the very same runs are TCC under the protocols that promise it.
#[test]
fn the_same_workloads_pass_under_cure_and_h_cure() {
    for seed in 0..2 {
        for workload in [hot_keys as fn(u64) -> SimConfig, groups] {
            let (_, verdict) = run::<Cure>(workload(seed), &Cure::configure(&Tuning::default()));
            assert!(verdict.is_tcc(), "cure, seed {seed}: {verdict}");
            let (_, verdict) = run::<HCure>(workload(seed), &HCure::configure(&Tuning::default()));
            assert!(verdict.is_tcc(), "h-cure, seed {seed}: {verdict}");
        }
    }
}
