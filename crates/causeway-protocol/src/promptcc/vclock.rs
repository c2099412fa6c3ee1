//! PrompTCC's vectors: one entry per partition of the DC.
//!
//! An entry is a partition's sequence number `s_p` — here a reading of the
//! partition's hybrid clock, so entries of different partitions are
//! comparable (see the module docs of [`super`]). The same type is the
//! client's dependency vector `D_c`, a partition's snapshot vector `S_i`, a
//! version's commit timestamp and a transaction's read snapshot.

use crate::hlc::Timestamp;
use crate::ids::PartitionId;
use serde::{Deserialize, Serialize};

/// A vector of one timestamp per partition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VClock(Vec<Timestamp>);

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

    /// Sets every entry to `t`.
    pub fn reset(&mut self, t: Timestamp) {
        self.0.fill(t);
    }

    /// Raises every entry to at least `t`.
    pub fn raise_all(&mut self, t: Timestamp) {
        for e in &mut self.0 {
            *e = (*e).max(t);
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
    /// sequence numbers — made of the dependencies themselves (no copy).
    pub fn commit_ts(mut deps: VClock, decided: &[(PartitionId, Timestamp)]) -> VClock {
        deps.raise_entries(decided);
        deps
    }

    /// Raises each listed entry to at least its timestamp.
    pub fn raise_entries(&mut self, entries: &[(PartitionId, Timestamp)]) {
        for &(p, t) in entries {
            self.raise_entry(p, t);
        }
    }
}

/// A vector as a message carries it. PrompTCC-naive sends every entry
/// (§IV); PrompTCC sends a floor and the entries above it (§V), each as its
/// distance from the floor after the gap in partition numbers from the one
/// before — numbers the message format writes in a few bytes. A receiver
/// that knows a floor of its own (a partition answering a client whose
/// `D_c` starts at it) may leave out the entries at or below that floor:
/// read back as the floor, they change nothing the reader joins them with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wire {
    Full(Vec<Timestamp>),
    Sparse { floor: Timestamp, above: Vec<(u32, u64)> },
}

impl VClock {
    /// This vector as a message carries it, in full or above its smallest
    /// entry.
    pub fn to_wire(&self, full: bool) -> Wire {
        if full {
            return Wire::Full(self.0.clone());
        }
        self.above(self.min_entry())
    }

    /// Only the entries above `floor` (the reader reads the rest as `floor`).
    pub fn above(&self, floor: Timestamp) -> Wire {
        // Counted first: one allocation of the right size, or none.
        let mut above = Vec::with_capacity(self.0.iter().filter(|&&t| t > floor).count());
        let mut last = 0u32;
        for (i, &t) in self.0.iter().enumerate() {
            if t > floor {
                let i = i as u32;
                above.push((i - last, t.0 - floor.0));
                last = i;
            }
        }
        Wire::Sparse { floor, above }
    }
}

impl Wire {
    /// The vector of `partitions` entries this says, if it is well formed
    /// (entries of partitions that exist, in order, each above the floor).
    pub fn decode(self, partitions: u32) -> Option<VClock> {
        match self {
            Wire::Full(entries) => (entries.len() == partitions as usize).then_some(VClock(entries)),
            sparse => sparse.decode_sparse(partitions).map(|v| v.to_vclock(partitions)),
        }
    }

    /// [`Self::decode`], kept as a floor and the entries above it: the
    /// list a [`Wire::Sparse`] carries becomes the decoded one in place, so
    /// reading such a vector costs no allocation (a [`Wire::Full`], which
    /// only PrompTCC-naive sends, is listed anew).
    pub fn decode_sparse(self, partitions: u32) -> Option<Sparse> {
        match self {
            Wire::Full(entries) => {
                if entries.len() != partitions as usize {
                    return None;
                }
                let floor = entries.iter().copied().min().unwrap_or(Timestamp::ZERO);
                let above = (0..partitions).zip(entries).filter(|&(_, t)| t > floor).map(|(i, t)| (i, t.0)).collect();
                Some(Sparse { floor, above })
            }
            Wire::Sparse { floor, mut above } => {
                let mut at: Option<u32> = None;
                for (gap, offset) in &mut above {
                    let i = match at {
                        None => *gap,
                        Some(prev) if *gap > 0 => prev.checked_add(*gap)?,
                        Some(_) => return None,
                    };
                    if i >= partitions || *offset == 0 {
                        return None;
                    }
                    (*gap, *offset) = (i, floor.0.checked_add(*offset)?);
                    at = Some(i);
                }
                Some(Sparse { floor, above })
            }
        }
    }
}

/// A vector decoded from a message: a floor, and the entries above it as
/// (partition, timestamp) in partition order; every other entry is the
/// floor. Replies mostly carry none above the reader's floor, and a
/// request's few are read where they lie, so neither side builds the whole
/// vector to read one. It does not keep its length (as small as the
/// [`Wire`] it comes from, a reply's list of values becomes the decoded
/// one in place): it is read against vectors of the DC it was decoded
/// for, whose length it takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sparse {
    floor: Timestamp,
    above: Vec<(u32, u64)>,
}

impl Sparse {
    /// Entry by entry, `len` of them.
    pub fn entries(&self, len: usize) -> impl Iterator<Item = Timestamp> + '_ {
        let mut listed = self.above.iter().peekable();
        (0..len as u32).map(move |i| match listed.next_if(|&&(p, _)| p == i) {
            Some(&(_, t)) => Timestamp(t),
            None => self.floor,
        })
    }

    /// The smallest of its `len` entries.
    pub fn min_entry(&self, len: usize) -> Timestamp {
        match self.above.len() == len {
            true => self.above.iter().map(|&(_, t)| Timestamp(t)).min().unwrap_or(self.floor),
            false => self.floor,
        }
    }

    /// The largest entry (those listed are above the floor).
    pub fn max_entry(&self) -> Timestamp {
        self.above.iter().map(|&(_, t)| Timestamp(t)).max().unwrap_or(self.floor)
    }

    /// Whether `v` is at least this everywhere.
    pub fn is_below(&self, v: &VClock) -> bool {
        v.0.iter().zip(self.entries(v.len())).all(|(a, b)| *a >= b)
    }

    /// Whether this is at least `v` everywhere.
    pub fn dominates(&self, v: &VClock) -> bool {
        v.0.iter().zip(self.entries(v.len())).all(|(a, b)| *a <= b)
    }

    /// Joins this into `v`.
    pub fn join_into(&self, v: &mut VClock) {
        let len = v.len();
        for (a, b) in v.0.iter_mut().zip(self.entries(len)) {
            *a = (*a).max(b);
        }
    }

    /// The whole vector, `len` entries.
    pub fn to_vclock(&self, len: u32) -> VClock {
        VClock(self.entries(len as usize).collect())
    }
}

/// A writer's `D_c`: a partition numbers its transaction above every entry.
impl crate::write_only::Deps for VClock {
    fn ceiling(&self) -> Timestamp {
        self.max_entry()
    }
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
        let ts = VClock::commit_ts(v(&[1, 1, 1]), &[(PartitionId(0), Timestamp(9)), (PartitionId(2), Timestamp(7))]);
        assert_eq!(ts, v(&[9, 1, 7]));
        assert_eq!((ts.max_entry(), ts.min_entry()), (Timestamp(9), Timestamp(1)));
    }

    #[test]
    fn a_sparse_vector_reads_as_the_whole_one() {
        // Every vector of 3 entries in 0..4, against every other, sent in
        // full, above its smallest entry and above each floor a reader
        // might know (which it reads as that vector raised to the floor).
        let all: Vec<VClock> = (0..64u64).map(|n| v(&[n % 4, n / 4 % 4, n / 16])).collect();
        for x in &all {
            let raised = |f: u64| VClock(x.0.iter().map(|t| (*t).max(Timestamp(f))).collect());
            let wires = [
                (x.to_wire(true), x.clone()),
                (x.to_wire(false), x.clone()),
                (x.above(Timestamp(1)), raised(1)),
                (x.above(Timestamp(2)), raised(2)),
            ];
            for (wire, whole) in wires {
                assert_eq!(wire.clone().decode(3).as_ref(), Some(&whole));
                let sparse = wire.decode_sparse(3).expect("well formed");
                assert_eq!(sparse.to_vclock(3), whole);
                assert_eq!((sparse.min_entry(3), sparse.max_entry()), (whole.min_entry(), whole.max_entry()));
                for y in &all {
                    assert_eq!(sparse.is_below(y), y.dominates(&whole), "{sparse:?} below {y:?}");
                    assert_eq!(sparse.dominates(y), whole.dominates(y), "{sparse:?} over {y:?}");
                    let (mut joined, mut expected) = (y.clone(), y.clone());
                    sparse.join_into(&mut joined);
                    expected.join(&whole);
                    assert_eq!(joined, expected);
                }
            }
        }
    }

    #[test]
    fn wire_forms_decode_to_the_vector_and_refuse_what_is_malformed() {
        let x = v(&[5, 9, 5, 7, 5]);
        for full in [true, false] {
            assert_eq!(x.to_wire(full).decode(5), Some(x.clone()));
        }
        assert_eq!(x.to_wire(false), Wire::Sparse { floor: Timestamp(5), above: vec![(1, 4), (2, 2)] });
        // Above a floor the reader knows: what is below reads as the floor.
        assert_eq!(x.above(Timestamp(6)).decode(5), Some(v(&[6, 9, 6, 7, 6])));
        assert_eq!(x.to_wire(true).decode(4), None, "another length");
        assert_eq!(x.to_wire(true).decode_sparse(4), None, "another length");
        let bad = [
            Wire::Sparse { floor: Timestamp(1), above: vec![(5, 1)] },
            Wire::Sparse { floor: Timestamp(1), above: vec![(1, 1), (0, 1)] },
            Wire::Sparse { floor: Timestamp(1), above: vec![(1, 0)] },
            Wire::Sparse { floor: Timestamp(u64::MAX), above: vec![(1, 1)] },
            Wire::Sparse { floor: Timestamp(1), above: vec![(1, 1), (u32::MAX, 1)] },
        ];
        for w in bad {
            assert_eq!(w.clone().decode(5), None, "{w:?}");
            assert_eq!(w.clone().decode_sparse(5), None, "{w:?}");
        }
    }
}
