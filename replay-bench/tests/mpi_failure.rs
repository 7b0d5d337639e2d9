//! MPI failure of `replay-bench run` under a real launcher: a bad trace on one rank only, and one
//! rank killed mid-run. Either way every rank exits within seconds, `mpirun` exits non-zero and
//! the message names the problem; no rank is left running. (One test at a time: the crate's
//! tests run with --test-threads=1.)

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

mod common;
use common::{launch, BIN};

/// Waits for `child` at most `limit`; on time-out kills it (TERM, then KILL) and fails.
fn finish(mut child: Child, limit: Duration, what: &str) -> (Option<i32>, String, Duration) {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(3));
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{what}: mpirun still running after {limit:?} (a rank hung)\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = t0.elapsed();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{what}: {err}");
    (o.status.code(), err, took)
}

/// The replay-bench processes whose parent is `parent` (the ranks mpirun started).
fn ranks_of(parent: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …: comm may hold spaces, so split after the last ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid: u32 = rest
            .split_whitespace()
            .nth(1)
            .unwrap_or("0")
            .parse()
            .unwrap_or(0);
        if ppid == parent && head.contains("(replay-bench") {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: i32) -> bool {
    // A zombie still answers kill(0); read its state instead.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

#[test]
fn a_bad_trace_on_one_rank_only_stops_every_rank_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jtr");
    let spec = "periodic:period=1ms,dur=20us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&spec, 2, 2_000_000_000, 1).unwrap();
    jitter_trace::write_trace(&good, &t).unwrap();
    let bad = dir.path().join("bad.jtr");
    std::fs::write(&bad, b"not a trace at all").unwrap();
    let common = ["run", "--phases", "50", "--noise-probe", "0"];
    // MPMD: rank 0 reads a good trace, rank 1 a garbage file (as if its node's copy were bad).
    let arg = |p: &Path| p.to_str().unwrap().to_string();
    let (g, b) = (arg(&good), arg(&bad));
    let mut args: Vec<&str> = vec!["-np", "1", BIN];
    args.extend(common);
    args.extend(["--trace", &g, ":", "-np", "1", BIN]);
    args.extend(common);
    args.extend(["--trace", &b]);
    let (code, err, took) = finish(launch(&args), Duration::from_secs(60), "bad trace");
    eprintln!("bad trace on rank 1: exit {code:?} in {took:?}\n{err}");
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}: {err}");
    assert!(err.contains("rank 1"), "{err}");
    assert!(err.contains("bad.jtr"), "{err}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn one_rank_killed_ends_the_run_on_every_rank_within_seconds() {
    let child = launch(&[
        "-np",
        "2",
        BIN,
        "run",
        "--period",
        "60s",
        "--noise-probe",
        "0",
    ]);
    let mpirun_pid = child.id();
    // Both ranks started (and past MPI_Init: give them 3 s).
    let t0 = Instant::now();
    let mut ranks = Vec::new();
    while ranks.len() < 2 && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
        ranks = ranks_of(mpirun_pid);
    }
    assert_eq!(ranks.len(), 2, "ranks of mpirun {mpirun_pid}: {ranks:?}");
    std::thread::sleep(Duration::from_secs(3));
    ranks.sort();
    // SAFETY: kill(2) on a process this test's mpirun started.
    assert_eq!(unsafe { libc::kill(ranks[1], libc::SIGKILL) }, 0);
    let (code, err, took) = finish(child, Duration::from_secs(30), "rank killed");
    eprintln!("rank killed: exit {code:?} in {took:?}\n{err}");
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}: {err}");
    assert!(
        err.contains("signal 9") || err.contains("Killed") || err.contains("killed"),
        "no message names the killed rank: {err}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(!alive(ranks[0]), "rank {} outlived mpirun", ranks[0]);
}

#[test]
fn an_output_that_cannot_be_written_stops_every_rank_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jtr");
    let spec = "periodic:period=1ms,dur=20us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&spec, 2, 2_000_000_000, 1).unwrap();
    jitter_trace::write_trace(&good, &t).unwrap();
    let g = good.to_str().unwrap().to_string();
    let d = dir.path().display().to_string();
    let csv = format!("{d}/no/p.csv");
    // A 60 s run: refused at once, on both ranks, before the calibration and the probe.
    for (flag, path, want) in [
        (
            "-o",
            d.clone(),
            format!("error: -o {d} is a directory, not an output file"),
        ),
        (
            "--phases-csv",
            csv.clone(),
            format!("error: --phases-csv {csv}: folder {d}/no does not exist (create it first)"),
        ),
    ] {
        let args = [
            "-np", "2", BIN, "run", "--trace", &g, "--period", "60s", flag, &path,
        ];
        let (code, err, took) = finish(launch(&args), Duration::from_secs(60), flag);
        assert!(code.is_some_and(|c| c != 0), "exit {code:?}: {err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
        assert_eq!(errors, vec![want.as_str()], "{err}");
        assert!(took < Duration::from_secs(15), "took {took:?}");
    }
}
