//! What the replicas of a node and its syncer share: the node's log, under
//! a lock, and how far it is synced.

use causeway_protocol::ReplicaId;
use causeway_storage::Log;
use rustc_hash::FxHashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::watch;

/// What the replicas of a node share.
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// How far the node's log is synced, for `always`.
    pub(super) synced: watch::Sender<u64>,
    pub(super) node: String,
    pub(super) wal: PathBuf,
    /// The syncer, to wake when records wait for it (`always`).
    pub(super) syncer: std::sync::OnceLock<std::thread::Thread>,
    /// The furthest node-log position a message waits for (`always`): the
    /// syncer syncs only while it is ahead of what is synced.
    pub(super) wanted: AtomicU64,
    /// Bytes the replicas wrote to the log since the node started.
    pub(super) written: AtomicU64,
}

pub(super) struct State {
    pub(super) log: Log,
    /// The node-log position each replica's newest checkpoint covers:
    /// the log keeps what lies past the least of them.
    pub(super) covered: FxHashMap<ReplicaId, u64>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A message waits for the node's log up to position `at`.
    pub(super) fn want(&self, at: u64) {
        if self.wanted.fetch_max(at, Ordering::AcqRel) < at {
            if let Some(thread) = self.syncer.get() {
                thread.unpark();
            }
        }
    }
}
