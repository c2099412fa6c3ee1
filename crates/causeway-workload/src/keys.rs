//! Key spaces: keys named `k0, k1, …` (after a prefix, if any) bucketed by
//! the partition the store hashes them to.

use causeway_protocol::{Key, Topology};

/// Keys named `k0, k1, …`, bucketed by the partition the store hashes them
/// to, so a client can pick a key inside a chosen partition as the paper's
/// workload does.
pub struct KeySpace {
    per_partition: Vec<Vec<Key>>,
}

impl KeySpace {
    pub fn new(topology: &Topology, keys_per_partition: u32) -> Self {
        KeySpace::with_prefix(topology, keys_per_partition, "")
    }

    /// Keys named `{prefix}k0, {prefix}k1, …`: a run's own keys among others.
    pub fn with_prefix(topology: &Topology, keys_per_partition: u32, prefix: &str) -> Self {
        let n = topology.partition_count() as usize;
        let want = keys_per_partition as usize;
        let mut per_partition: Vec<Vec<Key>> = vec![Vec::with_capacity(want); n];
        let mut filled = 0;
        let mut i: u64 = 0;
        while filled < n {
            let name = format!("{prefix}k{i}");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_space_buckets_keys_by_their_partition() {
        let t = Topology::full(1, 4).unwrap();
        let ks = KeySpace::new(&t, 50);
        for p in 0..4 {
            assert_eq!(ks.partition(p).len(), 50);
            assert!(ks.partition(p).iter().all(|k| t.partition_of(k).0 as usize == p));
        }
        let mine = KeySpace::with_prefix(&t, 50, "run/");
        for p in 0..4 {
            assert_eq!(mine.partition(p).len(), 50);
            assert!(mine.partition(p).iter().all(|k| k.starts_with(b"run/k") && t.partition_of(k).0 as usize == p));
        }
    }
}
