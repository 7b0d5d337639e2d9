//! Tests of `replay-bench run`'s rules: phase counts within a day, the warning of phases

//! shorter than q, and the replay flags typed by the parser.

use super::results::faster_than_calibrated;
use crate::bench::baseline::Reference;
use crate::flags::run::RunArgs;
use jitter_emulator::{SyncMode, TimerKind};

#[test]
fn a_phase_count_that_would_run_beyond_a_day_is_refused() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }
    let args = |extra: &[&str]| {
        let argv = ["run"].iter().chain(extra).copied();
        Cmd::try_parse_from(argv).unwrap().run
    };
    args(&["--phases", "86000000"]).check_length().unwrap();
    let e = args(&["--phases", "86400000"]).check_length().unwrap_err();
    assert_eq!(
        e.to_string(),
        "20 warm-up and 86400000 measured phases of q = 1.00 ms at S = 1 last at least \
         86400.020 s, over the limit of 1d: fewer phases or a shorter --quanta"
    );
    // The scale counts: 1 000 000 phases of 1 ms at S = 100 last 27.8 h.
    assert!(args(&["--phases", "1000000", "--scale", "100"])
        .check_length()
        .is_err());
    assert!(args(&["--phases", "1000000"]).check_length().is_ok());
}

#[test]
fn phases_under_0_9_q_without_jitter_are_reported() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }
    let args = |extra: &[&str]| {
        let argv = ["run", "--quanta", "1ms"].iter().chain(extra).copied();
        Cmd::try_parse_from(argv).unwrap().run
    };
    let at = |q: f64| Reference {
        avg_max_qt_ns: q * 1e6,
        avg_max_qtbt_ns: q * 1e6,
    };
    let w = faster_than_calibrated(&args(&[]), &at(0.26)).unwrap();
    assert!(w.contains("0.26 × q"), "{w}");
    assert_eq!(faster_than_calibrated(&args(&[]), &at(0.95)), None);
    assert_eq!(faster_than_calibrated(&args(&[]), &at(1.3)), None);
    // `--baseline quanta` is q by definition: nothing measured to judge.
    let given = args(&["--baseline", "quanta"]);
    assert_eq!(faster_than_calibrated(&given, &at(0.26)), None);
}

#[test]
fn the_replay_flags_are_typed_by_the_parser() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }
    let c = Cmd::try_parse_from([
        "run",
        "--sync",
        "every:4",
        "--scale",
        "1000",
        "--fraction",
        "0.33",
        "--timer",
        "itimer",
        "--min-sleep",
        "50us",
    ])
    .unwrap();
    assert_eq!(c.run.sync, SyncMode::Every(4));
    let r = c.run.replay;
    assert_eq!(r.scale.map(|s| s.get()), Some(1000.0));
    assert_eq!(r.fraction.map(|f| f.get()), Some(0.33));
    assert_eq!(r.timer, Some(TimerKind::Itimer));
    assert_eq!(r.overrides.min_sleep, Some(50_000));
    for bad in [
        ["--sync", "sometimes"],
        ["--scale", "0"],
        ["--scale", "nan"],
        ["--scale", "1e300"],
        ["--scale", "1001"],
        ["--fraction", "1.5"],
        ["--fraction", "0"],
        ["--timer", "hpet"],
        ["--overhead", "11s"],
    ] {
        let argv = std::iter::once("run").chain(bad);
        assert!(Cmd::try_parse_from(argv).is_err(), "{bad:?}");
    }
}
