//! The states the DCs end in, once the workload stopped and replication
//! settled. Convergence is the other half of the contract: every DC must
//! hold, for every key, the committed write with the greatest commit_ts.
//!
//! A DC marked `partial` holds only some partitions, so a key it does not
//! list is not missing; a key it does list must still be right.
//!
//! A write of an unknown transaction may have taken effect or not. A DC may
//! end with it (it committed, then), unless a committed write of the key is
//! provably newer (it follows the unknown transaction causally, or is newer
//! than something that does); it is never required in a final state; and
//! an unknown delete that may be newer than a key's committed winner
//! explains a key no DC holds.

use super::causal::Unknowns;
use super::index::Index;
use super::{Found, ViolationKind};
use crate::format::FinalState;
use std::collections::BTreeSet;

pub(crate) fn check(ix: &Index, unknowns: &Unknowns, found: &mut Found) {
    let finals = &ix.history.finals;
    if finals.is_empty() {
        return;
    }
    let mut states: Vec<&FinalState> = Vec::new();
    for f in finals {
        if !states.iter().any(|s| s.dc == f.dc) {
            states.push(f);
        } else {
            found.global(ViolationKind::Malformed, None, None, format!("a second final line for DC {}, ignored", f.dc));
        }
    }

    for f in &states {
        for (key, value) in &f.state {
            judge_final_value(ix, unknowns, f.dc, key, value, found);
        }
    }

    let listed: BTreeSet<&str> = states.iter().flat_map(|f| f.state.keys().map(String::as_str)).collect();
    for &key in &listed {
        let values: Vec<(u16, Option<&String>)> = states.iter().map(|f| (f.dc, f.state.get(key))).collect();
        let mut distinct: Vec<&String> = values.iter().filter_map(|(_, v)| *v).collect();
        distinct.sort();
        distinct.dedup();
        let missing: Vec<u16> =
            states.iter().filter(|f| !f.partial && !f.state.contains_key(key)).map(|f| f.dc).collect();
        if distinct.len() <= 1 && missing.is_empty() {
            continue;
        }
        let ends: Vec<String> = values
            .iter()
            .map(|(dc, v)| match v {
                Some(v) => format!("DC {dc} = {v:?}"),
                None => format!("DC {dc} has none"),
            })
            .collect();
        let what = if distinct.len() > 1 { "DCs disagree" } else { "a DC lost the key" };
        found.global(ViolationKind::Divergence, None, Some(key), format!("{what}: {}", ends.join(", ")));
    }

    // Keys committed writes reached that no DC lists at all.
    let full: Vec<u16> = states.iter().filter(|f| !f.partial).map(|f| f.dc).collect();
    if full.is_empty() {
        return;
    }
    for (k, &(rank, winner)) in ix.writers.key_max.iter().enumerate() {
        let key = ix.key_names[k];
        // A key whose winner deleted it is rightly missing everywhere; so is
        // one an unknown transaction deleted, if that may be newer.
        let unknown_delete = ix.unknown_writers_of(k as u32).iter().any(|&(u, d)| d && unknowns.ceiling(u) > rank);
        if rank == 0 || listed.contains(key) || ix.winner_deletes(k as u32) || unknown_delete {
            continue;
        }
        let dcs: Vec<String> = full.iter().map(|dc| dc.to_string()).collect();
        let message = format!(
            "lost write: {} wrote {} but the key is missing from the final state of DC {}",
            ix.describe_writer(winner),
            ix.final_value(winner, k as u32),
            dcs.join(", ")
        );
        found.global(ViolationKind::Divergence, Some(ix.txid(winner)), Some(key), message);
    }
}

/// A DC's final value of a key must be the last-writer-wins winner among
/// the committed writes of that key.
fn judge_final_value(ix: &Index, unknowns: &Unknowns, dc: u16, key: &str, value: &str, found: &mut Found) {
    let key_id = ix.key_id(key);
    let w = match ix.values.get(value) {
        Some(w) if Some(w.key) == key_id => *w,
        _ => {
            let message = format!("DC {dc} ends with {value:?}, which no transaction wrote to this key");
            found.global(ViolationKind::UnknownValue, None, Some(key), message);
            return;
        }
    };
    if !ix.committed[w.txn as usize] && !ix.unknown[w.txn as usize] {
        let message = format!("DC {dc} ends with {value:?}, written by {}, which aborted", ix.txid(w.txn));
        found.global(ViolationKind::AbortedRead, Some(ix.txid(w.txn)), Some(key), message);
        return;
    }
    if !w.is_final {
        let message = format!(
            "DC {dc} ends with {value:?}, which {} overwrote with {} before committing",
            ix.txid(w.txn),
            ix.final_value(w.txn, w.key)
        );
        found.global(ViolationKind::IntermediateRead, Some(ix.txid(w.txn)), Some(key), message);
        return;
    }
    let (rank, winner) = ix.writers.key_max[w.key as usize];
    if ix.unknown[w.txn as usize] {
        // It committed, then; its commit_ts is below its ceiling, so the
        // winner is newer only if it is at least there.
        let ceiling = unknowns.ceiling(w.txn);
        if rank == 0 || rank < ceiling {
            return;
        }
        let (_, later) = unknowns.ceiling[w.txn as usize];
        let message = format!(
            "DC {dc} ends with {value:?} from {}, but {} wrote {} with the greatest commit_ts, newer: {} precedes {} causally",
            ix.describe_writer(w.txn),
            ix.describe_writer(winner),
            ix.final_value(winner, w.key),
            ix.txid(w.txn),
            ix.describe_writer(later),
        );
        // The winner is newer only by the causal order (the unknown
        // transaction's commit_ts is bounded by its causal future's): a
        // store whose commit_ts need not follow causality (eventual
        // consistency) breaks nothing here, so this is a breach of causal
        // arbitration, not of convergence.
        found.global(ViolationKind::CausalArbitration, Some(ix.txid(w.txn)), Some(key), message);
        return;
    }
    // A writer without a rank has no commit_ts (reported as malformed).
    if ix.rank[w.txn as usize] == 0 || rank == 0 || winner == w.txn {
        return;
    }
    let message = format!(
        "DC {dc} ends with {value:?} from {}, but {} wrote {} with the greatest commit_ts",
        ix.describe_writer(w.txn),
        ix.describe_writer(winner),
        ix.final_value(winner, w.key)
    );
    found.global(ViolationKind::FinalNotLww, Some(ix.txid(w.txn)), Some(key), message);
}
