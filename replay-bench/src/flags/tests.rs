//! Tests of `predict`'s flags: typed once, refused by the parser, resolved (`request` and
//! `jitter_predict::prepare`) into the prediction they ask for; and the predictor's progress.

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use jitter_emulator::SyncMode;

use jitter_predict::comm::Solo;
use jitter_predict::des;
use jitter_predict::prediction::predict;
use jitter_predict::prepare::walk_note;
use jitter_predict::request::PredictRequest;
use jitter_predict::spec::PredictSpec;

use crate::flags::predict::{order_stats_path, PredictArgs};
use crate::flags::shared::{check_sync_modes, parse_ranks, PlatformChoice};

/// The prediction `args` asks for, resolved.
fn prepare(args: &PredictArgs) -> anyhow::Result<(Vec<jitter_predict::TraceInput>, PredictSpec)> {
    jitter_predict::prepare(&args.request())
}

/// `PredictRequest::new`'s defaults are the flags' defaults.
#[test]
fn a_request_without_flags_is_what_predict_asks_without_flags() {
    let args = PredictArgs::from_flags(&["--trace", "t.jtr"]).unwrap();
    assert_eq!(
        args.request(),
        PredictRequest::new(vec![PathBuf::from("t.jtr")])
    );
}

#[test]
fn a_sync_mode_listed_twice_is_refused() {
    let m = |s: &str| s.parse::<SyncMode>().unwrap();
    check_sync_modes(&[m("none"), m("phase")]).unwrap();
    assert_eq!(
        check_sync_modes(&[m("none"), m("phase"), m("none")])
            .unwrap_err()
            .to_string(),
        "--sync lists none twice: list every mode once"
    );
    assert!(check_sync_modes(&[]).is_err());
}

#[test]
fn rank_lists_parse_and_bad_ones_are_refused() {
    assert_eq!(parse_ranks("16..128").unwrap(), vec![16, 32, 64, 128]);
    assert_eq!(parse_ranks("16..100").unwrap(), vec![16, 32, 64]);
    assert_eq!(parse_ranks("1,3, 10").unwrap(), vec![1, 3, 10]);
    assert_eq!(parse_ranks("1_000_000").unwrap(), vec![1_000_000]);
    for (bad, why) in [
        ("0..16", "at least 1"),
        ("0", "at least 1"),
        ("16,8", "strictly increasing"),
        ("16,16", "strictly increasing"),
        ("64..16", "increasing"),
        ("x", "not a rank count"),
    ] {
        let e = parse_ranks(bad).unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn the_command_line_is_typed_once_and_bad_values_are_refused_by_the_parser() {
    let a = PredictArgs::from_flags(&[
        "--trace",
        "t.jtr",
        "--sync",
        "none,once,phase,every:4",
        "--ranks",
        "16..64",
        "--quanta",
        "2ms",
        "--scale",
        "2",
        "--overhead",
        "3us",
        "--platform",
        "this",
    ])
    .unwrap();
    assert_eq!(
        a.sync.modes,
        vec![
            SyncMode::None,
            SyncMode::Once,
            SyncMode::Phase,
            SyncMode::Every(4)
        ]
    );
    assert_eq!(a.ranks.0, vec![16, 32, 64]);
    assert_eq!(a.quanta.ns, 2_000_000);
    assert_eq!(a.replay.scale.map(|s| s.get()), Some(2.0));
    assert_eq!(a.replay.overrides.overhead, Some(3_000));
    assert_eq!(a.platform, PlatformChoice::This);
    for (flags, why) in [
        (
            ["--sync", "none,sometimes"],
            "unknown sync mode 'sometimes'",
        ),
        (["--scale", "0"], "scale must be"),
        (["--fraction", "2"], "fraction must be"),
        (["--ranks", "16,8"], "strictly increasing"),
        (["--quanta", "0s"], "must be positive"),
    ] {
        let mut v = vec!["--trace", "t.jtr"];
        v.extend(flags);
        let e = PredictArgs::from_flags(&v).unwrap_err().to_string();
        assert!(e.contains(why), "{flags:?}: {e}");
    }
}

#[test]
fn the_walk_forced_by_timer_errors_is_said_with_how_to_get_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let s: jitter_trace::Spec = "poisson:rate=1000/s,dur=5us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&s, 1, 1_000_000_000, 1).unwrap();
    let path = dir.path().join("t.jtr");
    jitter_trace::write_trace(&path, &t).unwrap();
    let trace = path.display().to_string();
    let spec = |extra: &[&str]| {
        let mut flags = vec!["--trace", trace.as_str()];
        flags.extend(extra);
        prepare(&PredictArgs::from_flags(&flags).unwrap())
            .unwrap()
            .1
    };
    // The ideal platform's default replays the trace as recorded: no timer errors, the
    // index. Its itimer (an emulation's timer) draws errors of 20 us, which force the walk.
    assert!(walk_note(&spec(&[])).is_none());
    assert_eq!(spec(&[]).des.drift_sd_ns, 0.0);
    let n = walk_note(&spec(&["--timer", "itimer"])).expect("itimer walks");
    assert!(
        n.contains("--timer abstime") && n.contains("20.00 us"),
        "{n}"
    );
    assert!(walk_note(&spec(&["--timer", "abstime"])).is_none());
    assert!(walk_note(&spec(&["--model", "order-stats"])).is_none());
    // The walk asked for: nothing to say.
    let walk = PredictSpec {
        engine: des::Engine::Walk,
        ..spec(&[])
    };
    assert!(walk_note(&walk).is_none());
}

#[test]
fn a_trace_over_a_platform_adds_only_what_the_platform_does_not_already_lose() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, spec: &str| {
        let s: jitter_trace::Spec = spec.parse().unwrap();
        let t = jitter_trace::synth::synthesize(&s, 2, 4_000_000_000, 1).unwrap();
        let path = dir.path().join(name);
        jitter_trace::write_trace(&path, &t).unwrap();
        path.display().to_string()
    };
    let trace = write("t.jtr", "periodic:period=4ms,dur=120us");
    let same = write("same.jtr", "periodic:period=4ms,dur=120us");
    let other = write("other.jtr", "periodic:period=4ms,dur=120us,phase=2ms");
    let sd = |platform: Option<&str>| {
        let mut flags = vec![
            "--trace",
            &trace,
            "--ranks",
            "1,2",
            "--sync",
            "none,once",
            "--phases",
            "500",
            "--timer",
            "abstime",
        ];
        if let Some(p) = platform {
            flags.extend(["--platform-noise", p]);
        }
        let (traces, spec) = prepare(&PredictArgs::from_flags(&flags).unwrap()).unwrap();
        let des = predict(&Solo, &traces, &spec, &ProgressBar::hidden(), &|_| {})
            .unwrap()
            .des
            .unwrap();
        assert_eq!(
            des.config.predict.unwrap().platform_noise.is_some(),
            platform.is_some()
        );
        des.results
    };
    let alone = sd(None);
    // The platform loses exactly the trace's detours already: the trace adds nothing.
    for (a, b) in alone.iter().zip(sd(Some(&same))) {
        assert!(a.sd_qt_pct > 2.0, "{a:?}");
        assert_eq!((b.sd_qt_pct, b.sd_qtbt_pct), (0.0, 0.0), "{b:?}");
        assert!(b.baseline_avg_max_qt_ns > 1.02e6, "{b:?}");
    }
    // A platform whose detours fall between the trace's: one rank loses both, and the
    // slowdown against the platform alone is (1 − d/P) / (1 − 2d/P) − 1 = 3.19 % for d/P =
    // 3 % (the trace alone: 1 / (1 − d/P) − 1 = 3.09 %, which this tolerance excludes).
    let closed = 100.0 * (0.97 / 0.94 - 1.0);
    for b in sd(Some(&other)).iter().filter(|b| b.ranks == 1) {
        assert!((b.sd_qt_pct - closed).abs() < 0.03, "{b:?}");
    }
    let e = prepare(
        &PredictArgs::from_flags(&[
            "--trace",
            &trace,
            "--platform-noise",
            &same,
            "--timer",
            "itimer",
        ])
        .unwrap(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("--timer abstime"), "{e}");
}

#[test]
fn the_baseline_covers_the_stretch_of_platform_noise_the_trace_s_run_covers() {
    // One rank, sync once: the replay starts at the schedule's point o. Without the trace a
    // phase lasts q, so 1000 phases end at o + 1 s; with it about 3 % later. A 10 ms burst
    // of platform noise 1 ms past o + 1 s lies inside the trace's stretch only: a baseline
    // of 1000 phases would miss it and charge it to the trace (+1 pp).
    let dir = tempfile::tempdir().unwrap();
    let (q, phases, d) = (1_000_000u64, 1000u64, 4_000_000_000u64);
    let s: jitter_trace::Spec = "periodic:period=4ms,dur=120us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&s, 1, d, 1).unwrap();
    let trace = dir.path().join("t.jtr");
    jitter_trace::write_trace(&trace, &t).unwrap();
    let o = jitter_emulator::SyncSchedule {
        mode: SyncMode::Once,
        seed: 1,
    }
    .start_offset(0, d);
    let burst = (o + phases * q + 1_000_000) % (d - 20_000_000);
    let detour = |start_ns, run_ns| jitter_trace::Detour { start_ns, run_ns };
    let stream = jitter_trace::Stream::from_detours(0, 0, d, &[detour(burst, 10_000_000)]);
    let mut platform = t.clone();
    platform.streams = vec![stream.unwrap()];
    let bg = dir.path().join("bg.jtr");
    jitter_trace::write_trace(&bg, &platform).unwrap();
    let (trace, bg) = (trace.display().to_string(), bg.display().to_string());
    let flags = [
        "--trace",
        &trace,
        "--ranks",
        "1",
        "--sync",
        "once",
        "--phases",
        "1000",
        "--timer",
        "abstime",
        "--platform-noise",
        &bg,
    ];
    let (traces, spec) = prepare(&PredictArgs::from_flags(&flags).unwrap()).unwrap();
    let des = predict(&Solo, &traces, &spec, &ProgressBar::hidden(), &|_| {})
        .unwrap()
        .des
        .unwrap();
    let row = &des.results[0];
    // The trace alone: d/P over (1 − d/P) ≈ 3.09 %.
    assert!((row.sd_qt_pct - 3.09).abs() < 0.3, "{row:?}");
    assert!(row.baseline_avg_max_qt_ns > q as f64, "{row:?}");
}

#[test]
fn the_analytic_report_goes_beside_the_simulated_one() {
    assert_eq!(
        order_stats_path(Path::new("/x/r.json")),
        PathBuf::from("/x/r.order-stats.json")
    );
}

#[test]
fn a_trace_read_for_its_replayed_streams_prepares_as_the_whole_trace() {
    use jitter_emulator::PlanOptions;
    use jitter_predict::input::TraceInput;
    let spec: jitter_trace::Spec =
        "periodic:period=4ms,dur=120us+poisson:rate=20000/s,dur=exp:300ns"
            .parse()
            .unwrap();
    let mut t = jitter_trace::synth::synthesize(&spec, 3, 200_000_000, 4).unwrap();
    // A longer last stream: the common window of every plan is the whole trace's.
    let long = jitter_trace::synth::synthesize(&spec, 1, 300_000_000, 5).unwrap();
    t.streams[2] = jitter_trace::Stream {
        cpu: 2,
        ..long.streams[0].clone()
    };
    t.sync_header();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jtr");
    jitter_trace::write_trace(&path, &t).unwrap();
    let whole = jitter_trace::read_trace(&path).unwrap().trace;
    let opts = PlanOptions::ideal();
    for k in [1u64, 2, 3, 5] {
        let read = jitter_trace::read_replayed(&path, |i, _| (i as u64) < k).unwrap();
        let kept = (read.trace.streams.iter()).filter(|s| !s.records.is_empty());
        assert_eq!(kept.count() as u64, k.min(3));
        let a = TraceInput::new(&whole, "t.jtr", "t", opts, k).unwrap();
        let b = TraceInput::replayed(&read, "t.jtr", "t", opts, k).unwrap();
        assert_eq!(a.info, b.info, "k = {k}");
        assert_eq!(
            format!("{:?}", a.plans),
            format!("{:?}", b.plans),
            "k = {k}"
        );
    }
}
