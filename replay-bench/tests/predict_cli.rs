//! `replay-bench predict` through its library entry point: files in, report and plot out, and
//! one clear error for each kind of bad input.

use std::path::{Path, PathBuf};

use replay_bench::predict::{main, Model, PredictArgs};
use replay_bench::report::{Report, ReportKind};

fn write_trace(dir: &Path, name: &str, spec: &str) -> PathBuf {
    let t = jitter_trace::synth::synthesize(&spec.parse().unwrap(), 2, 5_000_000_000, 3).unwrap();
    let p = dir.join(name);
    jitter_trace::write_trace(&p, &t).unwrap();
    p
}

fn args(traces: Vec<PathBuf>) -> PredictArgs {
    PredictArgs {
        traces,
        ranks: "4..64".into(),
        sync: "none,phase".into(),
        quanta: "1ms".into(),
        phases: 200,
        model: Model::Both,
        ranks_per_node: 1,
        barrier_model: replay_bench::predict::BarrierKind::Log2,
        barrier_stage_ns: None,
        loop_shape: replay_bench::predict::LoopShape::BarrierComputeBarrier,
        collective: replay_bench::predict::Algorithm::Auto,
        logp_o_ns: None,
        logp_l_ns: None,
        calibrate_from: None,
        platform: "ideal".into(),
        scale: None,
        timer: None,
        lateness_sd: None,
        fraction: None,
        seed: 9,
        threads: Some(2),
        output: None,
        plot: None,
        force: false,
    }
}

#[test]
fn writes_both_reports_and_a_plot_with_every_trace() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_trace(dir.path(), "noisy.jtr", "poisson:rate=20/s,dur=exp:300us");
    let b = write_trace(
        dir.path(),
        "tuned.jtr",
        "periodic:period=1ms,dur=5us,jitter=200us",
    );
    let out = dir.path().join("r.json");
    let svg = dir.path().join("sd.svg");
    main(PredictArgs {
        output: Some(out.clone()),
        plot: Some(svg.clone()),
        ..args(vec![a, b])
    })
    .unwrap();
    let des = Report::load(&out).unwrap();
    assert_eq!(des.kind, ReportKind::PredictDes);
    // 2 traces × 2 modes × 5 rank counts.
    assert_eq!(des.results.len(), 20);
    assert!(des
        .results
        .iter()
        .all(|r| r.phases == 200 && r.sd_qtbt_pct.is_finite()));
    assert_eq!(des.config.extra["traces"], "noisy,tuned");
    assert_eq!(des.config.extra["barrier_stage_ns"], "1000");
    let os = Report::load(&dir.path().join("r.order-stats.json")).unwrap();
    assert_eq!(os.kind, ReportKind::PredictOrderStats);
    assert_eq!(os.results.len(), 20);
    let text = std::fs::read_to_string(&svg).unwrap();
    for label in ["noisy none (des)", "tuned phase (order-stats)"] {
        assert!(text.contains(label), "{label}");
    }
    // Unsynchronised rare-long noise grows with N; per-phase sync does not.
    let sd = |t: &str, m: &str, n: u64| {
        des.results
            .iter()
            .find(|r| r.trace == t && r.sync == m && r.ranks == n)
            .unwrap()
            .sd_qt_pct
    };
    assert!(sd("noisy", "none", 64) > 3.0 * sd("noisy", "none", 4));
    assert!(sd("noisy", "phase", 64) == sd("noisy", "phase", 4));
}

#[test]
fn bad_input_gives_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let t = write_trace(dir.path(), "t.jtr", "poisson:rate=100/s,dur=5us");
    let bad_platform = dir.path().join("platform.json");
    std::fs::write(&bad_platform, "{\"overhead\": 3").unwrap();
    let cases: Vec<(PredictArgs, &str)> = vec![
        (
            PredictArgs {
                ranks: "0".into(),
                ..args(vec![t.clone()])
            },
            "at least 1",
        ),
        (
            PredictArgs {
                phases: 0,
                ..args(vec![t.clone()])
            },
            "--phases must be at least 1",
        ),
        (
            PredictArgs {
                ranks: "64,16".into(),
                ..args(vec![t.clone()])
            },
            "strictly increasing",
        ),
        (
            PredictArgs {
                platform: bad_platform.display().to_string(),
                ..args(vec![t.clone()])
            },
            "is not JSON",
        ),
        (
            PredictArgs {
                sync: "none,often".into(),
                ..args(vec![t.clone()])
            },
            "unknown sync mode 'often'",
        ),
        (
            PredictArgs {
                quanta: "1 fortnight".into(),
                ..args(vec![t.clone()])
            },
            "--quanta",
        ),
        (
            PredictArgs {
                ranks_per_node: 3,
                ..args(vec![t.clone()])
            },
            "has 2 streams",
        ),
        (
            args(vec![dir.path().join("missing.jtr")]),
            "cannot read trace",
        ),
        (
            PredictArgs {
                scale: Some(0.0),
                ..args(vec![t.clone()])
            },
            "scale must be",
        ),
        (
            PredictArgs {
                logp_o_ns: Some(f64::NAN),
                ..args(vec![t.clone()])
            },
            "--logp-o-ns must be in 0..=1e9",
        ),
        (
            PredictArgs {
                logp_l_ns: Some(-1.0),
                ..args(vec![t.clone()])
            },
            "--logp-l-ns must be in 0..=1e9",
        ),
    ];
    for (a, want) in cases {
        let e = format!("{:#}", main(a).unwrap_err());
        assert!(e.contains(want), "expected `{want}` in `{e}`");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}
