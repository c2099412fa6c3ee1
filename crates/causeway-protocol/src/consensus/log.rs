//! A replica's copy of its group's log, in memory: the entries after the
//! last one compacted away (the *base*, whose effect lives in the owner's
//! snapshot), indexed from 1.

use crate::hlc::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One position of the log: the term of the leader that appended it, the
/// time that leader stamped on it (its clock, kept strictly increasing along
/// the log, so every replica reads the same time for an entry), and what it
/// carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry<E> {
    pub term: u64,
    pub time: Timestamp,
    pub payload: Payload<E>,
}

/// What an entry carries: the owner's data, or nothing — the entry a new
/// leader appends so that it may commit what earlier terms left (Raft §5.4.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Payload<E> {
    Noop,
    Data(E),
}

/// The entries of a log after its base.
#[derive(Clone, Debug)]
pub struct RaftLog<E> {
    /// Index and term of the last entry compacted away (0 and 0: none).
    base_index: u64,
    base_term: u64,
    /// `entries[i]` is the entry at index `base_index + 1 + i`.
    entries: VecDeque<Entry<E>>,
}

impl<E> Default for RaftLog<E> {
    fn default() -> Self {
        RaftLog { base_index: 0, base_term: 0, entries: VecDeque::new() }
    }
}

impl<E: Clone> RaftLog<E> {
    pub fn base_index(&self) -> u64 {
        self.base_index
    }

    pub fn base_term(&self) -> u64 {
        self.base_term
    }

    /// The index of the first entry held (one past the base).
    pub fn first_index(&self) -> u64 {
        self.base_index + 1
    }

    pub fn last_index(&self) -> u64 {
        self.base_index + self.entries.len() as u64
    }

    pub fn last_term(&self) -> u64 {
        self.entries.back().map_or(self.base_term, |e| e.term)
    }

    /// The time stamped on the last entry (zero for an empty log).
    pub fn last_time(&self) -> Timestamp {
        self.entries.back().map_or(Timestamp::ZERO, |e| e.time)
    }

    /// The term of the entry at `index`: the base's for the base, `None`
    /// below it (compacted) or beyond the last.
    pub fn term_at(&self, index: u64) -> Option<u64> {
        if index == self.base_index {
            return Some(self.base_term);
        }
        self.get(index).map(|e| e.term)
    }

    pub fn get(&self, index: u64) -> Option<&Entry<E>> {
        if index <= self.base_index {
            return None;
        }
        self.entries.get((index - self.base_index - 1) as usize)
    }

    /// Up to `max` entries from `from` on (none if `from` is compacted).
    pub fn entries_from(&self, from: u64, max: usize) -> Vec<Entry<E>> {
        if from <= self.base_index {
            return Vec::new();
        }
        let start = (from - self.base_index - 1) as usize;
        self.entries.iter().skip(start).take(max).cloned().collect()
    }

    pub fn push(&mut self, entry: Entry<E>) {
        self.entries.push_back(entry);
    }

    /// Drops every entry at `from` and after.
    pub fn truncate_from(&mut self, from: u64) {
        let keep = from.saturating_sub(self.base_index + 1) as usize;
        self.entries.truncate(keep);
    }

    /// Forgets the entries up to `index` (their effect is in a snapshot):
    /// `index` becomes the base. Nothing happens unless `index` is held.
    pub fn compact_to(&mut self, index: u64) {
        let Some(term) = self.term_at(index) else { return };
        if index <= self.base_index {
            return;
        }
        let drop = (index - self.base_index) as usize;
        self.entries.drain(..drop);
        self.base_index = index;
        self.base_term = term;
    }

    /// Starts over from a snapshot that ends at `index` of `term`: entries
    /// that follow it and agree with it stay, everything else goes.
    pub fn reset_to(&mut self, index: u64, term: u64) {
        if self.term_at(index) == Some(term) && index >= self.base_index {
            self.compact_to(index);
            return;
        }
        self.entries.clear();
        self.base_index = index;
        self.base_term = term;
    }

    /// The number of entries held in memory.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(term: u64) -> Entry<u32> {
        Entry { term, time: Timestamp(term), payload: Payload::Noop }
    }

    fn log_of(terms: &[u64]) -> RaftLog<u32> {
        let mut log = RaftLog::default();
        for &t in terms {
            log.push(entry(t));
        }
        log
    }

    #[test]
    fn indexes_start_at_one_and_the_base_has_a_term() {
        let log = log_of(&[1, 1, 2]);
        assert_eq!((log.first_index(), log.last_index(), log.last_term()), (1, 3, 2));
        assert_eq!(log.term_at(0), Some(0));
        assert_eq!(log.term_at(3), Some(2));
        assert_eq!(log.term_at(4), None);
        assert_eq!(log.entries_from(2, 10).iter().map(|e| e.term).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn compaction_moves_the_base_and_keeps_what_follows() {
        let mut log = log_of(&[1, 1, 2, 3]);
        log.compact_to(2);
        assert_eq!((log.base_index(), log.base_term(), log.first_index(), log.last_index()), (2, 1, 3, 4));
        assert_eq!(log.term_at(1), None, "compacted");
        assert_eq!(log.term_at(2), Some(1), "the base");
        assert!(log.entries_from(2, 10).is_empty(), "a compacted index yields nothing");
        assert_eq!(log.get(3).map(|e| e.term), Some(2));
        log.compact_to(9);
        assert_eq!(log.base_index(), 2, "an index not held compacts nothing");
        log.truncate_from(4);
        assert_eq!(log.last_index(), 3);
        log.truncate_from(1);
        assert_eq!(log.last_index(), 2, "truncation never reaches below the base");
    }

    #[test]
    fn a_snapshot_keeps_the_entries_that_agree_with_it() {
        let mut log = log_of(&[1, 2, 2]);
        log.reset_to(2, 2);
        assert_eq!((log.base_index(), log.last_index()), (2, 3));
        let mut other = log_of(&[1, 2, 2]);
        other.reset_to(2, 5);
        assert_eq!((other.base_index(), other.base_term(), other.last_index()), (2, 5, 2), "a disagreeing log goes");
        let mut short = log_of(&[1]);
        short.reset_to(7, 3);
        assert_eq!((short.base_index(), short.last_index(), short.last_term()), (7, 7, 3));
    }
}
