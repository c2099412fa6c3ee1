//! Opening a log directory: its identity, the newest complete checkpoint,
//! the records after it, a torn tail cut. The rules are in the crate's
//! documentation.

use crate::error::StorageError;
use crate::format::{self, BadFrame, Header, Kind, FRAME_HEADER_LEN, HEADER_LEN, MAX_CHECKPOINT_BYTES};
use crate::fsutil::{self, TMP_SUFFIX};
use crate::identity::{Identity, IDENTITY_FILE};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

/// What `open` found on disk.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The newest complete checkpoint, if one was ever taken.
    pub checkpoint: Option<Vec<u8>>,
    /// The log's length the checkpoint covers (0 without one): the first of
    /// `records` is at position `base + 1`.
    pub base: u64,
    /// The records appended after the checkpoint (or since the log began),
    /// in order.
    pub records: Vec<Vec<u8>>,
    /// The torn or damaged end that was cut, if any.
    pub torn_tail: Option<TornTail>,
    /// Segments that an interrupted checkpoint had replaced but not yet
    /// deleted; they are deleted now.
    pub stale_segments_removed: Vec<PathBuf>,
}

impl Recovered {
    /// The log's length: the position of its last record.
    pub fn len(&self) -> u64 {
        self.base + self.records.len() as u64
    }

    /// Whether the log holds nothing: no checkpoint and no record.
    pub fn is_empty(&self) -> bool {
        self.checkpoint.is_none() && self.records.is_empty()
    }
}

/// The end of the last segment that did not hold whole frames, and was cut:
/// the file truncated at `offset` (or, with `offset` 0, removed) and synced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    pub file: PathBuf,
    /// Where the first bad frame (or, at 0, the bad segment) began.
    pub offset: u64,
    /// How many bytes were cut.
    pub bytes: u64,
    /// Why the frame at `offset` was not whole.
    pub reason: String,
}

/// The open log's starting state, for the `Log` to go on from.
pub(crate) struct Opened {
    pub recovered: Recovered,
    /// The live segments, oldest first, by base; the last is the tail.
    pub segments: Vec<(u64, PathBuf)>,
    /// The tail segment, open for writing.
    pub tail: File,
    /// Where the tail's records end: appends go on there.
    pub tail_bytes: u64,
    /// The tail file's size: zeros past `tail_bytes` (preallocated).
    pub allocated: u64,
    /// Bytes of record frames since the checkpoint (or the log's start).
    pub bytes_since_checkpoint: u64,
}

/// Where a segment's scan left the log.
struct Tail {
    base: u64,
    path: PathBuf,
    bytes: u64,
    size: u64,
}

pub(crate) fn open(dir: &Path, identity: &Identity, trimmable: bool) -> Result<Opened, StorageError> {
    create_dir(dir)?;
    let (mut segments, tmps) = list(dir)?;
    check_identity(dir, identity, !segments.is_empty())?;
    // A `.tmp` file is a segment or identity whose write was cut before its
    // rename: it never held anything durable.
    for tmp in &tmps {
        fsutil::remove(tmp)?;
    }
    if !tmps.is_empty() {
        fsutil::sync_dir(dir)?;
    }

    // The newest segment that starts with a whole checkpoint replaces every
    // older one: older segments still here are left by a checkpoint that was
    // interrupted before it deleted them.
    let mut start = 0;
    for (i, (_, path)) in segments.iter().enumerate().rev() {
        if starts_with_whole_checkpoint(path)? {
            start = i;
            break;
        }
    }
    let stale: Vec<PathBuf> = segments.drain(..start).map(|(_, p)| p).collect();
    for path in &stale {
        fsutil::remove(path)?;
    }
    if !stale.is_empty() {
        fsutil::sync_dir(dir)?;
    }

    let mut recovered = Recovered { stale_segments_removed: stale, ..Recovered::default() };
    let mut tail: Option<Tail> = None;
    let mut bytes_since_checkpoint = 0u64;
    let count = segments.len();
    let mut live = Vec::with_capacity(count);
    for (j, (name_base, path)) in segments.into_iter().enumerate() {
        let (first, last) = (j == 0, j + 1 == count);
        let data = fs::read(&path).map_err(StorageError::io("read", &path))?;
        let corrupt =
            |offset: usize, reason: String| StorageError::Corrupt { file: path.clone(), offset: offset as u64, reason };
        // A bad frame at `at` is a torn write only in the last segment with
        // nothing good after it; elsewhere it is damage.
        let torn_at = |at: usize| last && format::next_good_frame(&data, at).is_none();

        let header = match format::parse_header(&data) {
            Ok(h) => h,
            // Segments are renamed into place whole, so a bad header is not a
            // torn append; but a last segment with no good frame at all
            // holds nothing durable, and when older segments (or nothing
            // at all) come before it, dropping it loses nothing.
            Err(reason) if torn_at(0) && (!first || name_base == 0) => {
                recovered.torn_tail = Some(remove_whole(dir, &path, data.len(), reason)?);
                break;
            }
            Err(reason) => return Err(corrupt(0, reason)),
        };
        check_header(header, name_base, first, trimmable, recovered.len()).map_err(|r| corrupt(0, r))?;
        if first && trimmable && !header.checkpoint {
            // A trimmed log begins where its oldest segment does.
            recovered.base = header.base;
        }

        let mut at = HEADER_LEN;
        if header.checkpoint {
            match format::parse_frame(&data, at) {
                Ok(f) if f.kind == Kind::Checkpoint && first => {
                    recovered.checkpoint = Some(data[f.payload].to_vec());
                    recovered.base = header.base;
                    at = f.end;
                }
                Ok(f) if f.kind == Kind::Checkpoint => {
                    return Err(corrupt(at, "a whole checkpoint after the newest one found".into()));
                }
                Ok(_) => return Err(corrupt(at, "a checkpoint segment that starts with a record".into())),
                // The checkpoint this segment was to hold never became whole:
                // the segments before it still hold what it would replace.
                Err(bad) if torn_at(at) && (!first || header.base == 0) => {
                    let reason = format!("checkpoint never completed: {bad}");
                    recovered.torn_tail = Some(remove_whole(dir, &path, data.len(), reason)?);
                    break;
                }
                Err(bad) => return Err(corrupt(at, checkpoint_unreadable(bad, header.base))),
            }
        }
        let frames_start = at;
        while at < data.len() {
            match format::parse_frame(&data, at) {
                Ok(f) if f.kind == Kind::Record => {
                    recovered.records.push(data[f.payload].to_vec());
                    at = f.end;
                }
                Ok(_) => return Err(corrupt(at, "a checkpoint frame after the start of a segment".into())),
                // The zeros a preallocated tail holds past its records.
                Err(_) if last && data[at..].iter().all(|&b| b == 0) => break,
                Err(bad) if torn_at(at) => {
                    recovered.torn_tail = Some(truncate(&path, at, data.len(), bad)?);
                    break;
                }
                Err(bad) if last => return Err(corrupt(at, format!("{bad}, followed by good frames"))),
                Err(bad) => return Err(corrupt(at, format!("{bad}, in a segment that is not the last"))),
            }
        }
        bytes_since_checkpoint += (at - frames_start) as u64;
        // A torn tail was truncated at `at`; zeros after the records stay.
        let size = if recovered.torn_tail.is_some() { at } else { data.len() };
        tail = Some(Tail { base: name_base, path: path.clone(), bytes: at as u64, size: size as u64 });
        live.push((name_base, path));
    }

    let (tail, tail_bytes, allocated) = match tail {
        Some(t) => {
            // Not in append mode: writes go at the records' end, before
            // the zeros a preallocated tail holds.
            let file = OpenOptions::new().write(true).open(&t.path).map_err(StorageError::io("open", &t.path))?;
            debug_assert_eq!(live.last().map(|(b, _)| *b), Some(t.base));
            (file, t.bytes, t.size)
        }
        None => {
            // Nothing (left) on disk: the log begins.
            debug_assert!(recovered.is_empty());
            let base = 0;
            let name = format::segment_name(base);
            let header = format::encode_header(Header { base, checkpoint: false });
            let file = fsutil::write_durably(dir, &name, &header)?;
            live.push((base, dir.join(name)));
            (file, HEADER_LEN as u64, HEADER_LEN as u64)
        }
    };
    Ok(Opened { recovered, segments: live, tail, tail_bytes, allocated, bytes_since_checkpoint })
}

/// Checks a segment's header against its name and the segments before it.
fn check_header(header: Header, name_base: u64, first: bool, trimmable: bool, len_so_far: u64) -> Result<(), String> {
    if header.base != name_base {
        return Err(format!("segment header says it begins at position {}, its name says {name_base}", header.base));
    }
    if first && !header.checkpoint && header.base != 0 && !trimmable {
        return Err(format!("the log begins at position {} without a checkpoint of what came before", header.base));
    }
    if !first && header.base != len_so_far {
        return Err(format!(
            "segment begins at position {}, the one before it ends at {len_so_far}: a segment is missing",
            header.base
        ));
    }
    Ok(())
}

fn checkpoint_unreadable(bad: BadFrame, base: u64) -> String {
    format!("checkpoint of the first {base} records unreadable ({bad}), and no older segment holds them")
}

/// Whether the segment at `path` has a good header saying it starts with a
/// checkpoint, and that checkpoint frame is whole. Reads only that prefix.
fn starts_with_whole_checkpoint(path: &Path) -> Result<bool, StorageError> {
    let file = File::open(path).map_err(StorageError::io("open", path))?;
    let mut head = Vec::with_capacity(HEADER_LEN + FRAME_HEADER_LEN);
    let mut reader = file.take((HEADER_LEN + FRAME_HEADER_LEN) as u64);
    reader.read_to_end(&mut head).map_err(StorageError::io("read", path))?;
    let Ok(header) = format::parse_header(&head) else { return Ok(false) };
    if !header.checkpoint || head.len() < HEADER_LEN + FRAME_HEADER_LEN {
        return Ok(false);
    }
    let len = u32::from_le_bytes([head[HEADER_LEN], head[HEADER_LEN + 1], head[HEADER_LEN + 2], head[HEADER_LEN + 3]]);
    if len as usize > MAX_CHECKPOINT_BYTES {
        return Ok(false);
    }
    // The payload is read only as far as the file goes: a length field past
    // the end allocates nothing.
    let reader = reader.into_inner();
    reader.take(u64::from(len)).read_to_end(&mut head).map_err(StorageError::io("read", path))?;
    Ok(matches!(format::parse_frame(&head, HEADER_LEN), Ok(f) if f.kind == Kind::Checkpoint))
}

fn truncate(path: &Path, at: usize, size: usize, bad: BadFrame) -> Result<TornTail, StorageError> {
    let file = OpenOptions::new().write(true).open(path).map_err(StorageError::io("open", path))?;
    file.set_len(at as u64).map_err(StorageError::io("truncate", path))?;
    file.sync_all().map_err(StorageError::io("fsync", path))?;
    Ok(TornTail { file: path.to_path_buf(), offset: at as u64, bytes: (size - at) as u64, reason: bad.to_string() })
}

fn remove_whole(dir: &Path, path: &Path, size: usize, reason: String) -> Result<TornTail, StorageError> {
    fsutil::remove(path)?;
    fsutil::sync_dir(dir)?;
    Ok(TornTail { file: path.to_path_buf(), offset: 0, bytes: size as u64, reason })
}

fn create_dir(dir: &Path) -> Result<(), StorageError> {
    match fs::create_dir(dir) {
        Ok(()) => match dir.parent() {
            // The new directory's entry in its parent must be durable too.
            Some(parent) if !parent.as_os_str().is_empty() => fsutil::sync_dir(parent),
            _ => Ok(()),
        },
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            if dir.is_dir() {
                Ok(())
            } else {
                Err(StorageError::io("open log directory", dir)(e))
            }
        }
        Err(e) => Err(StorageError::io("create log directory", dir)(e)),
    }
}

/// The segments in `dir`, sorted by base, and the leftover `.tmp` files of
/// interrupted writes. Other files are left alone.
#[allow(clippy::type_complexity)]
fn list(dir: &Path) -> Result<(Vec<(u64, PathBuf)>, Vec<PathBuf>), StorageError> {
    let (mut segments, mut tmps) = (Vec::new(), Vec::new());
    for entry in fs::read_dir(dir).map_err(StorageError::io("list", dir))? {
        let entry = entry.map_err(StorageError::io("list", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = format::parse_segment_name(name) {
            segments.push((base, entry.path()));
        } else if let Some(stem) = name.strip_suffix(TMP_SUFFIX) {
            if stem == IDENTITY_FILE || format::parse_segment_name(stem).is_some() {
                tmps.push(entry.path());
            }
        }
    }
    segments.sort();
    Ok((segments, tmps))
}

/// Checks the identity file in `dir` against `identity`, or writes it (and
/// makes it durable) if there is none. A directory with segments but no
/// identity is refused.
fn check_identity(dir: &Path, identity: &Identity, has_segments: bool) -> Result<(), StorageError> {
    identity.validate().map_err(StorageError::InvalidIdentity)?;
    let path = dir.join(IDENTITY_FILE);
    match fs::read(&path) {
        Ok(bytes) => {
            let found = crate::identity::parse(&bytes)
                .map_err(|reason| StorageError::BadIdentity { path: path.clone(), reason })?;
            if &found != identity {
                return Err(StorageError::IdentityMismatch { path, expected: identity.clone(), found });
            }
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if has_segments {
                return Err(StorageError::NoIdentity { path: dir.to_path_buf() });
            }
            fsutil::write_durably(dir, IDENTITY_FILE, identity.render().as_bytes()).map(drop)
        }
        Err(e) => Err(StorageError::io("read", path)(e)),
    }
}
