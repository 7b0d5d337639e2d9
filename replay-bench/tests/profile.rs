//! `replay-bench profile show`: the summary of a profile file and of a folder of rank records
//! (a job whose rank 0 died), and one error line for what is not a profile.

use std::path::Path;
use std::process::Command;

use jitter_profile::profile::{rank_path, ranks_dir};
use jitter_profile::{Call, Identity, Profile, Recorder, Site};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_replay-bench"))
}

/// Rank `rank` of 2 ran `iters` iterations of (allreduce after 2 ms, barrier after 1 ms) into
/// its record in `dir`; `finish`: it reached `MPI_Finalize`.
fn rank_record(dir: &Path, rank: u64, iters: u64, finish: bool) {
    let id = Identity {
        rank,
        ranks: 2,
        khz: 1_000_000,
        job: "job-1".into(),
        host: "h".into(),
        program: "./solver".into(),
    };
    let mut rec = Recorder::create(&rank_path(dir, rank), &id, 0).unwrap();
    let a = Site {
        comm_size: 2,
        bytes: 8,
        ..Site::of(Call::Allreduce)
    };
    let b = Site {
        comm_size: 2,
        ..Site::of(Call::Barrier)
    };
    let mut t = 0;
    for _ in 0..iters {
        for (s, gap) in [(a, 2_000_000), (b, 1_000_000)] {
            t += gap;
            rec.record().record(&s, t, t + 1_000);
            t += 1_000;
        }
    }
    if finish {
        rec.finish();
    }
}

#[test]
fn show_prints_the_main_loop_of_a_file_and_of_a_folder_of_a_job_that_died() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.json");
    let ranks = ranks_dir(&path);
    std::fs::create_dir_all(&ranks).unwrap();
    rank_record(&ranks, 0, 30, true);
    rank_record(&ranks, 1, 12, false);
    let out = bin()
        .args(["profile", "show"])
        .arg(&ranks)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("main loop: 2 calls per iteration, 30 iterations, ranks [0, 1]"),
        "{stdout}"
    );
    assert!(stdout.contains("Allreduce 8 B on 2"), "{stdout}");
    // The exact means (1 tick = 1 ns): 2 ms before the allreduce, 1 ms before the barrier.
    assert!(stdout.contains("2.000 ms ± 0.0 µs"), "{stdout}");
    assert!(stdout.contains("1.000 ms ± 0.0 µs"), "{stdout}");
    let died = stdout.lines().rfind(|l| l.starts_with("1 ")).unwrap();
    assert!(died.contains("died") && died.contains(" 24 "), "{died}");
    // The merged profile written as a file shows the same.
    Profile::read(&ranks).unwrap().write(&path).unwrap();
    let again = bin().args(["profile", "show"]).arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&again.stdout).replace(&path.display().to_string(), "X");
    assert_eq!(text, stdout.replace(&ranks.display().to_string(), "X"));
}

#[test]
fn show_refuses_what_is_not_a_profile_with_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"format\": \"something else\"}").unwrap();
    for p in [bad, dir.path().join("missing.json")] {
        let out = bin().args(["profile", "show"]).arg(&p).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: cannot read the profile"),
            "{stderr}"
        );
    }
}
