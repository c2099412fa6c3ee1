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
    /// Serializability: one serial order of the committed transactions
    /// explains every read (Geo-SDUR). The checker judges it by the direct
    /// serialization graph, after the TCC passes (a serializable history
    /// of a store that orders versions by commit timestamp is TCC too, but
    /// for the reads of transactions it aborted).
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
