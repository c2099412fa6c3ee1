//! A replica's spill: batches of records it keeps on disk rather than in
//! memory until it needs them again, by increasing key (the protocol's
//! spill effect, `causeway_protocol::contract::spill`).
//!
//! # Files
//!
//! One file per batch in the spill's directory, named by the batch's first
//! and last key, `FFFFFFFFFFFFFFFFFFFF-LLLLLLLLLLLLLLLLLLLL.spill` (twenty
//! digits each), written whole and durably before [`Spill::put`] returns:
//! to a temporary name, fsynced, renamed into place, the directory fsynced.
//! A batch file is
//!
//! ```text
//! [magic "CWYSPILL"][format version u32 LE][entries u32 LE][body length u64 LE][CRC-32 of the body u32 LE]
//! body: per entry [key u64 LE][length u32 LE][bytes]
//! ```
//!
//! A batch is read only when asked for ([`Spill::get`]), and checked then:
//! a file that does not match its name or its checksum was damaged after it
//! was synced whole, and is reported ([`StorageError::Corrupt`]), never
//! skipped — it may hold what a peer still lacks. [`Spill::forget`] deletes
//! the batches whose keys are all at or below a key. Opening deletes what a
//! crash left half-written (`*.tmp`). The directory is made by the first
//! put: a replica that never spilled leaves none.

use crate::error::StorageError;
use crate::fsutil::{remove, sync_dir, write_durably, TMP_SUFFIX};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"CWYSPILL";
const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 4 + 8 + 4;
const SUFFIX: &str = ".spill";

/// A batch on disk: its first key and its size.
#[derive(Clone, Copy, Debug)]
struct Batch {
    first: u64,
    bytes: u64,
}

/// A replica's spill directory.
#[derive(Debug)]
pub struct Spill {
    dir: PathBuf,
    /// Batches by their last key.
    batches: BTreeMap<u64, Batch>,
    bytes: u64,
}

impl Spill {
    /// Opens the spill in `dir` (none there: an empty one).
    pub fn open(dir: &Path) -> Result<Spill, StorageError> {
        let mut spill = Spill { dir: dir.to_path_buf(), batches: BTreeMap::new(), bytes: 0 };
        if !dir.exists() {
            return Ok(spill);
        }
        for entry in fs::read_dir(dir).map_err(StorageError::io("list", dir))? {
            let entry = entry.map_err(StorageError::io("list", dir))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(TMP_SUFFIX) {
                remove(&path)?;
                continue;
            }
            let Some((first, last)) = parse_name(&name) else {
                return Err(corrupt(&path, 0, "not a spill batch's name".into()));
            };
            let bytes = entry.metadata().map_err(StorageError::io("stat", &path))?.len();
            if let Some((&other_last, other)) = spill.batches.range(first..).next() {
                if other.first <= last {
                    let reason = format!("overlaps the batch of keys {}..={other_last}", other.first);
                    return Err(corrupt(&path, 0, reason));
                }
            }
            spill.bytes += bytes;
            spill.batches.insert(last, Batch { first, bytes });
        }
        sync_dir(dir)?;
        Ok(spill)
    }

    /// Keeps `batch` (increasing keys) durably, as one file; entries at or
    /// below the newest key held already are dropped (a replica may put
    /// again, after a crash, what reached the disk before its record of it).
    pub fn put(&mut self, batch: &[(u64, Vec<u8>)]) -> Result<(), StorageError> {
        let newest = self.batches.keys().next_back().copied();
        let batch: Vec<&(u64, Vec<u8>)> = batch.iter().filter(|(k, _)| newest.is_none_or(|n| *k > n)).collect();
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else { return Ok(()) };
        let (first, last) = (first.0, last.0);
        let mut body = Vec::with_capacity(batch.iter().map(|(_, b)| 12 + b.len()).sum());
        let mut prev = None;
        for (key, bytes) in &batch {
            if prev.is_some_and(|p| *key <= p) {
                return Err(StorageError::Unordered(format!("spill keys must increase: {key} after {prev:?}")));
            }
            prev = Some(*key);
            let len = u32::try_from(bytes.len()).map_err(|_| StorageError::TooLarge {
                what: "spilled entry",
                len: bytes.len(),
                max: u32::MAX as usize,
            })?;
            body.extend_from_slice(&key.to_le_bytes());
            body.extend_from_slice(&len.to_le_bytes());
            body.extend_from_slice(bytes);
        }
        let mut file = Vec::with_capacity(HEADER + body.len());
        file.extend_from_slice(MAGIC);
        file.extend_from_slice(&VERSION.to_le_bytes());
        file.extend_from_slice(&(batch.len() as u32).to_le_bytes());
        file.extend_from_slice(&(body.len() as u64).to_le_bytes());
        file.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        file.extend_from_slice(&body);
        if !self.dir.exists() {
            // The directories made here, durably: each one's entry in its parent.
            let missing: Vec<PathBuf> =
                self.dir.ancestors().take_while(|d| !d.exists()).map(Path::to_path_buf).collect();
            fs::create_dir_all(&self.dir).map_err(StorageError::io("create directory", &self.dir))?;
            for made in missing.iter().rev() {
                if let Some(parent) = made.parent().filter(|p| !p.as_os_str().is_empty()) {
                    sync_dir(parent)?;
                }
            }
        }
        write_durably(&self.dir, &name(first, last), &file)?;
        self.bytes += file.len() as u64;
        self.batches.insert(last, Batch { first, bytes: file.len() as u64 });
        Ok(())
    }

    /// The entries of the oldest batch holding keys above `after`, those
    /// keys only, in order; none when no batch does.
    pub fn get(&self, after: u64) -> Result<Vec<(u64, Vec<u8>)>, StorageError> {
        let Some((&last, batch)) = self.batches.range(after.saturating_add(1)..).next() else { return Ok(Vec::new()) };
        let path = self.dir.join(name(batch.first, last));
        let bytes = fs::read(&path).map_err(StorageError::io("read", &path))?;
        let entries = decode(&path, &bytes, batch.first, last)?;
        Ok(entries.into_iter().filter(|(k, _)| *k > after).collect())
    }

    /// Deletes the batches whose keys are all at or below `upto`.
    pub fn forget(&mut self, upto: u64) -> Result<(), StorageError> {
        let mut removed = false;
        while let Some(entry) = self.batches.first_entry() {
            if *entry.key() > upto {
                break;
            }
            let (last, batch) = (*entry.key(), *entry.get());
            remove(&self.dir.join(name(batch.first, last)))?;
            self.bytes -= batch.bytes;
            entry.remove();
            removed = true;
        }
        if removed {
            // Not needed for safety (a batch that comes back after a crash
            // is forgotten again), but keeps the directory honest.
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Bytes on disk.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Batches on disk.
    pub fn batches(&self) -> usize {
        self.batches.len()
    }
}

fn name(first: u64, last: u64) -> String {
    format!("{first:020}-{last:020}{SUFFIX}")
}

fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (first, last) = name.strip_suffix(SUFFIX)?.split_once('-')?;
    if first.len() != 20 || last.len() != 20 {
        return None;
    }
    let (first, last) = (first.parse().ok()?, last.parse().ok()?);
    (first <= last).then_some((first, last))
}

fn corrupt(path: &Path, offset: u64, reason: String) -> StorageError {
    StorageError::Corrupt { file: path.to_path_buf(), offset, reason }
}

fn decode(path: &Path, bytes: &[u8], first: u64, last: u64) -> Result<Vec<(u64, Vec<u8>)>, StorageError> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err(corrupt(path, 0, "not a spill batch (bad magic or too short)".into()));
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let version = word(8);
    if version != VERSION {
        return Err(corrupt(path, 8, format!("format version {version}, expected {VERSION}")));
    }
    let count = word(12) as usize;
    let body_len = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    let crc = word(24);
    let body = &bytes[HEADER..];
    if body.len() as u64 != body_len {
        return Err(corrupt(path, 16, format!("body of {} bytes, the header says {body_len}", body.len())));
    }
    if crc32fast::hash(body) != crc {
        return Err(corrupt(path, HEADER as u64, "checksum mismatch".into()));
    }
    let mut entries = Vec::with_capacity(count.min(body.len() / 12));
    let mut at = 0usize;
    while at < body.len() {
        let offset = (HEADER + at) as u64;
        if body.len() - at < 12 {
            return Err(corrupt(path, offset, "an entry's header is cut short".into()));
        }
        let key = u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(body[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 12;
        if body.len() - at < len {
            return Err(corrupt(path, offset, format!("an entry of {len} bytes runs past the end")));
        }
        entries.push((key, body[at..at + len].to_vec()));
        at += len;
    }
    let keys_ok = entries.first().map(|e| e.0) == Some(first)
        && entries.last().map(|e| e.0) == Some(last)
        && entries.windows(2).all(|w| w[0].0 < w[1].0);
    if entries.len() != count || !keys_ok {
        return Err(corrupt(path, 0, "the entries do not match the file's name and header".into()));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(keys: &[u64]) -> Vec<(u64, Vec<u8>)> {
        keys.iter().map(|&k| (k, format!("entry {k}").into_bytes())).collect()
    }

    #[test]
    fn batches_survive_a_reopen_are_read_one_at_a_time_and_are_forgotten_whole() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("spill").join("dc0-p0");
        let mut spill = Spill::open(&dir).unwrap();
        assert!(!dir.exists(), "made by the first put");
        spill.put(&batch(&[1, 2, 3])).unwrap();
        assert!(dir.exists());
        spill.put(&batch(&[5, 8])).unwrap();
        spill.put(&batch(&[7, 8])).unwrap();
        assert_eq!(spill.batches(), 2, "what is held already is not put again");
        let spill = Spill::open(&dir).unwrap();
        assert_eq!(spill.get(0).unwrap(), batch(&[1, 2, 3]));
        assert_eq!(spill.get(2).unwrap(), batch(&[3]), "keys above `after` only");
        assert_eq!(spill.get(3).unwrap(), batch(&[5, 8]));
        assert_eq!(spill.get(8).unwrap(), vec![]);
        let mut spill = spill;
        spill.forget(5).unwrap();
        assert_eq!(spill.batches(), 1, "the first batch is all at or below 5, the second is not");
        let bytes = spill.bytes();
        spill.forget(7).unwrap();
        assert_eq!(spill.bytes(), bytes, "a batch with a key above stays whole");
        let mut spill = Spill::open(&dir).unwrap();
        assert_eq!(spill.get(0).unwrap(), batch(&[5, 8]), "forgotten for good");
        spill.forget(u64::MAX).unwrap();
        assert_eq!((spill.batches(), spill.bytes()), (0, 0));
    }

    #[test]
    fn a_half_written_batch_is_removed_and_a_damaged_one_is_reported_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::open(dir.path()).unwrap();
        spill.put(&batch(&[1, 2])).unwrap();
        std::fs::write(dir.path().join(format!("{}{TMP_SUFFIX}", name(3, 4))), b"CWYSP").unwrap();
        let spill = Spill::open(dir.path()).unwrap();
        assert_eq!(spill.batches(), 1);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "the temporary file is gone");

        let path = dir.path().join(name(1, 2));
        let mut bytes = std::fs::read(&path).unwrap();
        let end = bytes.len() - 1;
        bytes[end] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let err = spill.get(0).unwrap_err().to_string();
        assert!(err.contains("checksum mismatch") && err.contains(&name(1, 2)), "{err}");

        std::fs::write(dir.path().join("stray.txt"), b"").unwrap();
        let err = Spill::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("stray.txt") && err.contains("not a spill batch's name"), "{err}");
    }

    #[test]
    fn a_file_that_lies_about_its_keys_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::open(dir.path()).unwrap();
        spill.put(&batch(&[1, 2])).unwrap();
        std::fs::rename(dir.path().join(name(1, 2)), dir.path().join(name(1, 3))).unwrap();
        let spill = Spill::open(dir.path()).unwrap();
        let err = spill.get(0).unwrap_err().to_string();
        assert!(err.contains("do not match the file's name"), "{err}");
    }
}
