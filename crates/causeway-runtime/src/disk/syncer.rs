//! The thread that syncs a node's log: under `always` as soon as a message
//! waits for records (group commit: one `write` and one `fdatasync` cover
//! whatever every replica of the node appended while the last one ran,
//! including records no message waits for) — or, when only messages sent
//! lazily wait, [`LAZY_SYNC_DELAY`] later unless another sync comes first —
//! under `batch` every [`BATCH_INTERVAL`] when something was written.

use super::shared::Shared;
use super::{crash_stop_node, Fsync, BATCH_INTERVAL, LAZY_SYNC_DELAY};
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    // Since when a lazily sent message waits (`always`).
    let mut lazy_since: Option<Instant> = None;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        // Under `always` only what a message waits for calls for a sync —
        // at once, or within the lazy delay (records nobody waits for go
        // with it); under `batch` anything written; and everything at the
        // end.
        let call = match fsync {
            Fsync::Always if !stopping => {
                if shared.wanted.load(Ordering::Acquire) > synced {
                    Call::Now
                } else if shared.wanted_soon.load(Ordering::Acquire) > synced {
                    let left = LAZY_SYNC_DELAY.saturating_sub(lazy_since.get_or_insert_with(Instant::now).elapsed());
                    if left.is_zero() {
                        Call::Now
                    } else {
                        Call::In(left)
                    }
                } else {
                    Call::NotYet
                }
            }
            _ => Call::Now,
        };
        let fresh = match call {
            Call::Now => shared.sync_past(synced, &mut tail).unwrap_or_else(|e| crash_stop_node(&shared.node, &e)),
            Call::In(_) | Call::NotYet => None,
        };
        match (fresh, call) {
            (Some(target), _) => {
                synced = target;
                lazy_since = None;
                shared.synced.send_replace(synced);
                if fsync == Fsync::Batch && !stopping {
                    std::thread::sleep(BATCH_INTERVAL);
                }
            }
            (None, _) if stopping => return,
            // A lazy wait: woken sooner by a message that may not wait.
            (None, Call::In(left)) => std::thread::park_timeout(left),
            (None, _) => match fsync {
                Fsync::Batch => std::thread::sleep(BATCH_INTERVAL),
                // Woken when a message waits (or by the stop).
                _ => std::thread::park(),
            },
        }
    }
}

/// What the syncer's next round does.
#[derive(Clone, Copy)]
enum Call {
    /// Sync what was written.
    Now,
    /// A lazily sent message waits: sync after this long, or sooner if
    /// asked.
    In(Duration),
    /// Nothing waits: sleep until something does.
    NotYet,
}
