//! The kinds of violation a history can show, their stable names and what
//! each means: the vocabulary of every report.

use std::fmt;

/// The ways a history can fail to be transactionally causally consistent,
/// or serializable.
///
/// The order of the variants is the order of the report: problems with the
/// file itself first, then single reads, then the causal order, then
/// arbitration, then the final states, then the cycles of the direct
/// serialization graph (found only when serializability is judged).
///
/// Adya's phenomena map onto them: G1a (aborted reads) is
/// [`AbortedRead`](ViolationKind::AbortedRead), G1b (intermediate reads) is
/// [`IntermediateRead`](ViolationKind::IntermediateRead), and G0, G1c and G2
/// are [`WriteCycle`](ViolationKind::WriteCycle),
/// [`InformationCycle`](ViolationKind::InformationCycle) and
/// [`AntiDependencyCycle`](ViolationKind::AntiDependencyCycle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViolationKind {
    Malformed,
    UnknownValue,
    AbortedRead,
    IntermediateRead,
    FutureRead,
    InternalRead,
    FracturedRead,
    CausalViolation,
    CausalCycle,
    DuplicateCommitTs,
    ArbitrationContradiction,
    SessionArbitration,
    CausalArbitration,
    Divergence,
    FinalNotLww,
    /// G0: a cycle of write dependencies (ww edges) alone.
    WriteCycle,
    /// G1c: a cycle of write and read dependencies (ww and wr edges), with
    /// no write cycle among the same transactions.
    InformationCycle,
    /// G2: a cycle with at least one anti-dependency (rw edge), with no
    /// cycle of write and read dependencies among the same transactions:
    /// lost updates, write skew, read skew.
    AntiDependencyCycle,
}

impl ViolationKind {
    /// Every kind, in report order.
    pub const ALL: [ViolationKind; 18] = [
        ViolationKind::Malformed,
        ViolationKind::UnknownValue,
        ViolationKind::AbortedRead,
        ViolationKind::IntermediateRead,
        ViolationKind::FutureRead,
        ViolationKind::InternalRead,
        ViolationKind::FracturedRead,
        ViolationKind::CausalViolation,
        ViolationKind::CausalCycle,
        ViolationKind::DuplicateCommitTs,
        ViolationKind::ArbitrationContradiction,
        ViolationKind::SessionArbitration,
        ViolationKind::CausalArbitration,
        ViolationKind::Divergence,
        ViolationKind::FinalNotLww,
        ViolationKind::WriteCycle,
        ViolationKind::InformationCycle,
        ViolationKind::AntiDependencyCycle,
    ];

    /// A stable kebab-case name, for reports and for tools that grep them.
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::Malformed => "malformed",
            ViolationKind::UnknownValue => "unknown-value",
            ViolationKind::AbortedRead => "aborted-read",
            ViolationKind::IntermediateRead => "intermediate-read",
            ViolationKind::FutureRead => "future-read",
            ViolationKind::InternalRead => "internal-read",
            ViolationKind::FracturedRead => "fractured-read",
            ViolationKind::CausalViolation => "causal-violation",
            ViolationKind::CausalCycle => "causal-cycle",
            ViolationKind::DuplicateCommitTs => "duplicate-commit-ts",
            ViolationKind::ArbitrationContradiction => "arbitration-contradiction",
            ViolationKind::SessionArbitration => "session-arbitration",
            ViolationKind::CausalArbitration => "causal-arbitration",
            ViolationKind::Divergence => "divergence",
            ViolationKind::FinalNotLww => "final-not-lww",
            ViolationKind::WriteCycle => "g0-write-cycle",
            ViolationKind::InformationCycle => "g1c-information-cycle",
            ViolationKind::AntiDependencyCycle => "g2-anti-dependency-cycle",
        }
    }

    /// One line saying what the kind means, printed above its violations.
    pub fn describe(self) -> &'static str {
        match self {
            ViolationKind::Malformed => "the history breaks the format's rules, so parts of it cannot be judged",
            ViolationKind::UnknownValue => "a read or a final state returns a value no transaction wrote to that key",
            ViolationKind::AbortedRead => "a read or a final state returns a value written by an aborted transaction",
            ViolationKind::IntermediateRead => {
                "a read or a final state returns a value its writer overwrote later in the same transaction"
            }
            ViolationKind::FutureRead => {
                "a transaction reads its own write before it makes it, or a write of a later transaction of its session"
            }
            ViolationKind::InternalRead => {
                "inside one transaction a read disagrees with its own earlier write or read of the key"
            }
            ViolationKind::FracturedRead => {
                "a transaction sees some of another transaction's writes but not all of them (atomic visibility)"
            }
            ViolationKind::CausalViolation => {
                "a read misses a newer write in its causal past (session order and reads-from, transitively)"
            }
            ViolationKind::CausalCycle => "session order and reads-from form a cycle: an effect precedes its cause",
            ViolationKind::DuplicateCommitTs => {
                "two update transactions share a commit_ts, so last-writer-wins cannot order them"
            }
            ViolationKind::ArbitrationContradiction => {
                "commit_ts arrays mix numbers and strings at one position, so their order means nothing"
            }
            ViolationKind::SessionArbitration => {
                "a later update transaction of a session has a smaller commit_ts than an earlier one"
            }
            ViolationKind::CausalArbitration => "a causally later write has a smaller commit_ts",
            ViolationKind::Divergence => "data centers end with different values for a key, or one lost a key",
            ViolationKind::FinalNotLww => {
                "a data center's final value of a key is not the committed write with the greatest commit_ts"
            }
            ViolationKind::WriteCycle => {
                "G0: transactions overwrite each other's writes in a cycle (ww edges): no serial order has them"
            }
            ViolationKind::InformationCycle => {
                "G1c: transactions read from or overwrite each other in a cycle (wr and ww edges)"
            }
            ViolationKind::AntiDependencyCycle => {
                "G2: a cycle through an overwrite of what another transaction read (rw edge): lost update, write skew"
            }
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
