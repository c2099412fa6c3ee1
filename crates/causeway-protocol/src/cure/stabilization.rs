//! Cure's stabilization: every Δ_G each partition sends its version vector
//! to every other partition of its DC (all-to-all, N(N−1) messages of M
//! timestamps per round — the cost Wren's BiST tree cuts down). Each one
//! computes the global stable vector: entry `i` is the minimum over the DC's
//! partitions of what they have received from DC `i`.
//!
//! The same messages carry the oldest snapshot the partition's running
//! transactions may read; the minimum over the DC bounds garbage collection.

use super::messages::CureMsg;
use super::replica::{CureOutbox, CureReplica};
use super::vector::VectorTs;
use crate::hlc::PhysicalMicros;
use crate::ids::Addr;

impl CureReplica {
    /// Every Δ_G: send this replica's report to the other partitions and
    /// fold it into its own view.
    pub(crate) fn gossip(&mut self, now: PhysicalMicros, out: &mut CureOutbox) {
        let oldest = self.oldest_local_snapshot(now);
        for &partner in &self.partners {
            out.send(partner, CureMsg::Gossip { vv: self.vv.clone(), oldest: oldest.clone() });
        }
        self.reports[self.id.partition.0 as usize] = Some((self.vv.clone(), oldest));
        self.recompute_stable();
    }

    pub(crate) fn on_gossip(&mut self, from: Addr, vv: VectorTs, oldest: VectorTs) {
        let Addr::Replica(partner) = from else { return };
        if !self.partners.contains(&from) || vv.len() != self.vv.len() || oldest.len() != self.vv.len() {
            return;
        }
        let slot = &mut self.reports[partner.partition.0 as usize];
        match slot {
            // Both only grow; a message overtaken by a newer one cannot
            // happen on FIFO links, but joining keeps it harmless.
            Some((v, o)) => {
                v.join(&vv);
                o.join(&oldest);
            }
            None => *slot = Some((vv, oldest)),
        }
        self.recompute_stable();
    }

    /// Once every partition of the DC has reported: the GSV and the GC bound
    /// are the minima of the reports; both only move forward.
    fn recompute_stable(&mut self) {
        let mut reports = self.reports.iter();
        let Some(Some((first_vv, first_oldest))) = reports.next() else { return };
        let (mut gsv, mut oldest) = (first_vv.clone(), first_oldest.clone());
        for report in reports {
            let Some((vv, o)) = report else { return };
            gsv.meet(vv);
            oldest.meet(o);
        }
        self.gsv.join(&gsv);
        self.s_old.join(&oldest);
    }
}
