//! Unit tests of single replica steps: snapshot assignment, when a read
//! waits and what wakes it, proposals, stabilization.

use super::messages::{CureMsg, Gossip, TxWrites};
use super::replica::{CureReplica, CureTimer, WakeReads};
use crate::recovery::Control;

use super::vector::VectorTs;
use super::{ClockMode, CureConfig};
use crate::contract::{Key, Replica, Value};
use crate::hlc::Timestamp;
use crate::ids::{Addr, ClientId, DcId, ReplicaId, TxId};
use crate::topology::Topology;
use crate::twopc::FamilyReplica;
use std::sync::Arc;

type Out = crate::twopc::FamilyEffects<CureReplica>;

const START: u64 = 1_000_000;

fn replica(mode: ClockMode, dcs: u16, partitions: u32) -> CureReplica {
    let topology = Arc::new(Topology::full(dcs, partitions).unwrap());
    let mut r = CureReplica::new(ReplicaId::new(0, 0), topology, CureConfig::default(), mode);
    r.start(START, &mut Out::default());
    resume_peers(&mut r, START);
    r
}

/// Every peer's stream resumes from the start, as at a cluster's start.
fn resume_peers(r: &mut CureReplica, now: u64) {
    let me = r.id();
    for dc in 0..r.core().topology.dc_count() {
        if dc != me.dc.0 {
            let from = Addr::Replica(ReplicaId { dc: DcId(dc), ..me });
            r.on_message(
                now,
                from,
                CureMsg::Stream(Control::ResumeFrom { from: Timestamp::ZERO }),
                &mut Out::default(),
            );
        }
    }
}

fn coordinator() -> Addr {
    Addr::Replica(ReplicaId::new(0, 1))
}

fn ts(us: u64) -> Timestamp {
    Timestamp::from_physical(us)
}

fn vector(entries: &[Timestamp]) -> VectorTs {
    VectorTs(entries.to_vec())
}

fn slice(r: &mut CureReplica, now: u64, tx: u64, snapshot: VectorTs) -> Out {
    let mut out = Out::default();
    let msg = CureMsg::SliceReq { tx: TxId(tx), round: 0, keys: vec![Key::from("k")], snapshot };
    r.on_message(now, coordinator(), msg, &mut out);
    out.sync_at_once();
    out
}

fn answered(out: &Out, tx: u64) -> Option<Option<Value>> {
    out.messages.iter().find_map(|(_, m)| match m {
        CureMsg::SliceResp { tx: t, values, .. } if t.0 == tx => Some(values[0].1.clone()),
        _ => None,
    })
}

fn prepare(r: &mut CureReplica, now: u64, tx: u64, snapshot: VectorTs) -> Timestamp {
    let mut out = Out::default();
    let ht = snapshot.max_entry();
    let msg = CureMsg::PrepareReq {
        tx: TxId(tx),
        snapshot,
        ht,
        writes: vec![(Key::from("k"), Some(Value::from(format!("v{tx}"))))],
        alone: None,
    };
    r.on_message(now, coordinator(), msg, &mut out);
    out.sync_at_once();
    match out.messages.as_slice() {
        [(_, CureMsg::PrepareResp { pt, .. })] => *pt,
        other => panic!("expected one PrepareResp, got {other:?}"),
    }
}

fn commit(r: &mut CureReplica, now: u64, tx: u64, ct: Timestamp) -> Out {
    let mut out = Out::default();
    r.on_message(now, coordinator(), CureMsg::Commit { tx: TxId(tx), ct }, &mut out);
    out.sync_at_once();
    out
}

#[test]
fn the_snapshot_takes_the_fresher_of_client_and_clock_locally_and_the_stable_vector_remotely() {
    let mut r = replica(ClockMode::Physical, 3, 1);
    // The stable vector learns DC 1 up to 500 and DC 2 up to 700.
    let peer = |dc| Addr::Replica(ReplicaId::new(dc, 0));
    r.on_message(START, peer(1), CureMsg::Heartbeat { t: ts(500) }, &mut Out::default());
    r.on_message(START, peer(2), CureMsg::Heartbeat { t: ts(700) }, &mut Out::default());
    r.on_timer(START, CureTimer::Stabilize, &mut Out::default());
    assert_eq!(r.stable_vector().get(DcId(2)), ts(700));
    let client = Addr::Client(ClientId { dc: DcId(0), index: 0 });
    let mut out = Out::default();
    let seen = vector(&[ts(START + 50), ts(600), ts(10)]);
    r.on_message(START + 20, client, CureMsg::StartTxReq(seen), &mut out);
    out.sync_at_once();
    let snapshot = match &out.messages[..] {
        [(_, CureMsg::StartTxResp { snapshot, .. })] => snapshot.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(snapshot, vector(&[ts(START + 50), ts(600), ts(700)]));

    let mut out = Out::default();
    r.on_message(START + 90, client, CureMsg::StartTxReq(VectorTs::zero(3)), &mut out);
    out.sync_at_once();
    match &out.messages[..] {
        [(_, CureMsg::StartTxResp { snapshot, .. })] => assert_eq!(snapshot.get(DcId(0)), ts(START + 90)),
        other => panic!("{other:?}"),
    }
}

/// Cure: a snapshot ahead of the partition's physical clock makes the read
/// wait, with a timer armed for exactly the moment the clock reaches it.
#[test]
fn cure_parks_a_read_ahead_of_the_clock_and_wakes_it_when_the_clock_gets_there() {
    let mut r = replica(ClockMode::Physical, 1, 2);
    let out = slice(&mut r, START + 100, 1, vector(&[ts(START + 300)]));
    assert_eq!(answered(&out, 1), None, "the clock is 200 us behind the snapshot");
    assert_eq!(out.timers, vec![(CureTimer::Own(WakeReads), 200)]);
    assert_eq!(r.parked_reads(), 1);
    // A second read further ahead does not arm an earlier timer.
    let out = slice(&mut r, START + 150, 2, vector(&[ts(START + 400)]));
    assert!(out.timers.is_empty());

    let mut out = Out::default();
    r.on_timer(START + 300, CureTimer::Own(WakeReads), &mut out);
    out.sync_at_once();
    assert_eq!(answered(&out, 1), Some(None), "served when the clock reaches it");
    assert_eq!(answered(&out, 2), None);
    assert_eq!(out.timers, vec![(CureTimer::Own(WakeReads), 100)], "re-armed for the next one");
    assert!(r.core().clock() >= ts(START + 300));
}

/// H-Cure: the same read is served at once; the HLC jumps to the snapshot
/// so that no later proposal can fall inside it.
#[test]
fn h_cure_serves_a_read_ahead_of_the_clock_at_once_and_moves_its_hlc() {
    let mut r = replica(ClockMode::Hybrid, 1, 2);
    let snapshot = vector(&[ts(START + 300)]);
    let out = slice(&mut r, START + 100, 1, snapshot);
    assert_eq!(answered(&out, 1), Some(None));
    assert!(out.timers.is_empty());
    let pt = prepare(&mut r, START + 100, 2, VectorTs::zero(1));
    assert!(pt > ts(START + 300), "proposal {pt} must exceed the snapshot served");
}

/// Both clocks: a transaction prepared at or below the snapshot blocks the
/// read until its commit arrives, and the read then sees it; one prepared
/// above the snapshot does not block.
#[test]
fn a_pending_transaction_below_the_snapshot_blocks_the_read_until_its_commit() {
    for mode in [ClockMode::Physical, ClockMode::Hybrid] {
        let mut r = replica(mode, 1, 2);
        let pt = prepare(&mut r, START + 10, 7, VectorTs::zero(1));
        let out = slice(&mut r, START + 50, 1, vector(&[pt.next()]));
        assert_eq!(answered(&out, 1), None, "{mode:?}: T7 might commit inside the snapshot");
        // Another transaction, prepared after the read: above the snapshot.
        let later = prepare(&mut r, START + 60, 8, VectorTs::zero(1));
        assert!(later > pt.next());

        let out = commit(&mut r, START + 70, 7, pt);
        assert_eq!(answered(&out, 1), Some(Some(Value::from("v7"))), "{mode:?}: woken by the commit");
        assert_eq!(r.parked_reads(), 0);
        assert_eq!(r.core().prepared.len(), 1, "T8 is still pending, above the snapshot");
    }
}

#[test]
fn h_cure_parks_a_read_only_behind_transactions_prepared_before_it() {
    let mut r = replica(ClockMode::Hybrid, 1, 2);
    let pt = prepare(&mut r, START + 10, 7, VectorTs::zero(1));
    // A snapshot 5 ms ahead of this partition's clock, behind T7.
    let snapshot = START + 5_000;
    let out = slice(&mut r, START + 50, 1, vector(&[ts(snapshot)]));
    assert_eq!(answered(&out, 1), None, "T7 might commit inside the snapshot");
    // Prepared after the read arrived: above the snapshot, though the clock is not there yet.
    let later = prepare(&mut r, START + 60, 8, VectorTs::zero(1));
    assert!(later > ts(snapshot), "proposal {later} inside the parked snapshot");
    let out = commit(&mut r, START + 70, 7, pt);
    assert_eq!(answered(&out, 1), Some(Some(Value::from("v7"))), "only T7 held the read");
}

#[test]
fn proposals_exceed_every_entry_of_the_snapshot() {
    let mut r = replica(ClockMode::Physical, 3, 1);
    let pt = prepare(&mut r, START, 1, vector(&[ts(10), ts(START + 5_000), ts(20)]));
    assert!(pt > ts(START + 5_000));
}

/// A remote version becomes visible only with its causal past: its commit
/// vector's entries for the other DCs must be covered too.
#[test]
fn a_replicated_version_is_visible_only_in_snapshots_covering_its_commit_vector() {
    let mut r = replica(ClockMode::Hybrid, 3, 1);
    let from_dc1 = Addr::Replica(ReplicaId::new(1, 0));
    let cv = vector(&[ts(START - 10), ts(START + 100), ts(START + 40)]);
    let txs =
        vec![TxWrites { txid: TxId(3), commit_vector: cv, writes: vec![(Key::from("k"), Some(Value::from("r")))] }];
    r.on_message(START, from_dc1, CureMsg::Replicate { ct: ts(START + 100), txs }, &mut Out::default());
    assert_eq!(r.version_vector().get(DcId(1)), ts(START + 100));

    let seen = |dc2: Timestamp| vector(&[ts(START), ts(START + 100), dc2]);
    assert_eq!(answered(&slice(&mut r, START, 1, seen(ts(START + 39))), 1), Some(None));
    assert_eq!(answered(&slice(&mut r, START, 2, seen(ts(START + 40))), 2), Some(Some(Value::from("r"))));
}

/// The GSV is the minimum over every partition of the DC, and only once all
/// have reported.
#[test]
fn the_stable_vector_is_the_minimum_of_all_partitions_reports() {
    let mut r = replica(ClockMode::Physical, 2, 3);
    r.on_message(START, Addr::Replica(ReplicaId::new(1, 0)), CureMsg::Heartbeat { t: ts(900) }, &mut Out::default());
    let mut out = Out::default();
    r.on_timer(START, CureTimer::Stabilize, &mut out);
    out.sync_at_once();
    let gossip = out.messages.iter().filter(|(_, m)| matches!(m, CureMsg::Stabilization(_))).count();
    assert_eq!(gossip, 2, "one report to each other partition of the DC");
    let report = |vv: &[Timestamp]| CureMsg::Stabilization(Gossip { vv: vector(vv), oldest: VectorTs::zero(2) });
    r.on_message(START, Addr::Replica(ReplicaId::new(0, 1)), report(&[ts(5), ts(700)]), &mut Out::default());
    assert_eq!(r.stable_vector().get(DcId(1)), Timestamp::ZERO, "partition 2 has not reported");
    r.on_message(START, Addr::Replica(ReplicaId::new(0, 2)), report(&[ts(5), ts(800)]), &mut Out::default());
    assert_eq!(r.stable_vector().get(DcId(1)), ts(700));
    // A report from outside the DC is ignored.
    r.on_message(START, Addr::Replica(ReplicaId::new(1, 2)), report(&[ts(5), ts(1)]), &mut Out::default());
    assert_eq!(r.stable_vector().get(DcId(1)), ts(700));
    assert_eq!(r.visible_upto(DcId(1)), ts(700));
}

#[test]
fn replication_goes_in_commit_order_below_the_smallest_pending_proposal() {
    let mut r = replica(ClockMode::Physical, 2, 1);
    let p1 = prepare(&mut r, START + 10, 1, VectorTs::zero(2));
    let p2 = prepare(&mut r, START + 10, 2, VectorTs::zero(2));
    commit(&mut r, START + 20, 2, p2);
    let mut out = Out::default();
    r.on_timer(START + 30, CureTimer::Apply, &mut out);
    out.sync_at_once();
    assert!(!out.messages.iter().any(|(_, m)| matches!(m, CureMsg::Replicate { .. })), "T1 may still commit first");
    assert_eq!(r.version_vector().get(DcId(0)), p1.prev());
    commit(&mut r, START + 40, 1, p2.next());
    let mut out = Out::default();
    r.on_timer(START + 50, CureTimer::Apply, &mut out);
    out.sync_at_once();
    let cts: Vec<Timestamp> = out
        .messages
        .iter()
        .filter_map(|(_, m)| match m {
            CureMsg::Replicate { ct, .. } => Some(*ct),
            _ => None,
        })
        .collect();
    assert_eq!(cts, vec![p2, p2.next()]);
    assert!(r.is_quiescent());
}

/// Hostile input from a peer: a commit time below the replica's own
/// proposal, which no honest coordinator sends. The replica does not die of
/// it: the version takes the proposal, and the input counts as refused.
#[test]
fn a_commit_time_below_the_proposal_is_refused_not_fatal() {
    for mode in [ClockMode::Physical, ClockMode::Hybrid] {
        let mut r = replica(mode, 1, 1);
        let pt = prepare(&mut r, START + 10, 1, VectorTs::zero(1));
        commit(&mut r, START + 20, 1, Timestamp(1));
        assert_eq!(r.counters().inputs_refused, 1, "{mode:?}");
        assert_eq!(r.core().chain_len(b"k"), 1, "{mode:?}: installed, at the proposal");
        let read = slice(&mut r, START + 30, 2, vector(&[pt]));
        assert_eq!(answered(&read, 2), Some(Some(Value::from("v1"))), "{mode:?}");
    }
}

/// A forged far-future commit time for a transaction nobody prepared must
/// not move the clock: every later timestamp would follow it.
#[test]
fn a_commit_for_an_unknown_transaction_moves_no_clock() {
    for mode in [ClockMode::Physical, ClockMode::Hybrid] {
        let mut r = replica(mode, 1, 1);
        let before = r.core().clock();
        commit(&mut r, START, 77, Timestamp::MAX.prev());
        assert_eq!(r.core().clock(), before, "{mode:?}");
        let pt = prepare(&mut r, START + 10, 1, VectorTs::zero(1));
        assert!(pt.physical() < START + 1_000, "{mode:?}: proposals follow the real clock, got {pt}");
    }
}
