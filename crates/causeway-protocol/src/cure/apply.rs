//! Replication of local commits in commit order, heartbeats, and the
//! installation of what other DCs replicate.

use super::messages::{CureMsg, TxWrites};
use super::replica::{CureOutbox, CureReplica};
use crate::commit_order;
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::ids::{Addr, DcId};

impl CureReplica {
    /// Every Δ_R: replicate, in commit order, the local commits no future
    /// commit here can precede, grouping those of equal commit time; advance
    /// the local entry of the version vector; heartbeat when idle.
    pub(crate) fn replicate_committed(&mut self, now: PhysicalMicros, out: &mut CureOutbox) {
        let ub = commit_order::stable_bound(&self.prepared_order, &mut self.hlc, now);
        let mut replicated = false;
        while let Some((ct, group)) = commit_order::take_group(&mut self.committed, ub) {
            replicated |= !self.peers.is_empty();
            out.send_all(&self.peers, CureMsg::Replicate { ct, txs: group });
        }
        let m = self.dc();
        debug_assert!(ub >= self.vv.get(m), "the version clock went back");
        self.vv.raise(m, ub);
        self.installed_local = self.installed_local.max(ub);
        if !replicated {
            let t = self.vv.get(m);
            out.send_all(&self.peers, CureMsg::Heartbeat { t });
        }
    }

    /// FIFO links deliver a replica's groups in commit order, so the
    /// sender's entry can advance to `ct`.
    pub(crate) fn on_replicate(&mut self, from: Addr, ct: Timestamp, txs: Vec<TxWrites>) {
        let Some(source) = self.peer_dc(from) else { return };
        if txs.iter().any(|tx| tx.commit_vector.len() != self.vv.len() || tx.commit_vector.get(source) != ct) {
            return; // not a commit vector of this cluster and this commit
        }
        self.install(ct, source, &txs);
        self.vv.raise(source, ct);
    }

    pub(crate) fn on_heartbeat(&mut self, from: Addr, t: Timestamp) {
        let Some(source) = self.peer_dc(from) else { return };
        self.vv.raise(source, t);
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
