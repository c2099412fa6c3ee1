//! The tree over the partitions of one DC that stabilization runs on
//! (Wren's BiST, PaRiS's UST): leaves report up every Δ_G, an inner node
//! forwards once each child has reported since its last forward, and the
//! root sends the DC-wide result back down. One round costs 2(N−1)
//! messages instead of the N(N−1) of all-to-all gossip. What a report holds
//! and how two combine is the protocol's.

use crate::ids::{Addr, ReplicaId};
use crate::topology::Topology;

/// A replica's place in its DC's tree, and the reports its children sent
/// since its last forward.
#[derive(Clone, Debug)]
pub struct Tree<Rep> {
    parent: Option<ReplicaId>,
    children: Vec<ReplicaId>,
    fresh: Vec<Option<Rep>>,
}

/// The root of `dc`'s tree: its lowest partition (`None` if it holds none).
pub fn root_of(topology: &Topology, dc: crate::ids::DcId) -> Option<ReplicaId> {
    topology.replicas_in(dc).first().copied()
}

impl<Rep> Tree<Rep> {
    /// Lays the replicas `me`'s DC holds out as a complete `fanout`-ary
    /// tree in partition order, rooted at the lowest partition.
    pub fn new(me: ReplicaId, topology: &Topology, fanout: u32) -> Self {
        let members = topology.replicas_in(me.dc);
        let f = fanout.max(1) as usize;
        let i = members.iter().position(|r| *r == me).expect("a replica is a member of its DC");
        let parent = if i == 0 { None } else { Some(members[(i - 1) / f]) };
        let children: Vec<ReplicaId> = (f * i + 1..=f * i + f).filter_map(|c| members.get(c).copied()).collect();
        Tree { parent, fresh: children.iter().map(|_| None).collect(), children }
    }

    pub fn parent(&self) -> Option<ReplicaId> {
        self.parent
    }

    pub fn children(&self) -> &[ReplicaId] {
        &self.children
    }

    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// Whether `from` is this replica's parent.
    pub fn is_parent(&self, from: Addr) -> bool {
        self.parent.map(Addr::Replica) == Some(from)
    }

    /// A report from `from`: `None` if it is no child of this replica or
    /// some child has not reported since the last forward; otherwise every
    /// child's report, taken (the next forward waits for new ones). A
    /// second report from one child before the others arrive replaces the
    /// first: both are lower bounds and the newer one is tighter.
    pub fn gather(&mut self, from: Addr, report: Rep) -> Option<Vec<Rep>> {
        let Addr::Replica(child) = from else { return None };
        let slot = self.children.iter().position(|c| *c == child)?;
        self.fresh[slot] = Some(report);
        if self.fresh.iter().any(Option::is_none) {
            return None;
        }
        Some(self.fresh.iter_mut().map(|r| r.take().expect("all children fresh")).collect())
    }

    /// Whether `from` is one of this replica's children.
    pub fn is_child(&self, from: Addr) -> bool {
        matches!(from, Addr::Replica(r) if self.children.contains(&r))
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
            .map(|r| (r.partition, Tree::<()>::new(r, topology, fanout).parent.map(|p| p.partition)))
            .collect()
    }

    #[test]
    fn tree_is_complete_and_rooted_at_the_first_partition() {
        let t = Topology::full(2, 6).unwrap();
        let shape = tree_shape(&t, DcId(1), 2);
        let parents: Vec<Option<u32>> = shape.iter().map(|(_, p)| p.map(|p| p.0)).collect();
        assert_eq!(parents, vec![None, Some(0), Some(0), Some(1), Some(1), Some(2)]);
        let root = Tree::<()>::new(ReplicaId::new(1, 0), &t, 2);
        assert!(root.parent().is_none());
        assert_eq!(root.children(), &[ReplicaId::new(1, 1), ReplicaId::new(1, 2)]);
    }

    #[test]
    fn under_partial_replication_the_tree_spans_the_partitions_a_dc_holds() {
        let t = Topology::round_robin(3, 3, 2).unwrap();
        // DC 1 holds partitions 0 and 1; DC 2 holds 1 and 2.
        assert_eq!(root_of(&t, DcId(2)), Some(ReplicaId::new(2, 1)));
        let shape = tree_shape(&t, DcId(2), 4);
        assert_eq!(shape, vec![(PartitionId(1), None), (PartitionId(2), Some(PartitionId(1)))]);
    }

    #[test]
    fn a_forward_waits_for_every_child_and_takes_their_reports() {
        let t = Topology::full(1, 3).unwrap();
        let mut root = Tree::<u32>::new(ReplicaId::new(0, 0), &t, 2);
        let (a, b) = (Addr::Replica(ReplicaId::new(0, 1)), Addr::Replica(ReplicaId::new(0, 2)));
        assert_eq!(root.gather(a, 5), None);
        assert_eq!(root.gather(a, 7), None, "a newer report replaces the first");
        assert_eq!(root.gather(b, 3), Some(vec![7, 3]));
        assert_eq!(root.gather(b, 4), None, "the next forward waits for new reports");
        assert_eq!(root.gather(Addr::Replica(ReplicaId::new(0, 0)), 1), None, "not a child");
    }
}
