//! The simulator's faults beyond slow links and cuts: packets duplicated,
//! reordered and lost below the FIFO links; the protocols' fault points
//! (buggify); crashes and restarts. Every one is drawn from the seed, so a
//! run replays; every protocol keeps its guarantee under the first two (the
//! transport and the fault points only do what a real cluster may do).
//! Crashes are injected and replayed here; that every protocol survives
//! them is `crashes.rs`.

use crate::common;

use causeway_history::{check, Guarantee};
use causeway_protocol::cure::{Cure, HCure};
use causeway_protocol::ec::Ec;
use causeway_protocol::eiger::Eiger;
use causeway_protocol::paris::{Bpr, Paris};
use causeway_protocol::promptcc::PrompTcc;
use causeway_protocol::wren::{Fault as WrenFault, Wren, WrenConfig};
use causeway_protocol::{Protocol, Topology};
use causeway_sim::{
    random_crashes, Cut, DiskModel, Faults, Shedding, SimConfig, SimReport, Simulation, TransportFaults,
};
use common::{par_seeds, problems, random_config, run, seeds};

/// A random cluster of `seed` with `faults` on.
fn with_faults(seed: u64, faults: Faults) -> SimConfig {
    SimConfig { faults, ..random_config(seed, 400) }
}

/// The same, in one DC (PrompTCC and Eiger run in one).
fn in_one_dc(seed: u64, faults: Faults) -> SimConfig {
    SimConfig { dcs: 1, cuts: Vec::new(), ..with_faults(seed, faults) }
}

fn lossy_transport() -> Faults {
    let transport = TransportFaults { duplicate: 0.05, reorder: 0.1, loss: 0.03, resend_us: 2_000 };
    Faults { transport: Some(transport), ..Faults::default() }
}

/// Runs `n` seeds of `P` with `faults`; fails with every seed that has
/// [`problems`] (a history that breaks the protocol's guarantee, reads that
/// waited under a protocol whose reads never wait, …). Returns the reports.
fn keeps_its_guarantee<P: Protocol>(n: u64, faults: fn() -> Faults) -> Vec<SimReport> {
    keeps_its_guarantee_in::<P>(n, faults, with_faults)
}

/// [`keeps_its_guarantee`] on the clusters `shape` draws.
fn keeps_its_guarantee_in<P: Protocol>(
    n: u64,
    faults: fn() -> Faults,
    shape: fn(u64, Faults) -> SimConfig,
) -> Vec<SimReport> {
    let results = par_seeds(n, |seed| {
        let (report, verdict) = run::<P>(shape(seed, faults()), &P::Config::default());
        let problems = problems::<P>(&report, &verdict);
        (seed, problems, report)
    });
    let failures: Vec<String> = results
        .iter()
        .filter(|(_, p, _)| !p.is_empty())
        .map(|(seed, p, _)| format!("{} seed {seed}: {}", P::NAME, p.join("; ")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    results.into_iter().map(|(_, _, r)| r).collect()
}

#[test]
fn below_the_fifo_links_duplicates_reordering_and_loss_change_no_verdict() {
    let n = seeds(40);
    fn check_counts(reports: &[SimReport]) {
        let sum = |f: fn(&SimReport) -> u64| reports.iter().map(f).sum::<u64>();
        assert!(sum(|r| r.faults.transport.duplicates_dropped) > 0, "no duplicate was dropped");
        assert!(sum(|r| r.faults.transport.arrived_early) > 0, "no packet overtook another");
        assert!(sum(|r| r.faults.transport.resent) > 0, "no packet was resent");
    }
    check_counts(&keeps_its_guarantee::<Wren>(n, lossy_transport));
    check_counts(&keeps_its_guarantee::<Cure>(n, lossy_transport));
    check_counts(&keeps_its_guarantee::<HCure>(n, lossy_transport));
    check_counts(&keeps_its_guarantee_in::<PrompTcc>(n, lossy_transport, in_one_dc));
    check_counts(&keeps_its_guarantee_in::<Eiger>(n, lossy_transport, in_one_dc));
    check_counts(&keep_eventual(n));
}

/// EC under a lossy transport: still eventually consistent.
fn keep_eventual(n: u64) -> Vec<SimReport> {
    assert_eq!(Ec::GUARANTEE, Guarantee::Eventual);
    keeps_its_guarantee::<Ec>(n, lossy_transport)
}

#[test]
fn every_protocol_keeps_its_guarantee_with_its_fault_points_armed() {
    let n = seeds(40);
    let buggify = || Faults { buggify: true, ..Faults::default() };
    for fired in [
        keeps_its_guarantee::<Wren>(n, buggify),
        keeps_its_guarantee::<Cure>(n, buggify),
        keeps_its_guarantee::<HCure>(n, buggify),
        keeps_its_guarantee::<Ec>(n, buggify),
        keeps_its_guarantee_in::<PrompTcc>(n, buggify, in_one_dc),
        keeps_its_guarantee_in::<Eiger>(n, buggify, in_one_dc),
    ]
    .map(|reports| reports.iter().map(|r| r.faults.fault_points_fired).sum::<u64>())
    {
        assert!(fired > 0, "no fault point fired in {n} seeds");
    }
}

/// Everything at once, twice: the same history, byte for byte, and the
/// same faults.
#[test]
fn a_run_with_every_fault_replays_from_its_seed() {
    for seed in [3, 11] {
        let faults = || Faults {
            crashes: random_crashes(seed, &Topology::full(3, 4).unwrap(), 3, 300_000),
            transport: Some(TransportFaults::default()),
            buggify: true,
            disk: DiskModel { sync_us: (100, 2_000), ..DiskModel::default() },
            ..Faults::default()
        };
        let config = || SimConfig { seed, txns: Some(800), faults: faults(), ..SimConfig::default() };
        let a = Simulation::<Wren>::new(config(), &Default::default()).unwrap().run();
        let b = Simulation::<Wren>::new(config(), &Default::default()).unwrap().run();
        let text = |r: &SimReport| {
            let mut out = Vec::new();
            r.history.write_jsonl(&mut out).unwrap();
            out
        };
        assert_eq!(text(&a), text(&b), "seed {seed}");
        assert_eq!(a.faults, b.faults, "seed {seed}");
        assert!(a.faults.crashes > 0 && a.faults.transport.packets > 0, "seed {seed}: {:?}", a.faults);
    }
}

/// Crashes from the seed, on the default cluster: each crashed replica
/// restarts, clients waiting on a dead coordinator give up after their
/// timeout, the run ends, and its history keeps the protocol's guarantee
/// (the many-seed property is `crashes.rs`).
#[test]
fn crashes_drawn_from_the_seed_are_injected_and_the_run_ends() {
    for seed in 0..6 {
        let crashes = random_crashes(seed, &Topology::full(3, 4).unwrap(), 4, 300_000);
        let faults = Faults { crashes, ..Faults::default() };
        let config = SimConfig { seed, txns: None, duration_us: Some(500_000), faults, ..SimConfig::default() };
        // Each protocol in turn: the injection is the simulator's, whichever it drives.
        let report = match seed % 4 {
            0 => Simulation::<Wren>::new(config, &Default::default()).unwrap().run(),
            1 => Simulation::<Cure>::new(config, &Default::default()).unwrap().run(),
            2 => Simulation::<HCure>::new(config, &Default::default()).unwrap().run(),
            _ => Simulation::<Ec>::new(config, &Default::default()).unwrap().run(),
        };
        let f = report.faults;
        assert!(f.crashes >= 1, "seed {seed}: {f:?}");
        assert_eq!(f.crashes, f.restarts, "seed {seed}: every crashed replica restarts");
        assert!(report.committed > 0, "seed {seed}");
        let verdict = check(&report.history);
        assert!(verdict.upholds(report.guarantee), "seed {seed}:\n{verdict}");
    }
}

/// Backlogs shed as the runtime sheds them past `max_backlog_mb`: half the
/// links between replicas that a DC cut held back drop what they held when
/// it heals, and a busy link between replicas sheds every 200 ms on average.
fn shedding() -> Faults {
    Faults { shedding: Some(Shedding::default()), ..Faults::default() }
}

#[test]
fn backlogs_shed_between_replicas_change_no_verdict() {
    let n = seeds(40);
    fn shed(reports: &[SimReport]) -> u64 {
        let shed: u64 = reports.iter().map(|r| r.faults.messages_shed).sum();
        assert!(shed > 0, "no message was shed");
        shed
    }
    shed(&keeps_its_guarantee::<Wren>(n, shedding));
    shed(&keeps_its_guarantee::<Cure>(n, shedding));
    shed(&keeps_its_guarantee::<HCure>(n, shedding));
    shed(&keeps_its_guarantee::<Ec>(n, shedding));
    shed(&keeps_its_guarantee_in::<Paris>(n, shedding, partial));
    shed(&keeps_its_guarantee_in::<Bpr>(n, shedding, partial));
    shed(&keeps_its_guarantee_in::<PrompTcc>(n, shedding, in_one_dc));
    shed(&keeps_its_guarantee_in::<Eiger>(n, shedding, in_one_dc));
}

/// The same, under partial replication (PaRiS, BPR): each partition in two
/// DCs, so cohorts and the UST's reports cross DCs too.
fn partial(seed: u64, faults: Faults) -> SimConfig {
    let c = with_faults(seed, faults);
    let dcs = c.dcs.max(2);
    SimConfig { dcs, partitions: c.partitions.max(u32::from(dcs)), replication: Some(2), ..c }
}

/// The planted fault: a replica that does not resume a stream whose
/// messages were shed never installs what was lost, and the checker (or
/// the settle check) sees it.
#[test]
fn a_replica_deaf_to_shed_backlogs_is_caught() {
    let wren = WrenConfig { fault: WrenFault::IgnorePeerLost, ..WrenConfig::default() };
    let caught = (0..seeds(40)).any(|seed| {
        let config = SimConfig {
            dcs: 3,
            cuts: vec![Cut { dc: 1, start_us: 50_000, end_us: 250_000 }],
            ..with_faults(seed, shedding())
        };
        let (report, verdict) = run::<Wren>(config, &wren);
        !problems::<Wren>(&report, &verdict).is_empty()
    });
    assert!(caught, "no seed showed the replica that ignores lost messages");
}
