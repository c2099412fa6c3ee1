//! A Cure (or H-Cure) partition replica `p_n^m`: its roles, each owning its
//! state, and the dispatch of inputs between them.
//!
//! * the coordinator ([`Coordinator`]) — snapshot assignment and 2PC;
//! * the cohort — prepared transactions ([`PreparedSet`]) and the reads
//!   parked until their snapshot is installed ([`ParkedReads`]);
//! * replication — the version vector and the local commits waiting to go
//!   to the other DCs ([`Replicator`]);
//! * stabilization ([`StableVector`]) — the GSV and the GC bound.
//!
//! The hybrid clock and the multi-version store are the replica's.

use super::cohort::{self, ParkedReads, Prepared, SliceRead};
use super::messages::{CureMsg, Gossip, TxWrites};
use super::stabilization::StableVector;
use super::vector::{self, VectorTs};
use super::{ClockMode, CureConfig, CureFault};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{CommitStamp, Key, NoRecord, Replica, ReplicaCounters, SessionError, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::mvstore::{MvStore, Version};
use crate::topology::Topology;
use crate::twopc::{Coordinator, PreparedSet, Replicator, TxnMsg};
use std::sync::Arc;

type Out = ReplicaEffects<CureReplica>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CureTimer {
    /// Δ_R: replicate what committed here, or heartbeat.
    Apply,
    /// Δ_G: send the version vector to the other partitions of the DC.
    Stabilize,
    /// Drop the contexts of transactions whose clients went silent.
    ExpireContexts,
    /// Cure only: the physical clock has reached the snapshot a parked read
    /// waits for. Armed for exactly that moment.
    WakeReads,
}

pub struct CureReplica {
    id: ReplicaId,
    topology: Arc<Topology>,
    config: CureConfig,
    mode: ClockMode,
    /// Proposals and (H-Cure) snapshots come from this clock; it never runs
    /// behind the physical clock.
    hlc: Hlc,
    store: MvStore<VectorTs>,
    coordinator: Coordinator<VectorTs>,
    prepared: PreparedSet<Prepared>,
    parked: ParkedReads,
    /// Transactions committed and installed here, waiting to be replicated.
    replication: Replicator<TxWrites>,
    /// The version vector: entry `m` is the local time up to which this
    /// replica has applied and replicated every local commit; entry `i ≠ m`
    /// the latest update or heartbeat received from DC `i`.
    vv: VectorTs,
    /// The local time up to which this replica is known to have installed
    /// every commit (`VV[m]`, or more when a served read proved it).
    installed_local: Timestamp,
    stable: StableVector,
    counters: ReplicaCounters,
}

impl CureReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: CureConfig, mode: ClockMode) -> Self {
        let dcs = topology.dc_count();
        CureReplica {
            id,
            mode,
            hlc: Hlc::new(),
            store: MvStore::default(),
            coordinator: Coordinator::new(id, config.tx_context_timeout_us),
            prepared: PreparedSet::default(),
            parked: ParkedReads::default(),
            replication: Replicator::new(id, &topology),
            vv: VectorTs::zero(dcs),
            installed_local: Timestamp::ZERO,
            stable: StableVector::new(id, &topology),
            counters: ReplicaCounters::default(),
            config,
            topology,
        }
    }

    pub fn dc(&self) -> DcId {
        self.id.dc
    }

    /// The version vector `VV`.
    pub fn version_vector(&self) -> &VectorTs {
        &self.vv
    }

    /// The global stable vector as this replica knows it.
    pub fn stable_vector(&self) -> &VectorTs {
        self.stable.gsv()
    }

    pub fn hlc(&self) -> Timestamp {
        self.hlc.current()
    }

    /// Read slices waiting here for their snapshot.
    pub fn parked_reads(&self) -> usize {
        self.parked.len()
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

    fn of_this_cluster(&mut self, snapshot: &VectorTs) -> bool {
        let ok = snapshot.len() == self.vv.len();
        self.counters.inputs_refused += u64::from(!ok);
        ok
    }

    /// The local entry a snapshot assigned now may take from this replica's
    /// clock: the physical clock in Cure, the HLC in H-Cure.
    fn snapshot_clock(&mut self, now: PhysicalMicros) -> Timestamp {
        match self.mode {
            ClockMode::Physical => Timestamp::from_physical(now),
            ClockMode::Hybrid => self.hlc.observe(now, Timestamp::ZERO),
        }
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
        self.coordinator.start(now, client, snapshot, out);
    }

    /// The oldest snapshot a transaction coordinated here may still read:
    /// the oldest running one, or, with none running, a lower bound of the
    /// snapshot a new one would get.
    fn oldest_local_snapshot(&self, now: PhysicalMicros) -> VectorTs {
        let mut newest = self.stable.gsv().clone();
        let clock = match self.mode {
            ClockMode::Physical => Timestamp::from_physical(now),
            ClockMode::Hybrid => self.hlc.current().max(Timestamp::from_physical(now)),
        };
        newest.raise(self.dc(), clock);
        self.coordinator.oldest_snapshot(newest)
    }

    /// The largest snapshot local entry this replica can serve now.
    fn serve_bound(&self, now: PhysicalMicros) -> Timestamp {
        if self.config.fault == CureFault::ServeAhead {
            return Timestamp::MAX;
        }
        let pending = self.prepared.smallest_proposal().map_or(Timestamp::MAX, Timestamp::prev);
        let clock = match self.mode {
            ClockMode::Physical => Timestamp::from_physical(now),
            ClockMode::Hybrid => Timestamp::MAX,
        };
        pending.min(clock)
    }

    fn on_slice(&mut self, now: PhysicalMicros, read: SliceRead, out: &mut Out) {
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
            self.hlc.observe(now, t);
        }
        self.parked.park(t, read);
        self.arm_wake(now, out);
    }

    fn serve(&mut self, now: PhysicalMicros, read: SliceRead, out: &mut Out) {
        let t = read.snapshot.get(self.dc());
        // From now on every proposal here exceeds `t`: nothing can commit
        // inside the snapshot this read has seen.
        self.hlc.observe(now, t);
        self.installed_local = self.installed_local.max(t);
        let values: Vec<(Key, Option<Value>)> = read
            .keys
            .into_iter()
            .map(|key| {
                let value = cohort::read_at(&self.store, &key, &read.snapshot);
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
            out.set_timer(CureTimer::WakeReads, due - now);
        }
    }

    /// Proposes a commit time above everything the transaction has seen and
    /// above everything this replica has proposed or served.
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        snapshot: VectorTs,
        ht: Timestamp,
        writes: Vec<(Key, Value)>,
        out: &mut Out,
    ) {
        if !self.of_this_cluster(&snapshot) {
            return;
        }
        let floor = ht.max(snapshot.max_entry());
        self.prepared.prepare(&mut self.hlc, now, from, tx, floor, || Prepared { snapshot, writes }, out);
    }

    /// Installs the transaction's versions at once, queues it for
    /// replication, and wakes the reads it was holding back.
    fn commit(&mut self, now: PhysicalMicros, tx: TxId, ct: Timestamp, out: &mut Out) {
        let Some(done) = self.prepared.resolve(&mut self.hlc, now, tx, ct) else { return };
        self.counters.inputs_refused += u64::from(done.raised);
        let commit_vector = vector::commit_vector(&done.prepared.snapshot, self.dc(), done.ct);
        let writes = TxWrites { txid: tx, commit_vector, writes: done.prepared.writes };
        self.install(done.ct, self.dc(), std::slice::from_ref(&writes));
        self.replication.queue(done.ct, tx, writes);
        self.wake_parked(now, out);
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
                self.store.insert(key.clone(), version, |v| vector::visible(v, s_old));
            }
        }
        self.counters.transactions_applied += txs.len() as u64;
    }

    /// Every Δ_R: replicate, in commit order, the local commits no future
    /// commit here can precede, grouping those of equal commit time; advance
    /// the local entry of the version vector; heartbeat when idle.
    fn replicate_committed(&mut self, now: PhysicalMicros, out: &mut Out) {
        let ub = self.prepared.stable_bound(&mut self.hlc, now);
        let replicated = self.replication.release(ub, |_, _| {}, out);
        let m = self.dc();
        debug_assert!(ub >= self.vv.get(m), "the version clock went back");
        self.vv.raise(m, ub);
        self.installed_local = self.installed_local.max(ub);
        if !replicated {
            self.replication.heartbeat(self.vv.get(m), out);
        }
    }

    /// FIFO links deliver a replica's groups in commit order, so the
    /// sender's entry can advance to `ct`.
    fn on_replicate(&mut self, from: Addr, ct: Timestamp, txs: Vec<TxWrites>) {
        let Some(source) = self.replication.source_of(from) else {
            self.counters.inputs_refused += 1;
            return;
        };
        if txs.iter().any(|tx| tx.commit_vector.len() != self.vv.len() || tx.commit_vector.get(source) != ct) {
            // Not a commit vector of this cluster and this commit.
            self.counters.inputs_refused += 1;
            return;
        }
        self.install(ct, source, &txs);
        self.vv.raise(source, ct);
    }

    fn on_heartbeat(&mut self, from: Addr, t: Timestamp) {
        match self.replication.source_of(from) {
            Some(source) => self.vv.raise(source, t),
            None => self.counters.inputs_refused += 1,
        }
    }

    fn on_gossip(&mut self, from: Addr, report: Gossip) {
        if !self.stable.on_gossip(from, report) {
            self.counters.inputs_refused += 1;
        }
    }
}

impl Replica for CureReplica {
    type Message = CureMsg;
    type Timer = CureTimer;
    type Record = NoRecord;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        out.set_timer(CureTimer::Apply, self.config.apply_interval_us);
        out.set_timer(CureTimer::Stabilize, self.config.stabilization_interval_us);
        out.set_timer(CureTimer::ExpireContexts, self.coordinator.expiry_interval_us());
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: CureMsg, out: &mut Out) {
        use TxnMsg::*;
        let topology = &self.topology;
        match msg {
            StartTxReq(seen) => self.start_transaction(now, from, seen, out),
            TxReadReq { tx, keys } => self.coordinator.on_read(now, from, tx, keys, topology, out),
            CommitReq { tx, hwt, writes } => {
                self.coordinator.on_commit_request(now, from, tx, hwt, writes, topology, out)
            }
            EndTx { tx } => self.coordinator.end(tx),
            SliceReq { tx, round, keys, snapshot } => {
                self.on_slice(now, SliceRead { from, tx, round, keys, snapshot }, out)
            }
            SliceResp { tx, round, values } => self.coordinator.on_slice(tx, round, values, out),
            PrepareReq { tx, snapshot, ht, writes } => self.prepare(now, from, tx, snapshot, ht, writes, out),
            PrepareResp { tx, pt } => self.coordinator.on_proposal(tx, pt, out),
            Commit { tx, ct } => self.commit(now, tx, ct, out),
            Replicate { ct, txs } => self.on_replicate(from, ct, txs),
            Heartbeat { t } => self.on_heartbeat(from, t),
            Stabilization(report) => self.on_gossip(from, report),
            // Replies meant for clients: a peer speaking out of turn.
            StartTxResp { .. } | TxReadResp { .. } | CommitResp { .. } | TxError { .. } => {
                self.counters.inputs_refused += 1;
            }
        }
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: CureTimer, out: &mut Out) {
        match timer {
            CureTimer::Apply => {
                // A slow round: nothing replicated or promised yet.
                if !out.buggify("cure.apply.skip_round") {
                    self.replicate_committed(now, out);
                }
                self.wake_parked(now, out);
                out.set_timer(CureTimer::Apply, self.config.apply_interval_us);
            }
            CureTimer::Stabilize => {
                // A report that comes one round late.
                if !out.buggify("cure.gossip.skip_round") {
                    let oldest = self.oldest_local_snapshot(now);
                    self.stable.gossip(&self.vv, oldest, out);
                }
                out.set_timer(CureTimer::Stabilize, self.config.stabilization_interval_us);
            }
            CureTimer::ExpireContexts => {
                self.coordinator.expire(now);
                out.set_timer(CureTimer::ExpireContexts, self.coordinator.expiry_interval_us());
            }
            CureTimer::WakeReads => {
                self.parked.woken();
                self.wake_parked(now, out);
            }
        }
    }

    fn is_quiescent(&self) -> bool {
        self.prepared.is_empty() && self.replication.is_idle() && self.parked.is_empty()
    }

    fn latest_values(&self) -> Vec<(Key, Value)> {
        self.store.latest()
    }

    /// Local writes: the local time this replica has installed. Remote
    /// ones: the DC's stable vector entry for their origin.
    fn visible_upto(&self, origin: DcId) -> Timestamp {
        if origin == self.id.dc {
            self.installed_local.max(self.vv.get(origin))
        } else {
            self.stable.gsv().get(origin)
        }
    }

    /// One timestamp per DC: the commit vector.
    fn version_metadata_bytes(&self) -> u64 {
        8 * u64::from(self.topology.dc_count())
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
