//! A PrompTCC partition (Alg. 2): prepares and commits write-only
//! transactions in the order of its sequence numbers, makes a committed
//! version visible once every partition it wrote has committed it, serves
//! reads at once from its snapshot vector `S_i`, coordinates the
//! transactions a client named it for, and ends those whose coordinator
//! went silent.

use super::durable::{PreparedTx, PtccRecord};
use super::messages::{Cover, PtccMsg, ReadTs, ReadValue};
use super::vclock::{Sparse, VClock, Wire};
use super::{PtccConfig, PtccFault};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{Key, ReadTag, Replica, ReplicaCounters, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, ClientId, DcId, PartitionId, ReplicaId};
use crate::mvstore::{CollectedMarks, MvStore, Version};
use crate::recovery::Reservations;
use crate::topology::Topology;
use crate::twopc::Tree;
use crate::write_only::{horizon, own_number, stamp_of, top_partition, Decided, Refused, Rules, WriteOnly, WtxId};
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
/// the numbers of the partitions it wrote (its visibility rule), shared by
/// the versions of one transaction.
#[derive(Debug, PartialEq, Eq)]
pub struct Meta {
    pub ts: VClock,
    pub decided: Decided,
}

/// A version's metadata as its chain holds it: when it committed here
/// inline, next to the stamp, so that collection — which looks at a key's
/// oldest versions at every write of it — decides on a version long
/// visible without following it to its [`Meta`] (a cache miss per version
/// looked at, each write).
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    /// When it committed here (0: before the last restart).
    pub committed_at: PhysicalMicros,
    pub meta: Arc<Meta>,
}

impl std::ops::Deref for Held {
    type Target = Meta;
    fn deref(&self) -> &Meta {
        &self.meta
    }
}

/// Outcomes end in the order of their numbers (`S_i[i]` passes only ended
/// transactions); a commit is forgotten once `S_i` says every participant
/// has ended it; the coordinator answers the client for all participants;
/// no reader asks for the decisions.
const PTCC_RULES: Rules = Rules { in_order: true, acknowledged: false, gathered: true, decisions: false };

pub struct PtccReplica {
    id: ReplicaId,
    topology: Arc<Topology>,
    config: PtccConfig,
    hlc: Hlc,
    reserved: Reservations,
    /// `S_i`; entry `i` is [`Self::frontier`].
    snapshot: VClock,
    /// Scratch for a read's joined commit timestamp (§V), kept to spare an
    /// allocation of a whole vector per read.
    read_join: VClock,
    store: MvStore<Held>,
    /// The write-only transactions, as participant and coordinator; they
    /// end here in the order of their numbers.
    txns: WriteOnly<VClock>,
    /// Per key, the stamp of the newest version collected (§VII): a read
    /// that would return something older — or nothing — may have needed
    /// it, and answers `TooOld` instead.
    collected: CollectedMarks,
    tree: Tree<Vec<(PartitionId, Timestamp)>>,
    /// Whether this incarnation restored collection marks from a
    /// checkpoint: its versions may not be visible again yet, so every read
    /// looks at the marks.
    marks_restored: bool,
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
            read_join: VClock::zeros(topology.partition_count()),
            store: MvStore::keeping_tombstones(),
            txns: WriteOnly::new(id, topology.partition_count(), config.resolve_after_us, PTCC_RULES),
            collected: CollectedMarks::default(),
            tree: Tree::new(id, &topology, config.tree_fanout),
            marks_restored: false,
            started_at: 0,
            counters: ReplicaCounters::default(),
            topology,
            config,
        }
    }

    fn me(&self) -> PartitionId {
        self.id.partition
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
        match self.txns.oldest_open() {
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
    fn adopt(&mut self, seen: &Sparse) {
        let me = self.me();
        for (p, t) in seen.entries(self.snapshot.len()).enumerate() {
            if p as u32 != me.0 {
                self.snapshot.raise_entry(PartitionId(p as u32), t);
            }
        }
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

    /// [`Self::visible`] for a version of the store, `least` being the
    /// smallest entry of `snapshot`. Hot path, and both tests read only the
    /// stamp, inline in the chain: a version stamped at or below `least` is
    /// visible (its stamp is the largest number any participant gave it),
    /// which spares a read of a key not written lately following the
    /// version to its metadata; and a hot key's versions not visible yet,
    /// which a read scans from the newest, usually wait for the participant
    /// that gave the stamp its number, which is tested next.
    fn version_visible(snapshot: &VClock, least: Timestamp, v: &Version<Held>) -> bool {
        v.stamp.ts <= least || (snapshot.get(top_partition(&v.stamp)) >= v.stamp.ts && Self::visible(snapshot, &v.meta))
    }

    /// A version's commit timestamp for a reader whose vector is at least
    /// `floor` everywhere: only the entries above it. No entry is above the
    /// stamp (each participant numbered the transaction above its writer's
    /// dependencies, and the stamp is the largest number), so a version
    /// stamped at or below `floor` has none to send — found without
    /// following the version to its metadata.
    fn read_ts(v: &Version<Held>, floor: Timestamp) -> Wire {
        if v.stamp.ts <= floor {
            return Wire::Sparse { floor, above: Vec::new() };
        }
        v.meta.ts.above(floor)
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
        let (naive, floor) = (self.config.naive, deps.min_entry(self.snapshot.len()));
        let (snapshot, least) = (&self.snapshot, self.snapshot.min_entry());
        let mut values: Vec<ReadValue> = Vec::with_capacity(keys.len());
        let mut pending: Vec<Wire> = Vec::new();
        // The commit timestamps of the versions returned: naive, each in
        // full; else (§V) their join, in the scratch vector, of the versions
        // with an entry above the floor (one stamped at or below it has
        // none).
        let mut each: Vec<Wire> = Vec::new();
        let (join, mut joined) = (&mut self.read_join, false);
        for key in keys {
            let Some(chain) = self.store.chain(&key) else {
                values.push((key, None));
                continue;
            };
            let (found, newer) = chain.newest_visible_and_newer(|v| {
                Self::version_visible(snapshot, least, v) && bound.is_none_or(|b| b.dominates(&v.meta.ts))
            });
            // §V: the versions newer than the one returned, none of them
            // visible yet, are all a first round's client needs to know of
            // S_i (one of them in its snapshot means a second round here).
            if !naive && bound.is_none() {
                pending.extend(newer.map(|v| Self::read_ts(v, floor)));
            }
            // A collected version newer than what the read would return
            // may be the one it needs: it cannot answer. A first round that
            // found a version need not look (hot path: a second hash lookup
            // per key): collection always keeps a visible version newer than
            // what it drops, and what is visible stays visible, so the newest
            // visible one is newer than every mark — except after a restart
            // that restored marks, until `S_i` catches up.
            let look = bound.is_some() || found.is_none() || self.marks_restored;
            debug_assert!(
                look || !self.collected.missed(&key, found.map(|f| f.stamp)),
                "a first round missed a version"
            );
            if look && self.collected.missed(&key, found.map(|f| f.stamp)) {
                out.send(from, PtccMsg::TooOld { tag });
                return;
            }
            let Some(v) = found else {
                values.push((key, None));
                continue;
            };
            if naive {
                each.push(v.meta.ts.to_wire(true));
            } else if v.stamp.ts > floor {
                if !joined {
                    join.reset(floor);
                    joined = true;
                }
                join.join(&v.meta.ts);
            }
            values.push((key, v.value.clone()));
        }
        let read_ts = match (naive, joined) {
            (true, _) => ReadTs::Each(each),
            (false, true) => ReadTs::Joined(join.above(floor)),
            (false, false) => ReadTs::AtFloor,
        };
        let cover = if naive {
            Cover::Vector(self.snapshot.to_wire(true))
        } else {
            Cover::Floor { own: self.snapshot.get(self.me()), floor: least, pending }
        };
        out.send(from, PtccMsg::ReadResp { tag, cover, values, read_ts });
    }

    /// A vector from a message, if well formed for this DC: of its shape
    /// (checked by the decoding), and no entry impossibly far ahead of
    /// this partition's clock. The one check of every vector a replica
    /// takes in.
    fn decode(&self, wire: Wire, now: PhysicalMicros) -> Option<Sparse> {
        wire.decode_sparse(self.topology.partition_count()).filter(|v| v.max_entry() <= horizon(now))
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
        deps: Wire,
        out: &mut Out,
    ) -> Result<(), Refused> {
        // Kept whole with the prepared transaction.
        let deps = self.decode(deps, now).ok_or(Refused)?.to_vclock(self.topology.partition_count());
        if writes.iter().any(|(k, _)| !self.is_mine(k)) {
            return Err(Refused);
        }
        // Alg. 2 lines 3–4: a number above everything the client has seen.
        self.txns.on_write(now, &mut self.hlc, client, tx, writes, participants, coordinator, deps, out)
    }

    /// Outcomes durable: the commits' versions go in the store.
    fn on_logged(&mut self, now: PhysicalMicros, upto: u64, out: &mut Out) {
        for (prepared, decided) in self.txns.on_logged(now, upto, out) {
            self.install(now, prepared, decided);
        }
    }

    /// Puts a committed transaction's versions in the store, and collects
    /// what they make old (§VII): the versions older than one that is
    /// visible and has been held for the transaction timeout (the last of
    /// the chain's oldest such, not the newest: a hot key's recent versions
    /// are not scanned at every write). It takes the transaction whole: its
    /// values move into the store, its `D_c` becomes the commit timestamp
    /// and its numbers the metadata's — no copies, whose allocations and
    /// reference counts are CPU at every write.
    fn install(&mut self, now: PhysicalMicros, prepared: PreparedTx, decided: Decided) {
        let stamp = stamp_of(self.id.dc, &decided);
        let PreparedTx { deps, writes, .. } = prepared;
        let ts = VClock::commit_ts(deps, &decided);
        let meta = Arc::new(Meta { ts, decided });
        let (snapshot, timeout, started_at) = (&self.snapshot, self.config.txn_timeout_us, self.started_at);
        // `S_i`'s smallest entry, found (a walk over every partition's) only
        // if some version is old enough to be collected.
        let mut least = None;
        for (key, value) in writes {
            let version = Version { value, stamp, meta: Held { committed_at: now, meta: meta.clone() } };
            // Hot path: the time first, inline; a version held that long
            // is almost always visible by its stamp alone.
            self.collected.insert(&mut self.store, &key, version, |v| {
                v.meta.committed_at.max(started_at) + timeout <= now
                    && Self::version_visible(snapshot, *least.get_or_insert_with(|| snapshot.min_entry()), v)
            });
        }
        self.counters.transactions_applied += 1;
    }

    fn on_resolve_timer(&mut self, now: PhysicalMicros, out: &mut Out) {
        // A commit is settled once every participant's entry of `S_i` is
        // past it: nobody still holds it prepared.
        let snapshot = &self.snapshot;
        let settled = |decided: &Decided| decided.iter().all(|&(p, t)| snapshot.get(p) >= t);
        self.txns.on_resolve_timer(now, settled, out);
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
        let horizon = horizon(now);
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

    /// The end of every step: the outcomes known are recorded (in the order
    /// of their numbers), `S_i[i]` brought up to date, the clock reserved.
    fn end_step(&mut self, out: &mut Out) {
        self.txns.record_outcomes(out);
        self.refresh();
        self.reserved.after_step(&self.hlc, 0, out);
    }

    /// Rebuilds a partition from its records.
    pub fn replay(&mut self, records: Vec<PtccRecord>) {
        for record in records {
            self.reserved.restore(&record);
            match record {
                PtccRecord::Reserved(_) => {}
                PtccRecord::Prepared(prepared) => {
                    self.txns.replay_prepared(&mut self.hlc, prepared);
                }
                PtccRecord::Committed { tx, decided } => {
                    if let Some(prepared) = self.txns.replay_committed(tx, decided.clone()) {
                        self.install(0, prepared, decided);
                    }
                }
                PtccRecord::Aborted { tx } => self.txns.replay_aborted(tx),
                PtccRecord::Version { key, value, stamp, ts, decided } => {
                    if let Some(seq) = own_number(&decided, self.id.partition) {
                        self.hlc.observe(0, seq);
                    }
                    let meta = Held { committed_at: 0, meta: Arc::new(Meta { ts, decided }) };
                    self.store.insert(key, Version { value, stamp, meta }, |_| false);
                }
                PtccRecord::Collected { key, upto } => {
                    self.collected.restore(key, upto);
                    self.marks_restored = true;
                }
                PtccRecord::Recent { tx, decided } => {
                    self.txns.replay_recent(&mut self.hlc, tx, decided, None);
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
        self.txns.restart(now);
        self.refresh();
        out.set_timer(PtccTimer::Stabilize, self.config.stabilization_interval_us);
        out.set_timer(PtccTimer::Resolve, self.config.resolve_after_us);
        self.reserved.after_step(&self.hlc, 0, out);
    }

    /// Nothing to ask again: inside one DC there is no stream, a lost
    /// prepare or decision is resolved through the coordinator after
    /// `resolve_after_us`, a lost `S_i` report is replaced by the next
    /// round's, and a client whose read or commit got no answer times out.
    fn on_peer_lost(&mut self, _now: PhysicalMicros, _from: Addr, _out: &mut Out) {}

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: PtccMsg, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        let peer = match from {
            Addr::Replica(r) if r.dc == self.id.dc && r.partition.0 < self.topology.partition_count() => {
                Some(r.partition)
            }
            _ => None,
        };
        let handled = match (msg, from, peer) {
            (PtccMsg::Read { tag, keys, deps, at_snapshot }, Addr::Client(_), _) => {
                self.on_read(now, from, tag, keys, deps, at_snapshot, out);
                Ok(())
            }
            (PtccMsg::Write { tx, writes, participants, coordinator, deps }, Addr::Client(c), _) => {
                self.on_write(now, c, tx, writes, participants, coordinator, deps, out)
            }
            (PtccMsg::Prepared { tx, seq, participants, client }, _, Some(p)) => {
                self.txns.on_prepared(now, p, tx, seq, participants, client, out)
            }
            (PtccMsg::Commit { tx, decided }, _, Some(p)) => self.txns.on_commit(now, p, tx, decided, out),
            (PtccMsg::Resolve { tx, participants, client }, _, Some(p)) => {
                self.txns.on_resolve(now, p, tx, participants, client, out)
            }
            (PtccMsg::Query { tx }, _, Some(p)) => {
                self.txns.on_query(p, tx, out);
                Ok(())
            }
            (PtccMsg::Vote { tx, seq }, _, Some(p)) => self.txns.on_vote(now, p, tx, seq, out),
            (PtccMsg::Abort { tx }, _, Some(_)) => self.txns.on_abort(tx, out),
            (PtccMsg::CommittedHere { tx }, _, Some(p)) => self.txns.on_committed_here(p, tx, out),
            (PtccMsg::Logged { upto }, _, _) if from == Addr::Replica(self.id) => {
                self.on_logged(now, upto, out);
                Ok(())
            }
            (PtccMsg::Report { entries }, _, Some(_)) => {
                self.on_report(now, from, entries, out);
                Ok(())
            }
            (PtccMsg::Stable { snapshot }, _, Some(_)) => {
                self.on_stable(now, from, snapshot, out);
                Ok(())
            }
            _ => Err(Refused),
        };
        if handled.is_err() {
            self.refuse();
        }
        self.end_step(out);
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: PtccTimer, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        match timer {
            PtccTimer::Stabilize => self.on_stabilize_timer(out),
            PtccTimer::Resolve => self.on_resolve_timer(now, out),
        }
        self.end_step(out);
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
        self.txns.checkpoint(&mut records);
        // What the checkpoint no longer holds: its versions were collected.
        let marks = self.collected.sorted().into_iter();
        records.extend(marks.map(|(k, upto)| PtccRecord::Collected { key: k.clone(), upto }));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut of [`PtccReplica::version_visible`] never disagrees with
    /// the rule: a version is visible exactly when `S_i` covers every
    /// participant's entry, whichever of them lags — the one that gave the
    /// stamp its number, or another.
    #[test]
    fn a_versions_visibility_is_the_rule_whichever_participant_lags() {
        let decided: Decided = vec![(PartitionId(1), Timestamp(30)), (PartitionId(2), Timestamp(50))];
        let meta = Held { committed_at: 0, meta: Arc::new(Meta { ts: VClock::zeros(4), decided: decided.clone() }) };
        let v = Version { value: None, stamp: stamp_of(DcId(0), &decided), meta };
        assert_eq!(top_partition(&v.stamp), PartitionId(2));
        let snapshot = |entries: [u64; 4]| {
            let mut s = VClock::zeros(4);
            for (p, t) in entries.into_iter().enumerate() {
                s.raise_entry(PartitionId(p as u32), Timestamp(t));
            }
            s
        };
        for (entries, visible) in [
            ([0, 30, 50, 0], true),
            ([0, 29, 50, 0], false), // another participant lags
            ([0, 30, 49, 0], false), // the top one lags
            ([99, 99, 99, 99], true),
            ([50, 50, 50, 50], true), // every entry at the stamp: no need to look further
            ([49, 99, 99, 99], true), // a partition that did not take part lags
        ] {
            let s = snapshot(entries);
            assert_eq!(PtccReplica::visible(&s, &v.meta), visible, "{entries:?}");
            assert_eq!(PtccReplica::version_visible(&s, s.min_entry(), &v), visible, "{entries:?}");
        }
    }

    /// A read sends only the entries of a version's commit timestamp above
    /// the reader's floor, and the shortcut for a version stamped at or
    /// below it (no need to look at the timestamp) sends what the full
    /// encoding would.
    #[test]
    fn a_reads_commit_timestamp_is_the_same_with_or_without_the_shortcut() {
        let decided: Decided = vec![(PartitionId(1), Timestamp(30)), (PartitionId(2), Timestamp(50))];
        // The writer's dependencies are below every number it was given.
        let deps = {
            let mut d = VClock::zeros(4);
            d.raise_entry(PartitionId(0), Timestamp(20));
            d.raise_entry(PartitionId(3), Timestamp(29));
            d
        };
        let ts = VClock::commit_ts(deps, &decided);
        let meta = Held { committed_at: 0, meta: Arc::new(Meta { ts: ts.clone(), decided: decided.clone() }) };
        let v = Version { value: None, stamp: stamp_of(DcId(0), &decided), meta };
        for floor in [0, 19, 20, 29, 30, 49, 50, 51, 99] {
            let floor = Timestamp(floor);
            assert_eq!(PtccReplica::read_ts(&v, floor), ts.above(floor), "{floor:?}");
        }
    }
}
