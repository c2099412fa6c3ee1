//! An EC partition replica: reads the newest version, applies writes the
//! moment they arrive, replicates them every Δ_R, keeps one version per key.

use super::messages::{EcMsg, EcWrites};
use super::EcConfig;
use crate::engine::{CommitStamp, Key, Outbox, Replica, ReplicaStats, SessionError, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::mvstore::{MvStore, Version};
use crate::topology::Topology;
use std::sync::Arc;

pub type EcOutbox = Outbox<EcMsg, EcTimer>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcTimer {
    /// Δ_R: send what was applied here since the last tick to the other DCs.
    Replicate,
}

pub struct EcReplica {
    id: ReplicaId,
    topology: Arc<Topology>,
    config: EcConfig,
    /// The replicas of this partition in the other DCs.
    peers: Vec<Addr>,
    /// Commit times of the transactions this replica coordinates.
    hlc: Hlc,
    store: MvStore<()>,
    /// The newest commit time applied here from each DC.
    newest_from: Vec<Timestamp>,
    /// Local writes applied and not yet replicated.
    outgoing: Vec<EcWrites>,
    next_tx: u64,
    stats: ReplicaStats,
}

impl EcReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: EcConfig) -> Self {
        let peers = topology
            .replicas_of(id.partition)
            .iter()
            .filter(|&&dc| dc != id.dc)
            .map(|&dc| Addr::Replica(ReplicaId { dc, partition: id.partition }))
            .collect();
        EcReplica {
            id,
            peers,
            config,
            hlc: Hlc::new(),
            store: MvStore::default(),
            newest_from: vec![Timestamp::ZERO; topology.dc_count() as usize],
            outgoing: Vec::new(),
            next_tx: 0,
            stats: ReplicaStats::default(),
            topology,
        }
    }

    /// Number of versions of `key` stored here (at most one).
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.store.chain(key).map_or(0, |c| c.len())
    }

    /// Applies one transaction's writes; only the newest version of each key
    /// is kept.
    fn apply(&mut self, now: PhysicalMicros, source: DcId, tx: &EcWrites) {
        self.hlc.observe(now, tx.ct);
        let stamp = CommitStamp { ts: tx.ct, dc: source, txid: tx.txid };
        for (key, value) in &tx.writes {
            self.store.insert(key.clone(), Version { value: value.clone(), stamp, meta: () }, |_| true);
        }
        let newest = &mut self.newest_from[source.0 as usize];
        *newest = (*newest).max(tx.ct);
        self.stats.transactions_applied += 1;
    }

    fn apply_local(&mut self, now: PhysicalMicros, tx: EcWrites) {
        self.apply(now, self.id.dc, &tx);
        if !self.peers.is_empty() {
            self.outgoing.push(tx);
        }
    }

    /// The coordinator: one commit time, then every partition written
    /// applies at once; the client is answered without waiting for them.
    fn on_commit_req(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        hwt: Timestamp,
        writes: Vec<(Key, Value)>,
        out: &mut EcOutbox,
    ) {
        if writes.is_empty() {
            let error = SessionError::InvalidArgument("commit with no writes".into());
            out.send(client, EcMsg::TxError { error });
            return;
        }
        let last_writes = crate::txn::last_write_per_key(writes);
        let tx = TxId::new(self.id.partition, self.next_tx);
        self.next_tx += 1;
        let ct = self.hlc.tick(now, hwt);
        for (partition, writes) in self.topology.group_by_partition(last_writes, |(k, _)| k) {
            let w = EcWrites { txid: tx, ct, writes };
            if partition == self.id.partition {
                self.apply_local(now, w);
            } else {
                out.send(Addr::Replica(ReplicaId { dc: self.id.dc, partition }), EcMsg::Apply(w));
            }
        }
        out.send(client, EcMsg::CommitResp { tx, ct });
    }

    fn on_read(&self, from: Addr, tag: u64, keys: Vec<Key>, out: &mut EcOutbox) {
        let values = keys
            .into_iter()
            .map(|k| {
                let v = self.store.chain(&k).and_then(|c| c.newest()).map(|v| v.value.clone());
                (k, v)
            })
            .collect();
        out.send(from, EcMsg::ReadResp { tag, values });
    }

    fn replicate(&mut self, out: &mut EcOutbox) {
        if self.outgoing.is_empty() {
            return;
        }
        let txs = std::mem::take(&mut self.outgoing);
        out.send_all(&self.peers, EcMsg::Replicate { txs });
    }
}

impl Replica for EcReplica {
    type Message = EcMsg;
    type Timer = EcTimer;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut EcOutbox) {
        self.hlc.observe(now, Timestamp::ZERO);
        out.set_timer(EcTimer::Replicate, self.config.apply_interval_us);
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: EcMsg, out: &mut EcOutbox) {
        match msg {
            EcMsg::ReadReq { tag, keys } => self.on_read(from, tag, keys, out),
            EcMsg::CommitReq { hwt, writes } => self.on_commit_req(now, from, hwt, writes, out),
            EcMsg::Apply(w) => match from {
                Addr::Replica(r) if r.dc == self.id.dc => self.apply_local(now, w),
                _ => {}
            },
            EcMsg::Replicate { txs } => match from {
                Addr::Replica(r) if r.dc != self.id.dc && self.peers.contains(&from) => {
                    for tx in &txs {
                        self.apply(now, r.dc, tx);
                    }
                }
                _ => {}
            },
            EcMsg::ReadResp { .. } | EcMsg::CommitResp { .. } | EcMsg::TxError { .. } => {
                // Replies meant for clients. Drop.
            }
        }
    }

    fn on_timer(&mut self, _now: PhysicalMicros, timer: EcTimer, out: &mut EcOutbox) {
        match timer {
            EcTimer::Replicate => {
                self.replicate(out);
                out.set_timer(EcTimer::Replicate, self.config.apply_interval_us);
            }
        }
    }

    fn is_quiescent(&self) -> bool {
        self.outgoing.is_empty()
    }

    fn latest_values(&self) -> Vec<(Key, Value)> {
        self.store.latest()
    }

    /// The newest write applied here from `origin`: EC shows whatever it has.
    fn visible_upto(&self, origin: DcId) -> Timestamp {
        self.newest_from[origin.0 as usize]
    }

    /// The commit time alone.
    fn version_metadata_bytes(&self) -> u64 {
        8
    }

    fn stats(&self) -> ReplicaStats {
        ReplicaStats {
            versions: self.store.version_count(),
            versions_collected: self.store.collected_count(),
            ..self.stats
        }
    }
}
