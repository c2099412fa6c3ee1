//! The apply loop, replication and heartbeats (Alg. 4, lines 5–28).

use super::messages::{TxWrites, WrenMsg};
use super::replica::{WrenOutbox, WrenReplica};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId};

impl WrenReplica {
    /// Every Δ_R: apply, in commit order, the committed transactions no
    /// future commit can precede; replicate each group of equal commit time
    /// to the other DCs; advance the version clock; heartbeat when idle.
    pub(crate) fn apply_committed(&mut self, now: PhysicalMicros, out: &mut WrenOutbox) {
        // The bound below which no transaction can still commit here. With
        // nothing prepared it is the clock; we also move the HLC up to it,
        // so that a proposal made in the same microsecond still exceeds it.
        let ub = match self.prepared_order.first() {
            Some(&(min_pt, _)) => min_pt.prev(),
            None => self.hlc.observe(now, Timestamp::ZERO),
        };
        let mut replicated = false;
        while let Some(entry) = self.committed.first_entry() {
            let ct = entry.key().0;
            if ct > ub {
                break;
            }
            // One group: every transaction committed at `ct`.
            let mut group: Vec<TxWrites> = Vec::new();
            while let Some(entry) = self.committed.first_entry() {
                if entry.key().0 != ct {
                    break;
                }
                group.push(entry.remove());
            }
            self.install_group(ct, self.dc(), &group);
            if let Some((last, others)) = self.peers.split_last() {
                for &peer in others {
                    out.send(peer, WrenMsg::Replicate { ct, txs: group.clone() });
                }
                out.send(*last, WrenMsg::Replicate { ct, txs: group });
                replicated = true;
            }
        }
        let m = self.dc().0 as usize;
        debug_assert!(ub >= self.vv[m], "the version clock went back");
        self.vv[m] = self.vv[m].max(ub);
        if !replicated {
            let t = self.vv[m];
            for &peer in &self.peers {
                out.send(peer, WrenMsg::Heartbeat { t });
            }
        }
    }

    /// Alg. 4, lines 22–26. FIFO links deliver a replica's groups in commit
    /// order, so the sender's version clock can advance to `ct`.
    pub(crate) fn on_replicate(&mut self, from: Addr, ct: Timestamp, txs: Vec<TxWrites>) {
        let Some(source) = self.peer_dc(from) else { return };
        self.install_group(ct, source, &txs);
        let i = source.0 as usize;
        self.vv[i] = self.vv[i].max(ct);
    }

    /// Alg. 4, lines 27–28.
    pub(crate) fn on_heartbeat(&mut self, from: Addr, t: Timestamp) {
        let Some(source) = self.peer_dc(from) else { return };
        let i = source.0 as usize;
        self.vv[i] = self.vv[i].max(t);
    }

    /// The DC of `from` if it is a replica of this partition in another DC;
    /// anything else has no business replicating to us and is ignored.
    fn peer_dc(&self, from: Addr) -> Option<DcId> {
        match from {
            Addr::Replica(r) if self.peers.contains(&from) => Some(r.dc),
            _ => None,
        }
    }
}
