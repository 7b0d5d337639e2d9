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
