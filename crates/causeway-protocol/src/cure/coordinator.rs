//! The coordinator role: assign snapshots, fan reads out to the partitions
//! involved, run two-phase commit.

use super::messages::CureMsg;
use super::replica::{CureOutbox, CureReplica};
use super::vector::VectorTs;
use crate::engine::{Key, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, PartitionId, ReplicaId, TxId};

/// What a Cure coordinator remembers of a running transaction.
pub type TxContext = crate::coordination::TxContext<VectorTs>;

impl CureReplica {
    fn cohort(&self, partition: PartitionId) -> Addr {
        Addr::Replica(ReplicaId { dc: self.dc(), partition })
    }

    fn reply_error(out: &mut CureOutbox, to: Addr, tx: Option<TxId>, error: SessionError) {
        out.send(to, CureMsg::TxError { tx, error });
    }

    /// The snapshot of a transaction starting now for a client that has seen
    /// `seen`: the local entry is the freshest of the client's and this
    /// replica's clock — possibly not installed yet anywhere — and the remote
    /// entries come from the global stable vector (or the client's, if it
    /// has seen a fresher one; both are stable in this DC).
    pub(crate) fn assign_snapshot(&mut self, now: PhysicalMicros, seen: &VectorTs) -> VectorTs {
        let mut snapshot = self.gsv.clone();
        snapshot.join(seen);
        let clock = self.snapshot_clock(now);
        snapshot.raise(self.dc(), clock);
        snapshot
    }

    pub(crate) fn on_start_tx(&mut self, now: PhysicalMicros, client: Addr, seen: VectorTs, out: &mut CureOutbox) {
        if seen.len() != self.vv.len() {
            let why = format!("a snapshot of {} entries in a cluster of {} DCs", seen.len(), self.vv.len());
            Self::reply_error(out, client, None, SessionError::InvalidArgument(why));
            return;
        }
        let tx = TxId::new(self.id.partition, self.next_tx);
        self.next_tx += 1;
        let snapshot = self.assign_snapshot(now, &seen);
        self.contexts.open(now, tx, client, snapshot.clone());
        out.send(client, CureMsg::StartTxResp { tx, snapshot });
    }

    /// Takes the context of `tx` for a new operation from `client`, or
    /// replies with the reason it cannot.
    fn context_for(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        out: &mut CureOutbox,
    ) -> Option<&mut TxContext> {
        match self.contexts.for_operation(now, client, tx) {
            Ok(ctx) => Some(ctx),
            Err(e) => {
                Self::reply_error(out, client, Some(tx), e);
                None
            }
        }
    }

    /// One slice per partition, all in parallel.
    pub(crate) fn on_tx_read(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        keys: Vec<Key>,
        out: &mut CureOutbox,
    ) {
        let slices = self.topology.group_by_partition(keys, |k| k);
        let Some(ctx) = self.context_for(now, client, tx, out) else { return };
        if slices.is_empty() {
            out.send(client, CureMsg::TxReadResp { tx, values: Vec::new() });
            return;
        }
        let snapshot = ctx.snapshot.clone();
        ctx.await_slices(slices.len());
        for (partition, keys) in slices {
            out.send(self.cohort(partition), CureMsg::SliceReq { tx, keys, snapshot: snapshot.clone() });
        }
    }

    pub(crate) fn on_slice_resp(&mut self, tx: TxId, slice: Vec<(Key, Option<Value>)>, out: &mut CureOutbox) {
        if let Some((client, values)) = self.contexts.slice_arrived(tx, slice) {
            out.send(client, CureMsg::TxReadResp { tx, values });
        }
    }

    /// Prepare at every partition written; proposals must exceed every
    /// entry of the snapshot and the client's last commit, so a write is
    /// ordered after everything in its causal past.
    pub(crate) fn on_commit_req(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        hwt: Timestamp,
        writes: Vec<(Key, Value)>,
        out: &mut CureOutbox,
    ) {
        if writes.is_empty() {
            Self::reply_error(out, client, Some(tx), SessionError::InvalidArgument("commit with no writes".into()));
            return;
        }
        let last_writes = crate::txn::last_write_per_key(writes);
        let per_partition = self.topology.group_by_partition(last_writes, |(k, _)| k);
        let Some(ctx) = self.context_for(now, client, tx, out) else { return };
        let snapshot = ctx.snapshot.clone();
        let ht = snapshot.max_entry().max(hwt);
        ctx.await_proposals(per_partition.keys().copied().collect());
        for (partition, writes) in per_partition {
            out.send(self.cohort(partition), CureMsg::PrepareReq { tx, snapshot: snapshot.clone(), ht, writes });
        }
    }

    /// The commit time is the maximum proposal.
    pub(crate) fn on_prepare_resp(&mut self, tx: TxId, pt: Timestamp, out: &mut CureOutbox) {
        let Some(decided) = self.contexts.proposal_arrived(tx, pt) else { return };
        let ct = decided.ct;
        for partition in decided.cohorts {
            out.send(self.cohort(partition), CureMsg::Commit { tx, ct });
        }
        out.send(decided.client, CureMsg::CommitResp { tx, ct });
    }

    /// A read-only or aborted transaction is over.
    pub(crate) fn on_end_tx(&mut self, tx: TxId) {
        self.contexts.end(tx);
    }

    /// Forgets idle transactions whose client has been silent longer than
    /// the timeout; a later request for one is answered `UnknownTransaction`.
    pub(crate) fn expire_contexts(&mut self, now: PhysicalMicros) {
        self.stats.contexts_expired += self.contexts.expire(now, self.config.tx_context_timeout_us);
    }

    /// The oldest snapshot a transaction coordinated here may still read:
    /// the oldest running one, or, with none running, a lower bound of the
    /// snapshot a new one would get.
    pub(crate) fn oldest_local_snapshot(&self, now: PhysicalMicros) -> VectorTs {
        let mut oldest = self.gsv.clone();
        let clock = match self.mode {
            super::ClockMode::Physical => Timestamp::from_physical(now),
            super::ClockMode::Hybrid => self.hlc.current().max(Timestamp::from_physical(now)),
        };
        oldest.raise(self.dc(), clock);
        for snapshot in self.contexts.snapshots() {
            oldest.meet(snapshot);
        }
        oldest
    }
}
