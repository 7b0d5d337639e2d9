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

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::error::TraceError;

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

/// [`write_output`] for content already in memory.
pub fn write_output_bytes(path: &Path, bytes: &[u8]) -> Result<Written, TraceError> {
    let shown = path.display().to_string();
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
}
