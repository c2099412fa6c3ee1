//! The checker's verdict: what was wrong, where, and a summary a person can
//! act on without opening the history.

use std::fmt;

/// The ways a history can fail to be transactionally causally consistent.
///
/// The order of the variants is the order of the report: problems with the
/// file itself first, then single reads, then the causal order, then
/// arbitration, then the final states.
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
}

impl ViolationKind {
    /// Every kind, in report order.
    pub const ALL: [ViolationKind; 15] = [
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
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing wrong with the history. `txid` and `key` point into the history
/// when the problem has a place there; `message` explains it in one line
/// with the values involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kind: ViolationKind,
    pub txid: Option<String>,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.kind)?;
        if let Some(txid) = &self.txid {
            write!(f, " txn {txid}")?;
        }
        if let Some(key) = &self.key {
            write!(f, " key {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The size of what was judged, so a clean verdict on an empty or tiny
/// history is not mistaken for a meaningful one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckStats {
    pub txns: usize,
    pub committed: usize,
    pub aborted: usize,
    /// Transactions of status `unknown`: possibly committed.
    pub unknown: usize,
    pub reads: usize,
    pub writes: usize,
    pub deletes: usize,
    pub sessions: usize,
}

/// The verdict on one history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Sorted by kind (in [`ViolationKind::ALL`] order), then by the position
    /// of the transaction in the history.
    pub violations: Vec<Violation>,
    pub stats: CheckStats,
}

/// How many violations of one kind `Display` prints; the counts are always
/// complete.
const SHOWN_PER_KIND: usize = 20;

impl Report {
    /// True when the history is transactionally causally consistent.
    pub fn is_tcc(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn count(&self, kind: ViolationKind) -> usize {
        self.violations.iter().filter(|v| v.kind == kind).count()
    }

    /// The kinds found, each once, in report order.
    pub fn kinds(&self) -> Vec<ViolationKind> {
        let mut kinds: Vec<ViolationKind> = self.violations.iter().map(|v| v.kind).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        let deletes = if s.deletes > 0 { format!(", {}", plural(s.deletes, "delete")) } else { String::new() };
        let unknown = if s.unknown > 0 { format!(", {} unknown", s.unknown) } else { String::new() };
        let size = format!(
            "{} ({} committed, {} aborted{unknown}), {}, {}{deletes}, {}",
            plural(s.txns, "transaction"),
            s.committed,
            s.aborted,
            plural(s.reads, "read"),
            plural(s.writes, "write"),
            plural(s.sessions, "session"),
        );
        if self.is_tcc() {
            return write!(f, "TCC: no violations in {size}");
        }
        writeln!(f, "NOT TCC: {} in {size}", plural(self.violations.len(), "violation"))?;
        let kinds = self.kinds();
        for &kind in &kinds {
            writeln!(f, "  {:<26} {}", kind.as_str(), self.count(kind))?;
        }
        for &kind in &kinds {
            let total = self.count(kind);
            writeln!(f)?;
            writeln!(f, "{kind} ({total}): {}", kind.describe())?;
            for v in self.violations.iter().filter(|v| v.kind == kind).take(SHOWN_PER_KIND) {
                write!(f, "  -")?;
                if let Some(txid) = &v.txid {
                    write!(f, " txn {txid}")?;
                }
                if let Some(key) = &v.key {
                    write!(f, " key {key}")?;
                }
                writeln!(f, ": {}", v.message)?;
            }
            if total > SHOWN_PER_KIND {
                writeln!(f, "  ... and {} more", total - SHOWN_PER_KIND)?;
            }
        }
        Ok(())
    }
}
