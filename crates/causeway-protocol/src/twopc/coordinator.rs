//! The coordinator role (the papers' Alg. 2): open a transaction on the
//! snapshot its protocol assigns, fan reads out to the partitions involved,
//! run two-phase commit, and forget transactions whose clients went silent.

use super::durable::FamilyRecord;
use super::messages::TxnMsg;
use super::tx_table::{TxEntry, TxTable};
use super::Snapshot;
use crate::contract::{AbortReason, Effects, Key, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, PartitionId, ReplicaId, TxId};
use crate::topology::Topology;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The effects of a step of a family protocol.
type Out<S, Q, W, G, T, R> = Effects<TxnMsg<S, Q, W, G>, T, R>;

/// A replica's coordinator: the transactions it runs.
#[derive(Debug)]
pub struct Coordinator<S> {
    me: ReplicaId,
    /// Where each partition's cohort is: in this DC, or — under partial
    /// replication, for a partition it does not hold — the DC's preferred
    /// replica elsewhere ([`Topology::serving_dc`]).
    topology: Arc<Topology>,
    table: TxTable<S>,
    next_tx: u64,
    /// A transaction whose client has been silent this long is forgotten,
    /// so that a vanished client cannot hold back garbage collection.
    timeout_us: u64,
    expired: u64,
    /// Commit decisions cohorts may still ask about (a cohort that crashed
    /// before its decision was durable asks again): kept until the DC's
    /// stable time passes them, when every cohort has made its own durable.
    /// By id for the questions (a restarted cohort asks about many at once,
    /// while stable time is held and decisions pile up), and by commit time
    /// for forgetting them as it passes.
    decided: FxHashMap<TxId, Timestamp>,
    decided_order: BTreeSet<(Timestamp, TxId)>,
}

impl<S: Snapshot> Coordinator<S> {
    pub fn new(me: ReplicaId, topology: Arc<Topology>, timeout_us: u64) -> Self {
        Coordinator {
            me,
            topology,
            table: TxTable::default(),
            next_tx: 0,
            timeout_us,
            expired: 0,
            decided: FxHashMap::default(),
            decided_order: BTreeSet::new(),
        }
    }

    /// The counter of the next transaction id.
    pub fn next_tx(&self) -> u64 {
        self.next_tx
    }

    /// After a crash: ids resume at `next`, above every one handed out.
    pub fn resume_ids_at(&mut self, next: u64) {
        self.next_tx = self.next_tx.max(next);
    }

    /// Keeps a decision for the cohorts' questions: one just taken, or one
    /// taken before a crash, from its record.
    pub fn keep_decision(&mut self, tx: TxId, ct: Timestamp) {
        self.decided.insert(tx, ct);
        self.decided_order.insert((ct, tx));
    }

    /// For a checkpoint: the decisions kept, by commit time.
    pub fn decisions(&self) -> impl Iterator<Item = (TxId, Timestamp)> + '_ {
        self.decided_order.iter().map(|&(ct, tx)| (tx, ct))
    }

    /// Forgets the decisions at or below `stable`, the DC's local stable
    /// time: every cohort of this DC has made them durable.
    pub fn forget_decided(&mut self, stable: Timestamp) {
        while let Some(&(ct, tx)) = self.decided_order.first() {
            if ct > stable {
                break;
            }
            self.decided_order.pop_first();
            self.decided.remove(&tx);
        }
    }

    fn cohort(&self, partition: PartitionId) -> Addr {
        let dc = self.topology.serving_dc(self.me.dc, partition);
        Addr::Replica(ReplicaId { dc, partition, member: self.me.member })
    }

    fn refuse<Q, W, G, T, R>(to: Addr, tx: Option<TxId>, error: SessionError, out: &mut Out<S, Q, W, G, T, R>) {
        out.send(to, TxnMsg::TxError { tx, error });
    }

    /// Alg. 2, lines 1–6: a transaction for `client` on `snapshot` (which the
    /// protocol chose), answered at once.
    pub fn start<Q, W, G, T, R>(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        snapshot: S,
        out: &mut Out<S, Q, W, G, T, R>,
    ) {
        // Under partial replication a cohort takes prepares from the
        // coordinators of other DCs too, which count their ids alike: the
        // DC's number in the low digits keeps them apart.
        let counter = if self.topology.is_fully_replicated() {
            self.next_tx
        } else {
            self.next_tx * u64::from(self.topology.dc_count()) + u64::from(self.me.dc.0)
        };
        let tx = TxId::new(self.me.partition, counter);
        self.next_tx += 1;
        self.table.open(now, tx, client, snapshot.clone());
        out.send(client, TxnMsg::StartTxResp { tx, snapshot });
    }

    /// The entry of `tx` for a new operation from `client`, or the reason
    /// there is none, told to the client.
    fn entry<Q, W, G, T, R>(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        out: &mut Out<S, Q, W, G, T, R>,
    ) -> Option<&mut TxEntry<S>> {
        match self.table.for_operation(now, client, tx) {
            Ok(entry) => Some(entry),
            Err(e) => {
                Self::refuse(client, Some(tx), e, out);
                None
            }
        }
    }

    /// Alg. 2, lines 7–16: one slice per partition, all in parallel.
    #[allow(clippy::too_many_arguments)]
    pub fn on_read<Q, W, G, T, R>(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        keys: Vec<Key>,
        out: &mut Out<S, Q, W, G, T, R>,
    ) {
        let slices = self.topology.group_by_partition(keys, |k| k);
        let Some(entry) = self.entry(now, client, tx, out) else { return };
        if slices.is_empty() {
            out.send(client, TxnMsg::TxReadResp { tx, values: Vec::new() });
            return;
        }
        let snapshot = entry.snapshot.clone();
        let round = entry.await_slices(slices.len());
        for (partition, keys) in slices {
            out.send(self.cohort(partition), TxnMsg::SliceReq { tx, round, keys, snapshot: snapshot.clone() });
        }
    }

    /// A cohort's slice; the last one of the round completes the read.
    pub fn on_slice<Q, W, G, T, R>(
        &mut self,
        tx: TxId,
        round: u32,
        slice: Vec<(Key, Option<Value>)>,
        out: &mut Out<S, Q, W, G, T, R>,
    ) {
        if let Some((client, values)) = self.table.slice_arrived(tx, round, slice) {
            out.send(client, TxnMsg::TxReadResp { tx, values });
        }
    }

    /// Alg. 2, lines 17–24: prepare at every partition written. The
    /// proposals must exceed everything the transaction has seen: its
    /// snapshot and the client's last commit `hwt`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_commit_request<Q, W, G, T, R>(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        hwt: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
        commit_timeout_us: u64,
        out: &mut Out<S, Q, W, G, T, R>,
    ) {
        if writes.is_empty() {
            Self::refuse(client, Some(tx), SessionError::InvalidArgument("commit with no writes".into()), out);
            return;
        }
        // A session sends each key once, but a coordinator takes no client's
        // word for it: one version per key and transaction.
        let last_writes = crate::txn::last_write_per_key(writes);
        let per_partition = self.topology.group_by_partition(last_writes, |(k, _)| k);
        let Some(entry) = self.entry(now, client, tx, out) else { return };
        let snapshot = entry.snapshot.clone();
        let ht = snapshot.ceiling().max(hwt);
        entry.await_proposals(now, per_partition.keys().copied().collect());
        // One cohort: one phase. It must not take the prepare once this
        // coordinator may have given up (`abort_overdue`, after
        // `commit_timeout_us`): half of that leaves the other half for the
        // two clocks to disagree by.
        let alone = (per_partition.len() == 1).then(|| now.saturating_add(commit_timeout_us / 2));
        for (partition, writes) in per_partition {
            out.send(self.cohort(partition), TxnMsg::PrepareReq { tx, snapshot: snapshot.clone(), ht, writes, alone });
        }
    }

    /// Alg. 2, lines 25–28: the commit time is the maximum proposal. The
    /// decision is made durable before anyone hears of it — unless one
    /// cohort was written: it commits at its proposal by itself, and
    /// answered once that was durable (`PrepareReq::alone`), so the client
    /// hears at once.
    pub fn on_proposal<Q, W, G, T, P>(
        &mut self,
        tx: TxId,
        pt: Timestamp,
        out: &mut Out<S, Q, W, G, T, FamilyRecord<P, W>>,
    ) {
        let Some(decided) = self.table.proposal_arrived(tx, pt) else { return };
        let ct = decided.ct;
        if decided.cohorts.len() == 1 {
            out.send(decided.client, TxnMsg::CommitResp { tx, ct });
            return;
        }
        out.persist(FamilyRecord::Decided { tx, ct });
        self.keep_decision(tx, ct);
        for partition in decided.cohorts {
            out.send_after_durable(self.cohort(partition), TxnMsg::Commit { tx, ct });
        }
        out.send_after_durable(decided.client, TxnMsg::CommitResp { tx, ct });
    }

    /// Cohort `from` did not take the prepare of `tx` and never will: the
    /// commit fails now — the other cohorts forget it, the client hears it
    /// aborted. Returns false for a refusal from no cohort of a commit
    /// running here (counted as refused input; a late one after the commit
    /// was given up is not).
    pub fn on_refused<Q, W, G, T, R>(&mut self, from: Addr, tx: TxId, out: &mut Out<S, Q, W, G, T, R>) -> bool {
        let Addr::Replica(cohort) = from else { return false };
        if from != self.cohort(cohort.partition) {
            return false;
        }
        let Some((client, cohorts)) = self.table.refused(tx, cohort.partition) else {
            return !self.table.contains(tx);
        };
        let others = cohorts.iter().copied().filter(|&p| p != cohort.partition);
        self.give_up(tx, client, others, format!("partition {}", cohort.partition), out);
        true
    }

    /// The commit of `tx` is given up: `cohorts` forget it, and `client`
    /// hears it aborted because `silent` did not take part.
    fn give_up<Q, W, G, T, R>(
        &self,
        tx: TxId,
        client: Addr,
        cohorts: impl Iterator<Item = PartitionId>,
        silent: String,
        out: &mut Out<S, Q, W, G, T, R>,
    ) {
        for partition in cohorts {
            out.send(self.cohort(partition), TxnMsg::Abort { tx });
        }
        out.send(client, TxnMsg::CommitAborted { tx, reason: AbortReason::Unavailable(silent) });
    }

    /// A cohort asks what became of `tx`, prepared there long ago: the
    /// decision if there is one; nothing while the commit is still waiting
    /// for proposals; otherwise it never commits — this coordinator crashed
    /// before deciding (it decides only what is in its table, which a crash
    /// empties) or gave it up.
    pub fn on_resolve<Q, W, G, T, R>(&mut self, cohort: Addr, tx: TxId, out: &mut Out<S, Q, W, G, T, R>) {
        if let Some(&ct) = self.decided.get(&tx) {
            out.send(cohort, TxnMsg::Commit { tx, ct });
        } else if !self.table.contains(tx) {
            out.send(cohort, TxnMsg::Abort { tx });
        }
    }

    /// Gives up the commits that have waited for a proposal longer than
    /// `after_us` — a cohort crashed with the prepare, or the answer: the
    /// cohorts forget the transaction and the client hears it aborted; or,
    /// with one cohort (which commits without a decision), that its outcome
    /// is unknown.
    pub fn abort_overdue<Q, W, G, T, R>(
        &mut self,
        now: PhysicalMicros,
        after_us: u64,
        out: &mut Out<S, Q, W, G, T, R>,
    ) {
        let late = self.table.overdue_commits(now, after_us);
        self.give_up_commits(late, out);
    }

    /// What `peer` was sent or was sending may be lost (its link shed a
    /// backlog): the commits that wait on it as a cohort are given up now,
    /// as [`Coordinator::abort_overdue`] would give them up at the timeout.
    /// A cohort that had proposed forgets the transaction on the abort.
    pub fn abort_waiting_on<Q, W, G, T, R>(&mut self, peer: Addr, out: &mut Out<S, Q, W, G, T, R>) {
        let Addr::Replica(r) = peer else { return };
        if peer != self.cohort(r.partition) {
            return;
        }
        let waiting = self.table.commits_with(r.partition);
        self.give_up_commits(waiting, out);
    }

    fn give_up_commits<Q, W, G, T, R>(
        &mut self,
        commits: Vec<(TxId, Addr, Vec<PartitionId>)>,
        out: &mut Out<S, Q, W, G, T, R>,
    ) {
        for (tx, client, cohorts) in commits {
            if cohorts.len() == 1 {
                // The one cohort commits by itself if it took the prepare
                // in time: it may have, its answer lost to a crash. Past
                // the prepare's deadline it no longer can.
                Self::refuse(client, Some(tx), SessionError::OutcomeUnknown, out);
                continue;
            }
            let silent = cohorts.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
            self.give_up(
                tx,
                client,
                cohorts.into_iter(),
                format!("a partition of {silent} did not answer in time"),
                out,
            );
        }
    }

    /// A read-only or aborted transaction is over.
    pub fn end(&mut self, tx: TxId) {
        self.table.end(tx);
    }

    /// Forgets idle transactions whose client has been silent longer than
    /// the timeout; a later request for one is answered `UnknownTransaction`.
    pub fn expire(&mut self, now: PhysicalMicros) {
        self.expired += self.table.expire(now, self.timeout_us);
    }

    /// The oldest snapshot a transaction coordinated here may still read,
    /// starting from `newest` (what a transaction starting now would get).
    pub fn oldest_snapshot(&self, newest: S) -> S {
        self.table.snapshots().fold(newest, |oldest, s| oldest.meet(s))
    }

    /// Transactions this coordinator runs right now.
    pub fn open_transactions(&self) -> usize {
        self.table.len()
    }

    /// Transactions forgotten because their client went silent.
    pub fn expired(&self) -> u64 {
        self.expired
    }
}
