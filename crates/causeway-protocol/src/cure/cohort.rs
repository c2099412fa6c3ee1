//! The cohort role: serve read slices once their snapshot is installed here
//! (parking them until then), propose commit times, install commits.
//!
//! A read of snapshot `S` at partition `p` of DC `m` may be served when no
//! transaction can still commit at `p` with a time at or below `S[m]`:
//!
//! 1. `p`'s clock has passed `S[m]`, so its future proposals exceed it —
//!    Cure waits for the physical clock; H-Cure moves its HLC up instead;
//! 2. no transaction prepared at `p` with a proposal at or below `S[m]` is
//!    still waiting for its commit time;
//! 3. every transaction committed at or below `S[m]` is installed — here
//!    commits are installed in the store the moment they arrive, so this
//!    follows from 2.
//!
//! Remote entries never make a read wait: they come from the DC's stable
//! vector, which every partition has received.
//!
//! Waiting is event-driven: a read that cannot be served is parked, and the
//! parked reads are checked again when a commit resolves a prepared
//! transaction, when the timer armed for the clock condition fires, and on
//! the Δ_R tick.

use super::messages::{CureMsg, TxWrites};
use super::replica::{CureOutbox, CureReplica, CureTimer, ParkedRead, PreparedTx};
use super::vector::{self, VectorTs};
use super::ClockMode;
use crate::engine::{Key, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, TxId};

impl CureReplica {
    /// The largest snapshot local entry this replica can serve now.
    pub(crate) fn serve_bound(&self, now: PhysicalMicros) -> Timestamp {
        let pending = self.prepared_order.first().map_or(Timestamp::MAX, |&(pt, _)| pt.prev());
        let clock = match self.mode {
            ClockMode::Physical => Timestamp::from_physical(now),
            ClockMode::Hybrid => Timestamp::MAX,
        };
        pending.min(clock)
    }

    pub(crate) fn on_slice(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        keys: Vec<Key>,
        snapshot: VectorTs,
        out: &mut CureOutbox,
    ) {
        if snapshot.len() != self.vv.len() {
            return; // not a snapshot of this cluster
        }
        let t = snapshot.get(self.dc());
        if t <= self.serve_bound(now) {
            self.serve(now, ParkedRead { from, tx, keys, snapshot }, out);
            return;
        }
        if self.mode == ClockMode::Hybrid {
            // H-Cure never waits for its clock: moving the HLC past the
            // snapshot now makes every later proposal exceed it, so only
            // transactions already prepared below it can hold the read.
            self.hlc.observe(now, t);
        }
        self.parked_seq += 1;
        self.parked.insert((t, self.parked_seq), ParkedRead { from, tx, keys, snapshot });
        self.arm_wake(now, out);
    }

    fn serve(&mut self, now: PhysicalMicros, read: ParkedRead, out: &mut CureOutbox) {
        let t = read.snapshot.get(self.dc());
        // From now on every proposal here exceeds `t`: nothing can commit
        // inside the snapshot this read has seen.
        self.hlc.observe(now, t);
        self.installed_local = self.installed_local.max(t);
        let values: Vec<(Key, Option<Value>)> = read
            .keys
            .into_iter()
            .map(|key| {
                let value = self.read_at(&key, &read.snapshot);
                (key, value)
            })
            .collect();
        out.send(read.from, CureMsg::SliceResp { tx: read.tx, values });
    }

    /// Serves the parked reads whose snapshots are installed now, and arms
    /// the clock timer for the rest if the clock is what they wait for.
    pub(crate) fn wake_parked(&mut self, now: PhysicalMicros, out: &mut CureOutbox) {
        let bound = self.serve_bound(now);
        while let Some(entry) = self.parked.first_entry() {
            if entry.key().0 > bound {
                break;
            }
            let read = entry.remove();
            self.serve(now, read, out);
        }
        self.arm_wake(now, out);
    }

    /// Cure: arms a timer for the moment the physical clock reaches the
    /// smallest parked snapshot, unless one that fires earlier is armed.
    fn arm_wake(&mut self, now: PhysicalMicros, out: &mut CureOutbox) {
        if self.mode != ClockMode::Physical {
            return;
        }
        let Some((&(t, _), _)) = self.parked.first_key_value() else { return };
        if t <= Timestamp::from_physical(now) {
            return; // the clock is not what it waits for
        }
        let due = t.physical() + u64::from(t.logical() > 0);
        if self.wake_at.is_none_or(|at| at > due) {
            self.wake_at = Some(due);
            out.set_timer(CureTimer::WakeReads, due - now);
        }
    }

    /// Proposes a commit time above everything the transaction has seen and
    /// above everything this replica has proposed or served.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_prepare(
        &mut self,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        snapshot: VectorTs,
        ht: Timestamp,
        writes: Vec<(Key, Value)>,
        out: &mut CureOutbox,
    ) {
        if let Some(existing) = self.prepared.get(&tx) {
            // A prepare delivered twice: answer again with the same proposal.
            out.send(from, CureMsg::PrepareResp { tx, pt: existing.pt });
            return;
        }
        if snapshot.len() != self.vv.len() {
            return;
        }
        let pt = self.hlc.tick(now, ht.max(snapshot.max_entry()));
        self.prepared.insert(tx, PreparedTx { pt, snapshot, writes });
        self.prepared_order.insert((pt, tx));
        out.send(from, CureMsg::PrepareResp { tx, pt });
    }

    /// Installs the transaction's versions at once, queues it for
    /// replication, and wakes the reads it was holding back.
    pub(crate) fn on_commit(&mut self, now: PhysicalMicros, tx: TxId, ct: Timestamp, out: &mut CureOutbox) {
        self.hlc.observe(now, ct);
        let Some(prepared) = self.prepared.remove(&tx) else { return };
        assert!(ct >= prepared.pt, "commit time {ct} below the proposal {} of {tx:?}", prepared.pt);
        self.prepared_order.remove(&(prepared.pt, tx));
        let commit_vector = vector::commit_vector(&prepared.snapshot, self.dc(), ct);
        let writes = TxWrites { txid: tx, commit_vector, writes: prepared.writes };
        self.install(ct, self.dc(), std::slice::from_ref(&writes));
        self.committed.insert((ct, tx), writes);
        self.wake_parked(now, out);
    }
}
