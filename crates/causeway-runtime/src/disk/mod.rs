//! A node's records on disk: one write-ahead log for every replica of the
//! node ([`node_log`]), in `wal/` under its data directory, and each
//! replica's checkpoints in a directory of its own (`dc0-p1/`).
//!
//! One log per node, not per replica: what `fsync = "always"` costs is
//! mostly the syncs and the thread switches around them, and a node of
//! twelve replicas with a log each paid twelve of everything where one
//! sync can cover all of them (docs/BENCHMARKS.md, "What durability
//! costs"). Every replica task writes its own records to the node's log
//! (a `write` to the page cache, under the log's lock), and one thread
//! per node syncs it. What "durable" means is the [`Fsync`] mode's:
//!
//! * `always` — synced to the disk: survives a crash of the machine. The
//!   syncer syncs as soon as a message waits for records and tells every
//!   replica how far; the messages that waited for those records leave
//!   then. Group commit: one `write` and one sync cover whatever all the
//!   replicas appended while the last one ran, including records nobody
//!   waited for.
//! * `batch` — handed to the OS at once (survives a crash of the process)
//!   and synced every [`BATCH_INTERVAL`]: a machine crash loses at most that
//!   much acknowledged work;
//! * `never` — handed to the OS, never synced: for benchmarks.
//!
//! Checkpoints: once a replica's records since its last checkpoint reach
//! [`CHECKPOINT_MIN_BYTES`] or the last checkpoint's size, whichever is
//! larger, the replica task takes its checkpoint ([`Replica::checkpoint`],
//! compacted records) right after appending a step's records, and a thread
//! writes it to the replica's directory with the log position it covers;
//! the replica's records go on into the node's log meanwhile. Segments of
//! the node's log whose records every replica's checkpoint covers are
//! deleted. A restart replays each replica's checkpoint and its records
//! after it, so restart time and disk use follow the state held, not the
//! history.
//!
//! Spills: the groups a replica keeps for its peers in other DCs beyond
//! [peers] max_kept_mb go to `spill/dc0-p1/` ([`spill`]), and come back
//! from there when a peer that fell behind resumes.
//!
//! [`Replica::checkpoint`]: causeway_protocol::Replica::checkpoint

mod node_log;
mod shared;
mod spill;
mod syncer;

pub use node_log::{NodeDisk, Opened, ReplicaDisk};
pub use spill::{spill_dir, ReplicaSpill};

use causeway_protocol::contract::RecordLog;
use causeway_protocol::ReplicaId;
use causeway_storage::Identity;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

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

/// The default of the smallest run of a replica's records that calls for
/// its checkpoint. A checkpoint is due once the replica's records since the
/// last one reach this or the last checkpoint's size, whichever is larger:
/// its records then take about as much of the log as its state (plus
/// this), and writing checkpoints costs at most as many bytes as the
/// records themselves — a large state is not rewritten for every few
/// records. 64 MiB replays in well under a second
/// (docs/BENCHMARKS.md, "Recovery time").
pub const CHECKPOINT_MIN_BYTES: u64 = 64 << 20;

/// The directory of replica `id`'s checkpoints under a node's data
/// directory.
pub fn replica_dir(data_dir: &Path, id: ReplicaId) -> PathBuf {
    data_dir.join(replica_name(id))
}

/// The directory of a node's write-ahead log under its data directory.
pub fn wal_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("wal")
}

/// The first of the node's directories under `data_dir` that exists —
/// its log's, or one of its replicas' (`ids`) checkpoints or spills — if
/// any: a data directory that held nothing of the node has none.
pub fn existing(data_dir: &Path, ids: &[ReplicaId]) -> Option<PathBuf> {
    std::iter::once(wal_dir(data_dir))
        .chain(ids.iter().flat_map(|&id| [replica_dir(data_dir, id), spill_dir(data_dir, id)]))
        .find(|p| p.exists())
}

/// A replica's log: its share of its node's log ([`ReplicaDisk`]) or — for
/// a node without a data directory — nowhere, every record counting as
/// durable at once and kept by nothing.
pub enum ReplicaLog<R> {
    Disk(Box<ReplicaDisk<R>>),
    Nowhere { appended: usize },
}

impl<R: Serialize + Send + 'static> ReplicaLog<R> {
    /// Whether a checkpoint is due ([`ReplicaDisk::checkpoint_due`]); never
    /// for a log that is nowhere.
    pub fn checkpoint_due(&mut self) -> bool {
        match self {
            ReplicaLog::Disk(log) => log.checkpoint_due(),
            ReplicaLog::Nowhere { .. } => false,
        }
    }

    /// Waits for the checkpoint under way when the next is due already
    /// ([`ReplicaDisk::keep_up`]); says whether it waited.
    pub async fn keep_up(&mut self) -> bool {
        match self {
            ReplicaLog::Disk(log) => log.keep_up().await,
            ReplicaLog::Nowhere { .. } => false,
        }
    }

    /// How many records the replica has appended.
    pub fn appended(&self) -> usize {
        match self {
            ReplicaLog::Disk(log) => log.appended(),
            ReplicaLog::Nowhere { appended } => *appended,
        }
    }

    /// Replaces everything appended so far with `state`, the replica's
    /// checkpoint taken after its last append.
    pub fn checkpoint(&mut self, state: Vec<R>) {
        match self {
            ReplicaLog::Disk(log) => log.checkpoint(state),
            ReplicaLog::Nowhere { .. } => {}
        }
    }

    /// Waits until more records are durable; never returns for a log that
    /// is nowhere or has nothing pending.
    pub async fn wait_durable(&mut self) {
        match self {
            ReplicaLog::Disk(log) => log.wait_durable().await,
            ReplicaLog::Nowhere { .. } => std::future::pending().await,
        }
    }
}

impl<R: Serialize + Send + 'static> RecordLog<R> for ReplicaLog<R> {
    fn append_all(&mut self, records: &mut Vec<R>) -> usize {
        match self {
            ReplicaLog::Disk(log) => log.append_all(records),
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
            ReplicaLog::Nowhere { appended } => *appended,
        }
    }

    fn need_durable(&mut self, upto: usize) {
        if let ReplicaLog::Disk(log) = self {
            log.need_durable(upto);
        }
    }
}

/// A replica's name in messages and file names: `dc0-p1`, and `dc0-p1-m1`
/// for a second member of a replica group in one DC.
pub fn replica_name(id: ReplicaId) -> String {
    match id.member {
        0 => format!("dc{}-p{}", id.dc.0, id.partition.0),
        m => format!("dc{}-p{}-m{m}", id.dc.0, id.partition.0),
    }
}

/// The identity a replica's checkpoints carry: its cluster, and its node
/// and replica (`node-a/dc0-p1`); another's are refused.
pub fn identity(cluster: &str, node: &str, id: ReplicaId) -> Identity {
    Identity::new(cluster, format!("{node}/{}", replica_name(id)))
}

/// A replica that cannot keep its promises stops the process at once
/// (crash-stop), saying why on the log and on stderr.
pub fn crash_stop(id: ReplicaId, why: &dyn std::fmt::Display) -> ! {
    stop_process(&format!("replica {}", replica_name(id)), why)
}

/// A node whose log cannot keep its promises stops the process at once,
/// as [`crash_stop`] does for a replica.
pub fn crash_stop_node(node: &str, why: &dyn std::fmt::Display) -> ! {
    stop_process(&format!("node {node}"), why)
}

fn stop_process(who: &str, why: &dyn std::fmt::Display) -> ! {
    tracing::error!("{who}: {why}; stopping the process");
    eprintln!("causeway: {who}: {why}; stopping the process");
    std::process::abort();
}

/// The identity a node's log carries: its cluster and node.
pub fn node_identity(cluster: &str, node: &str) -> Identity {
    Identity::new(cluster, node)
}
