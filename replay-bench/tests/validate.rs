//! `replay-bench validate` end to end (timing-sensitive: ONE test): real replays under mpirun at
//! np 1 and 2, sync `none` and `phase`, both injection modes (signal and paid at calls) beside
//! their predictions, on a periodic trace (P = 4 ms, d = 120 µs), with the platform's own noise
//! recorded first and in the predictions. Checked always: the table's structure (a header, one
//! line per mode, process count, sync mode and SD equation, the closing count, the two modes
//! side by side), its JSON and the platform trace. Checked when the machine is quiet enough
//! (every run's platform probe below [`NOISY`], as in paired.rs): each one-rank measurement
//! without resync (`none`) against its prediction, within the interval widened to a
//! family-wise 99 % (two runs judged at once) or within [`BETWEEN_RUNS_PP`] (the other rows are
//! printed; see the end of the test); otherwise a NOT CHECKED line says why.

use std::process::Command;

use jitter_emulator::InjectionMode;
use jitter_report::comparison::Comparison;
use jitter_report::report::Report;
use jitter_report::verdict::Verdict;
use jitter_trace::synth::{synthesize, Spec};

mod common;
use common::{mpirun, BIN};

/// Platform noise (probe, any rank) above which agreement is not judged.
const NOISY: f64 = 0.10;

/// Normal quantile of 99.5 %: two judged intervals at a family-wise 99 % (Bonferroni).
const FAMILY_Z: f64 = 2.807;

/// How far one run's one-rank SD may lie from the prediction, pp, from this VM's measured
/// spread (docs/VALIDATION.md, "replay-bench validate"): 10 runs of np 1 `none` on the quiet
/// machine measured 3.70 % on average against 3.1 % predicted (the application loses about
/// 25 µs more per injection than the calibrated O: the interruption's own cost to its caches
/// and pipeline, which a probe loop does not see), with an sd of 0.38 pp from run to run, 2–4
/// times the runs' own intervals: 0.6 + 3 × 0.38 ≈ 1.8 pp. A prediction off by the whole
/// effect (3 pp) fails it.
const BETWEEN_RUNS_PP: f64 = 1.8;

#[test]
fn validate_prints_one_table_of_measured_and_predicted_slowdowns() {
    let launcher = mpirun();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("periodic.jtr");
    let spec: Spec = "periodic:period=4ms,dur=120us".parse().unwrap();
    let t = synthesize(&spec, 1, 30_000_000_000, 1).unwrap();
    jitter_trace::write_trace(&trace, &t).unwrap();
    let runs = dir.path().join("runs");
    let json = dir.path().join("table.json");
    let svg = dir.path().join("sd.svg");
    let out = Command::new(BIN)
        .args(["validate", "--trace"])
        .arg(&trace)
        .args([
            "--ranks",
            "1,2",
            "--sync",
            "none,phase",
            "--period",
            "2s",
            "--phases",
            "1000",
        ])
        .args(["--platform-probe", "5s"])
        .arg("--dir")
        .arg(&runs)
        .arg("--output")
        .arg(&json)
        .arg("--plot")
        .arg(&svg)
        .arg("--mpirun")
        .arg(&launcher)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(line) = busy_platform(&stderr) {
        println!("{line}");
        return;
    }
    assert!(
        out.status.success(),
        "validate failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    println!("{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    // Title, header, 2 injection modes × 2 counts × 2 sync modes × 2 equations, the closing
    // count, the platform line, and one line per point measured in both modes.
    assert_eq!(lines.len(), 1 + 1 + 16 + 1 + 1 + 8, "{stdout}");
    assert!(lines[0].starts_with("replay-bench validate: periodic.jtr"));
    assert!(lines[1].contains("measured (95 %)") && lines[1].contains("same windows"));
    for l in &lines[2..18] {
        assert!(l.contains(" % ") && l.contains(" pp "), "{l}");
    }
    let checks: Vec<Comparison> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(checks.len(), 16);
    for inject in [InjectionMode::Signal, InjectionMode::Boundary] {
        for np in [1, 2] {
            for mode in ["none", "phase"] {
                let n = (checks.iter())
                    .filter(|c| c.inject == inject && c.ranks == np && c.sync == mode)
                    .count();
                assert_eq!(n, 2, "{inject} {np} {mode}");
            }
        }
    }
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.contains("(boundary) phase (run)") && plot.contains("(signal) phase (des)"));
    assert!(plot.contains("periodic.jtr: measured and predicted"));
    let agree = checks.iter().filter(|c| c.verdict.agrees()).count();
    assert!(
        lines[18].starts_with(&format!("{agree} of 16 agree")),
        "{}",
        lines[18]
    );
    // The platform's own noise was recorded on both CPUs and is in the prediction.
    let platform = jitter_trace::read_trace(&runs.join("platform.jtr"))
        .unwrap()
        .trace;
    assert_eq!(platform.streams.len(), 2);
    assert!(
        lines[19].contains("in the whole-trace prediction as platform.jtr"),
        "{}",
        lines[19]
    );
    for l in &lines[20..] {
        assert!(l.starts_with("signal vs boundary, np "), "{l}");
    }
    // Paying at calls, every run paid every detour it met, at S = 1.
    for r in runs_of(&runs, "boundary") {
        let p = r.config.run.as_ref().and_then(|d| d.payments.clone());
        let p = p.expect("a run paying at calls records its payments");
        assert!(p.detour_share > 0.999 && p.time_share > 0.999, "{p:?}");
        assert_eq!((r.config.scale, r.results[0].emulator.dropped), (1.0, 0));
    }
    check_each_verdict(&checks, &stdout);
    // The platform column is the runs' own probe (the largest over ranks).
    let noisiest = noisiest_run(&runs);
    let column = checks.iter().map(|c| c.platform_pct).fold(0.0, f64::max);
    assert!(
        (column - noisiest * 100.0).abs() < 1e-9,
        "{column} {noisiest}"
    );
    if noisiest > NOISY {
        println!(
            "NOT CHECKED: agreement of prediction and measurement (platform noise {:.1} % > {:.0} %)",
            noisiest * 100.0,
            NOISY * 100.0
        );
        return;
    }
    assert!(
        checks.iter().all(|c| c.ci95_pp.is_some()),
        "a quiet machine runs enough block pairs for an interval: {checks:#?}"
    );
    judge_one_rank_runs(&checks, &stdout);
}

/// The line the test prints instead of its checks when `validate` refused to predict because its
/// platform probe saw other work on a CPU (the product's refusal: a prediction from that probe
/// would be the other work's slowdown); None otherwise.
fn busy_platform(stderr: &str) -> Option<String> {
    let refusal = stderr.lines().find(|l| {
        l.starts_with("error: --platform-noise") && l.contains("other work ran on this CPU")
    })?;
    Some(format!(
        "NOT CHECKED: validate refused to predict, as it must on a machine this busy: {}",
        refusal.trim_start_matches("error: ")
    ))
}

/// Each verdict follows from the difference, its interval paired window by window (every run
/// recorded its blocks, every prediction its windows), and the platform's noise (the one rule);
/// every run's windows were predicted and injected the same detours; the whole trace is there
/// with its range over the five draws.
fn check_each_verdict(checks: &[Comparison], stdout: &str) {
    for c in checks {
        let same = c.same_windows_pct.expect("the run's windows predicted");
        let paired = c
            .paired_ci95_pp
            .expect("the difference paired window by window");
        assert_eq!(
            c.verdict,
            Verdict::judge_difference(
                c.measured_pct,
                same - c.measured_pct,
                Some(paired),
                c.platform_pct
            ),
            "{c:?}"
        );
        assert_eq!(c.injection_agrees, Some(true), "{c:?}\n{stdout}");
        let [lo, hi] = c.whole_range_pct.expect("the draws' range");
        assert!(lo <= hi && c.whole_pct.is_some(), "{c:?}");
    }
}

/// The reports of the runs of one injection mode in `runs`.
fn runs_of(runs: &std::path::Path, inject: &str) -> Vec<Report> {
    let prefix = format!("run-{inject}-");
    (std::fs::read_dir(runs).unwrap())
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_string();
            (name.starts_with(&prefix) && name.ends_with(".json")).then_some(p)
        })
        .map(|p| Report::load(&p).unwrap())
        .collect()
}

/// The platform noise of the noisiest run in `runs` (a ratio): its largest rank's probe.
fn noisiest_run(runs: &std::path::Path) -> f64 {
    std::fs::read_dir(runs)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "json").then_some(p)
        })
        .map(|p| {
            Report::load(&p)
                .unwrap()
                .calibration
                .iter()
                .map(|c| c.platform_noise_ratio)
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max)
}

/// The agreement asserted on a quiet machine (see the comment inside), the rest printed.
fn judge_one_rank_runs(checks: &[Comparison], stdout: &str) {
    // Judged: one rank without resync (`none`), the regime whose run-to-run spread
    // was measured (the other vCPU takes the machine's own work). Not judged (printed): two
    // ranks, where both vCPUs are busy and every OS activity lands on a rank (spread of
    // several pp, docs/VALIDATION.md), and `phase`, whose one-rank runs of this test's debug
    // build measured far below the prediction twice in CI (−0.26 ± 2.47 % and, in paired.rs,
    // 1.51 ± 0.37 % against 3.2–3.6 %) while release runs on the quiet machine agree
    // (3.40–3.61 %): an open finding, not a property this test can assert. Two runs are judged
    // at once, each against its interval widened to a family-wise 99 % (Bonferroni) or within
    // the measured run-to-run spread; eq. 2 and eq. 3 of one run are nearly one number.
    let diff = |c: &Comparison| c.same_windows_pct.unwrap_or(f64::NAN) - c.measured_pct;
    let judged = |c: &&Comparison| c.ranks == 1 && c.sync == "none";
    let family = |c: &&Comparison| {
        diff(c).abs() <= BETWEEN_RUNS_PP
            || c.ci95_pp
                .is_some_and(|h| diff(c).abs() <= h * FAMILY_Z / 1.960)
    };
    let off: Vec<&Comparison> = checks
        .iter()
        .filter(judged)
        .filter(|c| !family(c))
        .collect();
    assert!(
        off.is_empty(),
        "one-rank predictions off the measurement: {off:#?}\n{stdout}"
    );
    for c in checks.iter().filter(|c| !judged(c) && !c.verdict.agrees()) {
        println!(
            "NOT JUDGED: np {} {} {}: measured {:.2} % ± {:.2}, predicted {:.2} %",
            c.ranks,
            c.sync,
            c.metric,
            c.measured_pct,
            c.ci95_pp.unwrap_or(f64::NAN),
            c.same_windows_pct.unwrap_or(f64::NAN)
        );
    }
}
