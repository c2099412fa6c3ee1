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
use crate::mvstore::MvStore;
use crate::twopc::SliceRequest;
use serde::{Deserialize, Serialize};

/// What a cohort keeps of a prepared transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    /// The snapshot it read from: its commit vector, but for the local entry.
    pub snapshot: VectorTs,
    pub writes: Vec<(Key, Option<Value>)>,
}

/// A read slice whose snapshot this partition may not have installed yet.
pub type SliceRead = SliceRequest<VectorTs>;

/// Cure's parked reads, by their snapshot's local entry.
pub type ParkedReads = crate::twopc::ParkedReads<VectorTs>;

/// The freshest version of `key` visible in `snapshot`.
pub fn read_at(store: &MvStore<VectorTs>, key: &[u8], snapshot: &VectorTs) -> Option<Value> {
    let chain = store.chain(key)?;
    // A version is stamped with its commit vector's entry for its DC, so
    // none stamped above the snapshot's largest entry is visible.
    chain.newest_visible_upto(snapshot.max_entry(), |v| vector::visible(v, snapshot)).and_then(|v| v.value.clone())
}
