//! Scenario tests of Geo-SDUR's session: delaying (step 8) — which parts
//! of a global leave late, and when — and a partition that cannot serve
//! (a member without a leader) ending the transaction at once.
//!
//! The cluster is "WAN 1" over three regions: partition 0's group has two
//! members in DC 2 and one in DC 1, partition 1's two in DC 0 and one in
//! DC 1. The session is a client of DC 0, so partition 1 is near (its
//! preferred leader is in DC 0) and partition 0 far.

use super::entry::Snap;
use super::messages::SdurMsg;
use super::session::{SdurClientTimer, SdurSession};
use super::{Delaying, Sdur, SdurConfig};
use crate::contract::session::{AbortReason, Session, SessionEffects, SessionEvent};
use crate::contract::{Key, Limits, Protocol, ReadTag, SessionSetup};
use crate::hlc::Timestamp;
use crate::ids::{Addr, ClientId, DcId, PartitionId, ReplicaId};
use crate::topology::Topology;
use bytes::Bytes;
use std::sync::Arc;

const P0: PartitionId = PartitionId(0);
const P1: PartitionId = PartitionId(1);

type Out = SessionEffects<SdurSession>;

fn topology() -> Arc<Topology> {
    Arc::new(
        Topology::with_groups(3, 2, vec![vec![DcId(2), DcId(2), DcId(1)], vec![DcId(0), DcId(0), DcId(1)]]).unwrap(),
    )
}

/// A key of partition `p`.
fn key_of(t: &Topology, p: PartitionId) -> Key {
    (0..).map(|n| Bytes::from(format!("k{n}"))).find(|k| t.partition_of(k) == p).unwrap()
}

fn session(delaying: Delaying) -> (SdurSession, Arc<Topology>) {
    let topology = topology();
    let setup = SessionSetup {
        id: ClientId { dc: DcId(0), index: 0 },
        coordinator: ReplicaId::at(DcId(0), P1),
        topology: topology.clone(),
        limits: Limits::default(),
    };
    (Sdur::session(setup, &SdurConfig { delaying, ..SdurConfig::default() }), topology)
}

/// The partition a message to a member is for, and whether it is a part.
fn submits(out: &Out) -> Vec<PartitionId> {
    out.messages
        .iter()
        .filter_map(|(to, m)| match (to, m) {
            (Addr::Replica(r), SdurMsg::Submit(_)) => Some(r.partition),
            _ => None,
        })
        .collect()
}

/// The reads the session sent: to whom, their tag, and the partition.
fn reads_asked(out: &Out) -> Vec<(Addr, ReadTag, PartitionId)> {
    out.messages
        .iter()
        .filter_map(|(to, m)| match (to, m) {
            (Addr::Replica(r), SdurMsg::Read { tag, .. }) => Some((*to, *tag, r.partition)),
            _ => None,
        })
        .collect()
}

/// Begins a write-only global (one key of each partition) and commits it:
/// the session asks each partition for a snapshot, which the members give;
/// returns the effects of the last answer (where the parts leave) and the
/// session.
fn commit_a_global(delaying: Delaying) -> (SdurSession, Out) {
    let (mut s, t) = session(delaying);
    let mut out = Out::default();
    let now = 1_000_000;
    let _ = s.begin(now, &mut out);
    s.write(key_of(&t, P0), Some(Bytes::from_static(b"x"))).unwrap();
    s.write(key_of(&t, P1), Some(Bytes::from_static(b"y"))).unwrap();
    let mut out = Out::default();
    let _ = s.commit(now, &mut out);
    let asked = reads_asked(&out);
    assert_eq!(asked.len(), 2, "a snapshot of each partition written: {:?}", out.messages);
    let mut last = Out::default();
    for (member, tag, partition) in asked {
        last = Out::default();
        let snap = Snap { upto: 5, holes: Vec::new(), ts: Timestamp::ZERO };
        let answer = SdurMsg::Values { tag, partition, values: Vec::new(), snap, prefix: 5 };
        assert!(s.on_message(now, member, answer, &mut last).is_none());
    }
    (s, last)
}

fn delayed_timers(out: &Out) -> Vec<(PartitionId, u64)> {
    out.timers
        .iter()
        .filter_map(|(t, after)| match t {
            SdurClientTimer::Delayed(_, p) => Some((*p, *after)),
            _ => None,
        })
        .collect()
}

#[test]
fn without_delaying_every_part_of_a_global_leaves_at_once() {
    let (_, out) = commit_a_global(Delaying::Off);
    assert_eq!(submits(&out), vec![P0, P1]);
    assert!(delayed_timers(&out).is_empty());
}

#[test]
fn a_fixed_delay_holds_the_near_partitions_part_and_sends_it_when_due() {
    let (mut s, out) = commit_a_global(Delaying::Fixed { delay_us: 20_000 });
    // The far partition's part leaves; the near one's waits 20 ms.
    assert_eq!(submits(&out), vec![P0]);
    let timers = delayed_timers(&out);
    assert_eq!(timers, vec![(P1, 20_000)]);
    let Some(&(timer, _)) = out.timers.iter().find(|(t, _)| matches!(t, SdurClientTimer::Delayed(..))) else {
        unreachable!()
    };
    let mut later = Out::default();
    assert!(s.on_timer(1_020_000, timer, &mut later).is_none());
    assert_eq!(submits(&later), vec![P1], "the near part leaves once its delay is over");
}

#[test]
fn a_delay_from_the_round_trips_is_the_difference_between_the_deliveries() {
    // Virginia (DC 0), Oregon (DC 1), Ireland (DC 2), as config/wan.toml
    // has them, in microseconds.
    let rtt_us = vec![vec![0, 70_000, 80_000], vec![70_000, 0, 140_000], vec![80_000, 140_000, 0]];
    let t = topology();
    let far = Sdur::delivery_us(&t, &rtt_us, DcId(0), P0);
    let near = Sdur::delivery_us(&t, &rtt_us, DcId(0), P1);
    // Partition 0: half the round trip to Ireland, then the majority is in
    // Ireland (no round trip); partition 1: local leader, local majority.
    assert_eq!((far, near), (40_000, 0));
    let (_, out) = commit_a_global(Delaying::FromRtt { rtt_us });
    assert_eq!(submits(&out), vec![P0]);
    assert_eq!(delayed_timers(&out), vec![(P1, far - near)]);
}

#[test]
fn a_local_transaction_is_never_delayed() {
    let (mut s, t) = session(Delaying::Fixed { delay_us: 20_000 });
    let mut out = Out::default();
    let _ = s.begin(0, &mut out);
    s.write(key_of(&t, P1), Some(Bytes::from_static(b"y"))).unwrap();
    let mut out = Out::default();
    let _ = s.commit(0, &mut out);
    let (member, tag, _) = reads_asked(&out).into_iter().next().expect("a snapshot asked");
    let mut out = Out::default();
    let snap = Snap { upto: 1, holes: Vec::new(), ts: Timestamp::ZERO };
    let _ =
        s.on_message(0, member, SdurMsg::Values { tag, partition: P1, values: Vec::new(), snap, prefix: 1 }, &mut out);
    assert_eq!(submits(&out), vec![P1]);
    assert!(delayed_timers(&out).is_empty());
}

#[test]
fn a_member_that_cannot_serve_a_read_ends_the_transaction_at_once_as_unavailable() {
    let (mut s, t) = session(Delaying::Off);
    let mut out = Out::default();
    let _ = s.begin(0, &mut out);
    let mut out = Out::default();
    let _ = s.read(0, &[key_of(&t, P0)], &mut out);
    let (member, tag, _) = reads_asked(&out).into_iter().next().expect("a read sent");
    let why = "p0 has no leader".to_string();
    // Another transaction's answer, or another partition's, is ignored.
    let stale = ReadTag { tx: tag.tx + 1, ..tag };
    let mut ignored = Out::default();
    let wrong = SdurMsg::Unreadable { tag: stale, partition: P0, why: why.clone() };
    assert!(s.on_message(0, member, wrong, &mut ignored).is_none());
    let mut out = Out::default();
    let event = s.on_message(0, member, SdurMsg::Unreadable { tag, partition: P0, why: why.clone() }, &mut out);
    assert_eq!(event, Some(SessionEvent::Aborted(AbortReason::Unavailable(why))));
}
