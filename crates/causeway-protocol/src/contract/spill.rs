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

use std::collections::{BTreeMap, VecDeque};

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

/// What a spill operation, carried out, tells its replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done<R> {
    /// The batch whose last key is this is on disk.
    Spilled(u64),
    /// The answer to `Spill::Get { after }`: `after` and the entries.
    Unspilled(u64, Vec<(u64, R)>),
}

/// A replica's spill operations not carried out yet, in order, each with
/// the length of its log when it was asked for: a `Put` waits until that
/// much is durable. The simulator's and the runtime's, as [`super::SendGate`]
/// is for messages.
#[derive(Debug)]
pub struct SpillQueue<R> {
    ops: VecDeque<(Spill<R>, usize)>,
}

impl<R> Default for SpillQueue<R> {
    fn default() -> Self {
        SpillQueue { ops: VecDeque::new() }
    }
}

/// The next spill operation of a [`SpillQueue`].
#[derive(Debug, PartialEq, Eq)]
pub enum Next<R> {
    /// Carry it out now.
    Ready(Spill<R>),
    /// The next is a `Put` that waits for the first this many records of
    /// the log to be durable.
    WaitFor(usize),
    Empty,
}

impl<R> SpillQueue<R> {
    /// Takes a step's operations, once its records are appended: the log
    /// is `appended` records long.
    pub fn take(&mut self, ops: &mut Vec<Spill<R>>, appended: usize) {
        self.ops.extend(ops.drain(..).map(|op| (op, appended)));
    }

    /// The next operation, with the first `durable` records of the log
    /// durable.
    pub fn next(&mut self, durable: usize) -> Next<R> {
        match self.ops.front() {
            None => Next::Empty,
            Some((Spill::Put(_), needs)) if durable < *needs => Next::WaitFor(*needs),
            Some(_) => self.ops.pop_front().map_or(Next::Empty, |(op, _)| Next::Ready(op)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// A crash: what the disk had not done yet is not done.
    pub fn clear(&mut self) {
        self.ops.clear();
    }
}

/// A spill store in memory: the simulator's (a crash keeps it, as a disk
/// would) and that of a runtime node without a data directory.
#[derive(Debug)]
pub struct MemorySpill<R> {
    /// Batches by their last key.
    batches: BTreeMap<u64, Vec<(u64, R)>>,
}

impl<R> Default for MemorySpill<R> {
    fn default() -> Self {
        MemorySpill { batches: BTreeMap::new() }
    }
}

impl<R: Clone> MemorySpill<R> {
    /// Carries out `op` as the contract says; what the replica is to hear.
    pub fn carry_out(&mut self, op: Spill<R>) -> Option<Done<R>> {
        match op {
            Spill::Put(mut batch) => {
                let &(last, _) = batch.last()?;
                // Held already (put again after a crash): on disk all the same.
                if let Some(&newest) = self.batches.keys().next_back() {
                    batch.retain(|(k, _)| *k > newest);
                }
                if !batch.is_empty() {
                    self.batches.insert(last, batch);
                }
                Some(Done::Spilled(last))
            }
            Spill::Forget { upto } => {
                while let Some(entry) = self.batches.first_entry() {
                    if *entry.key() > upto {
                        break;
                    }
                    entry.remove();
                }
                None
            }
            Spill::Get { after } => Some(Done::Unspilled(after, self.get(after))),
        }
    }

    fn get(&self, after: u64) -> Vec<(u64, R)> {
        let Some((_, batch)) = self.batches.range(after + 1..).next() else { return Vec::new() };
        batch.iter().filter(|(k, _)| *k > after).cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(s: &mut MemorySpill<&'static str>, after: u64) -> Vec<(u64, &'static str)> {
        match s.carry_out(Spill::Get { after }) {
            Some(Done::Unspilled(a, entries)) if a == after => entries,
            other => panic!("a get is answered with what it asked: {other:?}"),
        }
    }

    #[test]
    fn a_get_answers_one_batch_above_its_key_and_forget_drops_whole_batches() {
        let mut s = MemorySpill::default();
        assert_eq!(s.carry_out(Spill::Put(vec![(1, "a"), (2, "b"), (3, "c")])), Some(Done::Spilled(3)));
        assert_eq!(s.carry_out(Spill::Put(vec![(5, "d"), (8, "e")])), Some(Done::Spilled(8)));
        assert_eq!(get(&mut s, 0), vec![(1, "a"), (2, "b"), (3, "c")]);
        assert_eq!(get(&mut s, 2), vec![(3, "c")], "keys above `after` only");
        assert_eq!(get(&mut s, 3), vec![(5, "d"), (8, "e")], "then the next batch");
        assert_eq!(get(&mut s, 8), vec![], "nothing more");
        let again = s.carry_out(Spill::Put(vec![(7, "again"), (8, "again")]));
        assert_eq!(again, Some(Done::Spilled(8)), "on disk all the same: the replica hears it");
        assert_eq!(get(&mut s, 5), vec![(8, "e")], "what is held already is not put again");
        assert_eq!(s.carry_out(Spill::Forget { upto: 4 }), None);
        assert_eq!(get(&mut s, 0), vec![(5, "d"), (8, "e")], "the first batch is all at or below 4");
        s.carry_out(Spill::Forget { upto: 5 });
        assert_eq!(get(&mut s, 0), vec![(5, "d"), (8, "e")], "a batch with a key above stays whole");
        s.carry_out(Spill::Forget { upto: 8 });
        assert!(s.is_empty());
    }

    #[test]
    fn a_put_waits_for_the_records_before_it_and_what_follows_waits_behind_it() {
        let mut q = SpillQueue::default();
        let mut ops = vec![Spill::Get { after: 0 }, Spill::Put(vec![(1, "a")]), Spill::Forget { upto: 0 }];
        q.take(&mut ops, 5);
        assert!(ops.is_empty());
        assert_eq!(q.next(3), Next::Ready(Spill::Get { after: 0 }), "a get waits for nothing");
        assert_eq!(q.next(3), Next::WaitFor(5), "the put waits for the 5 records appended before it");
        assert_eq!(q.next(4), Next::WaitFor(5), "and what follows it waits too");
        assert_eq!(q.next(5), Next::Ready(Spill::Put(vec![(1, "a")])));
        assert_eq!(q.next(5), Next::Ready(Spill::Forget { upto: 0 }));
        assert_eq!(q.next(5), Next::Empty);
        assert!(q.is_empty());
    }
}
