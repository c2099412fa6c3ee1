//! The order in which a partition applies and replicates its commits, shared
//! by the protocols that run two-phase commit on a hybrid clock (Wren, Cure):
//! a commit at `ct` may go out once nothing prepared here can still commit
//! at or below it, and all commits of one `ct` go out together.

use crate::hlc::{Hlc, PhysicalMicros, Timestamp};
use crate::ids::TxId;
use std::collections::{BTreeMap, BTreeSet};

/// The bound below which no transaction can still commit here (`ub` in
/// Wren's Alg. 4): just below the smallest pending proposal, or, with none,
/// the clock — and the HLC moves up to it, so that a proposal made in the
/// same microsecond still exceeds it.
pub fn stable_bound(prepared: &BTreeSet<(Timestamp, TxId)>, hlc: &mut Hlc, now: PhysicalMicros) -> Timestamp {
    match prepared.first() {
        Some(&(min_pt, _)) => min_pt.prev(),
        None => hlc.observe(now, Timestamp::ZERO),
    }
}

/// Takes the oldest group of commits with one commit time, if it is at or
/// below `ub`.
pub fn take_group<T>(committed: &mut BTreeMap<(Timestamp, TxId), T>, ub: Timestamp) -> Option<(Timestamp, Vec<T>)> {
    let ct = committed.first_key_value()?.0 .0;
    if ct > ub {
        return None;
    }
    let mut group = Vec::new();
    while let Some(entry) = committed.first_entry() {
        if entry.key().0 != ct {
            break;
        }
        group.push(entry.remove());
    }
    Some((ct, group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_come_in_commit_order_and_only_below_the_bound() {
        let mut committed = BTreeMap::new();
        for (ct, tx, name) in [(5, 2, "b"), (5, 1, "a"), (3, 9, "first"), (8, 1, "late")] {
            committed.insert((Timestamp(ct), TxId(tx)), name);
        }
        assert_eq!(take_group(&mut committed, Timestamp(7)), Some((Timestamp(3), vec!["first"])));
        assert_eq!(take_group(&mut committed, Timestamp(7)), Some((Timestamp(5), vec!["a", "b"])));
        assert_eq!(take_group(&mut committed, Timestamp(7)), None, "8 is above the bound");
        assert_eq!(committed.len(), 1);
    }

    #[test]
    fn the_bound_is_below_the_smallest_proposal_or_the_clock() {
        let mut hlc = Hlc::new();
        let mut prepared = BTreeSet::new();
        let clock = stable_bound(&prepared, &mut hlc, 1_000);
        assert_eq!(clock, Timestamp::from_physical(1_000));
        assert!(hlc.current() >= clock, "the HLC moved up to the bound");
        prepared.insert((Timestamp::from_physical(500), TxId(1)));
        assert_eq!(stable_bound(&prepared, &mut hlc, 2_000), Timestamp::from_physical(500).prev());
    }
}
