//! An EC partition replica: reads the newest version, applies writes the
//! moment they arrive, replicates them every Δ_R, keeps one version per key.

use super::messages::{EcMsg, EcWrites};
use super::{EcConfig, EcFault};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{CommitStamp, Key, NoRecord, Replica, ReplicaCounters, SessionError, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, ReplicaId, TxId};
use crate::mvstore::{MvStore, Version};
use crate::topology::Topology;
use std::sync::Arc;

type Out = ReplicaEffects<EcReplica>;

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
    counters: ReplicaCounters,
}

impl EcReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: EcConfig) -> Self {
        let peers = topology.peers_of(id).into_iter().map(Addr::Replica).collect();
        EcReplica {
            id,
            peers,
            config,
            hlc: Hlc::new(),
            // One version per key, a tombstone included: EC has no time
            // below which every DC's writes are known to have arrived.
            store: MvStore::keeping_tombstones(),
            newest_from: vec![Timestamp::ZERO; topology.dc_count() as usize],
            outgoing: Vec::new(),
            next_tx: 0,
            counters: ReplicaCounters::default(),
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
            if self.config.fault == EcFault::LocalWins && source != self.id.dc {
                let local = self.store.chain(key).and_then(|c| c.newest()).is_some_and(|v| v.stamp.dc == self.id.dc);
                if local {
                    continue;
                }
            }
            self.store.insert(key.clone(), Version { value: value.clone(), stamp, meta: () }, |_| true);
        }
        let newest = &mut self.newest_from[source.0 as usize];
        *newest = (*newest).max(tx.ct);
        self.counters.transactions_applied += 1;
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
        writes: Vec<(Key, Option<Value>)>,
        out: &mut Out,
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
                out.send(Addr::Replica(ReplicaId { partition, ..self.id }), EcMsg::Apply(w));
            }
        }
        out.send(client, EcMsg::CommitResp { tx, ct });
    }

    fn on_read(&self, from: Addr, tag: crate::contract::ReadTag, keys: Vec<Key>, out: &mut Out) {
        let values = keys
            .into_iter()
            .map(|k| {
                let v = self.store.chain(&k).and_then(|c| c.newest()).and_then(|v| v.value.clone());
                (k, v)
            })
            .collect();
        out.send(from, EcMsg::ReadResp { tag, values });
    }

    fn replicate(&mut self, out: &mut Out) {
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
    type Record = NoRecord;

    fn id(&self) -> ReplicaId {
        self.id
    }

    fn start(&mut self, now: PhysicalMicros, out: &mut Out) {
        self.hlc.observe(now, Timestamp::ZERO);
        out.set_timer(EcTimer::Replicate, self.config.apply_interval_us);
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: EcMsg, out: &mut Out) {
        match msg {
            EcMsg::ReadReq { tag, keys } => self.on_read(from, tag, keys, out),
            EcMsg::CommitReq { hwt, writes } => self.on_commit_req(now, from, hwt, writes, out),
            EcMsg::Apply(w) => match from {
                Addr::Replica(r) if r.dc == self.id.dc => self.apply_local(now, w),
                _ => self.counters.inputs_refused += 1,
            },
            EcMsg::Replicate { txs } => match from {
                Addr::Replica(r) if r.dc != self.id.dc && self.peers.contains(&from) => {
                    for tx in &txs {
                        self.apply(now, r.dc, tx);
                    }
                }
                _ => self.counters.inputs_refused += 1,
            },
            // Replies meant for clients: a peer speaking out of turn.
            EcMsg::ReadResp { .. } | EcMsg::CommitResp { .. } | EcMsg::TxError { .. } => {
                self.counters.inputs_refused += 1;
            }
        }
    }

    fn on_timer(&mut self, _now: PhysicalMicros, timer: EcTimer, out: &mut Out) {
        match timer {
            EcTimer::Replicate => {
                // A slow round: the writes go with the next one.
                if !out.buggify("ec.replicate.skip_round") {
                    self.replicate(out);
                }
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

    fn counters(&self) -> ReplicaCounters {
        ReplicaCounters {
            versions: self.store.version_count(),
            versions_collected: self.store.collected_count(),
            ..self.counters
        }
    }
}
