//! A PaRiS (or BPR) partition replica `p_n^m`: the family's core (coordinator —
//! whose cohorts may be in other DCs —, prepared set, replication to the
//! other replicas of the partition, clock, store) and PaRiS's own roles,
//! each owning its state:
//!
//! * the apply loop's version vector ([`VersionVector`], R entries: one per
//!   DC holding the partition), Alg. 4 lines 6–36;
//! * UST ([`Ust`]) — the universal stable time and `S_old`.
//!
//! Which role an input goes to, and the rest of the replica contract, is
//! the family's ([`crate::twopc::replica`]).

use super::cohort::{self, Prepared};
use super::messages::{ParisFamily, TxWrites, UstMsg, UstReport};
use super::snapshot::visible;
use super::stabilization::Ust;
use super::{Fault, ParisConfig};
use crate::contract::{CommitStamp, Key, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::mvstore::{MvStore, Version};
use crate::topology::Topology;
use crate::twopc::{
    CoreOf, FamilyEffects, FamilyRecord, FamilyReplica, FamilyTimer, ParkedReads, SliceRequest, TxnMsg, VersionVector,
};
use std::convert::Infallible;
use std::sync::Arc;

type Out = FamilyEffects<ParisReplica>;

/// PaRiS's timers are the family's: Δ_R applies, replicates or heartbeats;
/// Δ_G starts a round of UST.
pub type ParisTimer = FamilyTimer;

pub struct ParisReplica {
    core: CoreOf<ParisReplica>,
    fault: Fault,
    vv: VersionVector,
    ust: Ust,
    /// BPR: snapshots are the coordinator's clock, and a read waits until
    /// this replica has installed everything up to its snapshot.
    blocking: bool,
    /// BPR's reads waiting for their snapshot (always empty under PaRiS).
    parked: ParkedReads<Timestamp>,
}

/// This replica's UST report: the minimum of its version vector, and the
/// oldest snapshot its running transactions may read.
fn own_report(vv: &VersionVector, core: &CoreOf<ParisReplica>, ust: &Ust, fault: Fault) -> UstReport {
    let installed = if fault == Fault::LocalEntriesOnly { vv.local() } else { vv.settled() };
    UstReport { installed, oldest: core.coordinator.oldest_snapshot(ust.ust()).min(ust.oldest_cap()) }
}

/// `UPDATE` of Alg. 4 for every write of a group of transactions committed
/// at `ct`: versions stamped with their coordinator's DC, then what
/// `s_old` no longer needs collected from their chains.
fn install(store: &mut MvStore<()>, s_old: Timestamp, ct: Timestamp, txs: &[TxWrites]) -> u64 {
    for tx in txs {
        let stamp = CommitStamp { ts: ct, dc: tx.origin, txid: tx.txid };
        for (key, value) in &tx.writes {
            store.insert(key.clone(), Version { value: value.clone(), stamp, meta: () }, |v| visible(v, s_old));
        }
    }
    txs.len() as u64
}

impl ParisReplica {
    /// A PaRiS replica, or with `blocking` a BPR one.
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: ParisConfig, blocking: bool) -> Self {
        let remote = topology.peers_of(id).into_iter().map(|r| r.dc).collect();
        ParisReplica {
            vv: VersionVector::new(id.dc, topology.dc_count(), remote),
            ust: Ust::new(id, &topology, config.tree_fanout),
            fault: config.fault,
            blocking,
            parked: ParkedReads::default(),
            core: CoreOf::<ParisReplica>::new(id, topology, config.rhythm),
        }
    }

    /// At a DC's root, the UST made durable now and then
    /// ([`Ust::to_persist`]).
    fn persist_ust(&mut self, out: &mut Out) {
        if let Some(at) = self.ust.to_persist() {
            out.persist(FamilyRecord::Stable { at });
        }
    }

    /// Serves `read` from the store.
    fn serve(&mut self, read: SliceRequest<Timestamp>, out: &mut Out) {
        let SliceRequest { from, tx, round, keys, snapshot } = read;
        let values = cohort::slice(&self.core.store, keys, snapshot);
        out.send(from, TxnMsg::SliceResp { tx, round, values });
    }

    /// How far this replica has installed every transaction of every
    /// replica of its partition (or, with the planted fault, its own).
    fn installed(&self) -> Timestamp {
        match self.fault {
            Fault::BprOwnClockOnly => self.vv.local(),
            _ => self.vv.settled(),
        }
    }

    /// BPR: serves the parked reads whose snapshots this replica has now
    /// installed — every transaction of every replica of its partition up
    /// to them.
    fn wake_parked(&mut self, out: &mut Out) {
        // Every group and heartbeat comes here; under PaRiS nothing parks.
        if self.parked.is_empty() {
            return;
        }
        let installed = self.installed();
        while let Some(read) = self.parked.take_servable(installed) {
            self.serve(read, out);
        }
    }

    /// The UST as this replica knows it.
    pub fn ust(&self) -> Timestamp {
        self.ust.ust()
    }

    /// Alg. 4, lines 6–23: apply, in commit order, the committed
    /// transactions no future commit can precede; replicate each group of
    /// equal commit time to the partition's other replicas; advance the
    /// version clock; heartbeat when idle.
    fn apply_committed(&mut self, now: PhysicalMicros, out: &mut Out) {
        let core = &mut self.core;
        let ub = core.prepared.stable_bound(&mut core.hlc, now);
        let s_old = self.ust.oldest_snapshot();
        let (store, counters) = (&mut core.store, &mut core.counters);
        let apply = |ct, group: &[TxWrites]| counters.transactions_applied += install(store, s_old, ct, group);
        let replicated = core.replication.release(ub, apply, out);
        debug_assert!(ub >= self.vv.local(), "the version clock went back");
        self.vv.raise(self.core.id.dc, ub);
        if !replicated {
            self.core.replication.heartbeat(self.vv.local(), out);
        }
        let settled = self.vv.settled();
        self.core.store.collect_tombstones(settled, |v| visible(v, s_old));
    }
}

impl FamilyReplica for ParisReplica {
    type Family = ParisFamily;
    type OwnTimer = Infallible;
    /// Nothing: a version's one timestamp is its stamp's.
    type Meta = ();
    type Prepared = Prepared;

    fn core(&self) -> &CoreOf<Self> {
        &self.core
    }

    fn core_mut(&mut self) -> &mut CoreOf<Self> {
        &mut self.core
    }

    /// Alg. 2, lines 1–5: the snapshot is the UST, at least the client's.
    /// BPR's (§V-A) is the coordinator's clock, at least the client's.
    fn start_transaction(&mut self, now: PhysicalMicros, client: Addr, seen: Timestamp, out: &mut Out) {
        let snapshot = if self.blocking {
            self.core.hlc.observe(now, seen)
        } else {
            self.ust.learn(seen);
            match self.fault {
                // A fresh clock value: not installed everywhere yet.
                Fault::SnapshotFromClock => self.core.hlc.observe(now, self.ust.ust()),
                _ => self.ust.ust(),
            }
        };
        self.core.coordinator.start(now, client, snapshot, out);
    }

    /// Alg. 3, lines 1–8: answered at once, from the snapshot — for a
    /// transaction of this DC or of another. BPR's waits until this
    /// replica has installed the snapshot.
    fn serve_slice(&mut self, _now: PhysicalMicros, read: SliceRequest<Timestamp>, out: &mut Out) {
        if !self.blocking {
            self.ust.learn(read.snapshot);
        } else if read.snapshot > self.installed() || out.buggify("bpr.read.park_anyway") {
            // Served once installed: woken by the apply round, a group or
            // a heartbeat from a peer, whichever brings it there.
            return self.parked.park(read.snapshot, read);
        }
        self.serve(read, out);
    }

    /// Alg. 3, lines 10–15: the proposal exceeds the snapshot and the
    /// client's last commit (`ht`). (A BPR snapshot is no UST.)
    fn prepare(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        snapshot: Timestamp,
        ht: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
        out: &mut Out,
    ) {
        let Addr::Replica(coordinator) = from else { return self.core.refuse() };
        let prepared = || Prepared { origin: coordinator.dc, writes };
        let core = &mut self.core;
        if core.prepared.prepare(&mut core.hlc, now, from, tx, ht, prepared, out).is_some() && !self.blocking {
            self.ust.learn(snapshot);
        }
    }

    /// Alg. 3, lines 17–21: the transaction waits for the apply loop.
    fn commit(&mut self, now: PhysicalMicros, tx: TxId, ct: Timestamp, _out: &mut Out) {
        let core = &mut self.core;
        let Some(done) = core.prepared.resolve(&mut core.hlc, now, tx, ct) else { return };
        core.counters.inputs_refused += u64::from(done.raised);
        let writes = TxWrites { txid: tx, origin: done.prepared.origin, writes: done.prepared.writes };
        core.replication.queue(done.ct, tx, writes);
    }

    /// Alg. 4, lines 25–32. FIFO links deliver a replica's groups in commit
    /// order, so its entry can advance to `ct`.
    fn replicated(&mut self, from: Addr, ct: Timestamp, txs: &[TxWrites], out: &mut Out) {
        let Some(source) = self.core.replication.streams.source_of(from) else { return self.core.refuse() };
        let s_old = self.ust.oldest_snapshot();
        self.core.counters.transactions_applied += install(&mut self.core.store, s_old, ct, txs);
        self.vv.raise(source, ct);
        self.wake_parked(out);
    }

    fn stored_writes(source: DcId, txid: TxId, _meta: &(), writes: Vec<(Key, Option<Value>)>) -> TxWrites {
        TxWrites { txid, origin: source, writes }
    }

    fn reinstall(&mut self, _source: DcId, ct: Timestamp, txs: &[TxWrites]) {
        let s_old = self.ust.oldest_snapshot();
        self.core.counters.transactions_applied += install(&mut self.core.store, s_old, ct, txs);
    }

    /// A transaction's coordinator is in a DC of this cluster.
    fn well_formed(&self, _source: DcId, _ct: Timestamp, txs: &[TxWrites]) -> bool {
        txs.iter().all(|tx| tx.origin.0 < self.core.topology.dc_count())
    }

    /// Alg. 4, lines 34–36.
    fn heartbeat(&mut self, from: Addr, t: Timestamp, out: &mut Out) {
        match self.core.replication.streams.source_of(from) {
            Some(source) => self.vv.raise(source, t),
            None => self.core.refuse(),
        }
        self.wake_parked(out);
    }

    fn stabilization(&mut self, _now: PhysicalMicros, from: Addr, msg: UstMsg, out: &mut Out) {
        match msg {
            UstMsg::Up(report) => {
                let (vv, core, fault) = (&self.vv, &self.core, self.fault);
                self.ust.on_report(from, report, |ust| own_report(vv, core, ust, fault), out);
                self.persist_ust(out);
            }
            UstMsg::Across(report) => {
                if !self.ust.on_across(from, report) {
                    self.core.refuse();
                }
            }
            UstMsg::Down { ust, oldest } if self.ust.is_parent(from) => self.ust.on_down(ust, oldest, out),
            UstMsg::Down { .. } => self.core.refuse(),
        }
    }

    fn apply(&mut self, now: PhysicalMicros, out: &mut Out) {
        // A slow round: nothing applied, replicated or promised yet.
        if !out.buggify("paris.apply.skip_round") {
            self.apply_committed(now, out);
        }
        self.wake_parked(out);
    }

    fn stabilize(&mut self, _now: PhysicalMicros, out: &mut Out) {
        // A report that comes one round late.
        if !out.buggify("paris.ust.skip_report") {
            let report = own_report(&self.vv, &self.core, &self.ust, self.fault);
            self.ust.tick(report, out);
            self.persist_ust(out);
        }
    }

    fn on_own_timer(&mut self, _now: PhysicalMicros, never: Infallible, _out: &mut Out) {
        match never {}
    }

    fn quiescent(&self) -> bool {
        self.core.prepared.is_empty() && self.core.replication.is_idle() && self.parked.is_empty()
    }

    /// PaRiS: one snapshot for every origin, the UST. BPR: what this
    /// replica has installed of every stream of its partition — a read at
    /// a snapshot up to it is served at once; above it, it parks.
    fn visible_from(&self, _origin: DcId) -> Timestamp {
        match self.blocking {
            true => self.installed(),
            false => self.ust.ust(),
        }
    }

    fn restore_stable(&mut self, at: Timestamp) {
        self.ust.restore(at);
    }

    fn stable_to_keep(&self) -> Option<Timestamp> {
        self.ust.persisted()
    }

    fn stable_times_known(&self) -> bool {
        self.ust.agreed()
    }

    /// Every cohort, in any DC, has resolved every transaction up to the
    /// UST: the decisions kept for their questions can go.
    fn dc_stable(&self) -> Timestamp {
        self.ust.ust()
    }

    fn stable_floor(&self) -> Timestamp {
        self.ust.ust()
    }

    fn collection_bound(&self) -> Timestamp {
        self.ust.oldest_snapshot()
    }

    /// `ut`, the commit time.
    fn metadata_bytes(&self) -> u64 {
        8
    }
}
