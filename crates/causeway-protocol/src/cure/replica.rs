//! A Cure (or H-Cure) partition replica `p_n^m`: the family's core
//! (coordinator, prepared set, replication, clock, store) and Cure's own
//! roles, each owning its state:
//!
//! * the cohort's reads parked until their snapshot is installed
//!   ([`ParkedReads`]);
//! * the version vector, and the local time installed;
//! * stabilization ([`StableVector`]) — the GSV and the GC bound.
//!
//! What Cure does with each input is below; which role an input goes to,
//! and the rest of the replica contract, is the family's
//! ([`crate::twopc::replica`]).

use super::cohort::{self, ParkedReads, Prepared, SliceRead};
use super::messages::{CureFamily, Gossip, TxWrites};
use super::stabilization::StableVector;
use super::vector::{self, VectorTs};
use super::{ClockMode, CureConfig, CureFault};
use crate::contract::{CommitStamp, Key, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::mvstore::Version;
use crate::topology::Topology;
use crate::twopc::{CoreOf, FamilyEffects, FamilyReplica, FamilyTimer, TxnMsg};
use std::sync::Arc;

type Out = FamilyEffects<CureReplica>;

/// Cure's timers: the family's (Δ_R replicates or heartbeats, Δ_G gossips
/// the version vector), and [`WakeReads`].
pub type CureTimer = FamilyTimer<WakeReads>;

/// Cure only: the physical clock has reached the snapshot a parked read
/// waits for. Armed for exactly that moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeReads;

pub struct CureReplica {
    core: CoreOf<CureReplica>,
    fault: CureFault,
    mode: ClockMode,
    parked: ParkedReads,
    /// The version vector: entry `m` is the local time up to which this
    /// replica has applied and replicated every local commit; entry `i ≠ m`
    /// the latest update or heartbeat received from DC `i`.
    vv: VectorTs,
    /// The local time up to which this replica is known to have installed
    /// every commit (`VV[m]`, or more when a served read proved it).
    installed_local: Timestamp,
    stable: StableVector,
}

impl CureReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: CureConfig, mode: ClockMode) -> Self {
        let dcs = topology.dc_count();
        CureReplica {
            mode,
            fault: config.fault,
            parked: ParkedReads::default(),
            vv: VectorTs::zero(dcs),
            installed_local: Timestamp::ZERO,
            stable: StableVector::new(id, &topology),
            core: CoreOf::<CureReplica>::new(id, topology, config.rhythm),
        }
    }

    pub fn dc(&self) -> DcId {
        self.core.id.dc
    }

    /// The version vector `VV`.
    pub fn version_vector(&self) -> &VectorTs {
        &self.vv
    }

    /// The global stable vector as this replica knows it.
    pub fn stable_vector(&self) -> &VectorTs {
        self.stable.gsv()
    }

    /// Read slices waiting here for their snapshot.
    pub fn parked_reads(&self) -> usize {
        self.parked.len()
    }

    fn of_this_cluster(&mut self, snapshot: &VectorTs) -> bool {
        let ok = snapshot.len() == self.vv.len();
        self.core.counters.inputs_refused += u64::from(!ok);
        ok
    }

    /// The local entry a snapshot assigned now may take from this replica's
    /// clock: the physical clock in Cure, the HLC in H-Cure.
    fn snapshot_clock(&mut self, now: PhysicalMicros) -> Timestamp {
        match self.mode {
            ClockMode::Physical => Timestamp::from_physical(now),
            ClockMode::Hybrid => self.core.hlc.observe(now, Timestamp::ZERO),
        }
    }

    /// The oldest snapshot a transaction coordinated here may still read:
    /// the oldest running one, or, with none running, a lower bound of the
    /// snapshot a new one would get.
    fn oldest_local_snapshot(&self, now: PhysicalMicros) -> VectorTs {
        let mut newest = self.stable.gsv().clone();
        let clock = match self.mode {
            ClockMode::Physical => Timestamp::from_physical(now),
            ClockMode::Hybrid => self.core.clock().max(Timestamp::from_physical(now)),
        };
        newest.raise(self.dc(), clock);
        self.core.coordinator.oldest_snapshot(newest)
    }

    /// The largest snapshot local entry this replica can serve now.
    fn serve_bound(&self, now: PhysicalMicros) -> Timestamp {
        if self.fault == CureFault::ServeAhead {
            return Timestamp::MAX;
        }
        let pending = self.core.prepared.smallest_proposal().map_or(Timestamp::MAX, Timestamp::prev);
        let clock = match self.mode {
            ClockMode::Physical => Timestamp::from_physical(now),
            ClockMode::Hybrid => Timestamp::MAX,
        };
        pending.min(clock)
    }

    fn read_slice(&mut self, now: PhysicalMicros, read: SliceRead, out: &mut Out) {
        if !self.of_this_cluster(&read.snapshot) {
            return;
        }
        let t = read.snapshot.get(self.dc());
        // A read that could be served may wait for the next wake-up: Cure's
        // reads may wait, and a slow replica makes them.
        if t <= self.serve_bound(now) && !out.buggify("cure.read.park_anyway") {
            self.serve(now, read, out);
            return;
        }
        if self.mode == ClockMode::Hybrid {
            // H-Cure never waits for its clock: moving the HLC past the
            // snapshot now makes every later proposal exceed it, so only
            // transactions already prepared below it can hold the read.
            self.core.hlc.observe(now, t);
        }
        self.parked.park(t, read);
        self.arm_wake(now, out);
    }

    fn serve(&mut self, now: PhysicalMicros, read: SliceRead, out: &mut Out) {
        let t = read.snapshot.get(self.dc());
        // From now on every proposal here exceeds `t`: nothing can commit
        // inside the snapshot this read has seen.
        self.core.hlc.observe(now, t);
        self.installed_local = self.installed_local.max(t);
        let values: Vec<(Key, Option<Value>)> = read
            .keys
            .into_iter()
            .map(|key| {
                let value = cohort::read_at(&self.core.store, &key, &read.snapshot);
                (key, value)
            })
            .collect();
        out.send(read.from, TxnMsg::SliceResp { tx: read.tx, round: read.round, values });
    }

    /// Serves the parked reads whose snapshots are installed now, and arms
    /// the clock timer for the rest if the clock is what they wait for.
    fn wake_parked(&mut self, now: PhysicalMicros, out: &mut Out) {
        let bound = self.serve_bound(now);
        while let Some(read) = self.parked.take_servable(bound) {
            self.serve(now, read, out);
        }
        self.arm_wake(now, out);
    }

    /// Cure: a timer for the moment the physical clock reaches the smallest
    /// parked snapshot, unless one that fires earlier is armed.
    fn arm_wake(&mut self, now: PhysicalMicros, out: &mut Out) {
        if self.mode != ClockMode::Physical {
            return;
        }
        if let Some(due) = self.parked.wake_due(now) {
            out.set_timer(FamilyTimer::Own(WakeReads), due - now);
        }
    }

    /// Creates the versions of `txs`, committed at `ct` in DC `source`, then
    /// collects what the oldest snapshot in use no longer needs on their
    /// chains.
    fn install(&mut self, ct: Timestamp, source: DcId, txs: &[TxWrites]) {
        let s_old = self.stable.oldest_snapshot();
        for tx in txs {
            let stamp = CommitStamp { ts: ct, dc: source, txid: tx.txid };
            for (key, value) in &tx.writes {
                let version = Version { value: value.clone(), stamp, meta: tx.commit_vector.clone() };
                self.core.store.insert(key.clone(), version, |v| vector::visible(v, s_old));
            }
        }
        self.core.counters.transactions_applied += txs.len() as u64;
    }

    /// Every Δ_R: replicate, in commit order, the local commits no future
    /// commit here can precede, grouping those of equal commit time; advance
    /// the local entry of the version vector; heartbeat when idle.
    fn replicate_committed(&mut self, now: PhysicalMicros, out: &mut Out) {
        let ub = self.core.prepared.stable_bound(&mut self.core.hlc, now);
        let replicated = self.core.replication.release(ub, |_, _| {}, out);
        let m = self.dc();
        debug_assert!(ub >= self.vv.get(m), "the version clock went back");
        self.vv.raise(m, ub);
        self.installed_local = self.installed_local.max(ub);
        if !replicated {
            self.core.replication.heartbeat(self.vv.get(m), out);
        }
        // The version vector's smallest entry: every DC's writes up to it
        // are here (FIFO links), so a tombstone below it beats anything
        // still to come.
        let s_old = self.stable.oldest_snapshot();
        self.core.store.collect_tombstones(self.vv.min_entry(), |v| vector::visible(v, s_old));
    }
}

impl FamilyReplica for CureReplica {
    type Family = CureFamily;
    type OwnTimer = WakeReads;
    /// A version's commit vector.
    type Meta = VectorTs;
    type Prepared = Prepared;

    fn core(&self) -> &CoreOf<Self> {
        &self.core
    }

    fn core_mut(&mut self) -> &mut CoreOf<Self> {
        &mut self.core
    }

    fn serve_slice(&mut self, now: PhysicalMicros, read: SliceRead, out: &mut Out) {
        self.read_slice(now, read, out);
    }

    /// The snapshot of a transaction starting now for a client that has seen
    /// `seen`: the local entry is the freshest of the client's and this
    /// replica's clock — possibly not installed yet anywhere — and the remote
    /// entries come from the global stable vector (or the client's, if it
    /// has seen a fresher one; both are stable in this DC).
    fn start_transaction(&mut self, now: PhysicalMicros, client: Addr, seen: VectorTs, out: &mut Out) {
        if seen.len() != self.vv.len() {
            let why = format!("a snapshot of {} entries in a cluster of {} DCs", seen.len(), self.vv.len());
            out.send(client, TxnMsg::TxError { tx: None, error: SessionError::InvalidArgument(why) });
            return;
        }
        let mut snapshot = self.stable.gsv().clone();
        snapshot.join(&seen);
        let clock = self.snapshot_clock(now);
        snapshot.raise(self.dc(), clock);
        self.core.coordinator.start(now, client, snapshot, out);
    }

    /// Proposes a commit time above everything the transaction has seen and
    /// above everything this replica has proposed or served.
    fn prepare(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        snapshot: VectorTs,
        ht: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
        out: &mut Out,
    ) {
        if !self.of_this_cluster(&snapshot) {
            return;
        }
        let floor = ht.max(snapshot.max_entry());
        self.core.prepared.prepare(&mut self.core.hlc, now, from, tx, floor, || Prepared { snapshot, writes }, out);
    }

    /// Installs the transaction's versions at once, queues it for
    /// replication, and wakes the reads it was holding back.
    fn commit(&mut self, now: PhysicalMicros, tx: TxId, ct: Timestamp, out: &mut Out) {
        let Some(done) = self.core.prepared.resolve(&mut self.core.hlc, now, tx, ct) else { return };
        self.core.counters.inputs_refused += u64::from(done.raised);
        let commit_vector = vector::commit_vector(&done.prepared.snapshot, self.dc(), done.ct);
        let writes = TxWrites { txid: tx, commit_vector, writes: done.prepared.writes };
        self.install(done.ct, self.dc(), std::slice::from_ref(&writes));
        self.core.replication.queue(done.ct, tx, writes);
        self.wake_parked(now, out);
    }

    /// FIFO links deliver a replica's groups in commit order, so the
    /// sender's entry can advance to `ct`.
    fn replicated(&mut self, from: Addr, ct: Timestamp, txs: &[TxWrites], _out: &mut Out) {
        let Some(source) = self.core.replication.streams.source_of(from) else {
            self.core.refuse();
            return;
        };
        if !self.well_formed(source, ct, txs) {
            self.core.refuse();
            return;
        }
        self.install(ct, source, txs);
        self.vv.raise(source, ct);
    }

    fn stored_writes(
        _source: DcId,
        txid: TxId,
        commit_vector: &VectorTs,
        writes: Vec<(Key, Option<Value>)>,
    ) -> TxWrites {
        TxWrites { txid, commit_vector: commit_vector.clone(), writes }
    }

    /// Each commit vector is one of this cluster, of this commit.
    fn well_formed(&self, source: DcId, ct: Timestamp, txs: &[TxWrites]) -> bool {
        txs.iter().all(|tx| tx.commit_vector.len() == self.vv.len() && tx.commit_vector.get(source) == ct)
    }

    fn reinstall(&mut self, source: DcId, ct: Timestamp, txs: &[TxWrites]) {
        self.install(ct, source, txs);
    }

    fn heartbeat(&mut self, from: Addr, t: Timestamp, _out: &mut Out) {
        match self.core.replication.streams.source_of(from) {
            Some(source) => self.vv.raise(source, t),
            None => self.core.refuse(),
        }
    }

    fn stabilization(&mut self, _now: PhysicalMicros, from: Addr, report: Gossip, _out: &mut Out) {
        if !self.stable.on_gossip(from, report) {
            self.core.refuse();
        }
    }

    fn apply(&mut self, now: PhysicalMicros, out: &mut Out) {
        // A slow round: nothing replicated or promised yet.
        if !out.buggify("cure.apply.skip_round") {
            self.replicate_committed(now, out);
        }
        self.wake_parked(now, out);
    }

    fn stabilize(&mut self, now: PhysicalMicros, out: &mut Out) {
        // A report that comes one round late.
        if !out.buggify("cure.gossip.skip_round") {
            let oldest = self.oldest_local_snapshot(now);
            self.stable.gossip(&self.vv, oldest, out);
        }
    }

    fn on_own_timer(&mut self, now: PhysicalMicros, WakeReads: WakeReads, out: &mut Out) {
        self.parked.woken();
        self.wake_parked(now, out);
    }

    fn quiescent(&self) -> bool {
        self.core.prepared.is_empty() && self.core.replication.is_idle() && self.parked.is_empty()
    }

    /// Local writes: the local time this replica has installed. Remote
    /// ones: the DC's stable vector entry for their origin.
    fn visible_from(&self, origin: DcId) -> Timestamp {
        if origin == self.core.id.dc {
            self.installed_local.max(self.vv.get(origin))
        } else {
            self.stable.gsv().get(origin)
        }
    }

    fn stable_times_known(&self) -> bool {
        self.stable.agreed()
    }

    fn dc_stable(&self) -> Timestamp {
        self.stable.gsv().get(self.dc())
    }

    fn stable_floor(&self) -> Timestamp {
        self.stable.gsv().min_entry()
    }

    fn collection_bound(&self) -> Timestamp {
        self.stable.oldest_snapshot().max_entry()
    }

    /// One timestamp per DC: the commit vector.
    fn metadata_bytes(&self) -> u64 {
        8 * u64::from(self.core.topology.dc_count())
    }
}
