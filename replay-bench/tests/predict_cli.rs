//! `replay-bench predict` through its library entry point: files in, report and plot out, and
//! one clear error for each kind of bad input.

use std::path::{Path, PathBuf};

use jitter_report::report::{Report, ReportKind};
use replay_bench::flags::{PredictArgs, PredictCmd};

/// `replay-bench predict` with these options and the default engine.
fn main(args: PredictArgs) -> anyhow::Result<()> {
    let engine = jitter_predict::des::Engine::default();
    replay_bench::commands::predict::main(PredictCmd { args, engine })
}

fn write_trace(dir: &Path, name: &str, spec: &str) -> PathBuf {
    let t = jitter_trace::synth::synthesize(&spec.parse().unwrap(), 2, 5_000_000_000, 3).unwrap();
    let p = dir.join(name);
    jitter_trace::write_trace(&p, &t).unwrap();
    p
}

/// `predict`'s options for `traces` with `extra` flags after the test's defaults.
fn parse(traces: &[PathBuf], extra: &[&str]) -> Result<PredictArgs, String> {
    let defaults = [
        ("--ranks", "4..64"),
        ("--sync", "none,phase"),
        ("--quanta", "1ms"),
        ("--phases", "200"),
        ("--model", "both"),
        ("--seed", "9"),
        ("--threads", "2"),
    ];
    let given = |f: &str| extra.iter().any(|e| e.split('=').next() == Some(f));
    let mut flags: Vec<&str> = defaults
        .iter()
        .filter(|(f, _)| !given(f))
        .flat_map(|&(f, v)| [f, v])
        .collect();
    let paths: Vec<String> = traces.iter().map(|t| t.display().to_string()).collect();
    for p in &paths {
        flags.extend(["--trace", p.as_str()]);
    }
    flags.extend(extra);
    PredictArgs::from_flags(&flags).map_err(|e| e.to_string())
}

fn args(traces: Vec<PathBuf>) -> PredictArgs {
    parse(&traces, &[]).unwrap()
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
    let model = des.config.predict.as_ref().unwrap();
    assert_eq!(model.traces, ["noisy", "tuned"]);
    assert_eq!(model.barrier_stage_ns, 1000.0);
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
    let bad = bad_platform.display().to_string();
    let missing = vec![dir.path().join("missing.jtr")];
    let one = vec![t.clone()];
    // 60 % of the time in detours: the CPU ran other work.
    let busy = vec![write_trace(
        dir.path(),
        "busy.jtr",
        "periodic:period=10ms,dur=6ms",
    )];
    let platform_noise = t.display().to_string();
    // Refused by the parser (typed once) or by the prediction, each with one clear line.
    let cases: Vec<(&[PathBuf], Vec<&str>, &str)> = vec![
        (&one, vec!["--ranks", "0"], "at least 1"),
        (&one, vec!["--phases", "0"], "--phases must be at least 1"),
        (&one, vec!["--ranks", "64,16"], "strictly increasing"),
        (&one, vec!["--platform", &bad], "is not JSON"),
        (
            &one,
            vec!["--sync", "none,often"],
            "unknown sync mode 'often'",
        ),
        (&one, vec!["--quanta", "1 fortnight"], "--quanta"),
        (&missing, vec![], "cannot read trace"),
        (&busy, vec![], "--force predicts anyway"),
        (
            &one,
            vec![
                "--platform-noise",
                &platform_noise,
                "--model",
                "des",
                "--timer",
                "itimer",
            ],
            "--platform-noise needs --timer abstime",
        ),
        (
            &one,
            vec!["--platform-noise", &platform_noise, "--timer", "abstime"],
            "--platform-noise is modelled by the simulation only",
        ),
        (
            &one,
            vec![
                "--platform-noise",
                &platform_noise,
                "--timer",
                "abstime",
                "--model",
                "des",
                "--ranks-per-node",
                "3",
            ],
            "--platform-noise needs a trace of at least --ranks-per-node 3 streams",
        ),
        (&one, vec!["--scale", "0"], "scale must be"),
        (
            &one,
            vec!["--logp-o-ns", "NaN"],
            "--logp-o-ns must be in 0..=1e9",
        ),
        (
            &one,
            vec!["--logp-l-ns=-1"],
            "--logp-l-ns must be in 0..=1e9",
        ),
    ];
    for (traces, flags, want) in cases {
        let e = match parse(traces, &flags) {
            // The parser's message: its first line is what the binary prints.
            Err(e) => e.lines().next().unwrap_or("").to_string(),
            Ok(a) => format!("{:#}", main(a).unwrap_err()),
        };
        assert!(e.contains(want), "{flags:?}: expected `{want}` in `{e}`");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

#[test]
fn a_node_trace_set_is_one_more_row_and_names_its_traces() {
    let dir = tempfile::tempdir().unwrap();
    let noisy = write_trace(dir.path(), "n1.jtr", "poisson:rate=20/s,dur=exp:300us");
    let quiet = write_trace(dir.path(), "n2.jtr", "periodic:period=1ms,dur=5us");
    let set = format!("{},{}", noisy.display(), quiet.display());
    let out = dir.path().join("r.json");
    let flags = ["--node-traces", set.as_str()];
    let a = parse(std::slice::from_ref(&noisy), &flags).unwrap();
    main(PredictArgs {
        output: Some(out.clone()),
        ..a
    })
    .unwrap();
    let des = Report::load(&out).unwrap();
    // 2 rows (the trace, the set) × 2 modes × 5 rank counts.
    assert_eq!(des.results.len(), 20);
    let labels = &des.config.predict.as_ref().unwrap().traces;
    assert_eq!(labels, &["n1", "nodes(2)"]);
    let sd = |t: &str, n: u64| {
        des.results
            .iter()
            .find(|r| r.trace == t && r.sync == "none" && r.ranks == n)
            .unwrap()
            .sd_qt_pct
    };
    // Half the nodes replay the quiet trace: the set is slowed down less than the noisy trace
    // alone, more than not at all.
    assert!(sd("nodes(2)", 64) < sd("n1", 64) && sd("nodes(2)", 64) > 0.0);
    // The analytic tier: half the ranks on each trace, between the two traces alone.
    let os = Report::load(&dir.path().join("r.order-stats.json")).unwrap();
    let n2 = write_trace(dir.path(), "n2-alone.jtr", "periodic:period=1ms,dur=5us");
    let alone = dir.path().join("alone.json");
    main(PredictArgs {
        output: Some(alone.clone()),
        ..parse(&[n2], &[]).unwrap()
    })
    .unwrap();
    let alone = Report::load(&dir.path().join("alone.order-stats.json")).unwrap();
    let at = |r: &Report, t: &str, n: u64| {
        r.results
            .iter()
            .find(|x| x.trace == t && x.sync == "none" && x.ranks == n)
            .unwrap()
            .sd_qt_pct
    };
    for n in [4, 64] {
        let (lo, mid, hi) = (
            at(&alone, "n2-alone", n),
            at(&os, "nodes(2)", n),
            at(&os, "n1", n),
        );
        assert!(lo < mid && mid < hi, "{n} ranks: {lo} < {mid} < {hi}");
    }
    // A single trace's report keeps the old shape (no `nodes` key).
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains("\"nodes\""));

    // Only the set, the traces given after one flag (as a shell glob gives them).
    let (n1, n2) = (noisy.display().to_string(), quiet.display().to_string());
    let a = PredictArgs::from_flags(&[
        "--node-traces",
        &n1,
        &n2,
        "--ranks",
        "4",
        "--phases",
        "50",
        "--sync",
        "none",
    ])
    .unwrap();
    assert_eq!(a.nodes.node_traces, [noisy.clone(), quiet.clone()]);
    main(PredictArgs {
        output: Some(out.clone()),
        ..a
    })
    .unwrap();
    let r = Report::load(&out).unwrap();
    let info = r.config.trace.unwrap();
    assert_eq!(info.label, "nodes(2)");
    let paths: Vec<&str> = info.nodes.iter().map(|t| t.path.as_str()).collect();
    assert_eq!(paths, [n1.as_str(), n2.as_str()]);
    assert_eq!(info.streams, 2);

    // Every trace of the set needs k streams: the error names the file.
    let e =
        main(parse(&[], &["--node-traces", &set, "--ranks-per-node", "3"]).unwrap()).unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains(&n1) && e.contains("has 2 streams"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
    // Neither --trace nor --node-traces: refused by the parser.
    assert!(parse(&[], &[]).is_err());
}

#[test]
fn more_ranks_per_node_than_streams_replay_copies_on_offsets_of_their_own() {
    // One stream, 64 ranks per node (issue 32): the placement rule gives every rank beyond the
    // first its own timeline, so under sync none 64 ranks meet periodic noise (P = 10 ms,
    // d = 200 µs, q = 1 ms) at 64 independent points and the slowest of them is far slower
    // than one rank; aligned copies (one offset for the node) would give one rank's SD
    // exactly. Under sync phase every rank is at one point: 64 ranks are one rank.
    let dir = tempfile::tempdir().unwrap();
    let t = jitter_trace::synth::synthesize(
        &"periodic:period=10ms,dur=200us".parse().unwrap(),
        1,
        5_000_000_000,
        3,
    )
    .unwrap();
    let path = dir.path().join("one.jtr");
    jitter_trace::write_trace(&path, &t).unwrap();
    let predict = |k: &str| {
        let out = dir.path().join(format!("r{k}.json"));
        let a = parse(
            std::slice::from_ref(&path),
            &["--ranks", "1,64", "--ranks-per-node", k, "--model", "des"],
        )
        .unwrap();
        main(PredictArgs {
            output: Some(out.clone()),
            ..a
        })
        .unwrap();
        Report::load(&out).unwrap()
    };
    let (r, each) = (predict("64"), predict("1"));
    let sd = |r: &Report, m: &str, n: u64| {
        r.results
            .iter()
            .find(|x| x.sync == m && x.ranks == n)
            .unwrap()
            .sd_qt_pct
    };
    assert!(
        sd(&r, "none", 64) > 3.0 * sd(&r, "none", 1),
        "{:?}",
        r.results
    );
    assert!(sd(&r, "none", 1) > 0.0);
    // Under phase the copies change nothing: the same as one rank per node, to the last bit.
    for n in [1, 64] {
        assert_eq!(sd(&r, "phase", n), sd(&each, "phase", n));
    }
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("64 ranks per node on 1 stream(s)")),
        "{:?}",
        r.warnings
    );
}
