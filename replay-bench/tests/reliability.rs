//! Bad input to `replay-bench` (predict, choose-scale, run): a non-zero exit and one `error:`
//! line that names the problem, before anything is simulated, replayed or printed as a result.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jitter_emulator::calibration::{Calibration, TimerCalibration};

mod common;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replay-bench"))
        .args(args)
        .output()
        .unwrap()
}

/// Fails unless the command failed with one `error:` line containing `needle`.
fn assert_error(o: &Output, needle: &str) -> String {
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "exit 0: {e}");
    assert!(!e.contains("panicked"), "{e}");
    let errors: Vec<&str> = e.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{e}");
    assert!(errors[0].contains(needle), "{e}");
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    e
}

fn trace(dir: &Path) -> PathBuf {
    let spec = "periodic:period=1ms,dur=5us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&spec, 1, 100_000_000, 1).unwrap();
    let p = dir.join("t.jtr");
    jitter_trace::write_trace(&p, &t).unwrap();
    p
}

/// A calibration whose abstime overhead O is `o_ns`.
fn calibration(dir: &Path, o_ns: f64) -> PathBuf {
    let mut abstime = TimerCalibration::default();
    abstime.overhead.median_ns = o_ns;
    let cal = Calibration {
        abstime,
        ..Calibration::default()
    };
    let p = dir.join("cal.json");
    std::fs::write(&p, serde_json::to_string(&cal).unwrap()).unwrap();
    p
}

#[test]
fn predict_refuses_out_of_range_scale_and_barrier_stage() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let t = t.to_str().unwrap();
    let base = ["predict", "--trace", t, "--ranks", "4", "--phases", "10"];
    let with = |extra: &[&str]| run(&[&base[..], extra].concat());
    assert_error(&with(&["--scale", "1e15"]), "scale must be");
    assert_error(
        &with(&["--barrier-stage-ns", "18446744073709551615"]),
        "--barrier-stage-ns must be in",
    );
    assert_error(&with(&["--scale", "nan"]), "scale must be");
}

#[test]
fn choose_scale_fails_when_max_does_not_reach_the_share() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    // O = 1 ms against 5 µs detours: S = 201 would be needed.
    let c = calibration(dir.path(), 1e6);
    let (t, c) = (t.to_str().unwrap(), c.to_str().unwrap());
    let base = ["choose-scale", "--trace", t, "--calibration", c];
    let e = assert_error(&run(&[&base[..], &["--max", "20"]].concat()), "--max 20");
    assert!(
        e.contains("S = 201 is needed; raise --max to 201, lower --share"),
        "{e}"
    );
    assert_error(
        &run(&[&base[..], &["--max", "0"]].concat()),
        "--max must be in",
    );
    // --allow-capped keeps the old behaviour, with a warning.
    let o = run(&[&base[..], &["--max", "20", "--allow-capped"]].concat());
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "20");
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning: --max 20"));
    // Reached: exit 0, S on stdout.
    let c = calibration(dir.path(), 10e3);
    let o = run(&[
        "choose-scale",
        "--trace",
        t,
        "--calibration",
        c.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "3");
}

#[test]
fn run_refuses_a_scale_that_would_spin_for_ever() {
    for s in ["1e300", "1e19", "1001", "inf"] {
        assert_error(&run(&["run", "--scale", s]), "scale must be");
    }
}

#[test]
fn a_negative_or_non_finite_slowdown_is_never_printed_as_a_result() {
    use jitter_predict::{check_plausible, Prediction, SD_FLOOR_PCT};
    use jitter_report::report::{Config, Report, ReportKind, ResultRow};
    let with = |sd: f64| {
        let mut r = Report::new(ReportKind::PredictDes, Config::default());
        r.results.push(ResultRow {
            ranks: 64,
            sd_qtbt_pct: sd,
            sd_qt_pct: 1.0,
            ..ResultRow::default()
        });
        check_plausible(&Prediction {
            des: Some(r),
            order_stats: None,
        })
    };
    for bad in [-82.0, -100.0, SD_FLOOR_PCT - 0.01, f64::NAN, f64::INFINITY] {
        let e = with(bad).unwrap_err().to_string();
        assert!(
            e.contains("implausible prediction") && e.contains("64 ranks"),
            "{e}"
        );
    }
    assert!(with(-0.5).is_ok() && with(37.0).is_ok());
}

/// A slowdown far above what the trace can cause (here: a baseline file whose averages were cut
/// to a tenth, as a baseline measured on a quiet machine would look next to a run swamped by
/// other work) is refused with the cause named, not printed as a result.
#[test]
fn a_slowdown_beyond_what_the_trace_can_cause_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let cal = calibration(dir.path(), 1_000.0);
    let base = dir.path().join("base.json");
    let common_args = ["--phases", "100", "--noise-probe", "0"];
    let mut args = common_args.to_vec();
    args.extend(["-o", base.to_str().unwrap()]);
    let r = common::run(1, &args, std::time::Duration::from_secs(120));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    for row in report["results"].as_array_mut().unwrap() {
        for key in ["avg_max_qt_ns", "avg_max_qtbt_ns"] {
            let v = row[key].as_f64().unwrap();
            row[key] = serde_json::json!(v / 10.0);
        }
    }
    std::fs::write(&base, serde_json::to_string(&report).unwrap()).unwrap();
    let mut args = common_args.to_vec();
    let (t, cal, b) = (
        t.to_str().unwrap(),
        cal.to_str().unwrap(),
        base.to_str().unwrap(),
    );
    args.extend([
        "--trace",
        t,
        "--calibration",
        cal,
        "--design",
        "sequential",
        "--baseline",
        b,
    ]);
    let r = common::run(1, &args, std::time::Duration::from_secs(120));
    assert_ne!(r.code, Some(0), "exit 0:\n{}\n{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let line = r
        .stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {}", r.stderr));
    eprintln!("{line}");
    assert!(line.contains("implausible result: SD(MaxQTBT)"), "{line}");
    assert!(line.contains("swamped the measurement"), "{line}");
    assert!(
        !r.stdout.contains("SD"),
        "printed as a result: {}",
        r.stdout
    );
}

#[test]
fn predict_checks_its_outputs_and_threads_before_reading_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The trace does not exist: each error below comes before it is read.
    let missing = d.join("missing.jtr");
    let base = [
        "predict",
        "--trace",
        missing.to_str().unwrap(),
        "--ranks",
        "4",
    ];
    let with = |extra: &[&str]| run(&[&base[..], extra].concat());
    let shown = d.display();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["-o".into(), shown.to_string()],
            format!("error: -o {shown} is a directory, not an output file"),
        ),
        (
            vec!["--plot".into(), format!("{shown}/no/p.svg")],
            format!("error: --plot {shown}/no/p.svg: folder {shown}/no does not exist (create it first)"),
        ),
        (
            vec!["-o".into(), format!("{shown}/r.csv")],
            format!(
                "error: -o {shown}/r.csv: this writes a JSON report, but the name ends in .csv; \
                 name it .json"
            ),
        ),
        (
            vec!["--threads".into(), "100000".into()],
            "error: --threads 100000: give 1 to ".into(),
        ),
        (
            vec!["--threads".into(), "0".into()],
            "error: --threads 0: give 1 to ".into(),
        ),
    ];
    // A mode listed twice would be two identical rows (checked once the outputs are).
    let t = trace(d);
    let o = run(&[
        "predict",
        "--trace",
        t.to_str().unwrap(),
        "--ranks",
        "4",
        "--sync",
        "none,none",
    ]);
    let e = assert_error(&o, "");
    assert_eq!(
        e.trim_end(),
        "error: --sync lists none twice: list every mode once"
    );
    for (extra, want) in cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let e = assert_error(&with(&extra), "");
        assert!(e.trim_end().starts_with(&want), "{extra:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

/// A report of one run: trace `t` with this digest, 2 ranks, sync none.
fn report(dir: &Path, name: &str, digest: Option<&str>, quanta_ns: u64) -> PathBuf {
    report_of(dir, name, digest, quanta_ns, 2)
}

/// As [`report`], with `ranks` ranks.
fn report_of(dir: &Path, name: &str, digest: Option<&str>, quanta_ns: u64, ranks: u64) -> PathBuf {
    use jitter_report::report::{Config, Report, ReportKind, ResultRow, TraceInfo};
    let mut r = Report::new(
        ReportKind::Run,
        Config {
            quanta_ns,
            scale: 1.0,
            trace: Some(TraceInfo {
                label: "t".into(),
                digest: digest.map(str::to_string),
                ..TraceInfo::default()
            }),
            ..Config::default()
        },
    );
    r.results.push(ResultRow {
        trace: "t".into(),
        ranks,
        sync: "none".into(),
        sd_qtbt_pct: 5.0,
        sd_qt_pct: 5.0,
        ..ResultRow::default()
    });
    let p = dir.join(name);
    r.save(&p).unwrap();
    p
}

#[test]
fn compare_and_plot_study_refuse_reports_of_different_traces_or_quanta() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = report(d, "a.json", Some("crc32x2:0000000100000001/10"), 1_000_000);
    let other = report(
        d,
        "other.json",
        Some("crc32x2:0000000200000002/10"),
        1_000_000,
    );
    let q2 = report(d, "q2.json", Some("crc32x2:0000000100000001/10"), 2_000_000);
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let e = assert_error(&run(&["compare", &s(&a), &s(&other)]), "");
    assert_eq!(
        e.trim_end(),
        format!(
            "error: cannot compare {} with {} for trace `t`: trace contents differ \
             (crc32x2:0000000100000001/10 vs crc32x2:0000000200000002/10)",
            a.display(),
            other.display()
        )
    );
    let e = assert_error(&run(&["compare", &s(&a), &s(&q2)]), "");
    assert!(
        e.trim_end()
            .ends_with("quanta differ (1000000 ns vs 2000000 ns)"),
        "{e}"
    );
    let e = assert_error(&run(&["plot-study", &s(&a), &s(&other)]), "");
    assert!(
        e.starts_with(&format!(
            "error: cannot draw {} and {} as one series (trace `t`, sync none, run): trace \
             contents differ",
            a.display(),
            other.display()
        )),
        "{e}"
    );
    // Alike: exit 0 and a table.
    let same = report(
        d,
        "same.json",
        Some("crc32x2:0000000100000001/10"),
        1_000_000,
    );
    let o = run(&["compare", &s(&a), &s(&same)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A report written before digests: matched by name, with a warning.
    let old = report(d, "old.json", None, 1_000_000);
    let o = run(&["compare", &s(&a), &s(&old)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with(&format!(
        "warning: {} records no content digest of trace `t`",
        old.display()
    )));
    // No common row: nothing to compare is an error, not an empty table.
    let far = report_of(
        d,
        "far.json",
        Some("crc32x2:0000000100000001/10"),
        1_000_000,
        4,
    );
    let e = assert_error(&run(&["compare", &s(&a), &s(&far)]), "");
    assert!(e.contains("nothing to compare"), "{e}");
    // plot-study's output is checked before the reports are read.
    let e = assert_error(
        &run(&[
            "plot-study",
            "missing.json",
            "--svg",
            &d.display().to_string(),
        ]),
        "",
    );
    assert!(e.contains("is a directory, not an output file"), "{e}");
    // study: its report and headlines are checked before the folder is read.
    let shown = d.display();
    let e = assert_error(&run(&["study", "--dir", &format!("{shown}/none")]), "");
    assert_eq!(
        e.trim_end(),
        format!(
            "error: --dir {shown}/none/report.md: folder {shown}/none does not exist (create it \
             first)"
        )
    );
    let e = assert_error(
        &run(&["study", "--dir", &shown.to_string(), "--report", "r.csv"]),
        "",
    );
    assert_eq!(
        e.trim_end(),
        "error: --report r.csv: this writes a Markdown report, but the name ends in .csv; name \
         it .md"
    );
}

#[test]
fn choose_scale_advises_raising_max_only_to_a_scale_a_replay_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    // O = 10 ms against 5 µs detours: S = 2001 would be needed, beyond the cap of 1000.
    let c = calibration(dir.path(), 10e6);
    let (t, c) = (t.to_str().unwrap(), c.to_str().unwrap());
    let e = assert_error(
        &run(&[
            "choose-scale",
            "--trace",
            t,
            "--calibration",
            c,
            "--max",
            "20",
        ]),
        "",
    );
    assert!(
        e.contains(
            "S = 2001 is needed, beyond the largest scale a replay accepts (1000); lower --share"
        ),
        "{e}"
    );
    assert!(!e.contains("raise --max"), "{e}");
}
