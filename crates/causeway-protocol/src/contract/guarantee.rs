//! The consistency a protocol promises, as data. Drivers pick the checker's
//! verdict from it (`causeway-history` knows which violations each
//! guarantee forbids) and never name a protocol.

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
