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
    let fail = |why: &dyn std::fmt::Display| -> ! { crash_stop_node(&shared.node, why) };
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
        let target = {
            let mut state = shared.lock();
            let target = if called { state.log.len() } else { synced };
            if target > synced {
                // Under `always` the replicas leave their records to this
                // thread to hand to the OS.
                state.log.write_through().unwrap_or_else(|e| fail(&e));
                // A rotation synced the old tail; the records since are in
                // the new one.
                let base = state.log.tail_base();
                if tail.as_ref().map(|(b, _)| *b) != Some(base) {
                    let handle = state.log.tail_handle().unwrap_or_else(|e| fail(&e));
                    tail = Some((base, handle));
                }
            }
            target
        };
        if target > synced {
            let (_, file) = tail.as_ref().expect("taken above");
            if let Err(e) = file.sync_data() {
                fail(&format_args!("fdatasync {}: {e}", shared.wal.display()));
            }
            synced = target;
            shared.synced.send_replace(synced);
            if fsync == Fsync::Batch && !stopping {
                std::thread::sleep(BATCH_INTERVAL);
            }
        } else if stopping {
            return;
        } else {
            match fsync {
                Fsync::Batch => std::thread::sleep(BATCH_INTERVAL),
                // Woken when a message waits (or by the stop).
                _ => std::thread::park(),
            }
        }
    }
}
