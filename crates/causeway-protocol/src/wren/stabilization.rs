//! BiST (Alg. 4, lines 29–32) over a tree of the partitions of one DC, and
//! the garbage-collection bound `S_old` (§IV) carried by the same messages.
//! [`Bist`] owns the stable times: the LST and RST this replica knows, and
//! `S_old`.
//!
//! Every Δ_G the leaves send their report — the minimum local entry and the
//! minimum remote entry of their version vector, and their oldest running
//! snapshot — up the family's tree ([`Tree`]); the root sends the DC-wide
//! minima back down.

use super::messages::{BistMsg, StableReport, WrenMsg};
use super::snapshot::Snapshot;
use crate::contract::Effects;
use crate::hlc::Timestamp;
use crate::ids::{Addr, ReplicaId};
use crate::topology::Topology;
use crate::twopc::{Snapshot as _, Tree, TxnMsg};

/// This replica's place in its DC's BiST tree, and the stable times it has
/// learned.
#[derive(Clone, Debug)]
pub struct Bist {
    tree: Tree<StableReport>,
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
    /// `me`'s place in its DC's `fanout`-ary tree.
    pub fn new(me: ReplicaId, topology: &Topology, fanout: u32) -> Self {
        Bist {
            tree: Tree::new(me, topology, fanout),
            lst: Timestamp::ZERO,
            rst: Timestamp::ZERO,
            s_old: Snapshot::default(),
            agreed: false,
        }
    }

    pub fn parent(&self) -> Option<ReplicaId> {
        self.tree.parent()
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
        if self.tree.is_leaf() {
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
        let Some(reports) = self.tree.gather(from, report) else { return };
        let aggregate = reports.into_iter().fold(own(self), combine);
        self.report_up(aggregate, out);
    }

    /// Sends a subtree's report to the parent; at the root, the report is
    /// DC-wide and its minima are the new LST, RST and `S_old`.
    fn report_up<T, R>(&mut self, report: StableReport, out: &mut Effects<WrenMsg, T, R>) {
        match self.tree.parent() {
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
        for &child in self.tree.children() {
            out.send_after_durable(Addr::Replica(child), TxnMsg::Stabilization(BistMsg::Down { lst, rst, oldest }));
        }
    }
}
