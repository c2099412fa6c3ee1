//! What a certifier keeps of each position of its partition's log, and
//! what it counts.

use super::entry::{ReadSet, SdurTxId};
use crate::contract::{Key, Value};
use crate::hlc::Timestamp;
use crate::ids::{DcId, PartitionId, ReplicaId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A partition's vote on a global transaction: how it certified there, the
/// timestamp it gives, and the transaction's position in its log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    pub commit: bool,
    pub ts: Timestamp,
    pub pos: u64,
}

/// Where an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// Nothing to certify: a leader's no-op, a fence, a part delivered twice.
    Empty,
    /// A local waiting for the concurrent entries it intersects to end.
    Waiting,
    /// A global this partition voted to commit, waiting for the others.
    Pending,
    Committed,
    Aborted,
}

impl State {
    pub fn resolved(self) -> bool {
        matches!(self, State::Empty | State::Committed | State::Aborted)
    }
}

/// One position of the log, as the certifier keeps it for the retention
/// window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Slot {
    pub tx: Option<SdurTxId>,
    pub global: bool,
    pub parts: Vec<PartitionId>,
    pub origin: DcId,
    pub reply_to: Option<ReplicaId>,
    pub reads: ReadSet,
    pub write_keys: Vec<Key>,
    /// The writes, until applied.
    pub writes: Option<Vec<(Key, Option<Value>)>>,
    pub state: State,
    pub applied: bool,
    /// The time its leader stamped on the entry.
    pub time: Timestamp,
    /// When its session gives it up ([`super::entry::Part::deadline`]).
    pub deadline: u64,
    /// A global's own vote timestamp, or a local's running maximum; the
    /// commit timestamp once committed.
    pub ts: Timestamp,
    /// A global's votes by partition (its own included).
    pub votes: BTreeMap<PartitionId, Vote>,
    /// A waiting local: how many entries it still waits for.
    pub blockers: u32,
    /// Later waiting locals to tell when this one ends, and whether they
    /// intersect it for sure (not by a filter's false hit).
    pub waiters: Vec<(u64, bool)>,
    /// Earlier committed entries it intersects, to be applied first.
    pub follows: Vec<u64>,
    pub why: Option<String>,
    /// Bloom audit: whether exact certification alone would abort it.
    pub exact_abort: bool,
    /// A fence's transaction.
    pub fenced: Option<SdurTxId>,
}

impl Slot {
    /// The keys the key index lists this entry under: what it read (when
    /// its reads are keys, not a filter) and what it wrote.
    pub fn touched_keys(&self) -> impl Iterator<Item = &Key> {
        let reads: &[Key] = match &self.reads {
            ReadSet::Keys(keys) => keys,
            ReadSet::Filter { .. } => &[],
        };
        reads.iter().chain(self.write_keys.iter())
    }

    pub fn empty() -> Slot {
        Slot {
            tx: None,
            global: false,
            parts: Vec::new(),
            origin: DcId(0),
            reply_to: None,
            reads: ReadSet::Keys(Vec::new()),
            write_keys: Vec::new(),
            writes: None,
            state: State::Empty,
            applied: true,
            time: Timestamp::ZERO,
            deadline: 0,
            ts: Timestamp::ZERO,
            votes: BTreeMap::new(),
            blockers: 0,
            waiters: Vec::new(),
            follows: Vec::new(),
            why: None,
            exact_abort: false,
            fenced: None,
        }
    }
}

/// What a certifier counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertifierCounters {
    pub committed: u64,
    pub aborted: u64,
    /// Aborts that exact certification would not have made (bloom audit;
    /// a global's counted by the partition whose filter made it abort).
    pub false_aborts: u64,
    /// Aborts of parts whose snapshot is older than the filters kept
    /// (bloom: the history of the last `K`), though within the retention.
    pub history_aborts: u64,
    /// Votes that contradict one already received from that partition, or
    /// name a partition the transaction does not touch: impossible from an
    /// honest, deterministic peer.
    pub votes_refused: u64,
    /// Locals that had to wait for a concurrent entry.
    pub waited: u64,
    /// Locals applied ahead of an earlier entry not yet applied.
    pub reordered: u64,
}

impl Slot {
    pub fn writes_key(&self, key: &[u8]) -> bool {
        self.write_keys.iter().any(|k| k.as_ref() == key)
    }
}

/// What a certifier remembers of one delivered transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Known {
    pub pos: u64,
    /// This partition's vote (a global's, or a fence's abort).
    pub vote: Option<Vote>,
    pub fenced: bool,
}
