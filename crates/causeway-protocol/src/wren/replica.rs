//! The state of a Wren partition replica `p_n^m` and the dispatch of its
//! inputs to the coordinator, cohort, apply and stabilization roles.

use super::messages::{TxWrites, WrenMsg};
use super::snapshot::{self, Snapshot};
use super::stabilization::Bist;
use super::WrenConfig;
use crate::coordination::Contexts;
use crate::engine::{CommitStamp, Key, Outbox, Replica, ReplicaStats, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::mvstore::{MvStore, Version};
use crate::topology::Topology;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub type WrenOutbox = Outbox<WrenMsg, WrenTimer>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrenTimer {
    /// Δ_R: apply, replicate, heartbeat.
    Apply,
    /// Δ_G: start a round of BiST (leaves report up the tree).
    Stabilize,
    /// Drop the contexts of transactions whose clients went silent.
    ExpireContexts,
}

/// A transaction prepared here and waiting for its commit timestamp.
#[derive(Clone, Debug)]
pub(crate) struct PreparedTx {
    pub pt: Timestamp,
    pub rdt: Timestamp,
    pub writes: Vec<(Key, Value)>,
}

pub struct WrenReplica {
    pub(crate) id: ReplicaId,
    pub(crate) topology: Arc<Topology>,
    pub(crate) config: WrenConfig,
    /// The replicas of this partition in the other DCs.
    pub(crate) peers: Vec<Addr>,
    pub(crate) hlc: Hlc,
    /// `VV[i]`: for `i = m` the local version clock (the local snapshot this
    /// replica has installed); for `i ≠ m` the latest update or heartbeat
    /// received from the replica of this partition in DC `i`.
    pub(crate) vv: Vec<Timestamp>,
    /// Every partition of this DC has installed local items up to `lst`...
    pub(crate) lst: Timestamp,
    /// ...and remote items up to `rst`.
    pub(crate) rst: Timestamp,
    pub(crate) store: MvStore<Timestamp>,
    /// Prepared transactions, by proposed time (for the apply bound) and id.
    pub(crate) prepared_order: BTreeSet<(Timestamp, TxId)>,
    pub(crate) prepared: FxHashMap<TxId, PreparedTx>,
    /// Committed transactions not applied yet, in commit order.
    pub(crate) committed: BTreeMap<(Timestamp, TxId), TxWrites>,
    /// Transactions this replica coordinates.
    pub(crate) contexts: Contexts<Snapshot>,
    pub(crate) next_tx: u64,
    pub(crate) bist: Bist,
    /// The oldest snapshot any running transaction in the DC may read
    /// (`S_old`); versions older than what it sees are collected.
    pub(crate) s_old: Snapshot,
    pub(crate) stats: ReplicaStats,
}

impl WrenReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: WrenConfig) -> Self {
        let bist = Bist::new(id, &topology, config.tree_fanout);
        let peers = topology
            .replicas_of(id.partition)
            .iter()
            .filter(|&&dc| dc != id.dc)
            .map(|&dc| Addr::Replica(ReplicaId { dc, partition: id.partition }))
            .collect();
        WrenReplica {
            id,
            peers,
            vv: vec![Timestamp::ZERO; topology.dc_count() as usize],
            topology,
            config,
            hlc: Hlc::new(),
            lst: Timestamp::ZERO,
            rst: Timestamp::ZERO,
            store: MvStore::default(),
            prepared_order: BTreeSet::new(),
            prepared: FxHashMap::default(),
            committed: BTreeMap::new(),
            contexts: Contexts::default(),
            next_tx: 0,
            bist,
            s_old: Snapshot::default(),
            stats: ReplicaStats::default(),
        }
    }

    pub fn dc(&self) -> DcId {
        self.id.dc
    }

    /// `(lst, rst)` as this replica knows them.
    pub fn stable_times(&self) -> (Timestamp, Timestamp) {
        (self.lst, self.rst)
    }

    /// The version vector `VV`.
    pub fn version_vector(&self) -> &[Timestamp] {
        &self.vv
    }

    /// The GC bound `S_old` this replica has learned.
    pub fn oldest_snapshot(&self) -> Snapshot {
        self.s_old
    }

    pub fn hlc(&self) -> Timestamp {
        self.hlc.current()
    }

    /// Number of transactions this replica coordinates right now.
    pub fn open_contexts(&self) -> usize {
        self.contexts.len()
    }

    /// Number of versions of `key` stored here.
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.store.chain(key).map_or(0, |c| c.len())
    }

    /// The freshest version of `key` visible in `snapshot` (Alg. 3, 6–11).
    pub(crate) fn read_at(&self, key: &[u8], snapshot: Snapshot) -> Option<Value> {
        let chain = self.store.chain(key)?;
        // Local versions need ut ≤ lt, remote ones ut ≤ rt: none above both.
        chain.newest_visible_upto(snapshot.lt.max(snapshot.rt), |v| self.visible(v, snapshot)).map(|v| v.value.clone())
    }

    /// The visibility rule of reads, with the deliberate bug a test may
    /// switch on (GC always uses the true rule).
    fn visible(&self, version: &Version<Timestamp>, snapshot: Snapshot) -> bool {
        match self.config.fault {
            super::Fault::RemoteVisibleAtLocalTime if version.stamp.dc != self.dc() => version.stamp.ts <= snapshot.lt,
            _ => snapshot::visible(self.dc(), version, snapshot),
        }
    }

    /// `UPDATE` of Alg. 4 for every write of a group of transactions that
    /// committed at `ct` in DC `source`: create the versions, then collect
    /// what `S_old` no longer needs on their chains.
    pub(crate) fn install_group(&mut self, ct: Timestamp, source: DcId, txs: &[TxWrites]) {
        let (here, s_old) = (self.dc(), self.s_old);
        for tx in txs {
            let stamp = CommitStamp { ts: ct, dc: source, txid: tx.txid };
            for (key, value) in &tx.writes {
                let version = Version { value: value.clone(), stamp, meta: tx.rdt };
                self.store.insert(key.clone(), version, |v| snapshot::visible(here, v, s_old));
            }
        }
        self.stats.transactions_applied += txs.len() as u64;
    }
}

impl Replica for WrenReplica {
    type Message = WrenMsg;
    type Timer = WrenTimer;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut WrenOutbox) {
        self.hlc.observe(now, Timestamp::ZERO);
        out.set_timer(WrenTimer::Apply, self.config.apply_interval_us);
        out.set_timer(WrenTimer::Stabilize, self.config.stabilization_interval_us);
        out.set_timer(WrenTimer::ExpireContexts, self.config.tx_context_timeout_us / 2 + 1);
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: WrenMsg, out: &mut WrenOutbox) {
        use WrenMsg::*;
        match msg {
            StartTxReq { lst, rst } => self.on_start_tx(now, from, lst, rst, out),
            TxReadReq { tx, keys } => self.on_tx_read(now, from, tx, keys, out),
            CommitReq { tx, hwt, writes } => self.on_commit_req(now, from, tx, hwt, writes, out),
            EndTx { tx } => self.on_end_tx(tx),
            SliceReq { tx, keys, snapshot } => self.on_slice(from, tx, keys, snapshot, out),
            SliceResp { tx, values } => self.on_slice_resp(tx, values, out),
            PrepareReq { tx, snapshot, ht, writes } => self.on_prepare(now, from, tx, snapshot, ht, writes, out),
            PrepareResp { tx, pt } => self.on_prepare_resp(tx, pt, out),
            Commit { tx, ct } => self.on_commit(now, tx, ct),
            Replicate { ct, txs } => self.on_replicate(from, ct, txs),
            Heartbeat { t } => self.on_heartbeat(from, t),
            StableUp(report) => self.on_stable_up(from, report, out),
            StableDown { lst, rst, oldest } => self.on_stable_down(lst, rst, oldest, out),
            StartTxResp { .. } | TxReadResp { .. } | CommitResp { .. } | TxError { .. } => {
                // Replies meant for clients: a peer speaking out of turn. Drop.
            }
        }
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: WrenTimer, out: &mut WrenOutbox) {
        match timer {
            WrenTimer::Apply => {
                self.apply_committed(now, out);
                out.set_timer(WrenTimer::Apply, self.config.apply_interval_us);
            }
            WrenTimer::Stabilize => {
                self.stabilize(out);
                out.set_timer(WrenTimer::Stabilize, self.config.stabilization_interval_us);
            }
            WrenTimer::ExpireContexts => {
                self.expire_contexts(now);
                out.set_timer(WrenTimer::ExpireContexts, self.config.tx_context_timeout_us / 2 + 1);
            }
        }
    }

    fn is_quiescent(&self) -> bool {
        self.prepared.is_empty() && self.committed.is_empty()
    }

    fn latest_values(&self) -> Vec<(Key, Value)> {
        self.store.latest()
    }

    fn visible_upto(&self, origin: DcId) -> Timestamp {
        if origin == self.id.dc {
            self.lst
        } else {
            self.rst
        }
    }

    /// `ut` (the commit time) and `rdt`.
    fn version_metadata_bytes(&self) -> u64 {
        16
    }

    fn stats(&self) -> ReplicaStats {
        ReplicaStats {
            versions: self.store.version_count(),
            versions_collected: self.store.collected_count(),
            ..self.stats
        }
    }
}
