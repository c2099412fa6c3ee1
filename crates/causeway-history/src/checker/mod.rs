//! The checker: does a history satisfy transactional causal consistency
//! with last-writer-wins arbitration — and, when asked, serializability?
//!
//! The model is Cerone, Bernardi and Gotsman's causal consistency with
//! atomic visibility (CONCUR 2015), with arbitration fixed to the order of
//! `commit_ts`. Causality is hb = (so ∪ wr)+ over committed transactions:
//! session order plus reads-from, transitively. A history is TCC when
//!
//! * every read returns the value of a committed transaction's final write
//!   of that key — or, inside a transaction, what that transaction itself
//!   last wrote, deleted or read of the key;
//! * hb is acyclic;
//! * every external read of `k` in `T` returns the write of `k` with the
//!   greatest `commit_ts` among the writers of `k` in hb's past of `T`
//!   (null if there is none) — this one rule gives both causal snapshots
//!   and atomic visibility;
//! * a delete is a write without a value: it takes part in arbitration like
//!   any write, and a read of null is the read of a delete. Nulls are not
//!   unique, so such a read names no writer: it is legal when the newest
//!   write of the key in its causal past is a delete, or when some
//!   committed delete of the key is newer than every write in that past (a
//!   snapshot may hold a concurrent delete); it adds no reads-from edge;
//! * `commit_ts` is a total order on committed updates that extends hb;
//! * when the DCs report final states, they all hold the last-writer-wins
//!   winner of every key.
//!
//! A transaction of status `unknown` may have committed. A read of one of
//! its writes proves it did: the read adds a reads-from edge like any
//! other, and from then on its writes are judged like committed ones —
//! except that it has no commit_ts, so it is ordered against the others
//! only where hb forces the order (its commit_ts would have to exceed every
//! commit_ts in its causal past, and precede every one in its causal
//! future). Where the order is not forced, nothing is reported. It never
//! precedes its session successors, and its writes are never required in
//! the final states. See `causal` and `docs/HISTORY.md`.
//!
//! Checking is near-linear: see `index` (interning and per-key writer
//! lists), `reads` (per-read checks, parallel), `causal` (vector clocks
//! over sessions in topological order) and `finals`. Each violation is
//! reported once, with the most specific kind that explains it.
//!
//! Serializability ([`check_for`] with `Serializable`) is judged by one more
//! pass, `dsg`: Adya's direct serialization graph over the same index and
//! the same resolved reads, whose cycles are the phenomena G0, G1c and G2.

mod causal;
mod dsg;
mod finals;
mod guarantee;
mod index;
mod kind;
mod reads;
mod report;

pub use guarantee::{Forbids, Guarantee};
pub use kind::ViolationKind;
pub use report::{CheckStats, Report, Violation};

use crate::format::{History, OpKind, Status, TxnRecord};

/// "No transaction", "no writer", "no slot": ids are `u32` indexes.
pub(crate) const NONE: u32 = u32::MAX;

/// Judges whether a history is TCC. Never fails: what cannot be judged (a
/// malformed part) is itself a violation, and the rest is still judged.
/// The same as [`check_for`] with `Guarantee::Causal`.
pub fn check(history: &History) -> Report {
    check_for(history, Guarantee::Causal)
}

/// Judges a history against `guarantee`: the TCC passes for every model
/// (eventual consistency is judged by them too, and allows some of what
/// they find: see [`Forbids`]), and for `Serializable` the cycles of the
/// direct serialization graph as well. The report's `model` is
/// `guarantee`, and [`Report::keeps_model`] says whether the history keeps
/// it.
pub fn check_for(history: &History, guarantee: Guarantee) -> Report {
    let serializable = guarantee == Guarantee::Serializable;
    let mut found = Found::default();
    let ix = index::Index::build(history, &mut found);
    let resolved = reads::resolve(&ix, serializable, &mut found);
    let unknowns = causal::check(&ix, &resolved, !serializable, &mut found);
    finals::check(&ix, &unknowns, &mut found);
    if serializable {
        dsg::check(&ix, &resolved, &mut found);
    }
    Report { violations: found.into_sorted(), stats: stats(history, ix.sessions), model: guarantee }
}

fn stats(history: &History, sessions: usize) -> CheckStats {
    let mut s = CheckStats { txns: history.txns.len(), sessions, ..CheckStats::default() };
    for t in &history.txns {
        match t.status {
            Status::Committed => s.committed += 1,
            Status::Aborted => s.aborted += 1,
            Status::Unknown => s.unknown += 1,
        }
        for op in &t.ops {
            match op.op {
                OpKind::Read => s.reads += 1,
                OpKind::Write => s.writes += 1,
                OpKind::Delete => s.deletes += 1,
            }
        }
    }
    s
}

/// Violations as the passes find them, each with its transaction's index
/// so the report can list them in history order whatever order the passes
/// visited transactions in.
#[derive(Default)]
pub(crate) struct Found {
    items: Vec<(ViolationKind, u32, Violation)>,
}

impl Found {
    /// A violation located at transaction `t`.
    pub fn txn(&mut self, kind: ViolationKind, t: u32, rec: &TxnRecord, key: Option<&str>, message: String) {
        let v = Violation { kind, txid: Some(rec.txid.clone()), key: key.map(str::to_owned), message };
        self.items.push((kind, t, v));
    }

    /// A violation of the history as a whole (final states, duplicates);
    /// listed after those of transactions.
    pub fn global(&mut self, kind: ViolationKind, txid: Option<&str>, key: Option<&str>, message: String) {
        let v = Violation { kind, txid: txid.map(str::to_owned), key: key.map(str::to_owned), message };
        self.items.push((kind, NONE, v));
    }

    pub fn extend(&mut self, other: Found) {
        self.items.extend(other.items);
    }

    fn into_sorted(mut self) -> Vec<Violation> {
        // Stable: ties keep the order they were found in.
        self.items.sort_by_key(|(kind, t, _)| (*kind, *t));
        self.items.into_iter().map(|(_, _, v)| v).collect()
    }
}
