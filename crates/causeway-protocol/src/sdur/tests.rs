//! Scenario tests of Geo-SDUR's certifier (the steps of the algorithm in
//! [`super`], one by one), of its determinism (members fed one log, votes
//! at different times, agree on everything), and of its state surviving a
//! checkpoint.

use super::certifier::{Certifier, CertifierConfig, Event, Outcome};
use super::entry::{LogEntry, Part, ReadSet, SdurTxId, Snap};
use super::slot::Vote;
use super::{Certification, SdurFault};
use crate::contract::Key;
use crate::hlc::Timestamp;
use crate::ids::{ClientId, DcId, PartitionId, ReplicaId};
use crate::write_only::WtxId;
use bytes::Bytes;

const P0: PartitionId = PartitionId(0);
const P1: PartitionId = PartitionId(1);

fn cfg(reorder: u64) -> CertifierConfig {
    CertifierConfig {
        certification: Certification::Exact,
        reorder_threshold: reorder,
        retention: 10_000,
        commit_timeout_us: 10_000_000,
        clock_allowance_us: 500_000,
        fault: SdurFault::None,
    }
}

fn key(k: &str) -> Key {
    Bytes::copy_from_slice(k.as_bytes())
}

fn tx(n: u64) -> SdurTxId {
    WtxId { client: ClientId { dc: DcId(0), index: 0 }, epoch: 1, n }
}

/// A part of transaction `n` at `me`, over `parts`, read at `snap`.
fn part(n: u64, me: PartitionId, parts: &[PartitionId], snap: Snap, reads: &[&str], writes: &[&str]) -> LogEntry {
    LogEntry::Part(Box::new(Part {
        tx: tx(n),
        origin: DcId(0),
        parts: parts.to_vec(),
        snap,
        reads: ReadSet::Keys(reads.iter().map(|k| key(k)).collect()),
        writes: writes.iter().map(|k| (key(k), Some(Bytes::from(format!("{n}:{k}"))))).collect(),
        deps: Timestamp::ZERO,
        reply_to: ReplicaId::at(DcId(0), me),
        deadline: u64::MAX / 2,
    }))
}

/// A certifier with the log it was given, its time, and what it said.
struct Log {
    cert: Certifier,
    time: u64,
    events: Vec<Event>,
}

impl Log {
    fn new(me: PartitionId, reorder: u64) -> Log {
        Log { cert: Certifier::new(me, cfg(reorder)), time: 1_000, events: Vec::new() }
    }

    /// Delivers `entry` at the next position; returns it.
    fn deliver(&mut self, entry: LogEntry) -> u64 {
        let pos = self.cert.processed() + 1;
        self.time += 10;
        self.cert.deliver(pos, Timestamp(self.time), Some(&entry), &mut self.events);
        pos
    }

    fn vote(&mut self, n: u64, from: PartitionId, vote: Vote) {
        self.cert.on_vote(tx(n), from, vote, &mut self.events);
    }

    /// The vote it sent on transaction `n`.
    fn voted(&self, n: u64) -> Option<Vote> {
        self.events.iter().find_map(|e| match e {
            Event::Voted { tx: t, vote, .. } if *t == tx(n) => Some(*vote),
            _ => None,
        })
    }

    /// How transaction `n` ended here, if it did.
    fn done(&self, n: u64) -> Option<&Outcome> {
        self.events.iter().find_map(|e| match e {
            Event::Done { outcome, .. } if outcome.tx == tx(n) => Some(outcome),
            _ => None,
        })
    }

    fn committed(&self, n: u64) -> bool {
        self.done(n).is_some_and(|o| o.stamp.is_some())
    }

    fn aborted(&self, n: u64) -> bool {
        self.done(n).is_some_and(|o| o.stamp.is_none())
    }

    fn value(&self, k: &str) -> Option<String> {
        let snap = self.cert.snapshot();
        self.cert
            .read(k.as_bytes(), &snap)
            .ok()
            .flatten()
            .and_then(|(v, _)| v)
            .map(|v| String::from_utf8_lossy(&v).into_owned())
    }
}

#[test]
fn a_local_commits_and_a_concurrent_one_that_read_what_it_wrote_aborts() {
    let mut log = Log::new(P0, 0);
    log.deliver(part(1, P0, &[P0], Snap::at(0), &["x"], &["x"]));
    // Read x before 1 committed (at position 0), then wrote it: a lost update.
    log.deliver(part(2, P0, &[P0], Snap::at(0), &["x"], &["x"]));
    // Read after it: fine.
    log.deliver(part(3, P0, &[P0], Snap::at(1), &["x"], &["x"]));
    assert!(log.committed(1));
    assert!(log.aborted(2), "DUR's test: it read x, which a concurrent transaction wrote");
    assert!(log.committed(3));
    assert_eq!(log.value("x").as_deref(), Some("3:x"));
    // Blind writes never fail the test.
    log.deliver(part(4, P0, &[P0], Snap::at(0), &[], &["x"]));
    assert!(log.committed(4));
}

#[test]
fn read_only_locals_are_certified() {
    let mut log = Log::new(P0, 0);
    log.deliver(part(1, P0, &[P0], Snap::at(0), &[], &["x"]));
    log.deliver(part(2, P0, &[P0], Snap::at(0), &["x"], &[]));
    log.deliver(part(3, P0, &[P0], Snap::at(1), &["x"], &[]));
    assert!(log.aborted(2), "it read x before a concurrent write of it");
    assert!(log.committed(3));
    assert_eq!(log.cert.store().version_count(), 1, "read-only transactions write nothing");
}

#[test]
fn a_global_is_pending_until_every_partition_votes_and_takes_the_largest_timestamp() {
    let mut log = Log::new(P0, 0);
    let pos = log.deliver(part(1, P0, &[P0, P1], Snap::at(0), &["x"], &["x"]));
    let mine = log.voted(1).expect("a vote at delivery");
    assert!(mine.commit);
    assert_eq!(mine.pos, pos);
    assert!(log.done(1).is_none(), "pending: P1 has not voted");
    assert_eq!(log.cert.snapshot().holes, Vec::<u64>::new());
    let theirs = Vote { commit: true, ts: Timestamp(mine.ts.0 + 500), pos: 7 };
    log.vote(1, P1, theirs);
    let outcome = log.done(1).expect("resolved");
    let stamp = outcome.stamp.expect("committed");
    assert_eq!(stamp.ts, theirs.ts, "the largest vote");
    assert_eq!(outcome.positions, vec![(P0, pos), (P1, 7)]);
    assert_eq!(log.value("x").as_deref(), Some("1:x"));
}

#[test]
fn one_abort_vote_aborts_a_global() {
    let mut log = Log::new(P0, 0);
    log.deliver(part(1, P0, &[P0, P1], Snap::at(0), &["x"], &["x"]));
    log.vote(1, P1, Vote { commit: false, ts: Timestamp(5), pos: 3 });
    assert!(log.aborted(1));
    assert!(log.value("x").is_none());
    assert!(log.done(1).and_then(|o| o.why.clone()).is_some_and(|w| w.contains("p1")), "{:?}", log.done(1));
}

#[test]
fn a_vote_that_comes_before_the_part_is_kept() {
    let mut log = Log::new(P0, 0);
    log.vote(1, P1, Vote { commit: true, ts: Timestamp(5), pos: 3 });
    log.deliver(part(1, P0, &[P0, P1], Snap::at(0), &[], &["x"]));
    assert!(log.committed(1));
}

/// The convoy of SDUR's baseline: a local delivered after a pending global
/// is decided at once if it does not intersect it, but becomes visible (and
/// its session hears) only after the global; one that intersects it waits
/// for the global's outcome and is certified against it.
#[test]
fn locals_wait_behind_a_pending_global_in_the_baseline() {
    let mut log = Log::new(P0, 0);
    log.deliver(part(1, P0, &[P0, P1], Snap::at(0), &["g"], &["g"]));
    log.deliver(part(2, P0, &[P0], Snap::at(0), &["a"], &["a"]));
    log.deliver(part(3, P0, &[P0], Snap::at(0), &["g"], &["g"]));
    assert!(log.done(2).is_none(), "not visible before the global");
    assert!(log.done(3).is_none(), "waits for the global it intersects");
    assert_eq!(log.cert.snapshot().upto, 0);
    log.vote(1, P1, Vote { commit: true, ts: Timestamp(10), pos: 1 });
    assert!(log.committed(1));
    assert!(log.committed(2));
    assert!(log.aborted(3), "it read g, which the global it waited for wrote");
    assert_eq!(log.cert.prefix(), 3);
    assert_eq!(log.cert.snapshot().upto, 2, "the highest position applied (3 aborted)");
}

#[test]
fn a_local_waiting_for_a_global_that_aborts_commits() {
    let mut log = Log::new(P0, 0);
    log.deliver(part(1, P0, &[P0, P1], Snap::at(0), &["g"], &["g"]));
    log.deliver(part(2, P0, &[P0], Snap::at(0), &["g"], &["g"]));
    log.vote(1, P1, Vote { commit: false, ts: Timestamp(10), pos: 1 });
    assert!(log.aborted(1));
    assert!(log.committed(2));
    assert_eq!(log.value("g").as_deref(), Some("2:g"));
}

/// Reordering: with a threshold, a local that does not intersect a pending
/// global is applied (and answered) before it, within the threshold.
#[test]
fn reordering_applies_locals_ahead_of_a_pending_global_within_the_threshold() {
    let mut log = Log::new(P0, 2);
    log.deliver(part(1, P0, &[P0, P1], Snap::at(0), &["g"], &["g"]));
    log.deliver(part(2, P0, &[P0], Snap::at(0), &["a"], &["a"]));
    log.deliver(part(3, P0, &[P0], Snap::at(0), &["b"], &["b"]));
    log.deliver(part(4, P0, &[P0], Snap::at(0), &["c"], &["c"]));
    assert!(log.committed(2) && log.committed(3), "reordered ahead of the global");
    assert!(log.done(4).is_none(), "three positions after it: past the threshold of 2");
    let snap = log.cert.snapshot();
    assert_eq!((snap.upto, snap.holes.clone()), (3, vec![1]), "the global is a hole of the snapshot");
    assert_eq!(log.cert.counters().reordered, 2);
    log.vote(1, P1, Vote { commit: true, ts: Timestamp(10), pos: 1 });
    assert!(log.committed(1) && log.committed(4));
    // A snapshot taken while it was pending still does not see it.
    assert!(log.cert.read(b"g", &snap).unwrap().is_none());
    assert!(log.cert.read(b"a", &snap).unwrap().is_some());
}

/// Write skew across two partitions, the two globals delivered in opposite
/// orders: each partition votes on the later one against the earlier one,
/// pending, and aborts it — at least one of them aborts.
#[test]
fn globals_crossing_in_two_logs_cannot_both_commit_a_write_skew() {
    // T1 reads a (P0), writes b (P1); T2 reads b (P1), writes a (P0).
    let t1_p0 = part(1, P0, &[P0, P1], Snap::at(0), &["a"], &[]);
    let t1_p1 = part(1, P1, &[P0, P1], Snap::at(0), &[], &["b"]);
    let t2_p0 = part(2, P0, &[P0, P1], Snap::at(0), &[], &["a"]);
    let t2_p1 = part(2, P1, &[P0, P1], Snap::at(0), &["b"], &[]);
    let (mut p0, mut p1) = (Log::new(P0, 0), Log::new(P1, 0));
    p0.deliver(t1_p0);
    p0.deliver(t2_p0);
    p1.deliver(t2_p1);
    p1.deliver(t1_p1);
    for n in [1, 2] {
        let (v0, v1) = (p0.voted(n).unwrap(), p1.voted(n).unwrap());
        p0.vote(n, P1, v1);
        p1.vote(n, P0, v0);
    }
    let committed = [1, 2].iter().filter(|&&n| p0.committed(n)).count();
    assert!(committed <= 1, "both committed: a write skew");
    for n in [1, 2] {
        assert!(p0.done(n).is_some() && p1.done(n).is_some(), "{n} ended at both partitions");
        assert_eq!(p0.committed(n), p1.committed(n), "both partitions agree on {n}");
    }
    // Planted fault: ignoring concurrent globals lets both commit.
    let mut bad = cfg(0);
    bad.fault = SdurFault::IgnoreConcurrentGlobals;
    let (mut q0, mut q1) = (Log::new(P0, 0), Log::new(P1, 0));
    q0.cert = Certifier::new(P0, bad.clone());
    q1.cert = Certifier::new(P1, bad);
    q0.deliver(part(1, P0, &[P0, P1], Snap::at(0), &["a"], &[]));
    q0.deliver(part(2, P0, &[P0, P1], Snap::at(0), &[], &["a"]));
    q1.deliver(part(2, P1, &[P0, P1], Snap::at(0), &["b"], &[]));
    q1.deliver(part(1, P1, &[P0, P1], Snap::at(0), &[], &["b"]));
    for n in [1, 2] {
        let (v0, v1) = (q0.voted(n).unwrap(), q1.voted(n).unwrap());
        q0.vote(n, P1, v1);
        q1.vote(n, P0, v0);
    }
    assert!(q0.committed(1) && q0.committed(2), "the planted fault commits both");
}

#[test]
fn a_fence_aborts_a_transaction_whose_part_never_came_and_its_part_is_skipped() {
    let mut log = Log::new(P1, 0);
    log.deliver(LogEntry::Fence(tx(1), vec![P0, P1]));
    let vote = log.voted(1).expect("a fence is an abort vote");
    assert!(!vote.commit);
    assert_eq!(log.cert.vote_of(&tx(1)).map(|v| v.commit), Some(false));
    assert!(log.cert.fenced(&tx(1)));
    log.deliver(part(1, P1, &[P0, P1], Snap::at(0), &[], &["x"]));
    assert!(log.value("x").is_none(), "the late part is skipped");
    // A part delivered twice is skipped the second time.
    log.deliver(part(2, P1, &[P1], Snap::at(0), &[], &["y"]));
    log.deliver(part(2, P1, &[P1], Snap::at(0), &[], &["z"]));
    assert!(log.value("y").is_some(), "the first delivery of 2 applied");
    assert!(log.value("z").is_none());
}

#[test]
fn a_snapshot_older_than_what_is_kept_aborts_at_certification_and_at_read() {
    let mut small = cfg(0);
    small.retention = 4;
    let mut log = Log::new(P0, 0);
    log.cert = Certifier::new(P0, small);
    for n in 1..=8 {
        log.deliver(part(n, P0, &[P0], Snap::at(n - 1), &["x"], &["x"]));
    }
    log.deliver(part(9, P0, &[P0], Snap::at(2), &["y"], &["y"]));
    assert!(log.aborted(9));
    assert!(log.done(9).unwrap().why.as_deref().unwrap().contains("positions old"));
    assert!(log.cert.read(b"x", &Snap::at(1)).is_err(), "collected");
    assert!(log.cert.read(b"x", &Snap::at(7)).is_ok());
}

/// Invariant D: members that get the same log, and the other partitions'
/// votes at different moments, vote and end alike, with the same stamps.
#[test]
fn members_agree_whatever_the_timing_of_votes() {
    let (mut committed, mut aborted) = (0, 0);
    for seed in 0..200u64 {
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let keys = ["a", "b", "c", "d"];
        let mut entries = Vec::new();
        let mut remote = Vec::new();
        for n in 1..=40u64 {
            let global = next(3) == 0;
            let parts: Vec<PartitionId> = if global { vec![P0, P1] } else { vec![P0] };
            let pos = entries.len() as u64 + 1;
            let snap_upto = pos.saturating_sub(1 + next(5));
            let reads: Vec<&str> = (0..next(3)).map(|_| keys[next(4) as usize]).collect();
            let writes: Vec<&str> = (0..next(3)).map(|_| keys[next(4) as usize]).collect();
            let mut writes = writes;
            writes.sort();
            writes.dedup();
            entries.push(part(n, P0, &parts, Snap::at(snap_upto), &reads, &writes));
            if global {
                remote.push((n, Vote { commit: next(4) != 0, ts: Timestamp(1_000 + next(800)), pos: n }));
            }
        }
        let mut members: Vec<Log> = (0..3).map(|r| Log::new(P0, r)).collect();
        for (m, member) in members.iter_mut().enumerate() {
            // Member m hears each remote vote after a different number of
            // deliveries.
            let mut later: Vec<(usize, u64, Vote)> =
                remote.iter().map(|&(n, v)| ((n as usize) + (next(10) as usize) * m, n, v)).collect();
            later.sort_by_key(|(at, n, _)| (*at, *n));
            let mut votes = later.into_iter().peekable();
            for (i, entry) in entries.iter().enumerate() {
                member.deliver(entry.clone());
                while votes.peek().is_some_and(|(at, _, _)| *at <= i + 1) {
                    let (_, n, v) = votes.next().unwrap();
                    member.vote(n, P1, v);
                }
            }
            for (_, n, v) in votes {
                member.vote(n, P1, v);
            }
        }
        for n in 1..=40u64 {
            let outcomes: Vec<Option<&Outcome>> = members.iter().map(|m| m.done(n)).collect();
            // Every remote vote arrived: every transaction ended, at every member.
            assert!(outcomes.iter().all(Option::is_some), "seed {seed}, txn {n} never ended: {outcomes:?}");
            let stamps: Vec<_> = outcomes.iter().map(|o| o.map(|o| o.stamp)).collect();
            assert!(stamps.windows(2).all(|w| w[0] == w[1]), "seed {seed}, txn {n}: {stamps:?}");
            if stamps[0].is_some_and(|s| s.is_some()) {
                committed += 1;
            } else {
                aborted += 1;
            }
            let votes: Vec<_> = members.iter().map(|m| m.voted(n)).collect();
            assert!(votes.windows(2).all(|w| w[0] == w[1]), "seed {seed}, txn {n}: {votes:?}");
        }
        let latest: Vec<_> = members.iter().map(|m| m.cert.store().latest()).collect();
        assert!(latest.windows(2).all(|w| w[0] == w[1]), "seed {seed}: states differ");
    }
    assert!(committed > 0 && aborted > 0, "{committed} committed, {aborted} aborted: agreement on both outcomes");
}

#[test]
fn the_certifier_survives_its_image() {
    let mut log = Log::new(P0, 0);
    log.deliver(part(1, P0, &[P0], Snap::at(0), &[], &["x"]));
    log.deliver(part(2, P0, &[P0, P1], Snap::at(1), &["x"], &["y"]));
    log.deliver(part(3, P0, &[P0], Snap::at(1), &["x"], &["z"]));
    let mut copy = Certifier::new(P0, cfg(0));
    for record in log.cert.image() {
        copy.restore(record);
    }
    assert_eq!(copy.processed(), 3);
    assert_eq!(copy.snapshot(), log.cert.snapshot());
    let mut events = Vec::new();
    let vote = Vote { commit: true, ts: Timestamp(99_999), pos: 5 };
    copy.on_vote(tx(2), P1, vote, &mut events);
    log.vote(2, P1, vote);
    let done = |events: &[Event], n| {
        events
            .iter()
            .any(|e| matches!(e, Event::Done { outcome, .. } if outcome.tx == tx(n) && outcome.stamp.is_some()))
    };
    assert!(done(&events, 2) && done(&events, 3), "{events:?}");
    assert!(log.committed(2) && log.committed(3));
    assert_eq!(copy.store().latest(), log.cert.store().latest());
}
