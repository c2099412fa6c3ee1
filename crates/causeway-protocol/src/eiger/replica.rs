//! An Eiger partition: the newest version of each key with its validity
//! interval (a first round), the version of a key at a time (a second), the
//! outcome of a transaction it coordinates (a third); write-only
//! transactions ([`crate::write_only`]), each installed as soon as its
//! commit is durable.

use super::durable::{EigerRecord, PreparedTx};
use super::messages::{AtTime, EigerDeps, EigerMsg, OpenWrite, Valid};
use super::{EigerConfig, EigerFault, MAX_DEPS};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{CommitStamp, Key, ReadTag, Replica, ReplicaCounters, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, ClientId, DcId, PartitionId, ReplicaId};
use crate::mvstore::{CollectedMarks, MvStore, Version};
use crate::recovery::Reservations;
use crate::topology::Topology;
use crate::write_only::{commit_ts, horizon, stamp_of, Decided, Refused, Rules, Status, WriteOnly, WtxId};
use rustc_hash::FxHashMap;
use std::sync::Arc;

type Out = ReplicaEffects<EigerReplica>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EigerTimer {
    /// Ask the coordinators of transactions prepared too long ago; forget
    /// what is no longer needed.
    Resolve,
}

/// Third-round questions a coordinator holds, at most, and from one client:
/// beyond, new ones are dropped (their readers time out and start again).
const MAX_ASKED: usize = 65_536;
const MAX_ASKED_PER_CLIENT: usize = 1_024;

/// The longest key a dependency names (a client's limit on keys).
const MAX_DEP_KEY_BYTES: usize = 1024;

/// Each commit installed as soon as durable; commits acknowledged to their
/// coordinator, which forgets them once every participant has (no stable
/// time says when that is).
const EIGER_RULES: Rules = Rules { in_order: false, acknowledged: true, gathered: false, decisions: true };

/// A third-round question waiting for its transaction's decision.
#[derive(Debug)]
struct Asked {
    from: Addr,
    tag: ReadTag,
    since: PhysicalMicros,
}

pub struct EigerReplica {
    id: ReplicaId,
    topology: Arc<Topology>,
    config: EigerConfig,
    /// The partition's Lamport clock, kept as a hybrid clock: it also
    /// follows physical time, so that timestamps of different partitions
    /// are close and the transaction timeout can be counted in them.
    hlc: Hlc,
    reserved: Reservations,
    /// Versions, each with when it was installed here (0: before the last
    /// restart).
    store: MvStore<PhysicalMicros>,
    txns: WriteOnly<EigerDeps>,
    /// Per key, the stamp of the newest version collected: a read at a
    /// time that would return something older — or nothing — may have
    /// needed it, and answers `TooOld` instead.
    collected: CollectedMarks,
    /// Third-round questions about transactions not yet decided here.
    asked: FxHashMap<WtxId, Vec<Asked>>,
    asked_count: usize,
    asked_by: FxHashMap<Addr, usize>,
    started_at: PhysicalMicros,
    counters: ReplicaCounters,
}

impl EigerReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: EigerConfig) -> Self {
        EigerReplica {
            id,
            hlc: Hlc::new(),
            reserved: Reservations::default(),
            store: MvStore::keeping_tombstones(),
            txns: WriteOnly::new(id, topology.partition_count(), config.resolve_after_us, EIGER_RULES),
            collected: CollectedMarks::default(),
            asked: FxHashMap::default(),
            asked_count: 0,
            asked_by: FxHashMap::default(),
            started_at: 0,
            counters: ReplicaCounters::default(),
            topology,
            config,
        }
    }

    fn is_mine(&self, key: &[u8]) -> bool {
        self.topology.partition_of(key) == self.id.partition
    }

    /// The transactions still open here that write `key`: each with its
    /// commit timestamp if decided, else the number it got here (its
    /// commit timestamp will be at or above it).
    fn open_writes<'a>(&'a self, key: &'a [u8]) -> impl Iterator<Item = (&'a PreparedTx, Option<&'a Decided>)> + 'a {
        let ignore = self.config.fault == EigerFault::IgnoreOpen;
        self.txns.open().filter(move |(p, _)| !ignore && p.writes.iter().any(|(k, _)| k.as_ref() == key))
    }

    /// A first round: the newest version of each key and how long it is
    /// valid (Eiger §4.2). Its latest valid time is the clock — every
    /// transaction numbered here from now on commits above it — unless a
    /// transaction still open here may commit a newer version earlier. An
    /// interval may be empty (its LVT below its EVT): the value is then
    /// read again at the effective time.
    fn read_newest(&mut self, from: Addr, tag: ReadTag, keys: Vec<Key>, out: &mut Out) {
        let (clock, dc) = (self.hlc.current(), self.id.dc);
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            let newest = self.store.chain(&key).and_then(|c| c.newest());
            let stamp = newest.map(|v| v.stamp);
            let (value, evt) = newest.map_or((None, Timestamp::ZERO), |v| (v.value.clone(), v.stamp.ts));
            let mut lvt = clock;
            for (prepared, decided) in self.open_writes(&key) {
                // It ends this version's validity where it commits, if its
                // stamp is above this version's: at its commit timestamp
                // if decided; else at its number here or above — perhaps at
                // this version's own timestamp (two partitions' clocks may
                // give the same number; the partition that gave it breaks
                // the tie).
                let end = match decided {
                    Some(d) => Some(stamp_of(dc, d)).filter(|s| stamp.is_none_or(|v| *s > v)).map(|s| s.ts),
                    None => Some(prepared.seq.max(evt)),
                };
                if let Some(end) = end {
                    lvt = lvt.min(end.prev());
                }
            }
            values.push(Valid { key, value, evt, lvt });
        }
        out.send(from, EigerMsg::Valid { tag, values });
    }

    /// A read at time `at` (Eiger's `read_by_time`): the newest version at
    /// or before it, and the transactions still open here that may commit
    /// one at or before it — undecided, they are left to the reader's third
    /// round; decided, their version is known.
    fn read_at(&mut self, now: PhysicalMicros, from: Addr, tag: ReadTag, keys: Vec<Key>, at: Timestamp, out: &mut Out) {
        // Nothing numbered here from now on commits at or before `at`.
        self.hlc.observe(now, at);
        let dc = self.id.dc;
        // A decided commit not yet durable here is shown only once what this
        // partition holds of it is durable (its prepare, at a coordinator
        // that has just voted): every vote is in and on disk, so no crash
        // can take it back.
        let mut decided_open = false;
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            let found = self.store.chain(&key).and_then(|c| c.newest_visible_upto(at, |v| v.stamp.ts <= at));
            let mut best: Option<(CommitStamp, Option<Value>)> = found.map(|v| (v.stamp, v.value.clone()));
            if self.collected.missed(&key, best.as_ref().map(|(s, _)| *s)) {
                out.send(from, EigerMsg::TooOld { tag });
                return;
            }
            let mut open = Vec::new();
            for (prepared, decided) in self.open_writes(&key) {
                let value = || prepared.writes.iter().find(|(k, _)| *k == key).and_then(|(_, v)| v.clone());
                match decided {
                    // Every vote is in: the outcome is fixed, whatever
                    // crashes next.
                    Some(d) if commit_ts(d) <= at => {
                        let stamp = stamp_of(dc, d);
                        if best.as_ref().is_none_or(|(s, _)| *s < stamp) {
                            best = Some((stamp, value()));
                            decided_open = true;
                        }
                    }
                    Some(_) => {}
                    None if prepared.seq <= at => {
                        open.push(OpenWrite { tx: prepared.tx, coordinator: prepared.coordinator, value: value() })
                    }
                    None => {}
                }
            }
            let (stamp, value) = best.map_or((None, None), |(s, v)| (Some(s), v));
            values.push(AtTime { key, value, stamp, open });
        }
        match decided_open {
            true => out.send_after_durable(from, EigerMsg::AtTime { tag, values }),
            false => out.send(from, EigerMsg::AtTime { tag, values }),
        }
    }

    /// A reader's third round: how `txs`, which this partition coordinates,
    /// ended — at once if decided, else once they are.
    /// An outcome is told once what this partition holds of it is durable
    /// (a decision on the coordinator's own prepare, a fence): no crash
    /// takes it back.
    fn on_status(&mut self, now: PhysicalMicros, from: Addr, tag: ReadTag, txs: Vec<WtxId>, out: &mut Out) {
        for tx in txs {
            match self.txns.status(tx) {
                Status::Committed(decided) => {
                    out.send_after_durable(from, EigerMsg::Outcome { tag, tx, decided: Some(decided) })
                }
                Status::Aborted => out.send_after_durable(from, EigerMsg::Outcome { tag, tx, decided: None }),
                Status::Open => {
                    let mine = self.asked_by.entry(from).or_default();
                    if self.asked_count < MAX_ASKED && *mine < MAX_ASKED_PER_CLIENT {
                        *mine += 1;
                        self.asked.entry(tx).or_default().push(Asked { from, tag, since: now });
                        self.asked_count += 1;
                    }
                }
            }
        }
    }

    /// A question is answered or dropped.
    fn unask(&mut self, a: &Asked) {
        self.asked_count -= 1;
        if let Some(n) = self.asked_by.get_mut(&a.from) {
            *n -= 1;
            if *n == 0 {
                self.asked_by.remove(&a.from);
            }
        }
    }

    /// Answers the third-round questions about what was decided this step.
    fn answer_asked(&mut self, out: &mut Out) {
        for (tx, status) in self.txns.take_decisions() {
            let Some(asked) = self.asked.remove(&tx) else { continue };
            let decided = match status {
                Status::Committed(d) => Some(d),
                _ => None,
            };
            for a in asked {
                self.unask(&a);
                out.send_after_durable(a.from, EigerMsg::Outcome { tag: a.tag, tx, decided: decided.clone() });
            }
        }
    }

    fn deps_ok(&self, deps: &EigerDeps, horizon: Timestamp) -> bool {
        deps.clock <= horizon
            && deps.deps.len() <= MAX_DEPS
            && deps.deps.iter().all(|(k, t)| *t <= horizon && k.len() <= MAX_DEP_KEY_BYTES)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_write(
        &mut self,
        now: PhysicalMicros,
        client: ClientId,
        tx: WtxId,
        writes: Vec<(Key, Option<Value>)>,
        participants: Vec<PartitionId>,
        coordinator: PartitionId,
        deps: EigerDeps,
        out: &mut Out,
    ) -> Result<(), Refused> {
        if !self.deps_ok(&deps, horizon(now)) || writes.iter().any(|(k, _)| !self.is_mine(k)) {
            return Err(Refused);
        }
        self.txns.on_write(now, &mut self.hlc, client, tx, writes, participants, coordinator, deps, out)
    }

    fn on_logged(&mut self, now: PhysicalMicros, upto: u64, out: &mut Out) {
        for (prepared, decided) in self.txns.on_logged(now, upto, out) {
            self.install(now, &prepared, &decided);
        }
    }

    /// Puts a committed transaction's versions in the store, and collects
    /// the versions older than one held for the transaction timeout (the
    /// last of the chain's oldest such): a reader that could still need
    /// them has read for longer than the timeout, and is aborted.
    fn install(&mut self, now: PhysicalMicros, prepared: &PreparedTx, decided: &Decided) {
        let stamp = stamp_of(self.id.dc, decided);
        let (timeout, started_at) = (self.config.txn_timeout_us, self.started_at);
        for (key, value) in &prepared.writes {
            let version = Version { value: value.clone(), stamp, meta: now };
            self.collected.insert(&mut self.store, key, version, |v| v.meta.max(started_at) + timeout <= now);
        }
        self.counters.transactions_applied += 1;
    }

    fn on_resolve_timer(&mut self, now: PhysicalMicros, out: &mut Out) {
        // Commits are forgotten by acknowledgement (EIGER_RULES), not by
        // this rule.
        self.txns.on_resolve_timer(now, |_| false, out);
        // Questions whose readers have given up (asked of the wrong
        // partition, say) are dropped.
        let keep = self.config.status_timeout_us;
        let mut gone = Vec::new();
        self.asked.retain(|_, asked| {
            asked.retain(|a| {
                let kept = now < a.since + keep;
                if !kept {
                    gone.push(Asked { from: a.from, tag: a.tag, since: a.since });
                }
                kept
            });
            !asked.is_empty()
        });
        for a in &gone {
            self.unask(a);
        }
        out.set_timer(EigerTimer::Resolve, self.config.resolve_after_us);
    }

    /// The end of every step: outcomes known are recorded, third-round
    /// questions answered, the clock reserved.
    fn end_step(&mut self, out: &mut Out) {
        self.txns.record_outcomes(out);
        self.answer_asked(out);
        self.reserved.after_step(&self.hlc, 0, out);
    }

    /// Rebuilds a partition from its records.
    pub fn replay(&mut self, records: Vec<EigerRecord>) {
        for record in records {
            self.reserved.restore(&record);
            match record {
                EigerRecord::Reserved(_) => {}
                EigerRecord::Prepared(prepared) => {
                    self.txns.replay_prepared(&mut self.hlc, prepared);
                }
                EigerRecord::Committed { tx, decided } => {
                    if let Some(prepared) = self.txns.replay_committed(tx, decided.clone()) {
                        self.install(0, &prepared, &decided);
                    }
                }
                EigerRecord::Aborted { tx } => self.txns.replay_aborted(tx),
                EigerRecord::Version { key, value, stamp } => {
                    self.hlc.observe(0, stamp.ts);
                    self.store.insert(key, Version { value, stamp, meta: 0 }, |_| false);
                }
                EigerRecord::Collected { key, upto } => {
                    self.collected.restore(key, upto);
                }
                EigerRecord::Recent { tx, decided, coordinator } => {
                    self.txns.replay_recent(&mut self.hlc, tx, decided, Some(coordinator));
                }
            }
        }
        let (clock, _) = self.reserved.resume_points();
        self.hlc.observe(0, clock);
    }
}

impl Replica for EigerReplica {
    type Message = EigerMsg;
    type Timer = EigerTimer;
    type Record = EigerRecord;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        self.started_at = now;
        self.txns.restart(now);
        out.set_timer(EigerTimer::Resolve, self.config.resolve_after_us);
        self.reserved.after_step(&self.hlc, 0, out);
    }

    /// Nothing to ask again, as for PrompTCC: one DC, no stream; a lost
    /// prepare or decision is resolved through the coordinator, and a
    /// client whose read got no answer times out.
    fn on_peer_lost(&mut self, _now: PhysicalMicros, _from: Addr, _out: &mut Out) {}

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: EigerMsg, out: &mut Out) {
        let horizon = horizon(now);
        self.hlc.observe(now, Timestamp::ZERO);
        let peer = match from {
            Addr::Replica(r) if r.dc == self.id.dc && r.partition.0 < self.topology.partition_count() => {
                Some(r.partition)
            }
            _ => None,
        };
        let handled = match (msg, from, peer) {
            (EigerMsg::Read { tag, keys, clock, at }, Addr::Client(_), _) => {
                if clock > horizon || at.is_some_and(|t| t > horizon) || keys.iter().any(|k| !self.is_mine(k)) {
                    Err(Refused)
                } else {
                    // Lamport: the client's clock moves this one.
                    self.hlc.observe(now, clock);
                    match at {
                        None => self.read_newest(from, tag, keys, out),
                        Some(at) => self.read_at(now, from, tag, keys, at, out),
                    }
                    Ok(())
                }
            }
            (EigerMsg::Status { tag, txs }, Addr::Client(_), _) => {
                self.on_status(now, from, tag, txs, out);
                Ok(())
            }
            (EigerMsg::Write { tx, writes, participants, coordinator, deps }, Addr::Client(c), _) => {
                self.on_write(now, c, tx, writes, participants, coordinator, deps, out)
            }
            (EigerMsg::Prepared { tx, seq, participants, client }, _, Some(p)) => {
                self.txns.on_prepared(now, p, tx, seq, participants, client, out)
            }
            (EigerMsg::Commit { tx, decided }, _, Some(p)) => self.txns.on_commit(now, p, tx, decided, out),
            (EigerMsg::Resolve { tx, participants, client }, _, Some(p)) => {
                self.txns.on_resolve(now, p, tx, participants, client, out)
            }
            (EigerMsg::Done { txs }, _, Some(p)) => self.txns.on_done(p, txs, out),
            (EigerMsg::Forget { txs }, _, Some(p)) => self.txns.on_forget(p, txs),
            (EigerMsg::Query { tx }, _, Some(p)) => {
                self.txns.on_query(p, tx, out);
                Ok(())
            }
            (EigerMsg::Vote { tx, seq }, _, Some(p)) => self.txns.on_vote(now, p, tx, seq, out),
            (EigerMsg::Abort { tx }, _, Some(_)) => self.txns.on_abort(tx, out),
            (EigerMsg::Logged { upto }, _, _) if from == Addr::Replica(self.id) => {
                self.on_logged(now, upto, out);
                Ok(())
            }
            _ => Err(Refused),
        };
        if handled.is_err() {
            self.counters.inputs_refused += 1;
        }
        self.end_step(out);
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: EigerTimer, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        match timer {
            EigerTimer::Resolve => self.on_resolve_timer(now, out),
        }
        self.end_step(out);
    }

    fn checkpoint(&self) -> Vec<EigerRecord> {
        let mut records: Vec<EigerRecord> = self.reserved.records().into_iter().collect();
        for (key, chain) in self.store.chains() {
            for v in chain.iter() {
                records.push(EigerRecord::Version { key: key.clone(), value: v.value.clone(), stamp: v.stamp });
            }
        }
        self.txns.checkpoint(&mut records);
        let marks = self.collected.sorted().into_iter();
        records.extend(marks.map(|(k, upto)| EigerRecord::Collected { key: k.clone(), upto }));
        records
    }

    fn is_quiescent(&self) -> bool {
        self.txns.is_quiescent()
    }

    fn latest_values(&self) -> Vec<(Key, Value)> {
        self.store.latest()
    }

    fn counters(&self) -> ReplicaCounters {
        ReplicaCounters {
            versions: self.store.version_count(),
            versions_collected: self.store.collected_count(),
            ..self.counters
        }
    }

    /// Everything numbered at or below one below the oldest open
    /// transaction is installed here (one DC: `origin` is this one).
    fn visible_upto(&self, _origin: DcId) -> Timestamp {
        match self.txns.oldest_open() {
            Some(seq) => seq.prev(),
            None => self.hlc.current(),
        }
    }

    /// A commit stamp per version; validity intervals are computed.
    fn version_metadata_bytes(&self) -> u64 {
        8
    }
}
