//! Which violations a history of a store may not contain, for each
//! guarantee a store can promise (the guarantee itself is the protocol
//! contract's vocabulary: protocols declare theirs, and drivers judge a
//! history against it without knowing the protocol).

use super::kind::ViolationKind;
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
            Guarantee::Serializable => true,
            // TCC allows lost updates and write skew: two concurrent
            // transactions may both read a version and both overwrite it.
            // Those are cycles of the serialization graph through an
            // anti-dependency (G2). G0 and G1c cannot arise without breaking
            // one of TCC's own rules, which is then reported in its own
            // right.
            Guarantee::Causal => !matches!(kind, WriteCycle | InformationCycle | AntiDependencyCycle),
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

#[cfg(test)]
mod tests {
    use super::*;

    const CYCLES: [ViolationKind; 3] =
        [ViolationKind::WriteCycle, ViolationKind::InformationCycle, ViolationKind::AntiDependencyCycle];

    #[test]
    fn serializability_forbids_everything_tcc_all_but_the_cycles_and_eventual_consistency_less() {
        for kind in ViolationKind::ALL {
            assert!(Guarantee::Serializable.forbids(kind), "{kind}");
            assert_eq!(Guarantee::Causal.forbids(kind), !CYCLES.contains(&kind), "{kind}");
            // Whatever eventual consistency forbids, TCC forbids too.
            assert!(!Guarantee::Eventual.forbids(kind) || Guarantee::Causal.forbids(kind), "{kind}");
        }
        assert!(Guarantee::Eventual.forbids(ViolationKind::Divergence));
        assert!(Guarantee::Eventual.forbids(ViolationKind::AbortedRead));
        assert!(!Guarantee::Eventual.forbids(ViolationKind::FracturedRead));
        assert!(!Guarantee::Eventual.forbids(ViolationKind::CausalViolation));
        assert!(CYCLES.iter().all(|&kind| !Guarantee::Eventual.forbids(kind)));
    }
}
