//! A cohort's prepared transactions (the papers' Alg. 3, 13–24): each with
//! the commit time this replica proposed for it, waiting for the
//! coordinator's decision. The smallest pending proposal bounds what may be
//! applied, replicated or read here: nothing can still commit below it.

use super::durable::FamilyRecord;
use super::messages::TxnMsg;
use crate::contract::Effects;
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, TxId};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// The effects of a cohort's step.
type Out<S, Q, W, G, T, P> = Effects<TxnMsg<S, Q, W, G>, T, FamilyRecord<P, W>>;

/// Prepared transactions, each with its proposal and what the protocol
/// keeps of it (`P`: its writes, and the snapshot metadata its versions
/// will carry).
#[derive(Debug)]
pub struct PreparedSet<P> {
    by_proposal: BTreeSet<(Timestamp, TxId)>,
    by_tx: FxHashMap<TxId, Entry<P>>,
}

/// One prepared transaction.
#[derive(Debug)]
struct Entry<P> {
    pt: Timestamp,
    prepared: P,
    /// Where to ask for the decision if it is long in coming.
    coordinator: Addr,
    /// When the decision was last waited for from now on: at the prepare,
    /// then at each question to the coordinator.
    since: PhysicalMicros,
    /// It commits at its proposal by itself once durable (one phase).
    alone: bool,
}

impl<P> Default for PreparedSet<P> {
    fn default() -> Self {
        PreparedSet { by_proposal: BTreeSet::new(), by_tx: FxHashMap::default() }
    }
}

/// What a commit decision resolved: the transaction, its commit time and
/// what was prepared.
#[derive(Debug)]
pub struct Resolved<P> {
    pub ct: Timestamp,
    pub prepared: P,
    /// The decision was below this replica's proposal, which no honest
    /// coordinator sends (it takes the maximum proposal): the commit time
    /// was raised to the proposal, and the input counts as refused.
    pub raised: bool,
}

impl<P: Clone> PreparedSet<P> {
    /// Alg. 3, lines 13–19: proposes a commit time for `tx` above `floor`
    /// and above everything this replica's clock has issued, keeps `tx`
    /// prepared, makes it durable, and answers the coordinator `from` once
    /// it is. A prepare delivered twice is answered again with its first
    /// proposal (and `None` returned); otherwise the proposal.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare<S, Q, W, G, T>(
        &mut self,
        hlc: &mut Hlc,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        floor: Timestamp,
        prepared: impl FnOnce() -> P,
        out: &mut Out<S, Q, W, G, T, P>,
    ) -> Option<Timestamp> {
        if let Some(entry) = self.by_tx.get(&tx) {
            out.send_after_durable(from, TxnMsg::PrepareResp { tx, pt: entry.pt });
            return None;
        }
        // Any time above the floor is a valid proposal: now and then one a
        // millisecond later than needed, as a clock running ahead proposes.
        let floor = if out.buggify("twopc.prepare.propose_later") {
            floor.max(Timestamp::from_physical(now + 1_000))
        } else {
            floor
        };
        let pt = hlc.tick(now, floor);
        let prepared = prepared();
        out.persist(FamilyRecord::Prepared { tx, pt, coordinator: from, prepared: prepared.clone() });
        self.insert(tx, Entry { pt, prepared, coordinator: from, since: now, alone: false });
        out.send_after_durable(from, TxnMsg::PrepareResp { tx, pt });
        Some(pt)
    }
}

impl<P> PreparedSet<P> {
    fn insert(&mut self, tx: TxId, entry: Entry<P>) {
        self.by_proposal.insert((entry.pt, tx));
        self.by_tx.insert(tx, entry);
    }

    /// A prepared transaction taken again from its record after a crash;
    /// the clock will not propose at or below its proposal again.
    pub fn restore(&mut self, hlc: &mut Hlc, tx: TxId, pt: Timestamp, coordinator: Addr, prepared: P) {
        hlc.observe(0, pt);
        self.insert(tx, Entry { pt, prepared, coordinator, since: 0, alone: false });
    }

    /// For a checkpoint: every prepared transaction with its proposal,
    /// coordinator and what was prepared, by proposal.
    pub fn entries(&self) -> impl Iterator<Item = (TxId, Timestamp, Addr, &P)> {
        self.by_proposal.iter().map(|&(pt, tx)| {
            let e = &self.by_tx[&tx];
            (tx, pt, e.coordinator, &e.prepared)
        })
    }

    /// The coordinator that prepared `tx` here, if it waits for a decision.
    pub fn coordinator_of(&self, tx: TxId) -> Option<Addr> {
        self.by_tx.get(&tx).map(|e| e.coordinator)
    }

    /// Marks `tx` as committing alone at its proposal (one phase: no
    /// decision comes, and its coordinator is not asked about it); returns
    /// that proposal if `tx` is prepared here and was not marked already.
    pub fn mark_alone(&mut self, tx: TxId) -> Option<Timestamp> {
        let entry = self.by_tx.get_mut(&tx)?;
        (!std::mem::replace(&mut entry.alone, true)).then_some(entry.pt)
    }

    /// Whether `tx` is prepared here and commits alone.
    pub fn is_alone(&self, tx: TxId) -> bool {
        self.by_tx.get(&tx).is_some_and(|e| e.alone)
    }

    /// The transactions prepared here that commit alone, with their
    /// proposals and coordinators: after a restart, each is committed at
    /// once.
    pub fn alone(&self) -> Vec<(TxId, Timestamp, Addr)> {
        let mut alone: Vec<_> =
            self.by_tx.iter().filter(|(_, e)| e.alone).map(|(&tx, e)| (tx, e.pt, e.coordinator)).collect();
        alone.sort_unstable();
        alone
    }

    /// Whether `tx` is prepared here and waits for its decision.
    pub fn contains(&self, tx: TxId) -> bool {
        self.by_tx.contains_key(&tx)
    }

    /// `tx` never commits: forgotten. Returns whether it was prepared here.
    pub fn abort(&mut self, tx: TxId) -> bool {
        match self.by_tx.remove(&tx) {
            Some(entry) => {
                self.by_proposal.remove(&(entry.pt, tx));
                true
            }
            None => false,
        }
    }

    /// The transactions that have waited for their decision longer than
    /// `after_us`, with their coordinators; each is waited for again from
    /// now on.
    pub fn overdue(&mut self, now: PhysicalMicros, after_us: u64) -> Vec<(TxId, Addr)> {
        let mut late = Vec::new();
        for (&tx, entry) in self.by_tx.iter_mut().filter(|(_, e)| !e.alone) {
            if now.saturating_sub(entry.since) >= after_us {
                entry.since = now;
                late.push((tx, entry.coordinator));
            }
        }
        late.sort_unstable_by_key(|&(tx, _)| tx);
        late
    }

    /// The transactions prepared here that `coordinator` decides, as
    /// [`PreparedSet::overdue`] gives them (their clock restarts): its
    /// decision may be in a backlog its link shed.
    pub fn coordinated_by(&mut self, now: PhysicalMicros, coordinator: Addr) -> Vec<TxId> {
        let mut theirs = Vec::new();
        for (&tx, entry) in self.by_tx.iter_mut().filter(|(_, e)| !e.alone && e.coordinator == coordinator) {
            entry.since = now;
            theirs.push(tx);
        }
        theirs.sort_unstable();
        theirs
    }

    /// Alg. 3, lines 20–24: the coordinator decided `ct` for `tx`. The clock
    /// observes it only for a transaction prepared here: a commit time for
    /// an unknown transaction moves nothing.
    pub fn resolve(&mut self, hlc: &mut Hlc, now: PhysicalMicros, tx: TxId, ct: Timestamp) -> Option<Resolved<P>> {
        let Entry { pt, prepared, .. } = self.by_tx.remove(&tx)?;
        self.by_proposal.remove(&(pt, tx));
        hlc.observe(now, ct);
        Some(Resolved { ct: ct.max(pt), prepared, raised: ct < pt })
    }

    /// The smallest proposal still waiting for its decision.
    pub fn smallest_proposal(&self) -> Option<Timestamp> {
        self.by_proposal.first().map(|&(pt, _)| pt)
    }

    /// The bound below which no transaction can still commit here (`ub` in
    /// Wren's Alg. 4): just below the smallest pending proposal, or, with
    /// none, the clock — and the HLC moves up to it, so that a proposal made
    /// in the same microsecond still exceeds it.
    pub fn stable_bound(&self, hlc: &mut Hlc, now: PhysicalMicros) -> Timestamp {
        match self.smallest_proposal() {
            Some(min_pt) => min_pt.prev(),
            None => hlc.observe(now, Timestamp::ZERO),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_tx.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_tx.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Out = Effects<TxnMsg<(), (), (), ()>, (), FamilyRecord<&'static str, ()>>;

    #[test]
    fn proposals_exceed_the_floor_and_a_second_prepare_gets_the_first() {
        let (mut set, mut hlc, mut out) = (PreparedSet::default(), Hlc::new(), Out::default());
        let from = Addr::Replica(crate::ids::ReplicaId::new(0, 1));
        let floor = Timestamp::from_physical(5_000);
        let pt = set.prepare(&mut hlc, 100, from, TxId(1), floor, || "w", &mut out).unwrap();
        assert!(pt > floor);
        assert!(set.prepare(&mut hlc, 100, from, TxId(1), floor, || "other", &mut out).is_none());
        assert_eq!(out.after_durable.len(), 2, "both answers wait for the prepare to be durable");
        assert!(out.after_durable.iter().all(|(_, m)| *m == TxnMsg::PrepareResp { tx: TxId(1), pt }));
        assert_eq!(out.records.len(), 1, "one record: the first prepare");
        assert_eq!(set.stable_bound(&mut hlc, 10_000_000), pt.prev(), "nothing commits below a pending proposal");
    }

    #[test]
    fn a_decision_for_an_unknown_transaction_moves_no_clock() {
        let (mut set, mut hlc) = (PreparedSet::<()>::default(), Hlc::new());
        hlc.observe(100, Timestamp::ZERO);
        let before = hlc.current();
        assert!(set.resolve(&mut hlc, 100, TxId(7), Timestamp::MAX.prev()).is_none());
        assert_eq!(hlc.current(), before);
    }

    #[test]
    fn a_decision_below_the_proposal_is_raised_to_it() {
        let (mut set, mut hlc, mut out) = (PreparedSet::default(), Hlc::new(), Out::default());
        let from = Addr::Replica(crate::ids::ReplicaId::new(0, 1));
        let pt = set.prepare(&mut hlc, 100, from, TxId(1), Timestamp::ZERO, || "w", &mut out).unwrap();
        let r = set.resolve(&mut hlc, 100, TxId(1), Timestamp(1)).unwrap();
        assert_eq!((r.ct, r.raised), (pt, true));
        assert!(set.is_empty());
    }

    #[test]
    fn the_bound_is_below_the_smallest_proposal_or_the_clock() {
        let (mut set, mut hlc, mut out) = (PreparedSet::default(), Hlc::new(), Out::default());
        let clock = set.stable_bound(&mut hlc, 1_000);
        assert_eq!(clock, Timestamp::from_physical(1_000));
        assert!(hlc.current() >= clock, "the HLC moved up to the bound");
        let from = Addr::Replica(crate::ids::ReplicaId::new(0, 1));
        let pt = set.prepare(&mut hlc, 500, from, TxId(1), Timestamp::ZERO, || "w", &mut out).unwrap();
        assert_eq!(set.stable_bound(&mut hlc, 2_000), pt.prev());
    }
}
