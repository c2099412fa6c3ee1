//! Unit tests of single EC steps: when a commit is acknowledged, what a
//! coordinator does about a partition that does not answer, and what a
//! replica rebuilt from its records holds.

use super::messages::{EcMsg, EcWrites};
use super::replica::{recover, EcReplica, EcTimer};
use super::{Ec, EcConfig, EcRecord};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{Key, Limits, Protocol, Replica, Session, SessionError, SessionEvent, SessionSetup, Value};
use crate::hlc::Timestamp;
use crate::ids::{Addr, ClientId, DcId, PartitionId, ReplicaId, TxId};
use crate::recovery::Control;
use crate::topology::Topology;
use std::sync::Arc;

type Out = ReplicaEffects<EcReplica>;

fn client() -> Addr {
    Addr::Client(ClientId { dc: DcId(0), index: 0 })
}

/// A started replica whose peers' streams have resumed.
fn replica(topology: &Arc<Topology>, id: ReplicaId) -> EcReplica {
    let mut r = EcReplica::new(id, topology.clone(), EcConfig::default());
    r.start(1_000, &mut Out::default());
    for peer in topology.peers_of(id) {
        r.on_message(1_000, Addr::Replica(peer), EcMsg::Stream(Control::ResumeFrom { from: 0 }), &mut Out::default());
    }
    r
}

/// A key stored by `partition`.
fn key_of(topology: &Topology, partition: u32) -> Key {
    (0..).map(|i| Key::from(format!("k{i}"))).find(|k| topology.partition_of(k) == PartitionId(partition)).unwrap()
}

fn write(k: &Key, v: &str) -> (Key, Option<Value>) {
    (k.clone(), Some(Value::from(v.to_string())))
}

/// A session of a one-partition cluster, and its coordinator.
fn session() -> (<Ec as Protocol>::Session, ReplicaId) {
    let topology = Arc::new(Topology::full(1, 1).unwrap());
    let coordinator = ReplicaId::new(0, 0);
    let setup =
        SessionSetup { id: ClientId { dc: DcId(0), index: 0 }, coordinator, topology, limits: Limits::default() };
    (Ec::session(setup, &EcConfig::default()), coordinator)
}

fn commit_req(writes: Vec<(Key, Option<Value>)>) -> EcMsg {
    EcMsg::CommitReq { hwt: Timestamp::ZERO, writes }
}

#[test]
fn a_commit_is_acknowledged_once_every_partition_written_holds_it_durably() {
    let topology = Arc::new(Topology::full(1, 2).unwrap());
    let (p0, p1) = (ReplicaId::new(0, 0), ReplicaId::new(0, 1));
    let (mut coordinator, mut other) = (replica(&topology, p0), replica(&topology, p1));
    let (a, b) = (key_of(&topology, 0), key_of(&topology, 1));

    let mut out = Out::default();
    coordinator.on_message(2_000, client(), commit_req(vec![write(&a, "x"), write(&b, "y")]), &mut out);
    assert!(out.records.iter().any(|r| matches!(r, EcRecord::Local { seq: 1, .. })), "its own writes, durable");
    let apply = match &out.messages[..] {
        [(to, EcMsg::Apply(w))] if *to == Addr::Replica(p1) => w.clone(),
        other => panic!("expected one Apply to the other partition, got {other:?}"),
    };
    assert!(out.after_durable.is_empty(), "no answer before the other partition holds its writes");
    assert!(!coordinator.is_quiescent());

    let mut out = Out::default();
    other.on_message(2_100, Addr::Replica(p0), EcMsg::Apply(apply.clone()), &mut out);
    assert!(matches!(&out.records[..], [EcRecord::Local { seq: 1, .. }, ..]));
    assert!(out.messages.is_empty(), "the answer waits for the record");
    assert_eq!(out.after_durable, vec![(Addr::Replica(p0), EcMsg::Applied { tx: apply.txid })]);

    // The same writes again (the coordinator heard nothing in time): the
    // answer again, not a second record nor a second place in the stream.
    let mut out = Out::default();
    other.on_message(2_150, Addr::Replica(p0), EcMsg::Apply(apply.clone()), &mut out);
    assert!(out.records.iter().all(|r| !matches!(r, EcRecord::Local { .. })), "{:?}", out.records);
    assert_eq!(out.after_durable, vec![(Addr::Replica(p0), EcMsg::Applied { tx: apply.txid })]);

    let mut out = Out::default();
    coordinator.on_message(2_200, Addr::Replica(p1), EcMsg::Applied { tx: apply.txid }, &mut out);
    assert_eq!(out.after_durable, vec![(client(), EcMsg::CommitResp { tx: apply.txid, ct: apply.ct })]);
    assert!(coordinator.is_quiescent(), "one DC: nothing to replicate");

    // Only its own partition written: answered once its record is durable.
    let mut out = Out::default();
    coordinator.on_message(3_000, client(), commit_req(vec![write(&a, "z")]), &mut out);
    assert!(out.messages.is_empty());
    assert!(matches!(&out.after_durable[..], [(_, EcMsg::CommitResp { .. })]));
}

#[test]
fn a_partition_that_does_not_answer_gets_the_writes_again_then_the_outcome_is_unknown() {
    let topology = Arc::new(Topology::full(1, 2).unwrap());
    let mut coordinator = replica(&topology, ReplicaId::new(0, 0));
    let b = key_of(&topology, 1);
    let mut out = Out::default();
    coordinator.on_message(2_000, client(), commit_req(vec![write(&b, "y")]), &mut out);
    let [(_, EcMsg::Apply(sent))] = &out.messages[..] else { panic!("one Apply: {:?}", out.messages) };
    let sent = sent.clone();

    let config = EcConfig::default();
    let mut out = Out::default();
    coordinator.on_timer(2_000 + config.heal_interval_us, EcTimer::Heal, &mut out);
    assert_eq!(out.messages, vec![(Addr::Replica(ReplicaId::new(0, 1)), EcMsg::Apply(sent.clone()))], "again");

    let mut out = Out::default();
    coordinator.on_timer(2_000 + config.commit_timeout_us, EcTimer::Heal, &mut out);
    assert_eq!(out.messages, vec![(client(), EcMsg::CommitUnknown { tx: sent.txid, ct: sent.ct })]);
    assert!(coordinator.is_quiescent(), "given up");

    // A late answer is nothing.
    let mut out = Out::default();
    coordinator.on_message(5_000_000, Addr::Replica(ReplicaId::new(0, 1)), EcMsg::Applied { tx: sent.txid }, &mut out);
    assert!(out.messages.is_empty() && out.after_durable.is_empty());
    assert_eq!(coordinator.counters().inputs_refused, 0);
}

#[test]
fn a_session_told_the_outcome_is_unknown_fails_and_commits_later_next_time() {
    let (mut s, coordinator) = session();
    let mut out = Default::default();
    s.begin(1_000, &mut out).unwrap();
    s.write(Key::from("k"), Some(Value::from("v"))).unwrap();
    assert_eq!(s.commit(1_000, &mut out).unwrap(), None);
    let ct = Timestamp::from_physical(9_000_000);
    let event = s.on_message(2_000, Addr::Replica(coordinator), EcMsg::CommitUnknown { tx: TxId(1), ct }, &mut out);
    assert_eq!(event, Some(SessionEvent::Failed(SessionError::OutcomeUnknown)));
    assert_eq!(s.export_state().unwrap().hwt, ct, "if it took effect, the next commit is later");
}

#[test]
fn a_restarted_replica_comes_back_from_its_records_and_resends_what_its_peer_lacks() {
    let topology = Arc::new(Topology::full(2, 1).unwrap());
    let (me, peer) = (ReplicaId::new(0, 0), ReplicaId::new(1, 0));
    let mut r = EcReplica::new(me, topology.clone(), EcConfig::default());
    let k = key_of(&topology, 0);
    let mut records = Vec::new();
    let mut step = |r: &mut EcReplica, f: &mut dyn FnMut(&mut EcReplica, &mut Out)| {
        let mut out = Out::default();
        f(r, &mut out);
        records.append(&mut out.records);
        out
    };
    step(&mut r, &mut |r, out| r.start(1_000, out));
    step(&mut r, &mut |r, out| {
        r.on_message(1_000, Addr::Replica(peer), EcMsg::Stream(Control::ResumeFrom { from: 0 }), out)
    });
    step(&mut r, &mut |r, out| r.on_message(2_000, client(), commit_req(vec![write(&k, "mine")]), out));
    let remote = EcWrites { txid: TxId(77), ct: Timestamp::from_physical(1_500), writes: vec![write(&k, "old")] };
    step(&mut r, &mut |r, out| {
        r.on_message(2_100, Addr::Replica(peer), EcMsg::Replicate { upto: 4, txs: vec![remote.clone()] }, out)
    });
    let before = (r.latest_values(), r.visible_upto(DcId(0)), r.visible_upto(DcId(1)));
    assert!(records.iter().any(|r| matches!(r, EcRecord::Reserved(crate::recovery::Reserved::Clock(_)))));

    let mut back = recover(EcReplica::new(me, topology.clone(), EcConfig::default()), records);
    assert_eq!((back.latest_values(), back.visible_upto(DcId(0)), back.visible_upto(DcId(1))), before);
    let mut out = Out::default();
    back.start(1_000, &mut out);
    out.sync_at_once();
    assert_eq!(out.messages, vec![(Addr::Replica(peer), EcMsg::Stream(Control::Resume { have: 4, restarted: true }))]);
    assert!(!back.is_quiescent(), "its own write is not known to be at the peer");

    // The peer holds nothing of ours: the write goes again, at its place.
    let mut out = Out::default();
    back.on_message(3_000, Addr::Replica(peer), EcMsg::Stream(Control::Resume { have: 0, restarted: false }), &mut out);
    let resent: Vec<_> = out.after_durable.iter().map(|(_, m)| m).collect();
    assert!(
        matches!(resent[..], [EcMsg::Stream(Control::ResumeFrom { from: 0 }), EcMsg::Replicate { upto: 1, .. }]),
        "{resent:?}"
    );

    // A commit after the restart: a later time, a new id.
    let mut out = Out::default();
    back.on_message(1_000, client(), commit_req(vec![write(&k, "after")]), &mut out);
    out.sync_at_once();
    let Some((_, EcMsg::CommitResp { tx, ct })) = out.messages.last() else { panic!("{:?}", out.messages) };
    assert!(*ct > before.1 && tx.0 >= crate::recovery::reservations::TXID_BLOCK, "{ct} {tx:?}");
    back.on_message(3_000, Addr::Replica(peer), EcMsg::Stream(Control::Ack { upto: 1 }), &mut Out::default());
    back.on_message(3_000, Addr::Replica(peer), EcMsg::Stream(Control::ResumeFrom { from: 4 }), &mut Out::default());
    back.on_timer(10_000, EcTimer::Replicate, &mut Out::default());
    back.on_message(3_000, Addr::Replica(peer), EcMsg::Stream(Control::Ack { upto: 2 }), &mut Out::default());
    assert!(back.is_quiescent(), "everything held by the peer");
}

#[test]
fn a_session_abandons_a_read_in_flight_but_never_a_commit() {
    let (mut s, _) = session();
    let mut out = Default::default();
    s.begin(1_000, &mut out).unwrap();
    assert_eq!(s.read(1_000, &[Key::from("k")], &mut out).unwrap(), None, "the read waits for the partition");
    s.abandon(2_000, &mut out).unwrap();
    // The transaction is over: the session is free for the next one.
    assert_eq!(s.read(2_000, &[Key::from("k")], &mut out), Err(SessionError::NoActiveTransaction));
    s.begin(3_000, &mut out).unwrap();
    s.write(Key::from("k"), Some(Value::from("v"))).unwrap();
    assert_eq!(s.commit(3_000, &mut out).unwrap(), None);
    assert_eq!(s.abandon(4_000, &mut out), Err(SessionError::OperationInProgress), "a commit may be decided");
}
