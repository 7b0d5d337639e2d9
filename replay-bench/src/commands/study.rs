//! The entry points of `replay-bench study` (a demo folder into `report.md` and its
//! headlines), `replay-bench choose-scale` (the smallest S that makes a share of a trace's
//! detours injectable here) and `replay-bench choose-inject` (signal or payment at calls).

use anyhow::bail;
use jitter_trace::stats::{injectability, scale_for_share};
use jitter_trace::units::format_ns;

use crate::flags::study::{ChooseInjectArgs, ChooseScaleArgs, StudyArgs};
use jitter_report::study::{load_trace, read_calibration, write_study, StudyRequest};

/// `replay-bench study`: writes report.md and headlines.json into the folder and prints the
/// headlines.
pub fn study(args: &StudyArgs) -> anyhow::Result<()> {
    let request = StudyRequest {
        dir: args.dir.clone(),
        report: args.report.clone(),
        headline_ranks: args.headline_ranks,
        salvage: args.salvage.choice(),
    };
    for l in &write_study(&request)?.lines {
        println!("{l}");
    }
    Ok(())
}

/// `replay-bench choose-scale`: prints the smallest integer S that makes `share` of the detours
/// injectable with the calibrated overhead, capped at `max`.
pub(crate) fn choose_scale(args: &ChooseScaleArgs) -> anyhow::Result<()> {
    let top = jitter_emulator::plan::MAX_SCALE;
    if args.max < 1 || args.max as f64 > top {
        bail!("--max must be in 1..={top}, got {}", args.max);
    }
    let (trace, _) = load_trace(&args.trace, args.salvage.choice())?;
    jitter_trace::stats::require_detours(
        &args.trace.display().to_string(),
        trace.record_count() as u64,
        "no scale makes any of them injectable (nothing to choose); give a trace with detours",
    )?;
    let cal = read_calibration(&args.calibration)?;
    let o = cal.timer(args.timer).overhead.median_ns.max(0.0);
    let choice = scale_for_share(&trace.streams, o, args.share)?;
    let need = match choice {
        Some(c) => Some(c.integer.max(1)).filter(|&i| i <= args.max),
        None => None,
    };
    let s = match need {
        Some(s) => s,
        None => {
            // Raising --max helps only where the scale needed is one a replay accepts.
            let (why, raise) = match choice {
                Some(c) if c.integer as f64 <= top => (
                    format!("S = {} is needed", c.integer),
                    format!("raise --max to {}, ", c.integer),
                ),
                Some(c) => (
                    format!(
                        "S = {} is needed, beyond the largest scale a replay accepts ({top})",
                        c.integer
                    ),
                    String::new(),
                ),
                None => (
                    "no scale reaches it (too many zero run-times)".into(),
                    String::new(),
                ),
            };
            let msg = format!(
                "--max {} does not make {:.1} % of the detours injectable with O = {}: {why}; \
                 {raise}lower --share, or pass --allow-capped to use S = {} anyway",
                args.max,
                args.share * 100.0,
                format_ns(o),
                args.max
            );
            if !args.allow_capped {
                bail!("{msg}");
            }
            eprintln!("warning: {msg}");
            args.max
        }
    };
    let cover = injectability(&trace.streams, o, s as f64)?;
    eprintln!(
        "choose-scale: O = {}, S = {s} makes {:.1} % of the detours ({:.1} % of the noise time) injectable",
        format_ns(o),
        cover.detours * 100.0,
        cover.noise * 100.0
    );
    println!("{s}");
    Ok(())
}

/// `replay-bench choose-inject`: prints `signal` or `boundary` by the rule of
/// [`jitter_emulator::InjectionChoice`] for this trace and the calibrated signal cost, and why
/// on stderr.
pub(crate) fn choose_inject(args: &ChooseInjectArgs) -> anyhow::Result<()> {
    let (trace, _) = load_trace(&args.trace, args.salvage.choice())?;
    let cal = read_calibration(&args.calibration)?;
    let o = cal.timer(args.timer).overhead.median_ns.max(0.0);
    let choice = jitter_emulator::InjectionChoice::for_streams(&trace.streams, o)?;
    eprintln!("choose-inject: {}", choice.reason());
    println!("{}", choice.mode);
    Ok(())
}
