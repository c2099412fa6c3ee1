//! Unit tests of single replica steps: the edges of the listings.

use super::messages::{BistMsg, StartFrom, WrenMsg};
use super::replica::{WrenReplica, WrenTimer};
use crate::recovery::Control;

use super::snapshot::Snapshot;
use super::WrenConfig;
use crate::contract::{Key, Replica, Value};
use crate::hlc::Timestamp;
use crate::ids::{Addr, ClientId, DcId, ReplicaId, TxId};
use crate::topology::Topology;
use crate::twopc::{FamilyRecord, FamilyReplica};
use std::sync::Arc;

type Out = crate::twopc::FamilyEffects<WrenReplica>;

fn replica(dcs: u16, partitions: u32) -> WrenReplica {
    let topology = Arc::new(Topology::full(dcs, partitions).unwrap());
    let mut r = WrenReplica::new(ReplicaId::new(0, 0), topology, WrenConfig::default());
    r.start(1_000, &mut Out::default());
    let me = r.id();
    for dc in (0..dcs).filter(|&dc| dc != me.dc.0) {
        let from = Addr::Replica(ReplicaId { dc: DcId(dc), ..me });
        r.on_message(1_000, from, WrenMsg::Stream(Control::ResumeFrom { from: Timestamp::ZERO }), &mut Out::default());
    }
    r
}

fn coordinator_addr() -> Addr {
    Addr::Replica(ReplicaId::new(0, 0))
}

/// A prepare of transaction `tx` writing `k = v{tx}`, above `ht`; `alone`:
/// its deadline, if it writes this partition only.
fn prepare_req(tx: u64, ht: Timestamp, alone: Option<u64>) -> WrenMsg {
    WrenMsg::PrepareReq {
        tx: TxId(tx),
        snapshot: Snapshot::default(),
        ht,
        writes: vec![(Key::from("k"), Some(Value::from(format!("v{tx}"))))],
        alone,
    }
}

fn prepare(r: &mut WrenReplica, now: u64, tx: u64, ht: Timestamp) -> Timestamp {
    let mut out = Out::default();
    r.on_message(now, coordinator_addr(), prepare_req(tx, ht, None), &mut out);
    out.sync_at_once();
    match out.messages.as_slice() {
        [(_, WrenMsg::PrepareResp { pt, .. })] => *pt,
        other => panic!("expected one PrepareResp, got {other:?}"),
    }
}

/// The apply loop publishes `VV[m] = ub` taken from the clock; a prepare in
/// the very same microsecond must still propose above it, or a commit could
/// land inside a snapshot already declared installed.
#[test]
fn a_proposal_in_the_same_microsecond_exceeds_the_published_version_clock() {
    let mut r = replica(1, 1);
    r.on_timer(5_000, WrenTimer::Apply, &mut Out::default());
    let published = r.version_vector()[0];
    assert_eq!(published, Timestamp::from_physical(5_000));
    let pt = prepare(&mut r, 5_000, 1, Timestamp::ZERO);
    assert!(pt > published, "{pt} must exceed {published}");
}

#[test]
fn proposals_exceed_the_highest_time_the_client_has_seen_and_each_other() {
    let mut r = replica(1, 1);
    let ht = Timestamp::from_physical(9_000_000);
    let a = prepare(&mut r, 2_000, 1, ht);
    let b = prepare(&mut r, 2_000, 2, Timestamp::ZERO);
    assert!(a > ht && b > a);
}

#[test]
fn a_prepare_delivered_twice_gets_the_same_proposal_and_one_entry() {
    let mut r = replica(1, 1);
    let first = prepare(&mut r, 2_000, 7, Timestamp::ZERO);
    let again = prepare(&mut r, 3_000, 7, Timestamp::ZERO);
    assert_eq!(first, again);
    assert_eq!(r.core().prepared.len(), 1);
}

/// Committed transactions wait for the smallest pending proposal.
#[test]
fn apply_waits_below_the_smallest_pending_proposal_then_goes_in_commit_order() {
    let mut r = replica(1, 1);
    let p1 = prepare(&mut r, 2_000, 1, Timestamp::ZERO);
    let p2 = prepare(&mut r, 2_000, 2, Timestamp::ZERO);
    // Transaction 2 commits first; 1 is still pending at a smaller proposal.
    r.on_message(2_100, coordinator_addr(), WrenMsg::Commit { tx: TxId(2), ct: p2 }, &mut Out::default());
    r.on_timer(2_200, WrenTimer::Apply, &mut Out::default());
    assert_eq!(r.core().chain_len(b"k"), 0, "2 may not apply while 1 could still commit below it");
    assert_eq!(r.version_vector()[0], p1.prev());
    r.on_message(2_300, coordinator_addr(), WrenMsg::Commit { tx: TxId(1), ct: p2.next() }, &mut Out::default());
    r.on_timer(2_400, WrenTimer::Apply, &mut Out::default());
    assert_eq!(r.core().chain_len(b"k"), 2);
    assert_eq!(r.latest_values(), vec![(Key::from("k"), Value::from("v1"))], "1 committed last, at the larger time");
    assert!(r.is_quiescent());
}

#[test]
fn apply_groups_equal_commit_times_into_one_replication_message_and_heartbeats_when_idle() {
    let mut r = replica(3, 1);
    let p1 = prepare(&mut r, 2_000, 1, Timestamp::ZERO);
    let p2 = prepare(&mut r, 2_000, 2, Timestamp::ZERO);
    let ct = p1.max(p2);
    for tx in [1, 2] {
        r.on_message(2_100, coordinator_addr(), WrenMsg::Commit { tx: TxId(tx), ct }, &mut Out::default());
    }
    let mut out = Out::default();
    r.on_timer(3_000, WrenTimer::Apply, &mut out);
    out.sync_at_once();
    let replicates: Vec<_> = out
        .messages
        .iter()
        .filter_map(|(to, m)| match m {
            WrenMsg::Replicate { ct: c, txs } => Some((*to, *c, txs.len())),
            _ => None,
        })
        .collect();
    assert_eq!(replicates.len(), 2, "one message to each other DC");
    assert!(replicates.iter().all(|&(_, c, n)| c == ct && n == 2));
    assert!(!out.messages.iter().any(|(_, m)| matches!(m, WrenMsg::Heartbeat { .. })));

    let mut idle = Out::default();
    r.on_timer(4_000, WrenTimer::Apply, &mut idle);
    idle.sync_at_once();
    let beats = idle.messages.iter().filter(|(_, m)| matches!(m, WrenMsg::Heartbeat { .. })).count();
    assert_eq!(beats, 2, "idle replicas heartbeat every other DC");
}

#[test]
fn replicate_and_heartbeat_advance_the_senders_entry_only_from_a_true_peer() {
    let mut r = replica(3, 2);
    let peer = Addr::Replica(ReplicaId::new(2, 0));
    let wrong_partition = Addr::Replica(ReplicaId::new(1, 1));
    let t = Timestamp::from_physical(50_000);
    r.on_message(1_000, peer, WrenMsg::Heartbeat { t }, &mut Out::default());
    r.on_message(1_000, wrong_partition, WrenMsg::Heartbeat { t }, &mut Out::default());
    let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
    r.on_message(1_000, client, WrenMsg::Heartbeat { t }, &mut Out::default());
    assert_eq!(r.version_vector(), &[Timestamp::ZERO, Timestamp::ZERO, t]);
}

/// A client's start of a transaction, having seen nothing.
fn start_fresh(r: &mut WrenReplica, now: u64, client: Addr) -> Out {
    let mut out = Out::default();
    let seen = StartFrom { lst: Timestamp::ZERO, rst: Timestamp::ZERO };
    r.on_message(now, client, WrenMsg::StartTxReq(seen), &mut out);
    out
}

#[test]
fn a_commit_request_writing_a_key_twice_prepares_its_last_value_once() {
    let mut r = replica(1, 1);
    let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
    let mut out = start_fresh(&mut r, 1_000, client);
    let tx = match out.messages.pop() {
        Some((_, WrenMsg::StartTxResp { tx, .. })) => tx,
        other => panic!("{other:?}"),
    };
    let writes = vec![(Key::from("k"), Some(Value::from("first"))), (Key::from("k"), Some(Value::from("last")))];
    r.on_message(1_100, client, WrenMsg::CommitReq { tx, hwt: Timestamp::ZERO, writes }, &mut out);
    out.sync_at_once();
    match out.messages.as_slice() {
        [(_, WrenMsg::PrepareReq { writes, .. })] => {
            assert_eq!(writes, &vec![(Key::from("k"), Some(Value::from("last")))]);
        }
        other => panic!("expected one prepare, got {other:?}"),
    }
}

/// A client's transaction on `r` (a fresh start), committing `writes`: the
/// prepares its coordinator sends.
fn commit(r: &mut WrenReplica, client: Addr, writes: Vec<(Key, Option<Value>)>) -> (TxId, Out) {
    let mut out = start_fresh(r, 1_000, client);
    let tx = match out.messages.pop() {
        Some((_, WrenMsg::StartTxResp { tx, .. })) => tx,
        other => panic!("{other:?}"),
    };
    let mut out = Out::default();
    r.on_message(1_100, client, WrenMsg::CommitReq { tx, hwt: Timestamp::ZERO, writes }, &mut out);
    (tx, out)
}

/// A transaction that writes one partition commits in one phase: the
/// cohort prepares it, marks it as committing alone, and — once both
/// records are durable — answers and commits it by telling itself; the
/// coordinator answers the client at once: no decision to record, no
/// commit to send.
#[test]
fn a_commit_writing_one_partition_takes_one_phase_and_no_decision_record() {
    let mut r = replica(1, 1);
    let me = Addr::Replica(r.id());
    let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
    let (tx, mut out) = commit(&mut r, client, vec![(Key::from("k"), Some(Value::from("v")))]);
    let prepare = match out.messages.pop() {
        Some((to, msg @ WrenMsg::PrepareReq { alone: Some(deadline), .. })) if to == me => {
            assert_eq!(deadline, 1_100 + 500_000, "half the commit timeout after the request");
            msg
        }
        other => panic!("expected a prepare alone, got {other:?}"),
    };
    let mut out = Out::default();
    r.on_message(1_200, me, prepare.clone(), &mut out);
    let pt = match out.records.as_slice() {
        [FamilyRecord::Prepared { tx: p, pt, .. }, FamilyRecord::Alone { tx: a }] if *p == tx && *a == tx => *pt,
        other => panic!("expected a prepare and its mark, got {other:?}"),
    };
    assert!(out.messages.is_empty(), "{:?}", out.messages);
    assert_eq!(
        out.after_durable,
        vec![(me, WrenMsg::PrepareResp { tx, pt }), (me, WrenMsg::Commit { tx, ct: pt })],
        "the answer and the commit wait for both records"
    );
    let mut again = Out::default();
    r.on_message(1_250, me, prepare, &mut again);
    assert!(again.records.is_empty(), "delivered twice, marked once: {:?}", again.records);
    assert_eq!(again.after_durable, vec![(me, WrenMsg::PrepareResp { tx, pt })], "answered again, committed once");
    let mut out = Out::default();
    r.on_message(1_300, me, WrenMsg::PrepareResp { tx, pt }, &mut out);
    assert!(out.records.is_empty(), "no decision record: {:?}", out.records);
    assert!(out.after_durable.is_empty());
    assert_eq!(out.messages, vec![(client, WrenMsg::CommitResp { tx, ct: pt })]);
    let mut out = Out::default();
    r.on_message(1_300, me, WrenMsg::Commit { tx, ct: pt }, &mut out);
    assert_eq!(out.records, vec![FamilyRecord::Committed { tx, ct: pt }]);
    r.on_timer(3_000, WrenTimer::Apply, &mut Out::default());
    assert_eq!(r.core().chain_len(b"k"), 1, "installed");
}

/// A replica that crashed with a prepare alone durable — its answer may
/// have gone out — and no commit yet commits it when it starts again; a
/// checkpoint taken meanwhile keeps the mark. The coordinator is never
/// asked (it keeps no decision, and would say "aborted").
#[test]
fn a_prepare_alone_durable_before_a_crash_is_committed_at_the_restart() {
    let topology = Arc::new(Topology::full(1, 1).unwrap());
    let fresh = || WrenReplica::new(ReplicaId::new(0, 0), topology.clone(), WrenConfig::default());
    let mut r = fresh();
    let me = Addr::Replica(r.id());
    let mut records = Vec::new();
    let mut out = Out::default();
    r.start(1_000, &mut out);
    records.append(&mut out.records);
    let mut out = Out::default();
    r.on_message(1_100, me, prepare_req(3, Timestamp::ZERO, Some(10_000_000)), &mut out);
    records.append(&mut out.records);
    let pt = match out.after_durable.first() {
        Some((_, WrenMsg::PrepareResp { pt, .. })) => *pt,
        other => panic!("{other:?}"),
    };
    for records in [records.clone(), r.checkpoint()] {
        let mut again = crate::twopc::recover(fresh(), records);
        let mut out = Out::default();
        again.on_timer(5_000_000, WrenTimer::Heal, &mut out);
        assert!(!out.messages.iter().any(|(_, m)| matches!(m, WrenMsg::Resolve { .. })), "{:?}", out.messages);
        let mut out = Out::default();
        again.start(5_000_000, &mut out);
        assert!(out.records.contains(&FamilyRecord::Committed { tx: TxId(3), ct: pt }), "{:?}", out.records);
        again.on_timer(6_000_000, WrenTimer::Apply, &mut Out::default());
        assert_eq!(again.core().chain_len(b"k"), 1, "installed");
    }
}

/// A prepare alone that reaches its cohort after its deadline is not
/// taken: the coordinator may have told the client the outcome is unknown,
/// and the client gone on to write the same keys. The cohort says so, and
/// a coordinator still waiting tells its client the commit aborted.
#[test]
fn a_prepare_alone_past_its_deadline_is_refused_and_its_commit_aborts() {
    let mut r = replica(1, 1);
    let mut out = Out::default();
    r.on_message(1_501, coordinator_addr(), prepare_req(4, Timestamp::ZERO, Some(1_500)), &mut out);
    assert!(out.records.is_empty() && out.after_durable.is_empty(), "{out:?}");
    assert_eq!(out.messages, vec![(coordinator_addr(), WrenMsg::PrepareRefused { tx: TxId(4) })]);
    assert!(r.core().prepared.is_empty());

    let me = Addr::Replica(r.id());
    let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
    let (tx, _) = commit(&mut r, client, vec![(Key::from("k"), Some(Value::from("v")))]);
    let mut out = Out::default();
    r.on_message(1_200, me, WrenMsg::PrepareRefused { tx }, &mut out);
    match out.messages.as_slice() {
        [(to, WrenMsg::CommitAborted { tx: t, .. })] if *to == client && *t == tx => {}
        other => panic!("expected the client told the commit aborted, got {other:?}"),
    }
    let mut out = Out::default();
    r.on_timer(1_100 + 2_000_000, WrenTimer::Heal, &mut out);
    assert!(out.messages.is_empty(), "given up once: {:?}", out.messages);
}

/// Two partitions written: two phases, the decision durable before the
/// cohorts or the client hear it.
#[test]
fn a_commit_writing_two_partitions_records_its_decision_before_anyone_hears_it() {
    let mut r = replica(1, 2);
    let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
    let keys: Vec<Key> = (0..64).map(|i| Key::from(format!("k{i}"))).collect();
    let topology = Topology::full(1, 2).unwrap();
    let (k0, k1) = (
        keys.iter().find(|k| topology.partition_of(k).0 == 0).unwrap().clone(),
        keys.iter().find(|k| topology.partition_of(k).0 == 1).unwrap().clone(),
    );
    let (tx, out) = commit(&mut r, client, vec![(k0, Some(Value::from("a"))), (k1, Some(Value::from("b")))]);
    assert_eq!(out.messages.len(), 2);
    assert!(out.messages.iter().all(|(_, m)| matches!(m, WrenMsg::PrepareReq { alone: None, .. })));
    let cohort = |p| Addr::Replica(ReplicaId::new(0, p));
    let mut out = Out::default();
    r.on_message(1_200, cohort(0), WrenMsg::PrepareResp { tx, pt: Timestamp(5) }, &mut out);
    r.on_message(1_200, cohort(1), WrenMsg::PrepareResp { tx, pt: Timestamp(7) }, &mut out);
    assert_eq!(out.records, vec![FamilyRecord::Decided { tx, ct: Timestamp(7) }]);
    assert!(out.messages.is_empty(), "{:?}", out.messages);
    assert_eq!(out.after_durable.len(), 3, "two commits and the answer wait: {:?}", out.after_durable);
}

/// A commit whose one cohort never answers is not called aborted: that
/// cohort commits without a decision, and may have — its answer lost to a
/// crash. The client hears the outcome is unknown.
#[test]
fn a_one_phase_commit_that_is_never_answered_has_an_unknown_outcome() {
    let mut r = replica(1, 1);
    let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
    let (tx, _) = commit(&mut r, client, vec![(Key::from("k"), Some(Value::from("v")))]);
    let mut out = Out::default();
    r.on_timer(1_100 + 2_000_000, WrenTimer::Heal, &mut out);
    let told: Vec<_> = out.messages.iter().filter(|(to, _)| *to == client).map(|(_, m)| m.clone()).collect();
    assert_eq!(told, vec![WrenMsg::TxError { tx: Some(tx), error: crate::contract::SessionError::OutcomeUnknown }]);
    assert!(
        !out.messages.iter().any(|(_, m)| matches!(m, WrenMsg::Abort { .. })),
        "no abort: the cohort may have committed"
    );
}

/// A forged far-future commit time for a transaction nobody prepared must
/// not move the clock; one below the proposal is raised to it and refused.
#[test]
fn commits_no_honest_coordinator_sends_move_no_clock_and_are_refused() {
    let mut r = replica(1, 1);
    let before = r.core().clock();
    let forged = WrenMsg::Commit { tx: TxId(77), ct: Timestamp::MAX.prev() };
    r.on_message(1_000, coordinator_addr(), forged, &mut Out::default());
    assert_eq!(r.core().clock(), before);
    let pt = prepare(&mut r, 2_000, 1, Timestamp::ZERO);
    assert!(pt.physical() < 10_000, "proposals follow the real clock, got {pt}");
    r.on_message(2_100, coordinator_addr(), WrenMsg::Commit { tx: TxId(1), ct: Timestamp(1) }, &mut Out::default());
    assert_eq!(r.counters().inputs_refused, 1);
    r.on_timer(3_000, WrenTimer::Apply, &mut Out::default());
    assert_eq!(r.core().chain_len(b"k"), 1, "installed, at the proposal");
}

fn started(out: &Out) -> Vec<Snapshot> {
    out.messages
        .iter()
        .filter_map(|(_, m)| match m {
            WrenMsg::StartTxResp { snapshot, .. } => Some(*snapshot),
            _ => None,
        })
        .collect()
}

/// Seed 6827 of the crash tests: a coordinator that restarted knew no
/// stable times and handed a client its own last snapshot back, older than
/// what the DC had collected versions for — the client then missed its own
/// write. Restarted, a replica holds starts back until the DC's stable
/// times reach it, then hands out snapshots from them.
#[test]
fn a_restarted_replica_holds_starts_until_its_dc_agrees_on_stable_times() {
    let topology = Arc::new(Topology::full(1, 2).unwrap());
    // A leaf of BiST: partition 0, the root, sends it the stable times.
    let id = ReplicaId::new(0, 1);
    let root = Addr::Replica(ReplicaId::new(0, 0));
    let fresh = || WrenReplica::new(id, topology.clone(), WrenConfig::default());
    let mut first = Out::default();
    let mut r = fresh();
    r.start(1_000, &mut first);
    let mut r = crate::twopc::recover(fresh(), std::mem::take(&mut first.records));
    r.start(2_000, &mut Out::default());

    let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
    let seen = StartFrom { lst: Timestamp::from_physical(100), rst: Timestamp::from_physical(50) };
    let mut out = Out::default();
    r.on_message(2_000, client, WrenMsg::StartTxReq(seen), &mut out);
    out.sync_at_once();
    assert!(started(&out).is_empty(), "a start before the DC's stable times is held");

    let (lst, rst) = (Timestamp::from_physical(1_500), Timestamp::from_physical(1_200));
    let down = BistMsg::Down { lst, rst, oldest: Snapshot { lt: lst, rt: rst } };
    let mut out = Out::default();
    r.on_message(2_100, root, WrenMsg::Stabilization(down), &mut out);
    out.sync_at_once();
    assert_eq!(started(&out), vec![Snapshot { lt: lst, rt: rst }], "the held start gets the DC's snapshot");

    let mut out = Out::default();
    r.on_message(2_200, client, WrenMsg::StartTxReq(seen), &mut out);
    assert_eq!(started(&out).len(), 1, "later starts are answered at once");
}

/// A replica that starts for the first time has nothing to rejoin.
#[test]
fn a_first_start_answers_starts_at_once() {
    let mut r = replica(1, 2);
    let out = start_fresh(&mut r, 1_000, Addr::Client(ClientId { dc: DcId(0), index: 0 }));
    assert_eq!(started(&out).len(), 1);
}

/// A heartbeat raises the version vector without a record of its own; the
/// next stabilization report builds on it, so the position is recorded
/// first — and a restart brings the entry back.
#[test]
fn heartbeat_positions_are_recorded_before_a_report_and_survive_a_restart() {
    let topology = Arc::new(Topology::full(2, 1).unwrap());
    let id = ReplicaId::new(0, 0);
    let peer = Addr::Replica(ReplicaId::new(1, 0));
    let fresh = || WrenReplica::new(id, topology.clone(), WrenConfig::default());
    let mut r = fresh();
    let mut records = Vec::new();
    let mut out = Out::default();
    r.start(1_000, &mut out);
    r.on_message(1_000, peer, WrenMsg::Stream(Control::ResumeFrom { from: Timestamp::ZERO }), &mut out);
    let t = Timestamp::from_physical(900);
    r.on_message(1_100, peer, WrenMsg::Heartbeat { t }, &mut out);
    assert_eq!(r.version_vector()[1], t);
    records.append(&mut out.records);
    assert!(records.iter().all(|rec| !matches!(rec, FamilyRecord::Applied { .. })), "no record per heartbeat");

    let mut out = Out::default();
    r.on_timer(1_200, WrenTimer::Stabilize, &mut out);
    records.append(&mut out.records);
    let mut again = Out::default();
    r.on_timer(1_300, WrenTimer::Stabilize, &mut again);
    assert!(again.records.iter().all(|rec| !matches!(rec, FamilyRecord::Applied { .. })), "recorded once");

    let r = crate::twopc::recover(fresh(), records);
    assert_eq!(r.version_vector()[1], t, "the heartbeat's position came back");
}
