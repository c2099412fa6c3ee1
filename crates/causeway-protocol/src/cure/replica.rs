//! The state of a Cure (or H-Cure) partition replica `p_n^m` and the
//! dispatch of its inputs to the coordinator, cohort, apply and
//! stabilization roles.

use super::messages::{CureMsg, TxWrites};
use super::vector::{self, VectorTs};
use super::{ClockMode, CureConfig};
use crate::coordination::Contexts;
use crate::engine::{CommitStamp, Key, Outbox, Replica, ReplicaStats, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::mvstore::{MvStore, Version};
use crate::topology::Topology;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub type CureOutbox = Outbox<CureMsg, CureTimer>;

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

/// A transaction prepared here and waiting for its commit timestamp.
#[derive(Clone, Debug)]
pub(crate) struct PreparedTx {
    pub pt: Timestamp,
    /// The snapshot it read from: its commit vector, but for the local entry.
    pub snapshot: VectorTs,
    pub writes: Vec<(Key, Value)>,
}

/// A read slice whose snapshot this partition has not installed yet.
#[derive(Clone, Debug)]
pub(crate) struct ParkedRead {
    pub from: Addr,
    pub tx: TxId,
    pub keys: Vec<Key>,
    pub snapshot: VectorTs,
}

pub struct CureReplica {
    pub(crate) id: ReplicaId,
    pub(crate) topology: Arc<Topology>,
    pub(crate) config: CureConfig,
    pub(crate) mode: ClockMode,
    /// The replicas of this partition in the other DCs.
    pub(crate) peers: Vec<Addr>,
    /// The other partitions of this DC.
    pub(crate) partners: Vec<Addr>,
    /// Proposals and (H-Cure) snapshots come from this clock; it never runs
    /// behind the physical clock.
    pub(crate) hlc: Hlc,
    /// The version vector: entry `m` is the local time up to which this
    /// replica has applied and replicated every local commit; entry `i ≠ m`
    /// the latest update or heartbeat received from DC `i`.
    pub(crate) vv: VectorTs,
    /// The local time up to which this replica is known to have installed
    /// every commit (`VV[m]`, or more when a parked read proved it).
    pub(crate) installed_local: Timestamp,
    /// The global stable vector: every partition of the DC has received
    /// DC `i`'s updates up to `gsv[i]`.
    pub(crate) gsv: VectorTs,
    /// The latest version vector and oldest snapshot reported by each
    /// partition of the DC, by partition id (this replica's slot unused).
    pub(crate) reports: Vec<Option<(VectorTs, VectorTs)>>,
    pub(crate) store: MvStore<VectorTs>,
    /// Prepared transactions, by proposed time (what reads wait for) and id.
    pub(crate) prepared_order: BTreeSet<(Timestamp, TxId)>,
    pub(crate) prepared: FxHashMap<TxId, PreparedTx>,
    /// Transactions committed here and applied locally, not yet replicated,
    /// in commit order.
    pub(crate) committed: BTreeMap<(Timestamp, TxId), TxWrites>,
    /// Reads waiting for their snapshot, by its local entry (then arrival).
    pub(crate) parked: BTreeMap<(Timestamp, u64), ParkedRead>,
    pub(crate) parked_seq: u64,
    /// When the earliest armed `WakeReads` timer fires (local clock).
    pub(crate) wake_at: Option<PhysicalMicros>,
    /// Transactions this replica coordinates.
    pub(crate) contexts: Contexts<VectorTs>,
    pub(crate) next_tx: u64,
    /// The oldest snapshot any running transaction in the DC may read;
    /// versions older than what it sees are collected.
    pub(crate) s_old: VectorTs,
    pub(crate) stats: ReplicaStats,
}

impl CureReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: CureConfig, mode: ClockMode) -> Self {
        let peers = topology
            .replicas_of(id.partition)
            .iter()
            .filter(|&&dc| dc != id.dc)
            .map(|&dc| Addr::Replica(ReplicaId { dc, partition: id.partition }))
            .collect();
        let partners = topology.replicas_in(id.dc).into_iter().filter(|r| *r != id).map(Addr::Replica).collect();
        let dcs = topology.dc_count();
        CureReplica {
            id,
            peers,
            partners,
            mode,
            config,
            hlc: Hlc::new(),
            vv: VectorTs::zero(dcs),
            installed_local: Timestamp::ZERO,
            gsv: VectorTs::zero(dcs),
            reports: vec![None; topology.partition_count() as usize],
            store: MvStore::default(),
            prepared_order: BTreeSet::new(),
            prepared: FxHashMap::default(),
            committed: BTreeMap::new(),
            parked: BTreeMap::new(),
            parked_seq: 0,
            wake_at: None,
            contexts: Contexts::default(),
            next_tx: 0,
            s_old: VectorTs::zero(dcs),
            stats: ReplicaStats::default(),
            topology,
        }
    }

    pub fn dc(&self) -> DcId {
        self.id.dc
    }

    pub fn clock_mode(&self) -> ClockMode {
        self.mode
    }

    /// The version vector `VV`.
    pub fn version_vector(&self) -> &VectorTs {
        &self.vv
    }

    /// The global stable vector as this replica knows it.
    pub fn stable_vector(&self) -> &VectorTs {
        &self.gsv
    }

    /// The GC bound this replica has learned.
    pub fn oldest_snapshot(&self) -> &VectorTs {
        &self.s_old
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
        self.contexts.len()
    }

    /// Number of versions of `key` stored here.
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.store.chain(key).map_or(0, |c| c.len())
    }

    /// The local entry a snapshot assigned now may take from this replica's
    /// clock: the physical clock in Cure, the HLC in H-Cure.
    pub(crate) fn snapshot_clock(&mut self, now: PhysicalMicros) -> Timestamp {
        match self.mode {
            ClockMode::Physical => Timestamp::from_physical(now),
            ClockMode::Hybrid => self.hlc.observe(now, Timestamp::ZERO),
        }
    }

    /// The freshest version of `key` visible in `snapshot`.
    pub(crate) fn read_at(&self, key: &[u8], snapshot: &VectorTs) -> Option<Value> {
        let chain = self.store.chain(key)?;
        // A version is stamped with its commit vector's entry for its DC, so
        // none stamped above the snapshot's largest entry is visible.
        chain.newest_visible_upto(snapshot.max_entry(), |v| vector::visible(v, snapshot)).map(|v| v.value.clone())
    }

    /// Creates the versions of `txs`, committed at `ct` in DC `source`, then
    /// collects what the oldest snapshot in use no longer needs on their
    /// chains.
    pub(crate) fn install(&mut self, ct: Timestamp, source: DcId, txs: &[TxWrites]) {
        let s_old = &self.s_old;
        for tx in txs {
            let stamp = CommitStamp { ts: ct, dc: source, txid: tx.txid };
            for (key, value) in &tx.writes {
                let version = Version { value: value.clone(), stamp, meta: tx.commit_vector.clone() };
                self.store.insert(key.clone(), version, |v| vector::visible(v, s_old));
            }
        }
        self.stats.transactions_applied += txs.len() as u64;
    }
}

impl Replica for CureReplica {
    type Message = CureMsg;
    type Timer = CureTimer;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut CureOutbox) {
        self.hlc.observe(now, Timestamp::ZERO);
        out.set_timer(CureTimer::Apply, self.config.apply_interval_us);
        out.set_timer(CureTimer::Stabilize, self.config.stabilization_interval_us);
        out.set_timer(CureTimer::ExpireContexts, self.config.tx_context_timeout_us / 2 + 1);
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: CureMsg, out: &mut CureOutbox) {
        use CureMsg::*;
        match msg {
            StartTxReq { seen } => self.on_start_tx(now, from, seen, out),
            TxReadReq { tx, keys } => self.on_tx_read(now, from, tx, keys, out),
            CommitReq { tx, hwt, writes } => self.on_commit_req(now, from, tx, hwt, writes, out),
            EndTx { tx } => self.on_end_tx(tx),
            SliceReq { tx, keys, snapshot } => self.on_slice(now, from, tx, keys, snapshot, out),
            SliceResp { tx, values } => self.on_slice_resp(tx, values, out),
            PrepareReq { tx, snapshot, ht, writes } => self.on_prepare(now, from, tx, snapshot, ht, writes, out),
            PrepareResp { tx, pt } => self.on_prepare_resp(tx, pt, out),
            Commit { tx, ct } => self.on_commit(now, tx, ct, out),
            Replicate { ct, txs } => self.on_replicate(from, ct, txs),
            Heartbeat { t } => self.on_heartbeat(from, t),
            Gossip { vv, oldest } => self.on_gossip(from, vv, oldest),
            StartTxResp { .. } | TxReadResp { .. } | CommitResp { .. } | TxError { .. } => {
                // Replies meant for clients: a peer speaking out of turn. Drop.
            }
        }
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: CureTimer, out: &mut CureOutbox) {
        match timer {
            CureTimer::Apply => {
                self.replicate_committed(now, out);
                self.wake_parked(now, out);
                out.set_timer(CureTimer::Apply, self.config.apply_interval_us);
            }
            CureTimer::Stabilize => {
                self.gossip(now, out);
                out.set_timer(CureTimer::Stabilize, self.config.stabilization_interval_us);
            }
            CureTimer::ExpireContexts => {
                self.expire_contexts(now);
                out.set_timer(CureTimer::ExpireContexts, self.config.tx_context_timeout_us / 2 + 1);
            }
            CureTimer::WakeReads => {
                // Whichever timer this was, re-check and re-arm from scratch
                // (a drifting clock may not have reached the mark yet; an
                // extra timer costs one spurious check).
                self.wake_at = None;
                self.wake_parked(now, out);
            }
        }
    }

    fn is_quiescent(&self) -> bool {
        self.prepared.is_empty() && self.committed.is_empty() && self.parked.is_empty()
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
            self.gsv.get(origin)
        }
    }

    /// One timestamp per DC: the commit vector.
    fn version_metadata_bytes(&self) -> u64 {
        8 * u64::from(self.topology.dc_count())
    }

    fn stats(&self) -> ReplicaStats {
        ReplicaStats {
            versions: self.store.version_count(),
            versions_collected: self.store.collected_count(),
            ..self.stats
        }
    }
}
