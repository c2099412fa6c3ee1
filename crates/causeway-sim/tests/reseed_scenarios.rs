//! A replica whose disk is lost, re-seeded from its partition's replicas in
//! the other DCs, on the hand-cranked harness, for every protocol of the
//! family: what it gets back, from whom, and what it gives the peer that
//! had not received all of its writes before the loss.

mod common;

use causeway_protocol::cure::{Cure, HCure};
use causeway_protocol::twopc::{FamilyRecord, FamilyTimer, TxnMsg};
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
/// of the others', and its replacement's does not.
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
    let others = h.replica_clock(BEHIND);
    h.set_clock(LOST, others);
    assert_eq!(value_of(&h, LOST, &x), None, "it starts empty");
    for _ in 0..10 {
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

    // 600 ms: past the lost replica's skewed clock, so that its DC's
    // stable time covers what it wrote then.
    for _ in 0..60 {
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
    let mut r = Wren::recover(LOST, topology, &config, records);
    assert!(r.checkpoint().contains(&FamilyRecord::Reseeding), "still re-seeding");
    let mut out = Default::default();
    r.start(START_US, &mut out);
    let mut asked: Vec<Addr> =
        out.messages.iter().filter(|(_, m)| matches!(m, TxnMsg::Seed(_))).map(|(to, _)| *to).collect();
    asked.sort();
    let expected = [(0, 1), (1, 0), (2, 0)].map(|(dc, p)| Addr::Replica(ReplicaId::at(DcId(dc), PartitionId(p))));
    assert_eq!(asked, expected.to_vec(), "the sibling and both peers, asked again");
    assert!(r.latest_values().is_empty(), "what the interrupted re-seed had taken is dropped");
}
