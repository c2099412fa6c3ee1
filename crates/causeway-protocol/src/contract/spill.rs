//! The spill effect: records a replica keeps on disk rather than in memory
//! until it needs them again, by key.
//!
//! Why: a replica keeps the groups of its replication stream until every
//! peer acknowledges them ([`crate::recovery::stream`]). While a peer is
//! cut off that is the whole history since the cut — in memory, without
//! bound. Past a bound the oldest groups are handed to the driver instead
//! ([`Spill::Put`]), and read back in batches when the peer returns and
//! resumes its stream below what memory holds ([`Spill::Get`], answered by
//! [`Replica::on_unspilled`]). So the backlog for an unreachable peer is
//! recovered from durable state, and what a cut costs is disk, not memory.
//!
//! The driver's side of the contract:
//!
//! * operations are carried out in order, each after the one before;
//! * a `Put` is carried out only once every record the replica appended
//!   before it is durable (the records of the batch's groups among them:
//!   a batch must not outlive what it holds), and is durable when done —
//!   a crash keeps it. Then the replica is told, in a later input
//!   ([`Replica::on_spilled`]), and only then lets the batch's groups go
//!   from memory and records how far they went: neither a record nor a
//!   checkpoint can say a batch is on disk before it is;
//! * keys increase within a `Put` and from one to the next (they are
//!   stream positions); entries of one `Put` are a batch. Entries at or
//!   below the newest key held are dropped: after a crash a replica may
//!   put again what reached the disk before its record of the put did;
//! * a `Get { after }` is answered, in a later input, with the entries of
//!   the oldest batch that holds keys above `after`, those keys only, in
//!   order — or with none when there is none — as the `Put`s before it
//!   left the disk. One batch at a time, asked for as the peer takes them,
//!   keeps what a catch-up holds in memory to a couple of puts' worth;
//! * `Forget { upto }`: entries with keys at or below it are needed no
//!   more; a driver may drop whole batches whose keys all are.
//!
//! [`Replica::on_unspilled`]: super::Replica::on_unspilled
//! [`Replica::on_spilled`]: super::Replica::on_spilled

use std::collections::BTreeMap;

/// The default bound on what a replica keeps in memory for its peers
/// before it spills (`Tuning::max_kept_bytes`).
pub const DEFAULT_MAX_KEPT_BYTES: u64 = 64 << 20;

/// One spill operation of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spill<R> {
    /// Keep these records, under increasing keys, until forgotten.
    Put(Vec<(u64, R)>),
    /// Read back the entries above `after` (one batch).
    Get { after: u64 },
    /// The entries at or below `upto` are needed no more.
    Forget { upto: u64 },
}

/// A spill store in memory: the simulator's (a crash keeps it, as a disk
/// would) and that of a runtime node without a data directory.
#[derive(Debug)]
pub struct MemorySpill<R> {
    /// Batches by their last key.
    batches: BTreeMap<u64, Vec<(u64, R)>>,
    bytes: u64,
}

impl<R> Default for MemorySpill<R> {
    fn default() -> Self {
        MemorySpill { batches: BTreeMap::new(), bytes: 0 }
    }
}

impl<R: Clone> MemorySpill<R> {
    /// Carries out a `Put` or a `Forget`; a `Get` is returned to be
    /// answered later (with [`MemorySpill::get`]). `weigh` tells an entry's
    /// size, for [`MemorySpill::bytes`].
    pub fn apply(&mut self, op: Spill<R>, weigh: impl Fn(&R) -> u64) -> Option<u64> {
        match op {
            Spill::Put(mut batch) => {
                if let Some(&newest) = self.batches.keys().next_back() {
                    batch.retain(|(k, _)| *k > newest);
                }
                let &(last, _) = batch.last()?;
                self.bytes += batch.iter().map(|(_, r)| weigh(r)).sum::<u64>();
                self.batches.insert(last, batch);
                None
            }
            Spill::Forget { upto } => {
                while let Some(entry) = self.batches.first_entry() {
                    if *entry.key() > upto {
                        break;
                    }
                    self.bytes -= entry.remove().iter().map(|(_, r)| weigh(r)).sum::<u64>();
                }
                None
            }
            Spill::Get { after } => Some(after),
        }
    }

    /// The answer to `Get { after }`.
    pub fn get(&self, after: u64) -> Vec<(u64, R)> {
        let Some((_, batch)) = self.batches.range(after + 1..).next() else { return Vec::new() };
        batch.iter().filter(|(k, _)| *k > after).cloned().collect()
    }

    /// The size of what is held, as `weigh` told it.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_answers_one_batch_above_its_key_and_forget_drops_whole_batches() {
        let mut s = MemorySpill::default();
        let one = |_: &&str| 1;
        assert_eq!(s.apply(Spill::Put(vec![(1, "a"), (2, "b"), (3, "c")]), one), None);
        assert_eq!(s.apply(Spill::Put(vec![(5, "d"), (8, "e")]), one), None);
        assert_eq!(s.apply(Spill::Get { after: 2 }, one), Some(2));
        assert_eq!(s.get(0), vec![(1, "a"), (2, "b"), (3, "c")]);
        assert_eq!(s.get(2), vec![(3, "c")], "keys above `after` only");
        assert_eq!(s.get(3), vec![(5, "d"), (8, "e")], "then the next batch");
        assert_eq!(s.get(8), vec![], "nothing more");
        s.apply(Spill::Put(vec![(7, "again"), (8, "again")]), one);
        assert_eq!(s.get(5), vec![(8, "e")], "what is held already is not put again");
        s.apply(Spill::Forget { upto: 4 }, one);
        assert_eq!(s.bytes(), 2, "the first batch is all at or below 4");
        s.apply(Spill::Forget { upto: 5 }, one);
        assert_eq!(s.bytes(), 2, "a batch with a key above stays whole");
        assert_eq!(s.get(5), vec![(8, "e")]);
        s.apply(Spill::Forget { upto: 8 }, one);
        assert!(s.is_empty() && s.bytes() == 0);
    }
}
