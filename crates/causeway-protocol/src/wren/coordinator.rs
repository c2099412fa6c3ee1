//! The coordinator role (Alg. 2): assign snapshots, fan reads out to the
//! partitions involved, run two-phase commit.

use super::messages::WrenMsg;
use super::replica::{WrenOutbox, WrenReplica};
use super::snapshot::Snapshot;
use super::Fault;
use crate::engine::{Key, SessionError, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, PartitionId, ReplicaId, TxId};

/// What a Wren coordinator remembers of a running transaction (`TX[id]`).
pub type TxContext = crate::coordination::TxContext<Snapshot>;

impl WrenReplica {
    fn cohort(&self, partition: PartitionId) -> Addr {
        Addr::Replica(ReplicaId { dc: self.dc(), partition })
    }

    fn reply_error(out: &mut WrenOutbox, to: Addr, tx: Option<TxId>, error: SessionError) {
        out.send(to, WrenMsg::TxError { tx, error });
    }

    /// Alg. 2, lines 1–6.
    pub(crate) fn on_start_tx(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        lst_c: Timestamp,
        rst_c: Timestamp,
        out: &mut WrenOutbox,
    ) {
        self.rst = self.rst.max(rst_c);
        self.lst = self.lst.max(lst_c);
        let tx = TxId::new(self.id.partition, self.next_tx);
        self.next_tx += 1;
        let snapshot = match self.config.fault {
            // A fresh clock value rather than a stable one: not installed yet.
            Fault::SnapshotFromClock => {
                let lt = self.hlc.observe(now, self.lst);
                Snapshot { lt, rt: self.rst.min(lt.prev()) }
            }
            _ => self.current_snapshot(),
        };
        self.contexts.open(now, tx, client, snapshot);
        out.send(client, WrenMsg::StartTxResp { tx, snapshot });
    }

    /// Takes the context of `tx` for a new operation from `client`, or
    /// replies with the reason it cannot.
    fn context_for(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        out: &mut WrenOutbox,
    ) -> Option<&mut TxContext> {
        match self.contexts.for_operation(now, client, tx) {
            Ok(ctx) => Some(ctx),
            Err(e) => {
                Self::reply_error(out, client, Some(tx), e);
                None
            }
        }
    }

    /// Alg. 2, lines 7–16: one slice per partition, all in parallel.
    pub(crate) fn on_tx_read(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        keys: Vec<Key>,
        out: &mut WrenOutbox,
    ) {
        let slices = self.topology.group_by_partition(keys, |k| k);
        let Some(ctx) = self.context_for(now, client, tx, out) else { return };
        if slices.is_empty() {
            out.send(client, WrenMsg::TxReadResp { tx, values: Vec::new() });
            return;
        }
        let snapshot = ctx.snapshot;
        ctx.await_slices(slices.len());
        for (partition, keys) in slices {
            out.send(self.cohort(partition), WrenMsg::SliceReq { tx, keys, snapshot });
        }
    }

    pub(crate) fn on_slice_resp(&mut self, tx: TxId, slice: Vec<(Key, Option<Value>)>, out: &mut WrenOutbox) {
        if let Some((client, values)) = self.contexts.slice_arrived(tx, slice) {
            out.send(client, WrenMsg::TxReadResp { tx, values });
        }
    }

    /// Alg. 2, lines 17–24: prepare at every partition written.
    pub(crate) fn on_commit_req(
        &mut self,
        now: PhysicalMicros,
        client: Addr,
        tx: TxId,
        hwt: Timestamp,
        writes: Vec<(Key, Value)>,
        out: &mut WrenOutbox,
    ) {
        if writes.is_empty() {
            Self::reply_error(out, client, Some(tx), SessionError::InvalidArgument("commit with no writes".into()));
            return;
        }
        let last_writes = crate::txn::last_write_per_key(writes);
        let per_partition = self.topology.group_by_partition(last_writes, |(k, _)| k);
        let Some(ctx) = self.context_for(now, client, tx, out) else { return };
        let snapshot = ctx.snapshot;
        // The highest timestamp the client has seen: the proposal exceeds it.
        let ht = snapshot.lt.max(snapshot.rt).max(hwt);
        ctx.await_proposals(per_partition.keys().copied().collect());
        for (partition, writes) in per_partition {
            out.send(self.cohort(partition), WrenMsg::PrepareReq { tx, snapshot, ht, writes });
        }
    }

    /// Alg. 2, lines 25–28: the commit time is the maximum proposal.
    pub(crate) fn on_prepare_resp(&mut self, tx: TxId, pt: Timestamp, out: &mut WrenOutbox) {
        let Some(decided) = self.contexts.proposal_arrived(tx, pt) else { return };
        let ct = decided.ct;
        for partition in decided.cohorts {
            out.send(self.cohort(partition), WrenMsg::Commit { tx, ct });
        }
        out.send(decided.client, WrenMsg::CommitResp { tx, ct });
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

    /// The snapshot a transaction starting here now gets (Alg. 2, line 5):
    /// the stable times, with the remote one kept below the local one.
    pub(crate) fn current_snapshot(&self) -> Snapshot {
        Snapshot { lt: self.lst, rt: self.rst.min(self.lst.prev()) }
    }

    /// The oldest snapshot a transaction coordinated here may still read;
    /// with none running, the snapshot a new one would get (§IV, GC).
    pub(crate) fn oldest_local_snapshot(&self) -> Snapshot {
        self.contexts.snapshots().fold(self.current_snapshot(), |oldest, s| oldest.meet(*s))
    }
}
