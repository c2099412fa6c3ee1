//! UST (Alg. 4, lines 38–43; §IV-B): the Universal Stable Time, a snapshot
//! every replica of every partition in every DC has installed, and the GC
//! bound `S_old` computed by the same messages.
//!
//! Every Δ_G the leaves of each DC's tree ([`Tree`]) report the minimum
//! entry of their version vectors and their oldest running snapshot; the
//! root's aggregate is the DC's GST. The root sends it to the roots of the
//! other DCs, and takes the minimum over the newest report of every DC as
//! the UST, which it sends down its tree. A UST from part of the cluster is
//! no UST: a root computes none until it has heard from every DC. A DC cut
//! off from the others therefore freezes the UST everywhere (the paper's
//! §III-C): snapshots stop advancing, and the clients' caches keep their
//! own writes readable.
//!
//! A root makes its UST durable now and then ([`Ust::to_persist`]) and
//! never reports an oldest snapshot above what it made durable; restarted,
//! it resumes from that UST — at or above every `S_old` the cluster can
//! have collected with — and serves its DC again without waiting to hear
//! from every DC, which a cut may prevent for long. Other replicas get
//! the UST from their root again.

use super::messages::{ParisMsg, UstMsg, UstReport};
use crate::contract::Effects;
use crate::hlc::Timestamp;
use crate::ids::{Addr, DcId, ReplicaId};
use crate::topology::Topology;
use crate::twopc::tree::{self, Tree};
use crate::twopc::TxnMsg;

/// This replica's place in UST, and what it has learned.
#[derive(Clone, Debug)]
pub struct Ust {
    me: ReplicaId,
    tree: Tree<UstReport>,
    /// At a root: the roots of the other DCs.
    other_roots: Vec<ReplicaId>,
    /// At a root: the newest report of each DC (its own included).
    dcs: Vec<Option<UstReport>>,
    ust: Timestamp,
    s_old: Timestamp,
    /// A UST from the root arrived since this replica started (or, at a
    /// root, was made durable before it).
    agreed: bool,
    /// At a root: the UST last made durable, the cap of the oldest snapshot
    /// it reports.
    persisted: Timestamp,
}

/// How far a root's UST moves before it is made durable again: the GC
/// bound lags at most this much behind the UST.
const PERSIST_EVERY_US: u64 = 50_000;

impl Ust {
    pub fn new(me: ReplicaId, topology: &Topology, fanout: u32) -> Self {
        let tree = Tree::new(me, topology, fanout);
        let other_roots = if tree.is_root() {
            topology.dcs().filter(|&dc| dc != me.dc).filter_map(|dc| tree::root_of(topology, dc)).collect()
        } else {
            Vec::new()
        };
        Ust {
            me,
            tree,
            other_roots,
            dcs: vec![None; usize::from(topology.dc_count())],
            ust: Timestamp::ZERO,
            s_old: Timestamp::ZERO,
            agreed: false,
            persisted: Timestamp::ZERO,
        }
    }

    /// The most this replica may report as the oldest snapshot in use: at a
    /// root, the UST it made durable (so that a restart resumes at or above
    /// any `S_old` built on its reports).
    pub fn oldest_cap(&self) -> Timestamp {
        if self.tree.is_root() {
            self.persisted
        } else {
            Timestamp::MAX
        }
    }

    /// At a root, a UST to make durable in this step, if it moved far
    /// enough since the last one (taken as made durable).
    pub fn to_persist(&mut self) -> Option<Timestamp> {
        let due =
            self.tree.is_root() && self.ust.physical() >= self.persisted.physical().saturating_add(PERSIST_EVERY_US);
        due.then(|| {
            self.persisted = self.ust;
            self.ust
        })
    }

    /// A UST made durable before a crash: resumed, and as good as one from
    /// the root (it was this root's, or one it had been told).
    pub fn restore(&mut self, ust: Timestamp) {
        self.ust = self.ust.max(ust);
        self.persisted = self.persisted.max(ust);
        self.agreed = true;
    }

    /// What a checkpoint keeps: the UST made durable.
    pub fn persisted(&self) -> Option<Timestamp> {
        (self.persisted > Timestamp::ZERO).then_some(self.persisted)
    }

    /// The UST as this replica knows it: the snapshot of a transaction
    /// starting here now (Alg. 2, line 4).
    pub fn ust(&self) -> Timestamp {
        self.ust
    }

    /// The GC bound `S_old`.
    pub fn oldest_snapshot(&self) -> Timestamp {
        self.s_old
    }

    /// The root has told this replica a UST since it started (learned from
    /// clients and coordinators does not count).
    pub fn agreed(&self) -> bool {
        self.agreed
    }

    pub fn is_parent(&self, from: Addr) -> bool {
        self.tree.is_parent(from)
    }

    /// A UST learned from elsewhere (a client's, a coordinator's): every
    /// replica had installed it (Alg. 2, line 2; Alg. 3, lines 2 and 12).
    pub fn learn(&mut self, t: Timestamp) {
        self.ust = self.ust.max(t);
    }

    /// Every Δ_G: a leaf starts a round with its own report.
    pub fn tick<T, R>(&mut self, own: UstReport, out: &mut Effects<ParisMsg, T, R>) {
        if self.tree.is_leaf() {
            self.report_up(own, out);
        }
    }

    /// A child's report; with the last fresh one, the subtree's goes up.
    pub fn on_report<T, R>(
        &mut self,
        from: Addr,
        report: UstReport,
        own: impl FnOnce(&Ust) -> UstReport,
        out: &mut Effects<ParisMsg, T, R>,
    ) {
        let Some(reports) = self.tree.gather(from, report) else { return };
        let aggregate = reports.into_iter().fold(own(self), UstReport::meet);
        self.report_up(aggregate, out);
    }

    /// A subtree's report goes to the parent; at the root it is the DC's,
    /// which goes across to the other roots and, with theirs, makes the
    /// UST.
    fn report_up<T, R>(&mut self, report: UstReport, out: &mut Effects<ParisMsg, T, R>) {
        if let Some(parent) = self.tree.parent() {
            out.send_after_durable(Addr::Replica(parent), TxnMsg::Stabilization(UstMsg::Up(report)));
            return;
        }
        self.heard(self.me.dc, report);
        for &root in &self.other_roots {
            out.send_after_durable(Addr::Replica(root), TxnMsg::Stabilization(UstMsg::Across(report)));
        }
        // Every DC that holds a partition counts (one that holds none has
        // no root and nothing to install); until each has reported, there
        // is no UST to give.
        let own = usize::from(self.me.dc.0);
        let counted = std::iter::once(own).chain(self.other_roots.iter().map(|r| usize::from(r.dc.0)));
        let mut all = Some(UstReport { installed: Timestamp::MAX, oldest: Timestamp::MAX });
        for i in counted {
            all = all.zip(self.dcs[i]).map(|(a, r)| a.meet(r));
        }
        match all {
            // The oldest snapshot in use is no newer than the UST handed
            // down with it: a replica that restarted adopts both together.
            Some(all) => {
                let ust = all.installed.max(self.ust);
                self.on_down(ust, all.oldest.min(ust), out);
            }
            // Restarted from a durable UST, and not heard from every DC
            // since: the children get what this root has.
            None if self.agreed => self.on_down(self.ust, self.s_old, out),
            None => {}
        }
    }

    /// The report of another DC, from its root.
    pub fn on_across(&mut self, from: Addr, report: UstReport) -> bool {
        let Addr::Replica(root) = from else { return false };
        if !self.other_roots.contains(&root) {
            return false;
        }
        self.heard(root.dc, report);
        true
    }

    fn heard(&mut self, dc: DcId, report: UstReport) {
        let slot = &mut self.dcs[usize::from(dc.0)];
        *slot = Some(slot.map_or(report, |old| old.join(report)));
    }

    /// The UST and `S_old`, from the parent (or this root): adopted, and
    /// passed down.
    pub fn on_down<T, R>(&mut self, ust: Timestamp, oldest: Timestamp, out: &mut Effects<ParisMsg, T, R>) {
        self.ust = self.ust.max(ust);
        self.s_old = self.s_old.max(oldest);
        self.agreed = true;
        for &child in self.tree.children() {
            out.send_after_durable(Addr::Replica(child), TxnMsg::Stabilization(UstMsg::Down { ust, oldest }));
        }
    }
}
