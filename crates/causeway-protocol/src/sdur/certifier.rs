//! A partition's certifier: the deterministic state machine every member of
//! the group runs over the log (steps 4 to 7 of the algorithm in
//! [`super`]). It takes the log's entries in order and other partitions'
//! votes, and says which votes to send and which entries are over; it holds
//! the versions that reads see.
//!
//! Hot path: one delivery looks up, for each key its part reads or writes,
//! the recent entries that touch the key (exact certification), or scans
//! the last `history` entries (bloom filters).

use super::durable::{MachineHead, SdurRecord, StoredVersion};
use super::entry::{LogEntry, Part, ReadSet, SdurTxId, Snap};
use super::slot::{CertifierCounters, Known, Slot, State, Vote};
use super::{Certification, SdurFault};
use crate::contract::{CommitStamp, Key, Value};
use crate::hlc::Timestamp;
use crate::ids::{DcId, PartitionId, ReplicaId, TxId};
use crate::mvstore::{MvStore, Version};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The certifier's tunables (from [`super::SdurConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertifierConfig {
    pub certification: Certification,
    pub reorder_threshold: u64,
    pub retention: u64,
    /// How long a session keeps sending a commit's parts, and how far
    /// apart two clocks of the cluster may be: a part delivered later than
    /// its deadline plus that aborts, and what is delivered is remembered
    /// at least that long (so a part sent again is skipped, not certified
    /// twice).
    pub commit_timeout_us: u64,
    pub clock_allowance_us: u64,
    pub fault: SdurFault,
}

/// How a transaction ended, as its session learns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub tx: SdurTxId,
    /// The stamp of a commit; `None`: aborted.
    pub stamp: Option<CommitStamp>,
    /// Its position in the log of each partition it touched (known where it
    /// committed), for the session's floors.
    pub positions: Vec<(PartitionId, u64)>,
    /// Why it aborted.
    pub why: Option<String>,
}

/// What a step of the certifier asks its member to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This partition's vote on a global, for its other partitions.
    Voted { tx: SdurTxId, to: Vec<PartitionId>, vote: Vote },
    /// The entry at `pos` is over here: committed and applied, or aborted.
    Done { pos: u64, reply_to: ReplicaId, outcome: Outcome },
}

/// A read of a snapshot older than what the certifier keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooOld;

/// The certifier of one partition.
#[derive(Debug)]
pub struct Certifier {
    me: PartitionId,
    cfg: CertifierConfig,
    /// The last position delivered.
    processed: u64,
    /// Slots of positions `first..=processed`.
    first: u64,
    slots: VecDeque<Slot>,
    /// Per key, the retained positions whose entries read or write it.
    touch: FxHashMap<Key, VecDeque<u64>>,
    /// The transactions delivered (parts and fences), remembered longer
    /// than their slots and forgotten by position alone.
    delivered: Delivered,
    /// Votes that came before the part they are about, and the order they
    /// came in.
    early_votes: FxHashMap<SdurTxId, BTreeMap<PartitionId, Vote>>,
    early_order: VecDeque<SdurTxId>,
    store: MvStore<u64>,
    unapplied: BTreeSet<u64>,
    /// The highest applied position.
    applied_max: u64,
    /// The largest commit timestamp applied.
    max_ts: Timestamp,
    /// Reads of snapshots below this may miss collected versions.
    gc_floor: u64,
    counters: CertifierCounters,
}

/// The most votes kept for parts not delivered yet.
const MAX_EARLY_VOTES: usize = 1 << 16;

impl Certifier {
    pub fn new(me: PartitionId, cfg: CertifierConfig) -> Certifier {
        Certifier {
            me,
            cfg,
            processed: 0,
            first: 1,
            slots: VecDeque::new(),
            touch: FxHashMap::default(),
            delivered: Delivered::default(),
            early_votes: FxHashMap::default(),
            early_order: VecDeque::new(),
            store: MvStore::keeping_tombstones(),
            unapplied: BTreeSet::new(),
            applied_max: 0,
            max_ts: Timestamp::ZERO,
            gc_floor: 0,
            counters: CertifierCounters::default(),
        }
    }

    /// The last position delivered.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Every position up to here is applied or aborted.
    pub fn prefix(&self) -> u64 {
        self.unapplied.first().map_or(self.processed, |&p| p - 1)
    }

    pub fn counters(&self) -> CertifierCounters {
        self.counters
    }

    pub fn store(&self) -> &MvStore<u64> {
        &self.store
    }

    pub fn max_ts(&self) -> Timestamp {
        self.max_ts
    }

    /// Nothing delivered is still to end or be applied.
    pub fn is_quiescent(&self) -> bool {
        self.unapplied.is_empty()
    }

    fn slot(&self, pos: u64) -> Option<&Slot> {
        pos.checked_sub(self.first).and_then(|i| self.slots.get(i as usize))
    }

    fn slot_mut(&mut self, pos: u64) -> Option<&mut Slot> {
        pos.checked_sub(self.first).and_then(|i| self.slots.get_mut(i as usize))
    }

    /// The snapshot a read that starts now gets (step 1).
    pub fn snapshot(&self) -> Snap {
        let holes = self.unapplied.range(..=self.applied_max).copied().collect();
        Snap { upto: self.applied_max, holes, ts: self.max_ts }
    }

    /// The value of `key` in `snap` and the stamp of its version (`None`:
    /// no version, or a delete).
    pub fn read(&self, key: &[u8], snap: &Snap) -> Result<Option<(Option<Value>, CommitStamp)>, TooOld> {
        if snap.upto < self.gc_floor {
            return Err(TooOld);
        }
        let found = self.store.chain(key).and_then(|c| c.newest_visible(|v| snap.sees(v.meta)));
        Ok(found.map(|v| (v.value.clone(), v.stamp)))
    }

    /// Whether a part or a fence of `tx` was delivered here (within the
    /// window remembered).
    pub fn delivered(&self, tx: &SdurTxId) -> bool {
        self.delivered.by_tx.contains_key(tx)
    }

    /// Whether a fence for a transaction whose commit has `deadline` (the
    /// session's clock) is safe: this certifier still remembers every part
    /// it delivered since that commit began, so a part of it not
    /// remembered was never delivered, and one that comes later is skipped
    /// (or aborts, past its deadline).
    pub fn may_fence(&self, deadline: u64) -> bool {
        let began = deadline.saturating_sub(self.cfg.commit_timeout_us + self.cfg.clock_allowance_us);
        self.delivered.forgotten_time.physical() < began
    }

    /// Whether `tx` was fenced here: its part, if it comes, is skipped and
    /// the transaction aborts.
    pub fn fenced(&self, tx: &SdurTxId) -> bool {
        self.delivered.by_tx.get(tx).is_some_and(|k| k.fenced)
    }

    /// Whether this member has applied everything `snap` saw: a read at
    /// `snap` answered here finds what it should.
    pub fn covers(&self, snap: &Snap) -> bool {
        self.processed >= snap.upto && self.unapplied.range(..=snap.upto).all(|p| snap.holes.binary_search(p).is_ok())
    }

    /// Whether the entry at `pos` is applied (or aborted) here.
    pub fn has_applied(&self, pos: u64) -> bool {
        pos <= self.prefix() || (pos <= self.processed && !self.unapplied.contains(&pos))
    }

    /// The outcome of a transaction delivered here, if it is over.
    pub fn outcome_of(&self, tx: &SdurTxId) -> Option<Outcome> {
        let pos = self.delivered.by_tx.get(tx)?.pos;
        let slot = self.slot(pos)?;
        match slot.state {
            State::Committed | State::Aborted if slot.tx == Some(*tx) => Some(self.outcome(pos, slot)),
            _ => None,
        }
    }

    /// This partition's vote on `tx`, if its part or a fence was delivered
    /// (and is remembered): what a member asked for it answers (step 7).
    pub fn vote_of(&self, tx: &SdurTxId) -> Option<Vote> {
        self.delivered.by_tx.get(tx).and_then(|k| k.vote)
    }

    /// Every vote this member holds on `tx` (its own and others'), for a
    /// member of its group that lost them.
    pub fn votes_of(&self, tx: &SdurTxId) -> Vec<(PartitionId, Vote)> {
        let Some(known) = self.delivered.by_tx.get(tx) else { return Vec::new() };
        match self.slot(known.pos) {
            Some(slot) if slot.tx == Some(*tx) => slot.votes.iter().map(|(&p, &v)| (p, v)).collect(),
            _ => known.vote.map(|v| vec![(self.me, v)]).unwrap_or_default(),
        }
    }

    /// Pending globals: each with its partitions, those whose votes it
    /// lacks, and its session's deadline.
    pub fn missing_votes(&self) -> Vec<(SdurTxId, Vec<PartitionId>, Vec<PartitionId>, u64)> {
        self.unapplied
            .iter()
            .filter_map(|&pos| {
                let slot = self.slot(pos)?;
                if slot.state != State::Pending {
                    return None;
                }
                let missing: Vec<PartitionId> =
                    slot.parts.iter().copied().filter(|p| !slot.votes.contains_key(p)).collect();
                Some((slot.tx?, slot.parts.clone(), missing, slot.deadline))
            })
            .collect()
    }

    fn outcome(&self, pos: u64, slot: &Slot) -> Outcome {
        let tx = slot.tx.expect("an outcome is of a transaction");
        if slot.state != State::Committed {
            return Outcome { tx, stamp: None, positions: Vec::new(), why: slot.why.clone() };
        }
        let positions: Vec<(PartitionId, u64)> =
            if slot.global { slot.votes.iter().map(|(&p, v)| (p, v.pos)).collect() } else { vec![(self.me, pos)] };
        let stamp = stamp_of(slot.origin, slot.ts, &positions, &slot.votes, self.me, pos);
        Outcome { tx, stamp: Some(stamp), positions, why: None }
    }

    /// The entry at `pos` (the next position) is delivered, stamped by its
    /// leader with `time`; `None`: a leader's no-op.
    pub fn deliver(&mut self, pos: u64, time: Timestamp, entry: Option<&LogEntry>, out: &mut Vec<Event>) {
        assert_eq!(pos, self.processed + 1, "the log is delivered in order");
        self.processed = pos;
        match entry {
            None => self.push_empty(time),
            Some(LogEntry::Fence(tx, parts)) => {
                self.push_empty(time);
                if !self.delivered(tx) {
                    let vote = Vote { commit: false, ts: time, pos };
                    self.delivered.insert(*tx, time, Known { pos, vote: Some(vote), fenced: true });
                    self.slots.back_mut().expect("just pushed").fenced = Some(*tx);
                    self.early_votes.remove(tx);
                    let to: Vec<PartitionId> = parts.iter().copied().filter(|&p| p != self.me).collect();
                    out.push(Event::Voted { tx: *tx, to, vote });
                }
            }
            Some(LogEntry::Part(part)) => {
                if self.delivered(&part.tx) || !part.parts.contains(&self.me) {
                    self.push_empty(time);
                } else {
                    self.delivered.insert(part.tx, time, Known { pos, vote: None, fenced: false });
                    self.certify(pos, time, part, out);
                }
            }
        }
        self.apply(out);
        self.forget();
    }

    /// Whether this certifier counts the aborts only a filter caused.
    fn audits(&self) -> bool {
        matches!(self.cfg.certification, Certification::Bloom { audit: true, .. })
    }

    fn push_empty(&mut self, time: Timestamp) {
        let mut slot = Slot::empty();
        slot.ts = time;
        slot.time = time;
        self.slots.push_back(slot);
    }

    /// Whether the entry at `pos` is concurrent with a part read at `snap`.
    fn concurrent(snap: &Snap, pos: u64) -> bool {
        !snap.sees(pos)
    }

    /// The concurrent entries that intersect `part` (delivered at `at`):
    /// `(position, exact)` — `exact` false for a bloom filter's false hit.
    fn conflicts(&self, at: u64, part: &Part) -> Vec<(u64, bool)> {
        let snap = &part.snap;
        let mut found: BTreeMap<u64, bool> = BTreeMap::new();
        let write_keys: Vec<&Key> = part.writes.iter().map(|(k, _)| k).collect();
        match (&part.reads, self.cfg.certification) {
            (ReadSet::Keys(reads), _) => {
                // Through the key index: entries that write what it reads,
                // or touch what it writes.
                // A key's list is in log order, and the snapshot saw every
                // position before its oldest hole: only the rest can conflict.
                let from = snap.holes.first().copied().unwrap_or(snap.upto + 1);
                let unseen = |key: &Key| {
                    self.touch
                        .get(key)
                        .into_iter()
                        .flat_map(move |list| list.range(list.partition_point(|&p| p < from)..))
                };
                for key in reads {
                    for &pos in unseen(key) {
                        if pos < at && Self::concurrent(snap, pos) && self.slot(pos).is_some_and(|s| s.writes_key(key))
                        {
                            found.insert(pos, true);
                        }
                    }
                }
                for key in &write_keys {
                    for &pos in unseen(key) {
                        if pos < at && Self::concurrent(snap, pos) {
                            found.insert(pos, true);
                        }
                    }
                }
            }
            (ReadSet::Filter { filter, audit }, _) => {
                let from = snap.holes.first().copied().unwrap_or(snap.upto + 1).max(self.first);
                for pos in from..at {
                    if !Self::concurrent(snap, pos) {
                        continue;
                    }
                    let Some(slot) = self.slot(pos) else { continue };
                    if slot.tx.is_none() {
                        continue;
                    }
                    let theirs_in_mine = slot.write_keys.iter().any(|k| filter.may_contain(k));
                    let mine_in_theirs = write_keys.iter().any(|k| slot.reads.may_contain(k) || slot.writes_key(k));
                    if theirs_in_mine || mine_in_theirs {
                        // Exact where both sides' keys are known (an audit
                        // keeps them): a hit of either filter alone is not.
                        let theirs_exact =
                            audit.as_ref().is_some_and(|keys| slot.write_keys.iter().any(|w| keys.contains(w)));
                        let mine_exact = write_keys.iter().any(|k| {
                            slot.writes_key(k)
                                || slot.reads.keys().map_or(slot.reads.may_contain(k), |keys| keys.contains(*k))
                        });
                        found.insert(pos, theirs_exact || mine_exact);
                    }
                }
            }
        }
        found.into_iter().collect()
    }

    fn certify(&mut self, pos: u64, time: Timestamp, part: &Part, out: &mut Vec<Event>) {
        let mut slot = Slot {
            tx: Some(part.tx),
            global: part.is_global(),
            parts: part.parts.clone(),
            origin: part.origin,
            reply_to: Some(part.reply_to),
            reads: part.reads.clone(),
            write_keys: part.writes.iter().map(|(k, _)| k.clone()).collect(),
            writes: Some(part.writes.clone()),
            state: State::Waiting,
            applied: false,
            time,
            deadline: part.deadline,
            ts: part.deps.next().max(time),
            ..Slot::empty()
        };
        // What the transaction did not see begins at its oldest hole.
        let age = pos.saturating_sub(part.snap.holes.first().copied().unwrap_or(part.snap.upto).min(part.snap.upto));
        let history = match self.cfg.certification {
            Certification::Bloom { history, .. } => u64::from(history),
            Certification::Exact => u64::MAX,
        };
        if age > history && age <= self.cfg.retention {
            self.counters.history_aborts += 1;
        }
        let too_old = if age > self.cfg.retention {
            Some(format!("its snapshot of {} is {age} positions old, past the {} kept", self.me, self.cfg.retention))
        } else if age > history {
            Some(format!("its snapshot of {} is {age} positions old, past the {history} filters kept", self.me))
        } else if !part.snap.is_well_formed() || part.snap.upto >= pos {
            Some("its snapshot is malformed".into())
        } else if time.physical() > part.deadline.saturating_add(self.cfg.clock_allowance_us) {
            // Its session gave the commit up: other partitions may have
            // fenced it.
            Some(format!("it reached {} after its session gave it up", self.me))
        } else {
            None
        };
        let conflicts = if too_old.is_some() { Vec::new() } else { self.conflicts(pos, part) };
        if slot.global {
            let mut commit = too_old.is_none();
            let mut exact = commit;
            for &(u, is_exact) in &conflicts {
                let Some(other) = self.slot(u) else { continue };
                if other.global && (other.votes.get(&self.me).is_some_and(|v| !v.commit)) {
                    continue; // this partition aborted it: it can never commit
                }
                if other.global && self.cfg.fault == SdurFault::IgnoreConcurrentGlobals {
                    continue;
                }
                commit = false;
                if is_exact {
                    exact = false;
                }
                if slot.why.is_none() {
                    slot.why = Some(format!("it intersects a concurrent transaction at {} (position {u})", self.me));
                }
            }
            if let Some(why) = too_old {
                slot.why = Some(why);
            }
            slot.exact_abort = !exact;
            if !commit && exact && self.audits() {
                self.counters.false_aborts += 1;
            }
            let vote = Vote { commit, ts: slot.ts, pos };
            slot.votes.insert(self.me, vote);
            if let Some(known) = self.delivered.by_tx.get_mut(&part.tx) {
                known.vote = Some(vote);
            }
            let to: Vec<PartitionId> = slot.parts.iter().copied().filter(|&p| p != self.me).collect();
            out.push(Event::Voted { tx: part.tx, to, vote });
            slot.state = if commit { State::Pending } else { State::Aborted };
            if let Some(early) = self.early_votes.remove(&part.tx) {
                for (p, v) in early {
                    if slot.parts.contains(&p) && p != self.me {
                        slot.votes.insert(p, v);
                    }
                }
            }
            self.push_slot(pos, slot);
            if self.slot(pos).is_some_and(|s| s.state == State::Pending) {
                self.try_resolve_global(pos, out);
            } else {
                self.end(pos, out);
            }
            return;
        }
        // A local: certified once what it intersects has ended.
        if let Some(why) = too_old {
            slot.why = Some(why);
            slot.state = State::Aborted;
            slot.exact_abort = true;
            self.push_slot(pos, slot);
            self.end(pos, out);
            return;
        }
        let mut blockers = Vec::new();
        for &(u, is_exact) in &conflicts {
            let Some(other) = self.slot(u) else { continue };
            if other.state.resolved() {
                Self::absorb(&mut slot, u, other, is_exact);
            } else {
                blockers.push((u, is_exact));
            }
        }
        slot.blockers = blockers.len() as u32;
        if !blockers.is_empty() {
            self.counters.waited += 1;
        }
        self.push_slot(pos, slot);
        for (u, is_exact) in blockers {
            self.slot_mut(u).expect("a blocker is retained").waiters.push((pos, is_exact));
        }
        self.try_certify_local(pos, out);
    }

    /// A waiting local learns that `u`, which it intersects, ended.
    fn absorb(slot: &mut Slot, u: u64, other: &Slot, is_exact: bool) {
        if other.state != State::Committed {
            return;
        }
        let read_what_it_wrote = other.write_keys.iter().any(|k| slot.reads.may_contain(k));
        if read_what_it_wrote {
            if slot.why.is_none() {
                slot.why = Some(format!("a concurrent transaction (position {u}) wrote a key it read"));
            }
            slot.state = State::Aborted;
            let exactly =
                is_exact && slot.reads.keys().is_none_or(|keys| other.write_keys.iter().any(|k| keys.contains(k)));
            if exactly {
                slot.exact_abort = true;
            }
        }
        slot.ts = slot.ts.max(other.ts.next());
        if !other.applied {
            slot.follows.push(u);
        }
    }

    fn push_slot(&mut self, pos: u64, slot: Slot) {
        debug_assert_eq!(self.first + self.slots.len() as u64, pos);
        for key in slot.touched_keys() {
            match self.touch.get_mut(key) {
                Some(list) if list.back() == Some(&pos) => {}
                Some(list) => list.push_back(pos),
                None => {
                    self.touch.insert(key.clone(), VecDeque::from([pos]));
                }
            }
        }
        self.unapplied.insert(pos);
        self.slots.push_back(slot);
    }

    fn try_certify_local(&mut self, pos: u64, out: &mut Vec<Event>) {
        let Some(slot) = self.slot_mut(pos) else { return };
        if slot.state == State::Waiting && slot.blockers == 0 {
            slot.state = State::Committed;
        }
        if slot.state.resolved() {
            self.end(pos, out);
        }
    }

    fn try_resolve_global(&mut self, pos: u64, out: &mut Vec<Event>) {
        let Some(slot) = self.slot_mut(pos) else { return };
        if slot.state != State::Pending || !slot.parts.iter().all(|p| slot.votes.contains_key(p)) {
            return;
        }
        let commit = slot.votes.values().all(|v| v.commit);
        slot.ts = slot.votes.values().map(|v| v.ts).max().unwrap_or(slot.ts);
        slot.state = if commit { State::Committed } else { State::Aborted };
        if !commit && slot.why.is_none() {
            let who: Vec<String> = slot.votes.iter().filter(|(_, v)| !v.commit).map(|(p, _)| p.to_string()).collect();
            slot.why = Some(format!("certification failed at {}", who.join(", ")));
        }
        self.end(pos, out);
    }

    /// An entry resolved: tell the locals that wait for it, say so if it
    /// aborted (a commit is said once applied), and apply what can be.
    fn end(&mut self, pos: u64, out: &mut Vec<Event>) {
        let (waiters, state) = {
            let slot = self.slot_mut(pos).expect("a retained slot");
            (std::mem::take(&mut slot.waiters), slot.state)
        };
        match state {
            State::Committed => self.counters.committed += 1,
            State::Aborted => {
                self.counters.aborted += 1;
                let slot = self.slot(pos).expect("a retained slot");
                if !slot.global && !slot.exact_abort && self.audits() {
                    self.counters.false_aborts += 1;
                }
            }
            _ => {}
        }
        if state == State::Aborted {
            let slot = self.slot(pos).expect("a retained slot");
            if let Some(reply_to) = slot.reply_to {
                out.push(Event::Done { pos, reply_to, outcome: self.outcome(pos, slot) });
            }
        }
        if waiters.is_empty() {
            return;
        }
        let other = self.slot(pos).expect("a retained slot").clone();
        for (w, is_exact) in waiters {
            let Some(slot) = self.slot_mut(w) else { continue };
            if slot.state != State::Waiting {
                // Already aborted by another entry it intersects; an audit
                // still learns whether exact certification would have.
                if slot.state == State::Aborted && !slot.exact_abort && other.state == State::Committed && is_exact {
                    let exactly =
                        slot.reads.keys().is_some_and(|keys| other.write_keys.iter().any(|k| keys.contains(k)));
                    slot.exact_abort |= exactly;
                }
                continue;
            }
            slot.blockers = slot.blockers.saturating_sub(1);
            Self::absorb(slot, pos, &other, is_exact);
            self.try_certify_local(w, out);
        }
    }

    /// Another partition's vote on a global.
    pub fn on_vote(&mut self, tx: SdurTxId, from: PartitionId, vote: Vote, out: &mut Vec<Event>) {
        if from == self.me {
            self.counters.votes_refused += 1;
            return;
        }
        let Some(pos) = self.delivered.by_tx.get(&tx).map(|k| k.pos) else {
            // Before the part (or long after it was forgotten): kept, the
            // oldest dropped past the bound (a dropped vote is asked for
            // again, step 7).
            if !self.early_votes.contains_key(&tx) {
                self.early_order.push_back(tx);
                while self.early_order.len() > MAX_EARLY_VOTES {
                    let old = self.early_order.pop_front().expect("over the bound");
                    self.early_votes.remove(&old);
                }
            }
            self.early_votes.entry(tx).or_default().insert(from, vote);
            return;
        };
        let Some(slot) = self.slot_mut(pos) else { return };
        if slot.tx != Some(tx) || !slot.global || !slot.parts.contains(&from) {
            if slot.tx == Some(tx) {
                self.counters.votes_refused += 1;
            }
            return;
        }
        match slot.votes.get(&from) {
            Some(known) if known.commit != vote.commit || known.ts != vote.ts => {
                self.counters.votes_refused += 1;
                return;
            }
            Some(_) => return,
            None => {
                slot.votes.insert(from, vote);
            }
        }
        self.try_resolve_global(pos, out);
        self.apply(out);
    }

    /// Applies every committed entry that may be (step 6), in log order.
    fn apply(&mut self, out: &mut Vec<Event>) {
        let k = self.cfg.reorder_threshold;
        let mut oldest: Option<u64> = None;
        let positions: Vec<u64> = self.unapplied.iter().copied().collect();
        for pos in positions {
            let (state, global, follows_applied) = {
                let slot = self.slot(pos).expect("unapplied slots are retained");
                let follows = slot.follows.iter().all(|&f| self.slot(f).is_none_or(|s| s.applied));
                (slot.state, slot.global, follows)
            };
            let ready = match state {
                State::Empty | State::Aborted => true,
                State::Committed if global => oldest.is_none(),
                State::Committed => follows_applied && oldest.is_none_or(|o| pos - o <= k),
                State::Waiting | State::Pending => false,
            };
            if !ready {
                oldest.get_or_insert(pos);
                continue;
            }
            if state == State::Committed {
                if oldest.is_some() {
                    self.counters.reordered += 1;
                }
                self.install(pos, out);
            }
            self.unapplied.remove(&pos);
            self.slot_mut(pos).expect("a retained slot").applied = true;
        }
    }

    fn install(&mut self, pos: u64, out: &mut Vec<Event>) {
        let (stamp, writes, reply_to) = {
            let me = self.me;
            let slot = self.slot_mut(pos).expect("a retained slot");
            let writes = slot.writes.take().unwrap_or_default();
            let positions: Vec<(PartitionId, u64)> =
                if slot.global { slot.votes.iter().map(|(&p, v)| (p, v.pos)).collect() } else { vec![(me, pos)] };
            (stamp_of(slot.origin, slot.ts, &positions, &slot.votes, me, pos), writes, slot.reply_to)
        };
        let floor = self.gc_floor;
        for (key, value) in writes {
            let version = Version { value, stamp, meta: pos };
            self.store.insert(key, version, |v| v.meta <= floor);
        }
        self.applied_max = self.applied_max.max(pos);
        self.max_ts = self.max_ts.max(stamp.ts);
        if let Some(reply_to) = reply_to {
            let slot = self.slot(pos).expect("a retained slot");
            out.push(Event::Done { pos, reply_to, outcome: self.outcome(pos, slot) });
        }
    }

    /// Forgets what fell out of the retention window, by position alone
    /// (what certification consults must not depend on when votes came):
    /// slots more than `W` positions back, once applied; transactions
    /// delivered more than [`DEDUPE_WINDOWS`]·`W` back; sessions not heard
    /// of for [`WATERMARK_WINDOWS`]·`W`.
    fn forget(&mut self) {
        let w = self.cfg.retention;
        self.gc_floor = self.prefix().saturating_sub(w);
        let floor = self.processed.saturating_sub(w);
        while self.first < floor && self.slots.front().is_some_and(|s| s.applied) {
            let slot = self.slots.pop_front().expect("checked");
            let pos = self.first;
            self.first += 1;
            for key in slot.touched_keys() {
                if let Some(list) = self.touch.get_mut(key) {
                    while list.front().is_some_and(|&p| p <= pos) {
                        list.pop_front();
                    }
                    if list.is_empty() {
                        self.touch.remove(key);
                    }
                }
            }
        }
        let now = self.slot(self.processed).map_or(Timestamp::ZERO, |s| s.time);
        let keep_us = self.cfg.commit_timeout_us + 2 * self.cfg.clock_allowance_us;
        self.delivered.forget(
            self.processed.saturating_sub(w.saturating_mul(DEDUPE_WINDOWS)),
            Timestamp::from_physical(now.physical().saturating_sub(keep_us)),
        );
    }
}

/// How many retention windows a delivered transaction is remembered: a
/// part sent again, or a question about its vote, that comes later finds
/// nothing.
pub const DEDUPE_WINDOWS: u64 = 4;

/// The transactions delivered, by id, in log order.
#[derive(Debug, Default)]
struct Delivered {
    by_tx: FxHashMap<SdurTxId, Known>,
    /// Position, leader's time and transaction, oldest first.
    order: VecDeque<(u64, Timestamp, SdurTxId)>,
    /// The time of the last delivery forgotten.
    forgotten_time: Timestamp,
}

impl Delivered {
    fn insert(&mut self, tx: SdurTxId, time: Timestamp, known: Known) {
        self.by_tx.insert(tx, known);
        self.order.push_back((known.pos, time, tx));
    }

    /// Forgets what was delivered before position `below` and before time
    /// `before` (both: remembered long in positions and in time).
    fn forget(&mut self, below: u64, before: Timestamp) {
        while self.order.front().is_some_and(|&(pos, time, _)| pos < below && time < before) {
            let (pos, time, tx) = self.order.pop_front().expect("checked");
            if self.by_tx.get(&tx).is_some_and(|k| k.pos == pos) {
                self.by_tx.remove(&tx);
            }
            self.forgotten_time = self.forgotten_time.max(time);
        }
    }
}

/// How many slots or keys one record of a certifier's state holds.
const IMAGE_CHUNK: usize = 1_024;

impl Certifier {
    /// The certifier's state as records ([`SdurRecord`]): what a checkpoint
    /// holds of it, and what a leader sends a follower it cannot catch up.
    pub fn image(&self) -> Vec<SdurRecord> {
        let head = MachineHead {
            processed: self.processed,
            first: self.first,
            applied_max: self.applied_max,
            max_ts: self.max_ts,
            gc_floor: self.gc_floor,
            forgotten_time: self.delivered.forgotten_time,
            counters: self.counters,
            records: 0,
        };
        let mut records = vec![SdurRecord::Machine(head)];
        let slots: Vec<Slot> = self.slots.iter().cloned().collect();
        records.extend(slots.chunks(IMAGE_CHUNK).map(|c| SdurRecord::Slots(c.to_vec())));
        let mut chains: Vec<(Key, Vec<StoredVersion>)> = self
            .store
            .chains()
            .map(|(k, c)| (k.clone(), c.iter().map(|v| (v.value.clone(), v.stamp, v.meta)).collect()))
            .collect();
        // Deterministic: the same state gives the same records.
        chains.sort_by(|a, b| a.0.cmp(&b.0));
        for chunk in chains.chunks(IMAGE_CHUNK) {
            records.push(SdurRecord::Versions(chunk.to_vec()));
        }
        let delivered: Vec<(SdurTxId, Timestamp, Known)> = self
            .delivered
            .order
            .iter()
            .filter_map(|&(pos, time, tx)| {
                self.delivered.by_tx.get(&tx).filter(|k| k.pos == pos).map(|k| (tx, time, *k))
            })
            .collect();
        for chunk in delivered.chunks(IMAGE_CHUNK) {
            records.push(SdurRecord::Delivered(chunk.to_vec()));
        }
        if !self.early_votes.is_empty() {
            let mut votes: Vec<(SdurTxId, PartitionId, Vote)> =
                self.early_votes.iter().flat_map(|(tx, vs)| vs.iter().map(|(p, v)| (*tx, *p, *v))).collect();
            votes.sort_by_key(|(tx, p, _)| (*tx, *p));
            records.push(SdurRecord::EarlyVotes(votes));
        }
        let following = records.len() as u32 - 1;
        if let Some(SdurRecord::Machine(head)) = records.first_mut() {
            head.records = following;
        }
        records
    }

    /// Starts over from `head`; [`Certifier::restore`] takes the records
    /// that follow it.
    pub fn reset(&mut self, head: MachineHead) {
        let (me, cfg) = (self.me, self.cfg.clone());
        *self = Certifier::new(me, cfg);
        self.processed = head.processed;
        self.first = head.first;
        self.applied_max = head.applied_max;
        self.max_ts = head.max_ts;
        self.gc_floor = head.gc_floor;
        self.delivered.forgotten_time = head.forgotten_time;
        self.counters = head.counters;
    }

    /// Takes one record of a state begun by [`Certifier::reset`].
    pub fn restore(&mut self, record: SdurRecord) {
        match record {
            SdurRecord::Delivered(known) => {
                for (tx, time, k) in known {
                    self.delivered.insert(tx, time, k);
                }
            }
            SdurRecord::Slots(slots) => {
                for slot in slots {
                    let pos = self.first + self.slots.len() as u64;
                    if slot.state == State::Empty {
                        self.slots.push_back(slot);
                    } else {
                        let applied = slot.applied;
                        self.push_slot(pos, slot);
                        if applied {
                            self.unapplied.remove(&pos);
                        }
                    }
                }
            }
            SdurRecord::Versions(chains) => {
                for (key, versions) in chains {
                    for (value, stamp, meta) in versions {
                        self.store.insert(key.clone(), Version { value, stamp, meta }, |_| false);
                    }
                }
            }
            SdurRecord::EarlyVotes(votes) => {
                for (tx, p, v) in votes {
                    if !self.early_votes.contains_key(&tx) {
                        self.early_order.push_back(tx);
                    }
                    self.early_votes.entry(tx).or_default().insert(p, v);
                }
            }
            SdurRecord::Machine(head) => self.reset(head),
            SdurRecord::Raft(_) => {}
        }
    }
}

/// The stamp of a commit: its timestamp, the client's DC, and — unique —
/// the position of the vote that gave the timestamp (the lowest such
/// partition), or the local's own.
fn stamp_of(
    origin: DcId,
    ts: Timestamp,
    positions: &[(PartitionId, u64)],
    votes: &BTreeMap<PartitionId, Vote>,
    me: PartitionId,
    pos: u64,
) -> CommitStamp {
    let (top, at) = votes
        .iter()
        .find(|(_, v)| v.ts == ts)
        .map(|(&p, v)| (p, v.pos))
        .or_else(|| positions.first().copied())
        .unwrap_or((me, pos));
    CommitStamp { ts, dc: origin, txid: TxId::new(top, at & ((1 << 40) - 1)) }
}
