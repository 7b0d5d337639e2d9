//! Scratch files: temporary files unlinked while open (`tempfile::tempfile`: `O_TMPFILE` where
//! the file system has it, else created and unlinked at once under `$TMPDIR`), so that nothing
//! is left behind however the process ends, SIGKILL included; the disk is freed when the last
//! handle closes. A reader that opens a file by name (the `.jtr` readers open their path once
//! per pass) is given [`Scratch::path`], `/proc/self/fd/N`: each open of it is a new open file
//! of the same unlinked file, with its own offset.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::error::TraceError;

/// One scratch file, gone when this is dropped (and when the process ends).
#[derive(Debug)]
pub struct Scratch {
    file: File,
}

impl Scratch {
    /// A new, empty scratch file; `what` it is for names it in the error (e.g. "to import").
    pub fn new(what: &str) -> Result<Scratch, TraceError> {
        let file = tempfile::tempfile()
            .map_err(|e| TraceError::io(format!("cannot create a temporary file {what}"), e))?;
        Ok(Scratch { file })
    }

    /// The open file (read and write).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// A name that opens this file again while it is open here (`/proc/self/fd/N`).
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek, SeekFrom, Write};

    use super::*;

    /// Written through the handle, read back through it and through its path (its own
    /// offset); no name of it anywhere under `$TMPDIR`.
    #[test]
    fn a_scratch_file_reads_back_and_has_no_name() {
        let s = Scratch::new("to test").unwrap();
        let mut f = s.file();
        f.write_all(b"detours").unwrap();
        let mut again = File::open(s.path()).unwrap();
        let mut text = String::new();
        again.read_to_string(&mut text).unwrap();
        assert_eq!(text, "detours");
        f.seek(SeekFrom::Start(1)).unwrap();
        let mut rest = String::new();
        f.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "etours");
        let link = std::fs::read_link(s.path()).unwrap();
        assert!(link.to_string_lossy().ends_with("(deleted)"), "{link:?}");
    }
}
