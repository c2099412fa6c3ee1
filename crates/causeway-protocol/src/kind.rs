//! Choosing a protocol by name at run time.
//!
//! Protocols are types (so the simulator and the runtime are monomorphised
//! for each), but users pick one with a flag or a config key. A
//! [`ProtocolKind`] names one; [`ProtocolKind::visit`] calls a generic
//! function with the matching type. Adding a protocol means adding a variant
//! here and nothing in the drivers.

use crate::contract::{Protocol, Tuning};
use crate::cure::{Cure, HCure};
use crate::ec::Ec;
use crate::eiger::Eiger;
use crate::paris::{Bpr, Paris};
use crate::promptcc::{PrompTcc, PrompTccNaive};
use crate::sdur::Sdur;
use crate::topology::Topology;
use crate::wren::Wren;
use std::fmt;
use std::str::FromStr;

/// The protocols of the engine, by the names users type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ProtocolKind {
    /// Wren: nonblocking reads from the local stable snapshot plus a client cache.
    #[default]
    Wren,
    /// Cure: per-DC vector snapshots from physical clocks; reads may block.
    Cure,
    /// H-Cure: Cure on hybrid logical clocks; reads block only on pending commits.
    HCure,
    /// Eventual consistency: read the newest version, write at once, last writer wins.
    Ec,
    /// PaRiS: partial replication, nonblocking reads from the universal stable time plus a client cache.
    Paris,
    /// BPR: PaRiS's blocking baseline; snapshots from the coordinator's clock, reads wait until installed.
    Bpr,
    /// PrompTCC: one DC; reads in one round (two at most) from the freshest snapshot committed everywhere.
    PrompTcc,
    /// PrompTCC-naive: PrompTCC with every vector sent whole (§IV), to measure what §V saves.
    PrompTccNaive,
    /// Eiger: one DC; optimistic reads in up to three rounds (validity intervals, then the coordinators' status).
    Eiger,
    /// Geo-SDUR: serializable; each partition a replica group with an ordered log, transactions certified.
    Sdur,
}

/// A computation generic over the protocol, run by [`ProtocolKind::visit`].
pub trait ProtocolVisitor {
    type Output;
    fn visit<P: Protocol>(self) -> Self::Output;
}

impl ProtocolKind {
    pub const ALL: &'static [ProtocolKind] = &[
        ProtocolKind::Wren,
        ProtocolKind::Cure,
        ProtocolKind::HCure,
        ProtocolKind::Ec,
        ProtocolKind::Paris,
        ProtocolKind::Bpr,
        ProtocolKind::PrompTcc,
        ProtocolKind::PrompTccNaive,
        ProtocolKind::Eiger,
        ProtocolKind::Sdur,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::Wren => Wren::NAME,
            ProtocolKind::Cure => Cure::NAME,
            ProtocolKind::HCure => HCure::NAME,
            ProtocolKind::Ec => Ec::NAME,
            ProtocolKind::Paris => Paris::NAME,
            ProtocolKind::Bpr => Bpr::NAME,
            ProtocolKind::PrompTcc => PrompTcc::NAME,
            ProtocolKind::PrompTccNaive => PrompTccNaive::NAME,
            ProtocolKind::Eiger => Eiger::NAME,
            ProtocolKind::Sdur => Sdur::NAME,
        }
    }

    /// One line for help texts.
    pub fn describe(self) -> &'static str {
        match self {
            ProtocolKind::Wren => "nonblocking reads from the local stable snapshot plus a client cache (default)",
            ProtocolKind::Cure => "TCC with per-DC vector snapshots on physical clocks; reads may block (baseline)",
            ProtocolKind::HCure => "Cure on hybrid logical clocks; reads block only on pending commits (baseline)",
            ProtocolKind::Ec => "eventual consistency: newest version, writes at once, last writer wins (not TCC)",
            ProtocolKind::Paris => {
                "partial replication (each partition in R of the DCs); nonblocking reads from the universal stable time plus a client cache"
            }
            ProtocolKind::Bpr => {
                "PaRiS's blocking baseline: snapshots from the coordinator's clock; reads wait until installed (baseline)"
            }
            ProtocolKind::PrompTcc => {
                "one DC only: reads in one round, two at most, from the freshest snapshot committed at every partition"
            }
            ProtocolKind::PrompTccNaive => "PrompTCC with its vectors sent whole (baseline of its metadata savings)",
            ProtocolKind::Eiger => {
                "one DC only: optimistic reads in up to three rounds from validity intervals (PrompTCC's baseline)"
            }
            ProtocolKind::Sdur => {
                "serializable: each partition a replica group agreeing on an ordered log; transactions certified, global ones by every partition's vote"
            }
        }
    }

    /// What every history of the protocol must uphold.
    pub fn guarantee(self) -> crate::Guarantee {
        struct Of;
        impl ProtocolVisitor for Of {
            type Output = crate::Guarantee;
            fn visit<P: Protocol>(self) -> crate::Guarantee {
                P::GUARANTEE
            }
        }
        self.visit(Of)
    }

    /// Whether the protocol's replicas answer every read at once.
    pub fn reads_never_wait(self) -> bool {
        struct Of;
        impl ProtocolVisitor for Of {
            type Output = bool;
            fn visit<P: Protocol>(self) -> bool {
                P::READS_NEVER_WAIT
            }
        }
        self.visit(Of)
    }

    /// Whether the protocol places each partition as a replica group, several
    /// members of which may share a DC.
    pub fn replica_groups(self) -> bool {
        struct Of;
        impl ProtocolVisitor for Of {
            type Output = bool;
            fn visit<P: Protocol>(self) -> bool {
                P::REPLICA_GROUPS
            }
        }
        self.visit(Of)
    }

    /// Whether the protocol can run on `topology` with `tuning` (Wren
    /// refuses partial replication, for example); the error names the
    /// protocol.
    pub fn check(self, topology: &Topology, tuning: &Tuning) -> Result<(), String> {
        struct Check<'a>(&'a Topology, &'a Tuning);
        impl ProtocolVisitor for Check<'_> {
            type Output = Result<(), String>;
            fn visit<P: Protocol>(self) -> Result<(), String> {
                P::validate(self.0, &P::configure(self.1)).map_err(|e| format!("protocol {}: {e}", P::NAME))
            }
        }
        self.visit(Check(topology, tuning))
    }

    /// Calls `visitor` with the protocol type this kind names.
    pub fn visit<V: ProtocolVisitor>(self, visitor: V) -> V::Output {
        match self {
            ProtocolKind::Wren => visitor.visit::<Wren>(),
            ProtocolKind::Cure => visitor.visit::<Cure>(),
            ProtocolKind::HCure => visitor.visit::<HCure>(),
            ProtocolKind::Ec => visitor.visit::<Ec>(),
            ProtocolKind::Paris => visitor.visit::<Paris>(),
            ProtocolKind::Bpr => visitor.visit::<Bpr>(),
            ProtocolKind::PrompTcc => visitor.visit::<PrompTcc>(),
            ProtocolKind::PrompTccNaive => visitor.visit::<PrompTccNaive>(),
            ProtocolKind::Eiger => visitor.visit::<Eiger>(),
            ProtocolKind::Sdur => visitor.visit::<Sdur>(),
        }
    }
}

impl fmt::Display for ProtocolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ProtocolKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ProtocolKind::ALL.iter().copied().find(|k| k.name().eq_ignore_ascii_case(s)).ok_or_else(|| {
            let names: Vec<_> = ProtocolKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown protocol {s:?}; expected one of: {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Name;
    impl ProtocolVisitor for Name {
        type Output = &'static str;
        fn visit<P: Protocol>(self) -> &'static str {
            P::NAME
        }
    }

    #[test]
    fn names_round_trip_and_visit_the_named_type() {
        for &kind in ProtocolKind::ALL {
            assert_eq!(kind.name().parse::<ProtocolKind>(), Ok(kind));
            assert_eq!(kind.visit(Name), kind.name());
        }
        let names: Vec<_> = ProtocolKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            ["wren", "cure", "h-cure", "ec", "paris", "bpr", "promptcc", "promptcc-naive", "eiger", "sdur"]
        );
        assert_eq!("H-Cure".parse::<ProtocolKind>(), Ok(ProtocolKind::HCure));
        assert!("paxos".parse::<ProtocolKind>().unwrap_err().contains("wren"));
    }
}
