//! Vector timestamps, one entry per DC: Cure's snapshots, the commit vectors
//! its versions carry, its version vectors and its global stable vector.

use crate::hlc::Timestamp;
use crate::ids::DcId;
use crate::mvstore::Version;
use serde::{Deserialize, Serialize};

/// One timestamp per DC, indexed by DC id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VectorTs(pub Vec<Timestamp>);

impl VectorTs {
    /// All entries zero: the snapshot of a client that has seen nothing.
    pub fn zero(dcs: u16) -> Self {
        VectorTs(vec![Timestamp::ZERO; dcs as usize])
    }

    pub fn get(&self, dc: DcId) -> Timestamp {
        self.0[dc.0 as usize]
    }

    pub fn set(&mut self, dc: DcId, t: Timestamp) {
        self.0[dc.0 as usize] = t;
    }

    /// Raises entry `dc` to at least `t`.
    pub fn raise(&mut self, dc: DcId, t: Timestamp) {
        let e = &mut self.0[dc.0 as usize];
        *e = (*e).max(t);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Component-wise `≤`: everything `self` covers, `other` covers too.
    pub fn leq(&self, other: &VectorTs) -> bool {
        debug_assert_eq!(self.len(), other.len(), "vectors of different clusters");
        self.0.iter().zip(&other.0).all(|(a, b)| a <= b)
    }

    /// Component-wise maximum, in place.
    pub fn join(&mut self, other: &VectorTs) {
        debug_assert_eq!(self.len(), other.len(), "vectors of different clusters");
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Component-wise minimum, in place.
    pub fn meet(&mut self, other: &VectorTs) {
        debug_assert_eq!(self.len(), other.len(), "vectors of different clusters");
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).min(*b);
        }
    }

    /// The smallest entry.
    pub fn min_entry(&self) -> Timestamp {
        self.0.iter().copied().min().unwrap_or(Timestamp::ZERO)
    }

    /// The largest entry: a commit must be ordered after all of them.
    pub fn max_entry(&self) -> Timestamp {
        self.0.iter().copied().max().unwrap_or(Timestamp::ZERO)
    }
}

impl crate::twopc::Snapshot for VectorTs {
    fn ceiling(&self) -> Timestamp {
        self.max_entry()
    }

    fn floor(&self) -> Timestamp {
        self.min_entry()
    }

    fn meet(&self, other: &VectorTs) -> VectorTs {
        let mut m = self.clone();
        VectorTs::meet(&mut m, other);
        m
    }
}

/// Cure's visibility rule: a version belongs to a snapshot when its commit
/// vector — its commit time in its origin DC's entry, the snapshot it was
/// written from in the others — is covered by the snapshot. Covering the
/// other entries is what makes the version's causal past visible with it.
pub fn visible(version: &Version<VectorTs>, snapshot: &VectorTs) -> bool {
    debug_assert_eq!(version.meta.get(version.stamp.dc), version.stamp.ts, "commit vector and stamp agree");
    version.meta.leq(snapshot)
}

/// The commit vector of a transaction that read from `snapshot` and
/// committed at `ct` in DC `origin`.
pub fn commit_vector(snapshot: &VectorTs, origin: DcId, ct: Timestamp) -> VectorTs {
    let mut cv = snapshot.clone();
    debug_assert!(ct > cv.get(origin), "a commit time exceeds the snapshot it was written from");
    cv.set(origin, ct);
    cv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{CommitStamp, Value};
    use crate::ids::TxId;

    fn v(entries: &[u64]) -> VectorTs {
        VectorTs(entries.iter().map(|&t| Timestamp(t)).collect())
    }

    fn version(origin: u16, cv: &[u64]) -> Version<VectorTs> {
        let meta = v(cv);
        Version {
            value: Some(Value::new()),
            stamp: CommitStamp { ts: meta.get(DcId(origin)), dc: DcId(origin), txid: TxId(1) },
            meta,
        }
    }

    #[test]
    fn leq_join_and_meet_are_component_wise() {
        assert!(v(&[1, 2, 3]).leq(&v(&[1, 2, 3])));
        assert!(v(&[1, 2, 3]).leq(&v(&[2, 2, 4])));
        assert!(!v(&[1, 5, 3]).leq(&v(&[2, 2, 4])), "one entry beyond is enough to fail");
        let mut a = v(&[1, 5, 3]);
        a.join(&v(&[2, 2, 4]));
        assert_eq!(a, v(&[2, 5, 4]));
        a.meet(&v(&[9, 1, 9]));
        assert_eq!(a, v(&[2, 1, 4]));
        assert_eq!(a.max_entry(), Timestamp(4));
        a.raise(DcId(1), Timestamp(0));
        assert_eq!(a, v(&[2, 1, 4]), "raise never lowers");
        a.raise(DcId(1), Timestamp(7));
        assert_eq!(a.get(DcId(1)), Timestamp(7));
    }

    #[test]
    fn a_version_is_visible_when_its_commit_vector_is_covered() {
        // Written in DC 1 at 20, from a snapshot that had seen DC 0 up to 8.
        let x = version(1, &[8, 20, 0]);
        assert!(visible(&x, &v(&[8, 20, 0])));
        assert!(visible(&x, &v(&[30, 25, 3])));
        assert!(!visible(&x, &v(&[30, 19, 3])), "its own commit time is not covered");
        assert!(!visible(&x, &v(&[7, 25, 3])), "its dependency on DC 0 is not covered");
    }

    #[test]
    fn the_commit_vector_is_the_snapshot_with_the_commit_time_in_the_origin_entry() {
        let snapshot = v(&[10, 4, 6]);
        assert_eq!(commit_vector(&snapshot, DcId(0), Timestamp(11)), v(&[11, 4, 6]));
        assert_eq!(commit_vector(&snapshot, DcId(2), Timestamp(12)), v(&[10, 4, 12]));
    }
}
