//! Which violations a history of a store may not contain, for each
//! guarantee a store can promise (the guarantee itself is the protocol
//! contract's vocabulary: protocols declare theirs, and drivers judge a
//! history against it without knowing the protocol).

use crate::checker::{Report, Violation, ViolationKind};
pub use causeway_protocol::Guarantee;

/// Which violations a history that keeps a guarantee cannot contain.
pub trait Forbids {
    /// Whether a history that keeps this promise can contain `kind`.
    fn forbids(self, kind: ViolationKind) -> bool;
}

impl Forbids for Guarantee {
    fn forbids(self, kind: ViolationKind) -> bool {
        use ViolationKind::*;
        match self {
            Guarantee::Causal | Guarantee::Serializable => true,
            // No store can read what nobody committed, read before it
            // writes, or leave data centers apart; but an eventually
            // consistent one may read out of causal order, see a
            // transaction in part, read a key twice with two answers, and
            // order writes against their causal order.
            Guarantee::Eventual => matches!(
                kind,
                Malformed
                    | UnknownValue
                    | AbortedRead
                    | IntermediateRead
                    | FutureRead
                    | CausalCycle
                    | DuplicateCommitTs
                    | ArbitrationContradiction
                    | Divergence
                    | FinalNotLww
            ),
        }
    }
}

impl Report {
    /// The violations that break `guarantee`.
    pub fn breaches(&self, guarantee: Guarantee) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| guarantee.forbids(v.kind))
    }

    /// Whether the history keeps `guarantee`.
    pub fn upholds(&self, guarantee: Guarantee) -> bool {
        self.breaches(guarantee).next().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcc_forbids_everything_and_eventual_consistency_less() {
        for kind in ViolationKind::ALL {
            assert!(Guarantee::Causal.forbids(kind));
            assert!(Guarantee::Serializable.forbids(kind));
        }
        assert!(Guarantee::Eventual.forbids(ViolationKind::Divergence));
        assert!(Guarantee::Eventual.forbids(ViolationKind::AbortedRead));
        assert!(!Guarantee::Eventual.forbids(ViolationKind::FracturedRead));
        assert!(!Guarantee::Eventual.forbids(ViolationKind::CausalViolation));
    }
}
