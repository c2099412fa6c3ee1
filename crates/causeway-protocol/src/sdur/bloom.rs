//! Bloom filters of read sets, as the Geo-SDUR prototype certifies with
//! (its §V): a part sends the filter instead of its keys, and a member
//! tests the keys others wrote against it. A filter never says no wrongly;
//! it says yes wrongly with a probability that grows with the keys in it,
//! and such a yes aborts a transaction that would have committed.

use crate::topology::fnv1a64;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bloom {
    bits: Vec<u64>,
    hashes: u8,
    /// Keys added (zero: the filter of an empty set).
    count: u32,
}

impl Bloom {
    /// An empty filter of at least `bits` bits probed `hashes` times.
    pub fn new(bits: u32, hashes: u8) -> Bloom {
        let words = (bits as usize).div_ceil(64).max(1);
        Bloom { bits: vec![0; words], hashes: hashes.max(1), count: 0 }
    }

    pub fn of<'a>(keys: impl IntoIterator<Item = &'a [u8]>, bits: u32, hashes: u8) -> Bloom {
        let mut filter = Bloom::new(bits, hashes);
        for key in keys {
            filter.insert(key);
        }
        filter
    }

    /// The probes of `key`: double hashing over two halves of one FNV-1a
    /// and a second, salted one.
    fn probes(&self, key: &[u8]) -> impl Iterator<Item = usize> + '_ {
        let h1 = fnv1a64(key);
        let mut salted = Vec::with_capacity(key.len() + 1);
        salted.push(0x5b);
        salted.extend_from_slice(key);
        let h2 = fnv1a64(&salted) | 1;
        let size = (self.bits.len() * 64) as u64;
        (0..u64::from(self.hashes)).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % size) as usize)
    }

    pub fn insert(&mut self, key: &[u8]) {
        if self.bits.is_empty() {
            return;
        }
        let probes: Vec<usize> = self.probes(key).collect();
        for bit in probes {
            self.bits[bit / 64] |= 1 << (bit % 64);
        }
        self.count = self.count.saturating_add(1);
    }

    pub fn may_contain(&self, key: &[u8]) -> bool {
        if self.bits.is_empty() {
            // Not one this engine makes: say yes, which is never wrong.
            return self.count > 0;
        }
        self.count > 0 && self.probes(key).all(|bit| self.bits[bit / 64] & (1 << (bit % 64)) != 0)
    }

    /// Whether a filter from the network is one this member would make:
    /// at most `max_bits` (so a hostile one cannot make it allocate or
    /// probe without bound) and at least one word.
    pub fn is_well_formed(&self, max_bits: u32) -> bool {
        !self.bits.is_empty() && self.bits.len() * 64 <= max_bits as usize + 63 && self.hashes > 0 && self.hashes <= 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_never_misses_a_key_it_holds() {
        let keys: Vec<Vec<u8>> = (0..100).map(|i| format!("k{i}").into_bytes()).collect();
        let f = Bloom::of(keys.iter().map(|k| k.as_slice()), 2048, 4);
        assert!(keys.iter().all(|k| f.may_contain(k)));
        assert!(!Bloom::new(2048, 4).may_contain(b"k1"), "the empty filter holds nothing");
    }

    #[test]
    fn false_positives_stay_near_the_expected_rate() {
        // 20 keys in 1024 bits with 4 probes: (1 - e^(-4·20/1024))^4 ≈ 0.03 %.
        let f = Bloom::of((0..20).map(|i| format!("in{i}")).collect::<Vec<_>>().iter().map(|k| k.as_bytes()), 1024, 4);
        let wrong = (0..100_000).filter(|i| f.may_contain(format!("out{i}").as_bytes())).count();
        assert!(wrong < 200, "{wrong} false positives in 100000");
        // Crowded: 500 keys in 256 bits say yes to almost anything.
        let crowded =
            Bloom::of((0..500).map(|i| format!("in{i}")).collect::<Vec<_>>().iter().map(|k| k.as_bytes()), 256, 4);
        let wrong = (0..1000).filter(|i| crowded.may_contain(format!("out{i}").as_bytes())).count();
        assert!(wrong > 900, "{wrong}");
    }
}
