//! The consistency a store promises, as data: which violations a history of
//! that store may not contain. Protocols declare theirs, and drivers judge a
//! history against it without knowing the protocol.

use crate::checker::{Report, Violation, ViolationKind};
use std::fmt;

/// What a store promises of every history its clients can observe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Guarantee {
    /// Reads return committed values, and once writes stop every data
    /// center converges on the last writer's value. No snapshot, no causal
    /// order, no atomic visibility.
    Eventual,
    /// Transactional causal consistency: causal snapshots, atomic
    /// visibility, last-writer-wins arbitration that respects causality,
    /// convergence.
    Causal,
    /// Serializability. The checker does not judge it yet beyond what TCC
    /// requires (a serializable history is TCC); the serializability check
    /// comes with the first protocol that promises it.
    Serializable,
}

impl Guarantee {
    /// Whether a history that keeps this promise can contain `kind`.
    pub fn forbids(self, kind: ViolationKind) -> bool {
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

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Guarantee::Eventual => "eventual consistency",
            Guarantee::Causal => "TCC",
            Guarantee::Serializable => "serializability",
        }
    }
}

impl fmt::Display for Guarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
