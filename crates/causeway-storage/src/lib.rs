//! The write-ahead log a Causeway server node makes its replicas' records
//! durable in: the disk under the protocol's `Effects` records and the `SendGate`
//! that holds messages until their records are durable.
//!
//! Records are opaque bytes (the caller serializes them, with postcard). The
//! log is synchronous and blocking: the runtime calls it from a thread of
//! its own. It knows nothing of fsync *policies* (how often the runtime
//! syncs): it offers [`Log::append`], [`Log::sync`] (group commit: many
//! appends, one `fdatasync`; free when nothing is pending) and
//! [`Log::checkpoint`].
//!
//! Positions count records from 1 since the log began and keep counting
//! across checkpoints: [`Log::append`] returns the log's length after the
//! record, as `MemoryLog::append` does, and [`Log::sync`] how many records
//! are durable.
//!
//! # Files
//!
//! A log directory holds:
//!
//! * `IDENTITY` — text: `causeway-storage`, the format version, the cluster
//!   name and the node name ([`Identity`]). Written (durably) into an empty
//!   directory; any other identity, or segments without one, is refused.
//! * Segments `NNNNNNNNNNNNNNNNNNNN.log` — twenty digits, the segment's
//!   *base*: the log's length before its first record. Sorted by name they
//!   are sorted by position. Each begins with a 28-byte header: the magic
//!   `CWYWAL\r\n`, the format version (u32 LE), flags (u32 LE; bit 0: the
//!   segment starts with a checkpoint), the base (u64 LE) and a CRC-32 of
//!   those 24 bytes (u32 LE). Then frames, back to back:
//!
//!   ```text
//!   [payload length u32 LE][CRC-32 (IEEE) of kind and payload, u32 LE][kind u8][payload]
//!   ```
//!
//!   Kind 1 is a checkpoint (only as the first frame of a checkpoint
//!   segment), kind 2 a record. A record's payload is at most 64 MiB, a
//!   checkpoint's 1 GiB; a longer length field is damage, never an
//!   allocation. The last segment may end in zeros past its records: with
//!   [`Options::preallocate_bytes`] the log writes them out ahead of its
//!   appends, so that a sync overwrites blocks the file holds instead of
//!   growing it (one I/O instead of two: the data, not also the file's
//!   size). A full segment is cut to its records before the next begins.
//! * `*.tmp` — a segment or identity being written; renamed into place once
//!   whole and synced, deleted by `open` if a crash left it.
//!
//! A new segment starts when the tail holds a record and the next frame
//! would take it past [`Options::max_segment_bytes`] (64 MiB): the tail is
//! synced first, so that only the last segment can ever end torn. A
//! checkpoint writes a segment whose base is the current length and whose
//! first frame is the caller's state, to a temporary name; fsyncs it;
//! renames it into place; fsyncs the directory; and only then deletes the
//! older segments, oldest first, and fsyncs the directory again.
//!
//! # Recovery
//!
//! [`Log::open`] reads the log back, and the rules it follows separate what
//! a crash can do from what it cannot:
//!
//! * **The start is the newest whole checkpoint.** The newest segment whose
//!   header says checkpoint and whose checkpoint frame is whole is where
//!   the log starts; older segments are what an interrupted checkpoint had
//!   not yet deleted, and are deleted now. Without one, the log starts at
//!   the segment of base 0.
//! * **A torn tail is cut.** A crash during appends can leave the last
//!   segment ending in part of a frame, or in a frame whose bytes did not
//!   all reach the disk: an incomplete header, a length running past the end
//!   of the file, a bad CRC. Those records were never synced (a sync returns
//!   only once they are on disk), so nobody was promised them: the file is
//!   truncated at the last good frame, synced, and the cut is reported in
//!   [`Recovered::torn_tail`]. A last segment that never held a whole
//!   checkpoint or header (a checkpoint or rotation cut short) is removed the
//!   same way, when the segments before it hold the log.
//!   Zeros from the end of the last segment's records to the end of its
//!   file are room written ahead, not a tear: nothing is cut or reported.
//!   Anything else there is cut (the file truncated), so that no byte of a
//!   torn append can ever follow a later, shorter one.
//! * **Damage elsewhere stops.** A bad frame *followed by a good one* cannot
//!   be a torn append — the disk held later writes — so it is damage to
//!   records that may have been synced and acted on. So is any bad frame in
//!   a segment other than the last (it was synced whole before the next one
//!   began), a segment missing from the sequence, a checkpoint frame where a
//!   record should be. Cutting there would silently lose durable records,
//!   and skipping would replay a history with a hole: `open` fails with
//!   [`StorageError::Corrupt`], naming the file and byte offset, and leaves
//!   the files as they are for an operator (or the replica's peers) to
//!   repair.
//!
//! Telling the two apart scans the rest of the last segment for a good
//! frame after the first bad one. A false "good frame" needs a 32-bit CRC to
//! match by chance; a record whose payload itself embeds a valid frame could
//! make a torn write of it look like damage — the safe side of the mistake.
//!
//! **A trimmable log** ([`Options::trimmable`]) may lose its oldest segments
//! to [`Log::trim`] — whoever trims keeps the account of what replaced
//! them (the runtime: each replica's checkpoint in a log of its own) — and
//! begins at its oldest segment, whatever its base; in any other log a
//! first segment that is not a checkpoint and begins past 0 is damage.
//!
//! A write or sync that fails poisons the log ([`StorageError::Poisoned`]):
//! after a failed `fdatasync` the kernel may have dropped the dirty pages, so
//! the only safe way on is to reopen and recover what is on disk.

mod error;
mod format;
mod fsutil;
mod identity;
mod log;
mod recovery;
mod spill;

pub use error::StorageError;
pub use format::{FORMAT_VERSION, MAX_CHECKPOINT_BYTES, MAX_RECORD_BYTES};
pub use identity::{Identity, IDENTITY_FILE};
pub use log::{Log, Options, Trim, MAX_PREALLOCATE_BYTES};
pub use recovery::{Recovered, TornTail};
pub use spill::Spill;
