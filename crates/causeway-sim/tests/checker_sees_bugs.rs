//! A checker that never fails proves nothing. Each test here switches on a
//! deliberate bug in Wren and requires the simulator and checker together to
//! catch it within a few seeds — the proof that the property tests can see.

mod common;

use causeway_history::ViolationKind;
use causeway_protocol::wren::{Fault, WrenConfig};
use causeway_sim::SimConfig;
use causeway_workload::WorkloadKind;
use common::{hot_keys, run_wren};

/// Every update overwrites a whole group of keys, one per partition; most
/// transactions read a whole group. Long enough (0.6 s) and with few enough
/// writers that remote versions are often the newest ones read.
fn groups(seed: u64) -> SimConfig {
    SimConfig {
        clients_per_partition: 1,
        txns: None,
        duration_us: Some(600_000),
        workload: WorkloadKind::Groups { groups: 3, read_only_fraction: 0.9 },
        ..hot_keys(seed)
    }
}

/// Runs seeds until the checker rejects a history; returns the kinds found.
fn caught(fault: Fault, workload: fn(u64) -> SimConfig) -> Vec<ViolationKind> {
    let config = WrenConfig { fault, ..WrenConfig::default() };
    for seed in 0..10 {
        let (_, verdict) = run_wren(workload(seed), &config);
        if !verdict.is_tcc() {
            let mut kinds: Vec<ViolationKind> = verdict.violations.iter().map(|v| v.kind).collect();
            kinds.sort();
            kinds.dedup();
            return kinds;
        }
    }
    panic!("the checker did not notice {fault:?} in 10 seeds");
}

#[test]
fn the_same_workload_is_clean_without_a_fault() {
    for seed in 0..3 {
        for config in [hot_keys(seed), groups(seed)] {
            let (_, verdict) = run_wren(config, &WrenConfig::default());
            assert!(verdict.is_tcc(), "seed {seed}: {verdict}");
        }
    }
}

#[test]
fn a_snapshot_not_yet_installed_is_caught_as_fractured_reads() {
    let kinds = caught(Fault::SnapshotFromClock, hot_keys);
    assert!(kinds.contains(&ViolationKind::FracturedRead), "{kinds:?}");
}

#[test]
fn a_client_ignoring_its_cache_is_caught_missing_its_own_writes() {
    let kinds = caught(Fault::SkipClientCache, hot_keys);
    assert!(kinds.contains(&ViolationKind::CausalViolation), "{kinds:?}");
}

#[test]
fn remote_versions_visible_too_early_are_caught() {
    // A remote transaction reaches the partitions of a DC at different
    // moments; judged by the local time alone, it is seen half-applied.
    let kinds = caught(Fault::RemoteVisibleAtLocalTime, groups);
    assert!(kinds.contains(&ViolationKind::FracturedRead), "{kinds:?}");
}
