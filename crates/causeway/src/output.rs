//! Files and directories a command writes when its work is done, checked
//! before the work starts: a path that cannot be written fails at once, not
//! after a ten-minute run.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

/// A file opened for writing before the work; written once it is done. If
/// the command fails before writing it, a file that did not exist before is
/// removed again, and one that did is left as it was.
pub struct OutputFile {
    path: PathBuf,
    file: File,
    existed: bool,
    written: bool,
}

impl OutputFile {
    /// Opens `path` for writing (creating it), or says why it cannot,
    /// naming the `flag` that asked for it.
    pub fn open(path: &Path, flag: &str) -> Result<OutputFile> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("{flag} {}: cannot open the file for writing", path.display()))?;
        Ok(OutputFile { path: path.to_path_buf(), file, existed, written: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file's contents with what `write` writes.
    pub fn write(mut self, write: impl FnOnce(&mut BufWriter<&File>) -> std::io::Result<()>) -> Result<()> {
        let result = (|| {
            self.file.set_len(0)?;
            self.file.rewind()?;
            let mut w = BufWriter::new(&self.file);
            write(&mut w)?;
            w.flush()
        })();
        self.written = true;
        result.with_context(|| format!("cannot write {}", self.path.display()))
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if !self.written && !self.existed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates the directory `dir` (and its parents) and checks that a file can
/// be written in it, naming the `flag` that asked for it.
pub fn prepare_dir(dir: &Path, flag: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{flag} {}: cannot create the directory", dir.display()))?;
    let probe = dir.join(format!(".causeway-write-check-{}", std::process::id()));
    File::create(&probe).with_context(|| format!("{flag} {}: cannot write in the directory", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Written readable by its owner only (created so: never readable by others,
/// not even for a moment).
pub fn write_private(path: &Path, text: &str) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).with_context(|| format!("cannot write {}", path.display()))?;
    #[cfg(unix)]
    {
        // An existing file keeps its mode through open: set it.
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot restrict {}", path.display()))?;
    }
    file.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}
