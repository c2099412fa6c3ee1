//! A Wren partition replica `p_n^m`: the family's core (coordinator,
//! prepared set, replication, clock, store) and Wren's own roles, each
//! owning its state:
//!
//! * the cohort's reads from the store ([`Reader`], Alg. 3);
//! * the apply loop's version vector ([`VersionVector`], Alg. 4);
//! * BiST ([`Bist`]) — the stable times LST, RST and `S_old`.
//!
//! What Wren does with each input is below; which role an input goes to,
//! and the rest of the replica contract, is the family's
//! ([`crate::twopc::replica`]).

use super::apply;
use super::cohort::{Prepared, Reader};
use super::messages::{BistMsg, StableReport, StartFrom, TxWrites, WrenFamily};
use super::snapshot::{self, Snapshot};
use super::stabilization::Bist;
use super::{Fault, WrenConfig};
use crate::contract::{Key, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::topology::Topology;
use crate::twopc::{CoreOf, FamilyEffects, FamilyReplica, FamilyTimer, SliceRequest, TxnMsg, VersionVector};
use std::convert::Infallible;
use std::sync::Arc;

type Out = FamilyEffects<WrenReplica>;

/// Wren's timers are the family's: Δ_R applies, replicates or heartbeats;
/// Δ_G starts a round of BiST (leaves report up the tree).
pub type WrenTimer = FamilyTimer;

pub struct WrenReplica {
    core: CoreOf<WrenReplica>,
    fault: Fault,
    vv: VersionVector,
    bist: Bist,
}

/// This replica's BiST report: the minima of its version vector, and the
/// oldest snapshot its running transactions may read.
fn own_report(vv: &VersionVector, core: &CoreOf<WrenReplica>, bist: &Bist) -> StableReport {
    let oldest = core.coordinator.oldest_snapshot(bist.snapshot());
    StableReport { local: vv.local(), remote: vv.remote_min(), oldest }
}

impl WrenReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: WrenConfig) -> Self {
        let remote = topology.peers_of(id).into_iter().map(|r| r.dc).collect();
        WrenReplica {
            vv: VersionVector::new(id.dc, topology.dc_count(), remote),
            bist: Bist::new(id, &topology, config.tree_fanout),
            fault: config.fault,
            core: CoreOf::<WrenReplica>::new(id, topology, config.rhythm),
        }
    }

    pub fn dc(&self) -> DcId {
        self.core.id.dc
    }

    /// `(lst, rst)` as this replica knows them.
    pub fn stable_times(&self) -> (Timestamp, Timestamp) {
        self.bist.stable_times()
    }

    /// The version vector `VV`.
    pub fn version_vector(&self) -> &[Timestamp] {
        self.vv.as_slice()
    }

    fn reader(&self) -> Reader<'_> {
        Reader { store: &self.core.store, here: self.dc(), fault: self.fault }
    }

    /// Alg. 4, lines 5–21: apply, in commit order, the committed
    /// transactions no future commit can precede; replicate each group of
    /// equal commit time to the other DCs; advance the version clock;
    /// heartbeat when idle.
    fn apply_committed(&mut self, now: PhysicalMicros, out: &mut Out) {
        let core = &mut self.core;
        let ub = core.prepared.stable_bound(&mut core.hlc, now);
        let (here, s_old) = (core.id.dc, self.bist.oldest_snapshot());
        let (store, counters) = (&mut core.store, &mut core.counters);
        let install = |ct, group: &[TxWrites]| {
            counters.transactions_applied += apply::install(store, here, s_old, ct, here, group);
        };
        let replicated = core.replication.release(ub, install, out);
        debug_assert!(ub >= self.vv.local(), "the version clock went back");
        self.vv.raise(here, ub);
        if !replicated {
            core.replication.heartbeat(self.vv.local(), out);
        }
        let settled = self.vv.settled();
        core.store.collect_tombstones(settled, |v| snapshot::visible(here, v, s_old));
    }
}

impl FamilyReplica for WrenReplica {
    type Family = WrenFamily;
    type OwnTimer = Infallible;
    /// A version's remote dependency time `rdt` (its commit time `ut` is its
    /// stamp's).
    type Meta = Timestamp;
    type Prepared = Prepared;

    fn core(&self) -> &CoreOf<Self> {
        &self.core
    }

    fn core_mut(&mut self) -> &mut CoreOf<Self> {
        &mut self.core
    }

    /// Alg. 2, lines 1–6: the snapshot of a transaction starting now.
    fn start_transaction(&mut self, now: PhysicalMicros, client: Addr, seen: StartFrom, out: &mut Out) {
        self.bist.learn(seen.lst, seen.rst);
        let snapshot = match self.fault {
            // A fresh clock value rather than a stable one: not installed yet.
            Fault::SnapshotFromClock => {
                let (lst, rst) = self.bist.stable_times();
                let lt = self.core.hlc.observe(now, lst);
                Snapshot { lt, rt: rst.min(lt.prev()) }
            }
            _ => self.bist.snapshot(),
        };
        self.core.coordinator.start(now, client, snapshot, out);
    }

    /// Alg. 3, lines 1–12: answered at once, from the snapshot.
    fn serve_slice(&mut self, _now: PhysicalMicros, read: SliceRequest<Snapshot>, out: &mut Out) {
        let SliceRequest { from, tx, round, keys, snapshot } = read;
        self.bist.learn(snapshot.lt, snapshot.rt);
        let values = self.reader().slice(keys, snapshot);
        out.send(from, TxnMsg::SliceResp { tx, round, values });
    }

    /// Alg. 3, lines 13–19.
    fn prepare(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        snapshot: Snapshot,
        ht: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
        out: &mut Out,
    ) {
        let prepared = || Prepared { rdt: snapshot.rt, writes };
        let core = &mut self.core;
        if core.prepared.prepare(&mut core.hlc, now, from, tx, ht, prepared, out).is_some() {
            self.bist.learn(snapshot.lt, snapshot.rt);
        }
    }

    /// Alg. 3, lines 20–24: the transaction waits for the apply loop.
    fn commit(&mut self, now: PhysicalMicros, tx: TxId, ct: Timestamp, _out: &mut Out) {
        let core = &mut self.core;
        let Some(done) = core.prepared.resolve(&mut core.hlc, now, tx, ct) else { return };
        core.counters.inputs_refused += u64::from(done.raised);
        let writes = TxWrites { txid: tx, rdt: done.prepared.rdt, writes: done.prepared.writes };
        core.replication.queue(done.ct, tx, writes);
    }

    /// Alg. 4, lines 22–26. FIFO links deliver a replica's groups in commit
    /// order, so the sender's version clock can advance to `ct`.
    fn replicated(&mut self, from: Addr, ct: Timestamp, txs: &[TxWrites], _out: &mut Out) {
        let Some(source) = self.core.replication.streams.source_of(from) else { return self.core.refuse() };
        let without_deletes: Vec<TxWrites>;
        let txs = if self.fault == Fault::DropRemoteDeletes {
            without_deletes = txs
                .iter()
                .map(|tx| TxWrites {
                    txid: tx.txid,
                    rdt: tx.rdt,
                    writes: tx.writes.iter().filter(|(_, v)| v.is_some()).cloned().collect(),
                })
                .collect();
            &without_deletes
        } else {
            txs
        };
        let (here, s_old) = (self.dc(), self.bist.oldest_snapshot());
        let applied = apply::install(&mut self.core.store, here, s_old, ct, source, txs);
        self.core.counters.transactions_applied += applied;
        self.vv.raise(source, ct);
    }

    fn stored_writes(_source: DcId, txid: TxId, rdt: &Timestamp, writes: Vec<(Key, Option<Value>)>) -> TxWrites {
        TxWrites { txid, rdt: *rdt, writes }
    }

    fn reinstall(&mut self, source: DcId, ct: Timestamp, txs: &[TxWrites]) {
        let (here, s_old) = (self.dc(), self.bist.oldest_snapshot());
        self.core.counters.transactions_applied += apply::install(&mut self.core.store, here, s_old, ct, source, txs);
    }

    /// Alg. 4, lines 27–28.
    fn heartbeat(&mut self, from: Addr, t: Timestamp, _out: &mut Out) {
        match self.core.replication.streams.source_of(from) {
            Some(source) => self.vv.raise(source, t),
            None => self.core.refuse(),
        }
    }

    fn stabilization(&mut self, _now: PhysicalMicros, from: Addr, msg: BistMsg, out: &mut Out) {
        match msg {
            BistMsg::Up(report) => {
                let (vv, core) = (&self.vv, &self.core);
                self.bist.on_report(from, report, |bist| own_report(vv, core, bist), out);
            }
            BistMsg::Down { lst, rst, oldest } if Some(from) == self.bist.parent().map(Addr::Replica) => {
                self.bist.on_down(lst, rst, oldest, out);
            }
            BistMsg::Down { .. } => self.core.refuse(),
        }
    }

    fn apply(&mut self, now: PhysicalMicros, out: &mut Out) {
        // A slow round: nothing applied, replicated or promised yet.
        if !out.buggify("wren.apply.skip_round") {
            self.apply_committed(now, out);
        }
    }

    fn stabilize(&mut self, _now: PhysicalMicros, out: &mut Out) {
        // A report that comes one round late.
        if !out.buggify("wren.bist.skip_report") {
            let (vv, core) = (&self.vv, &self.core);
            self.bist.tick(|bist| own_report(vv, core, bist), out);
        }
    }

    fn on_own_timer(&mut self, _now: PhysicalMicros, never: Infallible, _out: &mut Out) {
        match never {}
    }

    fn quiescent(&self) -> bool {
        self.core.prepared.is_empty() && self.core.replication.is_idle()
    }

    fn visible_from(&self, origin: DcId) -> Timestamp {
        let (lst, rst) = self.bist.stable_times();
        if origin == self.dc() {
            lst
        } else {
            rst
        }
    }

    fn stable_times_known(&self) -> bool {
        self.bist.agreed()
    }

    fn dc_stable(&self) -> Timestamp {
        self.bist.stable_times().0
    }

    fn stable_floor(&self) -> Timestamp {
        let (lst, rst) = self.bist.stable_times();
        lst.min(rst)
    }

    fn collection_bound(&self) -> Timestamp {
        use crate::twopc::Snapshot as _;
        self.bist.oldest_snapshot().ceiling()
    }

    /// `ut` (the commit time) and `rdt`.
    fn metadata_bytes(&self) -> u64 {
        16
    }

    fn deaf_to_lost_messages(&self) -> bool {
        self.fault == Fault::IgnorePeerLost
    }
}
