//! The multi-version store of one partition replica: a version chain per key,
//! ordered by last-writer-wins.
//!
//! Protocols differ in what a version carries besides its value and stamp
//! (Wren: the remote dependency time; Cure: a vector), so the metadata is a
//! type parameter. Visibility is a predicate the protocol passes in.
//!
//! Hot path: reads scan a chain from its newest end; versions almost always
//! arrive in stamp order, so inserts are appends.
//!
//! A delete is a version too — a *tombstone*, whose value is `None` — so it
//! is replicated, ordered by last-writer-wins and read (as "no value") like
//! any write. Garbage collection drops what a tombstone deleted as it drops
//! any overwritten version; the tombstone itself goes once no version it
//! beats can still arrive ([`MvStore::collect_tombstones`]).

use crate::contract::{CommitStamp, Key, Value};
use crate::hlc::Timestamp;
use crate::ids::{DcId, TxId};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A transaction's versions as [`MvStore::by_transaction`] gathers them:
/// their metadata, and the keys with what was written.
pub type TxVersions<'a, M> = (&'a M, Vec<(Key, Option<Value>)>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version<M> {
    /// `None`: a tombstone (the key was deleted).
    pub value: Option<Value>,
    pub stamp: CommitStamp,
    pub meta: M,
}

/// Versions of one key, oldest first by [`CommitStamp`]. A ring, not a
/// vector: collection drops the oldest while writes append the newest, and
/// a hot key whose versions are kept for a timeout (PrompTCC's, Eiger's)
/// holds thousands — dropping one must not move all the others.
#[derive(Clone, Debug)]
pub struct VersionChain<M> {
    versions: VecDeque<Version<M>>,
}

impl<M> Default for VersionChain<M> {
    fn default() -> Self {
        VersionChain { versions: VecDeque::new() }
    }
}

impl<M> VersionChain<M> {
    /// Inserts a version at its place in LWW order. A version with the same
    /// stamp is the same write delivered twice and is ignored.
    pub fn insert(&mut self, version: Version<M>) -> bool {
        match self.versions.back() {
            Some(last) if last.stamp < version.stamp => {
                self.versions.push_back(version);
                true
            }
            None => {
                self.versions.push_back(version);
                true
            }
            Some(_) => {
                // Late, but rarely by much (a transaction committed here
                // after one stamped above it): look among the newest before
                // searching the whole chain, which for a hot key whose
                // versions are kept for a timeout is thousands long and
                // cold in the cache.
                const NEAR: usize = 8;
                let from = self.versions.len().saturating_sub(NEAR);
                let at = match self.versions.range(from..).rposition(|v| v.stamp <= version.stamp) {
                    // Sorted: the last one at or below it is in the window.
                    Some(i) if self.versions[from + i].stamp == version.stamp => return false,
                    Some(i) => from + i + 1,
                    None => {
                        let at = self.versions.partition_point(|v| v.stamp < version.stamp);
                        if self.versions.get(at).is_some_and(|v| v.stamp == version.stamp) {
                            return false;
                        }
                        at
                    }
                };
                self.versions.insert(at, version);
                true
            }
        }
    }

    /// The LWW-greatest version.
    pub fn newest(&self) -> Option<&Version<M>> {
        self.versions.back()
    }

    /// The LWW-greatest version that `visible` admits.
    pub fn newest_visible(&self, visible: impl FnMut(&Version<M>) -> bool) -> Option<&Version<M>> {
        self.newest_visible_and_newer(visible).0
    }

    /// [`newest_visible`](Self::newest_visible), and the versions newer than
    /// it — none of which `visible` admits — oldest first, found by the
    /// same scan rather than by a search of the whole chain (a hot key's
    /// holds thousands of versions kept for a timeout).
    pub fn newest_visible_and_newer(
        &self,
        visible: impl FnMut(&Version<M>) -> bool,
    ) -> (Option<&Version<M>>, std::collections::vec_deque::Iter<'_, Version<M>>) {
        match self.versions.iter().rposition(visible) {
            Some(i) => (self.versions.get(i), self.versions.range(i + 1..)),
            None => (None, self.versions.iter()),
        }
    }

    /// [`newest_visible`](Self::newest_visible) for a rule that admits no
    /// version stamped after `bound`. When more than a few versions are
    /// above the bound, a binary search skips them, so a reader of an old
    /// snapshot does not scan every newer version (hot path: the chain of a
    /// hot key under a long-running reader); a fresh reader scans from the
    /// newest end as before.
    pub fn newest_visible_upto(
        &self,
        bound: crate::hlc::Timestamp,
        mut visible: impl FnMut(&Version<M>) -> bool,
    ) -> Option<&Version<M>> {
        const SCAN: usize = 8;
        let v = &self.versions;
        let end = match v.len().checked_sub(SCAN) {
            // Sorted by stamp, so by time: every version from `i` on is
            // past the bound.
            Some(i) if v[i].stamp.ts > bound => v.partition_point(|x| x.stamp.ts <= bound),
            _ => v.len(),
        };
        v.range(..end).rev().find(|x| visible(x))
    }

    /// Garbage collection: drops every version older than the newest one
    /// `visible_in_oldest` admits. When every snapshot still in use sees at
    /// least what the oldest one sees, those versions can never be read
    /// again. Returns how many were dropped.
    pub fn prune(&mut self, visible_in_oldest: impl FnMut(&Version<M>) -> bool) -> usize {
        match self.versions.iter().rposition(visible_in_oldest) {
            Some(0) | None => 0,
            Some(keep_from) => {
                self.versions.drain(..keep_from);
                keep_from
            }
        }
    }

    /// Garbage collection by a rule that holds of a chain's oldest
    /// versions and stops holding further on (PrompTCC's "visible, and
    /// held for the transaction timeout"): drops every version older than
    /// the last of the oldest run that `collectable` admits. Dropping less
    /// than [`prune`](Self::prune) would where the rule skips a version, it
    /// looks only at that run, not the whole chain: a hot key's chain of
    /// recent versions costs nothing. Returns the stamp of the newest
    /// version dropped, if any.
    pub fn prune_oldest(&mut self, mut collectable: impl FnMut(&Version<M>) -> bool) -> Option<CommitStamp> {
        let run = self.versions.iter().take_while(|v| collectable(v)).count();
        match run {
            0 | 1 => None,
            n => {
                let upto = self.versions[n - 2].stamp;
                self.versions.drain(..n - 1);
                Some(upto)
            }
        }
    }

    pub fn len(&self) -> usize {
        self.versions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Version<M>> {
        self.versions.iter()
    }
}

/// Per key, the stamp of the newest version garbage collection dropped by
/// the transaction timeout (PrompTCC's §VII, Eiger's): a read that would
/// return something older — or nothing — may have needed it, and must say
/// so (`TooOld`) rather than answer. Only a checkpoint drops versions from
/// disk, so it keeps the marks.
#[derive(Debug, Default)]
pub struct CollectedMarks(FxHashMap<Key, CommitStamp>);

impl CollectedMarks {
    /// Inserts a version into `store` and collects the oldest run of the
    /// chain that `collectable` admits, marking what went.
    pub fn insert<M>(
        &mut self,
        store: &mut MvStore<M>,
        key: &Key,
        version: Version<M>,
        collectable: impl FnMut(&Version<M>) -> bool,
    ) {
        if let Some(upto) = store.insert_pruning_oldest(key.clone(), version, collectable) {
            self.restore(key.clone(), upto);
        }
    }

    /// A mark from a checkpoint.
    pub fn restore(&mut self, key: Key, upto: CommitStamp) {
        let mark = self.0.entry(key).or_insert(upto);
        *mark = (*mark).max(upto);
    }

    /// Whether a read of `key` that would return the version stamped
    /// `found` (`None`: none) may have missed a collected one.
    pub fn missed(&self, key: &[u8], found: Option<CommitStamp>) -> bool {
        self.0.get(key).is_some_and(|&upto| found.is_none_or(|f| f < upto))
    }

    /// Every mark, in key order (for a checkpoint).
    pub fn sorted(&self) -> Vec<(&Key, CommitStamp)> {
        let mut marks: Vec<(&Key, CommitStamp)> = self.0.iter().map(|(k, &s)| (k, s)).collect();
        marks.sort();
        marks
    }
}

/// All version chains of a replica.
#[derive(Clone, Debug)]
pub struct MvStore<M> {
    chains: FxHashMap<Key, VersionChain<M>>,
    versions: u64,
    collected: u64,
    /// Tombstones that may be collected one day, by stamp: the key's chain
    /// goes once its tombstone is the newest version, every snapshot in use
    /// sees it and nothing older can still arrive.
    tombstones: BTreeSet<(CommitStamp, Key)>,
    /// Whether tombstones are tracked for collection at all.
    collects_tombstones: bool,
    /// The last tombstones collected (at most [`RECENTLY_COLLECTED`]),
    /// oldest first: a replica re-seeding from this one gets them too, for
    /// another DC may not have received the delete yet
    /// ([`crate::recovery::seed`]).
    recently_collected: VecDeque<(Key, Version<M>)>,
}

/// How many collected tombstones a store remembers.
pub const RECENTLY_COLLECTED: usize = 1 << 16;

impl<M> Default for MvStore<M> {
    fn default() -> Self {
        MvStore {
            chains: FxHashMap::default(),
            versions: 0,
            collected: 0,
            tombstones: BTreeSet::new(),
            collects_tombstones: true,
            recently_collected: VecDeque::new(),
        }
    }
}

impl<M> MvStore<M> {
    /// A store that keeps its tombstones, for a protocol with no bound below
    /// which every DC's writes have arrived (it never calls
    /// [`collect_tombstones`](Self::collect_tombstones), so tracking them
    /// would only grow).
    pub fn keeping_tombstones() -> Self {
        MvStore { collects_tombstones: false, ..MvStore::default() }
    }

    pub fn chain(&self, key: &[u8]) -> Option<&VersionChain<M>> {
        self.chains.get(key)
    }

    /// Inserts a version, then prunes the chain with the GC predicate.
    pub fn insert(&mut self, key: Key, version: Version<M>, visible_in_oldest: impl FnMut(&Version<M>) -> bool) {
        self.insert_then_prune(key, version, |chain| chain.prune(visible_in_oldest));
    }

    /// Inserts a version, then prunes the chain's oldest versions with
    /// [`VersionChain::prune_oldest`]; returns the stamp of the newest
    /// version dropped, if any.
    pub fn insert_pruning_oldest(
        &mut self,
        key: Key,
        version: Version<M>,
        collectable: impl FnMut(&Version<M>) -> bool,
    ) -> Option<CommitStamp> {
        self.insert_then_prune(key, version, |chain| chain.prune_oldest(collectable))
    }

    /// Inserts a version, then lets `prune` collect from its chain; keeps
    /// the counts of versions held and collected.
    fn insert_then_prune<T>(
        &mut self,
        key: Key,
        version: Version<M>,
        prune: impl FnOnce(&mut VersionChain<M>) -> T,
    ) -> T {
        if version.value.is_none() && self.collects_tombstones {
            self.tombstones.insert((version.stamp, key.clone()));
        }
        let chain = self.chains.entry(key).or_default();
        if chain.insert(version) {
            self.versions += 1;
        }
        let before = chain.len();
        let pruned = prune(chain);
        let dropped = (before - chain.len()) as u64;
        self.versions -= dropped;
        self.collected += dropped;
        pruned
    }

    /// Garbage collection of deletes: drops the chain of every key whose
    /// newest version is a tombstone stamped at or below `settled` that the
    /// oldest snapshot in use sees. `settled` must be a time up to which
    /// this replica has received every write from every DC, so no version
    /// the tombstone beats can arrive after it is gone (it would bring the
    /// deleted key back). A read of a key with no chain is a read of the
    /// tombstone: no value. Returns how many versions were dropped.
    pub fn collect_tombstones(
        &mut self,
        settled: Timestamp,
        mut visible_in_oldest: impl FnMut(&Version<M>) -> bool,
    ) -> usize {
        let mut dropped = 0;
        while let Some((stamp, _)) = self.tombstones.first() {
            if stamp.ts > settled {
                break;
            }
            let (stamp, key) = self.tombstones.pop_first().expect("a first");
            let Some(chain) = self.chains.get(&key) else { continue };
            let newest = chain.newest().expect("chains are never empty");
            if newest.stamp != stamp {
                // Overwritten since: the chain's own pruning handles it.
                continue;
            }
            if !visible_in_oldest(newest) {
                // Settled but not yet in every snapshot in use: try again later.
                self.tombstones.insert((stamp, key));
                break;
            }
            dropped += chain.len();
            let mut chain = self.chains.remove(&key).expect("the chain looked at");
            let tombstone = chain.versions.pop_back().expect("chains are never empty");
            if self.recently_collected.len() == RECENTLY_COLLECTED {
                self.recently_collected.pop_front();
            }
            self.recently_collected.push_back((key, tombstone));
        }
        self.versions -= dropped as u64;
        self.collected += dropped as u64;
        dropped
    }

    /// The last tombstones collected, oldest first.
    pub fn recently_collected(&self) -> impl Iterator<Item = (&Key, &Version<M>)> {
        self.recently_collected.iter().map(|(k, v)| (k, v))
    }

    /// Tombstones waiting for collection.
    pub fn tombstone_count(&self) -> usize {
        self.tombstones.len()
    }

    /// Number of versions stored, over all keys.
    pub fn version_count(&self) -> u64 {
        self.versions
    }

    /// Number of versions garbage-collected so far.
    pub fn collected_count(&self) -> u64 {
        self.collected
    }

    /// Every key's chain, in no particular order.
    pub fn chains(&self) -> impl Iterator<Item = (&Key, &VersionChain<M>)> {
        self.chains.iter()
    }

    /// Every version held, and the tombstones collected lately, gathered
    /// by the transaction that wrote them, in stamp order (DC, then time,
    /// then transaction): what a checkpoint writes back (a restart keeps
    /// the deletes it collected lately, as tombstones to collect again) and
    /// what a re-seed is given. The metadata is the first version's (a
    /// transaction's versions share it).
    pub fn by_transaction(&self) -> BTreeMap<(DcId, Timestamp, TxId), TxVersions<'_, M>> {
        let mut txs: BTreeMap<_, (&M, Vec<_>)> = BTreeMap::new();
        let held = self.chains.iter().flat_map(|(key, chain)| chain.iter().map(move |v| (key, v)));
        for (key, v) in held.chain(self.recently_collected()) {
            let tx = txs.entry((v.stamp.dc, v.stamp.ts, v.stamp.txid)).or_insert_with(|| (&v.meta, Vec::new()));
            tx.1.push((key.clone(), v.value.clone()));
        }
        txs
    }

    /// The newest value of every key that has one (a deleted key has
    /// none), sorted by key.
    pub fn latest(&self) -> Vec<(Key, Value)> {
        let mut out: Vec<(Key, Value)> = self
            .chains
            .iter()
            .filter_map(|(k, c)| c.newest().and_then(|v| Some((k.clone(), v.value.clone()?))))
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlc::Timestamp;
    use crate::ids::{DcId, TxId};

    fn stamp(ts: u64, dc: u16, tx: u64) -> CommitStamp {
        CommitStamp { ts: Timestamp(ts), dc: DcId(dc), txid: TxId(tx) }
    }

    fn version(ts: u64, dc: u16, tx: u64) -> Version<()> {
        Version { value: Some(Value::from(format!("{ts}/{dc}/{tx}"))), stamp: stamp(ts, dc, tx), meta: () }
    }

    /// Versions in any order, some twice, end in stamp order, each once:
    /// those late by a little (found among the newest) and by a lot
    /// (searched for in the whole chain) alike.
    #[test]
    fn late_versions_take_their_place_and_repeats_are_ignored() {
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        for round in 0..50 {
            let mut c = VersionChain::default();
            let mut reference = std::collections::BTreeSet::new();
            for i in 0..200u64 {
                // Mostly near the newest, now and then far back, often again.
                let ts = match next(4) {
                    0 => next(1 + i),
                    1 if i > 0 => *reference.iter().nth(next(reference.len() as u64) as usize).unwrap_or(&0),
                    _ => i + next(3),
                };
                let added = c.insert(version(ts, 0, ts));
                assert_eq!(added, reference.insert(ts), "round {round}: {ts} added once");
            }
            let got: Vec<u64> = c.iter().map(|v| v.stamp.ts.0).collect();
            assert_eq!(got, reference.into_iter().collect::<Vec<_>>(), "round {round}");
        }
    }

    #[test]
    fn pruning_the_oldest_run_keeps_its_last_and_never_looks_past_it() {
        let mut c = VersionChain::default();
        for ts in 1..=6 {
            c.insert(version(ts, 0, ts));
        }
        // Versions 1–3 collectable, 4 not, 5 would be: only the run counts.
        let mut looked = Vec::new();
        let dropped = c.prune_oldest(|v| {
            looked.push(v.stamp.ts.0);
            v.stamp.ts.0 != 4
        });
        assert_eq!(dropped.map(|s| s.ts.0), Some(2), "1 and 2 go, 3 stays as the oldest kept");
        assert_eq!(c.iter().map(|v| v.stamp.ts.0).collect::<Vec<_>>(), vec![3, 4, 5, 6]);
        assert_eq!(looked, vec![1, 2, 3, 4], "it stops at the first version the rule refuses");
        assert_eq!(c.prune_oldest(|_| false), None);
    }

    #[test]
    fn lww_orders_by_timestamp_then_dc_then_txid() {
        assert!(stamp(10, 5, 5) < stamp(11, 0, 0));
        assert!(stamp(10, 0, 9) < stamp(10, 1, 0));
        assert!(stamp(10, 1, 1) < stamp(10, 1, 2));
    }

    #[test]
    fn chain_keeps_lww_order_whatever_the_arrival_order() {
        let mut chain = VersionChain::default();
        for (ts, dc, tx) in [(20, 0, 1), (10, 1, 1), (20, 1, 0), (15, 0, 3), (20, 0, 0)] {
            assert!(chain.insert(version(ts, dc, tx)));
        }
        let order: Vec<_> = chain.iter().map(|v| v.stamp).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
        assert_eq!(chain.newest().unwrap().stamp, stamp(20, 1, 0));
        assert!(!chain.insert(version(15, 0, 3)), "a duplicate is ignored");
        assert_eq!(chain.len(), 5);
    }

    #[test]
    fn newest_visible_upto_finds_what_a_full_scan_finds() {
        let mut chain = VersionChain::default();
        for ts in (10..400).step_by(7) {
            chain.insert(version(ts, 0, ts));
        }
        let short = VersionChain { versions: chain.versions.iter().take(5).cloned().collect() };
        assert_eq!(
            short.newest_visible_upto(Timestamp(30), |v| v.stamp.ts <= Timestamp(30)).map(|v| v.stamp.ts),
            Some(Timestamp(24))
        );
        for bound in [0u64, 9, 10, 11, 100, 205, 398, 399, 1000] {
            for cut in [5u64, 50, 150, 397] {
                let rule = |v: &Version<()>| v.stamp.ts <= Timestamp(cut.min(bound)) && v.stamp.ts.0 % 2 == 1;
                let full = chain.newest_visible(rule).map(|v| v.stamp);
                assert_eq!(chain.newest_visible_upto(Timestamp(bound), rule).map(|v| v.stamp), full, "{bound} {cut}");
            }
        }
    }

    #[test]
    fn newest_visible_and_newer_agree_with_the_scan_and_the_search() {
        let mut chain = VersionChain::default();
        for ts in (10..200).step_by(10) {
            chain.insert(version(ts, 0, ts));
        }
        for (cut, gaps) in [0u64, 5, 10, 15, 100, 190, 500].into_iter().flat_map(|c| [(c, false), (c, true)]) {
            // With gaps, some older versions are not admitted either.
            let rule = |v: &Version<()>| v.stamp.ts <= Timestamp(cut) && !(gaps && v.stamp.ts.0.is_multiple_of(30));
            let (found, newer) = chain.newest_visible_and_newer(rule);
            assert_eq!(found, chain.versions.iter().rev().find(|v| rule(v)), "{cut}");
            let expected: Vec<_> = chain.iter().filter(|v| found.is_none_or(|f| v.stamp > f.stamp)).collect();
            assert_eq!(newer.collect::<Vec<_>>(), expected, "{cut}");
        }
    }

    #[test]
    fn newest_visible_returns_the_lww_greatest_admitted_version() {
        let mut chain = VersionChain::default();
        for ts in [10, 20, 30] {
            chain.insert(version(ts, 0, 0));
        }
        let v = chain.newest_visible(|v| v.stamp.ts <= Timestamp(25)).unwrap();
        assert_eq!(v.stamp.ts, Timestamp(20));
        assert!(chain.newest_visible(|v| v.stamp.ts <= Timestamp(5)).is_none());
    }

    #[test]
    fn gc_keeps_the_newest_version_of_the_oldest_snapshot_and_everything_after() {
        let mut chain = VersionChain::default();
        for ts in [10, 20, 30, 40] {
            chain.insert(version(ts, 0, 0));
        }
        assert_eq!(chain.prune(|v| v.stamp.ts <= Timestamp(5)), 0, "nothing visible: keep all");
        assert_eq!(chain.prune(|v| v.stamp.ts <= Timestamp(10)), 0, "oldest already kept");
        assert_eq!(chain.prune(|v| v.stamp.ts <= Timestamp(35)), 2);
        let left: Vec<_> = chain.iter().map(|v| v.stamp.ts.0).collect();
        assert_eq!(left, vec![30, 40]);
        // Whatever a newer snapshot reads is still there.
        assert_eq!(chain.newest_visible(|v| v.stamp.ts <= Timestamp(39)).unwrap().stamp.ts, Timestamp(30));
    }

    #[test]
    fn store_counts_versions_and_collections() {
        let mut store = MvStore::default();
        let key = Key::from_static(b"k");
        for ts in [10, 20, 30] {
            store.insert(key.clone(), version(ts, 0, 0), |v| v.stamp.ts <= Timestamp(25));
        }
        assert_eq!(store.version_count(), 2);
        assert_eq!(store.collected_count(), 1);
        assert_eq!(store.latest(), vec![(key, Value::from("30/0/0"))]);
    }

    fn tombstone(ts: u64) -> Version<()> {
        Version { value: None, stamp: stamp(ts, 0, ts), meta: () }
    }

    #[test]
    fn a_tombstone_reads_as_no_value_and_hides_the_key_from_latest() {
        let mut store = MvStore::default();
        let (a, b) = (Key::from_static(b"a"), Key::from_static(b"b"));
        store.insert(a.clone(), version(10, 0, 0), |_| false);
        store.insert(b.clone(), version(10, 0, 1), |_| false);
        store.insert(a.clone(), tombstone(20), |_| false);
        let chain = store.chain(&a).unwrap();
        assert_eq!(chain.newest_visible(|v| v.stamp.ts <= Timestamp(15)).unwrap().value, Some(Value::from("10/0/0")));
        assert_eq!(chain.newest_visible(|v| v.stamp.ts <= Timestamp(25)).unwrap().value, None, "deleted");
        assert_eq!(store.latest(), vec![(b, Value::from("10/0/1"))]);
        assert_eq!(store.tombstone_count(), 1);
    }

    #[test]
    fn a_tombstone_goes_once_settled_and_seen_by_every_snapshot() {
        let mut store = MvStore::default();
        let (a, b) = (Key::from_static(b"a"), Key::from_static(b"b"));
        store.insert(a.clone(), version(10, 0, 0), |_| false);
        store.insert(a.clone(), tombstone(20), |_| false);
        store.insert(b.clone(), tombstone(30), |_| false);
        store.insert(b.clone(), version(40, 0, 4), |_| false);
        assert_eq!(store.version_count(), 4);
        // Not settled yet: a version the tombstone beats may still arrive.
        assert_eq!(store.collect_tombstones(Timestamp(19), |_| true), 0);
        // Settled, but the oldest snapshot still reads below it.
        assert_eq!(store.collect_tombstones(Timestamp(50), |v| v.stamp.ts <= Timestamp(15)), 0);
        assert!(store.chain(&a).is_some());
        // Settled and seen: the deleted key is gone with every version; b's
        // tombstone was overwritten and stays for b's own pruning.
        assert_eq!(store.collect_tombstones(Timestamp(50), |v| v.stamp.ts <= Timestamp(35)), 2);
        assert!(store.chain(&a).is_none());
        assert_eq!(store.chain(&b).unwrap().len(), 2);
        assert_eq!((store.version_count(), store.collected_count(), store.tombstone_count()), (2, 2, 0));
        // A store that keeps its tombstones does not track them.
        let mut keeping = MvStore::keeping_tombstones();
        keeping.insert(a, tombstone(20), |_| true);
        assert_eq!((keeping.version_count(), keeping.tombstone_count()), (1, 0));
    }
}
