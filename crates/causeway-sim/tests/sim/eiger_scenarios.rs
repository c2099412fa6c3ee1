//! Eiger's read rounds, step by step on the hand-cranked harness: one
//! round when the newest values are of one time; a third when a partition
//! read at the effective time holds a write whose commit has not reached it
//! (the reader asks the coordinator, and sees the write whole); a second
//! without a third when that commit is decided but not yet durable there.

use crate::common;

use causeway_protocol::eiger::{Eiger, EigerConfig, EigerMsg};
use causeway_protocol::{Addr, ClientId, DcId, Message, ReplicaId, SessionEvent, Topology};
use causeway_sim::harness::{Harness, InFlight};
use common::scenario::{key_in, read_values, run_txn, s};
use std::collections::BTreeSet;

const START_US: u64 = 1_000_000;

fn client(index: u32) -> ClientId {
    ClientId { dc: DcId(0), index }
}

/// One DC of two partitions; `x` stored by partition 0, `y` by 1; a writer
/// and a reader.
fn two_partitions() -> (Harness<Eiger>, String, String) {
    let topology = Topology::full(1, 2).unwrap();
    let (x, y) = (key_in(&topology, 0, "x"), key_in(&topology, 1, "y"));
    let mut h = Harness::<Eiger>::new(topology, EigerConfig::default(), START_US);
    h.add_session(client(0), ReplicaId::new(0, 0));
    h.add_session(client(1), ReplicaId::new(0, 1));
    (h, x, y)
}

/// A read-only transaction of `keys` by `c`, delivering only what `pick`
/// lets through; its values, and the rounds it took (the distinct rounds
/// of the read requests it sent).
fn read_only(
    h: &mut Harness<Eiger>,
    c: ClientId,
    keys: &[&str],
    pick: impl Fn(&InFlight<EigerMsg>) -> bool + Copy,
) -> (Vec<Option<String>>, usize) {
    let mut rounds = BTreeSet::new();
    let now = h.read_only(c, keys).unwrap();
    h.deliver_where(|m| {
        if m.from == Addr::Client(c) {
            if let Some(tag) = m.msg.read_request() {
                rounds.insert(tag.round);
            }
        }
        pick(m)
    });
    (read_values(now.or_else(|| h.take_event(c))), rounds.len())
}

fn everything(_: &InFlight<EigerMsg>) -> bool {
    true
}

/// The coordinator's decision on its way to the other participant.
fn is_commit(m: &InFlight<EigerMsg>) -> bool {
    matches!(m.msg, EigerMsg::Commit { .. })
}

/// Commits `x = X2, y = Y2` with every message delivered but the
/// coordinator's decision to the other participant; returns the partition
/// that still holds it open.
fn commit_held_at_one_partition(h: &mut Harness<Eiger>, x: &str, y: &str) -> ReplicaId {
    let writer = client(0);
    h.begin(writer).unwrap();
    h.deliver_all();
    h.take_event(writer);
    h.write(writer, x, "X2").unwrap();
    h.write(writer, y, "Y2").unwrap();
    assert_eq!(h.commit(writer).unwrap(), None);
    h.deliver_where(|m| !is_commit(m));
    let held: Vec<ReplicaId> = h
        .in_flight
        .iter()
        .filter(|m| is_commit(m))
        .map(|m| match m.to {
            Addr::Replica(r) => r,
            other => panic!("a commit to {other:?}"),
        })
        .collect();
    assert_eq!(held.len(), 1, "one participant waits for the decision");
    assert_eq!(h.take_event(writer), None, "the writer waits for every participant");
    held[0]
}

#[test]
fn newest_values_of_one_time_are_read_in_one_round() {
    let (mut h, x, y) = two_partitions();
    assert!(matches!(run_txn(&mut h, client(0), &[(&x, "X1"), (&y, "Y1")]), SessionEvent::Committed(Some(_))));
    let (values, rounds) = read_only(&mut h, client(1), &[&x, &y], everything);
    assert_eq!(values, vec![s("X1"), s("Y1")]);
    assert_eq!(rounds, 1);
}

#[test]
fn a_write_still_open_where_it_is_read_takes_a_third_round_and_is_seen_whole() {
    let (mut h, x, y) = two_partitions();
    run_txn(&mut h, client(0), &[(&x, "X1"), (&y, "Y1")]);
    let open_at = commit_held_at_one_partition(&mut h, &x, &y);
    // The first round finds the new version at the coordinator (installed)
    // and the old one at the other partition, whose validity ends below
    // the open write's number; the second, at the effective time, finds
    // the write open there; the third asks the coordinator, which has
    // committed it at or before that time.
    let (values, rounds) = read_only(&mut h, client(1), &[&x, &y], |m| !is_commit(m));
    assert_eq!(values, vec![s("X2"), s("Y2")], "the write is seen whole, though {open_at:?} has not committed it");
    assert_eq!(rounds, 3);
    // Once the decision arrives the write is installed everywhere, and a
    // read takes one round again.
    h.deliver_all();
    assert!(matches!(h.take_event(client(0)), Some(SessionEvent::Committed(Some(_)))));
    let (values, rounds) = read_only(&mut h, client(1), &[&x, &y], everything);
    assert_eq!((values, rounds), (vec![s("X2"), s("Y2")], 1));
}

#[test]
fn a_write_decided_but_not_yet_durable_where_it_is_read_needs_no_third_round() {
    let (mut h, x, y) = two_partitions();
    run_txn(&mut h, client(0), &[(&x, "X1"), (&y, "Y1")]);
    let open_at = commit_held_at_one_partition(&mut h, &x, &y);
    // The decision reaches the partition, but its record is not yet
    // durable (the partition's note to itself that it is, held back): the
    // write is decided and open there.
    let is_logged = |m: &InFlight<EigerMsg>| matches!(m.msg, EigerMsg::Logged { .. });
    h.deliver_where(|m| is_commit(m) && m.to == Addr::Replica(open_at));
    assert!(h.in_flight.iter().any(is_logged), "the outcome waits to be durable");
    let (values, rounds) = read_only(&mut h, client(1), &[&x, &y], |m| !is_logged(m));
    assert_eq!(values, vec![s("X2"), s("Y2")]);
    assert_eq!(rounds, 2, "the partition read at the effective time knows the outcome: every vote is in");
}
