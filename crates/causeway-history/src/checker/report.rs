//! The checker's verdict: what was wrong, where, against which model, and a
//! summary a person can act on without opening the history.

use super::guarantee::{Forbids, Guarantee};
use super::kind::ViolationKind;
use std::fmt;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Sorted by kind (in [`ViolationKind::ALL`] order), then by the position
    /// of the transaction in the history.
    pub violations: Vec<Violation>,
    pub stats: CheckStats,
    /// The model the history was judged against: `Causal` for
    /// [`check`](crate::check), the guarantee given to
    /// [`check_for`](crate::check_for). Only a `Serializable` report has
    /// looked for the cycles of the direct serialization graph.
    pub model: Guarantee,
}

impl Default for Report {
    /// An empty report of the TCC passes, as [`check`](crate::check) of an
    /// empty history gives.
    fn default() -> Self {
        Report { violations: Vec::new(), stats: CheckStats::default(), model: Guarantee::Causal }
    }
}

/// How many violations of one kind `Display` prints; the counts are always
/// complete.
const SHOWN_PER_KIND: usize = 20;

impl Report {
    /// True when the history is transactionally causally consistent: no
    /// violation TCC forbids. The serializability cycles a `Serializable`
    /// report may hold do not count (TCC allows lost updates and write skew).
    pub fn is_tcc(&self) -> bool {
        self.upholds(Guarantee::Causal)
    }

    /// True when the history was judged for serializability
    /// ([`check_for`](crate::check_for) with `Serializable`) and nothing was
    /// found. A report of the TCC passes alone never says so: it has not
    /// looked for the cycles.
    pub fn is_serializable(&self) -> bool {
        self.model == Guarantee::Serializable && self.upholds(Guarantee::Serializable)
    }

    /// Whether the history keeps the model it was judged against.
    pub fn keeps_model(&self) -> bool {
        self.upholds(self.model)
    }

    /// The violations that break `guarantee`.
    ///
    /// # Panics
    ///
    /// When asked about serializability of a report that did not judge it:
    /// the answer would be "no cycle found" without having looked, so a
    /// caller that forgot [`check_for`](crate::check_for) would pass every
    /// write skew.
    pub fn breaches(&self, guarantee: Guarantee) -> impl Iterator<Item = &Violation> {
        assert!(
            guarantee != Guarantee::Serializable || self.model == Guarantee::Serializable,
            "a report of {} cannot say whether a history is serializable: judge it with \
             check_for(history, Guarantee::Serializable)",
            self.model
        );
        self.violations.iter().filter(move |v| guarantee.forbids(v.kind))
    }

    /// Whether the history keeps `guarantee` (panics as
    /// [`breaches`](Report::breaches) does).
    pub fn upholds(&self, guarantee: Guarantee) -> bool {
        self.breaches(guarantee).next().is_none()
    }

    /// The name of what a report without violations shows the history to
    /// be: "serializable" after the serializability pass, "TCC" otherwise —
    /// eventual consistency is judged by the TCC passes, so a history
    /// with no violation at all is TCC.
    pub fn judged_as(&self) -> &'static str {
        match self.model {
            Guarantee::Serializable => "serializable",
            Guarantee::Causal | Guarantee::Eventual => "TCC",
        }
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
        if self.violations.is_empty() {
            return write!(f, "{}: no violations in {size}", self.judged_as());
        }
        let violations = plural(self.violations.len(), "violation");
        match self.model {
            Guarantee::Causal => writeln!(f, "NOT TCC: {violations} in {size}")?,
            Guarantee::Serializable => writeln!(f, "NOT SERIALIZABLE: {violations} in {size}")?,
            // Eventual consistency allows most of what the TCC passes find,
            // so say which of the two the violations break.
            Guarantee::Eventual if self.keeps_model() => writeln!(
                f,
                "eventually consistent, NOT TCC: {violations} in {size}, none that eventual consistency forbids"
            )?,
            Guarantee::Eventual => writeln!(f, "NOT EVENTUALLY CONSISTENT: {violations} in {size}")?,
        }
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
