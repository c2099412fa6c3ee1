//! Geo-SDUR's side of a session (steps 1 to 3 and 8): reads at a member of
//! each partition, a snapshot per partition, the parts of a commit sent to
//! every partition touched (a global's delayed where it would arrive
//! early), and what the session carries between transactions — how far it
//! must find each partition applied (its last commit there, and what it
//! read) and its newest commit timestamp.

use super::bloom::Bloom;
use super::certifier::Outcome;
use super::entry::{Part, ReadSet, SdurTxId, Snap};
use super::messages::{ReadValue, SdurMsg};
use super::{Certification, Delaying, Sdur, SdurConfig};
use crate::contract::{AbortReason, CommitStamp, Effects, Key, ReadTag, SessionError, SessionSetup, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, ClientId, PartitionId, ReplicaId};
use crate::session_core::{Awaiting, ClientRole, Reply, SessionCore};
use crate::topology::Topology;
use crate::write_only::WtxId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A Geo-SDUR session.
pub type SdurSession = SessionCore<SdurClient>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdurClientTimer {
    /// Read round `round` of transaction `n` has not been answered in time.
    ReadTimeout(u64, u32),
    /// Read round `round` of transaction `n` asks the partitions that have
    /// not answered again, at another member (attempt `k`).
    ReadRetry(u64, u32, u32),
    /// The commit of transaction `n` is sent again to other members
    /// (attempt `k`): its members may have gone down with it.
    Resubmit(u64, u32),
    /// The delayed part for a partition of transaction `n` may leave.
    Delayed(u64, PartitionId),
    /// The commit of transaction `n` has not been answered in time.
    CommitTimeout(u64),
}

/// What a session token carries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SdurSessionState {
    /// Per partition, the position its member must have applied before it
    /// answers this session's first read there.
    pub floors: BTreeMap<PartitionId, u64>,
    /// The newest commit timestamp the session committed or read.
    pub last_ts: Timestamp,
}

#[derive(Debug)]
struct Reading {
    round: u32,
    keys: BTreeMap<PartitionId, Vec<Key>>,
    waiting: BTreeSet<PartitionId>,
    values: Vec<(Key, Option<Value>)>,
}

#[derive(Debug)]
struct Committing {
    tx: SdurTxId,
    /// When the session gives the commit up (its clock).
    deadline: PhysicalMicros,
    writes: Vec<(Key, Option<Value>)>,
    /// Partitions written but not read, whose snapshots are still to come
    /// (step 3: a part certified without one could miss what it writes
    /// over).
    snapshots: BTreeSet<PartitionId>,
    /// Every part, once built (for resending).
    parts: BTreeMap<PartitionId, Box<Part>>,
    /// Parts held back by delaying.
    delayed: BTreeSet<PartitionId>,
    /// Whether a part went to a second member: a refusal by the first no
    /// longer proves that nobody proposed it.
    resent: bool,
}

/// The read round of the snapshots a commit asks for.
const SNAPSHOT_ROUND: u32 = u32::MAX;

type Out = Effects<SdurMsg, SdurClientTimer>;

#[derive(Debug)]
pub struct SdurClient {
    id: ClientId,
    topology: Arc<Topology>,
    cfg: SdurConfig,
    epoch: u64,
    n: u64,
    state: SdurSessionState,
    /// The running transaction: its snapshot of each partition it read,
    /// its keys read there, and the newest stamp it read.
    snaps: BTreeMap<PartitionId, Snap>,
    read_keys: BTreeMap<PartitionId, Vec<Key>>,
    read_ts: Timestamp,
    reading: Option<Reading>,
    committing: Option<Committing>,
}

impl SdurClient {
    pub fn new(setup: &SessionSetup, cfg: SdurConfig) -> SdurClient {
        SdurClient {
            id: setup.id,
            topology: setup.topology.clone(),
            cfg,
            epoch: 0,
            n: 0,
            state: SdurSessionState::default(),
            snaps: BTreeMap::new(),
            read_keys: BTreeMap::new(),
            read_ts: Timestamp::ZERO,
            reading: None,
            committing: None,
        }
    }

    /// The member this session reads partition `p` at and sends its parts
    /// to: the first in its own DC, or in the DC that serves it.
    fn member_for(&self, p: PartitionId) -> ReplicaId {
        let dc = self.topology.serving_dc(self.id.dc, p);
        self.topology.members_in(dc, p).next().expect("a serving DC holds a member")
    }

    /// The member to try at attempt `k` (0: the usual one), going round
    /// the group: nearest first.
    fn member_at(&self, p: PartitionId, k: u32) -> ReplicaId {
        let first = self.member_for(p);
        let members = self.topology.members_of(p);
        let mut order: Vec<ReplicaId> = vec![first];
        order.extend(members.iter().copied().filter(|m| m.dc == self.id.dc && *m != first));
        order.extend(members.iter().copied().filter(|m| m.dc != self.id.dc && *m != first));
        order[k as usize % order.len()]
    }

    fn tx(&self) -> SdurTxId {
        WtxId { client: self.id, epoch: self.epoch, n: self.n }
    }

    fn read_set(&self, keys: Vec<Key>) -> ReadSet {
        match self.cfg.certification {
            Certification::Exact => ReadSet::Keys(keys),
            Certification::Bloom { bits, hashes, audit, .. } => {
                let filter = Bloom::of(keys.iter().map(|k| k.as_ref()), bits, hashes);
                ReadSet::Filter { filter, audit: audit.then_some(keys) }
            }
        }
    }

    /// How long each part of a global waits before it leaves (step 8).
    fn delays(&self, parts: &[PartitionId]) -> BTreeMap<PartitionId, u64> {
        if parts.len() < 2 {
            return BTreeMap::new();
        }
        match &self.cfg.delaying {
            Delaying::Off => BTreeMap::new(),
            Delaying::Fixed { delay_us } => {
                // Near: the partition's preferred leader is in this DC; a
                // near partition delivers first.
                let near: Vec<PartitionId> =
                    parts.iter().copied().filter(|&p| Sdur::group_of(&self.topology, p).1.dc == self.id.dc).collect();
                if near.is_empty() || near.len() == parts.len() {
                    return BTreeMap::new();
                }
                near.into_iter().map(|p| (p, *delay_us)).collect()
            }
            Delaying::FromRtt { rtt_us } => {
                let est = |p: PartitionId| Sdur::delivery_us(&self.topology, rtt_us, self.id.dc, p);
                let far = parts.iter().map(|&p| est(p)).max().unwrap_or(0);
                parts.iter().map(|&p| (p, far - est(p))).filter(|&(_, d)| d > 0).collect()
            }
        }
    }

    fn send_read(&self, tag: ReadTag, p: PartitionId, keys: Vec<Key>, attempt: u32, out: &mut Out) {
        let floor = self.state.floors.get(&p).copied().unwrap_or(0);
        let snap = if tag.round == SNAPSHOT_ROUND { None } else { self.snaps.get(&p).cloned() };
        out.send(Addr::Replica(self.member_at(p, attempt)), SdurMsg::Read { tag, keys, snap, floor });
    }

    /// Once every partition written has a snapshot: builds the parts and
    /// sends them (a global's delayed where it would arrive early).
    fn submit_if_ready(&mut self, out: &mut Out) {
        let Some(c) = self.committing.as_ref() else { return };
        if !c.snapshots.is_empty() || !c.parts.is_empty() {
            return;
        }
        let mut by_partition = self.topology.group_by_partition(c.writes.clone(), |(k, _)| k);
        for &p in self.read_keys.keys() {
            by_partition.entry(p).or_default();
        }
        let partitions: Vec<PartitionId> = by_partition.keys().copied().collect();
        let deps =
            self.read_ts.max(self.state.last_ts).max(self.snaps.values().map(|s| s.ts).max().unwrap_or_default());
        let delays = self.delays(&partitions);
        let (tx, deadline) = (c.tx, c.deadline);
        let mut parts = BTreeMap::new();
        let mut delayed = BTreeSet::new();
        for (p, writes) in by_partition {
            let snap = self.snaps.get(&p).cloned().expect("every partition touched has a snapshot by now");
            let reads = self.read_set(self.read_keys.get(&p).cloned().unwrap_or_default());
            let member = self.member_for(p);
            let part = Box::new(Part {
                tx,
                origin: self.id.dc,
                parts: partitions.clone(),
                snap,
                reads,
                writes,
                deps,
                reply_to: member,
                deadline,
            });
            match delays.get(&p) {
                Some(&d) => {
                    delayed.insert(p);
                    out.set_timer(SdurClientTimer::Delayed(self.n, p), d);
                }
                None => out.send(Addr::Replica(member), SdurMsg::Submit(part.clone())),
            }
            parts.insert(p, part);
        }
        let c = self.committing.as_mut().expect("committing");
        c.parts = parts;
        c.delayed = delayed;
    }

    fn on_values(
        &mut self,
        tag: ReadTag,
        partition: PartitionId,
        values: Vec<ReadValue>,
        snap: Snap,
        prefix: u64,
    ) -> Option<Reply> {
        let reading = self.reading.as_mut()?;
        if tag != (ReadTag { tx: self.n, round: reading.round }) || !reading.waiting.contains(&partition) {
            return None;
        }
        let keys = reading.keys.get(&partition)?;
        if values.len() != keys.len() || !snap.is_well_formed() {
            return None;
        }
        reading.waiting.remove(&partition);
        for (key, value) in keys.iter().zip(values) {
            let (value, ts) = match value {
                Some((v, stamp)) => (v, stamp.ts),
                None => (None, Timestamp::ZERO),
            };
            self.read_ts = self.read_ts.max(ts);
            reading.values.push((key.clone(), value));
            self.read_keys.entry(partition).or_default().push(key.clone());
        }
        let floor = self.state.floors.entry(partition).or_default();
        *floor = (*floor).max(prefix);
        self.snaps.entry(partition).or_insert(snap);
        if !reading.waiting.is_empty() {
            return None;
        }
        let done = self.reading.take().expect("reading");
        Some(Reply::Values(done.values))
    }

    fn on_outcome(&mut self, outcome: Outcome) -> Option<Reply> {
        if self.committing.as_ref()?.tx != outcome.tx {
            return None;
        }
        self.committing = None;
        match outcome.stamp {
            Some(stamp) => {
                for (p, pos) in outcome.positions {
                    let floor = self.state.floors.entry(p).or_default();
                    *floor = (*floor).max(pos);
                }
                self.state.last_ts = self.state.last_ts.max(stamp.ts);
                Some(Reply::Committed(stamp))
            }
            None => {
                let why = outcome.why.unwrap_or_else(|| "certification failed".into());
                Some(Reply::Aborted(AbortReason::Conflict(why)))
            }
        }
    }
}

impl ClientRole for SdurClient {
    type Message = SdurMsg;
    type Timer = SdurClientTimer;
    type State = SdurSessionState;

    const CERTIFIES_READS: bool = true;

    fn start(&mut self, now: PhysicalMicros, _out: &mut Out) -> bool {
        if self.epoch == 0 {
            self.epoch = now.max(1);
        }
        self.n += 1;
        self.snaps.clear();
        self.read_keys.clear();
        self.read_ts = Timestamp::ZERO;
        true
    }

    fn request_read(&mut self, _now: PhysicalMicros, round: u32, keys: Vec<Key>, out: &mut Out) {
        let by_partition = self.topology.group_by_partition(keys, |k| k);
        let tag = ReadTag { tx: self.n, round };
        for (&p, keys) in &by_partition {
            self.send_read(tag, p, keys.clone(), 0, out);
        }
        let waiting = by_partition.keys().copied().collect();
        self.reading = Some(Reading { round, keys: by_partition, waiting, values: Vec::new() });
        out.set_timer(SdurClientTimer::ReadTimeout(self.n, round), self.cfg.read_timeout_us);
        out.set_timer(SdurClientTimer::ReadRetry(self.n, round, 1), self.cfg.retry_after_us);
    }

    fn request_commit(&mut self, now: PhysicalMicros, writes: &[(Key, Option<Value>)], out: &mut Out) {
        let written = self.topology.group_by_partition(writes.to_vec(), |(k, _)| k);
        let snapshots: BTreeSet<PartitionId> =
            written.keys().copied().filter(|p| !self.snaps.contains_key(p)).collect();
        let tx = self.tx();
        // A partition written but not read needs a snapshot first: ask its
        // member for one (a read of no key).
        let tag = ReadTag { tx: self.n, round: SNAPSHOT_ROUND };
        for &p in &snapshots {
            self.send_read(tag, p, Vec::new(), 0, out);
        }
        self.committing = Some(Committing {
            tx,
            deadline: now + self.cfg.commit_timeout_us,
            writes: writes.to_vec(),
            snapshots,
            parts: BTreeMap::new(),
            delayed: BTreeSet::new(),
            resent: false,
        });
        out.set_timer(SdurClientTimer::CommitTimeout(self.n), self.cfg.commit_timeout_us);
        out.set_timer(SdurClientTimer::Resubmit(self.n, 1), self.cfg.retry_after_us);
        self.submit_if_ready(out);
    }

    fn release(&mut self, _now: PhysicalMicros, _out: &mut Out) {
        self.reading = None;
        self.committing = None;
    }

    fn on_reply(
        &mut self,
        _now: PhysicalMicros,
        from: Addr,
        msg: SdurMsg,
        awaiting: Awaiting,
        out: &mut Out,
    ) -> Option<Reply> {
        let Addr::Replica(member) = from else { return None };
        match (msg, awaiting) {
            (SdurMsg::Values { tag, partition, values, snap, prefix }, Awaiting::Read)
                if member.partition == partition =>
            {
                self.on_values(tag, partition, values, snap, prefix)
            }
            (SdurMsg::TooOld { tag, partition }, Awaiting::Read) if member.partition == partition => {
                let reading = self.reading.as_ref()?;
                if tag != (ReadTag { tx: self.n, round: reading.round }) {
                    return None;
                }
                self.reading = None;
                let why = format!("{partition} no longer keeps the snapshot it read there");
                Some(Reply::Aborted(AbortReason::Expired(why)))
            }
            (SdurMsg::Values { tag, partition, snap, prefix, .. }, Awaiting::Commit)
                if member.partition == partition && tag == (ReadTag { tx: self.n, round: SNAPSHOT_ROUND }) =>
            {
                let c = self.committing.as_mut()?;
                if !c.snapshots.remove(&partition) || !snap.is_well_formed() {
                    return None;
                }
                let floor = self.state.floors.entry(partition).or_default();
                *floor = (*floor).max(prefix);
                self.snaps.insert(partition, snap);
                self.submit_if_ready(out);
                None
            }
            // A member that cannot answer has had no leader for an election
            // timeout: a majority of its group is out of its reach, and of
            // this session's (the nearest member), so the transaction could
            // not commit either. It ends at once, unavailable, rather than
            // at its timeout.
            (SdurMsg::Unreadable { tag, partition, why }, Awaiting::Read) if member.partition == partition => {
                let reading = self.reading.as_ref()?;
                if tag != (ReadTag { tx: self.n, round: reading.round }) || !reading.waiting.contains(&partition) {
                    return None;
                }
                self.reading = None;
                Some(Reply::Aborted(AbortReason::Unavailable(why)))
            }
            (SdurMsg::Unreadable { tag, partition, why }, Awaiting::Commit)
                if member.partition == partition && tag == (ReadTag { tx: self.n, round: SNAPSHOT_ROUND }) =>
            {
                // Nothing is submitted before every snapshot is in: giving
                // up here aborts a transaction no partition has seen.
                let c = self.committing.as_ref()?;
                if !c.snapshots.contains(&partition) || !c.parts.is_empty() {
                    return None;
                }
                self.committing = None;
                Some(Reply::Aborted(AbortReason::Unavailable(why)))
            }
            (SdurMsg::Outcome(outcome), Awaiting::Commit) => self.on_outcome(outcome),
            (SdurMsg::Refused { tx, why, .. }, Awaiting::Commit) => {
                let c = self.committing.as_ref()?;
                if c.tx != tx || c.resent {
                    return None;
                }
                self.committing = None;
                Some(Reply::Aborted(AbortReason::Unavailable(why)))
            }
            _ => None,
        }
    }

    fn on_timer(
        &mut self,
        _now: PhysicalMicros,
        timer: SdurClientTimer,
        awaiting: Option<Awaiting>,
        out: &mut Out,
    ) -> Option<Reply> {
        match timer {
            SdurClientTimer::ReadTimeout(n, round) => {
                let reading = self.reading.as_ref()?;
                if n != self.n || reading.round != round || awaiting != Some(Awaiting::Read) {
                    return None;
                }
                let silent: Vec<String> = reading.waiting.iter().map(ToString::to_string).collect();
                self.reading = None;
                Some(Reply::Aborted(AbortReason::Unavailable(format!(
                    "{} did not answer a read in time",
                    silent.join(", ")
                ))))
            }
            SdurClientTimer::ReadRetry(n, round, k) => {
                let reading = self.reading.as_ref()?;
                if n != self.n || reading.round != round || awaiting != Some(Awaiting::Read) {
                    return None;
                }
                let tag = ReadTag { tx: n, round };
                let again: Vec<(PartitionId, Vec<Key>)> =
                    reading.waiting.iter().map(|p| (*p, reading.keys.get(p).cloned().unwrap_or_default())).collect();
                for (p, keys) in again {
                    self.send_read(tag, p, keys, k, out);
                }
                out.set_timer(SdurClientTimer::ReadRetry(n, round, k + 1), self.cfg.retry_after_us);
                None
            }
            SdurClientTimer::Resubmit(n, k) => {
                let c = self.committing.as_ref()?;
                if n != self.n || awaiting != Some(Awaiting::Commit) {
                    return None;
                }
                // Snapshots not yet in, at another member; parts sent, again
                // at another (a part is delivered once, whoever sends it).
                let tag = ReadTag { tx: n, round: SNAPSHOT_ROUND };
                for &p in &c.snapshots {
                    self.send_read(tag, p, Vec::new(), k, out);
                }
                for (&p, part) in &c.parts {
                    if !c.delayed.contains(&p) {
                        out.send(Addr::Replica(self.member_at(p, k)), SdurMsg::Submit(part.clone()));
                    }
                }
                if !c.parts.is_empty() {
                    self.committing.as_mut().expect("committing").resent = true;
                }
                out.set_timer(SdurClientTimer::Resubmit(n, k + 1), self.cfg.retry_after_us);
                None
            }
            SdurClientTimer::Delayed(n, p) => {
                if n != self.n {
                    return None;
                }
                let c = self.committing.as_mut()?;
                if !c.delayed.remove(&p) {
                    return None;
                }
                let part = c.parts.get(&p)?.clone();
                out.send(Addr::Replica(self.member_for(p)), SdurMsg::Submit(part));
                None
            }
            SdurClientTimer::CommitTimeout(n) => {
                if n != self.n || awaiting != Some(Awaiting::Commit) || self.committing.is_none() {
                    return None;
                }
                self.committing = None;
                Some(Reply::Failed(SessionError::OutcomeUnknown))
            }
        }
    }

    fn committed(&mut self, stamp: &CommitStamp, _writes: Vec<(Key, Option<Value>)>) {
        self.state.last_ts = self.state.last_ts.max(stamp.ts);
    }

    fn finished(&mut self) {
        self.reading = None;
        self.committing = None;
    }

    fn export_state(&self) -> SdurSessionState {
        let mut state = self.state.clone();
        state.last_ts = state.last_ts.max(self.read_ts);
        state
    }

    fn import_state(&mut self, state: SdurSessionState) -> Result<(), SessionError> {
        for (p, pos) in state.floors {
            if p.0 >= self.topology.partition_count() {
                return Err(SessionError::InvalidArgument(format!("the session names {p}, which this cluster lacks")));
            }
            let floor = self.state.floors.entry(p).or_default();
            *floor = (*floor).max(pos);
        }
        self.state.last_ts = self.state.last_ts.max(state.last_ts);
        Ok(())
    }
}
