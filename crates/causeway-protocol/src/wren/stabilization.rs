//! BiST (Alg. 4, lines 29–32) over a tree of the partitions of one DC, and
//! the garbage-collection bound `S_old` (§IV) carried by the same messages.
//! [`Bist`] owns the stable times: the LST and RST this replica knows, and
//! `S_old`.
//!
//! Every Δ_G the leaves send their report — the minimum local entry and the
//! minimum remote entry of their version vector, and their oldest running
//! snapshot — to their parent. An inner node forwards the minimum of its own
//! report and its children's as soon as each child has reported since its
//! last forward; the root then sends the DC-wide minima back down. One round
//! costs 2(N−1) messages instead of the N(N−1) of all-to-all gossip.

use super::messages::{BistMsg, StableReport, WrenMsg};
use super::snapshot::Snapshot;
use crate::contract::Effects;
use crate::hlc::Timestamp;
use crate::ids::{Addr, ReplicaId};
use crate::topology::Topology;
use crate::twopc::{Snapshot as _, TxnMsg};

/// This replica's place in its DC's BiST tree, and the stable times it has
/// learned.
#[derive(Clone, Debug)]
pub struct Bist {
    parent: Option<ReplicaId>,
    children: Vec<ReplicaId>,
    /// Reports received from each child since the last forward.
    fresh: Vec<Option<StableReport>>,
    /// Every partition of this DC has installed local items up to `lst`...
    lst: Timestamp,
    /// ...and remote items up to `rst`.
    rst: Timestamp,
    /// The oldest snapshot any running transaction in the DC may read;
    /// versions older than what it sees are collected.
    s_old: Snapshot,
    /// A round's stable times arrived since this replica started.
    agreed: bool,
}

fn combine(a: StableReport, b: StableReport) -> StableReport {
    StableReport { local: a.local.min(b.local), remote: a.remote.min(b.remote), oldest: a.oldest.meet(&b.oldest) }
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
        Bist {
            parent,
            fresh: vec![None; children.len()],
            children,
            lst: Timestamp::ZERO,
            rst: Timestamp::ZERO,
            s_old: Snapshot::default(),
            agreed: false,
        }
    }

    pub fn parent(&self) -> Option<ReplicaId> {
        self.parent
    }

    pub fn children(&self) -> &[ReplicaId] {
        &self.children
    }

    /// `(lst, rst)` as this replica knows them.
    pub fn stable_times(&self) -> (Timestamp, Timestamp) {
        (self.lst, self.rst)
    }

    /// The DC has agreed on stable times since this replica started
    /// (learned from clients does not count).
    pub fn agreed(&self) -> bool {
        self.agreed
    }

    /// The GC bound `S_old`.
    pub fn oldest_snapshot(&self) -> Snapshot {
        self.s_old
    }

    /// Stable times learned from elsewhere (a client's last snapshot, a
    /// coordinator's): every partition of the DC had installed them.
    pub fn learn(&mut self, lt: Timestamp, rt: Timestamp) {
        self.lst = self.lst.max(lt);
        self.rst = self.rst.max(rt);
    }

    /// The snapshot a transaction starting here now gets (Alg. 2, line 5):
    /// the stable times, with the remote one kept below the local one.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot { lt: self.lst, rt: self.rst.min(self.lst.prev()) }
    }

    /// Every Δ_G: a leaf starts a round with its own report; inner nodes
    /// forward when their children have reported.
    pub fn tick<T, R>(&mut self, own: impl FnOnce(&Bist) -> StableReport, out: &mut Effects<WrenMsg, T, R>) {
        if self.children.is_empty() {
            let report = own(self);
            self.report_up(report, out);
        }
    }

    /// A child's report; with the last fresh one, the subtree's (with
    /// `own`, this replica's report) goes up.
    pub fn on_report<T, R>(
        &mut self,
        from: Addr,
        report: StableReport,
        own: impl FnOnce(&Bist) -> StableReport,
        out: &mut Effects<WrenMsg, T, R>,
    ) {
        let Addr::Replica(child) = from else { return };
        let Some(slot) = self.children.iter().position(|c| *c == child) else { return };
        // A second report from one child before the others arrive replaces
        // the first: both are lower bounds and the newer one is tighter.
        self.fresh[slot] = Some(report);
        if self.fresh.iter().any(Option::is_none) {
            return;
        }
        let mut aggregate = own(self);
        for slot in &mut self.fresh {
            aggregate = combine(aggregate, slot.take().expect("all children fresh"));
        }
        self.report_up(aggregate, out);
    }

    /// Sends a subtree's report to the parent; at the root, the report is
    /// DC-wide and its minima are the new LST, RST and `S_old`.
    fn report_up<T, R>(&mut self, report: StableReport, out: &mut Effects<WrenMsg, T, R>) {
        match self.parent {
            Some(parent) => out.send_after_durable(Addr::Replica(parent), TxnMsg::Stabilization(BistMsg::Up(report))),
            None => self.on_down(report.local, report.remote, report.oldest, out),
        }
    }

    /// The DC-wide minima, from the parent (or this root): adopted, and
    /// passed down.
    pub fn on_down<T, R>(
        &mut self,
        lst: Timestamp,
        rst: Timestamp,
        oldest: Snapshot,
        out: &mut Effects<WrenMsg, T, R>,
    ) {
        self.lst = self.lst.max(lst);
        self.rst = self.rst.max(rst);
        self.s_old = self.s_old.join(oldest);
        self.agreed = true;
        for &child in &self.children {
            out.send_after_durable(Addr::Replica(child), TxnMsg::Stabilization(BistMsg::Down { lst, rst, oldest }));
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
        assert!(root.parent().is_none());
        assert_eq!(root.children(), &[ReplicaId::new(1, 1), ReplicaId::new(1, 2)]);
    }
}
