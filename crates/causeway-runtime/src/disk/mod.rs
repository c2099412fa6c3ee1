//! A replica's records on disk: its write-ahead log (`causeway-storage`) in
//! a directory of its own under the node's data directory, and the record
//! log the replica task's send gate appends to.
//!
//! Under `fsync = "always"`, a thread writes and syncs the log. Group
//! commit: it takes every record the task sent since its last round,
//! writes them, syncs once, and tells the task how many records are
//! durable; the messages that waited for them leave then. Under `batch` and
//! `never` the replica task writes the log itself ([`inline`]): a record is
//! durable once handed to the OS, and a thread round trip per step would
//! cost more than the write. What "durable" means is the [`Fsync`] mode's:
//!
//! * `always` — synced to the disk: survives a crash of the machine;
//! * `batch` — handed to the OS at once (survives a crash of the process)
//!   and synced every [`BATCH_INTERVAL`]: a machine crash loses at most that
//!   much acknowledged work;
//! * `never` — handed to the OS, never synced: for benchmarks.
//!
//! Checkpoints: once the records appended since the last checkpoint reach
//! [`DiskLog::checkpoint_due`]'s threshold, the replica task takes the
//! replica's checkpoint ([`Replica::checkpoint`], compacted records) right
//! after appending a step's records and sends it down the same channel; the
//! disk thread takes requests in order, so the checkpoint replaces exactly
//! the records before it ([`Log::checkpoint`], crash-safe, durable at once).
//! (Under `batch` and `never`, a thread of its own writes it, with the log,
//! and later records wait for it.)
//! A restart replays the checkpoint and the records after it, so restart
//! time and disk use follow the state held, not the history.
//!
//! [`Replica::checkpoint`]: causeway_protocol::Replica::checkpoint

pub mod inline;

use crate::error::StartError;
use causeway_protocol::contract::RecordLog;
use causeway_protocol::ReplicaId;
use causeway_storage::{Identity, Log, StorageError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;
use tokio::sync::mpsc;

/// When records count as durable: see the module's documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fsync {
    #[default]
    Always,
    Batch,
    Never,
}

impl FromStr for Fsync {
    type Err = String;
    fn from_str(s: &str) -> Result<Fsync, String> {
        match s {
            "always" => Ok(Fsync::Always),
            "batch" => Ok(Fsync::Batch),
            "never" => Ok(Fsync::Never),
            other => Err(format!("fsync = {other:?}: expected \"always\", \"batch\" or \"never\"")),
        }
    }
}

impl Fsync {
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::Batch => "batch",
            Fsync::Never => "never",
        }
    }
}

/// How often `fsync = "batch"` syncs.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(5);

/// The default of the smallest log tail that calls for a checkpoint. A
/// checkpoint is due once the records since the last one reach this or the
/// last checkpoint's size, whichever is larger: the log then stays within
/// about twice the state (plus this), and writing checkpoints costs at most
/// as many bytes as the records themselves — a large state is not rewritten
/// for every few records. 64 MiB replays in well under a second
/// (docs/BENCHMARKS.md, "Recovery time").
pub const CHECKPOINT_MIN_BYTES: u64 = 64 << 20;

/// The directory of replica `id` under a node's data directory.
pub fn replica_dir(data_dir: &Path, id: ReplicaId) -> PathBuf {
    data_dir.join(replica_name(id))
}

/// What a replica's log held when its node started.
pub struct Opened<R> {
    pub log: ReplicaLog<R>,
    /// The checkpoint's records, then those after it. Empty for a new log:
    /// the replica starts new rather than recovering.
    pub records: Vec<R>,
    /// How many of `records` came from a checkpoint (`None`: the log has
    /// none).
    pub from_checkpoint: Option<usize>,
}

/// What the disk thread is asked to do, in the order the replica task asks.
/// Records travel as they are and are serialized on the disk thread: the
/// replica task, which every message of the replica waits for, does not pay
/// for it.
enum Request<R> {
    /// Append these records.
    Records(Vec<R>),
    /// Replace everything appended so far with these records: the
    /// replica's checkpoint, taken after its last append.
    Checkpoint(Vec<R>),
}

/// What the disk thread reports after a round.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Progress {
    /// Records durable.
    durable: usize,
    /// Bytes of record frames since the last checkpoint.
    since_checkpoint: u64,
    /// The size of the last checkpoint asked for (taken, or too large).
    checkpoint_bytes: u64,
    /// Checkpoints asked for and done with (taken or skipped).
    checkpoints: u64,
}

/// Opens (or creates) the log of replica `id` of node `node` in cluster
/// `cluster`, reads back its records, and starts its disk thread. Damage
/// other than a torn tail, a directory of another cluster or node, or a
/// record this version cannot read stops the start with a message naming
/// the file. A log that is new gets `first` (usually nothing), durable
/// before anything else runs — a re-seeding replica's mark
/// ([`causeway_protocol::Protocol::reseed`]): a crash right after the start
/// must not leave a log that reads as a replica that never held anything.
/// Returned among the records like any other.
#[allow(clippy::too_many_arguments)]
pub fn open<R: Serialize + DeserializeOwned + Send + 'static>(
    data_dir: &Path,
    cluster: &str,
    node: &str,
    id: ReplicaId,
    fsync: Fsync,
    checkpoint_min_bytes: u64,
    first: Vec<R>,
) -> Result<Opened<R>, StartError> {
    let dir = replica_dir(data_dir, id);
    let identity = identity(cluster, node, id);
    let storage = |e: StorageError| StartError::Storage(format!("{}: {e}", dir.display()));
    std::fs::create_dir_all(data_dir)
        .map_err(|e| StartError::Storage(format!("cannot create the data directory {}: {e}", data_dir.display())))?;
    let (mut log, recovered) = Log::open(&dir, &identity).map_err(storage)?;
    if let Some(torn) = &recovered.torn_tail {
        tracing::warn!("replica {}: cut a torn log tail: {torn:?}", replica_name(id));
    }
    let unreadable = |what: String, e: postcard::Error| {
        StartError::Storage(format!(
            "{}: {what} cannot be read by this version ({e}); the log is left as it is",
            dir.display()
        ))
    };
    let checkpoint_bytes = recovered.checkpoint.as_ref().map_or(0, |c| c.len() as u64);
    let mut records: Vec<R> = match &recovered.checkpoint {
        Some(bytes) => postcard::from_bytes(bytes)
            .map_err(|e| unreadable(format!("the checkpoint at record {}", recovered.base), e))?,
        None => Vec::new(),
    };
    let from_checkpoint = recovered.checkpoint.as_ref().map(|_| records.len());
    records.reserve(recovered.records.len());
    for (i, bytes) in recovered.records.iter().enumerate() {
        let record = postcard::from_bytes(bytes)
            .map_err(|e| unreadable(format!("record {}", recovered.base + i as u64 + 1), e))?;
        records.push(record);
    }
    if recovered.is_empty() && !first.is_empty() {
        for record in &first {
            let bytes = postcard::to_allocvec(record).expect("records serialize");
            log.append(&bytes).map_err(storage)?;
        }
        log.sync().map_err(storage)?;
        records = first;
    }
    let len = log.len() as usize;
    if fsync != Fsync::Always {
        let log = inline::InlineLog::new(id, log, fsync, checkpoint_bytes, checkpoint_min_bytes);
        return Ok(Opened { log: ReplicaLog::Inline(Box::new(log)), records, from_checkpoint });
    }
    let progress =
        Progress { durable: len, since_checkpoint: log.bytes_since_checkpoint(), checkpoint_bytes, checkpoints: 0 };
    let (requests, thread_rx) = std_mpsc::channel();
    let (progress_tx, progress_rx) = mpsc::unbounded_channel();
    let name = format!("disk {}", replica_name(id));
    let thread = std::thread::Builder::new()
        .name(name)
        .spawn(move || disk_thread(log, thread_rx, progress_tx, progress, id))
        .map_err(|e| StartError::Storage(format!("cannot start the disk thread of {}: {e}", dir.display())))?;
    let log = DiskLog {
        requests,
        thread: Some(thread),
        reports: progress_rx,
        appended: len,
        progress,
        checkpoints: 0,
        checkpoint_min_bytes,
    };
    Ok(Opened { log: ReplicaLog::Disk(log), records, from_checkpoint })
}

/// The replica task's side of its log: records go to the disk thread, and
/// word of what is durable comes back.
pub struct DiskLog<R> {
    requests: std_mpsc::Sender<Request<R>>,
    /// Joined when the log is dropped: what was sent is on disk then.
    thread: Option<std::thread::JoinHandle<()>>,
    reports: mpsc::UnboundedReceiver<Progress>,
    appended: usize,
    /// The disk thread's last report.
    progress: Progress,
    /// Checkpoints asked for.
    checkpoints: u64,
    checkpoint_min_bytes: u64,
}

impl<R> DiskLog<R> {
    /// Waits for the disk thread to report more records durable; returns
    /// whether it did (`false`: the thread is gone).
    pub async fn wait_durable(&mut self) -> bool {
        match self.reports.recv().await {
            Some(p) => {
                self.progress = p;
                while let Ok(p) = self.reports.try_recv() {
                    self.progress = p;
                }
                true
            }
            None => false,
        }
    }

    /// Whether records wait to be durable.
    pub fn is_behind(&self) -> bool {
        self.progress.durable < self.appended
    }

    /// Whether the records since the last checkpoint call for a new one
    /// (see [`CHECKPOINT_MIN_BYTES`]), none being under way. The disk
    /// thread counts the bytes, so the answer trails the last appends by
    /// a round of the thread.
    pub fn checkpoint_due(&self) -> bool {
        let p = &self.progress;
        p.checkpoints == self.checkpoints && p.since_checkpoint >= self.checkpoint_min_bytes.max(p.checkpoint_bytes)
    }

    /// Replaces everything appended so far with `state`, the replica's
    /// checkpoint taken after its last append. Durable once the disk thread
    /// reports the log's length. A checkpoint too large for the log is not
    /// taken (the log grows on), and said so.
    pub fn checkpoint(&mut self, state: Vec<R>) {
        self.checkpoints += 1;
        // A closed channel means the disk thread stopped the process.
        let _ = self.requests.send(Request::Checkpoint(state));
    }
}

impl<R> Drop for DiskLog<R> {
    /// The replica stopped: the disk thread takes what was sent, syncs it
    /// and ends, so the log is closed when the replica's task has ended.
    fn drop(&mut self) {
        let (closed, _) = std_mpsc::channel();
        drop(std::mem::replace(&mut self.requests, closed));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A replica's log: on disk, written by a thread that syncs it (`always`)
/// or by the replica task (`batch`, `never`), or — for a node without a
/// data directory — nowhere, every record counting as durable at once and
/// kept by nothing.
pub enum ReplicaLog<R> {
    Disk(DiskLog<R>),
    Inline(Box<inline::InlineLog<R>>),
    Nowhere { appended: usize },
}

impl<R: Serialize + Send + 'static> ReplicaLog<R> {
    /// Whether a checkpoint is due ([`DiskLog::checkpoint_due`]); never for
    /// a log that is nowhere.
    pub fn checkpoint_due(&self) -> bool {
        match self {
            ReplicaLog::Disk(log) => log.checkpoint_due(),
            ReplicaLog::Inline(log) => log.checkpoint_due(),
            ReplicaLog::Nowhere { .. } => false,
        }
    }

    /// Replaces everything appended so far with `state`, the replica's
    /// checkpoint taken after its last append.
    pub fn checkpoint(&mut self, state: Vec<R>) {
        match self {
            ReplicaLog::Disk(log) => log.checkpoint(state),
            ReplicaLog::Inline(log) => log.checkpoint(state),
            ReplicaLog::Nowhere { .. } => {}
        }
    }

    /// Waits until more records are durable; never returns for a log that
    /// is nowhere or has nothing pending.
    pub async fn wait_durable(&mut self) {
        match self {
            ReplicaLog::Disk(log) if log.is_behind() => {
                if !log.wait_durable().await {
                    std::future::pending::<()>().await;
                }
            }
            ReplicaLog::Inline(log) => log.wait_durable().await,
            _ => std::future::pending().await,
        }
    }
}

impl<R: Serialize + Send + 'static> RecordLog<R> for ReplicaLog<R> {
    fn append_all(&mut self, records: &mut Vec<R>) -> usize {
        match self {
            ReplicaLog::Disk(log) => log.append_all(records),
            ReplicaLog::Inline(log) => log.append_all(records),
            ReplicaLog::Nowhere { appended } => {
                *appended += records.len();
                records.clear();
                *appended
            }
        }
    }

    fn durable(&self) -> usize {
        match self {
            ReplicaLog::Disk(log) => log.durable(),
            ReplicaLog::Inline(log) => log.durable(),
            ReplicaLog::Nowhere { appended } => *appended,
        }
    }
}

impl<R> RecordLog<R> for DiskLog<R> {
    fn append_all(&mut self, records: &mut Vec<R>) -> usize {
        if records.is_empty() {
            return self.appended;
        }
        self.appended += records.len();
        // A closed channel means the disk thread stopped the process.
        let _ = self.requests.send(Request::Records(std::mem::take(records)));
        self.appended
    }

    fn durable(&self) -> usize {
        self.progress.durable
    }
}

/// `value` serialized into `buf` (emptied first).
fn encode<'b, T: Serialize + ?Sized>(buf: &'b mut Vec<u8>, value: &T) -> &'b [u8] {
    buf.clear();
    *buf = postcard::to_extend(value, std::mem::take(buf)).expect("protocol records serialize");
    buf
}

/// A replica's name in messages and file names: `dc0-p1`.
pub fn replica_name(id: ReplicaId) -> String {
    format!("dc{}-p{}", id.dc.0, id.partition.0)
}

/// The identity a replica's log carries: its cluster, and its node and
/// replica (`node-a/dc0-p1`); another's log is refused.
pub fn identity(cluster: &str, node: &str, id: ReplicaId) -> Identity {
    Identity::new(cluster, format!("{node}/{}", replica_name(id)))
}

/// A replica that cannot keep its promises stops the process at once
/// (crash-stop), saying why on the log and on stderr.
pub fn crash_stop(id: ReplicaId, why: &dyn std::fmt::Display) -> ! {
    let name = replica_name(id);
    tracing::error!("replica {name}: {why}; stopping the process");
    eprintln!("causeway: replica {name}: {why}; stopping the process");
    std::process::abort();
}

/// Replaces everything appended to `log` so far with `state`, durable at
/// once; returns its size. A checkpoint too large for the log is refused
/// before anything is written (the log grows on), and said so; any other
/// failure stops the process.
fn write_checkpoint<R: Serialize>(log: &mut Log, buf: &mut Vec<u8>, state: &[R], id: ReplicaId) -> u64 {
    let bytes = encode(buf, state);
    let size = bytes.len() as u64;
    match log.checkpoint(bytes) {
        Ok(()) => {}
        Err(StorageError::TooLarge { len, .. }) => {
            tracing::warn!("replica {}: a checkpoint of {len} bytes is too large to take", replica_name(id))
        }
        Err(e) => crash_stop(id, &e),
    }
    size
}

/// The disk thread of an `always` log: writes what arrives, syncs it once
/// per round, reports how far. A failed write or sync leaves the replica unable to
/// keep its promises: the process stops (crash-stop), naming the error.
fn disk_thread<R: Serialize>(
    mut log: Log,
    requests: std_mpsc::Receiver<Request<R>>,
    reports: mpsc::UnboundedSender<Progress>,
    mut progress: Progress,
    id: ReplicaId,
) {
    let fail = |e: StorageError| -> ! { crash_stop(id, &e) };
    let mut reported = progress;
    // One buffer serializes every record and checkpoint in turn.
    let mut buf = Vec::new();
    // Sleeps until records come; then takes everything queued.
    while let Ok(first) = requests.recv() {
        let mut batches = std::iter::once(first).chain(std::iter::from_fn(|| requests.try_recv().ok()));
        for request in &mut batches {
            match request {
                Request::Records(batch) => {
                    for record in &batch {
                        log.append(encode(&mut buf, record)).unwrap_or_else(|e| fail(e));
                    }
                }
                Request::Checkpoint(state) => {
                    progress.checkpoint_bytes = write_checkpoint(&mut log, &mut buf, &state, id);
                    progress.checkpoints += 1;
                }
            }
        }
        // Group commit: one sync for everything taken this round.
        progress.durable = log.sync().unwrap_or_else(|e| fail(e)) as usize;
        progress.since_checkpoint = log.bytes_since_checkpoint();
        if progress != reported {
            reported = progress;
            if reports.send(progress).is_err() {
                break;
            }
        }
    }
}
