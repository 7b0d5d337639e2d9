//! `replay-bench app`: the study of an unmodified program with and without the preload library.
//!
//! The sh programs below stand in for an application whose "library effect" is known in closed
//! form: they read `JITTER_TRACE` and `LD_PRELOAD` (set only in the runs with the library) and
//! print or take a time accordingly. The MPI test runs a real program (`tests/app/phases.c`,
//! built with mpicc) under `mpirun -np 1` with the real `libjitter_preload.so` (a
//! dev-dependency, so that `cargo test` builds it) replaying a periodic trace.
//! Timing tests: run one at a time (`--test-threads=1`).

mod common;

use common::{have, library};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use jitter_trace::summary::{median, quantile};
use replay_bench::app::{judge, AppReport, Arm, RunStatus, Verdict};

const BIN: &str = env!("CARGO_BIN_EXE_replay-bench");

/// A periodic trace: `detour_ns` every `period_ns`, `count` periods, one stream.
fn periodic_trace(dir: &Path, period_ns: u64, detour_ns: u64, count: u64) -> PathBuf {
    let path = dir.join("periodic.jtr");
    let s = jitter_emulator::calibration::periodic_stream(period_ns, detour_ns, count);
    let mut t = jitter_trace::Trace {
        streams: vec![s],
        ..jitter_trace::Trace::default()
    };
    t.sync_header();
    jitter_trace::write_trace(&path, &t).unwrap();
    path
}

/// The sh programs' trace in `dir`: 100 µs every 1 ms, 1 s.
fn sh_trace(dir: &Path) -> PathBuf {
    periodic_trace(dir, 1_000_000, 100_000, 1000)
}

/// `replay-bench app ARGS -- sh -c SCRIPT` in `dir`, with [`sh_trace`], the test's library and
/// no probe.
fn app_sh(dir: &Path, args: &[&str], script: &str) -> Output {
    app_sh_on(dir, &sh_trace(dir), args, script)
}

/// [`app_sh`] with a trace already written.
fn app_sh_on(dir: &Path, trace: &Path, args: &[&str], script: &str) -> Output {
    let mut c = Command::new("timeout");
    c.args(["120", BIN, "app", "--trace"]).arg(trace);
    if !args.contains(&"--library") {
        c.arg("--library").arg(library());
    }
    c.args(["--platform-probe", "0s"])
        .args(args)
        .args(["--", "sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

fn load(p: &Path) -> AppReport {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Prints "t= 110" with the library and "t= 100" without.
const TEN_PERCENT: &str = r#"if [ -n "$JITTER_TRACE" ] && [ -n "$LD_PRELOAD" ]; then echo "t= 110"; else echo "t= 100"; fi"#;

#[test]
fn a_printed_metric_with_a_known_effect_gives_the_closed_form_slowdown_and_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("app.json");
    let o = app_sh(
        dir.path(),
        &[
            "--runs",
            "4",
            "--warmup",
            "2",
            "--metric",
            r"t= (\d+)",
            "-o",
            json.to_str().unwrap(),
        ],
        TEN_PERCENT,
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = load(&json);
    // 100 → 110 in every pair: 10 % exactly, an interval of 0 (no spread), a verdict.
    let res = r.result.as_ref().unwrap();
    assert_eq!(res.effect.slowdown_pct, 10.0);
    assert_eq!(res.effect.slowdown_ci95_pct, 0.0);
    assert_eq!(res.effect.verdict, Verdict::Slower);
    assert_eq!(
        (res.without.runs, res.with.runs, res.effect.pairs),
        (4, 4, 4)
    );
    // Every run is recorded with its status, warm-ups first, each pair once with each arm.
    assert_eq!(r.runs.len(), 12);
    assert!(r.runs.iter().all(|x| x.status == RunStatus::Exited(0)));
    assert_eq!(r.runs.iter().filter(|x| x.warmup).count(), 4);
    for p in 0..6 {
        let arms: Vec<Arm> = r
            .runs
            .iter()
            .filter(|x| x.pair == p)
            .map(|x| x.arm)
            .collect();
        assert!(
            arms.contains(&Arm::With) && arms.contains(&Arm::Without),
            "{arms:?}"
        );
    }
    // The order is drawn: with a fixed seed, both orders occur among 6 pairs of this seed.
    let firsts: Vec<Arm> = (0..6)
        .map(|p| r.runs.iter().find(|x| x.pair == p).unwrap().arm)
        .collect();
    assert!(
        firsts.contains(&Arm::With) && firsts.contains(&Arm::Without),
        "{firsts:?}"
    );
    // A program that does not call MPI_Init leaves no statistics: the report says so.
    assert!(
        r.warnings.iter().any(|w| w.contains("wrote no statistics")),
        "{:?}",
        r.warnings
    );
    assert!(
        stdout.contains("slower with the trace: +10.00 % ± 0.00 pp"),
        "{stdout}"
    );
}

/// The known delay's script: 0.2 s of `sleep` without the trace, 0.3 s with it.
const DELAY_SCRIPT: &str = r#"if [ -n "$JITTER_TRACE" ]; then sleep 0.3; else sleep 0.2; fi"#;

/// What the two arms of [`DELAY_SCRIPT`] differ by on this machine, outside `app`, ns: the
/// median of `n` runs with the library and the trace's variable less the median of `n` without,
/// alternated, and the spread of that difference (the larger of the arms' interquartile
/// ranges). It holds the library's loading into `sh` and `sleep` and what this machine's timers
/// make of 0.3 s against 0.2 s: on a VM whose timers fire late in proportion to the sleep (2.5 %
/// seen, 2026-12-07), `sleep 0.3` outlasts `sleep 0.2` by 106 ms, not 100.
fn arms_differ_ns(trace: &Path, n: usize) -> (f64, f64) {
    let lib = library();
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for i in 0..2 * n {
        let mut c = Command::new("sh");
        c.args(["-c", DELAY_SCRIPT]).env_remove("JITTER_TRACE");
        if i % 2 == 0 {
            c.env("LD_PRELOAD", &lib).env("JITTER_TRACE", trace);
        }
        let t0 = Instant::now();
        assert!(c.status().unwrap().success());
        let ns = t0.elapsed().as_nanos() as f64;
        if i % 2 == 0 { &mut with } else { &mut without }.push(ns);
    }
    let iqr = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        quantile(v, 0.75) - quantile(v, 0.25)
    };
    let cost = median(&mut with) - median(&mut without);
    (cost, iqr(&mut with).max(iqr(&mut without)))
}

#[test]
fn the_wall_time_slowdown_of_a_known_delay_lies_in_its_interval() {
    // 0.2 s of sleep without, 0.3 s with, plus the start-up of sh in both arms and, with the
    // library, its loading into sh and sleep. What the arms differ by, δ (100 ms, the load, and
    // this machine's timer error on the extra 0.1 s), is measured outside `app`, as `app`
    // runs them, before and after the study (it drifts with the machine: half the difference
    // widens its spread): SD = 100 · δ / ā with ā the measured baseline, inside the interval
    // widened by the timer slack of sleep (50 µs per run, 0.1 pp of two runs at ā ≥ 0.2 s) and
    // by the spread of δ. One warm-up pair keeps a first start's cold caches out of the means,
    // as the medians keep it out of δ. An `app` that lost the library's arm, swapped the arms or
    // timed something else than the runs is off by tens of pp.
    let dir = tempfile::tempdir().unwrap();
    let trace = sh_trace(dir.path());
    let (before_ns, before_spread_ns) = arms_differ_ns(&trace, 6);
    let json = dir.path().join("app.json");
    let o = app_sh_on(
        dir.path(),
        &trace,
        &[
            "--runs",
            "8",
            "--warmup",
            "1",
            "--metric",
            "wall",
            "-o",
            json.to_str().unwrap(),
        ],
        DELAY_SCRIPT,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let res = load(&json).result.unwrap();
    let (after_ns, after_spread_ns) = arms_differ_ns(&trace, 6);
    let delta_ns = (before_ns + after_ns) / 2.0;
    let spread_ns = before_spread_ns.max(after_spread_ns) + (before_ns - after_ns).abs() / 2.0;
    let want = 100.0 * delta_ns / res.without.mean;
    let e = res.effect;
    assert!(
        (e.slowdown_pct - want).abs()
            <= e.slowdown_ci95_pct + 0.1 + 100.0 * spread_ns / res.without.mean,
        "{e:?} vs {want} (the arms differ by {delta_ns} ns ± {spread_ns} outside app)"
    );
    assert!(res.without.mean >= 2e8, "{res:?}");
    assert_eq!(e.verdict, Verdict::Slower);
}

#[test]
fn an_interval_wider_than_the_effect_gets_no_verdict_and_a_count_of_pairs() {
    // A run counter in a file: odd runs print 150, even ones 100, and the library adds 1:
    // each pair differs by +51 or −49 by the drawn order, an effect of ~1 % under ±50 %.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("app.json");
    let script = r#"n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count
        v=$((100 + 50 * (n % 2))); [ -n "$JITTER_TRACE" ] && v=$((v + 1)); echo "v=$v""#;
    let o = app_sh(
        dir.path(),
        &[
            "--runs",
            "6",
            "--warmup",
            "0",
            "--metric",
            r"v=(\d+)",
            "-o",
            json.to_str().unwrap(),
        ],
        script,
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}");
    let r = load(&json);
    let res = r.result.unwrap();
    let e = res.effect;
    assert_eq!(e.verdict, Verdict::Inconclusive, "{e:?}");
    assert!(e.slowdown_ci95_pct >= e.slowdown_pct.abs(), "{e:?}");
    // The report's effect is judge() of its own recorded runs, and asks for more pairs.
    assert_eq!(e, judge(&replay_bench::app::pairs_of(&r.runs)));
    assert!(e.pairs_needed.is_some_and(|n| n > 6), "{e:?}");
    assert!(stdout.contains("no verdict"), "{stdout}");
}

#[test]
fn a_failed_run_is_recorded_and_stops_the_study_with_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("app.json");
    let script = r#"if [ -n "$JITTER_TRACE" ]; then echo "boom" >&2; exit 3; fi; echo ok"#;
    let o = app_sh(
        dir.path(),
        &[
            "--runs",
            "3",
            "--metric",
            "wall",
            "-o",
            json.to_str().unwrap(),
        ],
        script,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: pair 0 with the library failed (exit 3): boom"),
        "{stderr}"
    );
    let r = load(&json);
    assert!(r.result.is_none());
    let last = r.runs.last().unwrap();
    assert_eq!(
        (last.arm, last.status, last.pair),
        (Arm::With, RunStatus::Exited(3), 0)
    );
    assert!(
        r.runs.len() <= 2,
        "the study went on after the failure: {:?}",
        r.runs
    );
}

/// The default metric is the main loop's time, from the profile the library records: a program
/// the library cannot profile (no MPI) stops the study at its first run, saying what to do.
#[test]
fn the_loop_metric_of_a_program_without_mpi_stops_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("app.json");
    let o = app_sh(
        dir.path(),
        &["--runs", "2", "-o", json.to_str().unwrap()],
        "true",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the library wrote no profile to time the loop from")
            && stderr.contains("give --metric wall"),
        "{stderr}"
    );
    let r = load(&json);
    assert_eq!(r.runs.len(), 1, "{:?}", r.runs);
    assert!(r.metric.starts_with("main loop time"), "{}", r.metric);
}

#[test]
fn a_run_past_its_time_limit_is_ended_and_stops_the_study() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"if [ -n "$JITTER_TRACE" ]; then sleep 60; fi"#;
    let t0 = Instant::now();
    let o = app_sh(
        dir.path(),
        // The mode given: `auto` would calibrate the signal injector first where its cache is
        // missing or was taken on a busy machine (about 20 s, outside the time limit tested).
        &[
            "--runs",
            "2",
            "--timeout",
            "1s",
            "--metric",
            "wall",
            "--inject",
            "boundary",
        ],
        script,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("did not finish within --timeout 1 s"),
        "{stderr}"
    );
    // 1 s of limit, 3 s of grace at most, a few runs of sh.
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
}

#[test]
fn bad_input_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (vec!["--metric", r"t=\d+"], "one capture group"),
        (vec!["--metric", "("], "not a regular expression"),
        (vec!["--runs", "1"], "--runs"),
        (
            vec!["--library", "/nonexistent/libjitter_preload.so"],
            "is not a file",
        ),
        (vec!["--np", "0"], "--np"),
    ] {
        let o = app_sh(dir.path(), &args, "true");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(
            stderr.contains("error") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let o = Command::new(BIN)
        .args(["app", "--trace", "/nonexistent.jtr", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    let o = Command::new(BIN)
        .args(["app", "--trace", "x.jtr"])
        .output()
        .unwrap();
    assert!(!o.status.success());
}

/// A trace with one flipped byte is refused before the first run, as every reader refuses it
/// (issue 30's sweep: the runs went ahead, and the library refused it in each); `--salvage`
/// runs it and passes `JITTER_SALVAGE=1` to the runs with the library only; `-o` a directory
/// is refused before the runs too.
#[test]
fn a_damaged_trace_or_an_unwritable_output_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    // Two chunks (2^18 records each at most): the damage is in the second, so a salvage keeps
    // the first's detours (a stream left without any is refused before the runs).
    let trace = periodic_trace(dir.path(), 1_000_000, 100_000, 300_000);
    let mut bytes = std::fs::read(&trace).unwrap();
    let late = bytes.len() * 19 / 20;
    bytes[late] ^= 0xFF;
    let damaged = dir.path().join("damaged.jtr");
    std::fs::write(&damaged, &bytes).unwrap();
    let app = |extra: &[&str]| {
        let mut c = Command::new("timeout");
        c.args(["120", BIN, "app", "--trace"])
            .arg(&damaged)
            .arg("--library")
            .arg(library())
            .args(["--platform-probe", "0s", "--runs", "2", "--warmup", "0"])
            .args(["--metric", "t= ([0-9]+)"])
            .args(extra)
            .args(["--", "sh", "-c"])
            .arg(r#"if [ "$JITTER_SALVAGE" = 1 ]; then echo "t= 110"; else echo "t= 100"; fi"#)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let o = app(&[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains("damaged") && stderr.contains("--salvage"),
        "{stderr}"
    );
    let o = app(&["--salvage"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("share kept") || err.contains("kept the"),
        "{err}"
    );
    assert!(
        out.contains("slower with the trace: +10.00 % ± 0.00 pp"),
        "{out}"
    );
    std::fs::create_dir(dir.path().join("out.json")).unwrap();
    let o = app(&["--salvage", "-o", "out.json"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is a directory") && !stderr.contains("pair 1"),
        "{stderr}"
    );
}

/// Period and detour of the MPI test's trace: 100 µs every 1 ms (10 % of the time).
const PERIOD_NS: u64 = 1_000_000;
const DETOUR_NS: u64 = 100_000;
/// Platform noise up to which a rank is taken to own its CPU (a tenth of the trace's 10 %).
const OWN_CPU: f64 = 0.01;

#[test]
fn an_mpi_program_under_a_periodic_trace_is_slowed_by_d_over_p_minus_d_within_its_interval() {
    if !have("mpicc") || !have("mpirun") {
        println!("skipped: mpicc or mpirun is not installed (scripts/setup.sh installs OpenMPI)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("phases");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/app/phases.c");
    let cc = Command::new("timeout")
        .args(["60", "mpicc", "-O2", "-o"])
        .arg(&app)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "mpicc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    // 30 phases of 10 ms of work: 300 ms, 300 replayed periods.
    let cal = Command::new("timeout")
        .arg("60")
        .arg(&app)
        .args(["--calibrate", "10000000"])
        .output()
        .unwrap();
    let iterations = String::from_utf8_lossy(&cal.stdout).trim().to_string();
    assert!(
        iterations.parse::<u64>().is_ok_and(|i| i > 0),
        "{iterations}"
    );
    let trace = periodic_trace(dir.path(), PERIOD_NS, DETOUR_NS, 5000);
    let json = dir.path().join("app.json");
    let o = Command::new("timeout")
        .args(["590", BIN, "app", "--trace"])
        .arg(&trace)
        .arg("--library")
        .arg(library())
        .args([
            "--np", "1", "--runs", "8", "--warmup", "1", "--sync", "none",
        ])
        .args(["--metric", r"loop_ns (\d+)", "--timeout", "120s", "-o"])
        .arg(&json)
        .args(["--", "--bind-to", "none"])
        .arg(&app)
        .args([iterations.as_str(), "30"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl", "self,vader,tcp")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    println!("{stdout}");
    let r = load(&json);
    let res = r.result.unwrap();
    // The library replayed in every run with it, about d/P of each rank's time.
    assert!(
        !r.warnings.iter().any(|w| w.contains("no statistics")),
        "{:?}",
        r.warnings
    );
    let share = DETOUR_NS as f64 / PERIOD_NS as f64;
    let injected = res.injected_share.unwrap();
    assert!((injected - share).abs() < 0.01, "injected {injected}");
    // Closed form under sync none over whole periods: the loop loses d/P of its wall time,
    // SD = d / (P − d) = 11.1 %; the edge of one period in 300 is 0.04 pp. A machine whose own
    // noise takes p of this CPU stretches the injected spins as it stretches the work: up to
    // p · SD more (p from the report's probe; on the shared test VM it reached 0.6).
    // Beyond OWN_CPU the rank does not own its CPU (docs/USAGE.md, known limits: a spin then
    // also spends the rank's share of the CPU, and the slowdown grows past the trace's; 40 %
    // was seen at p = 0.6): the closed form is not checked, and the test says so.
    let want = 100.0 * DETOUR_NS as f64 / (PERIOD_NS - DETOUR_NS) as f64;
    let e = res.effect;
    let p = r.platform_noise.noise_ratio;
    if p <= OWN_CPU {
        let tol = e.slowdown_ci95_pct + 0.04 + p * want;
        assert!(
            (e.slowdown_pct - want).abs() <= tol,
            "{e:?} vs {want} ± {tol}"
        );
        // The interval excludes zero: a library that injected nothing would get no verdict.
        assert_eq!(e.verdict, Verdict::Slower, "{e:?}");
    } else {
        // A busy machine widens the interval (10 pp was seen at p = 0.27): the report must
        // then either still exclude zero or refuse, asking for more pairs than it had.
        println!("closed form not checked: platform noise {p:.3} > {OWN_CPU} (a busy machine)");
        assert!(
            r.warnings.iter().any(|w| w.contains("platform noise")),
            "{:?}",
            r.warnings
        );
        assert!(
            e.verdict == Verdict::Slower || e.pairs_needed.is_some_and(|n| n > 8),
            "{e:?}"
        );
    }
}
