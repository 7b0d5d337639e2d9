//! Fidelity of the replay (paper 001 §IV-D): the collector's probe loop runs in the application's
//! place while the emulator replays a trace; the re-collected detours, divided by the scale S, are
//! compared with the source. Also the long-run drift of both timers.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use jitter_collect::clock::{read_counter, Clock};
use jitter_collect::probe;
use jitter_trace::compare::compare_streams;
use jitter_trace::table::Table;
use jitter_trace::{read_trace, Detour, Stats, Stream, Trace};

use crate::calibration::{
    default_threshold, match_single, periodic_stream, probe_detours, Calibration, Progress,
};
use crate::injector::{Emulator, InjectorConfig, InjectorStats, LoggedInjection};
use crate::plan::{Plan, PlanOptions, TimerKind, MAX_DETOUR_NS};
use crate::realtime::Watchdog;
use crate::setup::{Overrides, ReplaySetup, Scale};
use jitter_trace::summary::{mean, quantile};

/// Slack of the measuring watchdog over its longest legitimate burst: the set-up and tear-down
/// of one replay around the probe (plan, injector start and stop).
pub const WATCHDOG_MARGIN: Duration = Duration::from_secs(2);

/// The RLIMIT_RTTIME of a measuring run that probes `duration` at a time without sleeping
/// (`jitter-emulate` runs at SCHED_FIFO): the longest legitimate burst is one probe, plus one
/// planned injection still spinning at its end (at most `MAX_DETOUR_NS`), plus
/// [`WATCHDOG_MARGIN`]. Every burst starts after a short sleep (`rest`).
pub fn watchdog_limit(duration: Duration) -> Duration {
    duration + Duration::from_nanos(MAX_DETOUR_NS) + WATCHDOG_MARGIN
}

/// Arms the measuring watchdog ([`watchdog_limit`]) for this process.
fn arm_watchdog(duration: Duration) -> Result<Watchdog> {
    Watchdog::arm(watchdog_limit(duration))
        .context("cannot arm the real-time watchdog (RLIMIT_RTTIME)")
}

/// Arms the watchdog of a calibration with the default settings
/// ([`crate::calibration::longest_burst`] plus [`WATCHDOG_MARGIN`]) for this process.
pub fn arm_calibration_watchdog() -> Result<Watchdog> {
    let limit = crate::calibration::longest_burst(&crate::calibration::Settings::default());
    Watchdog::arm(limit + WATCHDOG_MARGIN)
        .context("cannot arm the real-time watchdog (RLIMIT_RTTIME)")
}

/// Blocks for a moment, so that the watchdog counts the next burst on its own (a real-time
/// thread's count restarts when it sleeps).
fn rest() {
    std::thread::sleep(Duration::from_millis(1));
}

/// What `jitter-emulate fidelity` measures.
#[derive(Debug, Clone)]
pub struct FidelityConfig {
    /// Trace to replay (.jtr).
    pub trace: PathBuf,
    /// Stream of the trace to replay.
    pub stream: usize,
    /// Whether to go on with a trace that lacks detours.
    pub salvage: jitter_trace::Salvage,
    /// Scale factors S, one row each.
    pub scale: Vec<Scale>,
    /// Timers, one row each per scale.
    pub timer: Vec<TimerKind>,
    /// Replay time per row (and for the baseline).
    pub duration: Duration,
    /// Timeline point to start from, trace ns from the window start.
    pub offset_ns: u64,
    /// Measure the calibration again instead of using the cache.
    pub recalibrate: bool,
    /// Leave detours longer than this out of the source and out of the noise ratios.
    pub drop_above: Option<Duration>,
    /// Also write all rows as JSON here.
    pub json: Option<PathBuf>,
    /// Write the replayed source window and every re-collected trace as .jtr files here.
    pub save: Option<PathBuf>,
    /// O, L and M given in place of the calibrated ones.
    pub overrides: Overrides,
}

/// The replay machine's own noise, seen by the probe without injection.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Baseline {
    /// Detours per second.
    pub detours_per_s: f64,
    /// Noise ratio.
    pub noise_ratio: f64,
    /// Median detour, ns.
    pub median_ns: u64,
    /// 99th percentile detour, ns.
    pub p99_ns: u64,
    /// Probe time, ns.
    #[serde(skip)]
    pub duration_ns: u64,
    /// Every detour's length, ns.
    #[serde(skip)]
    pub runs_ns: Vec<u64>,
}

impl Baseline {
    /// Noise ratio of the detours no longer than `cut_ns` (all without a cut).
    pub(crate) fn noise_ratio_up_to(&self, cut_ns: Option<u64>) -> f64 {
        match cut_ns {
            Some(cut) if self.duration_ns > 0 => {
                let t: u64 = self.runs_ns.iter().filter(|&&r| r <= cut).sum();
                t as f64 / self.duration_ns as f64
            }
            _ => self.noise_ratio,
        }
    }
}

/// One row of the fidelity table: one scale and one timer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FidelityRow {
    /// Scale factor S.
    pub scale: f64,
    /// Timer.
    pub timer: TimerKind,
    /// Plan options in force.
    pub options: PlanOptions,
    /// Source detours per trace second over the replayed window.
    pub source_rate: f64,
    /// Source detours above the floor (S·run > O) per trace second.
    pub source_injectable_rate: f64,
    /// Injections the plan makes per trace second (after drops and merges).
    pub planned_rate: f64,
    /// Re-collected detours per trace second (÷ S), platform noise included.
    pub got_rate: f64,
    /// Injections seen by the probe per trace second.
    pub matched_rate: f64,
    /// Source noise ratio over the window.
    pub source_noise_ratio: f64,
    /// Noise ratio the plan injects in this window (after drops and merges): the injectable
    /// noise.
    pub injectable_noise_ratio: f64,
    /// Re-collected noise ratio, platform noise included (stalls above the cut left out).
    pub got_noise_ratio: f64,
    /// The baseline's noise ratio under this row's cut (S × the stall cut, replay time).
    pub baseline_noise_ratio: f64,
    /// (got − baseline − injectable) / injectable.
    pub noise_ratio_error: f64,
    /// Share of the source noise time the plan injected.
    pub injected_share: f64,
    /// Seen − intended detour durations of the injections, replay ns.
    pub errors: DurationErrors,
    /// KS statistic, source vs re-collected, detours above the floor O/S (trace ns).
    pub ks_above_floor: f64,
    /// KL divergence D(source‖re-collected) of log run-times above the floor, nats.
    pub kl_above_floor: f64,
    /// KS statistic over all detours.
    pub ks_all: f64,
    /// The injector's own statistics.
    pub injector: InjectorStats,
}

/// The fidelity report: calibration in force, baseline, rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FidelityReport {
    /// Calibration used.
    pub calibration: Calibration,
    /// Replay time per row, ns.
    pub duration_ns: u64,
    /// Probe threshold, ns.
    pub threshold_ns: u64,
    /// The machine's own noise.
    pub baseline: Baseline,
    /// Stall cut of the noise ratios, trace ns (`--drop-above`).
    pub stall_cut_ns: Option<u64>,
    /// One row per timer and scale.
    pub rows: Vec<FidelityRow>,
}

/// Detours of one replay window of `plan`'s stream, in trace ns from `offset_ns`, unscaled.
pub(crate) fn source_window(
    trace: &Trace,
    stream: usize,
    offset_ns: u64,
    length_ns: u64,
) -> Result<Stream> {
    let plan = Plan::from_trace(trace, stream, PlanOptions::ideal())?;
    let mut d = Vec::new();
    for inj in plan.cursor(offset_ns) {
        if inj.due_ns >= length_ns {
            break;
        }
        let run = inj.span_ns.min(length_ns - inj.due_ns);
        d.push(Detour {
            start_ns: inj.due_ns,
            run_ns: run,
        });
    }
    Ok(Stream::from_detours(0, 0, length_ns, &d)?)
}

/// Re-collected probe detours (ticks) as a stream in trace time: ns since `first`, ÷ `scale`.
pub(crate) fn recollected(
    clock: &Clock,
    first: u64,
    detours: &[(u64, u64)],
    length_ns: u64,
    scale: f64,
) -> Result<Stream> {
    let d: Vec<Detour> = detours
        .iter()
        .filter(|&&(a, _)| a >= first)
        .map(|&(a, b)| {
            let s = (clock.ticks_to_ns(a - first) as f64 / scale) as u64;
            let e = (clock.ticks_to_ns(b - first) as f64 / scale) as u64;
            Detour {
                start_ns: s,
                run_ns: e - s,
            }
        })
        .filter(|d| d.end_ns() <= length_ns)
        .collect();
    Ok(Stream::from_detours(0, 0, length_ns, &d)?)
}

/// Keeps the detours of `s` longer than `floor_ns`.
pub(crate) fn above(s: &Stream, floor_ns: f64) -> Result<Stream> {
    let d: Vec<Detour> = s
        .records
        .iter()
        .filter(|r| r.run_ns as f64 > floor_ns)
        .map(|r| r.detour())
        .collect();
    Ok(Stream::from_detours(s.cpu, s.begin_ns, s.end_ns, &d)?)
}

/// Errors of the injected durations: seen − intended, replay ns.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct DurationErrors {
    /// Signed median over injections alone in their detour.
    pub median_ns: f64,
    /// 90th percentile of |error|.
    pub abs_p90_ns: f64,
    /// 99th percentile of |error|.
    pub abs_p99_ns: f64,
    /// Injections alone in their detour (the sample).
    pub single: u64,
    /// Injections that ran back to back with others after a stall (left out).
    pub stacked: u64,
    /// Injections the probe did not see.
    pub unmatched: u64,
}

/// Signed median and |·| p90/p99 of seen − intended, over injections alone in their detour.
pub(crate) fn duration_errors(
    clock: &Clock,
    log: &[LoggedInjection],
    detours: &[(u64, u64)],
) -> DurationErrors {
    let m = match_single(log, detours);
    let mut signed: Vec<f64> = m
        .single
        .iter()
        .map(|&(i, (a, b))| clock.ticks_to_ns_f64(b - a) - log[i].span_ns as f64)
        .collect();
    let mut abs: Vec<f64> = signed.iter().map(|e| e.abs()).collect();
    signed.sort_by(f64::total_cmp);
    abs.sort_by(f64::total_cmp);
    DurationErrors {
        median_ns: quantile(&signed, 0.5),
        abs_p90_ns: quantile(&abs, 0.9),
        abs_p99_ns: quantile(&abs, 0.99),
        single: m.single.len() as u64,
        stacked: m.stacked,
        unmatched: m.unmatched,
    }
}

/// Measures the replay machine's own noise for `duration_ns`.
pub fn baseline(clock: &Clock, threshold: u64, duration_ns: u64) -> Baseline {
    let (d, _) = probe_detours(clock, threshold, duration_ns, 4_000_000);
    let runs = || d.iter().map(|&(a, b)| clock.ticks_to_ns(b - a));
    let s = Stats::from_runs(runs(), duration_ns);
    Baseline {
        detours_per_s: s.detours_per_s,
        noise_ratio: s.noise_ratio,
        median_ns: s.median_ns,
        p99_ns: s.p99_ns,
        duration_ns,
        runs_ns: runs().collect(),
    }
}

/// How the application-side probe runs: counter clock, threshold (ticks), replay time (ns).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProbeSetup {
    /// Counter clock.
    pub clock: Clock,
    /// Detour threshold, ticks.
    pub threshold: u64,
    /// Replay time, ns.
    pub duration_ns: u64,
    /// Detours longer than this (trace ns; S times as long in replay time) are stalls of the
    /// probe itself, e.g. RT throttling, and count in no noise ratio; the source is cut alike.
    pub stall_cut_ns: Option<u64>,
}

/// Replays stream `index` of `trace` with `opts` under the probe: one row, the source window
/// and the re-collected stream.
pub(crate) fn fidelity_row(
    trace: &Trace,
    index: usize,
    offset_ns: u64,
    opts: PlanOptions,
    probe: &ProbeSetup,
    base: &Baseline,
) -> Result<(FidelityRow, Stream, Stream)> {
    let (clock, threshold, duration_ns) = (&probe.clock, probe.threshold, probe.duration_ns);
    let s = opts.scale;
    let plan = Plan::from_trace(trace, index, opts)?;
    let window = (duration_ns as f64 / s) as u64;
    let src = source_window(trace, index, offset_ns, window)?;
    let floor = opts.overhead_ns as f64 / s;
    let src_above = above(&src, floor)?;
    let cap = src.records.len() + 64;
    let cfg = InjectorConfig {
        timer: opts.timer,
        clock: *clock,
    };
    rest();
    let handle = Emulator::start_logged(plan.cursor(offset_ns), cfg, cap)?;
    let first = read_counter();
    let (detours, _) = probe_detours(clock, threshold, duration_ns, 4 * cap + 2_000_000);
    let (istats, log) = handle.stop_logged()?;
    rest();
    let got = recollected(clock, first, &detours, window, s)?;
    let got_above = above(&got, floor)?;
    let errors = duration_errors(clock, &log, &detours);
    let secs = window as f64 / 1e9;
    let matched = log.len() as u64 - errors.unmatched;
    let cmp_above = compare_streams(
        std::slice::from_ref(&src_above),
        std::slice::from_ref(&got_above),
    );
    let cmp_all = compare_streams(std::slice::from_ref(&src), std::slice::from_ref(&got));
    // What the plan means to inject in this window (after drops and merges), replay time.
    let (planned, planned_ns) = plan
        .cursor(offset_ns)
        .take_while(|i| i.due_ns < duration_ns)
        .fold((0u64, 0u64), |(n, t), i| {
            (n + 1, t + i.span_ns.min(duration_ns - i.due_ns))
        });
    let injectable_noise_ratio = planned_ns as f64 / duration_ns as f64;
    let cut = probe.stall_cut_ns;
    let got_noise_ns: u64 = got
        .records
        .iter()
        .map(|r| r.run_ns)
        .filter(|&r| cut.is_none_or(|c| r <= c))
        .sum();
    let got_noise_ratio = got_noise_ns as f64 / window as f64;
    let base_noise_ratio = base.noise_ratio_up_to(cut.map(|c| (c as f64 * s) as u64));
    let row = FidelityRow {
        scale: s,
        timer: opts.timer,
        options: opts,
        source_rate: src.records.len() as f64 / secs,
        source_injectable_rate: src_above.records.len() as f64 / secs,
        planned_rate: planned as f64 / secs,
        got_rate: got.records.len() as f64 / secs,
        matched_rate: matched as f64 / secs,
        source_noise_ratio: src.noise_ns() as f64 / window as f64,
        injectable_noise_ratio,
        got_noise_ratio,
        baseline_noise_ratio: base_noise_ratio,
        noise_ratio_error: if injectable_noise_ratio > 0.0 {
            (got_noise_ratio - base_noise_ratio - injectable_noise_ratio) / injectable_noise_ratio
        } else {
            f64::NAN
        },
        injected_share: istats.plan.injected_share(),
        errors,
        ks_above_floor: cmp_above.ks_statistic,
        kl_above_floor: cmp_above.kl_divergence,
        ks_all: cmp_all.ks_statistic,
        injector: istats,
    };
    Ok((row, src, got))
}

fn save_stream(dir: &std::path::Path, name: &str, s: Stream, label: &str) -> Result<()> {
    let mut t = Trace {
        streams: vec![s],
        ..Trace::default()
    };
    t.header.labels.insert("fidelity".into(), label.into());
    t.sync_header();
    let p = dir.join(name);
    jitter_trace::write_trace(&p, &t).with_context(|| format!("cannot write {}", p.display()))
}

/// Prints the fidelity table.
pub(crate) fn print_report(r: &FidelityReport) {
    println!(
        "baseline (no injection, {:.0} s): {:.0} detours/s, noise ratio {:.3} %, median {:.2} µs, p99 {:.2} µs",
        r.duration_ns as f64 / 1e9,
        r.baseline.detours_per_s,
        100.0 * r.baseline.noise_ratio,
        r.baseline.median_ns as f64 / 1e3,
        r.baseline.p99_ns as f64 / 1e3
    );
    if let Some(cut) = r.stall_cut_ns {
        println!(
            "noise ratios leave out detours longer than S × {:.3} ms (replay time): the probe's \
             own stalls",
            cut as f64 / 1e6
        );
    }
    let mut table = Table::new([
        "S", "timer", "O µs", "src/s", ">floor/s", "plan/s", "got/s", "seen/s", "nr src%",
        "nr inj%", "nr base%", "nr got%", "nr err%", "share", "err50", "|e|90", "|e|99", "KS>",
        "KL>", "KSall", "late µs", "drift",
    ]);
    for w in &r.rows {
        table.row([
            w.scale.to_string(),
            w.timer.to_string(),
            format!("{:.1}", w.options.overhead_ns as f64 / 1e3),
            format!("{:.0}", w.source_rate),
            format!("{:.0}", w.source_injectable_rate),
            format!("{:.0}", w.planned_rate),
            format!("{:.0}", w.got_rate),
            format!("{:.0}", w.matched_rate),
            format!("{:.3}", 100.0 * w.source_noise_ratio),
            format!("{:.3}", 100.0 * w.injectable_noise_ratio),
            format!("{:.3}", 100.0 * w.baseline_noise_ratio),
            format!("{:.3}", 100.0 * w.got_noise_ratio),
            format!("{:+.1}", 100.0 * w.noise_ratio_error),
            format!("{:.1}%", 100.0 * w.injected_share),
            format!("{:+.2}", w.errors.median_ns / 1e3),
            format!("{:.2}", w.errors.abs_p90_ns / 1e3),
            format!("{:.2}", w.errors.abs_p99_ns / 1e3),
            format!("{:.3}", w.ks_above_floor),
            format!("{:.3}", w.kl_above_floor),
            format!("{:.3}", w.ks_all),
            format!("{:.1}", w.injector.lateness_mean_ns / 1e3),
            format!("{:.1}", w.injector.drift_ns as f64 / 1e3),
        ]);
    }
    print!("{table}");
    println!(
        "rates per trace second (re-collected ÷ S); >floor = source detours with S·run > O; plan = \
         injections after drops and merges; seen = injections the probe saw; nr inj = noise the \
         plan injects; nr err = (got − baseline − inj) / inj; err = seen − intended detour of \
         injections alone in their detour, replay µs; KS>/KL> over detours above O/S; late = \
         mean handler lateness, drift = lateness of the last injection, µs"
    );
}

/// `jitter-emulate fidelity`.
pub fn run_fidelity(a: &FidelityConfig, progress: &dyn Progress) -> Result<()> {
    // The outputs, checked before a minute of measurement (jitter_trace::output's rules).
    if let Some(p) = &a.json {
        jitter_trace::output::check_output(p, "--json", "a JSON table", &["json"])?;
    }
    if let Some(d) = a.save.as_ref().filter(|d| d.exists() && !d.is_dir()) {
        bail!("--save {} is not a folder", d.display());
    }
    let loaded =
        read_trace(&a.trace).with_context(|| format!("cannot read {}", a.trace.display()))?;
    let name = a.trace.display().to_string();
    loaded.accept(&name, a.salvage)?;
    for w in loaded.warnings() {
        eprintln!("warning: {name}: {w}");
    }
    let mut trace = loaded.trace;
    if let Some(max) = a.drop_above {
        let max = max.as_nanos() as u64;
        for st in &mut trace.streams {
            let kept: Vec<Detour> = st
                .records
                .iter()
                .filter(|r| r.run_ns <= max)
                .map(|r| r.detour())
                .collect();
            let removed = st.records.len() - kept.len();
            *st = Stream::from_detours(st.cpu, st.begin_ns, st.end_ns, &kept)?;
            eprintln!("left {removed} detours longer than {max} ns out of the source");
        }
    }
    // Refuse a bad stream index or an empty stream before measuring anything.
    Plan::from_trace(&trace, a.stream, PlanOptions::ideal())?;
    let clock = jitter_collect::clock::Clock::for_tools()?;
    // One watchdog for the calibration (when it runs) and the measurement: the measurement's
    // bound is the larger (`watchdog_limit` ≥ 12 s > `calibration::longest_burst` + margin).
    let _watchdog = arm_watchdog(a.duration)?;
    let cal = Calibration::load_or_measure(&clock, a.recalibrate, progress)?;
    let threshold = default_threshold();
    let duration_ns = a.duration.as_nanos() as u64;
    eprintln!("measuring the machine's own noise for {:?} ...", a.duration);
    rest();
    let base = baseline(&clock, threshold, duration_ns);
    rest();
    let mut rows = Vec::new();
    for &timer in &a.timer {
        for &s in &a.scale {
            let opts = ReplaySetup {
                scale: s,
                cost: cal.cost(timer, &a.overrides),
                ..ReplaySetup::default()
            }
            .plan_options();
            eprintln!("replaying at S = {s} with {timer:?} ...");
            let (row, src, got) = fidelity_row(
                &trace,
                a.stream,
                a.offset_ns,
                opts,
                &ProbeSetup {
                    clock,
                    threshold,
                    duration_ns,
                    stall_cut_ns: a.drop_above.map(|d| d.as_nanos() as u64),
                },
                &base,
            )?;
            if let Some(dir) = &a.save {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                let t = timer.to_string();
                save_stream(dir, &format!("source-S{s}-{t}.jtr"), src, "source")?;
                save_stream(
                    dir,
                    &format!("recollected-S{s}-{t}.jtr"),
                    got,
                    "recollected",
                )?;
            }
            rows.push(row);
        }
    }
    let report = FidelityReport {
        calibration: cal,
        duration_ns,
        threshold_ns: clock.ticks_to_ns(threshold),
        baseline: base,
        stall_cut_ns: a.drop_above.map(|d| d.as_nanos() as u64),
        rows,
    };
    print_report(&report);
    if let Some(p) = &a.json {
        jitter_trace::output::write_output_bytes(
            p,
            serde_json::to_string_pretty(&report)?.as_bytes(),
        )?;
    }
    Ok(())
}

/// What `jitter-emulate drift` measures.
#[derive(Debug, Clone)]
pub struct DriftConfig {
    /// Replay time per timer.
    pub duration: Duration,
    /// Period of the periodic trace replayed, µs.
    pub period_us: u64,
    /// Detour length of the periodic trace, µs.
    pub run_us: u64,
    /// Timers, one row each.
    pub timer: Vec<TimerKind>,
    /// O, L and M given in place of the calibrated ones.
    pub overrides: Overrides,
}

/// Drift of one timer: lateness against the plan at the start and at the end of a long replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// Timer.
    pub timer: TimerKind,
    /// Injections.
    pub injected: u64,
    /// Mean lateness of the first 100 injections, ns.
    pub first_ns: f64,
    /// Mean lateness of the last 100 injections, ns.
    pub last_ns: f64,
    /// Largest lateness, ns.
    pub max_ns: u64,
}

/// Replays a periodic trace for `duration_ns` with `opts` while the probe loop runs; the drift.
pub(crate) fn measure_drift(
    clock: &Clock,
    opts: PlanOptions,
    period_ns: u64,
    run_ns: u64,
    duration_ns: u64,
) -> Result<Drift> {
    check_periodic(period_ns, run_ns)?;
    let count = duration_ns / period_ns + 2;
    let plan = Plan::new(&periodic_stream(period_ns, run_ns, count), opts)?;
    let cfg = InjectorConfig {
        timer: opts.timer,
        clock: *clock,
    };
    rest();
    let handle = Emulator::start_logged(plan.cursor(0), cfg, count as usize)?;
    let stop = AtomicBool::new(false);
    probe::run(
        u64::MAX,
        read_counter() + clock.ns_to_ticks(duration_ns),
        &stop,
        |_, _| std::ops::ControlFlow::Continue(()),
    );
    let (st, log) = handle.stop_logged()?;
    rest();
    let mean_lateness = |s: &[LoggedInjection]| {
        mean(&s.iter().map(|l| l.lateness_ns as f64).collect::<Vec<_>>()).unwrap_or(0.0)
    };
    let k = log.len().min(100);
    Ok(Drift {
        timer: opts.timer,
        injected: st.injected,
        first_ns: mean_lateness(&log[..k]),
        last_ns: mean_lateness(&log[log.len() - k..]),
        max_ns: st.lateness_max_ns,
    })
}

/// Checks a periodic trace's shape for [`measure_drift`]: 0 < run < period ≤ 10 s.
pub(crate) fn check_periodic(period_ns: u64, run_ns: u64) -> Result<()> {
    if period_ns == 0 || period_ns > crate::plan::MAX_DETOUR_NS {
        bail!(
            "--period-us must be in 1..=10000000 (10 s), got {}",
            period_ns / 1_000
        );
    }
    if run_ns == 0 || run_ns >= period_ns {
        bail!(
            "--run-us must be at least 1 and shorter than --period-us ({} µs), got {}",
            period_ns / 1_000,
            run_ns / 1_000
        );
    }
    Ok(())
}

/// `jitter-emulate drift`.
pub fn run_drift(a: &DriftConfig, progress: &dyn Progress) -> Result<()> {
    check_periodic(
        a.period_us.saturating_mul(1_000),
        a.run_us.saturating_mul(1_000),
    )?;
    let clock = jitter_collect::clock::Clock::for_tools()?;
    let _watchdog = arm_watchdog(a.duration)?;
    let cal = Calibration::load_or_measure(&clock, false, progress)?;
    let mut table = Table::new(["timer", "injected", "first100 µs", "last100 µs", "max µs"]);
    for &timer in &a.timer {
        let name = timer.to_string();
        eprintln!("drift: {name} for {:?}", a.duration);
        let opts = ReplaySetup {
            cost: cal.cost(timer, &a.overrides),
            ..ReplaySetup::default()
        }
        .plan_options();
        let d = measure_drift(
            &clock,
            opts,
            a.period_us * 1_000,
            a.run_us * 1_000,
            a.duration.as_nanos() as u64,
        )?;
        table.row([
            name,
            d.injected.to_string(),
            format!("{:.1}", d.first_ns / 1e3),
            format!("{:.1}", d.last_ns / 1e3),
            format!("{:.1}", d.max_ns as f64 / 1e3),
        ]);
    }
    print!("{table}");
    println!(
        "lateness = handler entry − due time on the plan's timeline; drift = last100 − first100"
    );
    Ok(())
}
