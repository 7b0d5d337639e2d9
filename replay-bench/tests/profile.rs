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

/// LogGOPSim's `txt2bin` and `LogGOPSim` in `$JB_LOGGOPSIM` (a built `src/LogGOPSim` of
/// github.com/spcl/LogGOPSim), if set.
fn loggopsim() -> Option<std::path::PathBuf> {
    let dir = std::path::PathBuf::from(std::env::var_os("JB_LOGGOPSIM")?);
    (dir.join("txt2bin").is_file() && dir.join("LogGOPSim").is_file()).then_some(dir)
}

#[test]
fn goal_exports_the_main_loop_and_loggopsim_runs_it_to_the_closed_form() {
    let dir = tempfile::tempdir().unwrap();
    let ranks = dir.path().join("app.json.ranks");
    std::fs::create_dir_all(&ranks).unwrap();
    rank_record(&ranks, 0, 30, true);
    rank_record(&ranks, 1, 30, true);
    let goal = dir.path().join("app.goal");
    let iterations = 20;
    let out = bin()
        .args([
            "profile",
            "goal",
            "--ranks",
            "6",
            "--iterations",
            "20",
            "-o",
        ])
        .arg(&goal)
        .arg(&ranks)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&goal).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with(
        "// jitterbench profile skeleton: 20 iterations of 2 calls at 6 ranks (profiled at 2)"
    ));
    assert_eq!(lines.next(), Some("num_ranks 6"));
    // Per rank and iteration: calc 2 ms, an allreduce, calc 1 ms, a barrier.
    assert_eq!(text.matches("calc 2000000\n").count(), 6 * iterations);
    assert_eq!(text.matches("calc 1000000\n").count(), 6 * iterations);
    let Some(lgs) = loggopsim() else {
        println!("LogGOPSim not run: set JB_LOGGOPSIM to a built LogGOPSim/src/LogGOPSim");
        return;
    };
    let bin_path = dir.path().join("app.bin");
    let t = Command::new("timeout")
        .arg("60")
        .arg(lgs.join("txt2bin"))
        .arg("-i")
        .arg(&goal)
        .arg("-o")
        .arg(&bin_path)
        .output()
        .unwrap();
    assert!(
        t.status.success(),
        "txt2bin: {}",
        String::from_utf8_lossy(&t.stderr)
    );
    let sim = Command::new("timeout")
        .arg("60")
        .arg(lgs.join("LogGOPSim"))
        .args(["-L", "1", "-o", "1", "-g", "1", "-G", "0", "-b", "-f"])
        .arg(&bin_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&sim.stdout);
    assert!(sim.status.success(), "LogGOPSim: {stdout}");
    assert!(
        !stdout.contains("queue on host"),
        "unmatched messages: {stdout}"
    );
    let finish: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Maximum finishing time at host "))
        .and_then(|l| l.split(": ").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no finishing time in {stdout}"));
    // The closed form: 3 ms of compute per iteration; the messages (o = L = 1 ns, a few rounds
    // per iteration) add at most a few dozen ns each.
    let compute = iterations as u64 * 3_000_000;
    assert!(
        (compute..compute + iterations as u64 * 1_000).contains(&finish),
        "LogGOPSim: {finish} ns, compute alone {compute} ns"
    );
}
