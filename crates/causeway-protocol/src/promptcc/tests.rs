//! Scenario tests of PrompTCC's steps: the second round, the client's help
//! in advancing `S_i`, the end of a transaction whose coordinator fell
//! silent, and a partition rebuilt from its records.

use super::messages::PtccMsg;
use super::replica::{PtccReplica, PtccTimer};
use super::{PrompTcc, PtccConfig, PtccRecord, PtccSession};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{Key, Limits, Protocol, Replica, Session, SessionEvent, SessionSetup, Value};
use crate::ids::{Addr, ClientId, DcId, PartitionId, ReplicaId};
use crate::topology::Topology;
use std::collections::VecDeque;
use std::sync::Arc;

type Out = ReplicaEffects<PtccReplica>;

/// Two partitions of one DC and the messages between them and clients.
struct Cluster {
    topology: Arc<Topology>,
    replicas: Vec<PtccReplica>,
    records: Vec<Vec<PtccRecord>>,
    queue: VecDeque<(Addr, Addr, PtccMsg)>,
    now: u64,
    /// Every read at a snapshot delivered to a partition: where, and its
    /// round.
    at_snapshot: Vec<(Addr, u32)>,
}

impl Cluster {
    fn new(partitions: u32) -> Cluster {
        let topology = Arc::new(Topology::full(1, partitions).unwrap());
        let mut c = Cluster {
            replicas: Vec::new(),
            records: Vec::new(),
            queue: VecDeque::new(),
            now: 1_000,
            at_snapshot: Vec::new(),
            topology,
        };
        for p in 0..partitions {
            let mut r = PtccReplica::new(ReplicaId::new(0, p), c.topology.clone(), PtccConfig::default());
            let mut out = Out::default();
            r.start(c.now, &mut out);
            c.replicas.push(r);
            c.records.push(Vec::new());
            c.take(p, out);
        }
        c
    }

    fn session(&self, index: u32) -> PtccSession {
        let setup = SessionSetup {
            id: ClientId { dc: DcId(0), index },
            coordinator: ReplicaId::new(0, 0),
            topology: self.topology.clone(),
            limits: Limits::default(),
        };
        PrompTcc::session(setup, &PtccConfig::default())
    }

    /// Records become durable at once; timers are not kept.
    fn take(&mut self, p: u32, mut out: Out) {
        self.records[p as usize].append(&mut out.records);
        let from = Addr::Replica(ReplicaId::new(0, p));
        for (to, msg) in out.messages.into_iter().chain(out.after_durable) {
            self.queue.push_back((from, to, msg));
        }
    }

    fn send_from(&mut self, client: &PtccSession, out: crate::contract::session::SessionEffects<PtccSession>) {
        for (to, msg) in out.messages {
            self.queue.push_back((Addr::Client(client.id()), to, msg));
        }
    }

    /// Delivers queued messages until none is left, except those `drop`
    /// refuses, which are discarded; returns what reached the client.
    fn run(&mut self, session: &mut PtccSession, drop: impl Fn(&Addr, &Addr, &PtccMsg) -> bool) -> Vec<SessionEvent> {
        let mut events = Vec::new();
        while let Some((from, to, msg)) = self.queue.pop_front() {
            self.now += 10;
            if drop(&from, &to, &msg) {
                continue;
            }
            if let PtccMsg::Read { tag, at_snapshot: true, .. } = &msg {
                self.at_snapshot.push((to, tag.round));
            }
            match to {
                Addr::Replica(r) => {
                    let mut out = Out::default();
                    self.replicas[r.partition.0 as usize].on_message(self.now, from, msg, &mut out);
                    self.take(r.partition.0, out);
                }
                Addr::Client(c) if c == session.id() => {
                    let mut out = Default::default();
                    if let Some(e) = session.on_message(self.now, from, msg, &mut out) {
                        events.push(e);
                    }
                    self.send_from(session, out);
                }
                Addr::Client(_) => {}
            }
        }
        events
    }

    /// A key stored by `partition`.
    fn key(&self, partition: u32) -> Key {
        self.keys(partition, 1).remove(0)
    }

    /// `n` keys stored by `partition`.
    fn keys(&self, partition: u32, n: usize) -> Vec<Key> {
        (0..)
            .map(|i| Key::from(format!("k{i}")))
            .filter(|k| self.topology.partition_of(k) == PartitionId(partition))
            .take(n)
            .collect()
    }

    /// Commits `writes` from `session`; returns its events.
    fn commit(
        &mut self,
        session: &mut PtccSession,
        writes: &[(&Key, &str)],
        drop: impl Fn(&Addr, &Addr, &PtccMsg) -> bool,
    ) -> Vec<SessionEvent> {
        self.send_commit(session, writes);
        self.run(session, drop)
    }

    /// Begins a transaction of `writes` at `session` and queues its commit's
    /// messages, undelivered; returns the coordinator the client picked.
    fn send_commit(&mut self, session: &mut PtccSession, writes: &[(&Key, &str)]) -> PartitionId {
        let mut out = Default::default();
        session.begin(self.now, &mut out).unwrap();
        for (k, v) in writes {
            session.write((*k).clone(), value(v)).unwrap();
        }
        assert_eq!(session.commit(self.now, &mut out).unwrap(), None);
        let coordinator = match out.messages.first() {
            Some((_, PtccMsg::Write { coordinator, .. })) => *coordinator,
            other => panic!("{other:?}"),
        };
        self.send_from(session, out);
        coordinator
    }

    fn read_only(
        &mut self,
        session: &mut PtccSession,
        keys: &[Key],
        drop: impl Fn(&Addr, &Addr, &PtccMsg) -> bool,
    ) -> Vec<(Key, Option<Value>)> {
        let mut out = Default::default();
        assert_eq!(session.read_only(self.now, keys, &mut out).unwrap(), None);
        self.send_from(session, out);
        match &self.run(session, drop)[..] {
            [SessionEvent::Read(values)] => values.clone(),
            other => panic!("expected the values, got {other:?}"),
        }
    }
}

fn value(v: &str) -> Option<Value> {
    Some(Value::from(v.to_string()))
}

fn is_stabilization(_: &Addr, _: &Addr, m: &PtccMsg) -> bool {
    matches!(m, PtccMsg::Report { .. } | PtccMsg::Stable { .. })
}

fn nothing(_: &Addr, _: &Addr, _: &PtccMsg) -> bool {
    false
}

#[test]
fn a_write_seen_at_one_partition_only_is_read_whole_in_a_second_round_at_the_other() {
    let mut c = Cluster::new(2);
    let (a, b) = (c.key(0), c.key(1));
    let mut writer = c.session(1);
    let events = c.commit(&mut writer, &[(&a, "a1"), (&b, "b1")], nothing);
    assert!(matches!(events[..], [SessionEvent::Committed(Some(_))]), "{events:?}");

    // Partition 1 (a leaf) reports to the root, partition 0, which now
    // knows both committed; the root's vector does not come back down.
    let mut out = Out::default();
    c.replicas[1].on_timer(c.now, PtccTimer::Stabilize, &mut out);
    c.take(1, out);
    c.run(&mut writer, |_, _, m| matches!(m, PtccMsg::Stable { .. }));

    let mut reader = c.session(2);
    let values = c.read_only(&mut reader, &[a.clone(), b.clone()], nothing);
    assert_eq!(c.at_snapshot, vec![(Addr::Replica(ReplicaId::new(0, 1)), 1)], "a second round, at partition 1 only");
    assert_eq!(values, vec![(a, value("a1")), (b, value("b1"))]);
}

/// The coordinator answers the client once, for every participant, and
/// only once every participant has committed: a participant's word that
/// it did, lost, leaves the client unanswered (its commit times out), so
/// that no read after the answer can miss the write at a participant.
#[test]
fn the_coordinator_answers_once_every_participant_has_committed() {
    let mut c = Cluster::new(2);
    let (a, b) = (c.key(0), c.key(1));
    let answers = std::cell::Cell::new(0);
    let mut writer = c.session(1);
    let counted = |_: &Addr, to: &Addr, m: &PtccMsg| {
        if matches!((to, m), (Addr::Client(_), PtccMsg::Committed { .. })) {
            answers.set(answers.get() + 1);
        }
        false
    };
    let events = c.commit(&mut writer, &[(&a, "a1"), (&b, "b1")], counted);
    assert!(matches!(events[..], [SessionEvent::Committed(Some(_))]), "{events:?}");
    assert_eq!(answers.get(), 1, "one answer for both participants");

    let mut other = c.session(3);
    let lost = |_: &Addr, _: &Addr, m: &PtccMsg| matches!(m, PtccMsg::CommittedHere { .. });
    let events = c.commit(&mut other, &[(&a, "a2"), (&b, "b2")], lost);
    assert!(events.is_empty(), "unanswered while a participant's commit is not heard of: {events:?}");
    let committed = |p: usize| c.records[p].iter().filter(|r| matches!(r, PtccRecord::Committed { .. })).count();
    assert_eq!((committed(0), committed(1)), (2, 2), "both participants committed both transactions");
}

/// A participant that has committed a transaction and hears its decision
/// again from the coordinator — which restarted and ended it by a
/// termination, gathering the commits anew — says again that it committed,
/// so that the client can still be answered; from another partition, the
/// decision is ignored.
#[test]
fn a_participant_told_the_decision_again_says_again_that_it_committed() {
    let mut c = Cluster::new(2);
    let (a, b) = (c.key(0), c.key(1));
    let mut writer = c.session(1);
    let coordinator = c.send_commit(&mut writer, &[(&a, "a1"), (&b, "b1")]);
    let other = PartitionId(1 - coordinator.0);
    assert!(matches!(c.run(&mut writer, nothing)[..], [SessionEvent::Committed(Some(_))]));
    let (tx, decided) = match c.records[other.0 as usize].iter().find_map(|r| match r {
        PtccRecord::Committed { tx, decided } => Some((*tx, decided.clone())),
        _ => None,
    }) {
        Some(found) => found,
        None => panic!("{:?}", c.records[other.0 as usize]),
    };
    for (from, answered) in [(coordinator, true), (other, false)] {
        let mut out = Out::default();
        let again = PtccMsg::Commit { tx, decided: decided.clone() };
        c.replicas[other.0 as usize].on_message(c.now, Addr::Replica(ReplicaId::at(DcId(0), from)), again, &mut out);
        let said = out.messages.iter().any(|(to, m)| {
            matches!(m, PtccMsg::CommittedHere { tx: t } if *t == tx)
                && *to == Addr::Replica(ReplicaId::at(DcId(0), coordinator))
        });
        assert_eq!(said, answered, "from {from:?}: {:?}", out.messages);
    }
}

/// An answer with a malformed timestamp fails the read and leaves `D_c`
/// as it was, even when a timestamp before it in the answer was sound: the
/// snapshot is built in `D_c`, and nothing of a bad answer joins it.
#[test]
fn a_malformed_answer_leaves_the_clients_dependencies_as_they_were() {
    use super::messages::{Cover, ReadTs};
    use super::Wire;
    use crate::hlc::Timestamp;
    let c = Cluster::new(2);
    let keys = c.keys(0, 2);
    let sound = Wire::Sparse { floor: Timestamp(0), above: vec![(1, 99)] };
    let partition_7_of_2 = Wire::Sparse { floor: Timestamp(0), above: vec![(7, 5)] };
    // Naive's timestamps, one sound and one not; PrompTCC's join; a
    // pending version's timestamp naming a partition that does not exist.
    for (read_ts, pending) in [
        (ReadTs::Each(vec![sound, partition_7_of_2.clone()]), Vec::new()),
        (ReadTs::Joined(partition_7_of_2.clone()), Vec::new()),
        (ReadTs::AtFloor, vec![partition_7_of_2]),
    ] {
        let mut reader = c.session(2);
        let before = reader.export_state().unwrap();
        let mut out = Default::default();
        assert_eq!(reader.read_only(c.now, &keys, &mut out).unwrap(), None);
        let tag = match &out.messages[..] {
            [(_, PtccMsg::Read { tag, .. })] => *tag,
            other => panic!("{other:?}"),
        };
        let answer = PtccMsg::ReadResp {
            tag,
            cover: Cover::Floor { own: Timestamp(100), floor: Timestamp(0), pending },
            values: vec![(keys[0].clone(), None), (keys[1].clone(), None)],
            read_ts,
        };
        let event = reader.on_message(c.now, Addr::Replica(ReplicaId::new(0, 0)), answer, &mut Default::default());
        assert!(matches!(event, Some(SessionEvent::Failed(_))), "{event:?}");
        assert_eq!(reader.export_state().unwrap(), before, "D_c untouched by the bad answer");
    }
}

#[test]
fn a_clients_dependencies_advance_the_partitions_it_reads() {
    let mut c = Cluster::new(2);
    let (a, b) = (c.key(0), c.key(1));
    let mut writer = c.session(1);
    c.commit(&mut writer, &[(&a, "a1"), (&b, "b1")], is_stabilization);

    // No stabilization ran: neither partition knows the other committed.
    let mut stranger = c.session(2);
    assert_eq!(c.read_only(&mut stranger, std::slice::from_ref(&b), is_stabilization), vec![(b.clone(), None)]);
    // The writer's D_c says both did: one round, its own write.
    assert_eq!(c.read_only(&mut writer, std::slice::from_ref(&b), is_stabilization), vec![(b.clone(), value("b1"))]);
    assert!(c.at_snapshot.is_empty(), "one round: {:?}", c.at_snapshot);
    // And partition 1 now shows it to everybody.
    assert_eq!(c.read_only(&mut stranger, std::slice::from_ref(&b), is_stabilization), vec![(b, value("b1"))]);
}

#[test]
fn a_transaction_whose_coordinator_never_heard_of_it_is_aborted_and_fenced() {
    let mut c = Cluster::new(2);
    let (a, b) = (c.key(0), c.key(1));
    let mut writer = c.session(1);
    // The coordinator is partition (index + n) % 2 = 0 for the first
    // transaction of client 1... find it from the message itself, and lose
    // the client's Write to it.
    let coordinator = c.send_commit(&mut writer, &[(&a, "a1"), (&b, "b1")]);
    let other = PartitionId(1 - coordinator.0);
    let lost_write = |_: &Addr, to: &Addr, m: &PtccMsg| {
        matches!(m, PtccMsg::Write { .. }) && *to == Addr::Replica(ReplicaId::at(DcId(0), coordinator))
    };
    assert!(c.run(&mut writer, lost_write).is_empty());
    assert!(!c.replicas[other.0 as usize].is_quiescent(), "prepared, waiting for the decision");

    // The participant asks after the resolve delay; the coordinator asks
    // everyone, fences itself, and aborts.
    c.now += PtccConfig::default().resolve_after_us;
    let mut out = Out::default();
    c.replicas[other.0 as usize].on_timer(c.now, PtccTimer::Resolve, &mut out);
    c.take(other.0, out);
    let events = c.run(&mut writer, nothing);
    assert!(matches!(events[..], [SessionEvent::Aborted(_)]), "{events:?}");
    assert!(c.replicas.iter().all(|r| r.is_quiescent()));
    assert!(
        c.records[coordinator.0 as usize].iter().any(|r| matches!(r, PtccRecord::Aborted { .. })),
        "fenced durably"
    );

    // Nothing of it is visible, and a late Write to the coordinator is refused.
    let mut reader = c.session(2);
    assert_eq!(c.read_only(&mut reader, &[a.clone(), b.clone()], nothing), vec![(a.clone(), None), (b.clone(), None)]);
    let tx = match &c.records[other.0 as usize][..] {
        [.., PtccRecord::Aborted { tx }] => *tx,
        other => panic!("{other:?}"),
    };
    let mut out = Out::default();
    let late = PtccMsg::Write {
        tx,
        writes: vec![(a.clone(), value("a1"))],
        participants: vec![PartitionId(0), PartitionId(1)],
        coordinator,
        deps: super::VClock::zeros(2).to_wire(false),
    };
    c.replicas[coordinator.0 as usize].on_message(c.now, Addr::Client(tx.client), late, &mut out);
    assert!(matches!(&out.messages[..], [(_, PtccMsg::Aborted { .. })]), "{:?}", out.messages);
    assert!(out.records.iter().all(|r| !matches!(r, PtccRecord::Prepared(_))));
}

#[test]
fn a_coordinator_that_crashed_after_every_prepare_commits_it_when_asked() {
    let mut c = Cluster::new(2);
    let (a, b) = (c.key(0), c.key(1));
    let mut writer = c.session(1);
    // Every vote is lost: both partitions prepare, nobody decides.
    let events = c.commit(&mut writer, &[(&a, "a1"), (&b, "b1")], |_, _, m| matches!(m, PtccMsg::Prepared { .. }));
    assert!(events.is_empty());
    // Both partitions restart from their records.
    for p in 0..2u32 {
        let records = c.records[p as usize].clone();
        let mut r = PrompTcc::recover(ReplicaId::new(0, p), c.topology.clone(), &PtccConfig::default(), records);
        let mut out = Out::default();
        r.start(c.now, &mut out);
        assert!(!r.is_quiescent(), "the prepare survived");
        c.replicas[p as usize] = r;
        c.take(p, out);
    }
    c.run(&mut writer, is_stabilization);
    c.now += PtccConfig::default().resolve_after_us;
    for p in 0..2u32 {
        let mut out = Out::default();
        c.replicas[p as usize].on_timer(c.now, PtccTimer::Resolve, &mut out);
        c.take(p, out);
    }
    let events = c.run(&mut writer, is_stabilization);
    assert!(matches!(events[..], [SessionEvent::Committed(Some(_))]), "{events:?}");
    assert!(c.replicas.iter().all(|r| r.is_quiescent()));
    let mut reader = c.session(2);
    let got = c.read_only(&mut reader, &[a.clone(), b.clone()], nothing);
    let (mut out, mut reader2) = (Out::default(), c.session(3));
    c.replicas[1].on_timer(c.now, PtccTimer::Stabilize, &mut out);
    c.take(1, out);
    c.run(&mut reader2, nothing);
    let later = c.read_only(&mut reader2, &[a.clone(), b.clone()], nothing);
    assert!(got == vec![(a.clone(), None), (b.clone(), None)] || got == later, "all or nothing: {got:?}");
    assert_eq!(later, vec![(a, value("a1")), (b, value("b1"))]);
}

#[test]
fn a_checkpoint_rebuilds_the_versions_the_fences_and_the_clock() {
    let mut c = Cluster::new(1);
    let a = c.key(0);
    let mut writer = c.session(1);
    c.commit(&mut writer, &[(&a, "a1")], nothing);
    c.commit(&mut writer, &[(&a, "a2")], nothing);
    let checkpoint = c.replicas[0].checkpoint();
    let mut r = PrompTcc::recover(ReplicaId::new(0, 0), c.topology.clone(), &PtccConfig::default(), checkpoint);
    assert_eq!(r.latest_values(), c.replicas[0].latest_values());
    assert_eq!(r.counters().versions, 2);
    let mut out = Out::default();
    r.start(0, &mut out);
    c.replicas[0] = r;
    // A new write after the restart orders after the old ones even with
    // the clock far behind: the reservation is above them.
    c.now = 0;
    c.commit(&mut writer, &[(&a, "a3")], nothing);
    let mut reader = c.session(2);
    assert_eq!(c.read_only(&mut reader, std::slice::from_ref(&a), nothing), vec![(a, value("a3"))]);
}

#[test]
fn a_slow_reader_keeps_its_snapshot_for_the_timeout_and_is_aborted_past_it() {
    let timeout = PtccConfig::default().txn_timeout_us;
    let mut c = Cluster::new(2);
    let (a, b) = (c.key(0), c.key(1));
    let mut writer = c.session(1);
    c.commit(&mut writer, &[(&a, "a0")], nothing);
    c.commit(&mut writer, &[(&b, "b0")], nothing);
    c.now += timeout;
    // A stabilization round: partition 0 learns how far partition 1 got.
    let mut out = Out::default();
    c.replicas[1].on_timer(c.now, PtccTimer::Stabilize, &mut out);
    c.take(1, out);
    c.run(&mut writer, nothing);

    // The reader's first read touches partition 0 only.
    let mut reader = c.session(2);
    let mut out = Default::default();
    reader.begin(c.now, &mut out).unwrap();
    reader.read(c.now, std::slice::from_ref(&a), &mut out).unwrap();
    c.send_from(&reader, out);
    assert_eq!(c.run(&mut reader, nothing), vec![SessionEvent::Read(vec![(a.clone(), value("a0"))])]);

    // Newer versions of b, while it reads slowly; the old one is kept.
    c.commit(&mut writer, &[(&b, "b1")], nothing);
    c.commit(&mut writer, &[(&b, "b2")], nothing);
    let mut out = Default::default();
    reader.read(c.now, std::slice::from_ref(&b), &mut out).unwrap();
    let bound = match &out.messages[..] {
        [(_, m @ PtccMsg::Read { at_snapshot: true, .. })] => m.clone(),
        other => panic!("a read at the snapshot: {other:?}"),
    };
    c.send_from(&reader, out);
    assert_eq!(
        c.run(&mut reader, nothing),
        vec![SessionEvent::Read(vec![(b.clone(), value("b0"))])],
        "its snapshot's b"
    );
    assert_eq!(c.replicas[1].counters().versions, 3);

    // Past the timeout a new write lets the partition collect b0 and b1.
    c.now += timeout + 1;
    c.commit(&mut writer, &[(&b, "b3")], nothing);
    let counters = c.replicas[1].counters();
    assert_eq!((counters.versions, counters.versions_collected), (2, 2), "b2 (held for the timeout) and b3 kept");
    // The reader's next read (of another key of partition 1) is aborted by
    // its own library...
    let other = (0..).map(|i| Key::from(format!("other{i}"))).find(|k| c.topology.partition_of(k) == PartitionId(1));
    let mut out = Default::default();
    assert_eq!(reader.read(c.now, &[other.unwrap()], &mut out).unwrap(), None);
    assert!(out.messages.is_empty(), "nothing asked of the partitions");
    let [(timer, _)] = out.timers[..] else { panic!("{:?}", out.timers) };
    let event = reader.on_timer(c.now, timer, &mut Default::default());
    assert!(matches!(event, Some(SessionEvent::Aborted(crate::contract::AbortReason::Expired(_)))), "{event:?}");
    // ...and a partition asked at that snapshot says the version is gone.
    let mut out = Out::default();
    c.replicas[1].on_message(c.now, Addr::Client(reader.id()), bound, &mut out);
    assert!(matches!(&out.messages[..], [(_, PtccMsg::TooOld { .. })]), "{:?}", out.messages);
    // A fresh transaction reads the newest.
    let mut fresh = c.session(3);
    assert_eq!(c.read_only(&mut fresh, std::slice::from_ref(&b), nothing), vec![(b, value("b3"))]);
}

#[test]
fn a_commit_shows_nowhere_before_its_record_is_durable() {
    let c = Cluster::new(1);
    let a = c.key(0);
    let me = ReplicaId::new(0, 0);
    let mut r = PtccReplica::new(me, c.topology.clone(), PtccConfig::default());
    r.start(1_000, &mut Out::default());
    let client = ClientId { dc: DcId(0), index: 7 };
    let tx = crate::write_only::WtxId { client, epoch: 1, n: 1 };
    let write = PtccMsg::Write {
        tx,
        writes: vec![(a.clone(), value("a1"))],
        participants: vec![PartitionId(0)],
        coordinator: PartitionId(0),
        deps: super::VClock::zeros(1).to_wire(false),
    };
    let mut out = Out::default();
    r.on_message(2_000, Addr::Client(client), write, &mut out);
    assert!(
        matches!(&out.records[..], [PtccRecord::Prepared(_), PtccRecord::Committed { .. }, ..]),
        "{:?}",
        out.records
    );
    let logged = match &out.after_durable[..] {
        [(to, m @ PtccMsg::Logged { .. })] if *to == Addr::Replica(me) => m.clone(),
        other => panic!("one Logged to itself, after the records: {other:?}"),
    };
    assert!(out.messages.is_empty(), "the client hears nothing yet");
    // A read before the records are durable does not see the write.
    let read = |r: &mut PtccReplica, at| {
        let tag = crate::contract::ReadTag { tx: 1, round: 0 };
        let msg = PtccMsg::Read {
            tag,
            keys: vec![a.clone()],
            deps: super::VClock::zeros(1).to_wire(false),
            at_snapshot: false,
        };
        let mut out = Out::default();
        r.on_message(at, Addr::Client(ClientId { dc: DcId(0), index: 8 }), msg, &mut out);
        match &out.messages[..] {
            [(_, PtccMsg::ReadResp { values, .. })] => values[0].1.clone(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(read(&mut r, 2_100), None);
    // Durable: the write takes effect, and the client is told.
    let mut out = Out::default();
    r.on_message(2_200, Addr::Replica(me), logged, &mut out);
    assert!(matches!(&out.messages[..], [(Addr::Client(c), PtccMsg::Committed { .. })] if *c == client));
    assert_eq!(read(&mut r, 2_300), value("a1"));
    // A Logged from anyone but itself is refused.
    let mut out = Out::default();
    r.on_message(2_400, Addr::Client(client), PtccMsg::Logged { upto: 9 }, &mut out);
    assert_eq!(r.counters().inputs_refused, 1);
}

/// After a restart `S_i` starts over, and the versions that replaced
/// collected ones may be invisible for a while: a read then says it
/// cannot answer rather than show the key older than its own writer's
/// write (found by review).
#[test]
fn a_restarted_partition_does_not_hide_a_collected_write_behind_an_invisible_one() {
    let timeout = PtccConfig::default().txn_timeout_us;
    let mut c = Cluster::new(2);
    let (a, b) = (c.key(0), c.key(1));
    let mut writer = c.session(1);
    let stabilize = |c: &mut Cluster, s: &mut PtccSession| {
        let mut out = Out::default();
        c.replicas[1].on_timer(c.now, PtccTimer::Stabilize, &mut out);
        c.take(1, out);
        c.run(s, nothing);
    };
    c.commit(&mut writer, &[(&a, "c")], nothing);
    let mut other = c.session(2);
    c.commit(&mut other, &[(&a, "k"), (&b, "k")], nothing);
    stabilize(&mut c, &mut other);
    c.now += timeout + 1;
    c.commit(&mut other, &[(&a, "y"), (&b, "y")], nothing);
    assert!(c.replicas[0].counters().versions_collected >= 1, "c collected");
    // Partition 0 restarts from a checkpoint.
    let checkpoint = c.replicas[0].checkpoint();
    let mut r = PrompTcc::recover(ReplicaId::new(0, 0), c.topology.clone(), &PtccConfig::default(), checkpoint);
    let mut out = Out::default();
    r.start(c.now, &mut out);
    c.replicas[0] = r;
    c.take(0, out);
    c.run(&mut writer, is_stabilization);
    // A fresh session's first round at partition 0: nothing visible is as
    // new as what was collected.
    let mut fresh = c.session(3);
    let mut out = Default::default();
    fresh.read_only(c.now, std::slice::from_ref(&a), &mut out).unwrap();
    c.send_from(&fresh, out);
    let events = c.run(&mut fresh, is_stabilization);
    assert!(
        matches!(events[..], [SessionEvent::Aborted(crate::contract::AbortReason::Expired(_))]),
        "not a stale value: {events:?}"
    );
    // Once S_i has caught up, the newest is read.
    stabilize(&mut c, &mut fresh);
    let mut out = Out::default();
    c.replicas[0].on_timer(c.now, PtccTimer::Stabilize, &mut out);
    c.take(0, out);
    c.run(&mut fresh, nothing);
    assert_eq!(c.read_only(&mut fresh, std::slice::from_ref(&a), nothing), vec![(a, value("y"))]);
}

/// What the read path's shortcuts rest on: a committed version's stamp is
/// at or above every entry of its commit vector, whatever the writer's
/// dependencies say — here an entry far ahead of every clock, at a
/// partition the transaction did not write.
#[test]
fn no_entry_of_a_commit_vector_is_above_its_stamp() {
    use super::vclock::VClock;
    use crate::hlc::Timestamp;
    use crate::write_only::WtxId;
    let mut c = Cluster::new(3);
    let (a, b) = (c.key(0), c.key(1));
    let client = ClientId { dc: DcId(0), index: 9 };
    let ahead = Timestamp::from_physical(c.now + 30_000_000);
    let mut deps = VClock::zeros(3);
    deps.raise_entry(PartitionId(2), ahead);
    let tx = WtxId { client, epoch: 1, n: 1 };
    let participants = vec![PartitionId(0), PartitionId(1)];
    for (p, key) in [(0, &a), (1, &b)] {
        let msg = PtccMsg::Write {
            tx,
            writes: vec![(key.clone(), value("v"))],
            participants: participants.clone(),
            coordinator: PartitionId(0),
            deps: deps.to_wire(false),
        };
        c.queue.push_back((Addr::Client(client), Addr::Replica(ReplicaId::new(0, p)), msg));
    }
    let mut bystander = c.session(1);
    c.run(&mut bystander, nothing);
    let mut versions = 0;
    for p in 0..2 {
        for record in c.replicas[p].checkpoint() {
            if let PtccRecord::Version { stamp, ts, .. } = record {
                versions += 1;
                assert!(stamp.ts > ahead, "numbered above the writer's dependencies");
                assert_eq!(ts.max_entry(), stamp.ts, "{ts:?} against {stamp:?}");
            }
        }
    }
    assert_eq!(versions, 2, "the transaction committed at both partitions");
}

/// §V's local-max-read-ts: a partition answers a read of several keys with
/// one timestamp, the join of the versions' (above the reader's floor),
/// not one per version — what a first round joins into `D_c` and a round
/// at the snapshot tests against it is the same either way.
#[test]
fn a_read_of_several_keys_carries_the_join_of_their_commit_timestamps() {
    use super::VClock;
    use crate::hlc::Timestamp;
    let mut c = Cluster::new(3);
    let [a, a2]: [Key; 2] = c.keys(0, 2).try_into().unwrap();
    let (b, d) = (c.key(1), c.key(2));
    let mut writer = c.session(1);
    c.commit(&mut writer, &[(&a, "a1"), (&b, "b1")], nothing);
    let mut other = c.session(2);
    c.commit(&mut other, &[(&a2, "x1"), (&d, "d1")], nothing);
    // A reader whose D_c says partitions 1 and 2 committed everything (so
    // both versions are visible at partition 0), with floor 0.
    let high = Timestamp::from_physical(c.now + 1_000_000);
    let mut deps = VClock::zeros(3);
    deps.raise_entry(PartitionId(1), high);
    deps.raise_entry(PartitionId(2), high);
    let mut read = |keys: Vec<Key>| {
        let msg = PtccMsg::Read {
            tag: crate::contract::ReadTag { tx: 1, round: 0 },
            keys,
            deps: deps.to_wire(false),
            at_snapshot: false,
        };
        let mut out = Out::default();
        c.now += 10;
        c.replicas[0].on_message(c.now, Addr::Client(ClientId { dc: DcId(0), index: 9 }), msg, &mut out);
        match out.messages.into_iter().next() {
            Some((_, PtccMsg::ReadResp { values, read_ts, .. })) => {
                assert!(values.iter().all(|(_, v)| v.is_some()), "both versions visible: {values:?}");
                use super::messages::ReadTs;
                match read_ts {
                    ReadTs::Joined(w) => vec![w.decode(3).unwrap()],
                    ReadTs::AtFloor => Vec::new(),
                    ReadTs::Each(_) => panic!("PrompTCC answers the join"),
                }
            }
            other => panic!("{other:?}"),
        }
    };
    let (ts_a, ts_a2) = (read(vec![a.clone()]), read(vec![a2.clone()]));
    assert_eq!((ts_a.len(), ts_a2.len()), (1, 1), "one timestamp per read");
    assert_ne!(ts_a, ts_a2, "two transactions, two timestamps");
    let mut join = ts_a[0].clone();
    join.join(&ts_a2[0]);
    assert_eq!(read(vec![a, a2]), vec![join], "one timestamp for both: their join");
}
