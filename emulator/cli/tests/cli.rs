//! Bad input to `jitter-emulate` and `jitter-inject`: refused up front (before calibrating or
//! entering SCHED_FIFO) with a non-zero exit and one `error:` line naming the problem.

use std::process::{Command, Output};

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin).args(args).output().unwrap()
}

fn assert_error(o: &Output, needle: &str) {
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "exit 0: {e}");
    assert!(!e.contains("panicked"), "{e}");
    let errors: Vec<&str> = e.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{e}");
    assert!(errors[0].contains(needle), "{e}");
}

#[test]
fn drift_refuses_a_period_of_zero_or_a_run_longer_than_the_period() {
    let bin = env!("CARGO_BIN_EXE_jitter-emulate");
    assert_error(
        &run(bin, &["drift", "--period-us", "0"]),
        "--period-us must be",
    );
    assert_error(
        &run(bin, &["drift", "--run-us", "100", "--period-us", "10"]),
        "--run-us must be at least 1 and shorter than --period-us (10 µs)",
    );
}

#[test]
fn inject_refuses_a_scale_or_minimum_sleep_that_would_spin_for_ever() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "periodic:period=1ms,dur=20us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&spec, 1, 1_000_000_000, 1).unwrap();
    let p = dir.path().join("t.jtr");
    jitter_trace::write_trace(&p, &t).unwrap();
    let p = p.to_str().unwrap();
    let bin = env!("CARGO_BIN_EXE_jitter-inject");
    for s in ["1e19", "1e300", "inf", "0"] {
        let o = run(bin, &["--trace", p, "--cpu", "0", "--scale", s]);
        assert_error(&o, "scale must be");
    }
    // Every sleep (980 µs × 1000) merges under M = 1 s: one pass is 1000 × 20 ms = 20 s of spin.
    let o = run(
        bin,
        &[
            "--trace",
            p,
            "--cpu",
            "0",
            "--scale",
            "1000",
            "--min-sleep",
            "1s",
        ],
    );
    assert_error(&o, "over the bound of 10 s");
}

/// A trace whose ring dropped detours is refused before calibrating or entering SCHED_FIFO,
/// by `jitter-inject` and `jitter-emulate fidelity` alike (the one policy of
/// `jitter_trace::integrity`), with `--salvage` named.
#[test]
fn inject_and_fidelity_refuse_a_lossy_trace_naming_salvage() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "periodic:period=1ms,dur=20us".parse().unwrap();
    let mut t = jitter_trace::synth::synthesize(&spec, 1, 1_000_000_000, 1).unwrap();
    t.streams[0].counters.insert("lost_detours".into(), 500);
    t.streams[0].counters.insert("lost_ns".into(), 10_000_000);
    let p = dir.path().join("l.jtr");
    jitter_trace::write_trace(&p, &t).unwrap();
    let p = p.to_str().unwrap();
    let line = format!(
        "{p}: the collector's ring dropped 500 of 1500 detours (10.000 ms of noise) on CPU 0: \
         1000 of 1500 detours kept there; refused (--salvage goes on with what was kept and \
         prints the share kept)"
    );
    let o = run(
        env!("CARGO_BIN_EXE_jitter-inject"),
        &["--trace", p, "--cpu", "0"],
    );
    assert_error(&o, &line);
    let o = run(
        env!("CARGO_BIN_EXE_jitter-emulate"),
        &["fidelity", "--trace", p],
    );
    assert_error(&o, &line);
}

/// A corrupt calibration cache names the file, what is wrong and what to do, on one line.
#[test]
fn a_corrupt_calibration_cache_says_to_measure_again_with_refresh() {
    use jitter_emulator::cache::file_name_part;
    let dir = tempfile::tempdir().unwrap();
    let (host, kernel) = jitter_emulator::calibration::host_and_kernel();
    let cache = dir.path().join("jitterbench");
    std::fs::create_dir_all(&cache).unwrap();
    let file = cache.join(format!(
        "calibration-{}-{}.json",
        file_name_part(&host),
        file_name_part(&kernel)
    ));
    std::fs::write(&file, "").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_jitter-emulate"))
        .args(["--no-fifo", "calibrate"])
        .env("XDG_CACHE_HOME", dir.path())
        .output()
        .unwrap();
    assert_error(
        &o,
        &format!(
            "calibration {} is unreadable (EOF while parsing a value at line 1 column 0): measure \
             it again with `jitter-emulate calibrate --refresh` (`--recalibrate` in replay-bench \
             run and jitter-inject), or delete the file",
            file.display()
        ),
    );
}

#[test]
fn fidelity_checks_its_outputs_before_reading_or_measuring() {
    let bin = env!("CARGO_BIN_EXE_jitter-emulate");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    // The trace does not exist: the output's error comes first.
    let o = run(bin, &["fidelity", "--trace", "missing.jtr", "--json", &d]);
    assert_error(
        &o,
        &format!("--json {d} is a directory, not an output file"),
    );
    let file = dir.path().join("f.json");
    std::fs::write(&file, "{}").unwrap();
    let f = file.display().to_string();
    let o = run(bin, &["fidelity", "--trace", "missing.jtr", "--save", &f]);
    assert_error(&o, &format!("--save {f} is not a folder"));
}
