//! The open log: appends, group commit, rotation, checkpoints.

use crate::error::StorageError;
use crate::format::{self, Header, Kind, HEADER_LEN, MAX_CHECKPOINT_BYTES, MAX_RECORD_BYTES};
use crate::fsutil;
use crate::identity::Identity;
use crate::recovery::{self, Recovered};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// How the log lays out its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A segment that has reached this size takes no more records: the next
    /// one starts a new segment. A single larger record still fits in a
    /// segment of its own.
    pub max_segment_bytes: u64,
    /// Appended frames are held in memory until `sync` or until this many
    /// bytes wait, then written with one `write`.
    pub write_buffer_bytes: usize,
    /// The log may lose its oldest segments to [`Log::trim`]: without a
    /// checkpoint it begins at its oldest segment, whatever its base,
    /// rather than at position 0. Whoever trims keeps the account of what
    /// the trimmed records were replaced by (the runtime: each replica's
    /// checkpoint of its own).
    pub trimmable: bool,
    /// The tail segment is kept this many bytes (at least half of it)
    /// ahead of its records with zeros written out, so that appending and
    /// syncing overwrites blocks the file already holds instead of growing
    /// it: an `fdatasync` that must also write the file's new size costs a
    /// second I/O (docs/BENCHMARKS.md, "Preallocated segments, and lazy
    /// syncs tried"). 0: the file ends at its last record.
    /// At most [`MAX_PREALLOCATE_BYTES`]; more is taken as that.
    pub preallocate_bytes: u64,
}

/// The most [`Options::preallocate_bytes`] a log keeps ahead.
pub const MAX_PREALLOCATE_BYTES: u64 = 64 << 20;

impl Default for Options {
    fn default() -> Self {
        Options { max_segment_bytes: 64 << 20, write_buffer_bytes: 1 << 20, trimmable: false, preallocate_bytes: 0 }
    }
}

/// A replica's write-ahead log in one directory. Blocking: call it from a
/// thread that may wait for the disk.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    options: Options,
    /// The live segments, oldest first, by base; the last is the tail.
    segments: Vec<(u64, PathBuf)>,
    tail: File,
    /// The tail's records' end, counting the frames still in `pending`.
    tail_bytes: u64,
    /// The tail file's size: past `tail_bytes` it holds zeros.
    allocated: u64,
    /// Frames appended but not yet handed to the OS.
    pending: Vec<u8>,
    /// Whether the OS holds bytes of the tail not yet synced.
    unsynced_writes: bool,
    /// Records since the log began.
    len: u64,
    /// Records known durable.
    synced: u64,
    bytes_since_checkpoint: u64,
    /// Set by a failed write or sync: the log takes no more.
    poisoned: Option<String>,
}

impl Log {
    /// Opens the log in `dir` with the default [`Options`], creating the
    /// directory and an empty log if there is none. Returns what the log
    /// holds: the newest complete checkpoint and the records after it; a
    /// torn tail is cut first, and reported.
    ///
    /// Refuses (and changes nothing) if `dir` belongs to another cluster or
    /// node; fails with [`StorageError::Corrupt`] on damage that is not a
    /// torn tail.
    pub fn open(dir: &Path, identity: &Identity) -> Result<(Log, Recovered), StorageError> {
        Log::open_with(dir, identity, Options::default())
    }

    /// [`Log::open`] with explicit options.
    pub fn open_with(dir: &Path, identity: &Identity, mut options: Options) -> Result<(Log, Recovered), StorageError> {
        options.preallocate_bytes = options.preallocate_bytes.min(MAX_PREALLOCATE_BYTES);
        let opened = recovery::open(dir, identity, options.trimmable)?;
        let len = opened.recovered.len();
        let log = Log {
            dir: dir.to_path_buf(),
            options,
            segments: opened.segments,
            tail: opened.tail,
            tail_bytes: opened.tail_bytes,
            allocated: opened.allocated,
            pending: Vec::new(),
            unsynced_writes: false,
            len,
            synced: len,
            bytes_since_checkpoint: opened.bytes_since_checkpoint,
            poisoned: None,
        };
        Ok((log, opened.recovered))
    }

    /// Appends one record; it is not durable until the next [`Log::sync`]
    /// (nor, until then or until the write buffer fills, handed to the OS).
    /// Returns the log's length after it: the record's position, counted
    /// from 1 since the log began, across checkpoints.
    ///
    /// Starting a new segment when the tail is full syncs the tail first, so
    /// an append may wait for the disk.
    pub fn append(&mut self, record: &[u8]) -> Result<u64, StorageError> {
        self.check_poisoned()?;
        if record.len() > MAX_RECORD_BYTES {
            return Err(StorageError::TooLarge { what: "record", len: record.len(), max: MAX_RECORD_BYTES });
        }
        let frame = format::frame_len(record.len());
        // Only a tail that holds a record rotates: a new segment is named by
        // the current position, which a tail without records already has.
        let tail_has_records = self.segments.last().is_some_and(|(base, _)| *base < self.len);
        if tail_has_records && self.tail_bytes + frame > self.options.max_segment_bytes {
            self.rotate()?;
        }
        format::encode_frame(&mut self.pending, Kind::Record, record);
        self.tail_bytes += frame;
        self.bytes_since_checkpoint += frame;
        self.len += 1;
        if self.pending.len() >= self.options.write_buffer_bytes {
            self.write_pending()?;
        }
        Ok(self.len)
    }

    /// Makes every appended record durable (`fdatasync`); returns how many
    /// records are durable, which is the log's length. Costs nothing when
    /// nothing was appended since the last sync. Group commit: append many,
    /// then sync once.
    pub fn sync(&mut self) -> Result<u64, StorageError> {
        self.check_poisoned()?;
        if self.pending.is_empty() && !self.unsynced_writes {
            // Every appended record is written and synced: by the last
            // sync, or by the `fsync` of a cut tail (a rotation).
            self.synced = self.len;
            return Ok(self.synced);
        }
        self.write_pending()?;
        let path = self.tail_path().to_path_buf();
        let synced = self.tail.sync_data().map_err(StorageError::io("fdatasync", path));
        self.poison_on_error(synced)?;
        self.unsynced_writes = false;
        self.synced = self.len;
        Ok(self.synced)
    }

    /// Hands every appended record to the OS without syncing: they survive
    /// a crash of the process (the OS writes them out), not of the machine.
    /// Returns the log's length.
    pub fn write_through(&mut self) -> Result<u64, StorageError> {
        self.check_poisoned()?;
        self.write_pending()?;
        Ok(self.len)
    }

    /// Replaces every record up to the current position with `state`: writes
    /// a new segment whose first frame is `state` (to a temporary name,
    /// fsync, rename, fsync the directory), then deletes the older segments
    /// and fsyncs the directory. Records appended and not yet synced are
    /// covered by the checkpoint and are durable once it returns.
    ///
    /// A crash at any point leaves either the old segments or the new
    /// checkpoint for [`Log::open`] to find, never neither.
    pub fn checkpoint(&mut self, state: &[u8]) -> Result<(), StorageError> {
        self.check_poisoned()?;
        if state.len() > MAX_CHECKPOINT_BYTES {
            return Err(StorageError::TooLarge { what: "checkpoint", len: state.len(), max: MAX_CHECKPOINT_BYTES });
        }
        let base = self.len;
        let mut bytes = Vec::with_capacity(HEADER_LEN + format::frame_len(state.len()) as usize);
        bytes.extend_from_slice(&format::encode_header(Header { base, checkpoint: true }));
        format::encode_frame(&mut bytes, Kind::Checkpoint, state);
        let name = format::segment_name(base);
        // The old tail must end at its written records: should this
        // checkpoint never become whole, it is the last segment again. The
        // records still pending are covered by the checkpoint and never
        // written.
        self.cut_tail_at(self.tail_bytes - self.pending.len() as u64)?;
        // A tail with this base holds no record (the log's length has not
        // moved since it began): the rename replaces it, whole or not at all.
        let written = fsutil::write_durably(&self.dir, &name, &bytes);
        let file = self.poison_on_error(written)?;
        // The records the checkpoint covers need no more writing.
        self.pending.clear();
        self.tail = file;
        self.tail_bytes = bytes.len() as u64;
        self.allocated = self.tail_bytes;
        self.unsynced_writes = false;
        self.synced = self.len;
        self.bytes_since_checkpoint = 0;
        let old: Vec<(u64, PathBuf)> = self.segments.drain(..).filter(|(b, _)| *b < base).collect();
        self.segments.push((base, self.dir.join(name)));
        // Oldest first: a crash part way leaves a run of segments ending in
        // the checkpoint, and open() deletes the rest.
        let removed =
            old.iter().try_for_each(|(_, path)| fsutil::remove(path)).and_then(|()| fsutil::sync_dir(&self.dir));
        self.poison_on_error(removed)
    }

    /// Takes out of the log the oldest segments whose records all lie at
    /// or below position `upto` — never the tail — for the caller to delete
    /// with [`Trim::remove`], when it no longer holds the log (deleting a
    /// large file takes a while). Only for a [`Options::trimmable`] log. A
    /// crash before or part way through the deletion leaves older segments
    /// that a later `open` reads again, which is harmless: they are still a
    /// run of whole segments ending where the next begins.
    pub fn trim(&mut self, upto: u64) -> Trim {
        assert!(self.options.trimmable, "trim on a log not opened as trimmable");
        // Segment i holds the records after its base up to the next one's.
        let n = self.segments.windows(2).take_while(|w| w[1].0 <= upto).count();
        Trim { dir: self.dir.clone(), segments: self.segments.drain(..n).map(|(_, p)| p).collect() }
    }

    /// The position the oldest segment starts after: 0 unless the log was
    /// trimmed or checkpointed.
    pub fn base(&self) -> u64 {
        self.segments.first().expect("a log has a tail segment").0
    }

    /// Bytes of record frames appended since the last checkpoint (or since
    /// the log began), for the caller to decide when to checkpoint.
    pub fn bytes_since_checkpoint(&self) -> u64 {
        self.bytes_since_checkpoint
    }

    /// Records since the log began: the position of the last one appended.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was ever appended (nor covered by a checkpoint).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records known durable.
    pub fn synced(&self) -> u64 {
        self.synced
    }

    /// Another handle on the tail segment, for a thread that syncs it while
    /// this one appends (`fdatasync` on it covers what this handle wrote).
    /// A new tail — after a rotation or a checkpoint, each of which syncs
    /// the old one first — needs a new handle ([`Log::tail_path`] says
    /// which file is the tail).
    pub fn tail_handle(&self) -> Result<File, StorageError> {
        self.tail.try_clone().map_err(StorageError::io("dup", self.tail_path().to_path_buf()))
    }

    /// The position the tail segment starts after: a rotation moves it
    /// on (a checkpoint may not, see [`Log::checkpoint`]).
    pub fn tail_base(&self) -> u64 {
        self.segments.last().expect("a log has a tail segment").0
    }

    /// The segment appends go to.
    pub fn tail_path(&self) -> &Path {
        &self.segments.last().expect("a log has a tail segment").1
    }

    /// The segment files, oldest first.
    pub fn segments(&self) -> impl Iterator<Item = &Path> {
        self.segments.iter().map(|(_, p)| p.as_path())
    }

    /// Syncs the full tail, cut to its records, then starts a segment at
    /// the current position: only the last segment ends in zeros.
    fn rotate(&mut self) -> Result<(), StorageError> {
        self.write_records()?;
        self.cut_tail_at(self.tail_bytes)?;
        self.sync()?;
        let base = self.len;
        let name = format::segment_name(base);
        let header = format::encode_header(Header { base, checkpoint: false });
        let written = fsutil::write_durably(&self.dir, &name, &header);
        self.tail = self.poison_on_error(written)?;
        self.tail_bytes = HEADER_LEN as u64;
        self.allocated = self.tail_bytes;
        self.segments.push((base, self.dir.join(name)));
        Ok(())
    }

    /// Hands the pending frames to the OS at the end of the tail's
    /// records, and keeps the zeros ahead of them.
    fn write_pending(&mut self) -> Result<(), StorageError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.write_records()?;
        self.preallocate()
    }

    /// Cuts the zeros off the tail file at `end`, where its written records
    /// end, and makes the file durable, records and size (`fsync`, which
    /// writes the size however it changed): a tail that stops being the
    /// last segment must not end in zeros. What counts as synced is the
    /// caller's to say: records may still be pending.
    fn cut_tail_at(&mut self, end: u64) -> Result<(), StorageError> {
        if self.allocated <= end {
            return Ok(());
        }
        let path = self.tail_path().to_path_buf();
        let cut = self.tail.set_len(end).map_err(StorageError::io("truncate", &path));
        self.poison_on_error(cut)?;
        self.allocated = end;
        let synced = self.tail.sync_all().map_err(StorageError::io("fsync", path));
        self.poison_on_error(synced)?;
        self.unsynced_writes = false;
        Ok(())
    }

    /// Writes the pending frames at the end of the tail's records.
    fn write_records(&mut self) -> Result<(), StorageError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let at = self.tail_bytes - self.pending.len() as u64;
        let path = self.tail_path().to_path_buf();
        let written = self.tail.write_all_at(&self.pending, at).map_err(StorageError::io("write", &path));
        self.poison_on_error(written)?;
        self.pending.clear();
        self.unsynced_writes = true;
        self.allocated = self.allocated.max(self.tail_bytes);
        Ok(())
    }

    /// Writes zeros ahead of the records when fewer than half of
    /// [`Options::preallocate_bytes`] are left.
    fn preallocate(&mut self) -> Result<(), StorageError> {
        let ahead = self.options.preallocate_bytes;
        if ahead > 0 && self.allocated - self.tail_bytes < ahead / 2 {
            // Zeros written out, not `fallocate`: ext4 marks fallocated
            // blocks unwritten, and the first write into each would change
            // the file's metadata again.
            let zeros = vec![0u8; (self.tail_bytes + ahead - self.allocated) as usize];
            let path = self.tail_path().to_path_buf();
            let extended = self.tail.write_all_at(&zeros, self.allocated).map_err(StorageError::io("write", path));
            self.poison_on_error(extended)?;
            self.allocated = self.tail_bytes + ahead;
        }
        Ok(())
    }

    fn check_poisoned(&self) -> Result<(), StorageError> {
        match &self.poisoned {
            Some(why) => Err(StorageError::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    fn poison_on_error<T>(&mut self, r: Result<T, StorageError>) -> Result<T, StorageError> {
        if let Err(e) = &r {
            self.poisoned = Some(e.to_string());
        }
        r
    }
}

/// Segments taken out of a log by [`Log::trim`], to delete.
#[derive(Debug)]
#[must_use = "the segments are still on disk until removed"]
pub struct Trim {
    dir: PathBuf,
    segments: Vec<PathBuf>,
}

impl Trim {
    /// How many segments.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Deletes them, oldest first, and syncs the directory.
    pub fn remove(self) -> Result<(), StorageError> {
        if self.segments.is_empty() {
            return Ok(());
        }
        self.segments.iter().try_for_each(|path| fsutil::remove(path))?;
        fsutil::sync_dir(&self.dir)
    }
}
