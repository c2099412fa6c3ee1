//! A replica whose disk is lost, re-seeded from its partition's replicas in
//! the other DCs, on the hand-cranked harness, for every protocol of the
//! family: what it gets back, from whom, and what it gives the peer that
//! had not received all of its writes before the loss.

use crate::common;

use causeway_protocol::cure::{Cure, HCure};
use causeway_protocol::twopc::{FamilyRecord, FamilyReplica, FamilyTimer, TxnMsg};
use causeway_protocol::wren::Wren;
use causeway_protocol::{
    Addr, ClientId, DcId, PartitionId, Protocol, Replica, ReplicaId, SessionEvent, Timestamp, Topology,
};
use causeway_sim::harness::{Harness, InFlight};
use common::scenario::{key_in, run_txn};
use std::sync::Arc;

const START_US: u64 = 1_000_000;

const LOST: ReplicaId = ReplicaId::at(DcId(0), PartitionId(0));
const BEHIND: ReplicaId = ReplicaId::at(DcId(2), PartitionId(0));

/// The family's protocols, as far as this test tells them apart.
trait Family: Protocol<Replica: Replica<Timer = FamilyTimer<Self::Own>>> {
    type Own;
}
impl Family for Wren {
    type Own = std::convert::Infallible;
}
impl Family for Cure {
    type Own = causeway_protocol::cure::WakeReads;
}
impl Family for HCure {
    type Own = causeway_protocol::cure::WakeReads;
}

/// One round of every periodic timer everywhere, 10 ms later, delivering
/// what `pick` lets through.
fn tick<P: Family>(h: &mut Harness<P>, pick: &dyn Fn(&InFlight<P::Message>) -> bool) {
    h.advance_clocks(10_000);
    for timer in [FamilyTimer::Apply, FamilyTimer::Stabilize, FamilyTimer::Heal] {
        h.fire_all(timer);
        h.deliver_where(pick);
    }
}

fn value_of<P: Protocol>(h: &Harness<P>, id: ReplicaId, key: &str) -> Option<String> {
    let values = h.replica(id).latest_values();
    let (_, v) = values.into_iter().find(|(k, _)| k.as_ref() == key.as_bytes())?;
    Some(String::from_utf8(v.to_vec()).unwrap())
}

fn committed_at(event: SessionEvent) -> Timestamp {
    match event {
        SessionEvent::Committed(Some(stamp)) => stamp.ts,
        other => panic!("expected a commit, got {other:?}"),
    }
}

/// DC 0 writes `x` and replicates it to DC 1 only — DC 2's copy is still
/// on its way — then DC 1 writes `y`, which reaches everyone. DC 0's
/// replica of the partition loses its disk. Re-seeded, it holds both
/// writes; DC 2, which never got `x` from it, gets it from the re-seeded
/// replica (which kept it for DC 2 as the lost one would have); a client of
/// DC 0 reads both, and its next commit is above every timestamp the lost
/// replica handed out — though the lost replica's clock ran 500 ms ahead
/// of the others', and its replacement's runs 1 s behind them.
fn a_lost_replica_gets_everything_back_and_resends_what_a_peer_lacked<P: Family>() {
    let topology = Topology::full(3, 2).unwrap();
    let (x, y) = (key_in(&topology, 0, "x"), key_in(&topology, 0, "y"));
    let mut h = Harness::<P>::new(topology, P::Config::default(), START_US);
    h.deliver_all();
    let to_behind = |m: &InFlight<P::Message>| m.from == Addr::Replica(LOST) && m.to == Addr::Replica(BEHIND);
    let writer0 = ClientId { dc: DcId(0), index: 0 };
    h.add_session(writer0, LOST);
    h.set_clock(LOST, START_US + 500_000);
    let x_ct = committed_at(run_txn(&mut h, writer0, &[(&x, "x1")]));
    for _ in 0..5 {
        tick(&mut h, &|m| !to_behind(m));
    }
    assert_eq!(value_of(&h, ReplicaId::at(DcId(1), PartitionId(0)), &x).as_deref(), Some("x1"));
    assert_eq!(value_of(&h, BEHIND, &x), None, "held back on its way to DC 2");
    let writer1 = ClientId { dc: DcId(1), index: 0 };
    h.add_session(writer1, ReplicaId::at(DcId(1), PartitionId(0)));
    h.begin(writer1).unwrap();
    h.deliver_where(|m| !to_behind(m));
    h.write(writer1, &y, "y1").unwrap();
    h.commit(writer1).unwrap();
    h.deliver_where(|m| !to_behind(m));
    let y1 = h.take_event(writer1);
    assert!(matches!(y1, Some(SessionEvent::Committed(Some(_)))), "{y1:?}");
    for _ in 0..5 {
        tick(&mut h, &|m| !to_behind(m));
    }

    assert_eq!(value_of(&h, BEHIND, &x), None, "still held back");
    assert!(h.reseed(LOST), "{} re-seeds", P::NAME);
    // Its replacement's clock runs 1 s behind the others'.
    let others = h.replica_clock(BEHIND);
    h.set_clock(LOST, others - 1_000_000);
    assert_eq!(value_of(&h, LOST, &x), None, "it starts empty");
    // 600 ms: it catches up with the streams, and the DC's stable time
    // passes the lost replica's skewed clock.
    for _ in 0..60 {
        tick(&mut h, &|_| true);
    }
    assert_eq!(value_of(&h, LOST, &x).as_deref(), Some("x1"), "its own DC's write, from DC 1");
    assert_eq!(value_of(&h, LOST, &y).as_deref(), Some("y1"), "DC 1's write");
    assert_eq!(value_of(&h, BEHIND, &x).as_deref(), Some("x1"), "resent to the peer that lacked it");

    // Its physical clock is still below `x`'s commit time: only what it
    // learned from the others keeps the next commit above it.
    let writer = ClientId { dc: DcId(0), index: 1 };
    h.add_session(writer, LOST);
    let x2_ct = committed_at(run_txn(&mut h, writer, &[(&x, "x2")]));
    assert!(x2_ct > x_ct, "{x2_ct} must be above {x_ct}, handed out before the loss");

    // Until its clock passes `x2`: the DC's stable time cannot pass it
    // before.
    for _ in 0..150 {
        tick(&mut h, &|_| true);
    }
    let reader = ClientId { dc: DcId(0), index: 2 };
    h.add_session(reader, LOST);
    h.begin(reader).unwrap();
    h.deliver_all();
    assert_eq!(h.take_event(reader), Some(SessionEvent::Started));
    h.read(reader, &[&x, &y]).unwrap();
    h.deliver_all();
    let Some(SessionEvent::Read(values)) = h.take_event(reader) else { panic!("the read finished") };
    let values: Vec<_> = values.into_iter().map(|(_, v)| v.map(|v| String::from_utf8(v.to_vec()).unwrap())).collect();
    assert_eq!(values, vec![Some("x2".to_string()), Some("y1".to_string())]);
    for dc in 0..3 {
        assert_eq!(value_of(&h, ReplicaId::at(DcId(dc), PartitionId(0)), &x).as_deref(), Some("x2"), "dc{dc}");
    }
    for id in h.topology.all_replicas() {
        assert_eq!(h.replica(id).counters().inputs_refused, 0, "{id:?} refused an honest input");
    }
}

/// DC 1's replica of the partition restarts from a checkpoint once every
/// peer has acknowledged its stream, which it then no longer remembers
/// having sent; DC 0's replica loses its disk. It still gets DC 1's write
/// from it.
fn a_peer_that_restarted_still_gives_its_writes<P: Family>() {
    let topology = Topology::full(2, 1).unwrap();
    let y = key_in(&topology, 0, "y");
    let mut h = Harness::<P>::new(topology, P::Config::default(), START_US);
    h.deliver_all();
    let peer = ReplicaId::at(DcId(1), PartitionId(0));
    let writer = ClientId { dc: DcId(1), index: 0 };
    h.add_session(writer, peer);
    assert!(matches!(run_txn(&mut h, writer, &[(&y, "y1")]), SessionEvent::Committed(Some(_))));
    for _ in 0..20 {
        tick(&mut h, &|_| true);
    }
    h.restart_from_checkpoint(peer);
    for _ in 0..5 {
        tick(&mut h, &|_| true);
    }
    assert!(h.reseed(LOST));
    for _ in 0..10 {
        tick(&mut h, &|_| true);
    }
    assert_eq!(value_of(&h, LOST, &y).as_deref(), Some("y1"), "{}: DC 1's write, after DC 1 restarted", P::NAME);
}

/// The lost replica coordinated a transaction over the two other partitions
/// of its DC and decided it commits; the decision reached one of them, not
/// the other, which still holds it prepared and asks the coordinator. The
/// re-seeded coordinator learned the decision from the partition that has
/// it, and answers that it committed: the transaction ends whole.
fn a_decision_the_lost_coordinator_took_is_not_taken_back<P: Family>() {
    let topology = Topology::full(2, 3).unwrap();
    let (a, b) = (key_in(&topology, 1, "a"), key_in(&topology, 2, "b"));
    let mut h = Harness::<P>::new(topology, P::Config::default(), START_US);
    h.deliver_all();
    let (p1, p2) = (ReplicaId::at(DcId(0), PartitionId(1)), ReplicaId::at(DcId(0), PartitionId(2)));
    let client = ClientId { dc: DcId(0), index: 0 };
    h.add_session(client, LOST);
    h.begin(client).unwrap();
    h.deliver_all();
    h.take_event(client);
    h.write(client, &a, "a1").unwrap();
    h.write(client, &b, "b1").unwrap();
    h.commit(client).unwrap();
    let commit_to_p2 =
        |m: &InFlight<P::Message>| m.to == Addr::Replica(p2) && format!("{:?}", m.msg).starts_with("Commit {");
    h.deliver_where(|m| !commit_to_p2(m));
    assert!(matches!(h.take_event(client), Some(SessionEvent::Committed(Some(_)))), "the client was told");
    assert!(h.reseed(LOST));
    // Past the cohort's wait before it asks (1 s), and the DC's stable time.
    for _ in 0..150 {
        tick(&mut h, &|_| true);
    }
    assert_eq!(value_of(&h, p1, &a).as_deref(), Some("a1"), "{}", P::NAME);
    assert_eq!(value_of(&h, p2, &b).as_deref(), Some("b1"), "{}: the transaction was cut in two", P::NAME);
}

/// Two DCs lose their replica of the partition at once; the third holds the
/// writes of all three. Neither waits for the other: both come back with
/// everything.
fn two_replicas_of_a_partition_lost_together_both_come_back<P: Family>() {
    let topology = Topology::full(3, 1).unwrap();
    let keys: Vec<String> = (0..3).map(|d| key_in(&topology, 0, &format!("k{d}-"))).collect();
    let mut h = Harness::<P>::new(topology, P::Config::default(), START_US);
    h.deliver_all();
    for d in 0..3u16 {
        let c = ClientId { dc: DcId(d), index: 0 };
        h.add_session(c, ReplicaId::at(DcId(d), PartitionId(0)));
        assert!(matches!(run_txn(&mut h, c, &[(&keys[usize::from(d)], "v")]), SessionEvent::Committed(Some(_))));
    }
    for _ in 0..20 {
        tick(&mut h, &|_| true);
    }
    let other = ReplicaId::at(DcId(1), PartitionId(0));
    assert!(h.reseed(LOST) && h.reseed(other));
    // The second loss took the first one's question with it: asked again
    // after 2 s of silence.
    for _ in 0..250 {
        tick(&mut h, &|_| true);
    }
    for id in [LOST, other] {
        for k in &keys {
            assert_eq!(value_of(&h, id, k).as_deref(), Some("v"), "{}: {id:?} lacks {k}", P::NAME);
        }
    }
}

/// DC 0 deletes a key; the delete reaches DC 1, which collects it in time
/// (and then restarts from a checkpoint), but not yet DC 2. DC 0's replica
/// loses its disk: the delete it kept for DC 2 comes back from DC 1's
/// memory of what it collected, and DC 2 drops the key too.
fn a_delete_another_dc_had_collected_still_reaches_the_dc_that_lacked_it<P: Family>() {
    let topology = Topology::full(3, 1).unwrap();
    let k = key_in(&topology, 0, "k");
    let mut h = Harness::<P>::new(topology, P::Config::default(), START_US);
    h.deliver_all();
    let writer = ClientId { dc: DcId(0), index: 0 };
    h.add_session(writer, LOST);
    assert!(matches!(run_txn(&mut h, writer, &[(&k, "v")]), SessionEvent::Committed(Some(_))));
    for _ in 0..10 {
        tick(&mut h, &|_| true);
    }
    h.begin(writer).unwrap();
    h.deliver_all();
    h.take_event(writer);
    h.delete(writer, &k).unwrap();
    h.commit(writer).unwrap();
    h.deliver_all();
    assert!(matches!(h.take_event(writer), Some(SessionEvent::Committed(Some(_)))));
    let to_behind = |m: &InFlight<P::Message>| m.from == Addr::Replica(LOST) && m.to == Addr::Replica(BEHIND);
    for _ in 0..30 {
        tick(&mut h, &|m| !to_behind(m));
    }
    let dc1 = ReplicaId::at(DcId(1), PartitionId(0));
    assert_eq!(value_of(&h, dc1, &k), None, "{}: DC 1 has the delete", P::NAME);
    assert_eq!(value_of(&h, BEHIND, &k).as_deref(), Some("v"), "{}: DC 2 not yet", P::NAME);
    let collected = h.replica(dc1).counters().versions_collected;
    assert!(collected >= 2, "{}: DC 1 collected the key ({collected} versions)", P::NAME);
    h.restart_from_checkpoint(dc1);
    for _ in 0..5 {
        tick(&mut h, &|m| !to_behind(m));
    }
    assert!(h.reseed(LOST));
    for _ in 0..60 {
        tick(&mut h, &|_| true);
    }
    assert_eq!(value_of(&h, LOST, &k), None, "{}: the re-seeded replica brought the key back", P::NAME);
    assert_eq!(value_of(&h, BEHIND, &k), None, "{}: DC 2 never got the delete", P::NAME);
}

#[test]
fn a_delete_another_dc_had_collected_still_reaches_the_dc_that_lacked_it_every_protocol() {
    a_delete_another_dc_had_collected_still_reaches_the_dc_that_lacked_it::<Wren>();
    a_delete_another_dc_had_collected_still_reaches_the_dc_that_lacked_it::<Cure>();
    a_delete_another_dc_had_collected_still_reaches_the_dc_that_lacked_it::<HCure>();
}

#[test]
fn a_peer_that_restarted_still_gives_its_writes_every_protocol() {
    a_peer_that_restarted_still_gives_its_writes::<Wren>();
    a_peer_that_restarted_still_gives_its_writes::<Cure>();
    a_peer_that_restarted_still_gives_its_writes::<HCure>();
}

#[test]
fn a_decision_the_lost_coordinator_took_is_not_taken_back_every_protocol() {
    a_decision_the_lost_coordinator_took_is_not_taken_back::<Wren>();
    a_decision_the_lost_coordinator_took_is_not_taken_back::<Cure>();
    a_decision_the_lost_coordinator_took_is_not_taken_back::<HCure>();
}

#[test]
fn two_replicas_of_a_partition_lost_together_both_come_back_every_protocol() {
    two_replicas_of_a_partition_lost_together_both_come_back::<Wren>();
    two_replicas_of_a_partition_lost_together_both_come_back::<Cure>();
    two_replicas_of_a_partition_lost_together_both_come_back::<HCure>();
}

#[test]
fn wren_a_lost_replica_gets_everything_back_and_resends_what_a_peer_lacked() {
    a_lost_replica_gets_everything_back_and_resends_what_a_peer_lacked::<Wren>();
}

#[test]
fn cure_a_lost_replica_gets_everything_back_and_resends_what_a_peer_lacked() {
    a_lost_replica_gets_everything_back_and_resends_what_a_peer_lacked::<Cure>();
}

#[test]
fn h_cure_a_lost_replica_gets_everything_back_and_resends_what_a_peer_lacked() {
    a_lost_replica_gets_everything_back_and_resends_what_a_peer_lacked::<HCure>();
}

/// A re-seed a crash interrupts starts again: the records it begins with
/// say so, a recovery from them (and whatever the re-seed had persisted
/// since, but its reservations) asks every peer and sibling again, and a
/// checkpoint taken meanwhile keeps saying so.
#[test]
fn a_re_seed_interrupted_by_a_crash_asks_again() {
    let topology = Arc::new(Topology::full(3, 2).unwrap());
    let config = Default::default();
    let (_, mut records) = Wren::reseed(LOST, topology.clone(), &config).expect("Wren re-seeds");
    assert_eq!(records, vec![FamilyRecord::Reseeding]);
    // Half of a seed's records made it to disk before the crash.
    records.push(FamilyRecord::Applied { source: DcId(1), ct: Timestamp(99), txs: Vec::new() });
    records.push(FamilyRecord::Kept { ct: Timestamp(40), txs: Vec::new() });
    let mut r = Wren::recover(LOST, topology.clone(), &config, records.clone());
    assert!(r.checkpoint().contains(&FamilyRecord::Reseeding), "still re-seeding");
    let mut out = Default::default();
    r.start(START_US, &mut out);
    let mut asked: Vec<Addr> =
        out.messages.iter().filter(|(_, m)| matches!(m, TxnMsg::Seed(_))).map(|(to, _)| *to).collect();
    asked.sort();
    let expected = [(0, 1), (1, 0), (2, 0)].map(|(dc, p)| Addr::Replica(ReplicaId::at(DcId(dc), PartitionId(p))));
    assert_eq!(asked, expected.to_vec(), "the sibling and both peers, asked again");
    assert!(r.latest_values().is_empty(), "what the interrupted re-seed had taken is dropped");
    assert_eq!(out.records.first(), Some(&FamilyRecord::Reseeding), "the second attempt is marked");

    // The second attempt finishes: only its records count.
    records.push(FamilyRecord::Reseeding);
    records.push(FamilyRecord::Kept { ct: Timestamp(50), txs: Vec::new() });
    records.push(FamilyRecord::Reseeded { horizon: Timestamp::ZERO, holes: Vec::new() });
    let r = Wren::recover(LOST, topology, &config, records);
    assert!(!r.is_reseeding());
    assert_eq!(r.core().replication.streams.unacknowledged(), 1, "the group kept once, by the attempt that finished");
}
