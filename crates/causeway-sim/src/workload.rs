//! What the closed-loop clients do: key spaces, key popularity and the shape
//! of each transaction.

use crate::config::{WorkloadConfig, WorkloadKind};
use causeway_protocol::{Key, Topology};
use rand::seq::index::sample;
use rand::Rng;

/// Keys named `k0, k1, …`, bucketed by the partition the store hashes them
/// to, so a client can pick a key inside a chosen partition as the paper's
/// workload does.
pub struct KeySpace {
    per_partition: Vec<Vec<Key>>,
}

impl KeySpace {
    pub fn new(topology: &Topology, keys_per_partition: u32) -> Self {
        let n = topology.partition_count() as usize;
        let want = keys_per_partition as usize;
        let mut per_partition: Vec<Vec<Key>> = vec![Vec::with_capacity(want); n];
        let mut filled = 0;
        let mut i: u64 = 0;
        while filled < n {
            let name = format!("k{i}");
            let p = topology.partition_of(name.as_bytes()).0 as usize;
            if per_partition[p].len() < want {
                per_partition[p].push(Key::from(name));
                if per_partition[p].len() == want {
                    filled += 1;
                }
            }
            i += 1;
        }
        KeySpace { per_partition }
    }

    pub fn partition(&self, p: usize) -> &[Key] {
        &self.per_partition[p]
    }

    pub fn partitions(&self) -> usize {
        self.per_partition.len()
    }
}

/// Zipf popularity over ranks `0..n`: rank `i` has weight `1 / (i+1)^s`.
/// Sampling inverts the precomputed cumulative weights — one uniform draw,
/// no `pow` per sample — through a guide table (Chen and Asau): `guide[j]`
/// is the first rank whose cumulative weight passes `j / G`, so a draw
/// searches only its bucket, not the whole table (a binary search over
/// 100,000 ranks missed the cache at every step; this is the load
/// generator's hot path). Same draw, same rank as a full search.
pub struct ZipfTable {
    cumulative: Vec<f64>,
    guide: Vec<u32>,
}

impl ZipfTable {
    pub fn new(n: usize, s: f64) -> Self {
        let mut total = 0.0;
        let mut cumulative: Vec<f64> = (1..=n)
            .map(|rank| {
                total += 1.0 / (rank as f64).powf(s);
                total
            })
            .collect();
        for c in &mut cumulative {
            *c /= total;
        }
        let buckets = n.clamp(1, 1 << 20);
        let guide =
            (0..=buckets).map(|j| cumulative.partition_point(|&c| c <= j as f64 / buckets as f64) as u32).collect();
        ZipfTable { cumulative, guide }
    }

    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.random();
        self.rank_of(u)
    }

    /// The rank a uniform draw `u` in `[0, 1)` stands for.
    fn rank_of(&self, u: f64) -> usize {
        let buckets = self.guide.len() - 1;
        let at = |j: usize| j as f64 / buckets as f64;
        let mut j = ((u * buckets as f64) as usize).min(buckets - 1);
        // `u * G` may round across a bucket edge; the edges as built decide.
        while j > 0 && u < at(j) {
            j -= 1;
        }
        while j + 1 < buckets && u >= at(j + 1) {
            j += 1;
        }
        // Every rank below guide[j] has a cumulative weight ≤ j/G ≤ u; the
        // answer is at most guide[j + 1] (or the last rank).
        let (lo, hi) = (self.guide[j] as usize, (self.guide[j + 1] as usize + 1).min(self.cumulative.len()));
        let at = lo + self.cumulative[lo..hi].partition_point(|&c| c <= u);
        at.min(self.cumulative.len() - 1)
    }
}

/// One transaction a client will run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnPlan {
    /// Keys to read, one inner vector per READ call.
    pub read_rounds: Vec<Vec<Key>>,
    /// Keys to write in order; a key may repeat (its first value is then an
    /// intermediate write).
    pub writes: Vec<Key>,
    /// Abort instead of committing.
    pub abort: bool,
}

/// Draws transaction plans.
pub struct Generator {
    kind: WorkloadKind,
    keys: KeySpace,
    zipf: Option<ZipfTable>,
}

impl Generator {
    pub fn new(kind: WorkloadKind, topology: &Topology) -> Self {
        let keys_per_partition = match &kind {
            WorkloadKind::Random(w) => w.keys_per_partition,
            WorkloadKind::Groups { groups, .. } => *groups,
        };
        let keys = KeySpace::new(topology, keys_per_partition);
        let zipf = match &kind {
            WorkloadKind::Random(w) if w.zipf > 0.0 => Some(ZipfTable::new(w.keys_per_partition as usize, w.zipf)),
            _ => None,
        };
        Generator { kind, keys, zipf }
    }

    pub fn keys(&self) -> &KeySpace {
        &self.keys
    }

    fn pick_in(&self, rng: &mut impl Rng, partition: usize) -> Key {
        let keys = self.keys.partition(partition);
        let i = match &self.zipf {
            // Rank 0 is the hottest key.
            Some(z) => z.sample(rng),
            None => rng.random_range(0..keys.len()),
        };
        keys[i].clone()
    }

    pub fn next(&self, rng: &mut impl Rng) -> TxnPlan {
        match &self.kind {
            WorkloadKind::Random(w) => self.random_txn(rng, w),
            WorkloadKind::Groups { groups, read_only_fraction } => {
                let g = rng.random_range(0..*groups as usize);
                let group: Vec<Key> = (0..self.keys.partitions()).map(|p| self.keys.partition(p)[g].clone()).collect();
                if rng.random_bool(*read_only_fraction) {
                    // Read the group in two calls half the time, to check
                    // that a snapshot holds across calls too.
                    let read_rounds = if group.len() > 1 && rng.random_bool(0.5) {
                        let mid = group.len() / 2;
                        vec![group[..mid].to_vec(), group[mid..].to_vec()]
                    } else {
                        vec![group]
                    };
                    TxnPlan { read_rounds, writes: Vec::new(), abort: false }
                } else {
                    TxnPlan { read_rounds: Vec::new(), writes: group, abort: false }
                }
            }
        }
    }

    fn random_txn(&self, rng: &mut impl Rng, w: &WorkloadConfig) -> TxnPlan {
        let n = self.keys.partitions();
        let p = (w.partitions_per_txn as usize).min(n);
        let partitions: Vec<usize> = sample(rng, n, p).into_vec();
        let read_only = w.writes_per_txn == 0 || rng.random_bool(w.read_only_fraction);
        let reads: Vec<Key> =
            (0..w.reads_per_txn as usize).map(|i| self.pick_in(rng, partitions[i % partitions.len()])).collect();
        let mut writes: Vec<Key> = if read_only {
            Vec::new()
        } else {
            (0..w.writes_per_txn as usize).map(|i| self.pick_in(rng, partitions[i % partitions.len()])).collect()
        };
        if !writes.is_empty() && rng.random_bool(w.rewrite_fraction) {
            let again = writes[0].clone();
            writes.push(again);
        }
        let rounds = if reads.len() > 1 { rng.random_range(1..=w.max_read_rounds.min(reads.len() as u32)) } else { 1 };
        let mut read_rounds: Vec<Vec<Key>> = Vec::new();
        if !reads.is_empty() {
            let per = reads.len().div_ceil(rounds as usize);
            read_rounds = reads.chunks(per).map(|c| c.to_vec()).collect();
        }
        let abort = !writes.is_empty() && rng.random_bool(w.abort_fraction);
        TxnPlan { read_rounds, writes, abort }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_guide_table_finds_the_rank_a_full_search_finds() {
        use rand::{Rng, SeedableRng};
        for (n, s) in [(1usize, 0.99), (7, 0.0), (1000, 0.99), (100_000, 0.99), (100_000, 0.5)] {
            let z = super::ZipfTable::new(n, s);
            let full = |u: f64| z.cumulative.partition_point(|&c| c <= u).min(n - 1);
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n as u64);
            let edges = (0..=64).map(|j| j as f64 / 64.0).chain([0.0, f64::EPSILON, 1.0 - f64::EPSILON]);
            for u in edges.filter(|u| *u < 1.0).chain((0..20_000).map(|_| rng.random::<f64>())) {
                assert_eq!(z.rank_of(u), full(u), "n {n}, s {s}, u {u}");
            }
            for c in z.cumulative.iter().take(50) {
                assert_eq!(z.rank_of(*c), full(*c), "n {n}: at a cumulative weight");
            }
        }
    }

    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn zipf_table_matches_the_distribution() {
        let z = ZipfTable::new(4, 1.0);
        // Weights 1, 1/2, 1/3, 1/4 over a total of 25/12.
        let expected = [12.0 / 25.0, 6.0 / 25.0, 4.0 / 25.0, 3.0 / 25.0];
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut counts = [0usize; 4];
        for _ in 0..40_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        for (c, e) in counts.iter().zip(expected) {
            let share = *c as f64 / 40_000.0;
            assert!((share - e).abs() < 0.01, "{counts:?}");
        }
        let uniform = ZipfTable::new(3, 0.0);
        assert!((0..100).all(|_| uniform.sample(&mut rng) < 3));
    }

    #[test]
    fn key_space_buckets_keys_by_their_partition() {
        let t = Topology::full(1, 4).unwrap();
        let ks = KeySpace::new(&t, 50);
        for p in 0..4 {
            assert_eq!(ks.partition(p).len(), 50);
            assert!(ks.partition(p).iter().all(|k| t.partition_of(k).0 as usize == p));
        }
    }

    #[test]
    fn random_plans_have_the_configured_shape() {
        let t = Topology::full(1, 8).unwrap();
        let w = WorkloadConfig {
            read_only_fraction: 0.0,
            abort_fraction: 0.0,
            rewrite_fraction: 0.0,
            ..Default::default()
        };
        let g = Generator::new(WorkloadKind::Random(w), &t);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..100 {
            let plan = g.next(&mut rng);
            let reads: Vec<&Key> = plan.read_rounds.iter().flatten().collect();
            assert_eq!(reads.len(), 19);
            assert_eq!(plan.writes.len(), 1);
            let mut parts: Vec<u32> = reads.iter().map(|k| t.partition_of(k).0).collect();
            parts.sort();
            parts.dedup();
            assert_eq!(parts.len(), 4, "reads spread over exactly 4 partitions");
        }
    }

    #[test]
    fn zipf_makes_the_first_keys_hot() {
        let t = Topology::full(1, 1).unwrap();
        let w = WorkloadConfig { partitions_per_txn: 1, ..Default::default() };
        let g = Generator::new(WorkloadKind::Random(w), &t);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let hot = g.keys().partition(0)[0].clone();
        let hits = (0..2000).filter(|_| g.pick_in(&mut rng, 0) == hot).count();
        // Rank 1 of zipf(0.99) over 1000 keys has about 13 % of the draws.
        assert!((200..330).contains(&hits), "{hits} of 2000");
    }
}
