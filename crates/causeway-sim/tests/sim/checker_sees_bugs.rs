//! A checker that never fails proves nothing. Each test here switches on a
//! deliberate bug — one per protocol at least, each breaking one safety rule
//! of that protocol — and requires the simulator and checker together to
//! catch it within a few seeds, judged against the protocol's own guarantee:
//! the proof that the property tests can see.

use crate::common;

use causeway_history::ViolationKind;
use causeway_protocol::cure::{Cure, CureConfig, CureFault, HCure};
use causeway_protocol::ec::{Ec, EcConfig, EcFault};
use causeway_protocol::paris::{Bpr, Fault as ParisFault, Paris, ParisConfig};
use causeway_protocol::wren::{Fault, Wren, WrenConfig};
use causeway_protocol::Protocol;
use causeway_sim::{LatencySpikes, SimConfig};
use causeway_workload::WorkloadKind;
use common::{hot_keys, run};

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

/// Runs seeds of protocol `P` configured with a fault until the checker
/// finds the history breaks `P`'s guarantee; returns the kinds that do.
fn caught_in<P: Protocol>(config: &P::Config, workload: fn(u64) -> SimConfig) -> Vec<ViolationKind> {
    for seed in 0..10 {
        let (_, verdict) = run::<P>(workload(seed), config);
        let mut kinds: Vec<ViolationKind> = verdict.breaches(P::GUARANTEE).map(|v| v.kind).collect();
        if !kinds.is_empty() {
            kinds.sort();
            kinds.dedup();
            return kinds;
        }
    }
    panic!("the checker did not notice {} with {config:?} in 10 seeds", P::NAME);
}

fn caught(fault: Fault, workload: fn(u64) -> SimConfig) -> Vec<ViolationKind> {
    caught_in::<Wren>(&WrenConfig { fault, ..WrenConfig::default() }, workload)
}

/// The control: without a fault, the same workloads keep every protocol's
/// guarantee.
#[test]
fn the_same_workload_is_clean_without_a_fault() {
    fn clean<P: Protocol>(seed: u64) {
        for config in [hot_keys(seed), groups(seed)] {
            let (_, verdict) = run::<P>(config, &P::Config::default());
            assert!(verdict.upholds(P::GUARANTEE), "{} seed {seed}: {verdict}", P::NAME);
        }
    }
    for seed in 0..3 {
        clean::<Wren>(seed);
        clean::<Cure>(seed);
        clean::<HCure>(seed);
        clean::<Ec>(seed);
        clean::<Paris>(seed);
        for config in [partial(hot_keys)(seed), partial(groups)(seed)] {
            let (_, verdict) = run::<Paris>(config.clone(), &ParisConfig::default());
            assert!(verdict.is_tcc(), "paris, partial, seed {seed}: {verdict}");
            let (_, verdict) = run::<Bpr>(config, &ParisConfig::default());
            assert!(verdict.is_tcc(), "bpr, partial, seed {seed}: {verdict}");
        }
    }
}

/// `workload` with each partition in two of the three DCs: most
/// transactions read and write partitions held in another DC, so each
/// takes a few WAN round trips — five seconds, not 0.6, for as many. Now
/// and then a message stalls for up to 200 ms: a replication stream falls
/// behind the stabilization reports that travel other links.
fn partial(workload: fn(u64) -> SimConfig) -> impl Fn(u64) -> SimConfig {
    move |seed| {
        let config = workload(seed);
        let duration_us = config.duration_us.map(|_| 5_000_000);
        let spikes = Some(LatencySpikes { probability: 0.02, max_extra_us: 200_000 });
        SimConfig { replication: Some(2), duration_us, spikes, ..config }
    }
}

fn caught_paris(fault: ParisFault, workload: impl Fn(u64) -> SimConfig) -> Vec<ViolationKind> {
    caught_paris_as::<Paris>(fault, workload)
}

fn caught_paris_as<P: Protocol<Config = ParisConfig>>(
    fault: ParisFault,
    workload: impl Fn(u64) -> SimConfig,
) -> Vec<ViolationKind> {
    let config = ParisConfig { fault, ..ParisConfig::default() };
    for seed in 0..10 {
        let (_, verdict) = run::<P>(workload(seed), &config);
        let mut kinds: Vec<ViolationKind> = verdict.breaches(P::GUARANTEE).map(|v| v.kind).collect();
        if !kinds.is_empty() {
            kinds.sort();
            kinds.dedup();
            return kinds;
        }
    }
    panic!("the checker did not notice {fault:?} in 10 seeds");
}

/// The UST must cover what each replica has received from the partition's
/// other replicas, not only its own commits: else a transaction is visible
/// at the replica that committed it before it reaches the others.
#[test]
fn paris_reporting_only_its_own_version_clock_is_caught() {
    let kinds = caught_paris(ParisFault::LocalEntriesOnly, partial(groups));
    assert!(kinds.contains(&ViolationKind::FracturedRead), "{kinds:?}");
}

#[test]
fn paris_handing_out_its_clock_as_the_snapshot_is_caught() {
    let kinds = caught_paris(ParisFault::SnapshotFromClock, partial(hot_keys));
    assert!(kinds.contains(&ViolationKind::FracturedRead), "{kinds:?}");
}

/// BPR's read must wait for the partition's other replicas too: a replica
/// whose own commits have passed the snapshot may still lack another
/// DC's.
#[test]
fn bpr_serving_once_its_own_commits_pass_the_snapshot_is_caught() {
    let kinds = caught_paris_as::<Bpr>(ParisFault::BprOwnClockOnly, partial(groups));
    assert!(kinds.contains(&ViolationKind::FracturedRead), "{kinds:?}");
}

#[test]
fn a_paris_client_ignoring_its_cache_is_caught_missing_its_own_writes() {
    let kinds = caught_paris(ParisFault::SkipClientCache, partial(hot_keys));
    assert!(kinds.contains(&ViolationKind::CausalViolation), "{kinds:?}");
}

#[test]
fn cure_serving_a_snapshot_it_has_not_installed_is_caught() {
    let config = CureConfig { fault: CureFault::ServeAhead, ..CureConfig::default() };
    let kinds = caught_in::<Cure>(&config, groups);
    assert!(kinds.contains(&ViolationKind::FracturedRead), "{kinds:?}");
}

#[test]
fn h_cure_serving_past_pending_transactions_is_caught() {
    let config = CureConfig { fault: CureFault::ServeAhead, ..CureConfig::default() };
    let kinds = caught_in::<HCure>(&config, groups);
    assert!(kinds.contains(&ViolationKind::FracturedRead), "{kinds:?}");
}

/// EC promises little, but convergence by last-writer-wins it does promise.
#[test]
fn ec_preferring_local_writes_to_later_remote_ones_is_caught() {
    let config = EcConfig { fault: EcFault::LocalWins, ..EcConfig::default() };
    let kinds = caught_in::<Ec>(&config, hot_keys);
    assert!(kinds.iter().any(|k| matches!(k, ViolationKind::Divergence | ViolationKind::FinalNotLww)), "{kinds:?}");
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

/// Hot keys where most writes are deletes: a client that forgets its own
/// deletes reads the value they removed.
fn deleting_hot_keys(seed: u64) -> SimConfig {
    let mut config = hot_keys(seed);
    if let WorkloadKind::Random(w) = &mut config.workload {
        w.delete_fraction = 0.7;
    }
    config
}

#[test]
fn a_client_ignoring_its_cache_is_caught_missing_its_own_deletes_too() {
    let (_, verdict) = run::<Wren>(deleting_hot_keys(0), &WrenConfig::default());
    assert!(verdict.is_tcc() && verdict.stats.deletes > 500, "the control: {verdict}");
    let kinds = caught(Fault::SkipClientCache, deleting_hot_keys);
    assert!(kinds.contains(&ViolationKind::CausalViolation), "{kinds:?}");
}

/// A planted fault that breaks deletes alone: tombstones that never
/// replicate (the key comes back in the other DCs, or stays there).
#[test]
fn deletes_that_do_not_replicate_are_caught() {
    let config = WrenConfig { fault: Fault::DropRemoteDeletes, ..WrenConfig::default() };
    let kinds = caught_in::<Wren>(&config, deleting_hot_keys);
    assert!(kinds.iter().any(|k| matches!(k, ViolationKind::Divergence | ViolationKind::FinalNotLww)), "{kinds:?}");
}
