//! The cohort role (Alg. 3): serve read slices from the snapshot at once,
//! propose commit times, queue committed transactions.

use super::messages::{TxWrites, WrenMsg};
use super::replica::{PreparedTx, WrenOutbox, WrenReplica};
use super::snapshot::Snapshot;
use crate::engine::{Key, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, TxId};

impl WrenReplica {
    /// Alg. 3, lines 1–12. Never waits: the snapshot is installed here by
    /// construction (`lt ≤ LST`, `rt ≤ RST`).
    pub(crate) fn on_slice(&mut self, from: Addr, tx: TxId, keys: Vec<Key>, snapshot: Snapshot, out: &mut WrenOutbox) {
        self.rst = self.rst.max(snapshot.rt);
        self.lst = self.lst.max(snapshot.lt);
        let values: Vec<(Key, Option<Value>)> = keys
            .into_iter()
            .map(|key| {
                let value = self.read_at(&key, snapshot);
                (key, value)
            })
            .collect();
        out.send(from, WrenMsg::SliceResp { tx, values });
    }

    /// Alg. 3, lines 13–19.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_prepare(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        snapshot: Snapshot,
        ht: Timestamp,
        writes: Vec<(Key, Value)>,
        out: &mut WrenOutbox,
    ) {
        if let Some(existing) = self.prepared.get(&tx) {
            // A prepare delivered twice: answer again with the same proposal.
            out.send(from, WrenMsg::PrepareResp { tx, pt: existing.pt });
            return;
        }
        let pt = self.hlc.tick(now, ht);
        self.lst = self.lst.max(snapshot.lt);
        self.rst = self.rst.max(snapshot.rt);
        self.prepared.insert(tx, PreparedTx { pt, rdt: snapshot.rt, writes });
        self.prepared_order.insert((pt, tx));
        out.send(from, WrenMsg::PrepareResp { tx, pt });
    }

    /// Alg. 3, lines 20–24.
    pub(crate) fn on_commit(&mut self, now: PhysicalMicros, tx: TxId, ct: Timestamp) {
        self.hlc.observe(now, ct);
        let Some(prepared) = self.prepared.remove(&tx) else { return };
        // The coordinator takes the maximum proposal, so `ct ≥ pt` always; a
        // peer that says otherwise is broken, and a replica must not die of
        // a peer's message: keep the version above its proposal regardless.
        debug_assert!(ct >= prepared.pt, "commit time {ct} below the proposal {} of {tx:?}", prepared.pt);
        let ct = ct.max(prepared.pt);
        self.prepared_order.remove(&(prepared.pt, tx));
        self.committed.insert((ct, tx), TxWrites { txid: tx, rdt: prepared.rdt, writes: prepared.writes });
    }
}
