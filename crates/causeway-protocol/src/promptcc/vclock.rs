//! PrompTCC's vectors: one entry per partition of the DC.
//!
//! An entry is a partition's sequence number `s_p` — here a reading of the
//! partition's hybrid clock, so entries of different partitions are
//! comparable (see the module docs of [`super`]). The same type is the
//! client's dependency vector `D_c`, a partition's snapshot vector `S_i`, a
//! version's commit timestamp and a transaction's read snapshot.

use crate::contract::CommitStamp;
use crate::hlc::Timestamp;
use crate::ids::{DcId, PartitionId, TxId};
use serde::{Deserialize, Serialize};

/// A vector of one timestamp per partition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VClock(Vec<Timestamp>);

/// A decided transaction's sequence numbers at the partitions it wrote
/// (`final-ts` of the listing), sorted by partition.
pub type Decided = Vec<(PartitionId, Timestamp)>;

impl VClock {
    /// All zeros: nothing seen.
    pub fn zeros(partitions: u32) -> Self {
        VClock(vec![Timestamp::ZERO; partitions as usize])
    }

    /// How many entries (the DC's partition count, if well formed).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, p: PartitionId) -> Timestamp {
        self.0.get(p.0 as usize).copied().unwrap_or(Timestamp::ZERO)
    }

    /// Raises entry `p` to at least `t`.
    pub fn raise_entry(&mut self, p: PartitionId, t: Timestamp) {
        if let Some(e) = self.0.get_mut(p.0 as usize) {
            *e = (*e).max(t);
        }
    }

    /// Entry-wise maximum with `other` (of the same length).
    pub fn join(&mut self, other: &VClock) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Entry-wise minimum with `other` (of the same length).
    pub fn meet(&mut self, other: &VClock) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).min(*b);
        }
    }

    /// Whether every entry is at least `other`'s.
    pub fn dominates(&self, other: &VClock) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| a >= b)
    }

    /// The largest entry: a new sequence number above it is above every
    /// entry (what makes a commit's largest entry a causal order).
    pub fn max_entry(&self) -> Timestamp {
        self.0.iter().copied().max().unwrap_or(Timestamp::ZERO)
    }

    /// The smallest entry.
    pub fn min_entry(&self) -> Timestamp {
        self.0.iter().copied().min().unwrap_or(Timestamp::ZERO)
    }

    pub fn entries(&self) -> &[Timestamp] {
        &self.0
    }

    /// A transaction's commit timestamp (Alg. 2 line 24): its writer's
    /// dependencies, raised at the partitions it wrote to their decided
    /// sequence numbers.
    pub fn commit_ts(deps: &VClock, decided: &[(PartitionId, Timestamp)]) -> VClock {
        let mut ts = deps.clone();
        for &(p, t) in decided {
            ts.raise_entry(p, t);
        }
        ts
    }
}

/// The last-writer-wins stamp of a decided transaction: its largest
/// sequence number, and the first partition that gave it as the tie-breaker
/// (two transactions never get the same number from one partition, so the
/// pair is unique). It grows along causality: a transaction's numbers are
/// above every entry of its writer's dependencies.
pub fn stamp_of(dc: DcId, decided: &[(PartitionId, Timestamp)]) -> CommitStamp {
    let top = decided.iter().map(|&(_, t)| t).max().unwrap_or(Timestamp::ZERO);
    let by = decided.iter().find(|&&(_, t)| t == top).map_or(PartitionId(0), |&(p, _)| p);
    CommitStamp { ts: top, dc, txid: TxId::new(by, top.0 & ((1 << 40) - 1)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(entries: &[u64]) -> VClock {
        VClock(entries.iter().map(|&e| Timestamp(e)).collect())
    }

    #[test]
    fn join_dominates_and_commit_ts() {
        let mut a = v(&[1, 5, 3]);
        a.join(&v(&[2, 4, 3]));
        assert_eq!(a, v(&[2, 5, 3]));
        assert!(a.dominates(&v(&[2, 5, 3])) && !a.dominates(&v(&[3, 0, 0])));
        assert!(!a.dominates(&v(&[1, 1])), "vectors of another length are never below");
        let ts = VClock::commit_ts(&v(&[1, 1, 1]), &[(PartitionId(0), Timestamp(9)), (PartitionId(2), Timestamp(7))]);
        assert_eq!(ts, v(&[9, 1, 7]));
        assert_eq!((ts.max_entry(), ts.min_entry()), (Timestamp(9), Timestamp(1)));
    }

    #[test]
    fn stamps_are_the_largest_number_and_the_partition_that_gave_it() {
        let s = stamp_of(DcId(0), &[(PartitionId(1), Timestamp(9)), (PartitionId(3), Timestamp(9))]);
        assert_eq!(s.ts, Timestamp(9));
        assert_eq!(s.txid, TxId::new(PartitionId(1), 9));
        let t = stamp_of(DcId(0), &[(PartitionId(3), Timestamp(9))]);
        assert_ne!(s, t, "same number from two partitions: two transactions, two stamps");
    }
}
