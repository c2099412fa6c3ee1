//! The thread that syncs a node's log: under `always` as soon as a message
//! waits for records (group commit: one `write` and one `fdatasync` cover
//! whatever every replica of the node appended while the last one ran,
//! including records no message waits for), under `batch` every
//! [`BATCH_INTERVAL`] when something was written.

use super::shared::Shared;
use super::{crash_stop_node, Fsync, BATCH_INTERVAL};
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub(super) struct Syncer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Syncer {
    /// The syncer of a log under `fsync`; none under `never`.
    pub(super) fn start(shared: &Arc<Shared>, fsync: Fsync) -> std::io::Result<Option<Syncer>> {
        if fsync == Fsync::Never {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (theirs, stopping) = (shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("sync {}", shared.node))
            .spawn(move || run(&theirs, fsync, &stopping))?;
        let _ = shared.syncer.set(thread.thread().clone());
        Ok(Some(Syncer { stop, thread }))
    }

    /// Syncs what was written, and ends.
    pub(super) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

fn run(shared: &Shared, fsync: Fsync, stop: &AtomicBool) {
    let mut synced = *shared.synced.borrow();
    // The tail segment, as a handle of this thread's, by its base.
    let mut tail: Option<(u64, File)> = None;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        // Under `always` only what a message waits for calls for a sync
        // (records nobody waits for go with it); under `batch` anything
        // written; and everything at the end.
        let called = match fsync {
            Fsync::Always if !stopping => shared.wanted.load(Ordering::Acquire) > synced,
            _ => true,
        };
        let fresh = match called {
            true => shared.sync_past(synced, &mut tail).unwrap_or_else(|e| crash_stop_node(&shared.node, &e)),
            false => None,
        };
        match fresh {
            Some(target) => {
                synced = target;
                shared.synced.send_replace(synced);
                if fsync == Fsync::Batch && !stopping {
                    std::thread::sleep(BATCH_INTERVAL);
                }
            }
            None if stopping => return,
            None => match fsync {
                Fsync::Batch => std::thread::sleep(BATCH_INTERVAL),
                // Woken when a message waits (or by the stop).
                _ => std::thread::park(),
            },
        }
    }
}
