//! What can go wrong.

use crate::identity::Identity;
use std::io;
use std::path::PathBuf;

/// An error of the log. Every variant that concerns a file names it.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The operating system refused an operation.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done ("open", "write", "fdatasync", ...).
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Damage that is not a torn write at the end of the log: a bad frame
    /// followed by good ones, any bad frame in a segment other than the last,
    /// a missing segment. Nothing is skipped: recovering past it would lose
    /// durable records, so an operator must decide.
    #[error("corrupt log: {} at byte {offset}: {reason}", file.display())]
    Corrupt { file: PathBuf, offset: u64, reason: String },

    /// The directory holds the log of another cluster or node.
    #[error(
        "{} belongs to cluster {:?} node {:?}, not to cluster {:?} node {:?}: refusing to open another replica's log",
        path.display(), found.cluster, found.node, expected.cluster, expected.node
    )]
    IdentityMismatch { path: PathBuf, expected: Identity, found: Identity },

    /// The identity file cannot be read as one, or is of another format
    /// version.
    #[error("{}: {reason}", path.display())]
    BadIdentity { path: PathBuf, reason: String },

    /// The identity given to `open` cannot be written.
    #[error("invalid identity: {0}")]
    InvalidIdentity(String),

    /// The directory holds files of a log but no identity file.
    #[error("{} holds log segments but no IDENTITY file: refusing to guess whose they are", path.display())]
    NoIdentity { path: PathBuf },

    /// A record or checkpoint above the format's limit.
    #[error("{what} of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge { what: &'static str, len: usize, max: usize },

    /// A caller broke an ordering the store relies on (spill keys that do
    /// not increase).
    #[error("{0}")]
    Unordered(String),

    /// An earlier write or sync failed: what reached the disk is unknown (a
    /// failed fsync may have dropped dirty pages), so the log takes no more
    /// writes. Reopen it to recover what is durable.
    #[error("the log refuses writes after an earlier I/O error: {0}")]
    Poisoned(String),
}

impl StorageError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> StorageError {
        let path = path.into();
        move |source| StorageError::Io { op, path, source }
    }
}
