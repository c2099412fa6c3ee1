//! The log of a replica under `fsync = "batch"` or `"never"`, written by
//! the replica task itself.
//!
//! Under those modes a record is durable once handed to the OS, which a
//! `write` to the page cache does in microseconds. Handing the records to a
//! disk thread and waiting for its word, as `always` must (a sync takes a
//! millisecond or more and must not stall the replica), cost more than the
//! write: a fifth of the CPU of a loaded node went to waking threads and
//! switching between them (docs/BENCHMARKS.md, "What durability costs").
//! So the task encodes and writes the records of each step itself, and
//! they count as durable at once; under `batch` a syncer thread
//! (`fdatasync` every [`BATCH_INTERVAL`], when something was written) keeps
//! a machine crash from losing more than that.
//!
//! A checkpoint is written by a thread of its own, which takes the log with
//! it: records of the steps meanwhile wait in memory (and the messages that
//! depend on them with them, as they would behind a checkpoint on the disk
//! thread), and are written as soon as the log is back.

use super::{crash_stop, encode, replica_name, write_checkpoint, Fsync, BATCH_INTERVAL};
use causeway_protocol::contract::RecordLog;
use causeway_protocol::ReplicaId;
use causeway_storage::{Log, StorageError};
use serde::Serialize;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// What a checkpoint's thread gives back: the log, and the checkpoint's size.
type Returned = (Log, u64);

pub struct InlineLog<R> {
    id: ReplicaId,
    /// `None` while a checkpoint's thread holds it.
    log: Option<Log>,
    /// Records appended while the log was away, in order.
    held: Vec<R>,
    appended: usize,
    durable: usize,
    buf: Vec<u8>,
    checkpoint: Option<(oneshot::Receiver<Returned>, std::thread::JoinHandle<()>)>,
    /// The size of the last checkpoint taken (or refused as too large).
    checkpoint_bytes: u64,
    checkpoint_min_bytes: u64,
    syncer: Option<Syncer>,
}

impl<R: Serialize + Send + 'static> InlineLog<R> {
    pub fn new(id: ReplicaId, log: Log, fsync: Fsync, checkpoint_bytes: u64, checkpoint_min_bytes: u64) -> Self {
        debug_assert!(fsync != Fsync::Always, "always syncs on the disk thread");
        let durable = log.len() as usize;
        let syncer = (fsync == Fsync::Batch).then(|| Syncer::start(id, &log));
        InlineLog {
            id,
            log: Some(log),
            held: Vec::new(),
            appended: durable,
            durable,
            buf: Vec::new(),
            checkpoint: None,
            checkpoint_bytes,
            checkpoint_min_bytes,
            syncer,
        }
    }

    /// Writes `records` to the log and hands them to the OS: durable.
    fn write(&mut self, records: &[R]) {
        let id = self.id;
        let fail = |e: StorageError| -> ! { crash_stop(id, &e) };
        let log = self.log.as_mut().expect("the log is here");
        let tail = log.tail_base();
        for record in records {
            log.append(encode(&mut self.buf, record)).unwrap_or_else(|e| fail(e));
        }
        log.write_through().unwrap_or_else(|e| fail(e));
        if let Some(syncer) = &self.syncer {
            syncer.written(log, tail);
        }
    }

    /// Whether the records since the last checkpoint call for a new one,
    /// none being under way (see [`super::CHECKPOINT_MIN_BYTES`]).
    pub fn checkpoint_due(&self) -> bool {
        let Some(log) = &self.log else { return false };
        log.bytes_since_checkpoint() >= self.checkpoint_min_bytes.max(self.checkpoint_bytes)
    }

    /// Replaces everything appended so far with `state`, on a thread of its
    /// own; the records of later steps wait for it ([`Self::wait_durable`]).
    pub fn checkpoint(&mut self, state: Vec<R>) {
        let Some(mut log) = self.log.take() else { return };
        let (tx, rx) = oneshot::channel();
        let id = self.id;
        let thread = std::thread::Builder::new().name(format!("checkpoint {}", replica_name(id))).spawn(move || {
            let size = write_checkpoint(&mut log, &mut Vec::new(), &state, id);
            let _ = tx.send((log, size));
        });
        let thread =
            thread.unwrap_or_else(|e| crash_stop(id, &format_args!("cannot start a checkpoint's thread: {e}")));
        self.checkpoint = Some((rx, thread));
    }

    /// Waits for a checkpoint under way to give the log back, then writes
    /// what waited for it; never returns when none is under way.
    pub async fn wait_durable(&mut self) {
        let Some((rx, _)) = self.checkpoint.as_mut() else { return std::future::pending().await };
        let Ok((log, size)) = rx.await else {
            // The thread panicked: the log went with it.
            crash_stop(self.id, &"the checkpoint's thread failed")
        };
        self.checkpoint = None;
        self.checkpoint_bytes = size;
        if let Some(syncer) = &self.syncer {
            // Always a new file, even where it took the old tail's name.
            syncer.replace_tail(&log);
        }
        self.log = Some(log);
        let held = std::mem::take(&mut self.held);
        self.write(&held);
        self.durable = self.appended;
    }
}

impl<R: Serialize + Send + 'static> RecordLog<R> for InlineLog<R> {
    fn append_all(&mut self, records: &mut Vec<R>) -> usize {
        if records.is_empty() {
            return self.appended;
        }
        self.appended += records.len();
        if self.log.is_some() {
            self.write(records);
            records.clear();
            self.durable = self.appended;
        } else {
            self.held.append(records);
        }
        self.appended
    }

    fn durable(&self) -> usize {
        self.durable
    }
}

impl<R> Drop for InlineLog<R> {
    /// The replica stopped: a checkpoint under way is waited for (it syncs
    /// itself), and what was written is synced, so the log is closed when
    /// the replica's task has ended.
    fn drop(&mut self) {
        if let Some((_, thread)) = self.checkpoint.take() {
            let _ = thread.join();
        }
        if let Some(syncer) = self.syncer.take() {
            syncer.stop();
        }
        if let Some(log) = &mut self.log {
            let _ = log.sync();
        }
    }
}

/// The thread that syncs a `batch` log every [`BATCH_INTERVAL`] while
/// something was written since its last sync.
struct Syncer {
    id: ReplicaId,
    shared: Arc<SyncShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct SyncShared {
    /// The tail segment, as a second handle.
    tail: Mutex<(PathBuf, File)>,
    dirty: AtomicBool,
    stop: AtomicBool,
}

impl Syncer {
    fn start(id: ReplicaId, log: &Log) -> Syncer {
        let tail = log.tail_handle().unwrap_or_else(|e| crash_stop(id, &e));
        let shared = Arc::new(SyncShared {
            tail: Mutex::new((log.tail_path().to_path_buf(), tail)),
            dirty: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("sync {}", replica_name(id)))
            .spawn(move || loop {
                std::thread::sleep(BATCH_INTERVAL);
                let stopping = theirs.stop.load(Ordering::Acquire);
                if theirs.dirty.swap(false, Ordering::AcqRel) {
                    let tail = theirs.tail.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Err(e) = tail.1.sync_data() {
                        crash_stop(id, &format_args!("fdatasync {}: {e}", tail.0.display()));
                    }
                }
                if stopping {
                    return;
                }
            })
            .unwrap_or_else(|e| crash_stop(id, &format_args!("cannot start the sync thread: {e}")));
        Syncer { id, shared, thread: Some(thread) }
    }

    /// Something was written to `log`, whose tail began at position
    /// `before` the write: a rotation in it synced the old tail, and the
    /// new one is taken.
    fn written(&self, log: &Log, before: u64) {
        // A rotation starts the new tail at a position past the old one's.
        if log.tail_base() != before {
            self.replace_tail(log);
        }
        self.shared.dirty.store(true, Ordering::Release);
    }

    /// The log has a new tail (the old one was synced).
    fn replace_tail(&self, log: &Log) {
        let handle = log.tail_handle().unwrap_or_else(|e| crash_stop(self.id, &e));
        *self.shared.tail.lock().unwrap_or_else(PoisonError::into_inner) = (log.tail_path().to_path_buf(), handle);
    }

    fn stop(mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
