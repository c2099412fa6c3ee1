//! A cohort's prepared transactions (the papers' Alg. 3, 13–24): each with
//! the commit time this replica proposed for it, waiting for the
//! coordinator's decision. The smallest pending proposal bounds what may be
//! applied, replicated or read here: nothing can still commit below it.

use super::messages::TxnMsg;
use crate::contract::Effects;
use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::{Addr, TxId};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Prepared transactions, each with its proposal and what the protocol
/// keeps of it (`P`: its writes, and the snapshot metadata its versions
/// will carry).
#[derive(Debug)]
pub struct PreparedSet<P> {
    by_proposal: BTreeSet<(Timestamp, TxId)>,
    by_tx: FxHashMap<TxId, (Timestamp, P)>,
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

impl<P> PreparedSet<P> {
    /// Alg. 3, lines 13–19: proposes a commit time for `tx` above `floor`
    /// and above everything this replica's clock has issued, keeps `tx`
    /// prepared, and answers the coordinator `from`. A prepare delivered
    /// twice is answered again with its first proposal (and `None`
    /// returned); otherwise the proposal.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare<S, Q, W, G, T, R>(
        &mut self,
        hlc: &mut Hlc,
        now: PhysicalMicros,
        from: Addr,
        tx: TxId,
        floor: Timestamp,
        prepared: impl FnOnce() -> P,
        out: &mut Effects<TxnMsg<S, Q, W, G>, T, R>,
    ) -> Option<Timestamp> {
        if let Some(&(pt, _)) = self.by_tx.get(&tx) {
            out.send(from, TxnMsg::PrepareResp { tx, pt });
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
        self.by_tx.insert(tx, (pt, prepared()));
        self.by_proposal.insert((pt, tx));
        out.send(from, TxnMsg::PrepareResp { tx, pt });
        Some(pt)
    }

    /// Alg. 3, lines 20–24: the coordinator decided `ct` for `tx`. The clock
    /// observes it only for a transaction prepared here: a commit time for
    /// an unknown transaction moves nothing.
    pub fn resolve(&mut self, hlc: &mut Hlc, now: PhysicalMicros, tx: TxId, ct: Timestamp) -> Option<Resolved<P>> {
        let (pt, prepared) = self.by_tx.remove(&tx)?;
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

    type Out = Effects<TxnMsg<(), (), (), ()>, (), ()>;

    #[test]
    fn proposals_exceed_the_floor_and_a_second_prepare_gets_the_first() {
        let (mut set, mut hlc, mut out) = (PreparedSet::default(), Hlc::new(), Out::default());
        let from = Addr::Replica(crate::ids::ReplicaId::new(0, 1));
        let floor = Timestamp::from_physical(5_000);
        let pt = set.prepare(&mut hlc, 100, from, TxId(1), floor, || "w", &mut out).unwrap();
        assert!(pt > floor);
        assert!(set.prepare(&mut hlc, 100, from, TxId(1), floor, || "other", &mut out).is_none());
        assert_eq!(out.messages.len(), 2);
        assert!(out.messages.iter().all(|(_, m)| *m == TxnMsg::PrepareResp { tx: TxId(1), pt }));
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
        let pt = set.prepare(&mut hlc, 100, from, TxId(1), Timestamp::ZERO, || (), &mut out).unwrap();
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
        let pt = set.prepare(&mut hlc, 500, from, TxId(1), Timestamp::ZERO, || (), &mut out).unwrap();
        assert_eq!(set.stable_bound(&mut hlc, 2_000), pt.prev());
    }
}
