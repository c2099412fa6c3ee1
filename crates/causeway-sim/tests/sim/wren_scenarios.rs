//! The Wren paper's scenarios, replayed step by step on the hand-cranked
//! harness: Figure 1, read-your-writes through the client cache, atomic
//! visibility of a multi-partition write, a DC cut off and healed, and
//! garbage collection.

use crate::common;

use causeway_protocol::twopc::FamilyReplica;
use causeway_protocol::twopc::Rhythm;
use causeway_protocol::wren::WrenMsg;
use causeway_protocol::wren::{Fault, Wren, WrenConfig, WrenTimer};
use causeway_protocol::{
    Addr, ClientId, DcId, Key, Replica, ReplicaId, SessionError, SessionEvent, Timestamp, Topology, Value,
};
use causeway_sim::harness::Harness;
use common::scenario::{commit_where, key_in, read_txn, read_values, run_txn, s};

const START_US: u64 = 1_000_000;

fn client(dc: u16, index: u32) -> ClientId {
    ClientId { dc: DcId(dc), index }
}

/// One round of Δ_R and Δ_G everywhere, `step_us` later, delivering what `pick` allows.
fn tick(h: &mut Harness<Wren>, step_us: u64, pick: impl Fn(&causeway_sim::harness::InFlight<WrenMsg>) -> bool + Copy) {
    h.advance_clocks(step_us);
    h.fire_all(WrenTimer::Apply);
    h.deliver_where(pick);
    h.fire_all(WrenTimer::Stabilize);
    h.deliver_where(pick);
}

fn everything(_: &causeway_sim::harness::InFlight<WrenMsg>) -> bool {
    true
}

/// The schedule of Figure 1, up to c1's read: X1 and Y1 are stable; T2
/// writes X2 and Y2; p_y commits it, but T2's Commit message to p_x is held
/// back, and p_x's clock lags behind the others.
struct Figure1 {
    h: Harness<Wren>,
    x: String,
    y: String,
    px: ReplicaId,
    pz: ReplicaId,
    c1: ClientId,
    /// T2's commit timestamp.
    ct: Timestamp,
}

const PX: ReplicaId = ReplicaId::at(DcId(0), causeway_protocol::PartitionId(0));

/// Everything except T2's Commit to p_x moves.
fn commit_to_px_held(m: &causeway_sim::harness::InFlight<WrenMsg>) -> bool {
    !(m.to == Addr::Replica(PX) && matches!(m.msg, WrenMsg::Commit { .. }))
}

fn figure_1(config: WrenConfig) -> Figure1 {
    let topology = Topology::full(1, 4).unwrap();
    let (x, y) = (key_in(&topology, 0, "x"), key_in(&topology, 1, "y"));
    let (pz, pw) = (ReplicaId::new(0, 2), ReplicaId::new(0, 3));
    let mut h = Harness::<Wren>::new(topology, config, START_US);
    let (c0, c1, c2) = (client(0, 0), client(0, 1), client(0, 2));
    h.add_session(c0, pw);
    h.add_session(c1, pz);
    h.add_session(c2, pw);

    assert!(matches!(run_txn(&mut h, c0, &[(&x, "X1"), (&y, "Y1")]), SessionEvent::Committed(Some(_))));
    tick(&mut h, 10_000, everything);
    tick(&mut h, 10_000, everything);

    // Far behind the others: the physical clock alone would let p_x propose
    // a small time; the HLC keeps its proposals above what it has seen.
    h.set_clock(PX, START_US + 5_000);
    let ct = match commit_where(&mut h, c2, &[(&x, "X2"), (&y, "Y2")], commit_to_px_held) {
        Some(SessionEvent::Committed(Some(stamp))) => stamp.ts,
        other => panic!("T2 should have committed: {other:?}"),
    };
    // p_y installs Y2; p_x cannot install X2.
    tick(&mut h, 10_000, commit_to_px_held);
    tick(&mut h, 10_000, commit_to_px_held);
    Figure1 { h, x, y, px: PX, pz, c1, ct }
}

/// Figure 1 under Wren: the snapshot is one every partition has installed,
/// so both reads return at once with the older, consistent versions X1 and
/// Y1 — where Cure would block p_x's read.
#[test]
fn figure_1_wren_reads_older_consistent_versions_without_waiting() {
    let Figure1 { mut h, x, y, px, pz, c1, ct } = figure_1(WrenConfig::default());
    assert!(h.replica(pz).stable_times().0 < ct, "LST must stay below T2 while p_x lags");
    assert!(h.replica(px).version_vector()[0] < ct, "p_x has not installed T2");

    let values = read_txn(&mut h, c1, &[&x, &y], commit_to_px_held);
    assert_eq!(values, vec![s("X1"), s("Y1")], "older but consistent versions");
    assert_eq!(h.reads_waited, 0, "no Wren read waits");
    assert!(h.reads_answered_at_once >= 2);

    // Once p_x receives the commit, the new versions become visible together.
    h.deliver_all();
    tick(&mut h, 10_000, everything);
    tick(&mut h, 10_000, everything);
    assert_eq!(read_txn(&mut h, c1, &[&x, &y], everything), vec![s("X2"), s("Y2")]);
    assert_eq!(h.reads_waited, 0);
}

/// The same schedule with the snapshot taken from the coordinator's clock
/// (Cure's choice) but without Cure's blocking: the read is fractured. This
/// is what Wren's stable snapshot prevents, and it shows the scenario bites.
#[test]
fn figure_1_with_a_clock_snapshot_and_no_blocking_reads_fractured_values() {
    let config = WrenConfig { fault: Fault::SnapshotFromClock, ..WrenConfig::default() };
    let Figure1 { mut h, x, y, c1, .. } = figure_1(config);
    let values = read_txn(&mut h, c1, &[&x, &y], commit_to_px_held);
    assert_eq!(values, vec![s("X1"), s("Y2")], "half of T2 is visible");
}

/// A client reads its own write through its cache while the local stable
/// snapshot does not include it yet; other clients do not see it yet; once
/// stable, the cache entry is pruned and the store serves it.
#[test]
fn read_your_writes_through_the_client_cache_while_the_stable_snapshot_lags() {
    let topology = Topology::full(2, 2).unwrap();
    let x = key_in(&topology, 1, "x");
    let mut h = Harness::<Wren>::new(topology, WrenConfig::default(), START_US);
    let (me, other) = (client(0, 0), client(0, 1));
    h.add_session(me, ReplicaId::new(0, 0));
    h.add_session(other, ReplicaId::new(0, 1));

    let ct = match run_txn(&mut h, me, &[(&x, "mine")]) {
        SessionEvent::Committed(Some(stamp)) => stamp.ts,
        other => panic!("{other:?}"),
    };
    assert_eq!(h.session(me).role().past().cache_len(), 1);

    // No apply or stabilization has run: the snapshot is older than ct.
    h.begin(me).unwrap();
    h.deliver_all();
    h.take_event(me);
    assert!(h.session(me).role().past().snapshot().0 < ct);
    let in_flight_before = h.in_flight.len();
    let values = read_values(h.read(me, &[&x]).unwrap());
    assert_eq!(values, vec![s("mine")], "served from the cache");
    assert_eq!(h.in_flight.len(), in_flight_before, "without asking any partition");
    h.commit(me).unwrap();
    h.deliver_all();

    assert_eq!(read_txn(&mut h, other, &[&x], everything), vec![None], "not stable yet for others");

    tick(&mut h, 10_000, everything);
    tick(&mut h, 10_000, everything);
    assert_eq!(read_txn(&mut h, other, &[&x], everything), vec![s("mine")]);
    assert_eq!(read_txn(&mut h, me, &[&x], everything), vec![s("mine")]);
    assert_eq!(h.session(me).role().past().cache_len(), 0, "pruned once the snapshot includes it");
}

/// A write to two partitions becomes visible in one step, whatever the
/// order the partitions apply it in.
#[test]
fn a_write_spanning_partitions_becomes_visible_atomically() {
    let topology = Topology::full(1, 3).unwrap();
    let (a, b) = (key_in(&topology, 0, "a"), key_in(&topology, 1, "b"));
    let (p0, p1) = (ReplicaId::new(0, 0), ReplicaId::new(0, 1));
    let mut h = Harness::<Wren>::new(topology, WrenConfig::default(), START_US);
    let (w, r) = (client(0, 0), client(0, 1));
    h.add_session(w, ReplicaId::new(0, 2));
    h.add_session(r, ReplicaId::new(0, 2));
    run_txn(&mut h, w, &[(&a, "A"), (&b, "B")]);

    let mut seen = Vec::new();
    // p0 (and the uninvolved p2) apply and stabilization runs, but p1 has
    // not applied yet.
    h.advance_clocks(10_000);
    h.fire(p0, WrenTimer::Apply);
    h.fire(ReplicaId::new(0, 2), WrenTimer::Apply);
    h.deliver_all();
    h.fire_all(WrenTimer::Stabilize);
    h.deliver_all();
    seen.push(read_txn(&mut h, r, &[&a, &b], everything));
    h.fire(p1, WrenTimer::Apply);
    h.deliver_all();
    seen.push(read_txn(&mut h, r, &[&a, &b], everything));
    h.fire_all(WrenTimer::Stabilize);
    h.deliver_all();
    seen.push(read_txn(&mut h, r, &[&a, &b], everything));

    assert_eq!(seen.first().unwrap(), &vec![None, None]);
    assert_eq!(seen.last().unwrap(), &vec![s("A"), s("B")]);
    for pair in &seen {
        assert!(pair == &vec![None, None] || pair == &vec![s("A"), s("B")], "fractured: {pair:?}");
    }
}

/// DC 1 is cut off: it keeps committing, its RST freezes and its LST moves
/// on; after the heal both DCs converge to the same state.
#[test]
fn a_dc_cut_off_keeps_committing_and_converges_after_the_heal() {
    let topology = Topology::full(2, 2).unwrap();
    let keys: Vec<String> = (0..4).map(|i| key_in(&topology, i % 2, &format!("k{i}_"))).collect();
    let mut h = Harness::<Wren>::new(topology, WrenConfig::default(), START_US);
    let (c0, c1) = (client(0, 0), client(1, 0));
    h.add_session(c0, ReplicaId::new(0, 0));
    h.add_session(c1, ReplicaId::new(1, 1));
    for _ in 0..3 {
        tick(&mut h, 5_000, everything);
    }
    let inside = |m: &causeway_sim::harness::InFlight<WrenMsg>| match (m.from, m.to) {
        (Addr::Replica(a), Addr::Replica(b)) => a.dc == b.dc,
        _ => true,
    };
    let watched = ReplicaId::new(1, 0);
    let (lst_before, rst_before) = h.replica(watched).stable_times();
    assert!(rst_before > Timestamp::ZERO, "RST advanced while connected");

    for (i, k) in keys.iter().enumerate() {
        let c = if i % 2 == 0 { c0 } else { c1 };
        h.begin(c).unwrap();
        h.deliver_where(inside);
        h.take_event(c);
        h.write(c, k, &format!("v{i}@dc{}", c.dc.0)).unwrap();
        h.write(c, &keys[0], &format!("conflict{i}")).unwrap();
        h.commit(c).unwrap();
        h.deliver_where(inside);
        assert!(matches!(h.take_event(c), Some(SessionEvent::Committed(Some(_)))), "commits while cut off");
        tick(&mut h, 5_000, inside);
    }
    let (lst_cut, rst_cut) = h.replica(watched).stable_times();
    assert_eq!(rst_cut, rst_before, "RST freezes while the DC is cut off");
    assert!(lst_cut > lst_before, "LST keeps advancing");
    let mine = "v1@dc1".to_string();
    assert_eq!(read_txn(&mut h, c1, &[&keys[1]], inside), vec![Some(mine)], "local writes visible locally");

    // Heal: everything held is delivered.
    for _ in 0..4 {
        h.deliver_all();
        tick(&mut h, 5_000, everything);
    }
    assert!(h.replica(watched).stable_times().1 > rst_cut, "RST moves again after the heal");
    let state = |h: &Harness<Wren>, dc: u16| -> Vec<(Key, Value)> {
        let mut all: Vec<(Key, Value)> =
            (0..2).flat_map(|p| h.replica(ReplicaId::new(dc, p)).latest_values()).collect();
        all.sort();
        all
    };
    assert_eq!(state(&h, 0), state(&h, 1), "both DCs converge");
    assert_eq!(state(&h, 0).len(), 4);
}

/// Versions a running transaction may read survive GC; once it ends they
/// go. A client that vanishes mid-transaction stops pinning them after the
/// context timeout.
#[test]
fn gc_keeps_what_running_transactions_can_read_and_expires_vanished_clients() {
    let topology = Topology::full(1, 2).unwrap();
    let x = key_in(&topology, 0, "x");
    let rhythm = Rhythm { tx_context_timeout_us: 1_000_000, ..Rhythm::default() };
    let config = WrenConfig { rhythm, ..WrenConfig::default() };
    let p0 = ReplicaId::new(0, 0);
    let mut h = Harness::<Wren>::new(topology, config, START_US);
    let (writer, reader, ghost) = (client(0, 0), client(0, 1), client(0, 2));
    h.add_session(writer, ReplicaId::new(0, 1));
    h.add_session(reader, ReplicaId::new(0, 0));
    h.add_session(ghost, ReplicaId::new(0, 1));
    run_txn(&mut h, writer, &[(&x, "v0")]);
    tick(&mut h, 10_000, everything);
    tick(&mut h, 10_000, everything);

    // A long reader starts, and a client starts a transaction and vanishes.
    h.begin(reader).unwrap();
    h.begin(ghost).unwrap();
    h.deliver_all();
    h.take_event(reader);
    h.take_event(ghost);
    for i in 1..=5 {
        run_txn(&mut h, writer, &[(&x, &format!("v{i}"))]);
        tick(&mut h, 10_000, everything);
        tick(&mut h, 10_000, everything);
    }
    assert!(h.replica(p0).core().chain_len(x.as_bytes()) >= 2, "the old version is pinned");
    let pinned = read_values(h.read(reader, &[&x]).unwrap().or_else(|| {
        h.deliver_all();
        h.take_event(reader)
    }));
    assert_eq!(pinned, vec![s("v0")], "the long reader still reads its snapshot");
    h.commit(reader).unwrap();
    h.deliver_all();

    // The ghost still pins; after the timeout its context is dropped.
    run_txn(&mut h, writer, &[(&x, "v6")]);
    tick(&mut h, 10_000, everything);
    tick(&mut h, 10_000, everything);
    assert!(h.replica(p0).core().chain_len(x.as_bytes()) >= 2, "the vanished client still pins");
    h.advance_clocks(2_000_000);
    h.fire_all(WrenTimer::ExpireContexts);
    assert_eq!(h.replica(ReplicaId::new(0, 1)).core().coordinator.open_transactions(), 0);
    assert!(h.replica(ReplicaId::new(0, 1)).counters().contexts_expired >= 1);
    run_txn(&mut h, writer, &[(&x, "v7")]);
    tick(&mut h, 10_000, everything);
    tick(&mut h, 10_000, everything);
    run_txn(&mut h, writer, &[(&x, "v8")]);
    tick(&mut h, 10_000, everything);
    // Chains are pruned when written: v8's insert dropped everything older
    // than v7, the newest version the oldest running snapshot can see.
    assert_eq!(h.replica(p0).core().chain_len(x.as_bytes()), 2, "v7 and v8 are left");
    assert_eq!(h.replica(p0).counters().versions_collected, 7, "v0 to v6 are collected");

    // The ghost comes back: its transaction is gone.
    h.read(ghost, &[&x]).unwrap();
    h.deliver_all();
    assert_eq!(h.take_event(ghost), Some(SessionEvent::Failed(SessionError::UnknownTransaction)));
}

/// One DC of two partitions, p0 and p1, keys x on p0 and y on p1, and a
/// client of p0.
struct TwoPartitions {
    h: Harness<Wren>,
    x: String,
    y: String,
    p0: ReplicaId,
    p1: ReplicaId,
    c: ClientId,
}

fn two_partitions() -> TwoPartitions {
    let topology = Topology::full(1, 2).unwrap();
    let (x, y) = (key_in(&topology, 0, "x"), key_in(&topology, 1, "y"));
    let (p0, p1) = (ReplicaId::new(0, 0), ReplicaId::new(0, 1));
    let mut h = Harness::<Wren>::new(topology, WrenConfig::default(), START_US);
    let c = client(0, 0);
    h.add_session(c, p0);
    TwoPartitions { h, x, y, p0, p1, c }
}

/// A decision lost with a shed backlog: the cohort asks the coordinator at
/// once (not after `resolve_after_us`) and installs the commit.
#[test]
fn a_commit_decision_lost_with_a_shed_backlog_is_asked_for_at_once() {
    let TwoPartitions { mut h, x, y, p0, p1, c } = two_partitions();
    let to_p1 = |m: &causeway_sim::harness::InFlight<WrenMsg>| {
        !(m.to == Addr::Replica(p1) && matches!(m.msg, WrenMsg::Commit { .. }))
    };
    assert!(matches!(commit_where(&mut h, c, &[(&x, "X"), (&y, "Y")], to_p1), Some(SessionEvent::Committed(_))));
    let lost = h.shed_between(p0, p1);
    assert!(lost.iter().any(|m| matches!(m.msg, WrenMsg::Commit { .. })), "the decision to p1 was shed");
    let asked = h.in_flight.iter().filter(|m| m.from == Addr::Replica(p1) && matches!(m.msg, WrenMsg::Resolve { .. }));
    assert_eq!(asked.count(), 1, "p1 asks p0 about the transaction at once");
    h.deliver_all();
    tick(&mut h, 10_000, everything);
    tick(&mut h, 10_000, everything);
    let c2 = client(0, 1);
    h.add_session(c2, p1);
    assert_eq!(read_txn(&mut h, c2, &[&x, &y], everything), vec![s("X"), s("Y")]);
}

/// A prepare lost with a shed backlog: the coordinator gives the commit up
/// at once (not after `commit_timeout_us`), and the client hears it
/// aborted.
#[test]
fn a_prepare_lost_with_a_shed_backlog_aborts_the_commit_at_once() {
    let TwoPartitions { mut h, x, y, p0, p1, c } = two_partitions();
    let not_to_p1 = |m: &causeway_sim::harness::InFlight<WrenMsg>| m.to != Addr::Replica(p1);
    assert_eq!(commit_where(&mut h, c, &[(&x, "X"), (&y, "Y")], not_to_p1), None, "the commit waits for p1");
    let lost = h.shed_between(p0, p1);
    assert!(!lost.is_empty(), "the prepare to p1 was shed");
    h.deliver_all();
    match h.take_event(c) {
        Some(SessionEvent::Aborted(_)) => {}
        other => panic!("the commit should be given up at once: {other:?}"),
    }
}
