//! Read slices a cohort cannot serve yet, parked until the partition has
//! installed their snapshot, and woken by events (a commit resolved, the
//! apply round, a replicated group or heartbeat, a timer for the moment
//! the clock gets there) rather than polled: Cure's and H-Cure's reads, and
//! BPR's.

use super::SliceRequest;
use crate::hlc::{PhysicalMicros, Timestamp};
use std::collections::BTreeMap;

/// Read slices waiting for their snapshot, by the time this partition must
/// have installed (then arrival).
#[derive(Debug)]
pub struct ParkedReads<S> {
    parked: BTreeMap<(Timestamp, u64), SliceRequest<S>>,
    seq: u64,
    /// When the earliest armed wake-up timer fires (local clock).
    wake_at: Option<PhysicalMicros>,
}

impl<S> Default for ParkedReads<S> {
    fn default() -> Self {
        ParkedReads { parked: BTreeMap::new(), seq: 0, wake_at: None }
    }
}

impl<S> ParkedReads<S> {
    /// Parks `read`, which may be served once this partition has installed
    /// everything up to `t`.
    pub fn park(&mut self, t: Timestamp, read: SliceRequest<S>) {
        self.seq += 1;
        self.parked.insert((t, self.seq), read);
    }

    /// Takes the parked read with the smallest mark, if it is at or below
    /// `bound`.
    pub fn take_servable(&mut self, bound: Timestamp) -> Option<SliceRequest<S>> {
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
