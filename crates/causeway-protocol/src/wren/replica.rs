//! A Wren partition replica `p_n^m`: its roles, each owning its state, and
//! the dispatch of inputs between them.
//!
//! * the coordinator ([`Coordinator`]) — the transactions it runs (Alg. 2);
//! * the cohort — prepared transactions ([`PreparedSet`]) and reads from the
//!   store ([`Reader`], Alg. 3);
//! * the apply loop — the version vector ([`VersionVector`]) and the commits
//!   waiting to be applied and replicated ([`Replicator`], Alg. 4);
//! * BiST ([`Bist`]) — the stable times LST, RST and `S_old`.
//!
//! The hybrid clock and the multi-version store are the replica's: every
//! role reads or moves them, through the methods below.

use super::apply::{self, VersionVector};
use super::cohort::{Prepared, Reader};
use super::messages::{BistMsg, StableReport, StartFrom, TxWrites, WrenMsg};
use super::snapshot::Snapshot;
use super::stabilization::Bist;
use super::{Fault, WrenConfig};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{Key, NoRecord, Replica, ReplicaCounters, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::mvstore::MvStore;
use crate::topology::Topology;
use crate::twopc::{Coordinator, PreparedSet, Replicator, TxnMsg};
use std::sync::Arc;

type Out = ReplicaEffects<WrenReplica>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrenTimer {
    /// Δ_R: apply, replicate, heartbeat.
    Apply,
    /// Δ_G: start a round of BiST (leaves report up the tree).
    Stabilize,
    /// Drop the contexts of transactions whose clients went silent.
    ExpireContexts,
}

pub struct WrenReplica {
    id: ReplicaId,
    topology: Arc<Topology>,
    config: WrenConfig,
    hlc: Hlc,
    store: MvStore<Timestamp>,
    coordinator: Coordinator<Snapshot>,
    prepared: PreparedSet<Prepared>,
    replication: Replicator<TxWrites>,
    vv: VersionVector,
    bist: Bist,
    counters: ReplicaCounters,
}

/// This replica's BiST report: the minima of its version vector, and the
/// oldest snapshot its running transactions may read.
fn own_report(vv: &VersionVector, coordinator: &Coordinator<Snapshot>, bist: &Bist) -> StableReport {
    StableReport { local: vv.local(), remote: vv.remote_min(), oldest: coordinator.oldest_snapshot(bist.snapshot()) }
}

impl WrenReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: WrenConfig) -> Self {
        let remote = topology.peers_of(id).into_iter().map(|r| r.dc).collect();
        WrenReplica {
            id,
            hlc: Hlc::new(),
            store: MvStore::default(),
            coordinator: Coordinator::new(id, config.tx_context_timeout_us),
            prepared: PreparedSet::default(),
            replication: Replicator::new(id, &topology),
            vv: VersionVector::new(id.dc, topology.dc_count(), remote),
            bist: Bist::new(id, &topology, config.tree_fanout),
            counters: ReplicaCounters::default(),
            topology,
            config,
        }
    }

    pub fn dc(&self) -> DcId {
        self.id.dc
    }

    /// `(lst, rst)` as this replica knows them.
    pub fn stable_times(&self) -> (Timestamp, Timestamp) {
        self.bist.stable_times()
    }

    /// The version vector `VV`.
    pub fn version_vector(&self) -> &[Timestamp] {
        self.vv.as_slice()
    }

    pub fn hlc(&self) -> Timestamp {
        self.hlc.current()
    }

    /// Transactions prepared here and not committed yet.
    pub fn pending_transactions(&self) -> usize {
        self.prepared.len()
    }

    /// Number of transactions this replica coordinates right now.
    pub fn open_contexts(&self) -> usize {
        self.coordinator.open_transactions()
    }

    /// Number of versions of `key` stored here.
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.store.chain(key).map_or(0, |c| c.len())
    }

    fn reader(&self) -> Reader<'_> {
        Reader { store: &self.store, here: self.id.dc, fault: self.config.fault }
    }

    /// Alg. 2, lines 1–6: the snapshot of a transaction starting now.
    fn start_transaction(&mut self, now: PhysicalMicros, client: Addr, seen: StartFrom, out: &mut Out) {
        self.bist.learn(seen.lst, seen.rst);
        let snapshot = match self.config.fault {
            // A fresh clock value rather than a stable one: not installed yet.
            Fault::SnapshotFromClock => {
                let (lst, rst) = self.bist.stable_times();
                let lt = self.hlc.observe(now, lst);
                Snapshot { lt, rt: rst.min(lt.prev()) }
            }
            _ => self.bist.snapshot(),
        };
        self.coordinator.start(now, client, snapshot, out);
    }

    /// Alg. 3, lines 1–12: answered at once, from the snapshot.
    fn serve_slice(&mut self, from: Addr, tx: TxId, round: u32, keys: Vec<Key>, snapshot: Snapshot, out: &mut Out) {
        self.bist.learn(snapshot.lt, snapshot.rt);
        let values = self.reader().slice(keys, snapshot);
        out.send(from, TxnMsg::SliceResp { tx, round, values });
    }

    /// Alg. 3, lines 13–19.
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        snapshot: Snapshot,
        ht: Timestamp,
        writes: Vec<(Key, Value)>,
        out: &mut Out,
    ) {
        let prepared = || Prepared { rdt: snapshot.rt, writes };
        if self.prepared.prepare(&mut self.hlc, now, from, tx, ht, prepared, out).is_some() {
            self.bist.learn(snapshot.lt, snapshot.rt);
        }
    }

    /// Alg. 3, lines 20–24: the transaction waits for the apply loop.
    fn commit(&mut self, now: PhysicalMicros, tx: TxId, ct: Timestamp) {
        let Some(done) = self.prepared.resolve(&mut self.hlc, now, tx, ct) else { return };
        self.counters.inputs_refused += u64::from(done.raised);
        let writes = TxWrites { txid: tx, rdt: done.prepared.rdt, writes: done.prepared.writes };
        self.replication.queue(done.ct, tx, writes);
    }

    /// Every Δ_R (Alg. 4, lines 5–21): apply, in commit order, the committed
    /// transactions no future commit can precede; replicate each group of
    /// equal commit time to the other DCs; advance the version clock;
    /// heartbeat when idle.
    fn apply_committed(&mut self, now: PhysicalMicros, out: &mut Out) {
        let ub = self.prepared.stable_bound(&mut self.hlc, now);
        let (here, s_old) = (self.id.dc, self.bist.oldest_snapshot());
        let (store, counters) = (&mut self.store, &mut self.counters);
        let replicated = self.replication.release(
            ub,
            |ct, group| counters.transactions_applied += apply::install(store, here, s_old, ct, here, group),
            out,
        );
        debug_assert!(ub >= self.vv.local(), "the version clock went back");
        self.vv.raise(here, ub);
        if !replicated {
            self.replication.heartbeat(self.vv.local(), out);
        }
    }

    /// Alg. 4, lines 22–26. FIFO links deliver a replica's groups in commit
    /// order, so the sender's version clock can advance to `ct`.
    fn on_replicate(&mut self, from: Addr, ct: Timestamp, txs: Vec<TxWrites>) {
        let Some(source) = self.replication.source_of(from) else {
            self.counters.inputs_refused += 1;
            return;
        };
        let (here, s_old) = (self.id.dc, self.bist.oldest_snapshot());
        self.counters.transactions_applied += apply::install(&mut self.store, here, s_old, ct, source, &txs);
        self.vv.raise(source, ct);
    }

    /// Alg. 4, lines 27–28.
    fn on_heartbeat(&mut self, from: Addr, t: Timestamp) {
        match self.replication.source_of(from) {
            Some(source) => self.vv.raise(source, t),
            None => self.counters.inputs_refused += 1,
        }
    }

    fn on_stabilization(&mut self, from: Addr, msg: BistMsg, out: &mut Out) {
        match msg {
            BistMsg::Up(report) => {
                let (vv, coordinator) = (&self.vv, &self.coordinator);
                self.bist.on_report(from, report, |bist| own_report(vv, coordinator, bist), out);
            }
            BistMsg::Down { lst, rst, oldest } if Some(from) == self.bist.parent().map(Addr::Replica) => {
                self.bist.on_down(lst, rst, oldest, out);
            }
            BistMsg::Down { .. } => self.counters.inputs_refused += 1,
        }
    }
}

impl Replica for WrenReplica {
    type Message = WrenMsg;
    type Timer = WrenTimer;
    type Record = NoRecord;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        out.set_timer(WrenTimer::Apply, self.config.apply_interval_us);
        out.set_timer(WrenTimer::Stabilize, self.config.stabilization_interval_us);
        out.set_timer(WrenTimer::ExpireContexts, self.coordinator.expiry_interval_us());
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: WrenMsg, out: &mut Out) {
        use TxnMsg::*;
        let topology = &self.topology;
        match msg {
            StartTxReq(seen) => self.start_transaction(now, from, seen, out),
            TxReadReq { tx, keys } => self.coordinator.on_read(now, from, tx, keys, topology, out),
            CommitReq { tx, hwt, writes } => {
                self.coordinator.on_commit_request(now, from, tx, hwt, writes, topology, out)
            }
            EndTx { tx } => self.coordinator.end(tx),
            SliceReq { tx, round, keys, snapshot } => self.serve_slice(from, tx, round, keys, snapshot, out),
            SliceResp { tx, round, values } => self.coordinator.on_slice(tx, round, values, out),
            PrepareReq { tx, snapshot, ht, writes } => self.prepare(now, from, tx, snapshot, ht, writes, out),
            PrepareResp { tx, pt } => self.coordinator.on_proposal(tx, pt, out),
            Commit { tx, ct } => self.commit(now, tx, ct),
            Replicate { ct, txs } => self.on_replicate(from, ct, txs),
            Heartbeat { t } => self.on_heartbeat(from, t),
            Stabilization(msg) => self.on_stabilization(from, msg, out),
            // Replies meant for clients: a peer speaking out of turn.
            StartTxResp { .. } | TxReadResp { .. } | CommitResp { .. } | TxError { .. } => {
                self.counters.inputs_refused += 1;
            }
        }
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: WrenTimer, out: &mut Out) {
        match timer {
            WrenTimer::Apply => {
                // A slow round: nothing applied, replicated or promised yet.
                if !out.buggify("wren.apply.skip_round") {
                    self.apply_committed(now, out);
                }
                out.set_timer(WrenTimer::Apply, self.config.apply_interval_us);
            }
            WrenTimer::Stabilize => {
                // A report that comes one round late.
                if !out.buggify("wren.bist.skip_report") {
                    let (vv, coordinator) = (&self.vv, &self.coordinator);
                    self.bist.tick(|bist| own_report(vv, coordinator, bist), out);
                }
                out.set_timer(WrenTimer::Stabilize, self.config.stabilization_interval_us);
            }
            WrenTimer::ExpireContexts => {
                self.coordinator.expire(now);
                out.set_timer(WrenTimer::ExpireContexts, self.coordinator.expiry_interval_us());
            }
        }
    }

    fn is_quiescent(&self) -> bool {
        self.prepared.is_empty() && self.replication.is_idle()
    }

    fn latest_values(&self) -> Vec<(Key, Value)> {
        self.store.latest()
    }

    fn visible_upto(&self, origin: DcId) -> Timestamp {
        let (lst, rst) = self.bist.stable_times();
        if origin == self.id.dc {
            lst
        } else {
            rst
        }
    }

    /// `ut` (the commit time) and `rdt`.
    fn version_metadata_bytes(&self) -> u64 {
        16
    }

    fn counters(&self) -> ReplicaCounters {
        ReplicaCounters {
            versions: self.store.version_count(),
            versions_collected: self.store.collected_count(),
            contexts_expired: self.coordinator.expired(),
            ..self.counters
        }
    }
}
