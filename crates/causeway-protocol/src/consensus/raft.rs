//! One member of a replica group running Raft: elections, log replication,
//! commitment on a majority, and what it makes durable before it speaks.
//!
//! Sans-IO like every state machine of the core: the owner feeds it time,
//! messages and proposals, and carries out what it asks in a [`RaftOut`] —
//! records to persist, messages to send at once or once those records are
//! durable, followers that need a snapshot. It draws no randomness: its
//! election timeouts are spread by a hash of the member, its term and its
//! attempt, so two members of a group rarely time out together, and the
//! same inputs give the same outputs.

use super::durable::RaftRecord;
use super::log::{Entry, Payload, RaftLog};
use super::messages::RaftMsg;
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::ReplicaId;
use std::collections::{BTreeMap, BTreeSet};

/// Timing and sizes of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftConfig {
    /// How often a leader reaches every follower, entries or not.
    pub heartbeat_us: u64,
    /// A follower that hears no leader this long (plus a spread of up to
    /// as much again) stands for election; a leader that hears from no
    /// majority this long steps down.
    pub election_us: u64,
    /// The most entries in one append message.
    pub max_append_entries: usize,
    /// The most entries sent to a follower beyond what it acknowledged.
    pub max_inflight_entries: u64,
    /// The member that should lead whenever it can (the one in the region
    /// of the group's majority): it times out first, and a leader hands
    /// over to it once it is up to date.
    pub preferred: Option<ReplicaId>,
}

impl Default for RaftConfig {
    fn default() -> Self {
        RaftConfig {
            heartbeat_us: 50_000,
            election_us: 1_000_000,
            max_append_entries: 256,
            max_inflight_entries: 4_096,
            preferred: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Follower,
    /// Asking whether it could win, before it raises its term.
    PreCandidate,
    Candidate,
    Leader,
}

/// When a message may leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Send {
    Now,
    /// Once every record persisted so far is durable.
    AfterDurable,
}

/// What a step of a member asks its owner to do.
#[derive(Debug)]
pub struct RaftOut<E> {
    pub messages: Vec<(ReplicaId, RaftMsg<E>, Send)>,
    pub records: Vec<RaftRecord<E>>,
    /// Followers whose next entry the leader has compacted away: the owner
    /// sends them its snapshot, and their member calls
    /// [`Raft::install_snapshot`].
    pub need_snapshot: Vec<ReplicaId>,
}

impl<E> Default for RaftOut<E> {
    fn default() -> Self {
        RaftOut { messages: Vec::new(), records: Vec::new(), need_snapshot: Vec::new() }
    }
}

impl<E> RaftOut<E> {
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.records.is_empty() && self.need_snapshot.is_empty()
    }
}

/// A leader's view of one follower.
#[derive(Clone, Debug)]
struct Progress {
    /// The next entry to send.
    next: u64,
    /// The last entry known to match and be durable there.
    matched: u64,
    /// When it last answered.
    heard_us: PhysicalMicros,
    /// Until an append succeeds, one append at a time, at `next`.
    probing: bool,
    probe_sent_us: Option<PhysicalMicros>,
    /// When the owner was last asked for a snapshot for it.
    snapshot_asked_us: Option<PhysicalMicros>,
}

/// A member of a group.
#[derive(Debug)]
pub struct Raft<E> {
    me: ReplicaId,
    members: Vec<ReplicaId>,
    cfg: RaftConfig,
    term: u64,
    vote: Option<ReplicaId>,
    log: RaftLog<E>,
    commit: u64,
    /// The last entry this member knows to be durable in its own records.
    durable: u64,
    role: Role,
    leader: Option<ReplicaId>,
    votes: BTreeSet<ReplicaId>,
    progress: BTreeMap<ReplicaId, Progress>,
    election_due_us: PhysicalMicros,
    heartbeat_due_us: PhysicalMicros,
    /// When it last heard its leader (or, leading, itself).
    leader_heard_us: Option<PhysicalMicros>,
    /// Elections started: spreads the next timeout.
    elections: u64,
    /// The commit index followers were last sent.
    commit_sent: u64,
    transfer_sent_us: Option<PhysicalMicros>,
    /// Entries appended since the last flush.
    dirty: bool,
    /// An append record went out since the last flush.
    appended: bool,
    /// Messages refused as impossible from an honest member (an append that
    /// would undo a committed entry).
    refused: u64,
}

impl<E: Clone> Raft<E> {
    /// A member with an empty log at term 0.
    pub fn new(me: ReplicaId, members: Vec<ReplicaId>, cfg: RaftConfig) -> Self {
        let mut members = members;
        members.sort();
        members.dedup();
        assert!(members.contains(&me), "{me} is not a member of its own group");
        Raft {
            me,
            members,
            cfg,
            term: 0,
            vote: None,
            log: RaftLog::default(),
            commit: 0,
            durable: 0,
            role: Role::Follower,
            leader: None,
            votes: BTreeSet::new(),
            progress: BTreeMap::new(),
            election_due_us: 0,
            heartbeat_due_us: 0,
            leader_heard_us: None,
            elections: 0,
            commit_sent: 0,
            transfer_sent_us: None,
            dirty: false,
            appended: false,
            refused: 0,
        }
    }

    /// A member rebuilt from the records it made durable, in order. What it
    /// knew committed comes back as its log's base; the rest it learns from
    /// the leader again.
    pub fn recover(
        me: ReplicaId,
        members: Vec<ReplicaId>,
        cfg: RaftConfig,
        records: impl IntoIterator<Item = RaftRecord<E>>,
    ) -> Self {
        let mut raft = Raft::new(me, members, cfg);
        for record in records {
            raft.replay(record);
        }
        raft.commit = raft.log.base_index();
        raft.durable = raft.log.last_index();
        raft.commit_sent = raft.commit;
        raft
    }

    fn replay(&mut self, record: RaftRecord<E>) {
        match record {
            RaftRecord::Hard { term, vote } => {
                self.term = term;
                self.vote = vote;
            }
            RaftRecord::Append { from, entries } => {
                let start = from.max(self.log.first_index());
                if start > self.log.last_index() + 1 {
                    debug_assert!(false, "records leave a gap in the log: {start} after {}", self.log.last_index());
                    return;
                }
                self.log.truncate_from(start);
                let skip = (start - from) as usize;
                for entry in entries.into_iter().skip(skip) {
                    self.log.push(entry);
                }
            }
            RaftRecord::Base { index, term } => self.log.reset_to(index, term),
        }
    }

    pub fn id(&self) -> ReplicaId {
        self.me
    }

    pub fn members(&self) -> &[ReplicaId] {
        &self.members
    }

    pub fn term(&self) -> u64 {
        self.term
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// The leader this member follows (itself when leading), if it knows one.
    pub fn leader(&self) -> Option<ReplicaId> {
        self.leader
    }

    /// The last committed index this member knows of.
    pub fn commit_index(&self) -> u64 {
        self.commit
    }

    pub fn log(&self) -> &RaftLog<E> {
        &self.log
    }

    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The records whose replay gives this member's term, vote and log
    /// ([`Raft::recover`]): what a checkpoint holds of it.
    pub fn checkpoint(&self) -> Vec<RaftRecord<E>> {
        let mut records = vec![
            RaftRecord::Hard { term: self.term, vote: self.vote },
            RaftRecord::Base { index: self.log.base_index(), term: self.log.base_term() },
        ];
        if !self.log.is_empty() {
            records.push(RaftRecord::Append {
                from: self.log.first_index(),
                entries: self.log.entries_from(self.log.first_index(), usize::MAX),
            });
        }
        records
    }

    fn quorum(&self) -> usize {
        self.members.len() / 2 + 1
    }

    fn others(&self) -> impl Iterator<Item = ReplicaId> + '_ {
        let me = self.me;
        self.members.iter().copied().filter(move |&m| m != me)
    }

    /// This member's next election timeout: the preferred member's falls in
    /// `[E/2, E)`, everyone else's in `[E, 2E)`, spread by a hash.
    fn election_timeout(&self) -> u64 {
        let base = self.cfg.election_us.max(2);
        let mut bytes = Vec::with_capacity(24);
        bytes.extend_from_slice(&self.me.dc.0.to_le_bytes());
        bytes.extend_from_slice(&self.me.partition.0.to_le_bytes());
        bytes.push(self.me.member);
        bytes.extend_from_slice(&self.term.to_le_bytes());
        bytes.extend_from_slice(&self.elections.to_le_bytes());
        let spread = crate::topology::fnv1a64(&bytes);
        if self.cfg.preferred == Some(self.me) {
            base / 2 + spread % (base / 2)
        } else {
            base + spread % base
        }
    }

    /// Arms the first election timeout; a group of one leads at once.
    pub fn start(&mut self, now: PhysicalMicros, out: &mut RaftOut<E>) {
        self.role = Role::Follower;
        self.leader = None;
        self.election_due_us = now + self.election_timeout();
        if self.term == 0 && self.log.last_index() == 0 && self.cfg.preferred == Some(self.me) {
            // A group that has never had a leader: its preferred member
            // need not wait a timeout to ask (nobody leads to disrupt).
            self.election_due_us = now;
        }
        if self.members.len() == 1 {
            self.start_election(now, false, out);
        }
        self.flush(now, out);
    }

    /// Periodic work: a leader's heartbeats, its check that a majority still
    /// hears it, its hand-over to the preferred member; a follower's
    /// election timeout.
    pub fn tick(&mut self, now: PhysicalMicros, out: &mut RaftOut<E>) {
        if self.role == Role::Leader {
            if !self.majority_heard(now) {
                // Cut off from the majority: stop acting as leader, so that
                // clients learn the group cannot commit rather than wait.
                self.become_follower(self.term, None, now, out);
                return;
            }
            self.leader_heard_us = Some(now);
            if now >= self.heartbeat_due_us {
                self.heartbeat_due_us = now + self.cfg.heartbeat_us;
                self.send_appends(now, true, out);
            }
            self.hand_over(now, out);
        } else if now >= self.election_due_us {
            self.start_pre_vote(now, out);
        }
        self.flush(now, out);
    }

    fn majority_heard(&self, now: PhysicalMicros) -> bool {
        let heard = self.progress.values().filter(|p| now < p.heard_us + self.cfg.election_us).count();
        heard + 1 >= self.quorum()
    }

    /// Appends `data` at the end of the log, if this member leads: its
    /// index, or the leader it knows of. It leaves at the next flush.
    pub fn propose(&mut self, now: PhysicalMicros, data: E, out: &mut RaftOut<E>) -> Result<u64, Option<ReplicaId>> {
        if self.role != Role::Leader {
            return Err(self.leader);
        }
        Ok(self.append_own(now, Payload::Data(data), out))
    }

    fn append_own(&mut self, now: PhysicalMicros, payload: Payload<E>, out: &mut RaftOut<E>) -> u64 {
        let time = Timestamp::from_physical(now).max(self.log.last_time().next());
        let entry = Entry { term: self.term, time, payload };
        let index = self.log.last_index() + 1;
        self.log.push(entry.clone());
        match out.records.last_mut() {
            Some(RaftRecord::Append { from, entries }) if *from + entries.len() as u64 == index => entries.push(entry),
            _ => out.records.push(RaftRecord::Append { from: index, entries: vec![entry] }),
        }
        self.dirty = true;
        self.appended = true;
        index
    }

    /// Sends what the step left to send: new entries and a commit index
    /// followers have not heard, and the note to itself that its records
    /// are durable. The owner calls it after its proposals; every other
    /// entry point calls it itself.
    pub fn flush(&mut self, now: PhysicalMicros, out: &mut RaftOut<E>) {
        if self.role == Role::Leader && (self.dirty || self.commit > self.commit_sent) {
            self.send_appends(now, false, out);
        }
        self.dirty = false;
        if self.appended {
            self.appended = false;
            let (index, term) = (self.log.last_index(), self.log.last_term());
            out.messages.push((self.me, RaftMsg::Persisted { index, term }, Send::AfterDurable));
        }
    }

    fn send_appends(&mut self, now: PhysicalMicros, heartbeat: bool, out: &mut RaftOut<E>) {
        let followers: Vec<ReplicaId> = self.others().collect();
        for peer in followers {
            self.send_append(peer, now, heartbeat, out);
        }
        self.commit_sent = self.commit;
    }

    fn append_msg(&self, prev_index: u64, entries: Vec<Entry<E>>, heartbeat: bool) -> RaftMsg<E> {
        let prev_term = self.log.term_at(prev_index).expect("an append follows an entry the log holds");
        RaftMsg::Append { term: self.term, prev_index, prev_term, entries, commit: self.commit, heartbeat }
    }

    fn send_append(&mut self, peer: ReplicaId, now: PhysicalMicros, heartbeat: bool, out: &mut RaftOut<E>) {
        let base = self.log.base_index();
        let last = self.log.last_index();
        let max = self.cfg.max_append_entries.max(1);
        let Some(p) = self.progress.get(&peer).cloned() else { return };
        if p.next <= base {
            // What it needs next is in the snapshot only.
            if p.snapshot_asked_us.is_none_or(|t| now >= t + self.cfg.election_us) {
                self.progress.get_mut(&peer).expect("a follower").snapshot_asked_us = Some(now);
                out.need_snapshot.push(peer);
            }
            if heartbeat {
                out.messages.push((peer, self.append_msg(base, Vec::new(), true), Send::Now));
            }
            return;
        }
        if p.probing {
            let due = heartbeat || p.probe_sent_us.is_none_or(|t| now >= t + self.cfg.heartbeat_us);
            if due {
                let entries = self.log.entries_from(p.next, max);
                out.messages.push((peer, self.append_msg(p.next - 1, entries, heartbeat), Send::Now));
                self.progress.get_mut(&peer).expect("a follower").probe_sent_us = Some(now);
            }
            return;
        }
        // Replicating: everything up to the window, optimistically.
        let limit = p.matched.saturating_add(self.cfg.max_inflight_entries).min(last);
        let mut next = p.next;
        let mut sent = false;
        while next <= limit {
            let entries = self.log.entries_from(next, max.min((limit - next + 1) as usize));
            let n = entries.len() as u64;
            out.messages.push((peer, self.append_msg(next - 1, entries, false), Send::Now));
            next += n;
            sent = true;
        }
        self.progress.get_mut(&peer).expect("a follower").next = next;
        if !sent && (heartbeat || self.commit > self.commit_sent) {
            let news = self.commit > self.commit_sent;
            out.messages.push((peer, self.append_msg(next - 1, Vec::new(), heartbeat && !news), Send::Now));
        }
    }

    /// A message from another member (or, `Persisted`, from itself).
    pub fn on_message(&mut self, now: PhysicalMicros, from: ReplicaId, msg: RaftMsg<E>, out: &mut RaftOut<E>) {
        if !self.members.contains(&from) {
            self.refused += 1;
            return;
        }
        match msg {
            RaftMsg::Persisted { index, term } => {
                if from == self.me && self.log.term_at(index) == Some(term) {
                    self.durable = self.durable.max(index);
                    if self.role == Role::Leader {
                        self.advance_commit();
                    }
                }
            }
            RaftMsg::PreVote { term, last_index, last_term } => {
                let heard = self.hears_leader(now);
                let granted = term > self.term && self.log_ok(last_index, last_term) && !heard;
                let answer = if granted { term } else { self.term };
                out.messages.push((from, RaftMsg::PreVoteResp { term: answer, granted }, Send::Now));
            }
            RaftMsg::PreVoteResp { term, granted } => {
                if self.role == Role::PreCandidate && granted && term == self.term + 1 {
                    self.votes.insert(from);
                    if self.votes.len() >= self.quorum() {
                        self.start_election(now, false, out);
                    }
                } else if !granted && term > self.term {
                    self.become_follower(term, None, now, out);
                }
            }
            RaftMsg::Vote { term, last_index, last_term, transfer } => {
                if term < self.term {
                    out.messages.push((from, RaftMsg::VoteResp { term: self.term, granted: false }, Send::Now));
                } else if !transfer && term > self.term && self.hears_leader(now) {
                    // A leader is alive: whoever asks was cut off; its term
                    // must not depose the leader.
                    out.messages.push((from, RaftMsg::VoteResp { term: self.term, granted: false }, Send::Now));
                } else {
                    if term > self.term {
                        self.become_follower(term, None, now, out);
                    }
                    let granted = self.vote.is_none_or(|v| v == from) && self.log_ok(last_index, last_term);
                    if granted {
                        if self.vote != Some(from) {
                            self.vote = Some(from);
                            out.records.push(RaftRecord::Hard { term: self.term, vote: self.vote });
                        }
                        self.election_due_us = now + self.election_timeout();
                    }
                    out.messages.push((from, RaftMsg::VoteResp { term: self.term, granted }, Send::AfterDurable));
                }
            }
            RaftMsg::VoteResp { term, granted } => {
                if term > self.term {
                    self.become_follower(term, None, now, out);
                } else if self.role == Role::Candidate && term == self.term && granted {
                    self.votes.insert(from);
                    if self.votes.len() >= self.quorum() {
                        self.become_leader(now, out);
                    }
                }
            }
            RaftMsg::Append { term, prev_index, prev_term, entries, commit, .. } => {
                self.on_append(now, from, term, prev_index, prev_term, entries, commit, out);
            }
            RaftMsg::AppendResp { term, success, index } => {
                if term > self.term {
                    self.become_follower(term, None, now, out);
                } else if self.role == Role::Leader && term == self.term {
                    self.on_append_resp(now, from, success, index, out);
                }
            }
            RaftMsg::TimeoutNow { term } => {
                if term == self.term && self.role == Role::Follower && self.leader == Some(from) {
                    self.start_election(now, true, out);
                }
            }
        }
        self.flush(now, out);
    }

    /// Whether this member heard a leader (or is one) within the election
    /// timeout: then it refuses to help depose it.
    fn hears_leader(&self, now: PhysicalMicros) -> bool {
        self.role == Role::Leader
            || (self.leader.is_some() && self.leader_heard_us.is_some_and(|t| now < t + self.cfg.election_us))
    }

    /// Whether a log ending at `(last_index, last_term)` is at least as up
    /// to date as this member's (Raft §5.4.1).
    fn log_ok(&self, last_index: u64, last_term: u64) -> bool {
        last_term > self.log.last_term() || (last_term == self.log.last_term() && last_index >= self.log.last_index())
    }

    fn start_pre_vote(&mut self, now: PhysicalMicros, out: &mut RaftOut<E>) {
        self.elections += 1;
        self.election_due_us = now + self.election_timeout();
        if self.members.len() == 1 {
            self.start_election(now, false, out);
            return;
        }
        self.role = Role::PreCandidate;
        self.leader = None;
        self.votes = BTreeSet::from([self.me]);
        let msg = RaftMsg::PreVote {
            term: self.term + 1,
            last_index: self.log.last_index(),
            last_term: self.log.last_term(),
        };
        for peer in self.others().collect::<Vec<_>>() {
            out.messages.push((peer, msg.clone(), Send::Now));
        }
    }

    fn start_election(&mut self, now: PhysicalMicros, transfer: bool, out: &mut RaftOut<E>) {
        self.term += 1;
        self.vote = Some(self.me);
        out.records.push(RaftRecord::Hard { term: self.term, vote: self.vote });
        self.role = Role::Candidate;
        self.leader = None;
        self.votes = BTreeSet::from([self.me]);
        self.election_due_us = now + self.election_timeout();
        if self.votes.len() >= self.quorum() {
            self.become_leader(now, out);
            return;
        }
        let msg = RaftMsg::Vote {
            term: self.term,
            last_index: self.log.last_index(),
            last_term: self.log.last_term(),
            transfer,
        };
        for peer in self.others().collect::<Vec<_>>() {
            out.messages.push((peer, msg.clone(), Send::AfterDurable));
        }
    }

    fn become_leader(&mut self, now: PhysicalMicros, out: &mut RaftOut<E>) {
        self.role = Role::Leader;
        self.leader = Some(self.me);
        self.leader_heard_us = Some(now);
        self.transfer_sent_us = None;
        let next = self.log.last_index() + 1;
        self.progress = self
            .others()
            .map(|peer| {
                let p = Progress {
                    next,
                    matched: 0,
                    heard_us: now,
                    probing: true,
                    probe_sent_us: None,
                    snapshot_asked_us: None,
                };
                (peer, p)
            })
            .collect();
        self.append_own(now, Payload::Noop, out);
        self.heartbeat_due_us = now + self.cfg.heartbeat_us;
        self.advance_commit();
    }

    fn become_follower(&mut self, term: u64, leader: Option<ReplicaId>, now: PhysicalMicros, out: &mut RaftOut<E>) {
        if term > self.term {
            self.term = term;
            self.vote = None;
            out.records.push(RaftRecord::Hard { term, vote: None });
        }
        self.role = Role::Follower;
        self.leader = leader;
        self.votes.clear();
        self.progress.clear();
        self.leader_heard_us = leader.map(|_| now);
        self.election_due_us = now + self.election_timeout();
    }

    #[allow(clippy::too_many_arguments)]
    fn on_append(
        &mut self,
        now: PhysicalMicros,
        from: ReplicaId,
        term: u64,
        prev_index: u64,
        prev_term: u64,
        mut entries: Vec<Entry<E>>,
        leader_commit: u64,
        out: &mut RaftOut<E>,
    ) {
        if term < self.term {
            out.messages.push((from, RaftMsg::AppendResp { term: self.term, success: false, index: 0 }, Send::Now));
            return;
        }
        if term > self.term || self.role != Role::Follower || self.leader != Some(from) {
            self.become_follower(term, Some(from), now, out);
        }
        self.leader_heard_us = Some(now);
        self.election_due_us = now + self.election_timeout();
        let (mut prev_index, mut prev_term) = (prev_index, prev_term);
        let base = self.log.base_index();
        if prev_index < base {
            // Entries up to the base are committed, and committed entries
            // agree everywhere: skip them.
            let skip = (base - prev_index) as usize;
            if skip >= entries.len() {
                let matched = prev_index + entries.len() as u64;
                self.commit = self.commit.max(leader_commit.min(matched));
                out.messages.push((
                    from,
                    RaftMsg::AppendResp { term: self.term, success: true, index: matched },
                    Send::AfterDurable,
                ));
                return;
            }
            entries.drain(..skip);
            prev_index = base;
            prev_term = self.log.base_term();
        }
        match self.log.term_at(prev_index) {
            None => {
                let hint = self.log.last_index() + 1;
                out.messages.push((
                    from,
                    RaftMsg::AppendResp { term: self.term, success: false, index: hint },
                    Send::Now,
                ));
                return;
            }
            Some(t) if t != prev_term => {
                // Go back over the disagreeing term at once, not an entry a
                // round trip.
                let floor = (self.commit + 1).max(self.log.first_index());
                let mut hint = prev_index;
                while hint > floor && self.log.term_at(hint - 1) == Some(t) {
                    hint -= 1;
                }
                out.messages.push((
                    from,
                    RaftMsg::AppendResp { term: self.term, success: false, index: hint },
                    Send::Now,
                ));
                return;
            }
            Some(_) => {}
        }
        let mut first_new = None;
        for (i, entry) in entries.iter().enumerate() {
            let index = prev_index + 1 + i as u64;
            match self.log.term_at(index) {
                Some(t) if t == entry.term => continue,
                Some(_) => {
                    if index <= self.commit {
                        // A leader never asks to undo a committed entry.
                        self.refused += 1;
                        return;
                    }
                    self.log.truncate_from(index);
                    self.durable = self.durable.min(index - 1);
                    first_new = Some(i);
                    break;
                }
                None => {
                    first_new = Some(i);
                    break;
                }
            }
        }
        let matched = prev_index + entries.len() as u64;
        if let Some(i) = first_new {
            let new: Vec<Entry<E>> = entries.drain(i..).collect();
            for entry in &new {
                self.log.push(entry.clone());
            }
            out.records.push(RaftRecord::Append { from: prev_index + 1 + i as u64, entries: new });
            self.appended = true;
        }
        self.commit = self.commit.max(leader_commit.min(matched));
        out.messages.push((
            from,
            RaftMsg::AppendResp { term: self.term, success: true, index: matched },
            Send::AfterDurable,
        ));
    }

    fn on_append_resp(
        &mut self,
        now: PhysicalMicros,
        from: ReplicaId,
        success: bool,
        index: u64,
        out: &mut RaftOut<E>,
    ) {
        let Some(p) = self.progress.get_mut(&from) else { return };
        p.heard_us = now;
        if success {
            if index > self.log.last_index() {
                self.refused += 1;
                return;
            }
            p.matched = p.matched.max(index);
            p.next = p.next.max(index + 1);
            p.probing = false;
            p.snapshot_asked_us = None;
            self.advance_commit();
            self.send_append(from, now, false, out);
        } else if p.probing || index < p.next {
            p.next = index.max(p.matched + 1).max(1);
            p.probing = true;
            p.probe_sent_us = None;
            self.send_append(from, now, false, out);
        }
    }

    /// Commits the largest index a majority holds durably, if this term
    /// wrote it (Raft §5.4.2).
    fn advance_commit(&mut self) {
        let last = self.log.last_index();
        let mut matched: Vec<u64> = self
            .members
            .iter()
            .map(|m| if *m == self.me { self.durable.min(last) } else { self.progress.get(m).map_or(0, |p| p.matched) })
            .collect();
        matched.sort_unstable_by(|a, b| b.cmp(a));
        let n = matched[self.quorum() - 1];
        if n > self.commit && self.log.term_at(n) == Some(self.term) {
            self.commit = n;
        }
    }

    /// A leader hands leadership to the preferred member once that one's log
    /// is as long as its own (at most once per election timeout).
    fn hand_over(&mut self, now: PhysicalMicros, out: &mut RaftOut<E>) {
        let Some(preferred) = self.cfg.preferred.filter(|&p| p != self.me) else { return };
        let Some(p) = self.progress.get(&preferred) else { return };
        let caught_up = p.matched == self.log.last_index() && now < p.heard_us + self.cfg.election_us;
        if caught_up && self.transfer_sent_us.is_none_or(|t| now >= t + self.cfg.election_us) {
            self.transfer_sent_us = Some(now);
            out.messages.push((preferred, RaftMsg::TimeoutNow { term: self.term }, Send::Now));
        }
    }

    /// How far this member may compact its log without leaving a live
    /// follower to a snapshot: for a leader, what every follower heard from
    /// lately holds; for others, what is committed.
    pub fn compaction_floor(&self, now: PhysicalMicros) -> u64 {
        let mut floor = self.commit;
        if self.role == Role::Leader {
            for p in self.progress.values() {
                if now < p.heard_us + self.cfg.election_us {
                    floor = floor.min(p.matched);
                }
            }
        }
        floor
    }

    /// Forgets the entries up to `index` (at most the commit index): the
    /// owner's snapshot holds their effect. Only memory: the owner's
    /// checkpoint makes it durable.
    pub fn compact(&mut self, index: u64) {
        self.log.compact_to(index.min(self.commit));
    }

    /// The leader `from` (at `term`) sent the owner's snapshot, which ends at
    /// `index` of `snap_term`: whether the owner should install it (it is
    /// news), after which the log starts there. The answer to the leader is
    /// sent here.
    #[allow(clippy::too_many_arguments)]
    pub fn install_snapshot(
        &mut self,
        now: PhysicalMicros,
        from: ReplicaId,
        term: u64,
        index: u64,
        snap_term: u64,
        out: &mut RaftOut<E>,
    ) -> bool {
        if !self.members.contains(&from) {
            self.refused += 1;
            return false;
        }
        if term < self.term {
            out.messages.push((from, RaftMsg::AppendResp { term: self.term, success: false, index: 0 }, Send::Now));
            return false;
        }
        if term > self.term || self.role != Role::Follower || self.leader != Some(from) {
            self.become_follower(term, Some(from), now, out);
        }
        self.leader_heard_us = Some(now);
        self.election_due_us = now + self.election_timeout();
        let news = index > self.commit;
        if news {
            self.log.reset_to(index, snap_term);
            self.commit = index;
            self.durable = self.durable.min(index);
            out.records.push(RaftRecord::Base { index, term: snap_term });
            self.appended = true;
        }
        let matched = if news { index } else { self.commit.min(self.log.last_index()) };
        out.messages.push((
            from,
            RaftMsg::AppendResp { term: self.term, success: true, index: matched },
            Send::AfterDurable,
        ));
        self.flush(now, out);
        news
    }
}
