//! A member of a partition's group: its share of the log (Raft), the
//! certifier it runs over the log, and what it serves — reads of its
//! partition, the parts sessions submit, votes for the other partitions of
//! global transactions.

use super::certifier::{Certifier, CertifierConfig, Event, Outcome};
use super::durable::SdurRecord;
use super::entry::{LogEntry, Part, ReadSet, SdurTxId, Snap};
use super::messages::SdurMsg;
use super::{Certification, Sdur, SdurConfig};
use crate::consensus::{Payload, Raft, RaftOut, Send};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{Key, ReadTag, Replica, ReplicaCounters, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, PartitionId, ReplicaId};
use crate::topology::{fnv1a64, Topology};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdurTimer {
    /// The log's heartbeat and election clock, resends, compaction.
    Tick,
    /// Pending globals that lack votes ask for them.
    Resolve,
}

/// A part a session gave this member, until its partition delivers it.
#[derive(Debug)]
struct Submitted {
    part: Box<Part>,
    since: PhysicalMicros,
    /// The leader it was last forwarded to, and when.
    sent: Option<(ReplicaId, PhysicalMicros)>,
}

/// A read, as it arrived or parked: it waits for this member to apply
/// what it must see — the session's floor (a fresh snapshot), or
/// everything its snapshot saw (a later read of a transaction, after a
/// restart that set this member back).
#[derive(Debug)]
struct Parked {
    from: Addr,
    tag: ReadTag,
    keys: Vec<Key>,
    floor: u64,
    snap: Option<Snap>,
}

/// A snapshot being received from the leader.
#[derive(Debug)]
struct Receiving {
    term: u64,
    index: u64,
    next: u32,
    records: Vec<SdurRecord>,
}

/// The most deliveries kept for [`Replica::take_deliveries`] when nobody
/// takes them (outside the simulator).
const MAX_DELIVERIES_KEPT: usize = 4_096;

/// How long a forwarded part waits for its delivery before it is sent to
/// the leader again, in heartbeats.
const RESEND_HEARTBEATS: u64 = 10;

/// A member of a Geo-SDUR group.
#[derive(Debug)]
pub struct SdurReplica {
    id: ReplicaId,
    topology: Arc<Topology>,
    cfg: SdurConfig,
    members: Vec<ReplicaId>,
    raft: Raft<LogEntry>,
    cert: Certifier,
    submitted: BTreeMap<SdurTxId, Submitted>,
    parked: Vec<Parked>,
    /// When each pending global was voted here, for its vote questions.
    pending_since: FxHashMap<SdurTxId, PhysicalMicros>,
    /// Fences this member proposed, and when.
    fences: FxHashMap<SdurTxId, PhysicalMicros>,
    receiving: Option<Receiving>,
    deliveries: Vec<(u64, u64)>,
    refused: u64,
    /// Since when this member has known no leader.
    leaderless_since: Option<PhysicalMicros>,
}

type Out = ReplicaEffects<SdurReplica>;

impl SdurReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, cfg: SdurConfig) -> SdurReplica {
        let (members, preferred) = Sdur::group_of(&topology, id.partition);
        let mut raft_cfg = cfg.raft.clone();
        raft_cfg.preferred.get_or_insert(preferred);
        let raft = Raft::new(id, members.clone(), raft_cfg);
        let cert = Certifier::new(id.partition, Self::certifier_config(&cfg));
        SdurReplica {
            id,
            topology,
            cfg,
            members,
            raft,
            cert,
            submitted: BTreeMap::new(),
            parked: Vec::new(),
            pending_since: FxHashMap::default(),
            fences: FxHashMap::default(),
            receiving: None,
            deliveries: Vec::new(),
            refused: 0,
            leaderless_since: None,
        }
    }

    /// Whether this member has known no leader for an election timeout:
    /// its group has lost its majority (or is electing after a failure),
    /// not merely between two heartbeats.
    fn leaderless(&mut self, now: PhysicalMicros) -> bool {
        if self.raft.leader().is_some() {
            self.leaderless_since = None;
            return false;
        }
        let since = *self.leaderless_since.get_or_insert(now);
        now >= since + self.cfg.raft.election_us
    }

    fn certifier_config(cfg: &SdurConfig) -> CertifierConfig {
        CertifierConfig {
            certification: cfg.certification,
            reorder_threshold: cfg.reorder_threshold,
            retention: cfg.retention_positions,
            commit_timeout_us: cfg.commit_timeout_us,
            clock_allowance_us: cfg.clock_allowance_us,
            fault: cfg.fault,
        }
    }

    /// A member rebuilt from its records: the certifier from the last
    /// complete state among them, the log from Raft's.
    pub fn recover(id: ReplicaId, topology: Arc<Topology>, cfg: SdurConfig, records: Vec<SdurRecord>) -> SdurReplica {
        let mut replica = SdurReplica::new(id, topology, cfg);
        let mut raft_records = Vec::new();
        let mut image: Vec<SdurRecord> = Vec::new();
        let mut expected = 0u32;
        for record in records {
            match record {
                SdurRecord::Raft(r) => raft_records.push(r),
                SdurRecord::Machine(head) => {
                    expected = head.records;
                    image = vec![SdurRecord::Machine(head)];
                    if expected == 0 {
                        replica.take_image(std::mem::take(&mut image));
                    }
                }
                other => {
                    if image.is_empty() {
                        continue;
                    }
                    image.push(other);
                    if image.len() as u32 == expected + 1 {
                        replica.take_image(std::mem::take(&mut image));
                    }
                }
            }
        }
        let mut raft_cfg = replica.cfg.raft.clone();
        raft_cfg.preferred.get_or_insert(Sdur::group_of(&replica.topology, id.partition).1);
        replica.raft = Raft::recover(id, replica.members.clone(), raft_cfg, raft_records);
        replica
    }

    fn take_image(&mut self, records: Vec<SdurRecord>) {
        for record in records {
            self.cert.restore(record);
        }
    }

    /// The members of partition `p`'s group.
    fn group(&self, p: PartitionId) -> &[ReplicaId] {
        self.topology.members_of(p)
    }

    fn carry_out(&mut self, now: PhysicalMicros, rout: RaftOut<LogEntry>, out: &mut Out) {
        for record in rout.records {
            out.persist(SdurRecord::Raft(record));
        }
        for (to, msg, when) in rout.messages {
            let msg = SdurMsg::Raft(msg);
            match when {
                Send::Now => out.send(Addr::Replica(to), msg),
                Send::AfterDurable => out.send_after_durable(Addr::Replica(to), msg),
            }
        }
        for peer in rout.need_snapshot {
            self.send_snapshot(peer, out);
        }
        self.deliver_committed(now, out);
    }

    /// Delivers to the certifier every entry the log committed since.
    fn deliver_committed(&mut self, now: PhysicalMicros, out: &mut Out) {
        let mut events = Vec::new();
        let mut delivered = false;
        while self.cert.processed() < self.raft.commit_index() {
            let pos = self.cert.processed() + 1;
            let Some(entry) = self.raft.log().get(pos) else { break };
            // Borrowed from the log, which keeps it for followers that lag:
            // the certifier copies what it keeps of it.
            let data = match &entry.payload {
                Payload::Data(e) => Some(e),
                Payload::Noop => None,
            };
            let digest = Self::digest(entry.term, entry.time, data);
            self.cert.deliver(pos, entry.time, data, &mut events);
            if self.deliveries.len() >= MAX_DELIVERIES_KEPT {
                self.deliveries.drain(..MAX_DELIVERIES_KEPT / 2);
            }
            self.deliveries.push((pos, digest));
            delivered = true;
        }
        self.on_events(now, events, out);
        if delivered {
            self.settle_submitted(out);
            self.wake_reads(out);
        }
    }

    /// What names an entry: its term, its time (unique along the log) and
    /// its transaction.
    fn digest(term: u64, time: Timestamp, data: Option<&LogEntry>) -> u64 {
        let mut bytes = Vec::with_capacity(48);
        bytes.extend_from_slice(&term.to_le_bytes());
        bytes.extend_from_slice(&time.0.to_le_bytes());
        if let Some(entry) = data {
            let tx = entry.tx();
            bytes.push(u8::from(matches!(entry, LogEntry::Fence(..))));
            bytes.extend_from_slice(&tx.client.dc.0.to_le_bytes());
            bytes.extend_from_slice(&tx.client.index.to_le_bytes());
            bytes.extend_from_slice(&tx.epoch.to_le_bytes());
            bytes.extend_from_slice(&tx.n.to_le_bytes());
        }
        fnv1a64(&bytes)
    }

    fn on_events(&mut self, now: PhysicalMicros, events: Vec<Event>, out: &mut Out) {
        // An entry that ends may let reads waiting for it go.
        let wake = events.iter().any(|e| matches!(e, Event::Done { .. }));
        for event in events {
            match event {
                Event::Voted { tx, to, vote } => {
                    if vote.commit {
                        self.pending_since.insert(tx, now);
                    }
                    let msg = SdurMsg::Vote { tx, from: self.id.partition, vote };
                    let targets: Vec<Addr> =
                        to.iter().flat_map(|&p| self.group(p).iter().map(|&m| Addr::Replica(m))).collect();
                    out.send_all(&targets, msg);
                }
                Event::Done { reply_to, outcome, .. } => {
                    self.pending_since.remove(&outcome.tx);
                    // The member the part came through answers, and so does
                    // any other the session sent it to again.
                    let watched = self.submitted.remove(&outcome.tx).is_some();
                    if reply_to == self.id || watched {
                        out.send(Addr::Client(outcome.tx.client), SdurMsg::Outcome(outcome));
                    }
                }
            }
        }
        if wake {
            self.wake_reads(out);
        }
    }

    /// Parts this member holds that its partition fenced: they abort, and
    /// the session hears so from here (a fenced part never ends as an
    /// entry of its own).
    fn settle_submitted(&mut self, out: &mut Out) {
        let fenced: Vec<SdurTxId> = self.submitted.keys().copied().filter(|tx| self.cert.fenced(tx)).collect();
        for tx in fenced {
            self.submitted.remove(&tx);
            let why = format!("{} gave up waiting for the transaction's other parts", self.id.partition);
            let outcome = Outcome { tx, stamp: None, positions: Vec::new(), why: Some(why) };
            out.send(Addr::Client(tx.client), SdurMsg::Outcome(outcome));
        }
    }

    fn answer_read(&self, from: Addr, tag: ReadTag, keys: &[Key], snap: Snap, out: &mut Out) {
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            match self.cert.read(key, &snap) {
                Ok(v) => values.push(v),
                Err(_) => {
                    out.send(from, SdurMsg::TooOld { tag, partition: self.id.partition });
                    return;
                }
            }
        }
        let prefix = self.cert.prefix();
        out.send(from, SdurMsg::Values { tag, partition: self.id.partition, values, snap, prefix });
    }

    /// Whether a read may be answered now.
    fn ready(&self, floor: u64, snap: Option<&Snap>) -> bool {
        match snap {
            Some(snap) => self.cert.covers(snap),
            None => self.cert.has_applied(floor),
        }
    }

    /// Answers a read arriving, parks it until this member has applied what
    /// it must see, or — with no leader for an election timeout, so
    /// nothing to learn that from — says at once that it cannot.
    fn on_read(&mut self, now: PhysicalMicros, read: Parked, out: &mut Out) {
        if !self.ready(read.floor, read.snap.as_ref()) && self.leaderless(now) {
            out.send(read.from, self.unreadable(read.tag));
            return;
        }
        self.read(read, out);
    }

    fn unreadable(&self, tag: ReadTag) -> SdurMsg {
        let p = self.id.partition;
        let why = format!(
            "{p} has no leader: a majority of its replicas is unreachable, and this one has not applied \
             what the session saw"
        );
        SdurMsg::Unreadable { tag, partition: p, why }
    }

    /// The reads parked here, once this member has been without a leader
    /// for an election timeout: answered that they cannot be, so their
    /// sessions try elsewhere or give up rather than wait for the group.
    fn refuse_parked(&mut self, now: PhysicalMicros, out: &mut Out) {
        if self.parked.is_empty() || !self.leaderless(now) {
            return;
        }
        for p in std::mem::take(&mut self.parked) {
            out.send(p.from, self.unreadable(p.tag));
        }
    }

    /// Answers a read, or parks it until this member has applied what it
    /// must see.
    fn read(&mut self, read: Parked, out: &mut Out) {
        if !self.ready(read.floor, read.snap.as_ref()) {
            self.parked.push(read);
            return;
        }
        let snap = read.snap.unwrap_or_else(|| self.cert.snapshot());
        self.answer_read(read.from, read.tag, &read.keys, snap, out);
    }

    fn wake_reads(&mut self, out: &mut Out) {
        if self.parked.is_empty() {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        for p in parked {
            self.read(p, out);
        }
    }

    /// Proposes `part` if this member leads, or forwards it to the leader.
    fn propose_or_forward(&mut self, now: PhysicalMicros, part: Box<Part>, out: &mut Out) -> Option<ReplicaId> {
        if self.raft.is_leader() {
            let mut rout = RaftOut::default();
            let _ = self.raft.propose(now, LogEntry::Part(part), &mut rout);
            self.raft.flush(now, &mut rout);
            self.carry_out(now, rout, out);
            return Some(self.id);
        }
        let leader = self.raft.leader()?;
        out.send(Addr::Replica(leader), SdurMsg::Forward(part));
        Some(leader)
    }

    fn on_submit(&mut self, now: PhysicalMicros, from: Addr, mut part: Box<Part>, out: &mut Out) {
        let valid = Addr::Client(part.tx.client) == from
            && part.parts.windows(2).all(|w| w[0] < w[1])
            && part.parts.binary_search(&self.id.partition).is_ok()
            && part.parts.iter().all(|p| p.0 < self.topology.partition_count())
            && part.writes.iter().all(|(k, _)| self.topology.partition_of(k) == self.id.partition)
            && part.reads.keys().is_none_or(|ks| ks.iter().all(|k| self.topology.partition_of(k) == self.id.partition))
            && part.snap.is_well_formed()
            && self.read_set_fits(&part.reads);
        if !valid {
            self.refused += 1;
            return;
        }
        part.reply_to = self.id;
        if let Some(outcome) = self.cert.outcome_of(&part.tx) {
            // A session asking again for what already ended.
            out.send(from, SdurMsg::Outcome(outcome));
            return;
        }
        if self.submitted.contains_key(&part.tx) {
            return;
        }
        let tx = part.tx;
        if !self.cert.delivered(&tx) && self.leaderless(now) {
            // No leader to propose it to: say so at once, and keep nothing
            // of it — no member but this one has it yet (the session sends
            // a part to another member only after a silence), so the
            // transaction cannot commit, and the session may say so.
            let why = format!("{} has no leader: a majority of its replicas is unreachable", self.id.partition);
            out.send(from, SdurMsg::Refused { tx, partition: self.id.partition, why });
            return;
        }
        if self.cert.delivered(&tx) {
            // Sent again (its first member went silent): answer once it ends.
            self.submitted.insert(tx, Submitted { part, since: now, sent: Some((self.id, now)) });
            return;
        }
        let sent = self.propose_or_forward(now, part.clone(), out).map(|l| (l, now));
        self.submitted.insert(tx, Submitted { part, since: now, sent });
    }

    /// Whether a read set is of the kind this cluster certifies with, and a
    /// filter one this member would make (bounded: a hostile one must not
    /// make it allocate or probe without end, nor divide by zero).
    fn read_set_fits(&self, reads: &ReadSet) -> bool {
        match (reads, self.cfg.certification) {
            (ReadSet::Keys(_), Certification::Exact) => true,
            (ReadSet::Filter { filter, .. }, Certification::Bloom { bits, .. }) => filter.is_well_formed(bits),
            _ => false,
        }
    }

    /// Resends the parts the log has not delivered to the leader there is
    /// now; gives up those that never found one.
    fn resend(&mut self, now: PhysicalMicros, out: &mut Out) {
        let resend_after = self.cfg.raft.heartbeat_us * RESEND_HEARTBEATS;
        let leader = self.raft.leader();
        let txs: Vec<SdurTxId> = self.submitted.keys().copied().collect();
        for tx in txs {
            if self.cert.delivered(&tx) {
                continue;
            }
            let s = self.submitted.get(&tx).expect("listed");
            let due = match (s.sent, leader) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some((to, at)), Some(l)) => to != l || now >= at + resend_after,
            };
            if due {
                let part = s.part.clone();
                let sent = self.propose_or_forward(now, part, out).map(|l| (l, now));
                if let Some(s) = self.submitted.get_mut(&tx) {
                    s.sent = sent.or(s.sent);
                }
                continue;
            }
            if now >= s.since + self.cfg.commit_timeout_us {
                // The session has given it up by now (its outcome unknown).
                self.submitted.remove(&tx);
            }
        }
    }

    /// Asks for the votes pending globals lack.
    fn ask_votes(&mut self, now: PhysicalMicros, out: &mut Out) {
        for (tx, parts, missing, deadline) in self.cert.missing_votes() {
            let since = *self.pending_since.entry(tx).or_insert(now);
            if now < since + self.cfg.resolve_after_us || missing.is_empty() {
                continue;
            }
            // The members of the partitions whose votes it lacks, and of
            // its own group (which may hold them, if this one lost them).
            let targets: Vec<Addr> = missing
                .iter()
                .chain(std::iter::once(&self.id.partition))
                .flat_map(|&p| self.group(p).iter().copied())
                .filter(|&m| m != self.id)
                .map(Addr::Replica)
                .collect();
            out.send_all(&targets, SdurMsg::VoteAsk { tx, parts, deadline });
        }
        let pending: std::collections::BTreeSet<SdurTxId> =
            self.cert.missing_votes().into_iter().map(|(tx, ..)| tx).collect();
        self.pending_since.retain(|tx, _| pending.contains(tx));
        let keep = 4 * self.cfg.resolve_after_us;
        self.fences.retain(|_, at| now < *at + keep);
    }

    fn on_vote_ask(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: SdurTxId,
        parts: Vec<PartitionId>,
        deadline: u64,
        out: &mut Out,
    ) {
        let from_group = matches!(from, Addr::Replica(r) if r.partition == self.id.partition);
        if from_group {
            // A member of this group lost the votes it had: give it ours.
            let votes = self.cert.votes_of(&tx);
            if !votes.is_empty() {
                out.send(from, SdurMsg::Votes { tx, votes });
            }
            return;
        }
        if let Some(vote) = self.cert.vote_of(&tx) {
            out.send(from, SdurMsg::Vote { tx, from: self.id.partition, vote });
            return;
        }
        let valid = parts.windows(2).all(|w| w[0] < w[1])
            && parts.binary_search(&self.id.partition).is_ok()
            && parts.iter().all(|p| p.0 < self.topology.partition_count());
        if !valid {
            self.refused += 1;
            return;
        }
        // Never fence what may have been delivered here and forgotten: its
        // part may have committed.
        if self.cert.delivered(&tx)
            || !self.cert.may_fence(deadline)
            || !self.raft.is_leader()
            || self.fences.get(&tx).is_some_and(|&at| now < at + self.cfg.resolve_after_us)
        {
            return;
        }
        self.fences.insert(tx, now);
        let mut rout = RaftOut::default();
        let _ = self.raft.propose(now, LogEntry::Fence(tx, parts), &mut rout);
        self.raft.flush(now, &mut rout);
        self.carry_out(now, rout, out);
    }

    fn send_snapshot(&mut self, peer: ReplicaId, out: &mut Out) {
        let index = self.cert.processed();
        let Some(snap_term) = self.raft.log().term_at(index) else { return };
        let records = self.cert.image();
        let n = records.len();
        for (seq, record) in records.into_iter().enumerate() {
            let msg = SdurMsg::Snapshot {
                term: self.raft.term(),
                index,
                snap_term,
                seq: seq as u32,
                last: seq + 1 == n,
                records: vec![record],
            };
            out.send(Addr::Replica(peer), msg);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_snapshot(
        &mut self,
        now: PhysicalMicros,
        from: ReplicaId,
        term: u64,
        index: u64,
        snap_term: u64,
        seq: u32,
        last: bool,
        records: Vec<SdurRecord>,
        out: &mut Out,
    ) {
        if term < self.raft.term() {
            return;
        }
        if seq == 0 {
            self.receiving = Some(Receiving { term, index, next: 0, records: Vec::new() });
        }
        let Some(r) = self.receiving.as_mut() else { return };
        if r.term != term || r.index != index || r.next != seq {
            self.receiving = None;
            return;
        }
        r.next += 1;
        r.records.extend(records);
        if !last {
            return;
        }
        let r = self.receiving.take().expect("receiving");
        let complete = match r.records.first() {
            Some(SdurRecord::Machine(head)) => head.records as usize + 1 == r.records.len() && head.processed == index,
            _ => false,
        };
        if !complete {
            self.refused += 1;
            return;
        }
        let mut rout = RaftOut::default();
        if !self.raft.install_snapshot(now, from, term, index, snap_term, &mut rout) {
            self.carry_out(now, rout, out);
            return;
        }
        let mut cert = Certifier::new(self.id.partition, Self::certifier_config(&self.cfg));
        for record in r.records.iter().cloned() {
            cert.restore(record);
        }
        self.cert = cert;
        for record in r.records {
            out.persist(record);
        }
        self.carry_out(now, rout, out);
        self.wake_reads(out);
    }

    fn compact(&mut self, now: PhysicalMicros) {
        let target = self.cert.processed().min(self.raft.compaction_floor(now));
        let keep = (self.cfg.retention_positions / 4).max(1_024);
        if target >= self.raft.log().base_index() + keep {
            self.raft.compact(target);
        }
    }
}

impl Replica for SdurReplica {
    type Message = SdurMsg;
    type Timer = SdurTimer;
    type Record = SdurRecord;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut Out) {
        let mut rout = RaftOut::default();
        self.raft.start(now, &mut rout);
        self.carry_out(now, rout, out);
        out.set_timer(SdurTimer::Tick, (self.cfg.raft.heartbeat_us / 2).max(1));
        out.set_timer(SdurTimer::Resolve, (self.cfg.resolve_after_us / 4).max(1));
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: SdurMsg, out: &mut Out) {
        let from_member = match from {
            Addr::Replica(r) if self.members.contains(&r) => Some(r),
            _ => None,
        };
        let from_replica = matches!(from, Addr::Replica(_));
        match msg {
            SdurMsg::Raft(m) => {
                let Some(r) = from_member else {
                    self.refused += 1;
                    return;
                };
                let mut rout = RaftOut::default();
                self.raft.on_message(now, r, m, &mut rout);
                self.carry_out(now, rout, out);
            }
            SdurMsg::Read { tag, keys, snap, floor } => {
                if from_replica || keys.iter().any(|k| self.topology.partition_of(k) != self.id.partition) {
                    self.refused += 1;
                    return;
                }
                if snap.as_ref().is_some_and(|s| !s.is_well_formed()) {
                    self.refused += 1;
                    return;
                }
                self.on_read(now, Parked { from, tag, keys, floor, snap }, out);
            }
            SdurMsg::Submit(part) => {
                if from_replica {
                    self.refused += 1;
                    return;
                }
                self.on_submit(now, from, part, out);
            }
            SdurMsg::Forward(part) => {
                if from_member.is_none() || !part.parts.contains(&self.id.partition) {
                    self.refused += 1;
                    return;
                }
                if self.raft.is_leader() && !self.cert.delivered(&part.tx) {
                    let mut rout = RaftOut::default();
                    let _ = self.raft.propose(now, LogEntry::Part(part), &mut rout);
                    self.raft.flush(now, &mut rout);
                    self.carry_out(now, rout, out);
                }
            }
            SdurMsg::Vote { tx, from: partition, vote } => {
                let legit =
                    matches!(from, Addr::Replica(r) if r.partition == partition && partition != self.id.partition);
                if !legit {
                    self.refused += 1;
                    return;
                }
                let mut events = Vec::new();
                self.cert.on_vote(tx, partition, vote, &mut events);
                self.on_events(now, events, out);
            }
            SdurMsg::Votes { tx, votes } => {
                if from_member.is_none() {
                    self.refused += 1;
                    return;
                }
                let mut events = Vec::new();
                for (partition, vote) in votes {
                    if partition != self.id.partition {
                        self.cert.on_vote(tx, partition, vote, &mut events);
                    }
                }
                self.on_events(now, events, out);
            }
            SdurMsg::VoteAsk { tx, parts, deadline } => {
                if !from_replica {
                    self.refused += 1;
                    return;
                }
                self.on_vote_ask(now, from, tx, parts, deadline, out);
            }
            SdurMsg::Snapshot { term, index, snap_term, seq, last, records } => {
                let Some(r) = from_member else {
                    self.refused += 1;
                    return;
                };
                self.on_snapshot(now, r, term, index, snap_term, seq, last, records, out);
            }
            SdurMsg::Values { .. }
            | SdurMsg::TooOld { .. }
            | SdurMsg::Unreadable { .. }
            | SdurMsg::Outcome(_)
            | SdurMsg::Refused { .. } => {
                // Answers meant for a session.
                self.refused += 1;
            }
        }
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: SdurTimer, out: &mut Out) {
        match timer {
            SdurTimer::Tick => {
                self.leaderless(now);
                let mut rout = RaftOut::default();
                self.raft.tick(now, &mut rout);
                self.carry_out(now, rout, out);
                self.refuse_parked(now, out);
                self.resend(now, out);
                self.compact(now);
                out.set_timer(SdurTimer::Tick, (self.cfg.raft.heartbeat_us / 2).max(1));
            }
            SdurTimer::Resolve => {
                self.ask_votes(now, out);
                out.set_timer(SdurTimer::Resolve, (self.cfg.resolve_after_us / 4).max(1));
            }
        }
    }

    fn on_peer_lost(&mut self, now: PhysicalMicros, from: Addr, out: &mut Out) {
        // The log resends what a follower lacks on its own; parts and vote
        // questions lost on the way are sent again now rather than at their
        // timeouts.
        let _ = from;
        self.resend(now, out);
        self.ask_votes(now, out);
    }

    fn checkpoint(&self) -> Vec<SdurRecord> {
        let mut records = self.cert.image();
        records.extend(self.raft.checkpoint().into_iter().map(SdurRecord::Raft));
        records
    }

    fn is_quiescent(&self) -> bool {
        self.cert.is_quiescent()
            && self.submitted.is_empty()
            && self.parked.is_empty()
            && self.cert.processed() == self.raft.commit_index()
            && (!self.raft.is_leader() || self.raft.commit_index() == self.raft.log().last_index())
    }

    fn latest_values(&self) -> Vec<(Key, Value)> {
        self.cert.store().latest()
    }

    fn counters(&self) -> ReplicaCounters {
        let c = self.cert.counters();
        ReplicaCounters {
            versions: self.cert.store().version_count(),
            versions_collected: self.cert.store().collected_count(),
            contexts_expired: 0,
            transactions_applied: c.committed,
            inputs_refused: self.refused + self.raft.refused() + c.votes_refused,
        }
    }

    fn visible_upto(&self, _origin: DcId) -> Timestamp {
        self.cert.max_ts()
    }

    fn version_metadata_bytes(&self) -> u64 {
        // The position a version was applied at.
        8
    }

    fn leads(&self) -> bool {
        self.raft.is_leader()
    }

    fn take_deliveries(&mut self, out: &mut Vec<(u64, u64)>) {
        out.append(&mut self.deliveries);
    }
}
