//! Deletes on every protocol, step by step on the hand-cranked harness: a
//! delete commits like a write, replicates to the other DCs, reads as no
//! value there and in its own session at once, loses to a newer write, and
//! its tombstone is collected (with every version it deleted) once every
//! DC has it and no snapshot can read below it. Then the same under many
//! seeds, the histories judged by the checker of each protocol's guarantee.

use crate::common;

use causeway_protocol::cure::{Cure, CureTimer, HCure};
use causeway_protocol::ec::{Ec, EcTimer};
use causeway_protocol::wren::{Wren, WrenTimer};
use causeway_protocol::{ClientId, DcId, PartitionId, Protocol, Replica, ReplicaId, SessionEvent, Topology};
use causeway_sim::harness::{Harness, InFlight, Timer};
use causeway_workload::WorkloadKind;
use common::scenario::run_txn;
use common::{par_seeds, problems, random_config, run, seeds};

const START_US: u64 = 1_000_000;

trait Periodic: Protocol {
    /// The periodic timers, in the order one round fires them.
    fn periodic() -> Vec<Timer<Self>>;
    /// Whether the protocol collects tombstones (EC keeps one version per
    /// key, a tombstone included: it has no stable time to say when a
    /// write the tombstone beats can no longer arrive).
    const COLLECTS_TOMBSTONES: bool = true;
}

impl Periodic for Wren {
    fn periodic() -> Vec<WrenTimer> {
        vec![WrenTimer::Apply, WrenTimer::Stabilize]
    }
}

impl Periodic for Cure {
    fn periodic() -> Vec<CureTimer> {
        vec![CureTimer::Apply, CureTimer::Stabilize]
    }
}

impl Periodic for HCure {
    fn periodic() -> Vec<CureTimer> {
        Cure::periodic()
    }
}

impl Periodic for Ec {
    fn periodic() -> Vec<EcTimer> {
        vec![EcTimer::Replicate]
    }
    const COLLECTS_TOMBSTONES: bool = false;
}

/// Rounds of every periodic timer, 5 ms apart, everything delivered.
fn ticks<P: Periodic>(h: &mut Harness<P>, rounds: usize) {
    for _ in 0..rounds {
        h.advance_clocks(5_000);
        for timer in P::periodic() {
            h.fire_all(timer);
            h.deliver_all();
        }
    }
}

/// A read-only transaction's value of `key`, as text; time moves on while
/// the read waits (Cure's reads wait for their snapshot).
fn read<P: Periodic>(h: &mut Harness<P>, c: ClientId, key: &str) -> Option<String> {
    let mut event = h.read_only(c, &[key]).unwrap();
    for _ in 0..100 {
        h.deliver_all();
        event = event.or_else(|| h.take_event(c));
        if event.is_some() {
            break;
        }
        ticks(h, 1);
    }
    match event {
        Some(SessionEvent::Read(values)) => values[0].1.as_ref().map(|v| String::from_utf8(v.to_vec()).unwrap()),
        other => panic!("expected the values, got {other:?}"),
    }
}

fn delete_txn<P: Protocol>(h: &mut Harness<P>, c: ClientId, key: &str) -> SessionEvent {
    let now = h.begin(c).unwrap();
    h.deliver_all();
    assert_eq!(now.or_else(|| h.take_event(c)), Some(SessionEvent::Started));
    h.delete(c, key).unwrap();
    let now = h.commit(c).unwrap();
    h.deliver_all();
    now.or_else(|| h.take_event(c)).expect("the delete finished")
}

fn deletes_work<P: Periodic>(config: P::Config) {
    let topology = Topology::full(2, 1).unwrap();
    let mut h = Harness::<P>::new(topology, config, START_US);
    let (here, there) = (ReplicaId::at(DcId(0), PartitionId(0)), ReplicaId::at(DcId(1), PartitionId(0)));
    let (writer, reader) = (ClientId { dc: DcId(0), index: 0 }, ClientId { dc: DcId(1), index: 0 });
    h.add_session(writer, here);
    h.add_session(reader, there);
    let name = P::NAME;

    assert!(matches!(run_txn(&mut h, writer, &[("k", "v1")]), SessionEvent::Committed(Some(_))), "{name}");
    ticks(&mut h, 10);
    assert_eq!(read(&mut h, reader, "k").as_deref(), Some("v1"), "{name}: the write replicated");

    assert!(matches!(delete_txn(&mut h, writer, "k"), SessionEvent::Committed(Some(_))), "{name}");
    assert_eq!(read(&mut h, writer, "k"), None, "{name}: the session sees its own delete at once");
    ticks(&mut h, 10);
    assert_eq!(read(&mut h, reader, "k"), None, "{name}: the delete replicated");
    for r in [here, there] {
        assert!(h.replica(r).latest_values().is_empty(), "{name}: a deleted key has no latest value");
    }

    // The tombstone goes, and the value it deleted with it, once every DC
    // has it and no snapshot reads below it.
    ticks(&mut h, 20);
    let versions = |h: &Harness<P>| [here, there].map(|r| h.replica(r).counters().versions);
    if P::COLLECTS_TOMBSTONES {
        assert_eq!(versions(&h), [0, 0], "{name}: the tombstone and what it deleted are collected");
    } else {
        assert_eq!(versions(&h), [1, 1], "{name}: one version per key, the tombstone");
    }
    assert_eq!(read(&mut h, reader, "k"), None, "{name}: still deleted after collection");

    // A newer write brings the key back, everywhere.
    assert!(matches!(run_txn(&mut h, reader, &[("k", "v2")]), SessionEvent::Committed(Some(_))), "{name}");
    ticks(&mut h, 10);
    assert_eq!(read(&mut h, writer, "k").as_deref(), Some("v2"), "{name}");
}

/// Rounds of every periodic timer, 5 ms apart, delivering what `pick` lets
/// through.
fn ticks_where<P: Periodic>(h: &mut Harness<P>, rounds: usize, pick: impl Fn(&InFlight<P::Message>) -> bool + Copy) {
    for _ in 0..rounds {
        h.advance_clocks(5_000);
        for timer in P::periodic() {
            h.fire_all(timer);
            h.deliver_where(pick);
        }
    }
}

/// A tombstone is not collected while a write it beats may still arrive:
/// DC 1 writes k, but the link from DC 1 to DC 0 stalls; DC 0 then deletes
/// k. However long DC 0 runs, it keeps the tombstone until DC 1's older
/// write has come (were it dropped, that write would bring k back in DC 0
/// alone and the DCs would disagree for ever).
fn a_tombstone_outlives_the_writes_it_beats<P: Periodic>(config: P::Config) {
    let topology = Topology::full(2, 1).unwrap();
    let mut h = Harness::<P>::new(topology, config, START_US);
    let (dc0, dc1) = (ReplicaId::at(DcId(0), PartitionId(0)), ReplicaId::at(DcId(1), PartitionId(0)));
    let (c0, c1) = (ClientId { dc: DcId(0), index: 0 }, ClientId { dc: DcId(1), index: 0 });
    h.add_session(c0, dc0);
    h.add_session(c1, dc1);
    let name = P::NAME;
    let stalled = |m: &InFlight<P::Message>| {
        m.from == causeway_protocol::Addr::Replica(dc1) && m.to == causeway_protocol::Addr::Replica(dc0)
    };
    assert!(matches!(run_txn(&mut h, c1, &[("k", "old")]), SessionEvent::Committed(Some(_))), "{name}");
    ticks_where(&mut h, 2, |m| !stalled(m));
    h.advance_clocks(50_000);
    assert!(matches!(delete_txn(&mut h, c0, "k"), SessionEvent::Committed(Some(_))), "{name}");
    ticks_where(&mut h, 40, |m| !stalled(m));
    assert!(h.replica(dc0).counters().versions >= 1, "{name}: the tombstone waits for DC 1's writes");
    // The link recovers: DC 1's older write arrives and loses to the delete.
    ticks(&mut h, 40);
    assert_eq!(read(&mut h, c0, "k"), None, "{name}: DC 0");
    assert_eq!(read(&mut h, c1, "k"), None, "{name}: DC 1");
    for r in [dc0, dc1] {
        assert_eq!(h.replica(r).counters().versions, 0, "{name}: collected once settled");
    }
}

#[test]
fn a_tombstone_outlives_the_writes_it_beats_in_wren_cure_and_h_cure() {
    a_tombstone_outlives_the_writes_it_beats::<Wren>(Default::default());
    a_tombstone_outlives_the_writes_it_beats::<Cure>(Default::default());
    a_tombstone_outlives_the_writes_it_beats::<HCure>(Default::default());
}

#[test]
fn wren_deletes() {
    deletes_work::<Wren>(Default::default());
}

#[test]
fn cure_deletes() {
    deletes_work::<Cure>(Default::default());
}

#[test]
fn h_cure_deletes() {
    deletes_work::<HCure>(Default::default());
}

#[test]
fn ec_deletes() {
    deletes_work::<Ec>(Default::default());
}

/// Every protocol keeps its guarantee when a third of the writes are
/// deletes (the property tests delete on half their seeds; this makes sure
/// deletes, and reads of deleted keys, are really there).
fn keeps_its_guarantee_with_deletes<P: Periodic>() {
    let config = P::configure(&Default::default());
    let runs = par_seeds(seeds(60), |seed| {
        let mut sim = random_config(seed, 800);
        if let WorkloadKind::Random(w) = &mut sim.workload {
            w.delete_fraction = 0.3;
        }
        let (report, verdict) = run::<P>(sim, &config);
        let problems = problems::<P>(&report, &verdict);
        (seed, problems, verdict.stats.deletes)
    });
    let failures: Vec<String> =
        runs.iter().filter(|r| !r.1.is_empty()).map(|(seed, p, _)| format!("seed {seed}: {}", p.join("\n"))).collect();
    assert!(failures.is_empty(), "{}: {}", P::NAME, failures.join("\n\n"));
    let deletes: usize = runs.iter().map(|r| r.2).sum();
    assert!(deletes > 1_000, "{}: only {deletes} deletes", P::NAME);
}

#[test]
fn every_protocol_keeps_its_guarantee_with_deletes() {
    keeps_its_guarantee_with_deletes::<Wren>();
    keeps_its_guarantee_with_deletes::<Cure>();
    keeps_its_guarantee_with_deletes::<HCure>();
    keeps_its_guarantee_with_deletes::<Ec>();
}
