//! The few file-system steps the log takes, each with the path in its error.

use crate::error::StorageError;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// The suffix of a file being written before it is renamed into place.
pub const TMP_SUFFIX: &str = ".tmp";

/// Makes the directory's entries (creations, renames, deletions) durable.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(StorageError::io("fsync directory", dir))
}

/// Writes `bytes` as `dir/name` so that a crash leaves either no such file
/// or the whole of it: to `name.tmp`, fsync, rename, fsync the directory.
/// Returns the file, open for writing.
pub fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> Result<File, StorageError> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let path = dir.join(name);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&tmp)
        .map_err(StorageError::io("create", &tmp))?;
    file.write_all(bytes).map_err(StorageError::io("write", &tmp))?;
    file.sync_all().map_err(StorageError::io("fsync", &tmp))?;
    fs::rename(&tmp, &path).map_err(StorageError::io("rename into place", &path))?;
    sync_dir(dir)?;
    Ok(file)
}

/// Removes a file; one already gone is fine.
pub fn remove(path: &Path) -> Result<(), StorageError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StorageError::io("remove", path)(e)),
        _ => Ok(()),
    }
}
