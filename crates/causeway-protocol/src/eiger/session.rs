//! Eiger's client library, where sessions run: read-only transactions in
//! up to three rounds (Eiger §4.2) straight to the partitions, write-only
//! transactions through [`crate::write_only`], a Lamport clock, and the
//! nearest dependencies sent with every write.
//!
//! A transaction of the shared session is a read-only transaction followed
//! by a write-only one: its first read call fixes its effective time, its
//! later read calls read at that time (from the second round on).

use super::messages::{AtTime, EigerDeps, EigerMsg, OpenWrite, Valid};
use super::{EigerConfig, MAX_DEPS};
use crate::contract::{AbortReason, CommitStamp, Effects, Key, ReadTag, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, ClientId, PartitionId, ReplicaId};
use crate::session_core::{Awaiting, ClientRole, ReadDeadline, Reply, SessionCore};
use crate::topology::Topology;
use crate::write_only::{self, commit_ts, stamp_of, Commit, CommitTimer, Decided, WtxId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// An Eiger session.
pub type EigerSession = SessionCore<EigerClient>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EigerClientTimer {
    /// The commit under way may have run out of time ([`CommitTimer`]):
    /// the deadline, on the session's clock, the timer was armed for.
    CommitTimeout(PhysicalMicros),
    /// Transaction `n` read past the transaction timeout: it is aborted.
    Expired(u64),
    /// Round `round` of transaction `n`, a third round, has not been
    /// answered in time.
    StatusTimeout(u64, u32),
}

/// A key whose value at the effective time waits on the outcome of
/// transactions still open where it is stored.
#[derive(Debug)]
struct Unsettled {
    key: Key,
    best: Option<(CommitStamp, Option<Value>)>,
    open: Vec<OpenWrite>,
}

#[derive(Debug)]
enum Phase {
    /// A first round: each partition's newest values and their validity.
    First { answers: Vec<Valid> },
    /// A read at the effective time.
    At { unsettled: Vec<Unsettled> },
    /// A third round: how the open transactions ended (committed at or
    /// before the effective time: their stamp).
    /// `asked`: each transaction still to hear of, with its coordinator.
    Outcomes {
        unsettled: Vec<Unsettled>,
        asked: BTreeMap<WtxId, PartitionId>,
        heard: BTreeMap<WtxId, Option<CommitStamp>>,
    },
}

/// A read call under way.
#[derive(Debug)]
struct Reading {
    round: u32,
    /// The keys asked of each partition this round.
    keys: BTreeMap<PartitionId, Vec<Key>>,
    waiting: BTreeSet<PartitionId>,
    phase: Phase,
    /// The values settled so far, with the commit timestamp of each (zero:
    /// no version).
    values: Vec<(Key, Option<Value>, Timestamp)>,
}

/// Eiger's side of a session.
#[derive(Debug)]
pub struct EigerClient {
    id: ClientId,
    topology: Arc<Topology>,
    config: EigerConfig,
    epoch: u64,
    /// Transactions begun; names reads and writes.
    n: u64,
    /// The Lamport clock: the largest timestamp this client has seen.
    clock: Timestamp,
    /// The causal past: a transaction's effective time is at or above
    /// every commit this client wrote or read.
    past: Timestamp,
    /// The nearest dependencies: what it read since its last write, and
    /// that write.
    deps: BTreeMap<Key, Timestamp>,
    /// The running transaction's first read, for the transaction timeout.
    deadline: ReadDeadline,
    /// The running transaction's effective time, once its first read call
    /// is done.
    effective: Option<Timestamp>,
    next_round: u32,
    reading: Option<Reading>,
    committing: Option<Commit>,
    /// The commit timeouts, on one timer.
    commit_timer: CommitTimer,
}

/// What an Eiger session token carries: its clock and causal past.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EigerSessionState {
    pub clock: Timestamp,
    pub past: Timestamp,
}

type Out = Effects<EigerMsg, EigerClientTimer>;

impl EigerClient {
    pub fn new(id: ClientId, topology: Arc<Topology>, config: &EigerConfig) -> Self {
        EigerClient {
            id,
            topology,
            config: config.clone(),
            epoch: 0,
            n: 0,
            clock: Timestamp::ZERO,
            past: Timestamp::ZERO,
            deps: BTreeMap::new(),
            deadline: ReadDeadline::default(),
            effective: None,
            next_round: 0,
            reading: None,
            committing: None,
            commit_timer: CommitTimer::default(),
        }
    }

    fn partition(&self, p: PartitionId) -> Addr {
        Addr::Replica(ReplicaId::at(self.id.dc, p))
    }

    fn tag(&mut self) -> ReadTag {
        let round = self.next_round;
        self.next_round += 1;
        ReadTag { tx: self.n, round }
    }

    /// Sends a read round (at the effective time, or a first round) to the
    /// partitions of `keys`.
    fn send_round(
        &mut self,
        keys: BTreeMap<PartitionId, Vec<Key>>,
        phase: Phase,
        values: Vec<(Key, Option<Value>, Timestamp)>,
        out: &mut Out,
    ) {
        let tag = self.tag();
        let at = match phase {
            Phase::First { .. } => None,
            _ => self.effective,
        };
        for (&p, keys) in &keys {
            out.send(self.partition(p), EigerMsg::Read { tag, keys: keys.clone(), clock: self.clock, at });
        }
        let waiting = keys.keys().copied().collect();
        self.reading = Some(Reading { round: tag.round, keys, waiting, phase, values });
    }

    /// The first round is in: the effective time, and the keys to read
    /// again at it.
    fn first_done(
        &mut self,
        answers: Vec<Valid>,
        mut values: Vec<(Key, Option<Value>, Timestamp)>,
        out: &mut Out,
    ) -> Option<Reply> {
        let max_evt = answers.iter().map(|v| v.evt).fold(self.past, Timestamp::max);
        let min_lvt = answers.iter().map(|v| v.lvt).min().unwrap_or(max_evt);
        // Of one time: the latest it can be (the same values, and a fresher
        // time for the transaction's later reads). Else the largest EVT.
        let effective = if max_evt <= min_lvt { min_lvt } else { max_evt };
        self.effective = Some(effective);
        self.clock = answers.iter().map(|v| v.lvt.max(v.evt)).fold(self.clock.max(effective), Timestamp::max);
        let mut stale = Vec::new();
        for v in answers {
            if v.evt <= effective && effective <= v.lvt {
                values.push((v.key, v.value, v.evt));
            } else {
                stale.push(v.key);
            }
        }
        if stale.is_empty() {
            return Some(self.finish(values));
        }
        let again = self.topology.group_by_partition(stale, |k| k);
        self.send_round(again, Phase::At { unsettled: Vec::new() }, values, out);
        None
    }

    /// A read at the effective time is in: the keys that wait on open
    /// transactions go to their coordinators.
    fn at_done(
        &mut self,
        unsettled: Vec<Unsettled>,
        values: Vec<(Key, Option<Value>, Timestamp)>,
        out: &mut Out,
    ) -> Option<Reply> {
        if unsettled.is_empty() {
            return Some(self.finish(values));
        }
        let mut by_coordinator: BTreeMap<PartitionId, BTreeSet<WtxId>> = BTreeMap::new();
        for w in unsettled.iter().flat_map(|u| &u.open) {
            by_coordinator.entry(w.coordinator).or_default().insert(w.tx);
        }
        let tag = self.tag();
        let mut asked = BTreeMap::new();
        for (p, txs) in by_coordinator {
            asked.extend(txs.iter().map(|&tx| (tx, p)));
            out.send(self.partition(p), EigerMsg::Status { tag, txs: txs.into_iter().collect() });
        }
        out.set_timer(EigerClientTimer::StatusTimeout(self.n, tag.round), self.config.status_timeout_us);
        let phase = Phase::Outcomes { unsettled, asked, heard: BTreeMap::new() };
        self.reading =
            Some(Reading { round: tag.round, keys: BTreeMap::new(), waiting: BTreeSet::new(), phase, values });
        None
    }

    /// The third round is in: each waiting key takes the newest of what its
    /// partition had and what committed at or before the effective time.
    fn outcomes_done(
        &mut self,
        unsettled: Vec<Unsettled>,
        heard: BTreeMap<WtxId, Option<CommitStamp>>,
        mut values: Vec<(Key, Option<Value>, Timestamp)>,
    ) -> Reply {
        for u in unsettled {
            let mut best = u.best;
            for w in u.open {
                if let Some(Some(stamp)) = heard.get(&w.tx) {
                    if best.as_ref().is_none_or(|(s, _)| s < stamp) {
                        best = Some((*stamp, w.value));
                    }
                }
            }
            match best {
                Some((s, v)) => values.push((u.key, v, s.ts)),
                None => values.push((u.key, None, Timestamp::ZERO)),
            }
        }
        self.finish(values)
    }

    /// A read call's values: the causal past and the dependencies take
    /// them in.
    fn finish(&mut self, values: Vec<(Key, Option<Value>, Timestamp)>) -> Reply {
        self.past = self.past.max(self.effective.unwrap_or(Timestamp::ZERO));
        for (key, _, ts) in &values {
            if *ts > Timestamp::ZERO {
                let d = self.deps.entry(key.clone()).or_insert(*ts);
                *d = (*d).max(*ts);
            }
        }
        self.trim_deps();
        Reply::Values(values.into_iter().map(|(k, v, _)| (k, v)).collect())
    }

    /// At most [`MAX_DEPS`] dependencies: the oldest go (one sort, not a
    /// scan per entry dropped).
    fn trim_deps(&mut self) {
        if self.deps.len() <= MAX_DEPS {
            return;
        }
        let excess = self.deps.len() - MAX_DEPS;
        let mut by_age: Vec<(Timestamp, Key)> = self.deps.iter().map(|(k, &t)| (t, k.clone())).collect();
        by_age.sort();
        for (_, key) in by_age.into_iter().take(excess) {
            self.deps.remove(&key);
        }
    }

    /// A partition's answer to a round, for this round and from a
    /// partition still awaited, with a value for exactly the keys asked.
    fn accept<'a>(
        &mut self,
        tag: ReadTag,
        from: PartitionId,
        keys: impl Iterator<Item = &'a Key>,
    ) -> Result<(), Option<Reply>> {
        let reading = self.reading.as_mut().ok_or(None)?;
        if tag != (ReadTag { tx: self.n, round: reading.round }) || !reading.waiting.contains(&from) {
            return Err(None);
        }
        if !keys.eq(reading.keys[&from].iter()) {
            return Err(Some(Reply::Failed(SessionError::InvalidArgument("a malformed read reply".into()))));
        }
        reading.waiting.remove(&from);
        Ok(())
    }
}

impl ClientRole for EigerClient {
    type Message = EigerMsg;
    type Timer = EigerClientTimer;
    type State = EigerSessionState;

    /// Nothing to fetch: the first read fixes the effective time.
    fn start(&mut self, now: PhysicalMicros, _out: &mut Out) -> bool {
        if self.epoch == 0 {
            self.epoch = now.max(1);
        }
        self.n += 1;
        self.effective = None;
        self.deadline.reset();
        self.next_round = 0;
        true
    }

    fn request_read(&mut self, now: PhysicalMicros, _round: u32, keys: Vec<Key>, out: &mut Out) {
        // A transaction older than the timeout is aborted: the partitions
        // may have collected what its effective time needs.
        if self.deadline.passed(now, self.config.txn_timeout_us) {
            out.set_timer(EigerClientTimer::Expired(self.n), 1);
            return;
        }
        let by_partition = self.topology.group_by_partition(keys, |k| k);
        let phase = match self.effective {
            None => Phase::First { answers: Vec::new() },
            Some(_) => Phase::At { unsettled: Vec::new() },
        };
        self.send_round(by_partition, phase, Vec::new(), out);
    }

    fn request_commit(&mut self, now: PhysicalMicros, writes: &[(Key, Option<Value>)], out: &mut Out) {
        let tx = WtxId { client: self.id, epoch: self.epoch, n: self.n };
        let deps = EigerDeps { clock: self.clock, deps: self.deps.iter().map(|(k, &t)| (k.clone(), t)).collect() };
        let due = now.saturating_add(self.config.commit_timeout_us);
        let (commit, parts) = Commit::start(&self.topology, self.id, tx, writes, due, false);
        // A copy for each part but the last, which takes them.
        let deps = std::iter::repeat_n(deps, parts.len());
        for (part, deps) in parts.into_iter().zip(deps) {
            let msg = EigerMsg::Write {
                tx,
                writes: part.writes,
                participants: part.participants,
                coordinator: part.coordinator,
                deps,
            };
            out.send(self.partition(part.partition), msg);
        }
        if let Some((after, at)) = self.commit_timer.start(now, &commit) {
            out.set_timer(EigerClientTimer::CommitTimeout(at), after);
        }
        self.committing = Some(commit);
    }

    fn release(&mut self, _now: PhysicalMicros, _out: &mut Out) {}

    fn on_reply(
        &mut self,
        _now: PhysicalMicros,
        from: Addr,
        msg: EigerMsg,
        awaiting: Awaiting,
        out: &mut Out,
    ) -> Option<Reply> {
        let Addr::Replica(r) = from else { return None };
        if r.dc != self.id.dc {
            return None;
        }
        match (msg, awaiting) {
            (EigerMsg::Valid { tag, values }, Awaiting::Read) => {
                if !matches!(self.reading.as_ref()?.phase, Phase::First { .. }) {
                    return None;
                }
                if let Err(e) = self.accept(tag, r.partition, values.iter().map(|v| &v.key)) {
                    return e;
                }
                let reading = self.reading.as_mut().expect("reading");
                let Phase::First { answers } = &mut reading.phase else { unreachable!() };
                answers.extend(values);
                if !reading.waiting.is_empty() {
                    return None;
                }
                let Reading { phase: Phase::First { answers }, values, .. } = self.reading.take().expect("reading")
                else {
                    unreachable!()
                };
                self.first_done(answers, values, out)
            }
            (EigerMsg::AtTime { tag, values: answers }, Awaiting::Read) => {
                if !matches!(self.reading.as_ref()?.phase, Phase::At { .. }) {
                    return None;
                }
                if let Err(e) = self.accept(tag, r.partition, answers.iter().map(|v| &v.key)) {
                    return e;
                }
                let reading = self.reading.as_mut().expect("reading");
                let Phase::At { unsettled } = &mut reading.phase else { unreachable!() };
                for AtTime { key, value, stamp, open } in answers {
                    match (open.is_empty(), stamp) {
                        (true, Some(s)) => reading.values.push((key, value, s.ts)),
                        (true, None) => reading.values.push((key, None, Timestamp::ZERO)),
                        (false, s) => unsettled.push(Unsettled { key, best: s.map(|s| (s, value)), open }),
                    }
                }
                if !reading.waiting.is_empty() {
                    return None;
                }
                let Reading { phase: Phase::At { unsettled }, values, .. } = self.reading.take().expect("reading")
                else {
                    unreachable!()
                };
                self.at_done(unsettled, values, out)
            }
            (EigerMsg::Outcome { tag, tx, decided }, Awaiting::Read) => {
                let effective = self.effective?;
                let dc = self.id.dc;
                let reading = self.reading.as_mut()?;
                if tag != (ReadTag { tx: self.n, round: reading.round }) {
                    return None;
                }
                let partitions = self.topology.partition_count();
                let Phase::Outcomes { asked, heard, .. } = &mut reading.phase else { return None };
                // From the coordinator asked, and of that transaction.
                if asked.get(&tx) != Some(&r.partition) {
                    return None;
                }
                asked.remove(&tx);
                // A commit names its participants, in order, each once.
                let well_formed = |d: &Decided| {
                    !d.is_empty() && d.windows(2).all(|w| w[0].0 < w[1].0) && d.iter().all(|(p, _)| p.0 < partitions)
                };
                if decided.as_ref().is_some_and(|d| !well_formed(d)) {
                    self.reading = None;
                    return Some(Reply::Failed(SessionError::InvalidArgument("a malformed third-round answer".into())));
                }
                let stamp = decided.filter(|d| commit_ts(d) <= effective).map(|d| stamp_of(dc, &d));
                heard.insert(tx, stamp);
                if !asked.is_empty() {
                    return None;
                }
                let Reading { phase: Phase::Outcomes { unsettled, heard, .. }, values, .. } =
                    self.reading.take().expect("reading")
                else {
                    unreachable!()
                };
                Some(self.outcomes_done(unsettled, heard, values))
            }
            (EigerMsg::TooOld { tag }, Awaiting::Read) => {
                let reading = self.reading.as_ref()?;
                if tag != (ReadTag { tx: self.n, round: reading.round }) || !reading.waiting.contains(&r.partition) {
                    return None;
                }
                self.reading = None;
                Some(Reply::Aborted(AbortReason::Expired("a version at its effective time was collected".into())))
            }
            (EigerMsg::Committed { tx, decided }, Awaiting::Commit) => {
                let decided = self.committing.as_mut()?.on_committed(r.partition, tx, decided).ok()??;
                self.committing = None;
                let stamp = stamp_of(self.id.dc, &decided);
                // Lamport: what it wrote is above all it saw; its nearest
                // dependency is now this write alone.
                self.clock = self.clock.max(stamp.ts);
                self.past = self.past.max(stamp.ts);
                self.deps.clear();
                Some(Reply::Committed(stamp))
            }
            (EigerMsg::Aborted { tx }, Awaiting::Commit) => write_only::client::on_aborted(&mut self.committing, tx),
            _ => None,
        }
    }

    fn on_timer(
        &mut self,
        _now: PhysicalMicros,
        timer: EigerClientTimer,
        awaiting: Option<Awaiting>,
        out: &mut Out,
    ) -> Option<Reply> {
        match timer {
            EigerClientTimer::CommitTimeout(at) => {
                self.commit_timer.fired(at, &mut self.committing, awaiting, |after, at| {
                    out.set_timer(EigerClientTimer::CommitTimeout(at), after)
                })
            }
            EigerClientTimer::Expired(n) => ReadDeadline::expired(awaiting, n == self.n, self.reading.is_some()),
            EigerClientTimer::StatusTimeout(n, round) => {
                let r = self.reading.as_ref()?;
                if awaiting != Some(Awaiting::Read) || n != self.n || r.round != round {
                    return None;
                }
                self.reading = None;
                Some(Reply::Aborted(AbortReason::Unavailable(
                    "the coordinator of a transaction open where it read did not answer in time".into(),
                )))
            }
        }
    }

    /// The write's keys become its nearest dependencies.
    fn committed(&mut self, stamp: &CommitStamp, writes: Vec<(Key, Option<Value>)>) {
        for (key, _) in writes {
            self.deps.insert(key, stamp.ts);
        }
        self.trim_deps();
    }

    fn finished(&mut self) {
        self.reading = None;
        self.committing = None;
        self.effective = None;
    }

    fn export_state(&self) -> EigerSessionState {
        EigerSessionState { clock: self.clock, past: self.past }
    }

    fn import_state(&mut self, state: EigerSessionState) -> Result<(), SessionError> {
        self.clock = self.clock.max(state.clock);
        self.past = self.past.max(state.past);
        Ok(())
    }
}
