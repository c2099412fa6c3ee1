//! The client's side of one write-only transaction: its parts by
//! partition, the coordinator it picks, and the participants' answers
//! gathered — the client waits for every participant's commit, not only the
//! coordinator's, so that its next read finds its write wherever it reads:
//! each participant's answer, or, where the coordinator gathers them
//! ([`Rules::gathered`](super::Rules::gathered)), the coordinator's once
//! every participant has told it.

use super::{Decided, Refused, WtxId};
use crate::contract::{AbortReason, Key, SessionError, Value};
use crate::hlc::PhysicalMicros;
use crate::ids::{ClientId, PartitionId};
use crate::session_core::{Awaiting, Reply};
use crate::topology::Topology;
use std::collections::BTreeMap;

/// One commit under way.
#[derive(Debug)]
pub struct Commit {
    pub tx: WtxId,
    /// When the client stops waiting for it ([`CommitTimer`]), on its clock.
    due: PhysicalMicros,
    participants: Vec<PartitionId>,
    /// The participants yet to answer (a handful: a list).
    waiting: Vec<PartitionId>,
    decided: Option<Decided>,
}

/// The part of a transaction one partition gets.
pub struct Part {
    pub partition: PartitionId,
    pub writes: Vec<(Key, Option<Value>)>,
    pub participants: Vec<PartitionId>,
    pub coordinator: PartitionId,
}

impl Commit {
    /// Splits `writes` by partition and picks a coordinator among them,
    /// spread by client and transaction; the client waits until `due`.
    /// `gathered`: the coordinator answers for every participant once all
    /// have committed ([`Rules::gathered`](super::Rules::gathered)); else
    /// each answers.
    pub fn start(
        topology: &Topology,
        client: ClientId,
        tx: WtxId,
        writes: &[(Key, Option<Value>)],
        due: PhysicalMicros,
        gathered: bool,
    ) -> (Self, Vec<Part>) {
        let by_partition: BTreeMap<PartitionId, Vec<(Key, Option<Value>)>> =
            topology.group_by_partition(writes.to_vec(), |(k, _)| k);
        let participants: Vec<PartitionId> = by_partition.keys().copied().collect();
        let coordinator = participants[((client.index as u64 + tx.n) % participants.len() as u64) as usize];
        let parts = by_partition
            .into_iter()
            .map(|(partition, writes)| Part { partition, writes, participants: participants.clone(), coordinator })
            .collect();
        let waiting = if gathered { vec![coordinator] } else { participants.clone() };
        (Commit { tx, due, participants, waiting, decided: None }, parts)
    }

    /// A participant says `tx` committed there — or, where the coordinator
    /// gathers the commits, the coordinator says every participant did:
    /// `Err` if the answer is not one this commit can get (another
    /// transaction, a decision that does not name every partition written
    /// in order, one it does not wait for, or twice), `Ok(None)` while
    /// others are still to answer, and the decision once every one has.
    pub fn on_committed(&mut self, from: PartitionId, tx: WtxId, decided: Decided) -> Result<Option<Decided>, Refused> {
        let fits = tx == self.tx
            && decided.len() == self.participants.len()
            && decided.iter().zip(&self.participants).all(|((p, _), q)| p == q);
        let Some(at) = self.waiting.iter().position(|&p| p == from).filter(|_| fits) else {
            return Err(Refused);
        };
        self.waiting.swap_remove(at);
        self.decided.get_or_insert(decided);
        if !self.waiting.is_empty() {
            return Ok(None);
        }
        Ok(self.decided.take())
    }
}

/// A participant says `tx` was given up: the session's answer, if it is the
/// commit under way (which ends).
pub fn on_aborted(committing: &mut Option<Commit>, tx: WtxId) -> Option<Reply> {
    committing.as_ref().filter(|c| c.tx == tx)?;
    *committing = None;
    Some(Reply::Aborted(AbortReason::Unavailable("a partition the transaction wrote did not answer in time".into())))
}

/// A session's commit timeouts, on one timer. A session commits one
/// transaction at a time, hundreds a second, each answered long before its
/// timeout: a timer per commit would keep hundreds armed in the session's
/// timer queue, each going off for nothing (docs/BENCHMARKS.md, stop 42).
/// The one armed goes off at the deadline of the commit that armed it; if a
/// later commit is under way then, it is armed again for what that one has
/// left.
///
/// A timer carries the deadline it was armed for, and going off it is
/// judged by that, not by the clock read then: the host runs a timer for
/// its duration on a monotonic clock, while the session's clock is the wall
/// clock, which may be stepped meanwhile — a step forward must not end a
/// commit before its time (one back, or forward between two commits, can
/// only make a timeout late).
#[derive(Debug, Default)]
pub struct CommitTimer {
    /// When the armed timer goes off, if one is.
    armed_until: Option<PhysicalMicros>,
}

impl CommitTimer {
    /// `commit` begins: the timer to arm — after how long, and the
    /// deadline it goes off at — unless one armed already goes off before
    /// the commit's deadline.
    pub fn start(&mut self, now: PhysicalMicros, commit: &Commit) -> Option<(u64, PhysicalMicros)> {
        if self.armed_until.is_some_and(|at| at <= commit.due) {
            return None;
        }
        self.armed_until = Some(commit.due);
        Some((commit.due.saturating_sub(now), commit.due))
    }

    /// The timer armed for deadline `at` went off: the session's answer if
    /// the commit under way (if any) is due by then and the session still
    /// waits for it (its outcome is unknown: part of it may commit yet).
    /// Arms the timer again (`arm`: after how long, for what deadline) for
    /// a commit with time left.
    pub fn fired(
        &mut self,
        at: PhysicalMicros,
        committing: &mut Option<Commit>,
        awaiting: Option<Awaiting>,
        mut arm: impl FnMut(u64, PhysicalMicros),
    ) -> Option<Reply> {
        if self.armed_until == Some(at) {
            self.armed_until = None;
        }
        let due = committing.as_ref().map(|c| c.due).filter(|_| awaiting == Some(Awaiting::Commit))?;
        if at < due {
            if self.armed_until.is_none_or(|armed| armed > due) {
                self.armed_until = Some(due);
                arm(due - at, due);
            }
            return None;
        }
        *committing = None;
        Some(Reply::Failed(SessionError::OutcomeUnknown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::DcId;

    /// Commit `n`, begun at `now` with a timeout of 500 µs.
    fn commit(n: u64, now: PhysicalMicros) -> Commit {
        let topology = Topology::full(1, 2).unwrap();
        let client = ClientId { dc: DcId(0), index: 1 };
        let tx = WtxId { client, epoch: 1, n };
        Commit::start(&topology, client, tx, &[(Key::from("k"), None)], now + 500, true).0
    }

    /// One timer serves a run of commits: the second arms none, the one
    /// armed goes off at the first's deadline and is armed again for what
    /// the second has left, and the second times out at its own deadline.
    #[test]
    fn one_timer_times_out_each_commit_at_its_own_deadline() {
        let mut timer = CommitTimer::default();
        assert_eq!(timer.start(1_000, &commit(1, 1_000)), Some((500, 1_500)));
        // Commit 1 is answered; commit 2 begins before its deadline.
        let mut committing = Some(commit(2, 1_200));
        assert_eq!(timer.start(1_200, committing.as_ref().unwrap()), None, "the armed timer goes off first");
        let mut armed = Vec::new();
        let wait = Some(Awaiting::Commit);
        assert_eq!(timer.fired(1_500, &mut committing, wait, |after, at| armed.push((after, at))), None);
        assert_eq!(armed, [(200, 1_700)], "armed again for what commit 2 has left");
        assert!(committing.is_some(), "commit 2 still under way");
        let answer = timer.fired(1_700, &mut committing, wait, |after, at| armed.push((after, at)));
        assert_eq!(answer, Some(Reply::Failed(SessionError::OutcomeUnknown)));
        assert!(committing.is_none(), "the commit ends");
        assert_eq!(armed, [(200, 1_700)], "nothing to arm for");
        // The next commit arms the timer again.
        assert_eq!(timer.start(2_000, &commit(3, 2_000)), Some((500, 2_500)));
    }

    /// A timer that goes off with no commit under way, or one the session
    /// no longer waits for, answers nothing and arms nothing.
    #[test]
    fn a_timer_with_no_commit_waiting_does_nothing() {
        let mut timer = CommitTimer::default();
        assert_eq!(timer.start(0, &commit(1, 0)), Some((500, 500)));
        let mut armed = 0;
        assert_eq!(timer.fired(500, &mut None, None, |_, _| armed += 1), None);
        let mut reading = Some(commit(1, 0));
        assert_eq!(timer.fired(500, &mut reading, Some(Awaiting::Read), |_, _| armed += 1), None);
        assert!(reading.is_some());
        assert_eq!(armed, 0);
        // Gone off: the next commit arms it.
        assert_eq!(timer.start(600, &commit(2, 600)), Some((500, 1_100)));
    }

    /// The session's clock stepped forward while a timer ran: a commit is
    /// judged by the deadline the timer was armed for, so it does not end
    /// before its time; and a stale timer does not forget the one armed.
    #[test]
    fn a_clock_stepped_forward_does_not_end_a_commit_early() {
        let mut timer = CommitTimer::default();
        assert_eq!(timer.start(1_000, &commit(1, 1_000)), Some((500, 1_500)));
        let mut committing = Some(commit(2, 1_010));
        assert_eq!(timer.start(1_010, committing.as_ref().unwrap()), None);
        let mut armed = Vec::new();
        let wait = Some(Awaiting::Commit);
        // Goes off after its 500 µs, the wall clock 50 µs ahead by then: the
        // timer's own deadline decides, and commit 2 has 10 µs left.
        assert_eq!(timer.fired(1_500, &mut committing, wait, |after, at| armed.push((after, at))), None);
        assert_eq!(armed, [(10, 1_510)]);
        assert!(committing.is_some(), "not ended 10 µs early");
        // A stale timer (an earlier deadline) neither ends it nor arms
        // another: the one for 1,510 is still armed.
        assert_eq!(timer.fired(1_400, &mut committing, wait, |after, at| armed.push((after, at))), None);
        assert_eq!(armed, [(10, 1_510)]);
        assert!(timer.fired(1_510, &mut committing, wait, |_, _| ()).is_some(), "ended at its deadline");
    }
}
