//! What the replicas of a node and its syncer share: the node's log, under
//! a lock, and how far it is synced.

use causeway_protocol::ReplicaId;
use causeway_storage::Log;
use rustc_hash::FxHashMap;
use std::fs::File;
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

    /// Hands what the replicas appended to the OS and syncs it, if the log
    /// reaches past `synced`; returns how far it is synced then (`None`:
    /// nothing past `synced`). `tail` keeps the tail segment's handle, by
    /// its base, across calls (a rotation synced the old tail itself).
    pub(super) fn sync_past(&self, synced: u64, tail: &mut Option<(u64, File)>) -> Result<Option<u64>, String> {
        let target = {
            let mut state = self.lock();
            let target = state.log.len();
            if target <= synced {
                return Ok(None);
            }
            state.log.write_through().map_err(|e| e.to_string())?;
            let base = state.log.tail_base();
            if tail.as_ref().map(|(b, _)| *b) != Some(base) {
                *tail = Some((base, state.log.tail_handle().map_err(|e| e.to_string())?));
            }
            target
        };
        let (_, file) = tail.as_ref().expect("taken above");
        file.sync_data().map_err(|e| format!("fdatasync {}: {e}", self.wal.display()))?;
        Ok(Some(target))
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
