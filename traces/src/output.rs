//! The one way every jitterbench tool writes an output file (traces, exports, JSON and CSV
//! reports, SVG plots).
//!
//! Rules, by what the path names when the tool starts writing:
//! - **nothing** or a **regular file**: the bytes go to a temporary file beside the target,
//!   which is synced and renamed onto it only when complete, so a full disk or a crash never
//!   leaves a partial or empty output, and an old file is either kept whole or replaced whole.
//!   Replacing an existing file is said on standard error (`replaced <path>`); its permissions
//!   are kept.
//! - **anything else that exists** (a device such as `/dev/null` or `/dev/full`, a FIFO, a
//!   terminal): written through in place, never replaced by a regular file; a write error
//!   (`/dev/full`) is an error.
//! - **a symbolic link**: the link is followed and the rules above apply to its target (a
//!   regular target is replaced through a temporary file beside the *target*, so the link stays
//!   a link); a link whose target does not exist is refused rather than created through.
//! - **a directory**: refused.
//!
//! An output that must be readable while it grows (the collector's trace) uses
//! [`StreamingOutput`]: the same rules, with the new file published at its path once its header
//! is on disk and a replacement renamed onto the old file only when complete.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::error::TraceError;

mod room;
pub(crate) use room::check_size_limit;
pub use room::{bytes_shown, check_room, free_bytes, reserve};

/// How [`write_output`] put the bytes in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A new regular file was created.
    Created,
    /// An existing regular file was replaced whole.
    Replaced,
    /// Written in place into something that is not a regular file (a device, a FIFO).
    Through,
}

/// What an output path names before writing.
#[derive(Debug)]
enum Target {
    /// Nothing: create `path` (through a temporary file).
    Absent(PathBuf),
    /// A regular file at this (link-resolved) path, with its permissions.
    Regular(PathBuf, Permissions),
    /// Something else that exists: write through.
    Other,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> TraceError {
    move |e| TraceError::io(context, e)
}

/// Classifies `path` under the module's rules.
fn resolve(path: &Path) -> Result<Target, TraceError> {
    let shown = path.display();
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Target::Absent(path.into())),
        Err(e) => return Err(TraceError::io(format!("cannot inspect {shown}"), e)),
    };
    let meta = if meta.file_type().is_symlink() {
        match fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let to =
                    fs::read_link(path).map_or_else(|_| "?".into(), |p| p.display().to_string());
                return Err(TraceError::Argument(format!(
                    "{shown} is a symbolic link to {to}, which does not exist; \
                     refusing to create a file through a link (give the target path instead)"
                )));
            }
            Err(e) => return Err(TraceError::io(format!("cannot inspect {shown}"), e)),
        }
    } else {
        meta
    };
    if meta.is_dir() {
        return Err(TraceError::Argument(format!(
            "{shown} is a directory, not an output file"
        )));
    }
    if meta.is_file() {
        let real = fs::canonicalize(path).map_err(io(format!("cannot resolve {shown}")))?;
        return Ok(Target::Regular(real, meta.permissions()));
    }
    Ok(Target::Other)
}

/// Creates a new temporary file beside `target`.
fn temp_beside(target: &Path) -> Result<(PathBuf, File), TraceError> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let pid = std::process::id();
    for i in 0..1000 {
        let tmp = dir.join(format!(".{name}.{pid}.{i}.tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(TraceError::io(
                    format!("cannot create a temporary file in {}", dir.display()),
                    e,
                ))
            }
        }
    }
    Err(TraceError::Argument(format!(
        "cannot create a temporary file in {}: too many stale ones",
        dir.display()
    )))
}

/// Writes an output file safely under the module's rules: `fill` writes the content;
/// says `replaced <path>` on standard error when an existing file was replaced.
pub fn write_output<E, F>(path: &Path, fill: F) -> Result<Written, E>
where
    E: From<TraceError>,
    F: FnOnce(&mut dyn Write) -> Result<(), E>,
{
    let shown = path.display().to_string();
    let (target, perms) = match resolve(path)? {
        Target::Other => {
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io(format!("cannot open {shown}")))?;
            let mut w = BufWriter::with_capacity(1 << 16, f);
            fill(&mut w)?;
            w.flush().map_err(io(format!("cannot write {shown}")))?;
            return Ok(Written::Through);
        }
        Target::Absent(p) => (p, None),
        Target::Regular(p, perms) => (p, Some(perms)),
    };
    let (tmp, f) = temp_beside(&target)?;
    let result = (|| -> Result<(), E> {
        if let Some(p) = &perms {
            f.set_permissions(p.clone())
                .map_err(io(format!("cannot set permissions of {}", tmp.display())))?;
        }
        let mut w = BufWriter::with_capacity(1 << 16, f);
        fill(&mut w)?;
        let f = w
            .into_inner()
            .map_err(|e| TraceError::io(format!("cannot write {shown}"), e.into_error()))?;
        f.sync_all().map_err(io(format!("cannot write {shown}")))?;
        fs::rename(&tmp, &target).map_err(io(format!("cannot rename onto {shown}")))?;
        Ok(())
    })();
    if let Err(e) = result {
        // Only the temporary file this call created is removed; the target is untouched.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if perms.is_some() {
        eprintln!("replaced {shown}");
        Ok(Written::Replaced)
    } else {
        Ok(Written::Created)
    }
}

/// Checks, before any work, that [`write_output`] (or [`StreamingOutput`]) could write `path`
/// now, under the same rules: a directory, a dangling link, a missing parent folder, a parent
/// that is not a folder, or a folder where no file can be created is refused with one line. A
/// regular file or a new path is probed by creating (and removing) the temporary file the
/// write would use beside it; a device is opened for writing (a FIFO without a reader yet
/// passes). Commands call it while preparing, so that a long run never ends in an output it
/// cannot save. `what` names the flag in the error (e.g. `-o`, `--plot`).
pub fn check_writable(path: &Path, what: &str) -> Result<(), TraceError> {
    let shown = path.display();
    let refuse =
        |e: TraceError| TraceError::Argument(format!("{what} {}", crate::error::chain_line(&e)));
    check_folder(path, what)?;
    let target = match resolve(path).map_err(refuse)? {
        Target::Other => {
            use std::os::unix::fs::OpenOptionsExt;
            return match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
            {
                Ok(_) => Ok(()),
                // A FIFO nobody reads yet: the write blocks until a reader comes, as asked.
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Ok(()),
                Err(e) => Err(refuse(TraceError::io(format!("cannot open {shown}"), e))),
            };
        }
        Target::Absent(p) | Target::Regular(p, _) => p,
    };
    // A full file system takes an empty file but not its first block.
    check_room(
        room::folder_of(&target),
        &format!("{what} {shown}"),
        1,
        0,
        0,
    )?;
    let (tmp, _file) = temp_beside(&target).map_err(|e| {
        TraceError::Argument(format!(
            "{what} {shown}: cannot write there ({})",
            crate::error::chain_line(&e)
        ))
    })?;
    let _ = fs::remove_file(&tmp);
    Ok(())
}

/// Refuses an output whose folder does not exist or is not a folder.
fn check_folder(path: &Path, what: &str) -> Result<(), TraceError> {
    let shown = path.display();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(TraceError::Argument(format!(
            "{what} {shown}: {} is not a folder",
            dir.display()
        ))),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(TraceError::Argument(format!(
            "{what} {shown}: folder {} does not exist (create it first)",
            dir.display()
        ))),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Err(TraceError::Argument(format!(
            "{what} {shown}: a part of {} is not a folder",
            dir.display()
        ))),
        Err(e) => Err(TraceError::Argument(format!(
            "{what} {}",
            crate::error::chain_line(&TraceError::io(
                format!("cannot inspect {}", dir.display()),
                e
            ))
        ))),
    }
}

/// File name extensions jitterbench knows as naming a format; an output whose name ends in
/// one of them must be that format (see [`check_extension`]).
const KNOWN_EXTENSIONS: &[&str] = &[
    "jtr", "csv", "jsonl", "ndjson", "json", "svg", "png", "pdf", "md", "lgs", "noise", "txt",
];

/// Refuses an output name whose extension names another format than the one written
/// (`-o report.csv` for a JSON report, `-o trace.csv` for the collector's `.jtr`): the file
/// would hold one format under another's name. `format` names what is written, `exts` its
/// extensions; a name without an extension or with one jitterbench does not know (a device,
/// `trace.bin`) is accepted.
pub fn check_extension(
    path: &Path,
    what: &str,
    format: &str,
    exts: &[&str],
) -> Result<(), TraceError> {
    let Some(ext) = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
    else {
        return Ok(());
    };
    if exts.contains(&ext.as_str()) || !KNOWN_EXTENSIONS.contains(&ext.as_str()) {
        return Ok(());
    }
    Err(TraceError::Argument(format!(
        "{what} {}: this writes {format}, but the name ends in .{ext}; name it .{}",
        path.display(),
        exts.first().copied().unwrap_or("?")
    )))
}

/// [`check_extension`] then [`check_writable`]: every check of an output before the work.
pub fn check_output(
    path: &Path,
    what: &str,
    format: &str,
    exts: &[&str],
) -> Result<(), TraceError> {
    check_extension(path, what, format, exts)?;
    check_writable(path, what)
}

/// Where a [`StreamingOutput`]'s bytes go until it is complete.
#[derive(Debug)]
enum Stage {
    /// A temporary file beside a path that did not exist; linked to the path by `publish`.
    New,
    /// The temporary file is linked to the path (created by this run).
    Published,
    /// A temporary file beside an existing regular file (link-resolved), renamed onto it by
    /// `commit`.
    Replacing(PathBuf),
    /// Written in place (a device, a FIFO).
    Through,
}

/// An output written while it grows (the collector's trace and FTQ series), under the same
/// rules as [`write_output`] but readable while it is written:
/// - a **new path** is written in a temporary file beside it and linked to the path (never
///   replacing anything that appeared meanwhile) by [`StreamingOutput::publish`] once its first
///   bytes (a trace's header) are on disk: the path never holds an empty or headless file, and
///   a crash after that leaves every complete chunk at the path;
/// - an **existing regular file** (or a link's regular target) stays whole until
///   [`StreamingOutput::commit`] renames the complete new file onto it; a crash or error before
///   leaves the old file untouched and the collected data in the temporary file
///   ([`StreamingOutput::data_path`]);
/// - a **device or FIFO** is written through; a **directory** or a **dangling link** is refused.
#[derive(Debug)]
pub struct StreamingOutput {
    file: File,
    path: PathBuf,
    tmp: Option<PathBuf>,
    stage: Stage,
    keep: bool,
}

impl StreamingOutput {
    /// Opens `path` for streaming under the rules above (nothing at `path` is changed yet).
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let shown = path.display().to_string();
        let (file, tmp, stage) = match resolve(path)? {
            Target::Other => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(io(format!("cannot open {shown}")))?;
                (f, None, Stage::Through)
            }
            Target::Absent(p) => {
                let (tmp, f) = temp_beside(&p)?;
                (f, Some(tmp), Stage::New)
            }
            Target::Regular(p, perms) => {
                let (tmp, f) = temp_beside(&p)?;
                if let Err(e) = f.set_permissions(perms) {
                    let _ = fs::remove_file(&tmp);
                    return Err(TraceError::io(
                        format!("cannot set permissions of {}", tmp.display()),
                        e,
                    ));
                }
                (f, Some(tmp), Stage::Replacing(p))
            }
        };
        Ok(StreamingOutput {
            file,
            path: path.into(),
            tmp,
            stage,
            keep: false,
        })
    }

    /// From now on the output holds data worth keeping: dropping it without `commit` (an error
    /// during the collection) leaves the temporary file or the published path in place.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// A handle on the open file (all handles share one file offset).
    pub fn file(&self) -> Result<File, TraceError> {
        self.file
            .try_clone()
            .map_err(io(format!("cannot open {}", self.path.display())))
    }

    /// Whether an existing file is being replaced (it stays whole until `commit`).
    pub fn replaces(&self) -> bool {
        matches!(self.stage, Stage::Replacing(_))
    }

    /// Where the bytes written so far are: the path, or the temporary file while replacing.
    pub fn data_path(&self) -> &Path {
        match (&self.stage, &self.tmp) {
            (Stage::New | Stage::Replacing(_), Some(t)) => t,
            _ => &self.path,
        }
    }

    /// Makes a new output visible at its path (call once its first bytes are written and
    /// flushed); refuses to replace a file that appeared at the path meanwhile. No-op otherwise.
    pub fn publish(&mut self) -> Result<(), TraceError> {
        let (Stage::New, Some(tmp)) = (&self.stage, &self.tmp) else {
            return Ok(());
        };
        let shown = self.path.display();
        match fs::hard_link(tmp, &self.path) {
            Ok(()) => {
                let _ = fs::remove_file(tmp);
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(TraceError::Argument(format!(
                    "{shown} was created by another program while this one started; left as it is"
                )))
            }
            // A file system without hard links: rename, still only onto nothing.
            Err(_) if fs::symlink_metadata(&self.path).is_err() => {
                fs::rename(tmp, &self.path).map_err(io(format!("cannot create {shown}")))?;
            }
            Err(e) => return Err(TraceError::io(format!("cannot create {shown}"), e)),
        }
        self.tmp = None;
        self.stage = Stage::Published;
        Ok(())
    }

    /// Finishes the output: a replacement is synced and renamed onto the old file (saying
    /// `replaced <path>`), a new output is published if it was not yet.
    pub fn commit(mut self) -> Result<Written, TraceError> {
        match &self.stage {
            Stage::New => {
                self.publish()?;
                self.keep = true;
                Ok(Written::Created)
            }
            Stage::Published => {
                self.keep = true;
                Ok(Written::Created)
            }
            Stage::Through => Ok(Written::Through),
            Stage::Replacing(target) => {
                let shown = self.path.display();
                let tmp = self
                    .tmp
                    .as_ref()
                    .expect("a replacement has a temporary file");
                self.file
                    .sync_all()
                    .map_err(io(format!("cannot write {}", tmp.display())))?;
                fs::rename(tmp, target).map_err(io(format!("cannot rename onto {shown}")))?;
                eprintln!("replaced {shown}");
                self.tmp = None;
                self.keep = true;
                Ok(Written::Replaced)
            }
        }
    }

    /// Gives up before anything worth keeping was written (same as dropping it before `keep`).
    #[cfg(test)]
    pub(crate) fn abandon(mut self) {
        self.keep = false;
    }
}

impl Drop for StreamingOutput {
    /// Unless kept or committed, removes only what this run created (the temporary file, or a
    /// new output it published); an existing file or device is left as it was.
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        if let Some(t) = &self.tmp {
            let _ = fs::remove_file(t);
        }
        if let Stage::Published = self.stage {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// [`write_output`] for content already in memory.
/// Content above the file size limit is refused before anything is written (a write past it
/// would raise SIGXFSZ in a process that did not ignore it: a library's host program).
pub fn write_output_bytes(path: &Path, bytes: &[u8]) -> Result<Written, TraceError> {
    let shown = path.display().to_string();
    check_size_limit(path, bytes.len() as u64)?;
    write_output(path, |w| {
        w.write_all(bytes)
            .map_err(|e| TraceError::io(format!("cannot write {shown}"), e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_new_file_is_created_and_nothing_else_is_left() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.csv");
        assert_eq!(write_output_bytes(&p, b"x\n").unwrap(), Written::Created);
        assert_eq!(fs::read(&p).unwrap(), b"x\n");
        assert_eq!(entries(d.path()), vec!["a.csv"]);
    }

    #[test]
    fn a_regular_file_is_replaced_whole_keeping_its_permissions() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.json");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, Permissions::from_mode(0o600)).unwrap();
        assert_eq!(write_output_bytes(&p, b"new").unwrap(), Written::Replaced);
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(entries(d.path()), vec!["a.json"]);
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.csv");
        fs::write(&p, "old").unwrap();
        let r: Result<Written, TraceError> = write_output(&p, |w| {
            w.write_all(b"partial").unwrap();
            Err(TraceError::Argument("disk full".into()))
        });
        assert!(r.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(entries(d.path()), vec!["r.csv"]);
    }

    #[test]
    fn a_device_is_written_through_and_stays_a_device() {
        let p = Path::new("/dev/null");
        assert_eq!(write_output_bytes(p, b"x").unwrap(), Written::Through);
        assert!(fs::metadata(p).unwrap().file_type().is_char_device());
    }

    #[test]
    fn a_full_device_is_an_error_not_a_replacement() {
        let p = Path::new("/dev/full");
        if !p.exists() {
            return;
        }
        let e = write_output_bytes(p, &[0u8; 1 << 17]).unwrap_err();
        assert!(e.to_string().contains("/dev/full"), "{e}");
        assert!(fs::metadata(p).unwrap().file_type().is_char_device());
    }

    #[test]
    fn a_link_to_a_file_stays_a_link_and_its_target_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real.jtr");
        let link = d.path().join("link.jtr");
        fs::write(&target, "old").unwrap();
        symlink(&target, &link).unwrap();
        assert_eq!(
            write_output_bytes(&link, b"new").unwrap(),
            Written::Replaced
        );
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_streamed_new_output_appears_only_with_its_first_bytes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jtr");
        let mut s = StreamingOutput::open(&p).unwrap();
        assert!(!p.exists(), "nothing at the path before publish");
        s.file().unwrap().write_all(b"head").unwrap();
        s.publish().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"head");
        s.file().unwrap().write_all(b"+chunk").unwrap();
        assert_eq!(
            fs::read(&p).unwrap(),
            b"head+chunk",
            "readable while written"
        );
        assert_eq!(s.commit().unwrap(), Written::Created);
        assert_eq!(entries(d.path()), vec!["t.jtr"]);
    }

    #[test]
    fn a_streamed_output_never_truncates_an_existing_file_before_it_is_complete() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("old.jtr");
        fs::write(&p, "precious").unwrap();
        fs::set_permissions(&p, Permissions::from_mode(0o640)).unwrap();
        let mut s = StreamingOutput::open(&p).unwrap();
        assert!(s.replaces());
        s.file().unwrap().write_all(b"new").unwrap();
        s.publish().unwrap();
        assert_eq!(
            fs::read(&p).unwrap(),
            b"precious",
            "old file whole while writing"
        );
        assert_eq!(fs::read(s.data_path()).unwrap(), b"new");
        assert_eq!(s.commit().unwrap(), Written::Replaced);
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(entries(d.path()), vec!["old.jtr"]);
        // Given up before completion (a crash keeps the temporary file, abandon removes it):
        // the old file is untouched either way.
        let s = StreamingOutput::open(&p).unwrap();
        s.file().unwrap().write_all(b"partial").unwrap();
        s.abandon();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(entries(d.path()), vec!["old.jtr"]);
    }

    #[test]
    fn a_streamed_output_to_a_device_or_a_link_keeps_what_the_path_is() {
        let mut s = StreamingOutput::open(Path::new("/dev/null")).unwrap();
        s.file().unwrap().write_all(b"x").unwrap();
        s.publish().unwrap();
        assert_eq!(s.commit().unwrap(), Written::Through);
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real.jtr");
        let link = d.path().join("link.jtr");
        fs::write(&target, "old").unwrap();
        symlink(&target, &link).unwrap();
        let s = StreamingOutput::open(&link).unwrap();
        s.file().unwrap().write_all(b"new").unwrap();
        assert_eq!(s.commit().unwrap(), Written::Replaced);
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
        let dangling = d.path().join("dangling");
        symlink(d.path().join("nowhere"), &dangling).unwrap();
        assert!(StreamingOutput::open(&dangling).is_err());
        assert!(StreamingOutput::open(d.path()).is_err());
    }

    #[test]
    fn a_published_output_never_replaces_a_file_that_appeared_meanwhile() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("race.jtr");
        let mut s = StreamingOutput::open(&p).unwrap();
        fs::write(&p, "theirs").unwrap();
        let e = s.publish().unwrap_err().to_string();
        assert!(e.contains("created by another program"), "{e}");
        s.abandon();
        assert_eq!(fs::read(&p).unwrap(), b"theirs");
        assert_eq!(entries(d.path()), vec!["race.jtr"]);
    }

    #[test]
    fn a_dangling_link_and_a_directory_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("dangling");
        symlink(d.path().join("nowhere"), &link).unwrap();
        let e = write_output_bytes(&link, b"x").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(!d.path().join("nowhere").exists());
        let e = write_output_bytes(d.path(), b"x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }

    #[test]
    fn check_writable_refuses_what_write_output_would_and_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let ok = d.path().join("new.json");
        check_writable(&ok, "-o").unwrap();
        fs::write(d.path().join("old.json"), "old").unwrap();
        check_writable(&d.path().join("old.json"), "-o").unwrap();
        check_writable(Path::new("/dev/null"), "-o").unwrap();
        assert_eq!(entries(d.path()), vec!["old.json"]);
        let e = check_writable(d.path(), "-o").unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "-o {} is a directory, not an output file",
                d.path().display()
            )
        );
        let missing = d.path().join("no/such/dir/r.json");
        let e = check_writable(&missing, "--plot").unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "--plot {}: folder {} does not exist (create it first)",
                missing.display(),
                d.path().join("no/such/dir").display()
            )
        );
        let under_file = d.path().join("old.json/r.json");
        let e = check_writable(&under_file, "-o").unwrap_err().to_string();
        assert!(e.ends_with("old.json is not a folder"), "{e}");
        let link = d.path().join("dangling");
        symlink(d.path().join("nowhere"), &link).unwrap();
        let e = check_writable(&link, "-o").unwrap_err().to_string();
        assert!(
            e.starts_with("-o ") && e.contains("which does not exist"),
            "{e}"
        );
        // A file system where nothing can be created (root bypasses permission bits; /proc
        // refuses even root).
        let e = check_writable(Path::new("/proc/jitterbench-out.json"), "-o").unwrap_err();
        assert!(e.to_string().contains("cannot write there"), "{e}");
        assert!(!d.path().join("nowhere").exists());
        assert_eq!(entries(d.path()), vec!["dangling", "old.json"]);
    }

    #[test]
    fn an_extension_that_names_another_format_is_refused() {
        let json = |p: &str| check_extension(Path::new(p), "-o", "a JSON report", &["json"]);
        json("r.json").unwrap();
        json("r.JSON").unwrap();
        json("/dev/null").unwrap();
        json("r.report").unwrap();
        let e = json("r.csv").unwrap_err().to_string();
        assert_eq!(
            e,
            "-o r.csv: this writes a JSON report, but the name ends in .csv; name it .json"
        );
        let svg = |p: &str| check_extension(Path::new(p), "--plot", "an SVG image", &["svg"]);
        svg("p.svg").unwrap();
        assert!(svg("p.png").is_err());
    }
}
