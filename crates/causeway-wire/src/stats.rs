//! What a node answers to the benchmarks' `Stats` request.

use serde::{Deserialize, Serialize};

/// A node's measurements since it started, for benchmarks: take two and
/// subtract. Counters cover every replica and client of the node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStats {
    pub node: String,
    pub replicas: Vec<ReplicaReading>,
    /// Protocol messages and their bytes (postcard size of each message)
    /// sent, per message class, in the order the protocol declares its
    /// classes.
    pub sent: Vec<ClassCount>,
    /// Read requests (slices) the node's replicas answered.
    pub read_slices: u64,
    /// Those that were not answered in the step that received them
    /// (counted, like the others, when answered).
    pub read_slices_waited: u64,
    /// Their waiting, summed, in microseconds.
    pub read_wait_us: u64,
    /// `(DC, transaction id)` of transactions with a read that waited since
    /// the last request that asked for them (with `waited_txns`; at most
    /// [`NodeStats::MAX_WAITED_TXNS`] are kept between two requests).
    pub waited_txns: Vec<(u16, u64)>,
    /// Read-only transactions of the node's clients by the round trips
    /// their session took: `[1, 2, 3, 4 or more]`.
    pub read_only_rounds: Vec<u64>,
    /// Frames and writes on the node's links to other nodes and to its
    /// clients, since it started.
    pub links: LinkCounts,
}

/// What a node's sockets carried, counted where the bytes are handed to
/// the kernel or taken from it: a benchmark divides them by the
/// transactions committed, to see how many writes a message costs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkCounts {
    /// Protocol messages written to other nodes (first transmissions).
    pub peer_messages_sent: u64,
    /// Batch frames written to other nodes, and the writes that carried
    /// them (a write holds every frame the link's outbox had ready).
    pub peer_frames_sent: u64,
    pub peer_writes: u64,
    /// Acknowledgement frames written back to other nodes (one write each).
    pub peer_acks_sent: u64,
    /// Batch frames read from other nodes.
    pub peer_frames_received: u64,
    /// Request frames read from clients, answer frames queued to them, and
    /// the writes that carried the answers (answers queued while a client's
    /// operation waits leave together).
    pub client_frames_received: u64,
    pub client_frames_sent: u64,
    pub client_writes: u64,
}

impl NodeStats {
    /// How many waited transactions a node remembers.
    pub const MAX_WAITED_TXNS: usize = 1 << 20;
}

/// Messages of one class, and their bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCount {
    /// The class, as the protocol names it (`client`, `replication`, …).
    pub class: String,
    pub messages: u64,
    pub bytes: u64,
}

/// One replica's state, as the stable times the protocol publishes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaReading {
    pub dc: u16,
    pub partition: u32,
    /// `visible_upto[d]`: every write from DC `d` with a commit time up to
    /// this is visible to new transactions here.
    pub visible_upto: Vec<u64>,
    pub versions: u64,
    pub metadata_bytes_per_version: u64,
    /// The latest changes of `visible_upto`, oldest first, each with when
    /// the replica published it, the last being `visible_upto`: a reader
    /// polling every few milliseconds still learns when a write became
    /// visible. At most [`ReplicaReading::MAX_CHANGES`], at least 0.5 ms
    /// apart (changes closer than that are merged into one, stamped with
    /// the later time), so they reach back at least 16 ms.
    pub changes: Vec<VisibleChange>,
}

impl ReplicaReading {
    /// How many changes of `visible_upto` a reading carries at most.
    pub const MAX_CHANGES: usize = 32;
}

/// `visible_upto` as it became at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisibleChange {
    /// The node's wall clock (microseconds since the Unix epoch; not the
    /// replica's hybrid clock, nor a skew a benchmark emulates).
    pub at_us: u64,
    pub visible_upto: Vec<u64>,
}
