//! Like with like, end to end: `replay-bench run` records the windows of the trace its measured
//! jitter phases replayed, and `predict --windows-of` replays the same windows and injects the
//! same detours (within the tolerance its report states). Under a real MPI launcher, the cases
//! in sequence (ONE test: it times a benchmark).

use std::process::Command;
use std::time::Duration;

use jitter_report::report::Report;
use jitter_trace::synth::{synthesize, Spec};

mod common;
use common::{run, swamped, BIN};

#[test]
fn a_prediction_of_a_runs_windows_injects_what_the_run_injected() {
    let dir = tempfile::tempdir().unwrap();
    // Periodic noise and rare millisecond stalls, two streams (one per rank).
    let spec: Spec = "periodic:period=2ms,dur=60us+poisson:rate=30/s,dur=exp:400us"
        .parse()
        .unwrap();
    let trace = synthesize(&spec, 2, 30_000_000_000, 5).unwrap();
    let t = dir.path().join("t.jtr");
    jitter_trace::write_trace(&t, &trace).unwrap();
    let t = t.to_str().unwrap();
    for sync in ["none", "phase"] {
        let out = dir.path().join(format!("run-{sync}.json"));
        let out = out.to_str().unwrap();
        let ran = run(
            2,
            &[
                "--trace",
                t,
                "--sync",
                sync,
                "--phases",
                "100",
                "--block-phases",
                "25",
                "--seed",
                "7",
                "--noise-probe",
                "0",
                "--timer",
                "abstime",
                "-o",
                out,
            ],
            Duration::from_secs(240),
        );
        if let Some(line) = swamped(&ran) {
            println!("{line}");
            continue;
        }
        assert_eq!(ran.code, Some(0), "run --sync {sync}: {}", ran.stderr);
        check_run_windows(out, sync);
        let pred = dir.path().join(format!("window-{sync}.json"));
        let o = Command::new(BIN)
            .args(["predict", "--windows-of", out, "--trace", t, "-o"])
            .arg(&pred)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(stdout.contains("like with like"), "{stdout}");
        let p = Report::load(&pred).unwrap();
        let check = p
            .config
            .predict
            .as_ref()
            .unwrap()
            .windows_of
            .as_ref()
            .unwrap();
        assert_eq!(check.windows, 4);
        let i = &check.injection;
        assert!(
            i.agrees,
            "sync {sync}: run {} detours / {} ns, prediction {} / {} (tolerance {} / {} ns)\n{stdout}",
            i.run_injected,
            i.run_injected_ns,
            i.predicted_injected,
            i.predicted_injected_ns,
            i.tolerance,
            i.tolerance_ns
        );
        assert_eq!(p.results[0].ranks, 2);
        assert_eq!(p.results[0].sync, sync);
        // Each window's predicted SD, whose mean is the row's (same phases, same baseline).
        assert_eq!(check.window_sd_pct.len(), 4);
        let mean = check.window_sd_pct.iter().map(|x| x[0]).sum::<f64>() / 4.0;
        assert!(
            (mean - p.results[0].sd_qtbt_pct).abs() < 1e-9 * mean.abs().max(1.0),
            "{mean} against {}",
            p.results[0].sd_qtbt_pct
        );
        assert!(stdout.contains("(paired)"), "{stdout}");
    }
    // Another trace under the run's report is refused: like with like.
    let other = dir.path().join("o.jtr");
    let spec: Spec = "periodic:period=3ms,dur=60us".parse().unwrap();
    jitter_trace::write_trace(&other, &synthesize(&spec, 2, 30_000_000_000, 5).unwrap()).unwrap();
    let o = Command::new(BIN)
        .args(["predict", "--windows-of"])
        .arg(dir.path().join("run-none.json"))
        .arg("--trace")
        .arg(&other)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("a prediction of its windows needs its trace"),
        "{err}"
    );
}

/// The windows a run of 100 jitter phases in blocks of 25 recorded in its report `out`: one
/// per complete pair with the pair's block means, each with both ranks' points (one point for
/// all under `phase`) and what it injected.
fn check_run_windows(out: &str, sync: &str) {
    let r = Report::load(out.as_ref()).unwrap();
    let details = r.config.run.as_ref().unwrap();
    let w = details
        .windows
        .as_ref()
        .expect("the run recorded its windows");
    let paired = details.paired.as_ref().unwrap();
    // 100 jitter phases in blocks of 25: four windows, one per complete pair, and the
    // block means of each pair (what the same windows' prediction is paired with).
    assert_eq!((w.windows.len() as u64, paired.pairs), (4, 4), "{w:?}");
    assert_eq!(paired.blocks.len(), 4);
    for b in &paired.blocks {
        assert!(b.base_qt_ns > 0.0 && b.jit_qtbt_ns >= b.jit_qt_ns, "{b:?}");
    }
    assert_eq!(w.phases_per_window, 25);
    for x in &w.windows {
        assert_eq!(x.points_ns.len(), 2);
        assert!(x.injected > 0 && x.span_ns > 0, "{x:?}");
        if sync == "phase" {
            // Every rank resyncs to the schedule's one point.
            assert_eq!(x.points_ns[0], x.points_ns[1], "{x:?}");
        }
    }
}
