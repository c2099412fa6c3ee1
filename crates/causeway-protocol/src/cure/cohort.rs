//! The cohort's reads: a slice is served once its snapshot is installed
//! here, and parked until then.
//!
//! A read of snapshot `S` at partition `p` of DC `m` may be served when no
//! transaction can still commit at `p` with a time at or below `S[m]`:
//!
//! 1. `p`'s clock has passed `S[m]`, so its future proposals exceed it —
//!    Cure waits for the physical clock; H-Cure moves its HLC up instead;
//! 2. no transaction prepared at `p` with a proposal at or below `S[m]` is
//!    still waiting for its commit time;
//! 3. every transaction committed at or below `S[m]` is installed — here
//!    commits are installed in the store the moment they arrive, so this
//!    follows from 2.
//!
//! Remote entries never make a read wait: they come from the DC's stable
//! vector, which every partition has received.
//!
//! Waiting is event-driven: a read that cannot be served is parked, and the
//! parked reads are checked again when a commit resolves a prepared
//! transaction, when the timer armed for the clock condition fires, and on
//! the Δ_R tick.

use super::vector::{self, VectorTs};
use crate::contract::{Key, Value};
use crate::hlc::{PhysicalMicros, Timestamp};
use crate::mvstore::MvStore;
use crate::twopc::SliceRequest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a cohort keeps of a prepared transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    /// The snapshot it read from: its commit vector, but for the local entry.
    pub snapshot: VectorTs,
    pub writes: Vec<(Key, Option<Value>)>,
}

/// A read slice whose snapshot this partition may not have installed yet.
pub type SliceRead = SliceRequest<VectorTs>;

/// Read slices waiting for their snapshot, by its local entry (then arrival).
#[derive(Debug, Default)]
pub struct ParkedReads {
    parked: BTreeMap<(Timestamp, u64), SliceRead>,
    seq: u64,
    /// When the earliest armed wake-up timer fires (local clock).
    wake_at: Option<PhysicalMicros>,
}

impl ParkedReads {
    /// Parks `read`, whose snapshot's local entry is `t`.
    pub fn park(&mut self, t: Timestamp, read: SliceRead) {
        self.seq += 1;
        self.parked.insert((t, self.seq), read);
    }

    /// Takes the parked read with the smallest local entry, if it is at or
    /// below `bound`.
    pub fn take_servable(&mut self, bound: Timestamp) -> Option<SliceRead> {
        let entry = self.parked.first_entry()?;
        if entry.key().0 > bound {
            return None;
        }
        Some(entry.remove())
    }

    /// Cure: when the physical clock will have reached the smallest parked
    /// snapshot, if it has not yet at `now` and no earlier wake-up is armed.
    /// The caller arms a timer for that moment.
    pub fn wake_due(&mut self, now: PhysicalMicros) -> Option<PhysicalMicros> {
        let (&(t, _), _) = self.parked.first_key_value()?;
        if t <= Timestamp::from_physical(now) {
            return None; // the clock is not what it waits for
        }
        let due = t.physical() + u64::from(t.logical() > 0);
        if self.wake_at.is_some_and(|at| at <= due) {
            return None;
        }
        self.wake_at = Some(due);
        Some(due)
    }

    /// A wake-up timer fired: whichever it was, the next check re-arms from
    /// scratch (a drifting clock may not have reached the mark yet; an extra
    /// timer costs one spurious check).
    pub fn woken(&mut self) {
        self.wake_at = None;
    }

    pub fn len(&self) -> usize {
        self.parked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }
}

/// The freshest version of `key` visible in `snapshot`.
pub fn read_at(store: &MvStore<VectorTs>, key: &[u8], snapshot: &VectorTs) -> Option<Value> {
    let chain = store.chain(key)?;
    // A version is stamped with its commit vector's entry for its DC, so
    // none stamped above the snapshot's largest entry is visible.
    chain.newest_visible_upto(snapshot.max_entry(), |v| vector::visible(v, snapshot)).and_then(|v| v.value.clone())
}
