//! The PaRiS paper's claims, replayed step by step on the hand-cranked
//! harness: a read of a partition the client's DC does not hold, answered
//! by another DC in one round without waiting; read-your-writes through
//! the client cache while the UST lags; a transaction whose partitions
//! live in different DCs, visible atomically; and a DC cut off from the
//! others, which freezes the UST everywhere while every DC keeps
//! committing, then converges after the heal.

use crate::common;

use causeway_protocol::paris::{Paris, ParisConfig, ParisMsg, ParisReplica};
use causeway_protocol::twopc::{FamilyTimer, TxnMsg};
use causeway_protocol::{Addr, ClientId, DcId, PartitionId, Replica, ReplicaId, SessionEvent, Timestamp, Topology};
use causeway_sim::harness::{Harness, InFlight};
use common::scenario::{key_in, read_txn, read_values, run_txn, run_txn_where, s};

const START_US: u64 = 1_000_000;

fn client(dc: u16, index: u32) -> ClientId {
    ClientId { dc: DcId(dc), index }
}

fn everything(_: &InFlight<ParisMsg>) -> bool {
    true
}

/// One round of Δ_R and Δ_G everywhere, 10 ms later, delivering what
/// `pick` lets through (twice Δ_G: a round's reports climb each DC's tree,
/// cross to the other roots, and the next one brings the UST down).
fn tick(h: &mut Harness<Paris>, pick: impl Fn(&InFlight<ParisMsg>) -> bool + Copy) {
    h.advance_clocks(10_000);
    for timer in [FamilyTimer::Apply, FamilyTimer::Stabilize, FamilyTimer::Stabilize] {
        h.fire_all(timer);
        h.deliver_where(pick);
    }
}

fn committed_at(event: SessionEvent) -> Timestamp {
    match event {
        SessionEvent::Committed(Some(stamp)) => stamp.ts,
        other => panic!("expected a commit, got {other:?}"),
    }
}

fn ust(h: &Harness<Paris>, id: ReplicaId) -> Timestamp {
    let r: &ParisReplica = h.replica(id);
    r.ust()
}

/// 3 DCs × 3 partitions, R = 2: DC 0 holds partitions 0 and 1, DC 1 holds
/// 0 and 2, DC 2 holds 1 and 2.
fn three_by_three() -> Topology {
    let t = Topology::round_robin(3, 3, 2).unwrap();
    assert_eq!(t.replicas_in(DcId(0)), vec![ReplicaId::new(0, 0), ReplicaId::new(0, 1)]);
    assert_eq!(t.replicas_in(DcId(1)), vec![ReplicaId::new(1, 0), ReplicaId::new(1, 2)]);
    t
}

#[test]
fn a_partition_held_only_in_other_dcs_is_read_there_in_one_round_without_waiting() {
    let topology = three_by_three();
    let z = key_in(&topology, 2, "z");
    let mut h = Harness::<Paris>::new(topology, ParisConfig::default(), START_US);
    let (writer, reader) = (client(1, 0), client(0, 0));
    h.add_session(writer, ReplicaId::new(1, 2));
    h.add_session(reader, ReplicaId::new(0, 0));
    let ct = committed_at(run_txn(&mut h, writer, &[(&z, "Z")]));
    for _ in 0..4 {
        tick(&mut h, everything);
    }
    assert!(ust(&h, ReplicaId::new(0, 0)) >= ct, "the UST passed the write");

    h.begin(reader).unwrap();
    h.deliver_all();
    assert_eq!(h.take_event(reader), Some(SessionEvent::Started));
    let (waited, at_once) = (h.reads_waited, h.reads_answered_at_once);
    assert_eq!(h.read(reader, &[&z]).unwrap(), None);
    // The coordinator's one slice request goes to DC 0's preferred replica
    // of partition 2: DC 1's (DC 0 holds none).
    h.deliver_where(|m| matches!(m.to, Addr::Replica(r) if r == ReplicaId::new(0, 0)));
    let slices: Vec<Addr> =
        h.in_flight.iter().filter(|m| matches!(m.msg, TxnMsg::SliceReq { .. })).map(|m| m.to).collect();
    assert_eq!(slices, vec![Addr::Replica(ReplicaId::new(1, 2))], "one slice, to the other DC");
    h.deliver_all();
    assert_eq!(read_values(h.take_event(reader)), vec![s("Z")]);
    assert_eq!((h.reads_waited - waited, h.reads_answered_at_once - at_once), (0, 1), "answered at once");
}

#[test]
fn a_client_reads_its_own_writes_through_its_cache_while_a_cut_off_dc_freezes_the_ust() {
    let topology = three_by_three();
    let x = key_in(&topology, 1, "x");
    let mut h = Harness::<Paris>::new(topology.clone(), ParisConfig::default(), START_US);
    let (me, other, far) = (client(0, 0), client(0, 1), client(2, 0));
    h.add_session(me, ReplicaId::new(0, 0));
    h.add_session(other, ReplicaId::new(0, 1));
    h.add_session(far, ReplicaId::new(2, 1));
    for _ in 0..3 {
        tick(&mut h, everything);
    }
    let before: Vec<Timestamp> = topology.all_replicas().into_iter().map(|r| ust(&h, r)).collect();
    assert!(before.iter().all(|&t| t > Timestamp::ZERO), "every replica has a UST: {before:?}");

    // DC 2 is cut off: nothing crosses between it and the others.
    let cut = |m: &InFlight<ParisMsg>| {
        let dc = |a: Addr| match a {
            Addr::Replica(r) => r.dc,
            Addr::Client(c) => c.dc,
        };
        (dc(m.from) == DcId(2)) == (dc(m.to) == DcId(2))
    };
    let ct = committed_at(run_txn_where(&mut h, me, &[(&x, "mine")], cut));
    let ct_far = committed_at(run_txn_where(&mut h, far, &[(&x, "far")], cut));
    for _ in 0..5 {
        tick(&mut h, cut);
    }
    let during: Vec<Timestamp> = topology.all_replicas().into_iter().map(|r| ust(&h, r)).collect();
    assert_eq!(during, before, "the UST froze in every DC");
    assert!(ct > before[0] && ct_far > before[0], "both DCs kept committing");

    // The client reads its write from its cache, asking no one; another
    // client of its DC does not see it.
    assert_eq!(read_txn(&mut h, me, &[&x], cut), vec![s("mine")]);
    assert_eq!(h.session(me).role().past().cache_len(), 1);
    assert_eq!(read_txn(&mut h, other, &[&x], cut), vec![None], "not in the UST");

    // The heal: what was held back flows, the UST passes both writes, the
    // cache empties, and the DCs that hold x agree on the newer write.
    h.deliver_all();
    for _ in 0..4 {
        tick(&mut h, everything);
    }
    assert!(ust(&h, ReplicaId::new(0, 0)) >= ct.max(ct_far));
    let winner = if (ct, DcId(0)) > (ct_far, DcId(2)) { "mine" } else { "far" };
    assert_eq!(read_txn(&mut h, other, &[&x], everything), vec![s(winner)]);
    assert_eq!(read_txn(&mut h, me, &[&x], everything), vec![s(winner)]);
    assert_eq!(h.session(me).role().past().cache_len(), 0, "pruned once the UST includes it");
    for dc in topology.replicas_of(PartitionId(1)) {
        let values = h.replica(ReplicaId::at(*dc, PartitionId(1))).latest_values();
        let held: Vec<_> = values.iter().filter(|(k, _)| k.as_ref() == x.as_bytes()).map(|(_, v)| v.as_ref()).collect();
        assert_eq!(held, vec![winner.as_bytes()], "{dc} converged");
    }
}

/// R = 1: partition 1 lives only in DC 1 and partition 2 only in DC 2. A
/// client of DC 0 writes both; the commit reaches DC 2's cohort late.
/// Until it does, nobody — in any DC — sees either write; then both at
/// once.
#[test]
fn a_transaction_whose_partitions_live_in_different_dcs_becomes_visible_atomically() {
    let topology = Topology::round_robin(3, 3, 1).unwrap();
    let (a, b) = (key_in(&topology, 1, "a"), key_in(&topology, 2, "b"));
    let mut h = Harness::<Paris>::new(topology, ParisConfig::default(), START_US);
    let (writer, readers) = (client(0, 0), [client(0, 1), client(1, 0), client(2, 0)]);
    h.add_session(writer, ReplicaId::new(0, 0));
    for (i, r) in readers.iter().enumerate() {
        h.add_session(*r, ReplicaId::new(i as u16, i as u32));
    }
    let late = |m: &InFlight<ParisMsg>| {
        !(matches!(m.msg, TxnMsg::Commit { .. }) && m.to == Addr::Replica(ReplicaId::new(2, 2)))
    };
    h.begin(writer).unwrap();
    h.deliver_all();
    h.take_event(writer);
    h.write(writer, &a, "A").unwrap();
    h.write(writer, &b, "B").unwrap();
    h.commit(writer).unwrap();
    h.deliver_where(late);
    let ct = committed_at(h.take_event(writer).expect("the client heard the commit"));
    for _ in 0..4 {
        tick(&mut h, late);
        for &r in &readers {
            assert_eq!(read_txn(&mut h, r, &[&a, &b], late), vec![None, None], "{r}: nothing before DC 2 commits");
        }
    }
    assert!(ust(&h, ReplicaId::new(0, 0)) < ct, "the UST waits below the prepared transaction");
    h.deliver_all();
    for _ in 0..3 {
        tick(&mut h, everything);
    }
    for &r in &readers {
        assert_eq!(read_txn(&mut h, r, &[&a, &b], everything), vec![s("A"), s("B")], "{r}");
    }
}

fn cut_off_dc_2(m: &InFlight<ParisMsg>) -> bool {
    let dc = |a: Addr| match a {
        Addr::Replica(r) => r.dc,
        Addr::Client(c) => c.dc,
    };
    (dc(m.from) == DcId(2)) == (dc(m.to) == DcId(2))
}

/// Starts a transaction for `c` and delivers what `pick` lets through for a
/// few rounds; returns whether it started.
fn starts(h: &mut Harness<Paris>, c: ClientId, pick: fn(&InFlight<ParisMsg>) -> bool) -> bool {
    h.begin(c).unwrap();
    h.deliver_where(pick);
    let started = h.take_event(c) == Some(SessionEvent::Started);
    if started {
        h.abort(c).unwrap();
        h.deliver_where(pick);
    }
    started
}

/// The root of a DC's tree computes the UST only once it has heard from
/// every DC; restarted while another DC is cut off, it resumes from the UST
/// it made durable and it and its tree keep serving their clients.
#[test]
fn a_dc_root_restarted_while_another_dc_is_cut_off_keeps_serving() {
    let topology = three_by_three();
    let mut h = Harness::<Paris>::new(topology, ParisConfig::default(), START_US);
    let (at_root, at_child) = (client(0, 0), client(0, 1));
    let (root, child) = (ReplicaId::new(0, 0), ReplicaId::new(0, 1));
    h.add_session(at_root, root);
    h.add_session(at_child, child);
    for _ in 0..3 {
        tick(&mut h, everything);
    }
    let before = ust(&h, root);
    tick(&mut h, cut_off_dc_2);
    h.restart_from_checkpoint(root);
    h.restart_from_checkpoint(child);
    // The child's start waits for its root's UST...
    h.begin(at_child).unwrap();
    h.deliver_where(cut_off_dc_2);
    assert_eq!(h.take_event(at_child), None, "held until the DC's UST is known again");
    // ...which the restarted root hands down from what it made durable.
    tick(&mut h, cut_off_dc_2);
    assert_eq!(h.take_event(at_child), Some(SessionEvent::Started));
    h.abort(at_child).unwrap();
    assert!(starts(&mut h, at_root, cut_off_dc_2), "the restarted root serves its clients during the cut");
    let resumed = ust(&h, root);
    assert!(resumed > Timestamp::ZERO && resumed <= before, "resumed from a durable UST: {resumed:?} <= {before:?}");
    for _ in 0..3 {
        tick(&mut h, cut_off_dc_2);
    }
    assert_eq!(ust(&h, root), resumed, "frozen while DC 2 is cut off");
    h.deliver_all();
    for _ in 0..3 {
        tick(&mut h, everything);
    }
    assert!(ust(&h, root) > resumed, "moving again after the heal");
}

/// Old versions go once the oldest snapshot in use — in every DC — has
/// passed them (a chain is pruned when a version joins it).
#[test]
fn versions_no_snapshot_can_read_are_collected() {
    let topology = three_by_three();
    let x = key_in(&topology, 0, "x");
    let mut h = Harness::<Paris>::new(topology, ParisConfig::default(), START_US);
    let writer = client(1, 0);
    h.add_session(writer, ReplicaId::new(1, 0));
    for i in 0..5 {
        run_txn(&mut h, writer, &[(&x, &format!("v{i}"))]);
        tick(&mut h, everything);
    }
    for _ in 0..10 {
        tick(&mut h, everything);
    }
    run_txn(&mut h, writer, &[(&x, "last")]);
    tick(&mut h, everything);
    for dc in [0, 1] {
        let r = h.replica(ReplicaId::new(dc, 0));
        // The new version, and the one the oldest snapshot sees.
        assert_eq!(causeway_protocol::twopc::FamilyReplica::core(r).chain_len(x.as_bytes()), 2, "dc{dc}");
        assert!(r.counters().versions_collected >= 4, "dc{dc}: {:?}", r.counters());
    }
}

/// While the UST is frozen a session's cache holds every write it commits;
/// past the limit, a commit that would add to it is refused — nothing of
/// it takes effect — and the session may go on writing the keys it holds
/// and reading; once the UST moves again, the cache empties and commits go
/// through.
#[test]
fn a_full_client_cache_refuses_commits_until_the_ust_moves_again() {
    use causeway_protocol::{Limits, SessionError};
    let topology = three_by_three();
    let keys: Vec<String> = (0..4).map(|i| key_in(&topology, 0, &format!("k{i}-"))).collect();
    let mut h = Harness::<Paris>::new(topology, ParisConfig::default(), START_US);
    let (me, other) = (client(0, 0), client(0, 1));
    h.add_session_with(me, ReplicaId::new(0, 0), Limits { max_cached_writes: 3, ..Limits::default() });
    h.add_session(other, ReplicaId::new(0, 1));
    for _ in 0..3 {
        tick(&mut h, everything);
    }
    for k in &keys[..3] {
        committed_at(run_txn_where(&mut h, me, &[(k, "v")], cut_off_dc_2));
        tick(&mut h, cut_off_dc_2);
    }
    assert_eq!(h.session(me).role().past().cache_len(), 3);
    match run_txn_where(&mut h, me, &[(&keys[3], "v")], cut_off_dc_2) {
        SessionEvent::Failed(SessionError::TooLarge { size: 4, limit: 3, .. }) => {}
        other => panic!("expected the commit refused, got {other:?}"),
    }
    assert_eq!(read_txn(&mut h, other, &[&keys[3]], cut_off_dc_2), vec![None], "nothing of it took effect");
    committed_at(run_txn_where(&mut h, me, &[(&keys[0], "again")], cut_off_dc_2));
    assert_eq!(read_txn(&mut h, me, &[&keys[0], &keys[1]], cut_off_dc_2), vec![s("again"), s("v")]);
    h.deliver_all();
    for _ in 0..4 {
        tick(&mut h, everything);
    }
    committed_at(run_txn(&mut h, me, &[(&keys[3], "v")]));
    assert!(h.session(me).role().past().cache_len() <= 1, "pruned once the UST moved");
}
