//! Zipf key popularity.

use rand::Rng;

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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_guide_table_finds_the_rank_a_full_search_finds() {
        use rand::{Rng, SeedableRng};
        for (n, s) in [(1usize, 0.99), (7, 0.0), (1000, 0.99), (100_000, 0.99), (100_000, 0.5)] {
            let z = ZipfTable::new(n, s);
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
}
