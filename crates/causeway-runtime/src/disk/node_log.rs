//! The log of a node, shared by its replicas: each record tagged with its
//! replica, each replica's checkpoints in a directory of its own.
//!
//! # On disk
//!
//! * `wal/` — a [`causeway_storage::Log`] opened as trimmable: the records
//!   of every replica of the node in the order they were written, each one
//!   the replica's id (`ReplicaId`: DC, partition, member; postcard) then the
//!   record (postcard). Positions count the node's records.
//! * `dc0-p1/` — a `Log` of replica dc0-p1 holding only checkpoints: each
//!   one the node-log position it covers (u64 LE) followed by the
//!   replica's checkpoint records (postcard). The replica's state is that
//!   checkpoint and its records in `wal/` after the position.
//!
//! Segments of `wal/` go once every replica's checkpoint covers them. A
//! replica whose checkpoint covers less than where `wal/` begins lost
//! records to damage (a segment deleted by hand, say): the start says so
//! and stops, as the storage crate does for damage inside a log.

use super::shared::{Shared, State};
use super::syncer::Syncer;
use super::{crash_stop, identity, node_identity, replica_dir, replica_name, wal_dir, Fsync};
use crate::error::StartError;
use causeway_protocol::contract::RecordLog;
use causeway_protocol::ReplicaId;
use causeway_storage::{Log, Options, StorageError};
use rustc_hash::FxHashMap;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// What a replica's log held when its node started, and its handle on it.
pub struct Opened<R> {
    pub log: super::ReplicaLog<R>,
    /// The checkpoint's records, then those after it. Empty for a replica
    /// that held nothing: it starts new rather than recovering.
    pub records: Vec<R>,
    /// How many of `records` came from a checkpoint (`None`: it has none).
    pub from_checkpoint: Option<usize>,
}

/// A node's log, opened, with what each replica held; hands each replica
/// its share ([`NodeDisk::replica`]).
pub struct NodeDisk<R> {
    shared: Arc<Shared>,
    /// Joined when the last replica lets go of the log.
    node: Arc<NodeHandle>,
    fsync: Fsync,
    checkpoint_min_bytes: u64,
    recovered: FxHashMap<ReplicaId, Held<R>>,
}

/// What a replica held when its node started.
struct Held<R> {
    /// Its checkpoint's records, then those after it.
    records: Vec<R>,
    from_checkpoint: Option<usize>,
    /// The log of its checkpoints, and the size of the newest.
    checkpoints: Log,
    checkpoint_bytes: u64,
    /// Bytes of its records in the node's log after its checkpoint.
    own_bytes: u64,
}

/// Stops the syncer, and syncs what is left, when the node's last replica
/// is gone.
struct NodeHandle {
    shared: Arc<Shared>,
    syncer: Option<Syncer>,
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        if let Some(syncer) = self.syncer.take() {
            syncer.stop();
        }
        let _ = self.shared.lock().log.sync();
    }
}

impl<R: Serialize + DeserializeOwned + Send + 'static> NodeDisk<R> {
    /// Opens (or creates) the log of node `node` in cluster `cluster` and
    /// the checkpoints of its replicas `ids`, reads back what each held,
    /// and starts the node's syncer. Damage other than a torn tail, a
    /// directory of another cluster or node, a record of a replica the node
    /// does not hold, or a record this version cannot read stops the start
    /// with a message naming the file.
    pub fn open(
        data_dir: &Path,
        cluster: &str,
        node: &str,
        ids: &[ReplicaId],
        fsync: Fsync,
        checkpoint_min_bytes: u64,
    ) -> Result<NodeDisk<R>, StartError> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            StartError::Storage(format!("cannot create the data directory {}: {e}", data_dir.display()))
        })?;
        let wal = wal_dir(data_dir);
        let in_wal = |e: StorageError| StartError::Storage(format!("{}: {e}", wal.display()));
        // Segments go whole: smaller ones than the checkpoints' threshold
        // would keep nothing longer, larger ones would keep the log from
        // following the replicas' checkpoints down.
        let max_segment_bytes = checkpoint_min_bytes.clamp(4 << 10, Options::default().max_segment_bytes);
        // Preallocated: a sync under `always` then overwrites zeros already
        // on disk, one I/O instead of two (docs/BENCHMARKS.md).
        let preallocate_bytes = PREALLOCATE_BYTES.min(max_segment_bytes);
        let options = Options { trimmable: true, max_segment_bytes, preallocate_bytes, ..Options::default() };
        let (log, recovered) = Log::open_with(&wal, &node_identity(cluster, node), options).map_err(in_wal)?;
        if let Some(torn) = &recovered.torn_tail {
            tracing::warn!("node {node}: cut a torn log tail: {torn:?}");
        }
        let mut held: FxHashMap<ReplicaId, Held<R>> = FxHashMap::default();
        let mut covered = FxHashMap::default();
        for &id in ids {
            let (checkpoints, covers, bytes, state) = open_checkpoints::<R>(data_dir, cluster, node, id)?;
            if covers > recovered.len() {
                return Err(StartError::Storage(format!(
                    "{}: the log ends at position {}, but replica {}'s checkpoint covers the first {covers}: the log \
                     lost records it had synced (was it replaced or emptied?); the files are left as they are",
                    wal.display(),
                    recovered.len(),
                    replica_name(id)
                )));
            }
            if covers < recovered.base {
                return Err(StartError::Storage(format!(
                    "{}: the log begins after position {}, but replica {}'s checkpoint covers only the first {covers}: \
                     records it needs are gone; the files are left as they are",
                    wal.display(),
                    recovered.base,
                    replica_name(id)
                )));
            }
            let from_checkpoint = state.as_ref().map(Vec::len);
            let records = state.unwrap_or_default();
            held.insert(id, Held { records, from_checkpoint, checkpoints, checkpoint_bytes: bytes, own_bytes: 0 });
            covered.insert(id, covers);
        }
        let unreadable = |what: String, e: postcard::Error| {
            StartError::Storage(format!(
                "{}: {what} cannot be read by this version ({e}); the log is left as it is",
                wal.display()
            ))
        };
        for (i, bytes) in recovered.records.iter().enumerate() {
            let at = recovered.base + i as u64 + 1;
            let (id, rest) =
                postcard::take_from_bytes::<ReplicaId>(bytes).map_err(|e| unreadable(format!("record {at}"), e))?;
            let (Some(own), Some(&covers)) = (held.get_mut(&id), covered.get(&id)) else {
                return Err(StartError::Storage(format!(
                    "{}: record {at} belongs to replica {}, which node {node} does not hold in this config; the log \
                     is left as it is",
                    wal.display(),
                    replica_name(id)
                )));
            };
            if at <= covers {
                continue;
            }
            let record = postcard::from_bytes(rest)
                .map_err(|e| unreadable(format!("record {at} (of replica {})", replica_name(id)), e))?;
            own.own_bytes += bytes.len() as u64;
            own.records.push(record);
        }
        let synced = log.len();
        let shared = Arc::new(Shared {
            state: Mutex::new(State { log, covered }),
            written: std::sync::atomic::AtomicU64::new(0),
            synced: watch::Sender::new(synced),
            node: node.to_string(),
            wal: wal.clone(),
            syncer: std::sync::OnceLock::new(),
            wanted: std::sync::atomic::AtomicU64::new(synced),
        });
        let syncer = Syncer::start(&shared, fsync)
            .map_err(|e| StartError::Storage(format!("cannot start the sync thread of {}: {e}", wal.display())))?;
        let node = Arc::new(NodeHandle { shared: shared.clone(), syncer });
        Ok(NodeDisk { shared, node, fsync, checkpoint_min_bytes, recovered: held })
    }

    /// Replica `id`'s records and its handle on the node's log. A replica
    /// that held nothing gets `first` (usually nothing), durable before
    /// anything else runs — a re-seeding replica's mark
    /// ([`causeway_protocol::Protocol::reseed`]): a crash right after the
    /// start must not leave a log that reads as a replica that never held
    /// anything. Returned among the records like any other.
    pub fn replica(&mut self, id: ReplicaId, first: Vec<R>) -> Result<Opened<R>, StartError> {
        let held = self.recovered.remove(&id).ok_or_else(|| {
            StartError::Invalid(format!("replica {} is not among the node's, or was handed out", replica_name(id)))
        })?;
        let (mut records, from_checkpoint) = (held.records, held.from_checkpoint);
        let mut log = ReplicaDisk::new(id, self, held.checkpoints, held.checkpoint_bytes, held.own_bytes);
        if records.is_empty() && from_checkpoint.is_none() && !first.is_empty() {
            log.write(&first);
            let mut state = self.shared.lock();
            let synced =
                state.log.sync().map_err(|e| StartError::Storage(format!("{}: {e}", self.shared.wal.display())))?;
            drop(state);
            self.shared.synced.send_replace(synced);
            log.catch_up();
            records = first;
        }
        Ok(Opened { log: super::ReplicaLog::Disk(Box::new(log)), records, from_checkpoint })
    }
}

/// Replica `id`'s log of checkpoints, the node-log position its newest
/// checkpoint covers (0 without one), that checkpoint's size, and its
/// records.
#[allow(clippy::type_complexity)]
fn open_checkpoints<R: DeserializeOwned>(
    data_dir: &Path,
    cluster: &str,
    node: &str,
    id: ReplicaId,
) -> Result<(Log, u64, u64, Option<Vec<R>>), StartError> {
    let dir = replica_dir(data_dir, id);
    let storage = |e: StorageError| StartError::Storage(format!("{}: {e}", dir.display()));
    let (log, recovered) = Log::open(&dir, &identity(cluster, node, id)).map_err(storage)?;
    if let Some(torn) = &recovered.torn_tail {
        tracing::warn!("replica {}: cut a torn checkpoint: {torn:?}", replica_name(id));
    }
    let damaged =
        |why: String| StartError::Storage(format!("{}: {why}; the files are left as they are", dir.display()));
    if !recovered.records.is_empty() {
        return Err(damaged("a directory of checkpoints holds records".into()));
    }
    let Some(bytes) = &recovered.checkpoint else { return Ok((log, 0, 0, None)) };
    let Some((covers, state)) = bytes.split_first_chunk::<8>() else {
        return Err(damaged("a checkpoint too short to say what it covers".into()));
    };
    let records = postcard::from_bytes(state)
        .map_err(|e| damaged(format!("the checkpoint cannot be read by this version ({e})")))?;
    Ok((log, u64::from_le_bytes(*covers), bytes.len() as u64, Some(records)))
}

/// A replica's share of its node's log: it writes its records there
/// itself, and learns from the node's syncer when they are durable.
pub struct ReplicaDisk<R> {
    id: ReplicaId,
    shared: Arc<Shared>,
    _node: Arc<NodeHandle>,
    fsync: Fsync,
    appended: usize,
    durable: usize,
    /// Under `always`: the replica's record counts not yet durable, with
    /// the node-log position of the last record of each.
    pending: VecDeque<(usize, u64)>,
    synced: watch::Receiver<u64>,
    /// Serialized records of a step, and where each ends.
    buf: Vec<u8>,
    ends: Vec<usize>,
    checkpoint_min_bytes: u64,
    /// Replicas on the node: how much of the node's log one replica may
    /// hold back before its checkpoint is due.
    share: u64,
    /// The log of its checkpoints; with the thread writing one meanwhile.
    checkpoints: Option<Log>,
    /// The thread writing a checkpoint: it gives the log back, and the
    /// checkpoint's size.
    checkpoint: Option<std::thread::JoinHandle<(Log, u64)>>,
    /// Closed when that thread is done.
    checkpoint_written: Option<tokio::sync::oneshot::Receiver<()>>,
    /// The newest checkpoint's size (or the last one refused).
    checkpoint_bytes: u64,
    /// Bytes of its own records since the last checkpoint was asked for.
    own_bytes: u64,
    /// [`Shared::written`] when the last checkpoint was asked for.
    asked_at: u64,
    _records: std::marker::PhantomData<fn(R)>,
}

impl<R: Serialize + Send + 'static> ReplicaDisk<R> {
    fn new<D>(id: ReplicaId, node: &NodeDisk<D>, checkpoints: Log, checkpoint_bytes: u64, own_bytes: u64) -> Self {
        let share = node.shared.lock().covered.len() as u64;
        ReplicaDisk {
            id,
            shared: node.shared.clone(),
            _node: node.node.clone(),
            fsync: node.fsync,
            appended: 0,
            durable: 0,
            pending: VecDeque::new(),
            synced: node.shared.synced.subscribe(),
            buf: Vec::new(),
            ends: Vec::new(),
            checkpoint_min_bytes: node.checkpoint_min_bytes,
            share: share.max(1),
            checkpoints: Some(checkpoints),
            checkpoint: None,
            checkpoint_written: None,
            checkpoint_bytes,
            own_bytes,
            asked_at: 0,
            _records: std::marker::PhantomData,
        }
    }

    /// Moves `durable` on to what the syncer last reported.
    fn catch_up(&mut self) {
        let synced = *self.synced.borrow_and_update();
        while let Some(&(count, at)) = self.pending.front() {
            if at > synced {
                break;
            }
            self.durable = count;
            self.pending.pop_front();
        }
    }

    /// Waits until the syncer reports more of this replica's records
    /// durable; never returns while none wait.
    pub async fn wait_durable(&mut self) {
        if self.pending.is_empty() {
            return std::future::pending().await;
        }
        loop {
            if self.synced.changed().await.is_err() {
                // The syncer is gone: the process is stopping.
                return std::future::pending().await;
            }
            let before = self.durable;
            self.catch_up();
            if self.durable != before {
                return;
            }
        }
    }

    /// Whether the replica's records since its last checkpoint call for a
    /// new one, none being under way (see [`super::CHECKPOINT_MIN_BYTES`]).
    /// Asked after every step: it takes no lock.
    pub fn checkpoint_due(&mut self) -> bool {
        if self.checkpoint.as_ref().is_some_and(|t| !t.is_finished()) {
            return false;
        }
        self.join_checkpoint();
        self.due()
    }

    /// Whether the records since the last checkpoint was asked for call
    /// for the next: the replica's own outweigh its last checkpoint (or
    /// the threshold), or the node's outweigh its share of the node's log
    /// (as many times that as the node has replicas) — segments go only
    /// once every replica's checkpoint covers them.
    fn due(&self) -> bool {
        let threshold = self.checkpoint_min_bytes.max(self.checkpoint_bytes);
        let node_bytes = self.shared.written.load(Ordering::Relaxed) - self.asked_at;
        self.own_bytes >= threshold || node_bytes >= threshold.saturating_mul(self.share)
    }

    /// Waits for the checkpoint under way if the next one is due already,
    /// and says whether it waited: a replica has at most one checkpoint in
    /// flight, so however slow its disk the node's log holds at most twice
    /// its share past what its written checkpoint covers — the writes wait
    /// for the disk rather than the log growing on.
    pub async fn keep_up(&mut self) -> bool {
        if self.checkpoint.is_none() || !self.due() {
            return false;
        }
        if let Some(written) = self.checkpoint_written.take() {
            // Closed when the thread's work is done.
            let _ = written.await;
        }
        self.join_checkpoint();
        true
    }

    /// Takes back the checkpoint's log and size from its thread, once done
    /// (or about to be: it signalled it is).
    fn join_checkpoint(&mut self) {
        if let Some(thread) = self.checkpoint.take() {
            let Ok((log, bytes)) = thread.join() else { crash_stop(self.id, &"the checkpoint's thread failed") };
            self.checkpoints = Some(log);
            self.checkpoint_bytes = bytes;
            self.checkpoint_written = None;
        }
    }

    /// Replaces the replica's records so far with `state`, its checkpoint
    /// taken after its last append: a thread writes it, with the node-log
    /// position it covers, to the replica's directory; the replica's later
    /// records go on into the node's log meanwhile. A checkpoint too large
    /// to take is not taken (the log grows on), and said so.
    pub fn checkpoint(&mut self, records: Vec<R>) {
        let Some(mut log) = self.checkpoints.take() else { return };
        let covers = self.shared.lock().log.len();
        self.own_bytes = 0;
        self.asked_at = self.shared.written.load(Ordering::Relaxed);
        let (id, shared) = (self.id, self.shared.clone());
        let (written, checkpoint_written) = tokio::sync::oneshot::channel::<()>();
        self.checkpoint_written = Some(checkpoint_written);
        let thread = std::thread::Builder::new().name(format!("checkpoint {}", replica_name(id))).spawn(move || {
            // Dropped on the way out, whatever happens: tells `keep_up`.
            let _written = written;
            // The node's log holds what the checkpoint covers, on disk,
            // before the checkpoint says so: a crash must never leave the
            // log shorter than a checkpoint's position, or the positions
            // past its end would be handed out again — and their records
            // skipped at the next start as covered.
            if let Err(e) = shared.sync_past(0, &mut None) {
                crash_stop(id, &e);
            }
            let mut bytes = covers.to_le_bytes().to_vec();
            let bytes = postcard::to_extend(&records, std::mem::take(&mut bytes)).expect("records serialize");
            drop(records);
            let taken = match log.checkpoint(&bytes) {
                Ok(()) => true,
                Err(StorageError::TooLarge { len, .. }) => {
                    tracing::warn!("replica {}: a checkpoint of {len} bytes is too large to take", replica_name(id));
                    false
                }
                Err(e) => crash_stop(id, &e),
            };
            if taken {
                let trim = {
                    let mut state = shared.lock();
                    state.covered.insert(id, covers);
                    let upto = state.covered.values().copied().min().unwrap_or(0);
                    state.log.trim(upto)
                };
                if let Err(e) = trim.remove() {
                    crash_stop(id, &format_args!("{}: {e}", shared.wal.display()));
                }
            }
            (log, bytes.len() as u64)
        });
        let thread =
            thread.unwrap_or_else(|e| crash_stop(self.id, &format_args!("cannot start a checkpoint's thread: {e}")));
        self.checkpoint = Some(thread);
    }
}

/// How far ahead of its records the node log's tail is written with zeros
/// ([`Options::preallocate_bytes`]).
const PREALLOCATE_BYTES: u64 = 1 << 20;

impl<R: Serialize + Send + 'static> RecordLog<R> for ReplicaDisk<R> {
    fn append_all(&mut self, records: &mut Vec<R>) -> usize {
        if !records.is_empty() {
            self.write(records);
            records.clear();
        }
        self.appended
    }

    fn durable(&self) -> usize {
        self.durable
    }

    /// A message waits for the replica's first `upto` records: the syncer
    /// is asked for the node-log position of the last of them.
    fn need_durable(&mut self, upto: usize) {
        // Counts grow along `pending`: the first entry that covers `upto`.
        let i = self.pending.partition_point(|&(count, _)| count < upto);
        if let Some(&(_, at)) = self.pending.get(i) {
            self.shared.want(at);
        }
    }
}

impl<R: Serialize + Send + 'static> ReplicaDisk<R> {
    /// How many records the replica has appended.
    pub fn appended(&self) -> usize {
        self.appended
    }

    /// Writes `records` to the node's log, durable as the mode has it:
    /// under `batch` and `never` handed to the OS at once, and durable so;
    /// under `always` durable once the syncer says so — it hands them to
    /// the OS itself, with every other replica's, in one `write` before its
    /// sync (a `write` per replica step cost more than the sync).
    fn write(&mut self, records: &[R]) {
        // Serialized outside the lock: the other replicas of the node do
        // not wait for it.
        self.buf.clear();
        self.ends.clear();
        for record in records.iter() {
            self.buf = postcard::to_extend(&self.id, std::mem::take(&mut self.buf)).expect("ids serialize");
            self.buf = postcard::to_extend(record, std::mem::take(&mut self.buf)).expect("records serialize");
            self.ends.push(self.buf.len());
        }
        self.appended += records.len();
        self.own_bytes += self.buf.len() as u64;
        self.shared.written.fetch_add(self.buf.len() as u64, Ordering::Relaxed);
        let at = {
            let mut state = self.shared.lock();
            let mut start = 0;
            for &end in &self.ends {
                if let Err(e) = state.log.append(&self.buf[start..end]) {
                    crash_stop(self.id, &format_args!("{}: {e}", self.shared.wal.display()));
                }
                start = end;
            }
            if self.fsync != Fsync::Always {
                if let Err(e) = state.log.write_through() {
                    crash_stop(self.id, &format_args!("{}: {e}", self.shared.wal.display()));
                }
            }
            state.log.len()
        };
        match self.fsync {
            // Synced when a message waits for them, or with the next
            // records that one does.
            Fsync::Always => self.pending.push_back((self.appended, at)),
            // Handed to the OS: durable as these modes mean it.
            Fsync::Batch | Fsync::Never => self.durable = self.appended,
        }
    }
}

impl<R> Drop for ReplicaDisk<R> {
    /// A checkpoint under way is waited for: the log is closed when the
    /// replica's task has ended.
    fn drop(&mut self) {
        if let Some(thread) = self.checkpoint.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::ReplicaLog;

    /// The node's log in `dir`, with segments of 4 KiB and a checkpoint
    /// due every 4 KiB of a replica's records.
    fn open(dir: &Path) -> NodeDisk<u64> {
        NodeDisk::open(dir, "c", "n", &[a(), b()], Fsync::Never, 4 << 10).unwrap()
    }

    fn a() -> ReplicaId {
        ReplicaId::new(0, 0)
    }

    fn b() -> ReplicaId {
        ReplicaId::new(0, 1)
    }

    fn append(log: &mut ReplicaLog<u64>, records: std::ops::Range<u64>) {
        for r in records {
            log.append_all(&mut vec![r]);
        }
    }

    /// Each replica gets back its own records, in order: from its
    /// checkpoint and the node's log after it, across a trim of the log.
    #[test]
    fn each_replica_gets_back_its_checkpoint_and_its_records_after_it() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let mut disk = open(tmp.path());
            let (mut ra, mut rb) = (disk.replica(a(), vec![]).unwrap().log, disk.replica(b(), vec![]).unwrap().log);
            drop(disk);
            append(&mut ra, 0..2000);
            append(&mut rb, 10_000..12_000);
            // Checkpoints standing for everything so far: a sum, and the
            // last record.
            ra.checkpoint(vec![(0..2000).sum()]);
            rb.checkpoint(vec![11_999]);
            append(&mut ra, 2000..2100);
            append(&mut rb, 12_000..12_010);
        }
        let segments = std::fs::read_dir(wal_dir(tmp.path())).unwrap().count();
        let mut disk = open(tmp.path());
        assert!(segments < 10, "the node's log was trimmed to the checkpoints: {segments} files");
        let ra = disk.replica(a(), vec![]).unwrap();
        let rb = disk.replica(b(), vec![]).unwrap();
        assert_eq!(ra.from_checkpoint, Some(1));
        assert_eq!(ra.records, std::iter::once((0..2000).sum()).chain(2000..2100).collect::<Vec<u64>>());
        assert_eq!(rb.records, std::iter::once(11_999).chain(12_000..12_010).collect::<Vec<u64>>());
    }

    /// A segment gone from the front of the node's log, holding records no
    /// checkpoint covers, stops the start, naming the log.
    #[test]
    fn records_gone_from_the_front_of_the_log_stop_the_start() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let mut disk = open(tmp.path());
            let mut ra = disk.replica(a(), vec![]).unwrap().log;
            drop(disk);
            append(&mut ra, 0..2000);
        }
        let mut segments: Vec<_> = std::fs::read_dir(wal_dir(tmp.path()))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        segments.sort();
        assert!(segments.len() > 2);
        std::fs::remove_file(&segments[0]).unwrap();
        let why = refused(tmp.path());
        assert!(why.contains("wal") && why.contains("records it needs are gone"), "{why}");
    }

    /// Why a start on `dir` is refused as damage to the storage.
    fn refused(dir: &Path) -> String {
        match NodeDisk::<u64>::open(dir, "c", "n", &[a(), b()], Fsync::Never, 4 << 10) {
            Err(StartError::Storage(why)) => why,
            Err(e) => panic!("refused for the wrong reason: {e}"),
            Ok(_) => panic!("a damaged log was accepted"),
        }
    }

    /// Under `always`, records are synced when a message waits for them —
    /// not before — and count as durable once the node's syncer has synced
    /// past them.
    #[tokio::test]
    async fn under_always_records_are_synced_when_a_message_waits_for_them() {
        let tmp = tempfile::tempdir().unwrap();
        let mut disk = NodeDisk::<u64>::open(tmp.path(), "c", "n", &[a()], Fsync::Always, 4 << 10).unwrap();
        let mut ra = disk.replica(a(), vec![]).unwrap().log;
        drop(disk);
        assert_eq!(ra.append_all(&mut vec![1, 2, 3]), 3);
        let idle = tokio::time::timeout(std::time::Duration::from_millis(200), ra.wait_durable()).await;
        assert!(idle.is_err(), "nothing waits for the records: no sync");
        assert_eq!(ra.durable(), 0);
        ra.need_durable(2);
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while ra.durable() < 2 {
                ra.wait_durable().await;
            }
        })
        .await
        .expect("synced within 10 s");
        assert_eq!(ra.durable(), 3, "one sync covers what was written");
    }

    /// A checkpoint is written only once the node's log holds what it
    /// covers: a node that dies right after (its log never synced by
    /// anyone else, nor closed) comes back with a log that reaches the
    /// checkpoint's position, and each replica gets its records back.
    #[test]
    fn a_checkpoint_never_covers_more_than_the_log_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let mut disk = NodeDisk::<u64>::open(tmp.path(), "c", "n", &[a(), b()], Fsync::Always, 4 << 10).unwrap();
        let (mut ra, mut rb) = (disk.replica(a(), vec![]).unwrap().log, disk.replica(b(), vec![]).unwrap().log);
        drop(disk);
        // Under `always`, records nobody waits for stay with the log in
        // memory: only the checkpoint's own care can put them on disk.
        append(&mut ra, 0..10);
        append(&mut rb, 100..110);
        ra.checkpoint(vec![45]);
        let checkpoint = replica_dir(tmp.path(), a()).join("00000000000000000000.log");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::metadata(&checkpoint).map_or(0, |m| m.len()) <= 28 {
            assert!(std::time::Instant::now() < deadline, "the checkpoint is written within 10 s");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // The process dies: nothing is closed, nothing synced on the way.
        std::mem::forget(ra);
        std::mem::forget(rb);
        let mut disk = NodeDisk::<u64>::open(tmp.path(), "c", "n", &[a(), b()], Fsync::Always, 4 << 10).unwrap();
        assert_eq!(disk.replica(a(), vec![]).unwrap().records, vec![45]);
        assert_eq!(disk.replica(b(), vec![]).unwrap().records, (100..110).collect::<Vec<u64>>());
    }

    /// However far the writes outrun the checkpoints' thread, a replica
    /// has one checkpoint in flight at most, so the node's log never holds
    /// more than twice each replica's share past its checkpoints (and the
    /// segment the trim point falls in): one replica writing fast, one
    /// slowly, both held back by the node's bytes.
    #[tokio::test]
    async fn the_log_stays_within_twice_the_replicas_shares_however_far_the_writes_run_ahead() {
        const MIN: u64 = 4 << 10;
        let tmp = tempfile::tempdir().unwrap();
        let ids = [a(), b()];
        let mut disk = NodeDisk::<Vec<u8>>::open(tmp.path(), "c", "n", &ids, Fsync::Never, MIN).unwrap();
        let mut logs = [disk.replica(a(), vec![]).unwrap().log, disk.replica(b(), vec![]).unwrap().log];
        drop(disk);
        let record = vec![7u8; 200];
        // A step's bytes in the log: the replica's id and the record, and
        // the frame around them (length and checksum).
        let step = record.len() as u64 + 32;
        let share = ids.len() as u64;
        let bound = 2 * ids.len() as u64 * (share * MIN + step) + 2 * MIN;
        let mut waits = 0;
        for i in 0..4000 {
            let which = if i % 10 == 0 { 1 } else { 0 };
            logs[which].append_all(&mut vec![record.clone()]);
            for log in &mut logs {
                waits += usize::from(log.keep_up().await);
                if log.checkpoint_due() {
                    // The state: smaller than the threshold.
                    log.checkpoint(vec![vec![1u8; 1000]]);
                }
            }
            let wal = bytes_under(&wal_dir(tmp.path()));
            assert!(wal <= bound, "step {i}: {wal} bytes in the node's log, more than {bound}");
        }
        assert!(waits > 0, "the writes never outran a checkpoint: the bound was not put to the test");
    }

    /// Bytes of the files in `dir`; a file a trim deletes meanwhile counts
    /// for nothing.
    fn bytes_under(dir: &Path) -> u64 {
        std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum()
    }

    /// A node's log that lost what a replica's checkpoint says it held
    /// (emptied, or replaced by an older copy) stops the start.
    #[test]
    fn a_log_shorter_than_a_checkpoint_stops_the_start() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let mut disk = open(tmp.path());
            let mut ra = disk.replica(a(), vec![]).unwrap().log;
            drop(disk);
            append(&mut ra, 0..10);
            ra.checkpoint(vec![45]);
        }
        std::fs::remove_dir_all(wal_dir(tmp.path())).unwrap();
        let why = refused(tmp.path());
        assert!(why.contains("lost records"), "{why}");
    }
}
