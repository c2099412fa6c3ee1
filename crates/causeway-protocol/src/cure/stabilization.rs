//! Cure's stabilization: every Δ_G each partition sends its version vector
//! to every other partition of its DC (all-to-all, N(N−1) messages of M
//! timestamps per round — the cost Wren's BiST tree cuts down). Each one
//! computes the global stable vector: entry `i` is the minimum over the DC's
//! partitions of what they have received from DC `i`. [`StableVector`] owns
//! the GSV and the GC bound.
//!
//! The same messages carry the oldest snapshot the partition's running
//! transactions may read; the minimum over the DC bounds garbage collection.

use super::messages::{CureMsg, Gossip};
use super::vector::VectorTs;
use crate::contract::Effects;
use crate::ids::{Addr, ReplicaId};
use crate::topology::Topology;
use crate::twopc::TxnMsg;

/// The DC's stable vector as this replica knows it, and what it knows of
/// each partition.
#[derive(Clone, Debug)]
pub struct StableVector {
    me: ReplicaId,
    /// The other partitions of this DC.
    partners: Vec<Addr>,
    /// The latest version vector and oldest snapshot reported by each
    /// partition of the DC, by partition id.
    reports: Vec<Option<(VectorTs, VectorTs)>>,
    /// The global stable vector: every partition of the DC has received
    /// DC `i`'s updates up to `gsv[i]`.
    gsv: VectorTs,
    /// The oldest snapshot any running transaction in the DC may read;
    /// versions older than what it sees are collected.
    s_old: VectorTs,
}

impl StableVector {
    pub fn new(me: ReplicaId, topology: &Topology) -> Self {
        let dcs = topology.dc_count();
        StableVector {
            me,
            partners: topology.replicas_in(me.dc).into_iter().filter(|r| *r != me).map(Addr::Replica).collect(),
            reports: vec![None; topology.partition_count() as usize],
            gsv: VectorTs::zero(dcs),
            s_old: VectorTs::zero(dcs),
        }
    }

    /// The global stable vector.
    pub fn gsv(&self) -> &VectorTs {
        &self.gsv
    }

    /// Every partition of the DC has reported since this replica started,
    /// so the GSV is the DC's again.
    pub fn agreed(&self) -> bool {
        // Reports are kept once received: the GSV is recomputed from them
        // all from the first round in which every partition has one.
        self.reports.iter().all(Option::is_some)
    }

    /// The GC bound.
    pub fn oldest_snapshot(&self) -> &VectorTs {
        &self.s_old
    }

    /// Every Δ_G: this replica's report to the other partitions, and into
    /// its own view.
    pub fn gossip<T, R>(&mut self, vv: &VectorTs, oldest: VectorTs, out: &mut Effects<CureMsg, T, R>) {
        for &partner in &self.partners {
            out.send_after_durable(partner, TxnMsg::Stabilization(Gossip { vv: vv.clone(), oldest: oldest.clone() }));
        }
        self.reports[self.me.partition.0 as usize] = Some((vv.clone(), oldest));
        self.recompute();
    }

    /// A partner's report; `false` if it is not one of this DC's partitions
    /// or not a report of this cluster's shape.
    pub fn on_gossip(&mut self, from: Addr, report: Gossip) -> bool {
        let Addr::Replica(partner) = from else { return false };
        let dcs = self.gsv.len();
        if !self.partners.contains(&from) || report.vv.len() != dcs || report.oldest.len() != dcs {
            return false;
        }
        let slot = &mut self.reports[partner.partition.0 as usize];
        match slot {
            // Both only grow; a message overtaken by a newer one cannot
            // happen on FIFO links, but joining keeps it harmless.
            Some((v, o)) => {
                v.join(&report.vv);
                o.join(&report.oldest);
            }
            None => *slot = Some((report.vv, report.oldest)),
        }
        self.recompute();
        true
    }

    /// Once every partition of the DC has reported: the GSV and the GC bound
    /// are the minima of the reports; both only move forward.
    fn recompute(&mut self) {
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
