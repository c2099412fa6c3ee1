//! A PrompTCC partition (Alg. 2): prepares and commits write-only
//! transactions in the order of its sequence numbers, makes a committed
//! version visible once every partition it wrote has committed it, serves
//! reads at once from its snapshot vector `S_i`, coordinates the
//! transactions a client named it for, and ends those whose coordinator
//! went silent.

use super::durable::{PreparedTx, PtccRecord};
use super::messages::{Cover, PtccMsg, PtxId, ReadValue};
use super::vclock::{stamp_of, Decided, VClock, Wire};
use super::{PtccConfig, PtccFault};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{CommitStamp, Key, ReadTag, Replica, ReplicaCounters, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, ClientId, DcId, PartitionId, ReplicaId};
use crate::mvstore::{MvStore, Version};
use crate::recovery::Reservations;
use crate::topology::Topology;
use crate::twopc::Tree;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::sync::Arc;

type Out = ReplicaEffects<PtccReplica>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtccTimer {
    /// Δ_G: a leaf of the tree reports its entry.
    Stabilize,
    /// Ask the coordinators of transactions prepared too long ago; forget
    /// what is no longer needed.
    Resolve,
}

/// What a version carries: its commit timestamp (returned to readers) and
/// the numbers of the partitions it wrote (its visibility rule).
#[derive(Debug, PartialEq, Eq)]
pub struct Meta {
    pub ts: VClock,
    pub decided: Decided,
    /// When it committed here (0: before the last restart).
    pub committed_at: PhysicalMicros,
}

/// How a prepared transaction ends here.
#[derive(Clone, Debug)]
enum Outcome {
    Commit(Decided),
    Abort,
}

/// A prepared transaction and what the partition knows of it.
#[derive(Debug)]
struct Pending {
    prepared: PreparedTx,
    client: ClientId,
    /// When it was prepared, by this partition's clock.
    since: PhysicalMicros,
    outcome: Option<Outcome>,
    /// The outcome's record was appended as the `n`-th; it takes effect
    /// when `Logged { upto: n }` comes back (once it is durable).
    logged: Option<u64>,
}

/// A transaction committed here lately: a late `Query` must still hear its
/// number (this partition's entry of `decided`), until every participant
/// is known to have committed it.
#[derive(Clone, Debug)]
struct Recent {
    at: PhysicalMicros,
    decided: Decided,
}

/// How far ahead of this partition's clock an entry of a vector it is sent
/// may be: more is refused as impossible from an honest client or peer
/// (clocks of a DC agree far better), so that no input moves the clock
/// or `S_i` arbitrarily far.
pub const MAX_AHEAD_US: u64 = 60_000_000;

/// Votes a coordinator gathers: in the commit (`Some` only) or in a
/// termination (`None`: that participant fenced the id).
#[derive(Debug)]
struct Ballot {
    participants: Vec<PartitionId>,
    client: ClientId,
    votes: BTreeMap<PartitionId, Option<Timestamp>>,
    began: PhysicalMicros,
}

pub struct PtccReplica {
    id: ReplicaId,
    topology: Arc<Topology>,
    config: PtccConfig,
    hlc: Hlc,
    reserved: Reservations,
    /// `S_i`; entry `i` is [`Self::frontier`].
    snapshot: VClock,
    store: MvStore<Arc<Meta>>,
    /// Prepared transactions by sequence number, and the index by id.
    pending: BTreeMap<Timestamp, Pending>,
    by_tx: FxHashMap<PtxId, Timestamp>,
    /// Commits this partition coordinates, gathering the votes.
    coordinating: FxHashMap<PtxId, Ballot>,
    /// Terminations this partition runs for silent commits.
    terminating: FxHashMap<PtxId, Ballot>,
    /// Ids given up here: a `Write` of them is refused. Kept for good
    /// (only failures abort, so they are few): a `Write` may arrive
    /// arbitrarily late.
    fenced: FxHashSet<PtxId>,
    recent: FxHashMap<PtxId, Recent>,
    /// Per key, the stamp of the newest version collected (§VII): a read
    /// that would return something older — or nothing — may have needed
    /// it, and answers `TooOld` instead.
    collected: FxHashMap<Key, CommitStamp>,
    /// Outcome records appended so far.
    logged: u64,
    tree: Tree<Vec<(PartitionId, Timestamp)>>,
    /// When this incarnation started: versions found on disk count as
    /// committed then.
    started_at: PhysicalMicros,
    counters: ReplicaCounters,
}

impl PtccReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: PtccConfig) -> Self {
        PtccReplica {
            id,
            hlc: Hlc::new(),
            reserved: Reservations::default(),
            snapshot: VClock::zeros(topology.partition_count()),
            store: MvStore::keeping_tombstones(),
            pending: BTreeMap::new(),
            by_tx: FxHashMap::default(),
            coordinating: FxHashMap::default(),
            terminating: FxHashMap::default(),
            fenced: FxHashSet::default(),
            recent: FxHashMap::default(),
            collected: FxHashMap::default(),
            logged: 0,
            tree: Tree::new(id, &topology, config.tree_fanout),
            started_at: 0,
            counters: ReplicaCounters::default(),
            topology,
            config,
        }
    }

    fn me(&self) -> PartitionId {
        self.id.partition
    }

    fn partition(&self, p: PartitionId) -> Addr {
        Addr::Replica(ReplicaId { partition: p, ..self.id })
    }

    /// `S_i[i]`: every transaction this partition numbered at or below it
    /// has ended here, durably, and none will be numbered so low again —
    /// one below the oldest prepared one (an ended one counts until its
    /// record is durable), or the clock (the next number is above it).
    /// Prop. 2 of the paper.
    fn frontier(&self) -> Timestamp {
        if self.config.fault == PtccFault::EarlyFrontier {
            return self.hlc.current();
        }
        match self.pending.keys().next() {
            Some(seq) => seq.prev(),
            None => self.hlc.current(),
        }
    }

    /// The snapshot vector with this partition's entry brought up to date.
    fn refresh(&mut self) {
        let f = self.frontier();
        self.snapshot.raise_entry(self.me(), f);
    }

    /// Adopts what a client or the tree has seen (Alg. 2 lines 37, 46):
    /// every entry is a number below which its partition has committed
    /// everything. This partition's own entry it knows better.
    fn adopt(&mut self, seen: &VClock) {
        let me = self.me();
        for (p, &t) in seen.entries().iter().enumerate() {
            if p as u32 != me.0 {
                self.snapshot.raise_entry(PartitionId(p as u32), t);
            }
        }
    }

    /// A vector of this DC's shape whose entries are not impossibly far
    /// ahead of this partition's clock.
    fn well_formed(&self, v: &VClock, now: PhysicalMicros) -> bool {
        v.len() == self.topology.partition_count() as usize && v.max_entry() <= self.horizon(now)
    }

    fn horizon(&self, now: PhysicalMicros) -> Timestamp {
        Timestamp::from_physical(now.saturating_add(MAX_AHEAD_US))
    }

    /// A list of partitions of this DC, sorted, each once, with this one.
    fn participants_ok(&self, participants: &[PartitionId]) -> bool {
        participants.windows(2).all(|w| w[0] < w[1])
            && participants.iter().all(|p| p.0 < self.topology.partition_count())
            && participants.contains(&self.me())
    }

    fn is_mine(&self, key: &[u8]) -> bool {
        self.topology.partition_of(key) == self.me()
    }

    fn refuse(&mut self) {
        self.counters.inputs_refused += 1;
    }

    /// Visible (Alg. 2 line 32): every partition the transaction wrote has
    /// committed it, as far as `S_i` says.
    fn visible(snapshot: &VClock, meta: &Meta) -> bool {
        meta.decided.iter().all(|&(p, t)| snapshot.get(p) >= t)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_read(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tag: ReadTag,
        keys: Vec<Key>,
        deps: Wire,
        at_snapshot: bool,
        out: &mut Out,
    ) {
        let Some(deps) = self.decode(deps, now) else { return self.refuse() };
        if keys.iter().any(|k| !self.is_mine(k)) {
            return self.refuse();
        }
        self.refresh();
        self.adopt(&deps);
        let bound = at_snapshot.then_some(&deps);
        // What the client will read the commit timestamps against: entries
        // at or below its own floor it need not be sent (§V).
        let (naive, floor) = (self.config.naive, deps.min_entry());
        let ts_wire = |ts: &VClock| if naive { ts.to_wire(true) } else { ts.above(floor) };
        let snapshot = &self.snapshot;
        let mut values: Vec<ReadValue> = Vec::with_capacity(keys.len());
        let mut pending: Vec<Wire> = Vec::new();
        for key in keys {
            let Some(chain) = self.store.chain(&key) else {
                values.push((key, None, None));
                continue;
            };
            let found = chain
                .newest_visible(|v| Self::visible(snapshot, &v.meta) && bound.is_none_or(|b| b.dominates(&v.meta.ts)));
            // §V: the versions newer than the one returned, none of them
            // visible yet, are all a first round's client needs to know of
            // S_i (one of them in its snapshot means a second round here).
            if !naive && bound.is_none() {
                let newer = chain.newer_than(found.map(|f| f.stamp));
                pending.extend(newer.iter().map(|v| ts_wire(&v.meta.ts)));
            }
            // A collected version newer than what the read would return
            // may be the one it needs: it cannot answer (after a restart,
            // until `S_i` catches up, even a first round may meet this).
            if self.collected.get(&key).is_some_and(|&upto| found.is_none_or(|f| f.stamp < upto)) {
                out.send(from, PtccMsg::TooOld { tag });
                return;
            }
            match found {
                Some(v) => values.push((key, v.value.clone(), Some(ts_wire(&v.meta.ts)))),
                None => values.push((key, None, None)),
            }
        }
        let cover = if naive {
            Cover::Vector(self.snapshot.to_wire(true))
        } else {
            Cover::Floor { own: self.snapshot.get(self.me()), floor: self.snapshot.min_entry(), pending }
        };
        out.send(from, PtccMsg::ReadResp { tag, cover, values });
    }

    /// A vector from a message, if well formed for this DC.
    fn decode(&self, wire: Wire, now: PhysicalMicros) -> Option<VClock> {
        wire.decode(self.topology.partition_count()).filter(|v| self.well_formed(v, now))
    }

    #[allow(clippy::too_many_arguments)]
    fn on_write(
        &mut self,
        now: PhysicalMicros,
        client: ClientId,
        tx: PtxId,
        writes: Vec<(Key, Option<Value>)>,
        participants: Vec<PartitionId>,
        coordinator: PartitionId,
        deps: Wire,
        out: &mut Out,
    ) {
        let me = self.me();
        let Some(deps) = self.decode(deps, now) else { return self.refuse() };
        if tx.client != client
            || !self.participants_ok(&participants)
            || !participants.contains(&coordinator)
            || writes.is_empty()
            || writes.iter().any(|(k, _)| !self.is_mine(k))
        {
            return self.refuse();
        }
        if self.fenced.contains(&tx) {
            out.send(Addr::Client(client), PtccMsg::Aborted { tx });
            return;
        }
        if self.by_tx.contains_key(&tx) || self.recent.contains_key(&tx) {
            return; // delivered twice
        }
        // Alg. 2 lines 3–4: a number above everything the client has seen,
        // so that what it wrote orders after what it read.
        let seq = self.hlc.tick(now, deps.max_entry());
        if self.pending.contains_key(&seq) {
            // The clock never hands a number out twice (replay observes
            // every number on disk); guard the index all the same.
            return self.refuse();
        }
        let prepared = PreparedTx { tx, seq, coordinator, participants: participants.clone(), deps, writes };
        out.persist(PtccRecord::Prepared(prepared.clone()));
        self.by_tx.insert(tx, seq);
        self.pending.insert(seq, Pending { prepared, client, since: now, outcome: None, logged: None });
        if participants.len() == 1 {
            // One partition: nothing to agree on (one round).
            self.decide_here(now, tx, vec![(me, seq)]);
        } else if coordinator == me {
            self.vote(now, tx, me, Some(seq), &participants, client, false, out);
        } else {
            let msg = PtccMsg::Prepared { tx, seq, participants, client };
            out.send_after_durable(self.partition(coordinator), msg);
        }
    }

    /// A vote reaches the coordinator: in the commit itself, or in a
    /// termination (`terminating`).
    #[allow(clippy::too_many_arguments)]
    fn vote(
        &mut self,
        now: PhysicalMicros,
        tx: PtxId,
        from: PartitionId,
        seq: Option<Timestamp>,
        participants: &[PartitionId],
        client: ClientId,
        terminating: bool,
        out: &mut Out,
    ) {
        let ballots = if terminating { &mut self.terminating } else { &mut self.coordinating };
        let ballot = ballots.entry(tx).or_insert_with(|| Ballot {
            participants: participants.to_vec(),
            client,
            votes: BTreeMap::new(),
            began: now,
        });
        if !ballot.participants.contains(&from) {
            return;
        }
        ballot.votes.insert(from, seq);
        if ballot.votes.len() < ballot.participants.len() {
            return;
        }
        let ballot = ballots.remove(&tx).expect("just found");
        // Decided: neither the commit nor a termination of it waits longer.
        self.coordinating.remove(&tx);
        self.terminating.remove(&tx);
        let decided: Option<Decided> = ballot.votes.iter().map(|(&p, &s)| s.map(|s| (p, s))).collect();
        match decided {
            // Alg. 2 lines 13–17.
            Some(decided) => {
                for &p in &ballot.participants {
                    if p == self.me() {
                        self.decide_here(now, tx, decided.clone());
                    } else {
                        // After this partition's own prepare is durable.
                        out.send_after_durable(self.partition(p), PtccMsg::Commit { tx, decided: decided.clone() });
                    }
                }
            }
            None => {
                for &p in &ballot.participants {
                    if p == self.me() {
                        self.abort_here(tx, out);
                    } else {
                        out.send_after_durable(self.partition(p), PtccMsg::Abort { tx });
                    }
                }
                out.send_after_durable(Addr::Client(ballot.client), PtccMsg::Aborted { tx });
            }
        }
    }

    /// The decision reaches a participant (line 20); it commits once the
    /// transaction is its oldest prepared one (line 23). A decision must
    /// name exactly the participants, with this partition's number.
    fn decide_here(&mut self, now: PhysicalMicros, tx: PtxId, decided: Decided) {
        let Some(seq) = self.by_tx.get(&tx).copied() else { return };
        let horizon = self.horizon(now);
        let me = self.id.partition;
        let pending = self.pending.get_mut(&seq).expect("indexed");
        let fits = decided.len() == pending.prepared.participants.len()
            && decided.iter().zip(&pending.prepared.participants).all(|(d, p)| d.0 == *p && d.1 <= horizon)
            && own_number(&decided, me) == Some(seq);
        if !fits {
            return self.refuse();
        }
        match &pending.outcome {
            None => pending.outcome = Some(Outcome::Commit(decided)),
            Some(Outcome::Commit(_)) => {} // told twice
            Some(Outcome::Abort) => self.refuse(),
        }
    }

    /// Ends the oldest prepared transactions whose outcome is known
    /// (Alg. 2 lines 23–30) — after every step, whatever decided them — in
    /// the order of their numbers, so that
    /// `S_i[i]` only ever passes ended ones: each outcome is recorded, and
    /// takes effect only once its record is durable (`Logged`, a message
    /// to itself that waits for it), so that no read, report or vote shows
    /// what a crash could take back.
    fn commit_ready(&mut self, out: &mut Out) {
        let mut upto = None;
        for pending in self.pending.values_mut() {
            let Some(outcome) = &pending.outcome else { break };
            if pending.logged.is_some() {
                continue;
            }
            let tx = pending.prepared.tx;
            out.persist(match outcome {
                Outcome::Commit(decided) => PtccRecord::Committed { tx, decided: decided.clone() },
                Outcome::Abort => PtccRecord::Aborted { tx },
            });
            self.logged += 1;
            pending.logged = Some(self.logged);
            upto = Some(self.logged);
        }
        if let Some(upto) = upto {
            out.send_after_durable(Addr::Replica(self.id), PtccMsg::Logged { upto });
        }
    }

    /// The outcomes recorded up to the `upto`-th are durable: they take
    /// effect — versions installed, the client told, the frontier past them.
    fn on_logged(&mut self, now: PhysicalMicros, upto: u64, out: &mut Out) {
        while let Some(entry) = self.pending.first_entry() {
            if entry.get().logged.is_none_or(|n| n > upto) {
                break;
            }
            let Pending { prepared, client, outcome, .. } = entry.remove();
            self.by_tx.remove(&prepared.tx);
            match outcome.expect("logged") {
                Outcome::Commit(decided) => {
                    self.install(now, &prepared, &decided);
                    let recent = Recent { at: now, decided: decided.clone() };
                    self.recent.insert(prepared.tx, recent);
                    out.send(Addr::Client(client), PtccMsg::Committed { tx: prepared.tx, decided });
                }
                Outcome::Abort => {
                    self.fenced.insert(prepared.tx);
                }
            }
        }
    }

    /// Puts a committed transaction's versions in the store, and collects
    /// what they make old (§VII): the versions older than one that is
    /// visible and has been held for the transaction timeout (the last of
    /// the chain's oldest such, not the newest: a hot key's recent versions
    /// are not scanned at every write).
    fn install(&mut self, now: PhysicalMicros, prepared: &PreparedTx, decided: &Decided) {
        let ts = VClock::commit_ts(&prepared.deps, decided);
        let meta = Arc::new(Meta { ts, decided: decided.clone(), committed_at: now });
        let stamp = stamp_of(self.id.dc, decided);
        let (snapshot, timeout, started_at) = (&self.snapshot, self.config.txn_timeout_us, self.started_at);
        for (key, value) in &prepared.writes {
            let version = Version { value: value.clone(), stamp, meta: meta.clone() };
            let upto = self.store.insert_pruning_oldest(key.clone(), version, |v| {
                Self::visible(snapshot, &v.meta) && v.meta.committed_at.max(started_at) + timeout <= now
            });
            if let Some(upto) = upto {
                let mark = self.collected.entry(key.clone()).or_insert(upto);
                *mark = (*mark).max(upto);
            }
        }
        self.counters.transactions_applied += 1;
    }

    /// Gives a transaction up here: a prepared one ends aborted (in its
    /// turn, once recorded), and the id is fenced.
    fn abort_here(&mut self, tx: PtxId, out: &mut Out) {
        if let Some(seq) = self.by_tx.get(&tx).copied() {
            let pending = self.pending.get_mut(&seq).expect("indexed");
            match pending.outcome {
                None => pending.outcome = Some(Outcome::Abort),
                Some(Outcome::Abort) => {}
                // Decided to commit: an abort contradicts it.
                Some(Outcome::Commit(_)) => self.refuse(),
            }
            return;
        }
        if self.recent.contains_key(&tx) {
            return self.refuse();
        }
        if self.fenced.insert(tx) {
            out.persist(PtccRecord::Aborted { tx });
        }
    }

    /// This partition's vote in a termination of `tx`: the number it gave
    /// it, or none — and then it fences the id, durably, so that it never
    /// prepares it (the vote leaves only after the fence is durable).
    fn my_vote(&mut self, tx: PtxId, out: &mut Out) -> Option<Timestamp> {
        if let Some(&seq) = self.by_tx.get(&tx) {
            return Some(seq);
        }
        if let Some(recent) = self.recent.get(&tx) {
            return own_number(&recent.decided, self.me());
        }
        if self.fenced.insert(tx) {
            out.persist(PtccRecord::Aborted { tx });
        }
        None
    }

    /// A termination asks this participant for its vote.
    fn on_query(&mut self, from: PartitionId, tx: PtxId, out: &mut Out) {
        let seq = self.my_vote(tx, out);
        out.send_after_durable(self.partition(from), PtccMsg::Vote { tx, seq });
    }

    /// Starts (or restarts) the termination of `tx` as its coordinator.
    fn terminate(
        &mut self,
        now: PhysicalMicros,
        tx: PtxId,
        participants: Vec<PartitionId>,
        client: ClientId,
        out: &mut Out,
    ) {
        if let Some(b) = self.terminating.get(&tx) {
            if now < b.began + self.config.resolve_after_us {
                return;
            }
        }
        self.terminating
            .insert(tx, Ballot { participants: participants.clone(), client, votes: BTreeMap::new(), began: now });
        let me = self.me();
        for &p in &participants {
            if p == me {
                let seq = self.my_vote(tx, out);
                self.vote(now, tx, me, seq, &participants, client, true, out);
            } else {
                out.send(self.partition(p), PtccMsg::Query { tx });
            }
        }
    }

    fn on_resolve_timer(&mut self, now: PhysicalMicros, out: &mut Out) {
        // Fault point: resolve at once, racing the commit under way.
        let early = out.buggify("promptcc: resolve before the delay");
        let stale: Vec<(PtxId, PartitionId, Vec<PartitionId>, ClientId)> = self
            .pending
            .values()
            .filter(|p| p.outcome.is_none() && (early || now >= p.since + self.config.resolve_after_us))
            .map(|p| (p.prepared.tx, p.prepared.coordinator, p.prepared.participants.clone(), p.client))
            .collect();
        for (tx, coordinator, participants, client) in stale {
            if coordinator == self.me() {
                self.terminate(now, tx, participants, client, out);
            } else {
                out.send(self.partition(coordinator), PtccMsg::Resolve { tx, participants, client });
            }
        }
        // Forget what nobody can ask about any more: a commit once every
        // participant is known to have committed it (nobody still holds it
        // prepared) and a late query would have come.
        let keep = self.config.resolve_after_us * 20;
        let snapshot = &self.snapshot;
        self.recent.retain(|_, r| now < r.at + keep || !r.decided.iter().all(|&(p, t)| snapshot.get(p) >= t));
        self.coordinating.retain(|_, b| now < b.began + keep);
        self.terminating.retain(|_, b| now < b.began + keep);
        out.set_timer(PtccTimer::Resolve, self.config.resolve_after_us);
    }

    /// A leaf reports its entry up the tree every Δ_G.
    fn on_stabilize_timer(&mut self, out: &mut Out) {
        self.refresh();
        if let Some(parent) = self.tree.parent() {
            // Fault point: a slow leaf misses a round.
            if self.tree.is_leaf() && !out.buggify("promptcc: a leaf skips its report") {
                let entries = vec![(self.me(), self.snapshot.get(self.me()))];
                out.send_after_durable(Addr::Replica(parent), PtccMsg::Report { entries });
            }
        }
        out.set_timer(PtccTimer::Stabilize, self.config.stabilization_interval_us);
    }

    fn on_report(&mut self, now: PhysicalMicros, from: Addr, entries: Vec<(PartitionId, Timestamp)>, out: &mut Out) {
        let horizon = self.horizon(now);
        let bad = |&(p, t): &(PartitionId, Timestamp)| p.0 >= self.topology.partition_count() || t > horizon;
        if !self.tree.is_child(from) || entries.iter().any(bad) {
            return self.refuse();
        }
        let Some(children) = self.tree.gather(from, entries) else { return };
        self.refresh();
        let mut all: Vec<(PartitionId, Timestamp)> = children.into_iter().flatten().collect();
        all.push((self.me(), self.snapshot.get(self.me())));
        match self.tree.parent() {
            Some(parent) => out.send_after_durable(Addr::Replica(parent), PtccMsg::Report { entries: all }),
            None => {
                for (p, t) in all {
                    if p != self.me() {
                        self.snapshot.raise_entry(p, t);
                    }
                }
                self.push_down(out);
            }
        }
    }

    fn push_down(&mut self, out: &mut Out) {
        for &child in self.tree.children() {
            out.send(Addr::Replica(child), PtccMsg::Stable { snapshot: self.snapshot.to_wire(self.config.naive) });
        }
    }

    fn on_stable(&mut self, now: PhysicalMicros, from: Addr, snapshot: Wire, out: &mut Out) {
        let Some(snapshot) = self.decode(snapshot, now).filter(|_| self.tree.is_parent(from)) else {
            return self.refuse();
        };
        self.adopt(&snapshot);
        self.refresh();
        self.push_down(out);
    }

    /// Rebuilds a partition from its records.
    pub fn replay(&mut self, records: Vec<PtccRecord>) {
        for record in records {
            self.reserved.restore(&record);
            match record {
                PtccRecord::Reserved(_) => {}
                PtccRecord::Prepared(prepared) => {
                    // The clock resumes above every number on disk, even one
                    // a crash kept without the reservation after it.
                    self.hlc.observe(0, prepared.seq);
                    self.by_tx.insert(prepared.tx, prepared.seq);
                    let client = prepared.tx.client;
                    let pending = Pending { prepared, client, since: 0, outcome: None, logged: None };
                    self.pending.insert(pending.prepared.seq, pending);
                }
                PtccRecord::Committed { tx, decided } => {
                    if let Some(seq) = self.by_tx.remove(&tx) {
                        let pending = self.pending.remove(&seq).expect("indexed");
                        self.install(0, &pending.prepared, &decided);
                        self.recent.insert(tx, Recent { at: 0, decided });
                    }
                }
                PtccRecord::Aborted { tx } => {
                    if let Some(seq) = self.by_tx.remove(&tx) {
                        self.pending.remove(&seq);
                    }
                    self.fenced.insert(tx);
                }
                PtccRecord::Version { key, value, stamp, ts, decided } => {
                    if let Some(seq) = own_number(&decided, self.id.partition) {
                        self.hlc.observe(0, seq);
                    }
                    let meta = Arc::new(Meta { ts, decided, committed_at: 0 });
                    self.store.insert(key, Version { value, stamp, meta }, |_| false);
                }
                PtccRecord::Collected { key, upto } => {
                    self.collected.insert(key, upto);
                }
                PtccRecord::Recent { tx, decided } => {
                    if let Some(seq) = own_number(&decided, self.id.partition) {
                        self.hlc.observe(0, seq);
                    }
                    self.recent.insert(tx, Recent { at: 0, decided });
                }
            }
        }
        let (clock, _) = self.reserved.resume_points();
        self.hlc.observe(0, clock);
    }
}

impl Replica for PtccReplica {
    type Message = PtccMsg;
    type Timer = PtccTimer;
    type Record = PtccRecord;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        self.started_at = now;
        // Prepared transactions found on disk wait a full interval again.
        for p in self.pending.values_mut() {
            p.since = now;
        }
        for r in self.recent.values_mut() {
            r.at = now;
        }
        self.refresh();
        out.set_timer(PtccTimer::Stabilize, self.config.stabilization_interval_us);
        out.set_timer(PtccTimer::Resolve, self.config.resolve_after_us);
        self.reserved.after_step(&self.hlc, 0, out);
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: PtccMsg, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        let peer = match from {
            Addr::Replica(r) if r.dc == self.id.dc && r.partition.0 < self.topology.partition_count() => {
                Some(r.partition)
            }
            _ => None,
        };
        match (msg, from, peer) {
            (PtccMsg::Read { tag, keys, deps, at_snapshot }, Addr::Client(_), _) => {
                self.on_read(now, from, tag, keys, deps, at_snapshot, out)
            }
            (PtccMsg::Write { tx, writes, participants, coordinator, deps }, Addr::Client(c), _) => {
                self.on_write(now, c, tx, writes, participants, coordinator, deps, out)
            }
            (PtccMsg::Prepared { tx, seq, participants, client }, _, Some(p)) => {
                if tx.client != client || !self.participants_ok(&participants) || seq > self.horizon(now) {
                    return self.refuse();
                }
                self.vote(now, tx, p, Some(seq), &participants, client, false, out)
            }
            (PtccMsg::Commit { tx, decided }, _, Some(_)) => self.decide_here(now, tx, decided),
            (PtccMsg::Resolve { tx, participants, client }, _, Some(_)) => {
                if tx.client != client || !self.participants_ok(&participants) {
                    return self.refuse();
                }
                self.terminate(now, tx, participants, client, out)
            }
            (PtccMsg::Query { tx }, _, Some(p)) => self.on_query(p, tx, out),
            (PtccMsg::Vote { tx, seq }, _, Some(p)) => {
                if seq.is_some_and(|s| s > self.horizon(now)) {
                    return self.refuse();
                }
                let Some(b) = self.terminating.get(&tx) else { return };
                let (parts, client) = (b.participants.clone(), b.client);
                self.vote(now, tx, p, seq, &parts, client, true, out)
            }
            (PtccMsg::Abort { tx }, _, Some(_)) => self.abort_here(tx, out),
            (PtccMsg::Logged { upto }, _, _) if from == Addr::Replica(self.id) => self.on_logged(now, upto, out),
            (PtccMsg::Report { entries }, _, Some(_)) => self.on_report(now, from, entries, out),
            (PtccMsg::Stable { snapshot }, _, Some(_)) => self.on_stable(now, from, snapshot, out),
            _ => self.refuse(),
        }
        self.commit_ready(out);
        self.refresh();
        self.reserved.after_step(&self.hlc, 0, out);
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: PtccTimer, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        match timer {
            PtccTimer::Stabilize => self.on_stabilize_timer(out),
            PtccTimer::Resolve => self.on_resolve_timer(now, out),
        }
        self.commit_ready(out);
        self.refresh();
        self.reserved.after_step(&self.hlc, 0, out);
    }

    fn checkpoint(&self) -> Vec<PtccRecord> {
        let mut records: Vec<PtccRecord> = self.reserved.records().into_iter().collect();
        for (key, chain) in self.store.chains() {
            for v in chain.iter() {
                records.push(PtccRecord::Version {
                    key: key.clone(),
                    value: v.value.clone(),
                    stamp: v.stamp,
                    ts: v.meta.ts.clone(),
                    decided: v.meta.decided.clone(),
                });
            }
        }
        for p in self.pending.values() {
            records.push(PtccRecord::Prepared(p.prepared.clone()));
            // An outcome recorded but not yet in effect: the checkpoint
            // replaces its record, so it says it again.
            match (&p.outcome, p.logged) {
                (Some(Outcome::Commit(decided)), Some(_)) => {
                    records.push(PtccRecord::Committed { tx: p.prepared.tx, decided: decided.clone() })
                }
                (Some(Outcome::Abort), Some(_)) => records.push(PtccRecord::Aborted { tx: p.prepared.tx }),
                _ => {}
            }
        }
        let mut fenced: Vec<PtxId> = self.fenced.iter().copied().collect();
        fenced.sort();
        records.extend(fenced.into_iter().map(|tx| PtccRecord::Aborted { tx }));
        let mut recent: Vec<(PtxId, &Recent)> = self.recent.iter().map(|(&tx, r)| (tx, r)).collect();
        recent.sort_by_key(|(tx, _)| *tx);
        records.extend(recent.into_iter().map(|(tx, r)| PtccRecord::Recent { tx, decided: r.decided.clone() }));
        // What the checkpoint no longer holds: its versions were collected.
        let mut collected: Vec<(&Key, &CommitStamp)> = self.collected.iter().collect();
        collected.sort();
        records.extend(collected.into_iter().map(|(k, &upto)| PtccRecord::Collected { key: k.clone(), upto }));
        records
    }

    fn is_quiescent(&self) -> bool {
        self.pending.is_empty()
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

    /// Everything numbered at or below the snapshot vector's smallest entry
    /// is visible here (one DC: `origin` is this one).
    fn visible_upto(&self, _origin: DcId) -> Timestamp {
        self.snapshot.min_entry()
    }

    /// A commit timestamp: one entry per partition.
    fn version_metadata_bytes(&self) -> u64 {
        8 * u64::from(self.topology.partition_count())
    }
}

/// The number partition `me` gave a decided transaction.
fn own_number(decided: &[(PartitionId, Timestamp)], me: PartitionId) -> Option<Timestamp> {
    decided.iter().find(|&&(p, _)| p == me).map(|&(_, t)| t)
}
