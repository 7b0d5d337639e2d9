//! `replay-bench predict` refuses a job it cannot finish (here: a billion ranks, hundreds of
//! GiB of rank state) at once, with one line saying how to shrink it, instead of aborting in
//! the allocator or running for hours.

use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_replay-bench");

#[test]
fn a_billion_ranks_are_refused_at_once_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jtr");
    // What `jitter-trace synth poisson:rate=1000/s,dur=5us --duration 2s --seed 1` writes.
    let spec = "poisson:rate=1000/s,dur=5us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&spec, 1, 2_000_000_000, 1).unwrap();
    jitter_trace::write_trace(&trace, &t).unwrap();
    let t0 = Instant::now();
    let out = Command::new(BIN)
        .args(["predict", "--trace"])
        .arg(&trace)
        .args(["--ranks", "1073741824"])
        .output()
        .unwrap();
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains("--force"), "{stderr}");
    assert!(out.stdout.is_empty());
}
