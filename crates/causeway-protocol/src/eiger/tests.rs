//! What an Eiger partition refuses from the network: a timestamp that would
//! move its clock arbitrarily far, more dependencies than a client sends,
//! keys of another partition — counted, never a panic, the clock unmoved.
//! And what its write-only transactions must never do across crashes: show
//! a commit a crash could take back, forget a commit a participant still
//! holds prepared, commit parts that disagree on who the participants are.

use super::messages::{EigerDeps, EigerMsg};
use super::replica::{EigerReplica, EigerTimer};
use super::{Eiger, EigerConfig, EigerRecord, MAX_DEPS};
use crate::contract::replica::ReplicaEffects;
use crate::contract::Protocol;
use crate::contract::{Key, ReadTag, Replica, Value};
use crate::hlc::Timestamp;
use crate::ids::{Addr, ClientId, DcId, PartitionId, ReplicaId};
use crate::topology::Topology;
use crate::write_only::WtxId;
use std::sync::Arc;

type Out = ReplicaEffects<EigerReplica>;

const NOW: u64 = 10_000_000;

fn partition() -> (EigerReplica, Arc<Topology>) {
    let topology = Arc::new(Topology::full(1, 2).unwrap());
    let mut r = EigerReplica::new(ReplicaId::new(0, 0), topology.clone(), EigerConfig::default());
    r.start(NOW, &mut Out::default());
    (r, topology)
}

fn key_of(topology: &Topology, p: u32) -> Key {
    (0..).map(|i| Key::from(format!("k{i}"))).find(|k| topology.partition_of(k) == PartitionId(p)).unwrap()
}

fn client() -> Addr {
    Addr::Client(ClientId { dc: DcId(0), index: 7 })
}

#[test]
fn a_read_with_a_clock_far_ahead_is_refused_and_moves_nothing() {
    let (mut r, topology) = partition();
    let tag = ReadTag { tx: 1, round: 0 };
    let far = Timestamp::from_physical(NOW + 3_600_000_000);
    for (clock, at) in [(far, None), (Timestamp::ZERO, Some(far))] {
        let mut out = Out::default();
        r.on_message(NOW, client(), EigerMsg::Read { tag, keys: vec![key_of(&topology, 0)], clock, at }, &mut out);
        assert!(out.messages.is_empty(), "no answer: {:?}", out.messages);
    }
    assert_eq!(r.counters().inputs_refused, 2);
    // The next first round vouches for nothing beyond the clock.
    let mut out = Out::default();
    r.on_message(
        NOW,
        client(),
        EigerMsg::Read { tag, keys: vec![key_of(&topology, 0)], clock: Timestamp::ZERO, at: None },
        &mut out,
    );
    match &out.messages[..] {
        [(_, EigerMsg::Valid { values, .. })] => assert!(values[0].lvt < far, "{:?}", values[0]),
        other => panic!("a first round's answer, got {other:?}"),
    }
}

#[test]
fn a_write_with_too_many_dependencies_or_another_partitions_key_is_refused() {
    let (mut r, topology) = partition();
    let c = ClientId { dc: DcId(0), index: 7 };
    let write = |n: u64, key: Key, deps: usize| EigerMsg::Write {
        tx: WtxId { client: c, epoch: 1, n },
        writes: vec![(key.clone(), Some(Value::from("v")))],
        participants: vec![PartitionId(0)],
        coordinator: PartitionId(0),
        deps: EigerDeps { clock: Timestamp::ZERO, deps: vec![(key, Timestamp::ZERO); deps] },
    };
    for msg in [write(1, key_of(&topology, 0), MAX_DEPS + 1), write(2, key_of(&topology, 1), 0)] {
        let mut out = Out::default();
        r.on_message(NOW, Addr::Client(c), msg, &mut out);
        assert!(out.records.iter().all(|rec| !matches!(rec, super::EigerRecord::Prepared(_))), "nothing prepared");
    }
    assert_eq!(r.counters().inputs_refused, 2);
    let mut out = Out::default();
    r.on_message(NOW, Addr::Client(c), write(3, key_of(&topology, 0), MAX_DEPS), &mut out);
    assert!(
        out.records.iter().any(|rec| matches!(rec, super::EigerRecord::Prepared(_))),
        "a write within bounds is prepared"
    );
    assert_eq!(r.counters().inputs_refused, 2);
}

/// Two partitions of one DC, started, with what each wrote to its disk.
fn pair() -> (EigerReplica, EigerReplica, Arc<Topology>, Vec<EigerRecord>, Vec<EigerRecord>) {
    let topology = Arc::new(Topology::full(1, 2).unwrap());
    let mut r0 = EigerReplica::new(ReplicaId::new(0, 0), topology.clone(), EigerConfig::default());
    let mut r1 = EigerReplica::new(ReplicaId::new(0, 1), topology.clone(), EigerConfig::default());
    let (mut o0, mut o1) = (Out::default(), Out::default());
    r0.start(NOW, &mut o0);
    r1.start(NOW, &mut o1);
    (r0, r1, topology, o0.records, o1.records)
}

fn p(i: u32) -> Addr {
    Addr::Replica(ReplicaId::new(0, i))
}

/// The first message of a kind among what leaves (at once or after the
/// records are durable).
fn take(out: Out, pick: impl Fn(&EigerMsg) -> bool) -> EigerMsg {
    out.messages.into_iter().chain(out.after_durable).map(|(_, m)| m).find(|m| pick(m)).expect("sent")
}

/// A write of `k` by transaction `tx`, coordinated by partition 0.
fn write(tx: WtxId, k: &Key, participants: &[u32]) -> EigerMsg {
    EigerMsg::Write {
        tx,
        writes: vec![(k.clone(), Some(Value::from("NEW")))],
        participants: participants.iter().map(|&i| PartitionId(i)).collect(),
        coordinator: PartitionId(0),
        deps: EigerDeps::default(),
    }
}

fn tx1() -> WtxId {
    WtxId { client: ClientId { dc: DcId(0), index: 7 }, epoch: 1, n: 1 }
}

#[test]
fn a_coordinator_shows_a_commit_only_once_its_own_prepare_is_durable() {
    let (mut r0, mut r1, topology, _, _) = pair();
    let (tx, c) = (tx1(), Addr::Client(tx1().client));
    let (x, y) = (key_of(&topology, 0), key_of(&topology, 1));
    // The coordinator prepares (its record not yet durable); the other
    // participant's vote reaches it: every vote is in.
    r0.on_message(NOW, c, write(tx, &x, &[0, 1]), &mut Out::default());
    let mut o1 = Out::default();
    r1.on_message(NOW, c, write(tx, &y, &[0, 1]), &mut o1);
    let vote = take(o1, |m| matches!(m, EigerMsg::Prepared { .. }));
    r0.on_message(NOW + 10, p(1), vote, &mut Out::default());
    // A read at a later time and a third-round question: the decided
    // version, and the outcome, wait for the disk.
    let at = Timestamp::from_physical(NOW + 1_000);
    let read = EigerMsg::Read { tag: ReadTag { tx: 1, round: 1 }, keys: vec![x], clock: Timestamp::ZERO, at: Some(at) };
    let status = EigerMsg::Status { tag: ReadTag { tx: 1, round: 2 }, txs: vec![tx] };
    for msg in [read, status] {
        let mut o = Out::default();
        r0.on_message(NOW + 20, client(), msg, &mut o);
        assert!(o.messages.is_empty(), "nothing leaves before the disk: {:?}", o.messages);
        let answered = o.after_durable.iter().any(|(_, m)| match m {
            EigerMsg::AtTime { values, .. } => values[0].value == Some(Value::from("NEW")),
            EigerMsg::Outcome { decided, .. } => decided.is_some(),
            _ => false,
        });
        assert!(answered, "{:?}", o.after_durable);
    }
}

#[test]
fn a_commit_is_remembered_until_every_participant_has_it_and_then_forgotten() {
    let (mut r0, mut r1, topology, _, mut disk1) = pair();
    let (tx, c) = (tx1(), Addr::Client(tx1().client));
    let (x, y) = (key_of(&topology, 0), key_of(&topology, 1));
    r0.on_message(NOW, c, write(tx, &x, &[0, 1]), &mut Out::default());
    let mut o1 = Out::default();
    r1.on_message(NOW, c, write(tx, &y, &[0, 1]), &mut o1);
    disk1.append(&mut o1.records);
    let vote = take(o1, |m| matches!(m, EigerMsg::Prepared { .. }));
    let mut o = Out::default();
    r0.on_message(NOW + 10, p(1), vote, &mut o);
    // The coordinator commits and installs x; its Commit to P1 is lost, and
    // P1 crashes with its prepare on disk, down for 11 s.
    let logged = take(o, |m| matches!(m, EigerMsg::Logged { .. }));
    r0.on_message(NOW + 20, p(0), logged, &mut Out::default());
    assert_eq!(r0.latest_values().len(), 1, "x installed");
    for i in 1..=23u64 {
        r0.on_timer(NOW + i * 500_000, EigerTimer::Resolve, &mut Out::default());
    }
    let back = NOW + 11_500_000;
    let mut r1 = Eiger::recover(ReplicaId::new(0, 1), topology.clone(), &EigerConfig::default(), disk1);
    r1.start(back, &mut Out::default());
    let mut o1 = Out::default();
    r1.on_timer(back + 500_000, EigerTimer::Resolve, &mut o1);
    let resolve = take(o1, |m| matches!(m, EigerMsg::Resolve { .. }));
    // The coordinator still knows the commit (P1 never said it has it):
    // it sends the decision again, and P1 commits y.
    let mut o = Out::default();
    r0.on_message(back + 500_000, p(1), resolve, &mut o);
    let commit = take(o, |m| matches!(m, EigerMsg::Commit { .. }));
    let mut o1 = Out::default();
    r1.on_message(back + 500_010, p(0), commit, &mut o1);
    let logged = take(o1, |m| matches!(m, EigerMsg::Logged { .. }));
    r1.on_message(back + 500_020, p(1), logged, &mut Out::default());
    assert_eq!(r1.latest_values().len(), 1, "y installed: the write is whole");
    // P1 says it has it; the coordinator forgets it and tells P1 to.
    let mut o1 = Out::default();
    r1.on_timer(back + 1_000_000, EigerTimer::Resolve, &mut o1);
    let done = take(o1, |m| matches!(m, EigerMsg::Done { .. }));
    let mut o = Out::default();
    r0.on_message(back + 1_000_010, p(1), done, &mut o);
    assert!(matches!(take(o, |m| matches!(m, EigerMsg::Forget { .. })), EigerMsg::Forget { txs } if txs == vec![tx]));
    assert_eq!(r0.checkpoint().iter().filter(|r| matches!(r, EigerRecord::Recent { .. })).count(), 0, "forgotten");
}

#[test]
fn parts_that_disagree_on_the_participants_are_aborted_everywhere() {
    let topology = Arc::new(Topology::full(1, 3).unwrap());
    let start = |i| {
        let mut r = EigerReplica::new(ReplicaId::new(0, i), topology.clone(), EigerConfig::default());
        r.start(NOW, &mut Out::default());
        r
    };
    let (mut r0, mut r1) = (start(0), start(1));
    let (tx, c) = (tx1(), Addr::Client(tx1().client));
    let (x, y) = (key_of(&topology, 0), key_of(&topology, 1));
    // P1 is told the participants are [0, 1]; the coordinator, [0, 1, 2].
    let mut o1 = Out::default();
    r1.on_message(NOW, c, write(tx, &y, &[0, 1]), &mut o1);
    let vote = take(o1, |m| matches!(m, EigerMsg::Prepared { .. }));
    r0.on_message(NOW, p(1), vote, &mut Out::default());
    let mut o = Out::default();
    r0.on_message(NOW, c, write(tx, &x, &[0, 1, 2]), &mut o);
    let sent: Vec<EigerMsg> = o.messages.into_iter().chain(o.after_durable).map(|(_, m)| m).collect();
    assert!(!sent.iter().any(|m| matches!(m, EigerMsg::Commit { .. })), "nothing commits: {sent:?}");
    let abort = sent.into_iter().find(|m| matches!(m, EigerMsg::Abort { .. })).expect("aborted everywhere");
    let mut o1 = Out::default();
    r1.on_message(NOW + 10, p(0), abort, &mut o1);
    let logged = take(o1, |m| matches!(m, EigerMsg::Logged { .. }));
    r1.on_message(NOW + 20, p(1), logged, &mut Out::default());
    assert!(r1.is_quiescent() && r1.latest_values().is_empty(), "P1 dropped its part");
}
