//! The apply loop, replication and heartbeats (Alg. 4, lines 5–28).

use super::messages::{TxWrites, WrenMsg};
use super::replica::{WrenOutbox, WrenReplica};
use crate::commit_order;
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId};

impl WrenReplica {
    /// Every Δ_R: apply, in commit order, the committed transactions no
    /// future commit can precede; replicate each group of equal commit time
    /// to the other DCs; advance the version clock; heartbeat when idle.
    pub(crate) fn apply_committed(&mut self, now: PhysicalMicros, out: &mut WrenOutbox) {
        let ub = commit_order::stable_bound(&self.prepared_order, &mut self.hlc, now);
        let mut replicated = false;
        while let Some((ct, group)) = commit_order::take_group(&mut self.committed, ub) {
            self.install_group(ct, self.dc(), &group);
            replicated |= !self.peers.is_empty();
            out.send_all(&self.peers, WrenMsg::Replicate { ct, txs: group });
        }
        let m = self.dc().0 as usize;
        debug_assert!(ub >= self.vv[m], "the version clock went back");
        self.vv[m] = self.vv[m].max(ub);
        if !replicated {
            let t = self.vv[m];
            out.send_all(&self.peers, WrenMsg::Heartbeat { t });
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
