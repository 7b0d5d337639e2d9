//! A collection that lost detours or observed almost nothing ends with an error (exit 1) that
//! says what happened and how to avoid it, and keeps its trace (nothing collected is lost);
//! `--force` accepts it with a warning.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;

use jitter_trace::{read_trace, Salvage};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn collect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jitter-collect"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The first CPU this process may use: one probe keeps the tests short.
fn first_cpu() -> String {
    jitter_collect::cpuset::select(None).unwrap().ids()[0].to_string()
}

/// The lost detours and lost time the trace's end chunk counts, over all streams.
fn lost(path: &Path) -> (u64, u64) {
    let t = read_trace(path).unwrap().trace;
    let sum = |k: &str| -> u64 { t.streams.iter().filter_map(|s| s.counters.get(k)).sum() };
    (sum("lost_detours"), sum("lost_ns"))
}

#[test]
fn a_ring_that_dropped_detours_ends_with_an_error_naming_the_loss_and_the_fix() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jtr");
    let o_path = out.to_str().unwrap();
    let cpu = first_cpu();
    // The case: a 2-detour ring drained only at the end keeps 2 detours of thousands.
    let o = collect(&[
        "--cpus",
        &cpu,
        "--ring",
        "2",
        "--drain-ms",
        "0",
        "-d",
        "1",
        "-q",
        "-o",
        o_path,
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let (n, ns) = lost(&out);
    assert!(n > 0, "a 2-detour ring over 1 s lost nothing: {e}");
    let last = e.lines().last().unwrap();
    let kept_there = format!("2 of {} detours kept there", n + 2);
    assert!(
        last.starts_with(&format!(
            "error: the collector's ring dropped {n} of {} detours ({:.3} ms of noise) on CPU \
             {cpu}: {kept_there}: readers refuse the trace without --salvage; collect with a \
             bigger --ring (now 2) or a --drain-ms above 0 (0 drains only at the end)",
            n + 2,
            ns as f64 / 1e6
        )) && last.ends_with(&format!("(the trace {o_path} is kept; --force accepts it)")),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    // The trace is whole, and every reader refuses it by the same rule.
    let loaded = read_trace(&out).unwrap();
    let refused = loaded.accept("r.jtr", Salvage::Refuse).unwrap_err();
    assert!(refused.to_string().contains(&kept_there), "{refused}");
    // --force: the same line as a warning, exit 0.
    let o = collect(&[
        "--cpus",
        &cpu,
        "--ring",
        "2",
        "--drain-ms",
        "0",
        "-d",
        "1",
        "-q",
        "--force",
        "-o",
        o_path,
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("warning: the collector's ring dropped") && e.contains("--force given"),
        "{e}"
    );
}

#[test]
fn a_probe_that_observed_nanoseconds_is_an_error_and_its_trace_is_kept() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("n.jtr");
    let o_path = out.to_str().unwrap();
    let cpu = first_cpu();
    let o = collect(&["--cpus", &cpu, "-d", "1ns", "-q", "-o", o_path]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let last = e.lines().last().unwrap();
    assert!(
        last.starts_with(&format!(
            "error: implausible collection: CPU {cpu}: the probe observed "
        )) && last.contains(
            "less than the 1.00 ms one timer tick lasts: the trace says nothing about this \
             CPU's jitter; collect for longer (e.g. -d 10s)"
        ) && last.ends_with(&format!("(the trace {o_path} is kept; --force accepts it)")),
        "{e}"
    );
    assert!(out.exists());
    // Every reader of the trace names it too.
    let w = read_trace(&out).unwrap().warnings();
    assert!(w.iter().any(|w| w.contains("the probe observed")), "{w:?}");
}
