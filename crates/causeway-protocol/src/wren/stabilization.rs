//! BiST (Alg. 4, lines 29–32) over a tree of the partitions of one DC, and
//! the garbage-collection bound `S_old` (§IV) carried by the same messages.
//!
//! Every Δ_G the leaves send their report — the minimum local entry and the
//! minimum remote entry of their version vector, and their oldest running
//! snapshot — to their parent. An inner node forwards the minimum of its own
//! report and its children's as soon as each child has reported since its
//! last forward; the root then sends the DC-wide minima back down. One round
//! costs 2(N−1) messages instead of the N(N−1) of all-to-all gossip.

use super::messages::{StableReport, WrenMsg};
use super::replica::{WrenOutbox, WrenReplica};
use super::snapshot::Snapshot;
use crate::hlc::Timestamp;
use crate::ids::{Addr, ReplicaId};
use crate::topology::Topology;

/// This replica's place in its DC's BiST tree.
#[derive(Clone, Debug)]
pub struct Bist {
    pub parent: Option<ReplicaId>,
    pub children: Vec<ReplicaId>,
    /// Reports received from each child since the last forward.
    fresh: Vec<Option<StableReport>>,
}

impl Bist {
    /// Lays the DC's replicas out as a complete `fanout`-ary tree in
    /// partition order, rooted at the lowest partition.
    pub fn new(me: ReplicaId, topology: &Topology, fanout: u32) -> Self {
        let members = topology.replicas_in(me.dc);
        let f = fanout.max(1) as usize;
        let i = members.iter().position(|r| *r == me).expect("a replica is a member of its DC");
        let parent = if i == 0 { None } else { Some(members[(i - 1) / f]) };
        let children: Vec<ReplicaId> = (f * i + 1..=f * i + f).filter_map(|c| members.get(c).copied()).collect();
        Bist { parent, fresh: vec![None; children.len()], children }
    }

    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }
}

fn combine(a: StableReport, b: StableReport) -> StableReport {
    StableReport { local: a.local.min(b.local), remote: a.remote.min(b.remote), oldest: a.oldest.meet(b.oldest) }
}

impl WrenReplica {
    fn own_report(&self) -> StableReport {
        let m = self.dc().0 as usize;
        let remote = self
            .topology
            .replicas_of(self.id.partition)
            .iter()
            .filter(|dc| dc.0 as usize != m)
            .map(|dc| self.vv[dc.0 as usize])
            .min()
            .unwrap_or(Timestamp::MAX); // a single DC has no remote items
        StableReport { local: self.vv[m], remote, oldest: self.oldest_local_snapshot() }
    }

    /// Every Δ_G: a leaf starts a round; a lone replica completes one.
    pub(crate) fn stabilize(&mut self, out: &mut WrenOutbox) {
        if !self.bist.children.is_empty() {
            return; // inner nodes forward when their children have reported
        }
        let report = self.own_report();
        self.report_up(report, out);
    }

    pub(crate) fn on_stable_up(&mut self, from: Addr, report: StableReport, out: &mut WrenOutbox) {
        let Addr::Replica(child) = from else { return };
        let Some(slot) = self.bist.children.iter().position(|c| *c == child) else { return };
        // A second report from one child before the others arrive replaces
        // the first: both are lower bounds and the newer one is tighter.
        self.bist.fresh[slot] = Some(report);
        if self.bist.fresh.iter().any(Option::is_none) {
            return;
        }
        let mut aggregate = self.own_report();
        for slot in &mut self.bist.fresh {
            aggregate = combine(aggregate, slot.take().expect("all children fresh"));
        }
        self.report_up(aggregate, out);
    }

    /// Sends a subtree's report to the parent; at the root, the report is
    /// DC-wide and its minima are the new LST, RST and `S_old`.
    fn report_up(&mut self, report: StableReport, out: &mut WrenOutbox) {
        match self.bist.parent {
            Some(parent) => out.send(Addr::Replica(parent), WrenMsg::StableUp(report)),
            None => self.on_stable_down(report.local, report.remote, report.oldest, out),
        }
    }

    pub(crate) fn on_stable_down(&mut self, lst: Timestamp, rst: Timestamp, oldest: Snapshot, out: &mut WrenOutbox) {
        self.lst = self.lst.max(lst);
        self.rst = self.rst.max(rst);
        self.s_old = self.s_old.join(oldest);
        for &child in &self.bist.children {
            out.send(Addr::Replica(child), WrenMsg::StableDown { lst, rst, oldest });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{DcId, PartitionId};

    /// Each partition of a DC's tree with its parent.
    fn tree_shape(topology: &Topology, dc: DcId, fanout: u32) -> Vec<(PartitionId, Option<PartitionId>)> {
        topology
            .replicas_in(dc)
            .into_iter()
            .map(|r| (r.partition, Bist::new(r, topology, fanout).parent.map(|p| p.partition)))
            .collect()
    }

    #[test]
    fn tree_is_complete_and_rooted_at_the_first_partition() {
        let t = Topology::full(2, 6).unwrap();
        let shape = tree_shape(&t, DcId(1), 2);
        let parents: Vec<Option<u32>> = shape.iter().map(|(_, p)| p.map(|p| p.0)).collect();
        assert_eq!(parents, vec![None, Some(0), Some(0), Some(1), Some(1), Some(2)]);
        let root = Bist::new(ReplicaId::new(1, 0), &t, 2);
        assert!(root.is_root());
        assert_eq!(root.children, vec![ReplicaId::new(1, 1), ReplicaId::new(1, 2)]);
    }
}
