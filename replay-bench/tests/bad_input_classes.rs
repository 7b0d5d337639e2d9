//! `replay-bench` against the classes of bad input, each through its one mechanism
//! (docs/RELIABILITY.md, "Bad input by class"): an output checked before the work
//! (`jitter_trace::output::check_output`), an input whose content is another kind than the
//! flag wants (`jitter_trace::sniff::expect_json`), and a figure the input cannot
//! support (a metric that is not a time, a trace without detours, a platform trace of other
//! work). Every refusal is exit 1 with one `error:` line and nothing on standard output.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_replay-bench");

fn rb(dir: &Path, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("120")
        .arg(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Exit 1, exactly one line on standard error, and it is `error: ` followed by `want`.
fn refused(o: &Output, want: &str) {
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert_eq!(e.trim_end(), format!("error: {want}"));
}

/// A trace of `streams` streams of a `dur_us` µs detour every ms for 1 s, written as `name`.
fn trace(dir: &Path, name: &str, dur_us: u64, streams: u32) -> PathBuf {
    let spec: jitter_trace::synth::Spec = format!("periodic:period=1ms,dur={dur_us}us")
        .parse()
        .unwrap();
    let t = jitter_trace::synth::synthesize(&spec, streams, 1_000_000_000, 1).unwrap();
    let p = dir.join(name);
    jitter_trace::write_trace(&p, &t).unwrap();
    p
}

/// A trace of one stream without any detour.
fn quiet(dir: &Path) -> PathBuf {
    let s = jitter_trace::Stream::from_detours(0, 0, 1_000_000_000, &[]).unwrap();
    let mut t = jitter_trace::Trace {
        streams: vec![s],
        ..jitter_trace::Trace::default()
    };
    t.sync_header();
    let p = dir.join("quiet.jtr");
    jitter_trace::write_trace(&p, &t).unwrap();
    p
}

#[test]
fn outputs_named_for_another_format_are_refused_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The profile need not exist: the output is checked first.
    refused(
        &rb(
            d,
            &["profile", "goal", "app.json", "--ranks", "4", "-o", "x.csv"],
        ),
        "--output x.csv: this writes a LogGOPSim GOAL schedule (text), but the name ends in \
         .csv; name it .goal",
    );
    refused(
        &rb(
            d,
            &[
                "whatif", "--trace", "t.jtr", "--ranks", "2", "--csv", "w.json",
            ],
        ),
        "--csv w.json: this writes a CSV table, but the name ends in .json; name it .csv",
    );
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 0);
}

#[test]
fn an_input_of_another_kind_is_named_for_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t = trace(d, "t.jtr", 20, 2);
    let ts = t.to_str().unwrap();
    let o = rb(
        d,
        &[
            "predict", "--trace", ts, "--ranks", "2", "--phases", "10", "-o", "p.json",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let jtr = |flag: &str, wanted: &str| format!("{flag}{ts}: this is a .jtr trace, not {wanted}");
    refused(
        &rb(d, &["profile", "show", ts]),
        &format!(
            "cannot read the profile {ts}: {}",
            jtr("", "an application profile (JITTER_PROFILE)")
        ),
    );
    refused(
        &rb(
            d,
            &["predict", "--trace", ts, "--ranks", "2", "--platform", ts],
        ),
        &jtr(
            "--platform ",
            "a platform file, an emulator calibration or a run's report",
        ),
    );
    refused(
        &rb(d, &["compare", "p.json", ts]),
        &jtr("", "a replay-bench report"),
    );
    // A prediction where an app study belongs (the study's own flag names it).
    let p = d.join("p.json");
    let ps = p.to_str().unwrap();
    std::fs::write(d.join("loop.json"), "{}").unwrap();
    refused(
        &rb(
            d,
            &[
                "predict",
                "--app",
                "loop.json",
                "--trace",
                ts,
                "--ranks",
                "2",
                "--runs-of",
                ps,
            ],
        ),
        &format!(
            "--runs-of {ps}: this is a prediction report (replay-bench predict), not an \
             application study (replay-bench app)"
        ),
    );
}

#[test]
fn figures_the_input_cannot_support_are_refused_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let q = quiet(d);
    let qs = q.to_str().unwrap();
    // A trace without detours: nothing to choose a scale for (was: "lower --share"); said
    // before the calibration is read.
    refused(
        &rb(
            d,
            &["choose-scale", "--trace", qs, "--calibration", "none.json"],
        ),
        &format!(
            "{qs} has no detours: no scale makes any of them injectable (nothing to choose); \
             give a trace with detours"
        ),
    );
    // The app study: said before any run (was: every run failed, the reason mpirun's banner).
    let o = rb(
        d,
        &[
            "app",
            "--trace",
            qs,
            "--library",
            common::library().to_str().unwrap(),
            "--platform-probe",
            "0s",
            "--",
            "true",
        ],
    );
    refused(
        &o,
        &format!(
            "trace {qs}: stream of CPU 0 has no detours: the library would refuse it in every \
             run (nothing to replay); give a trace with detours on every stream (jitter-trace \
             slice --cpus keeps some)"
        ),
    );
    // A platform-noise trace of other work (99 % of its time in detours) is refused as the
    // main trace would be, and named as the platform's (was: rc 0, 0.000 %).
    let t = trace(d, "t.jtr", 20, 2);
    let busy = trace(d, "busy.jtr", 990, 2);
    let o = rb(
        d,
        &[
            "predict",
            "--trace",
            t.to_str().unwrap(),
            "--ranks",
            "2",
            "--phases",
            "10",
            "--platform-noise",
            busy.to_str().unwrap(),
        ],
    );
    refused(
        &o,
        &format!(
            "--platform-noise {}: CPU 0: 99.0 % of the time was spent in detours: other work ran \
             on this CPU, and the trace shows it rather than the operating system's jitter; a \
             prediction from it would be that work's slowdown (--force predicts anyway)",
            busy.display()
        ),
    );
}

#[test]
fn a_metric_that_is_not_a_time_stops_the_study_at_the_run_that_printed_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t = trace(d, "t.jtr", 20, 1);
    let o = rb(
        d,
        &[
            "app",
            "--trace",
            t.to_str().unwrap(),
            "--library",
            common::library().to_str().unwrap(),
            "--platform-probe",
            "0s",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--metric",
            r"time: (\S+)",
            "--",
            "sh",
            "-c",
            "echo time: -6.25",
        ],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let last = e.lines().last().unwrap();
    assert!(
        last.starts_with("error: pair 0 ")
            && last.ends_with(
                ": --metric captured '-6.25': a metric is a time, above zero (smaller is \
                 faster), and a slowdown relative to -6.25 has no sign to read; capture a time \
                 the program prints"
            ),
        "{e}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains("with the trace:") && !out.contains("no verdict"),
        "{out}"
    );
}
