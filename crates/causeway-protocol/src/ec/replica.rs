//! An EC partition replica: reads the newest version, applies writes the
//! moment they arrive, replicates them every Δ_R, keeps one version per key
//! — and makes durable what it applied before anyone hears of it, so that
//! it survives crashes ([`super::durable`]).

use super::commits::Commits;
use super::durable::EcRecord;
use super::messages::{EcMsg, EcWrites};
use super::{EcConfig, EcFault};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{CommitStamp, Key, Replica, ReplicaCounters, SessionError, Value};
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId, PartitionId, ReplicaId, TxId};
use crate::mvstore::{MvStore, Version};
use crate::recovery::{Incoming, PeerStreams, Reservations};
use crate::topology::Topology;
use std::collections::BTreeMap;
use std::sync::Arc;

type Out = ReplicaEffects<EcReplica>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcTimer {
    /// Δ_R: send what was applied here since the last tick to the other DCs.
    Replicate,
    /// Heal what a crash left behind: send again the writes a partition has
    /// not answered, give up the commits it never answers, acknowledge and
    /// resume replication streams.
    Heal,
}

pub struct EcReplica {
    id: ReplicaId,
    topology: Arc<Topology>,
    config: EcConfig,
    /// Commit times of the transactions this replica coordinates.
    hlc: Hlc,
    store: MvStore<()>,
    /// The newest commit time applied here from each DC.
    newest_from: Vec<Timestamp>,
    /// Writes of this DC applied here and not yet sent to the peers.
    outgoing: Vec<EcWrites>,
    /// The position of the last write of this DC applied here, in the
    /// stream to the peers (the first is 1).
    seq: u64,
    /// The streams to and from the replicas of this partition in the other
    /// DCs.
    streams: PeerStreams<u64, EcWrites>,
    /// The commits this replica coordinates that wait for other partitions.
    commits: Commits,
    /// How far the clock and the transaction ids are reserved on disk.
    reserved: Reservations,
    next_tx: u64,
    counters: ReplicaCounters,
}

impl EcReplica {
    pub fn new(id: ReplicaId, topology: Arc<Topology>, config: EcConfig) -> Self {
        let max_kept_bytes = config.max_kept_bytes;
        EcReplica {
            id,
            config,
            hlc: Hlc::new(),
            // One version per key, a tombstone included: EC has no time
            // below which every DC's writes are known to have arrived.
            store: MvStore::keeping_tombstones(),
            newest_from: vec![Timestamp::ZERO; topology.dc_count() as usize],
            outgoing: Vec::new(),
            seq: 0,
            streams: PeerStreams::new(id, &topology, max_kept_bytes),
            commits: Commits::default(),
            reserved: Reservations::default(),
            next_tx: 0,
            counters: ReplicaCounters::default(),
            topology,
        }
    }

    /// Number of versions of `key` stored here (at most one).
    pub fn chain_len(&self, key: &[u8]) -> usize {
        self.store.chain(key).map_or(0, |c| c.len())
    }

    /// The replica of `partition` in this DC.
    fn partition(&self, partition: PartitionId) -> Addr {
        Addr::Replica(ReplicaId { partition, ..self.id })
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

    /// Whether every write of `tx`, of this DC, is held here or beaten by a
    /// newer write (EC keeps the newest version of a key only).
    fn holds(&self, tx: &EcWrites) -> bool {
        let stamp = CommitStamp { ts: tx.ct, dc: self.id.dc, txid: tx.txid };
        tx.writes
            .iter()
            .all(|(key, _)| self.store.chain(key).and_then(|c| c.newest()).is_some_and(|v| v.stamp >= stamp))
    }

    /// A transaction of this DC: applied, made durable at the next position
    /// of the stream to the peers, and sent with the next round.
    fn apply_local(&mut self, now: PhysicalMicros, tx: EcWrites, out: &mut Out) {
        self.apply(now, self.id.dc, &tx);
        self.seq += 1;
        if self.streams.peers().is_empty() {
            out.persist(EcRecord::Local { seq: self.seq, tx });
        } else {
            out.persist(EcRecord::Local { seq: self.seq, tx: tx.clone() });
            self.outgoing.push(tx);
        }
    }

    /// The coordinator: one commit time, then every partition written
    /// applies at once; the client is answered once every one of them holds
    /// the writes durably — at once, when only this partition is written.
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
        let mut others = BTreeMap::new();
        for (partition, writes) in self.topology.group_by_partition(last_writes, |(k, _)| k) {
            let w = EcWrites { txid: tx, ct, writes };
            if partition == self.id.partition {
                self.apply_local(now, w, out);
            } else {
                out.send(self.partition(partition), EcMsg::Apply(w.clone()));
                others.insert(partition, w);
            }
        }
        if others.is_empty() {
            out.send_after_durable(client, EcMsg::CommitResp { tx, ct });
        } else {
            self.commits.wait(now, client, tx, ct, others);
        }
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

    /// Every Δ_R: what this DC wrote here since the last round goes to the
    /// peers, at the position of its last write, once durable.
    fn replicate(&mut self, out: &mut Out) {
        if self.outgoing.is_empty() {
            return;
        }
        let txs = std::mem::take(&mut self.outgoing);
        self.streams.send(self.seq, txs, out);
    }

    /// A group of DC `r`'s writes from its replica, taken if new.
    fn on_replicate(&mut self, now: PhysicalMicros, from: Addr, upto: u64, txs: Vec<EcWrites>, out: &mut Out) {
        match self.streams.incoming(from, upto, true) {
            Incoming::Take(source) => {
                for tx in &txs {
                    self.apply(now, source, tx);
                }
                out.persist(EcRecord::Replicated { source, upto, txs });
            }
            Incoming::Drop => {}
            Incoming::Refuse => self.counters.inputs_refused += 1,
        }
    }

    /// The heal round: send again the writes a partition has not answered
    /// for a round, give up (outcome unknown) the commits it has not
    /// answered for the commit timeout, acknowledge and resume replication.
    fn heal(&mut self, now: PhysicalMicros, out: &mut Out) {
        for (client, tx, ct) in self.commits.overdue(now, self.config.commit_timeout_us) {
            out.send(client, EcMsg::CommitUnknown { tx, ct });
        }
        for (partition, writes) in self.commits.unanswered(now, self.config.heal_interval_us) {
            out.send(self.partition(partition), EcMsg::Apply(writes.clone()));
        }
        self.streams.refresh(out);
    }

    /// After every step: keep the reservations ahead of what was handed out.
    /// After every step, too: the writes kept for the peers stay within
    /// their bound in memory.
    fn reserve(&mut self, out: &mut Out) {
        self.reserved.after_step(&self.hlc, self.next_tx, out);
        self.streams.spill_over(out);
    }
}

/// A replica rebuilt from the records it made durable, applied again in
/// order; the clock and the transaction ids resume above the reservations
/// when it starts, and the streams resume from what each side holds.
pub fn recover(mut replica: EcReplica, records: Vec<EcRecord>) -> EcReplica {
    let here = replica.id.dc;
    for record in records {
        replica.reserved.restore(&record);
        match record {
            EcRecord::Reserved(_) => {}
            EcRecord::Local { seq, tx } => {
                replica.apply(0, here, &tx);
                replica.seq = seq;
                // Kept for the peers, which say at their resume what they
                // hold of it.
                replica.streams.keep(seq, vec![tx]);
            }
            EcRecord::Replicated { source, upto, txs } => {
                replica.streams.restore_received(source, upto);
                for tx in &txs {
                    replica.apply(0, source, tx);
                }
            }
            EcRecord::Stored { source, txs } => {
                for tx in &txs {
                    replica.apply(0, source, tx);
                }
            }
            EcRecord::Spilled { upto } => replica.streams.restore_spilled(upto),
            // Only ever spilled, never in the log.
            EcRecord::Kept { .. } => {}
            EcRecord::Positions { seq, newest_from, taken } => {
                replica.seq = replica.seq.max(seq);
                for (newest, t) in replica.newest_from.iter_mut().zip(newest_from) {
                    *newest = (*newest).max(t);
                    replica.hlc.observe(0, t);
                }
                for (source, upto) in taken {
                    replica.streams.restore_received(source, upto);
                }
            }
        }
    }
    replica
}

/// A checkpoint of `r` (see [`Replica::checkpoint`]): the reservations,
/// the one version of each key, the writes of this DC that a peer may still
/// lack as the `Local` records they were (those already sent and kept, then
/// those not sent yet, at their positions), and the positions. Left out:
/// what the records would rebuild but no peer needs again (writes every
/// peer acknowledged), and how far a peer's stream went by what no record
/// holds.
pub fn checkpoint(r: &EcReplica) -> Vec<EcRecord> {
    let mut records: Vec<EcRecord> = r.reserved.records().into();
    let mut by_source: BTreeMap<DcId, Vec<EcWrites>> = BTreeMap::new();
    for ((source, ct, txid), ((), writes)) in r.store.by_transaction() {
        by_source.entry(source).or_default().push(EcWrites { txid, ct, writes });
    }
    records.extend(by_source.into_iter().map(|(source, txs)| EcRecord::Stored { source, txs }));
    records.extend(r.streams.spilled_upto().map(|upto| EcRecord::Spilled { upto }));
    // A kept group holds the writes at the positions up to its own, one
    // each: the `Local` records that put them there.
    for (&upto, txs) in r.streams.kept() {
        let first = upto + 1 - txs.len() as u64;
        records.extend(txs.iter().zip(first..).map(|(tx, seq)| EcRecord::Local { seq, tx: tx.clone() }));
    }
    let first = r.seq + 1 - r.outgoing.len() as u64;
    records.extend(r.outgoing.iter().zip(first..).map(|(tx, seq)| EcRecord::Local { seq, tx: tx.clone() }));
    records.push(EcRecord::Positions { seq: r.seq, newest_from: r.newest_from.clone(), taken: r.streams.taken() });
    records
}

impl Replica for EcReplica {
    type Message = EcMsg;
    type Timer = EcTimer;
    type Record = EcRecord;

    fn id(&self) -> ReplicaId {
        self.id
    }

    /// At the first start and after every recovery: the clock and the
    /// transaction ids resume above what was reserved, the timers are armed,
    /// and the peers are asked for their streams.
    fn start(&mut self, now: PhysicalMicros, out: &mut Out) {
        let (clock, next_tx) = self.reserved.resume_points();
        self.hlc.observe(now, clock);
        self.next_tx = self.next_tx.max(next_tx);
        out.set_timer(EcTimer::Replicate, self.config.apply_interval_us);
        out.set_timer(EcTimer::Heal, self.config.heal_interval_us);
        self.streams.start(out);
        self.reserve(out);
    }

    /// A peer in another DC resumes its stream; a partition of this DC
    /// that lost an `Apply` gets it again, and a lost `Applied` is asked
    /// for again, by the commit's retries.
    fn on_peer_lost(&mut self, _now: PhysicalMicros, from: Addr, out: &mut Out) {
        self.streams.on_peer_lost(from, out);
        self.reserve(out);
    }

    /// A batch of the stream's writes is on disk.
    fn on_spilled(&mut self, _now: PhysicalMicros, upto: u64, out: &mut Out) {
        self.streams.on_spilled(upto, out);
        self.reserve(out);
    }

    /// Spilled writes of the stream, read back for a peer that is behind.
    fn on_unspilled(&mut self, _now: PhysicalMicros, after: u64, entries: Vec<(u64, EcRecord)>, out: &mut Out) {
        self.streams.on_unspilled(after, entries, out);
        self.reserve(out);
    }

    fn on_message(&mut self, now: PhysicalMicros, from: Addr, msg: EcMsg, out: &mut Out) {
        let own_dc = matches!(from, Addr::Replica(r) if r.dc == self.id.dc);
        match msg {
            EcMsg::ReadReq { tag, keys } => self.on_read(from, tag, keys, out),
            EcMsg::CommitReq { hwt, writes } => self.on_commit_req(now, from, hwt, writes, out),
            EcMsg::Apply(w) if own_dc => {
                let tx = w.txid;
                // An Apply sent again (the answer was late, or lost) whose
                // writes this partition holds, or has seen beaten, is
                // answered again but not applied twice: a second `Local`
                // record and a second place in the stream to the peers would
                // only grow the log and what the peers are sent.
                if !self.holds(&w) {
                    self.apply_local(now, w, out);
                }
                out.send_after_durable(from, EcMsg::Applied { tx });
            }
            EcMsg::Applied { tx } => match from {
                Addr::Replica(r) if own_dc => {
                    if let Some((client, tx, ct)) = self.commits.applied(tx, r.partition) {
                        out.send_after_durable(client, EcMsg::CommitResp { tx, ct });
                    }
                }
                _ => self.counters.inputs_refused += 1,
            },
            EcMsg::Replicate { upto, txs } => self.on_replicate(now, from, upto, txs, out),
            EcMsg::Stream(c) => {
                if !self.streams.on_control(from, c, out) {
                    self.counters.inputs_refused += 1;
                }
            }
            // Writes from outside the DC, or replies meant for clients: a
            // peer speaking out of turn.
            EcMsg::Apply(_)
            | EcMsg::ReadResp { .. }
            | EcMsg::CommitResp { .. }
            | EcMsg::CommitUnknown { .. }
            | EcMsg::TxError { .. } => {
                self.counters.inputs_refused += 1;
            }
        }
        self.reserve(out);
    }

    fn on_timer(&mut self, now: PhysicalMicros, timer: EcTimer, out: &mut Out) {
        match timer {
            EcTimer::Replicate => {
                // A slow round: the writes go with the next one.
                if !out.buggify("ec.replicate.skip_round") {
                    self.replicate(out);
                }
                out.set_timer(EcTimer::Replicate, self.config.apply_interval_us);
            }
            EcTimer::Heal => {
                self.heal(now, out);
                out.set_timer(EcTimer::Heal, self.config.heal_interval_us);
            }
        }
        self.reserve(out);
    }

    fn checkpoint(&self) -> Vec<EcRecord> {
        checkpoint(self)
    }

    /// Nothing waits to be replicated, acknowledged by a peer, or answered
    /// by a partition, and no peer's stream is awaited: once every replica
    /// is quiescent, every write applied anywhere is held everywhere.
    fn is_quiescent(&self) -> bool {
        self.outgoing.is_empty() && self.commits.is_empty() && self.streams.settled()
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
