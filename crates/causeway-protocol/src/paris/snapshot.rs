//! PaRiS's snapshot: one timestamp, the UST a transaction started with
//! (§IV-A). A version is visible in it when its commit time is at or below
//! it — every replica of every partition has installed everything up to
//! the UST, so any replica serves the read at once.

use crate::hlc::Timestamp;
use crate::mvstore::Version;

impl crate::twopc::Snapshot for Timestamp {
    fn ceiling(&self) -> Timestamp {
        *self
    }

    fn floor(&self) -> Timestamp {
        *self
    }

    fn meet(&self, other: &Timestamp) -> Timestamp {
        (*self).min(*other)
    }
}

/// Alg. 3, line 5: `ut ≤ ust`.
pub fn visible(version: &Version<()>, ust: Timestamp) -> bool {
    version.stamp.ts <= ust
}
