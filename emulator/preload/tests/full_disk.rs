//! `JITTER_PROFILE` on a file system without room: the library never kills its host program.
//!
//! A rank's record is a mapped file; a page the file system cannot back raises SIGBUS on its
//! first store, in the middle of the program's MPI call. So the records' room is checked at
//! `MPI_Init` (rank 0: every rank's record and the profile) and each rank's record owns its
//! blocks before it is mapped; a disk that fills later costs only the merged profile file (one
//! warning line, the records kept). Each case runs on a small tmpfs mounted for it (the test
//! needs root; it skips, saying why, without it or without `mpicc`/`mpirun`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use jitter_profile::profile::ranks_dir;
use jitter_profile::{Profile, RankRecord};

const LIMIT_S: u32 = 60;

/// A tmpfs of a given size mounted on a fresh folder, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` (having said why) where this process cannot mount one.
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk { dir }),
            Ok(o) => {
                println!(
                    "skipped: cannot mount a {size} tmpfs (needs root): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                println!("skipped: no mount command: {e}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// `mpirun -np 2 fill_disk FILL ROUNDS` with `JITTER_PROFILE=profile`, in `work`.
fn run(work: &Path, profile: &Path, fill: &Path, rounds: u32) -> std::process::Output {
    let app = common::compile(work, "fill_disk");
    let args = [fill.display().to_string(), rounds.to_string()];
    let vars = [("JITTER_PROFILE", profile.to_str().unwrap())];
    common::mpirun(work, 2, LIMIT_S, true, &vars, &app, &args)
        .output()
        .unwrap()
}

/// A rank's record and what the library asks at `MPI_Init` for two ranks: two records and the
/// profile's share (1 MiB, and 1 KiB per rank).
fn room_for_two_ranks() -> (u64, u64) {
    let record = std::mem::size_of::<RankRecord>() as u64;
    (record, 2 * (record + 1024) + (1 << 20))
}

fn no_signal(stderr: &str) {
    assert!(
        !stderr.contains("signal") && !stderr.contains("Bus error"),
        "a rank died of a signal:\n{stderr}"
    );
}

#[test]
fn a_profile_folder_without_room_for_the_records_stops_the_job_at_mpi_init_with_one_line() {
    if !common::have_mpi() {
        return;
    }
    // 1 MiB: less than one record (the record's size is checked below).
    let Some(disk) = SmallDisk::mount("1m") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let profile: PathBuf = disk.path().join("app.json");
    let free = jitter_trace::output::free_bytes(disk.path()).unwrap();
    let out = run(work.path(), &profile, &work.path().join("unused"), 10);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    no_signal(&stderr);
    let (record, need) = room_for_two_ranks();
    assert!(free < record, "the disk must not hold even one record");
    let shown = jitter_trace::output::bytes_shown;
    // The folder measured: the records' folder when another rank made it first, else the
    // profile's (the library's rule); the same file system either way.
    let line = |folder: &Path| {
        format!(
            "jitter-preload: rank 0: error: JITTER_PROFILE={} (the records of 2 ranks, {} each, \
             and the profile): {} is needed and the file system of {} has {} free: free some \
             space or write elsewhere",
            profile.display(),
            shown(record),
            shown(need),
            folder.display(),
            shown(free)
        )
    };
    let (profile_folder, records_folder) = (line(disk.path()), line(&ranks_dir(&profile)));
    assert!(
        stderr.contains(&profile_folder) || stderr.contains(&records_folder),
        "no `{profile_folder}` (or the same line naming the records' folder) in\n{stderr}"
    );
    // Stopped before the program's first statement after MPI_Init; no record left behind.
    assert!(!stdout.contains("filled"), "{stdout}");
    assert!(!work.path().join("unused").exists());
    let left: Vec<_> = std::fs::read_dir(ranks_dir(&profile))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_disk_filled_while_the_program_runs_costs_the_profile_file_not_the_program() {
    if !common::have_mpi() {
        return;
    }
    // Room for the two records and the profile's share when the job starts, and 1 MiB more;
    // the program then fills the rest and goes on calling MPI.
    let (_, need) = room_for_two_ranks();
    let Some(disk) = SmallDisk::mount(&format!("{}k", need.div_ceil(1024) + 1024)) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let profile = disk.path().join("app.json");
    let rounds = 500;
    let out = run(work.path(), &profile, &disk.path().join("filler"), rounds);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    no_signal(&stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("{rounds} sums of 1 checked")),
        "{stdout}"
    );
    let dir = ranks_dir(&profile);
    let line = format!(
        "jitter-preload: rank 0: warning: JITTER_PROFILE={p}: cannot write {p}: No space left \
         on device (os error 28); the ranks' records are kept in {d}: replay-bench profile show \
         {d} merges them",
        p = profile.display(),
        d = dir.display()
    );
    assert!(stderr.contains(&line), "no `{line}` in\n{stderr}");
    assert!(!profile.exists());
    // Every call after the disk filled is in the records: the barrier and the allreduces of
    // both ranks, and MPI_Finalize.
    let p = Profile::read(&dir).unwrap();
    assert_eq!(p.reported.len(), 2, "{p:?}");
    for r in &p.reported {
        assert!(r.finished, "{r:?}");
        assert_eq!(r.calls, 1 + u64::from(rounds) + 1, "{r:?}");
    }
}
