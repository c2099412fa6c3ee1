//! What a client session keeps about its running transaction, whatever the
//! protocol: the write set, buffered until commit, and the read set, so a
//! key read twice reads the same value (and a key written reads its write).

use crate::contract::{Key, Value};
use rustc_hash::FxHashMap;

#[derive(Debug, Default)]
pub struct TxnBuffer {
    /// Writes in first-write order; a later write of a key replaces the
    /// value in place, so each key commits one version.
    ws: Vec<(Key, Option<Value>)>,
    ws_index: FxHashMap<Key, usize>,
    /// What the transaction has read.
    rs: FxHashMap<Key, Option<Value>>,
}

/// Answers a session found locally, and the distinct keys it must ask for.
pub type ReadPlan = (FxHashMap<Key, Option<Value>>, Vec<Key>);

impl TxnBuffer {
    /// Buffers a write of `key`: a value, or `None` to delete it. The
    /// session has checked it against the limits.
    pub fn write(&mut self, key: Key, value: Option<Value>) {
        match self.ws_index.get(&key) {
            Some(&i) => self.ws[i].1 = value,
            None => {
                self.ws_index.insert(key.clone(), self.ws.len());
                self.ws.push((key, value));
            }
        }
    }

    pub fn writes(&self) -> &[(Key, Option<Value>)] {
        &self.ws
    }

    pub fn take_writes(&mut self) -> Vec<(Key, Option<Value>)> {
        self.ws_index.clear();
        std::mem::take(&mut self.ws)
    }

    /// The transaction's own write of `key` (`Some(None)`: it deleted it).
    pub fn written(&self, key: &Key) -> Option<&Option<Value>> {
        self.ws_index.get(key).map(|&i| &self.ws[i].1)
    }

    /// What the transaction already knows of `key`: its write, else its read.
    pub fn known(&self, key: &Key) -> Option<Option<Value>> {
        match self.written(key) {
            Some(v) => Some(v.clone()),
            None => self.rs.get(key).cloned(),
        }
    }

    /// Splits the keys of a READ into answers known here (`local` says what
    /// the session knows beyond the transaction, such as Wren's cache) and
    /// the distinct keys to ask the cluster for.
    pub fn plan_read(&self, keys: &[Key], local: impl Fn(&Key) -> Option<Option<Value>>) -> ReadPlan {
        let mut known = FxHashMap::default();
        let mut asked = rustc_hash::FxHashSet::default();
        let mut ask: Vec<Key> = Vec::new();
        for key in keys {
            if known.contains_key(key) || asked.contains(key) {
                continue;
            }
            match local(key) {
                Some(v) => {
                    known.insert(key.clone(), v);
                }
                None => {
                    asked.insert(key.clone());
                    ask.push(key.clone());
                }
            }
        }
        (known, ask)
    }

    /// Completes a READ: the values in the order the keys were asked for,
    /// or `None` if the answers miss a key (the transaction cannot trust
    /// them). With `remember`, what was read joins the read set.
    pub fn finish_read(
        &mut self,
        keys: Vec<Key>,
        values: FxHashMap<Key, Option<Value>>,
        remember: bool,
    ) -> Option<Vec<(Key, Option<Value>)>> {
        let mut result = Vec::with_capacity(keys.len());
        for k in keys {
            let v = values.get(&k)?.clone();
            result.push((k, v));
        }
        if remember {
            for (k, v) in values {
                self.rs.entry(k).or_insert(v);
            }
        }
        Some(result)
    }

    pub fn clear(&mut self) {
        self.ws.clear();
        self.ws_index.clear();
        self.rs.clear();
    }
}

/// The writes a coordinator commits: the last value of each key, in the
/// order of those last writes. A session sends each key once, but a
/// coordinator takes no client's word for it: one version per key and
/// transaction.
pub fn last_write_per_key(writes: Vec<(Key, Option<Value>)>) -> Vec<(Key, Option<Value>)> {
    let mut seen: rustc_hash::FxHashSet<Key> = rustc_hash::FxHashSet::default();
    let mut last: Vec<(Key, Option<Value>)> =
        writes.into_iter().rev().filter(|(k, _)| seen.insert(k.clone())).collect();
    last.reverse();
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn k(s: &'static str) -> Key {
        Bytes::from_static(s.as_bytes())
    }

    fn v(s: &'static str) -> Option<Value> {
        Some(k(s))
    }

    #[test]
    fn a_coordinator_keeps_the_last_write_of_each_key() {
        let writes = vec![(k("a"), v("1")), (k("b"), v("2")), (k("a"), v("3"))];
        assert_eq!(last_write_per_key(writes), vec![(k("b"), v("2")), (k("a"), v("3"))]);
    }

    #[test]
    fn a_rewritten_key_keeps_its_place_and_its_last_value() {
        let mut t = TxnBuffer::default();
        t.write(k("a"), v("1"));
        t.write(k("b"), v("2"));
        t.write(k("a"), v("3"));
        assert_eq!(t.writes(), &[(k("a"), v("3")), (k("b"), v("2"))]);
        assert_eq!(t.take_writes().len(), 2);
        assert!(t.written(&k("a")).is_none());
    }

    #[test]
    fn reads_are_answered_from_writes_then_reads_and_asked_once() {
        let mut t = TxnBuffer::default();
        t.write(k("w"), v("mine"));
        let (known, ask) = t.plan_read(&[k("w"), k("r"), k("r"), k("c")], |key| t.known(key));
        assert_eq!(known.get(&k("w")), Some(&Some(k("mine"))));
        assert_eq!(ask, vec![k("r"), k("c")]);
        let mut values = known;
        values.insert(k("r"), Some(k("seen")));
        values.insert(k("c"), None);
        let got = t.finish_read(vec![k("r"), k("w"), k("c")], values, true).unwrap();
        assert_eq!(got, vec![(k("r"), Some(k("seen"))), (k("w"), Some(k("mine"))), (k("c"), None)]);
        assert_eq!(t.known(&k("r")), Some(Some(k("seen"))), "the read set repeats the read");
        assert!(t.finish_read(vec![k("x")], FxHashMap::default(), true).is_none(), "a missing answer");
        t.clear();
        assert_eq!(t.known(&k("r")), None);
    }

    #[test]
    fn a_delete_in_the_transaction_reads_as_no_value_and_replaces_a_write() {
        let mut t = TxnBuffer::default();
        t.write(k("a"), v("1"));
        t.write(k("a"), None);
        assert_eq!(t.known(&k("a")), Some(None), "the transaction's own delete");
        assert_eq!(t.writes(), &[(k("a"), None)]);
        let (known, ask) = t.plan_read(&[k("a")], |key| t.known(key));
        assert!(ask.is_empty(), "a deleted key is not asked for");
        assert_eq!(known.get(&k("a")), Some(&None));
    }
}
