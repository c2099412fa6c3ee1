//! The client cache of a session's own writes that its snapshots may not
//! include yet (Wren's CANToR cache, PaRiS's `WC_c`): read before the
//! store, so that a session reads its own writes while the stable snapshot
//! lags, and pruned as the snapshot passes their commit times.

use crate::contract::{Key, Value};
use crate::hlc::Timestamp;
use rustc_hash::FxHashMap;

/// Own writes with their commit time (`None`: a delete).
#[derive(Debug, Default)]
pub struct WriteCache {
    entries: FxHashMap<Key, (Option<Value>, Timestamp)>,
}

impl WriteCache {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many entries the cache would hold once `writes` — of distinct
    /// keys, as a write set holds them — commit, if more than `limit`.
    pub fn len_after_beyond(&self, writes: &[(Key, Option<Value>)], limit: usize) -> Option<usize> {
        // Every commit asks: most fit by the sizes alone, no key looked up.
        if self.entries.len() + writes.len() <= limit {
            return None;
        }
        let len = self.entries.len() + writes.iter().filter(|(k, _)| !self.entries.contains_key(k)).count();
        (len > limit).then_some(len)
    }

    /// What the session wrote last to `key`, if the snapshot may miss it.
    pub fn get(&self, key: &Key) -> Option<Option<Value>> {
        self.entries.get(key).map(|(v, _)| v.clone())
    }

    /// A snapshot that includes everything up to `t` is the session's:
    /// the writes it includes leave.
    pub fn prune_upto(&mut self, t: Timestamp) {
        self.entries.retain(|_, (_, ct)| *ct > t);
    }

    /// The session committed `writes` at `ct`: they replace older entries.
    pub fn committed(&mut self, ct: Timestamp, writes: Vec<(Key, Option<Value>)>) {
        for (k, v) in writes {
            self.entries.insert(k, (v, ct));
        }
    }

    /// For a session token: every entry, by key.
    pub fn export(&self) -> Vec<(Key, Option<Value>, Timestamp)> {
        let mut cache: Vec<_> = self.entries.iter().map(|(k, (v, ct))| (k.clone(), v.clone(), *ct)).collect();
        cache.sort_by(|a, b| a.0.cmp(&b.0));
        cache
    }

    /// From a session token: an entry replaces one only if it is newer.
    pub fn import(&mut self, cache: Vec<(Key, Option<Value>, Timestamp)>) {
        for (key, value, ct) in cache {
            match self.entries.get(&key) {
                Some((_, mine)) if *mine >= ct => {}
                _ => {
                    self.entries.insert(key, (value, ct));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_length_after_a_commit_counts_new_keys_only_and_only_past_the_limit() {
        let mut wc = WriteCache::default();
        let key = |k: &str| Key::from(k.as_bytes().to_vec());
        wc.committed(Timestamp(1), vec![(key("a"), None)]);
        let writes = vec![(key("a"), None), (key("b"), None)];
        assert_eq!(wc.len_after_beyond(&writes, 1), Some(2), "a is cached already: one more");
        assert_eq!(wc.len_after_beyond(&writes, 2), None, "two fit");
        assert_eq!(wc.len_after_beyond(&writes, 3), None, "fits by the sizes alone");
    }
}
