//! Room for an output before it is written: the bytes the file system holding it has free for
//! this process, the file size limit (`RLIMIT_FSIZE`, `ulimit -f`), and space reserved ahead
//! for a file that is written in place (a mapped record). A full disk or a file size limit is
//! then one error line before the work, never a signal during it: a page of a mapping that the
//! file system cannot back raises SIGBUS on its first store, and a write past the file size
//! limit raises SIGXFSZ, both of which end the process.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::TraceError;

/// The folder an output path is created in (`.` for a bare name).
pub(crate) fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Bytes this process can still write in the file system holding `dir`: the blocks free to
/// everyone, or to root also the blocks the file system keeps for root; `u64::MAX` for a file
/// system that states no size (`/proc`, some FUSE file systems: whether it takes a file is
/// found by creating one).
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    if s.blocks() == 0 {
        return Ok(u64::MAX);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let blocks = if root {
        s.blocks_free()
    } else {
        s.blocks_available()
    };
    // Both are u64 on 64-bit Linux; the conversion keeps 32-bit targets building.
    #[allow(clippy::useless_conversion)]
    Ok(u64::from(blocks).saturating_mul(u64::from(s.fragment_size())))
}

/// The file size limit of this process (`None`: unlimited).
pub(crate) fn file_size_limit() -> Option<u64> {
    let (soft, _) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE).ok()?;
    (soft != libc::RLIM_INFINITY).then_some(soft)
}

/// `n` bytes as people read them (`2.96 MB`, `512 kB`, `40 B`).
pub fn bytes_shown(n: u64) -> String {
    const UNITS: [(&str, f64); 4] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    UNITS.iter().find(|(_, u)| n as f64 >= *u).map_or_else(
        || format!("{n} B"),
        |(name, u)| format!("{:.2} {name}", n as f64 / u),
    )
}

/// Why a file of `bytes` cannot be written under this process's file size limit, if it cannot.
fn above_limit(bytes: u64) -> Option<String> {
    let limit = file_size_limit().filter(|&l| bytes > l)?;
    Some(format!(
        "a file of {} is needed, above this process's file size limit of {} (ulimit -f): raise \
         the limit or write elsewhere",
        bytes_shown(bytes),
        bytes_shown(limit)
    ))
}

/// Refuses a file `path` of `bytes` above the file size limit, before a write that would raise
/// SIGXFSZ (which ends a process that does not ignore it, such as a library's host program).
pub(crate) fn check_size_limit(path: &Path, bytes: u64) -> Result<(), TraceError> {
    match above_limit(bytes) {
        Some(why) => Err(TraceError::Argument(format!("{}: {why}", path.display()))),
        None => Ok(()),
    }
}

/// Refuses to write into `folder` when its file system cannot hold `need` more bytes, or when
/// one file of `largest` bytes would pass the file size limit. `held` are bytes the file system
/// already holds for files the output replaces in place (they come back when it is written).
/// `what` begins the one line that says what is short and what to do (the flag and the path).
pub fn check_room(
    folder: &Path,
    what: &str,
    need: u64,
    largest: u64,
    held: u64,
) -> Result<(), TraceError> {
    if let Some(why) = above_limit(largest) {
        return Err(TraceError::Argument(format!("{what}: {why}")));
    }
    let free = free_bytes(folder).map_err(|e| {
        TraceError::Argument(format!(
            "{what}: cannot see the room left in {}: {e}",
            folder.display()
        ))
    })?;
    let room = free.saturating_add(held);
    if room < need {
        return Err(TraceError::Argument(format!(
            "{what}: {} is needed and the file system of {} has {} free: free some space or \
             write elsewhere",
            bytes_shown(need),
            folder.display(),
            bytes_shown(room)
        )));
    }
    Ok(())
}

/// Reserves `bytes` of disk for `file` (at `path`) before it is mapped or written in place:
/// after this, no store into its first `bytes` needs a block the file system may not have.
/// Refused, with what to do, above the file size limit (checked first: growing a file past it
/// raises SIGXFSZ) or when the file system is short of room.
pub fn reserve(file: &File, path: &Path, bytes: u64) -> Result<(), TraceError> {
    let shown = path.display();
    check_size_limit(path, bytes)?;
    let len = libc::off_t::try_from(bytes)
        .map_err(|_| TraceError::Argument(format!("{shown}: {bytes} bytes is too large")))?;
    // SAFETY: `file` is an open file descriptor this process owns for the call; posix_fallocate
    // reads no memory of ours and returns an error number instead of setting errno.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    if rc != 0 {
        let e = std::io::Error::from_raw_os_error(rc);
        let free = free_bytes(folder_of(path)).map_or_else(|_| "?".into(), bytes_shown);
        return Err(TraceError::io(
            format!(
                "cannot reserve {} for {shown} (its file system has {free} free)",
                bytes_shown(bytes)
            ),
            e,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes_shown(40), "40 B");
        assert_eq!(bytes_shown(2_964_424), "2.96 MB");
        assert_eq!(bytes_shown(1 << 20), "1.05 MB");
        assert_eq!(bytes_shown(512_000), "512.00 kB");
    }

    #[test]
    fn room_beyond_the_file_system_is_refused_and_what_is_held_counts() {
        let d = tempfile::tempdir().unwrap();
        let free = free_bytes(d.path()).unwrap();
        assert!(free > 0);
        check_room(d.path(), "-o r", free / 2, 1, 0).unwrap();
        let e = check_room(d.path(), "-o r", free.saturating_mul(4), 1, 0)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("-o r: ") && e.contains("free some space"),
            "{e}"
        );
        // Files this output replaces give their blocks back: they count as room.
        check_room(
            d.path(),
            "-o r",
            free.saturating_mul(2),
            1,
            free.saturating_mul(2),
        )
        .unwrap();
    }

    #[test]
    fn a_reserved_file_holds_its_blocks() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.prof");
        let f = File::create(&p).unwrap();
        reserve(&f, &p, 1 << 20).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.len(), 1 << 20);
        assert!(m.blocks() * 512 >= 1 << 20, "{} blocks", m.blocks());
    }
}
