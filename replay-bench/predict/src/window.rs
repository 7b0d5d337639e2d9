//! Like with like: the prediction of the stretches of a trace that one real run replayed.
//!
//! `replay-bench run` records where each rank's replay started each measured stretch of jitter
//! (`report::ReplayedWindows`: one window per jitter block of a complete pair of the paired
//! design). `predict --windows-of RUN.json` replays the same windows in virtual time, with the
//! run's ranks, sync mode, seed, quanta, scale, fraction, timer and platform (the run's own
//! calibration; the barrier stage from the run when it had two ranks or more): every window
//! starts at the run's points ([`RunWindow`]) for the run's phases per window and resyncs where
//! the run's schedule did, so the prediction and the run replay the same detours. The check that
//! they did: the injections of the two, equal within a tolerance derived from how much the
//! covered stretches can differ ([`InjectionCheck`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use jitter_emulator::{Fraction, Scale, SyncMode};

use indicatif::ProgressBar;

use super::input::TraceInput;
use super::platform::PlatformChoice;
use super::prediction::{Point, TraceIndexes};
use super::prediction_report::{
    check_plausible, config, des_row, platform_calibration, Prediction,
};
use super::prepare::prepare;
use super::rank_layout::RunWindow;
use super::request::PredictRequest;
use super::simulation::{pool, DesConfig, DesOutcome};
use super::spec::Model;
use super::spec::PredictSpec;
use jitter_report::report::{
    InjectionCheck, ReplayedWindows, Report, ReportKind, ResultRow, TraceInfo, WindowsOf,
};

/// A run's report with the windows it replayed.
#[derive(Debug, Clone)]
pub struct RunWindows {
    /// The report's path.
    pub path: PathBuf,
    /// The run's report.
    pub run: Report,
    /// Its measured row.
    pub row: ResultRow,
    /// Its windows.
    pub windows: ReplayedWindows,
    /// Its sync mode.
    pub mode: SyncMode,
}

impl RunWindows {
    /// Reads the report of a real run and its windows.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let run = Report::load(path)?;
        anyhow::ensure!(
            run.kind == ReportKind::Run,
            "{} is not the report of a real run (`replay-bench run`): it replayed no windows",
            path.display()
        );
        let windows = (run.config.run.as_ref())
            .and_then(|d| d.windows.clone())
            .with_context(|| {
                format!(
                    "{} records no windows of the trace (a run without a trace, with virtual \
                     ranks, or written by an older version): re-run it",
                    path.display()
                )
            })?;
        anyhow::ensure!(
            !windows.windows.is_empty() && windows.phases_per_window > 0,
            "{} measured no complete window of jitter (no complete block pair): lengthen its \
             --period",
            path.display()
        );
        let row = run
            .results
            .first()
            .cloned()
            .with_context(|| format!("{} holds no result", path.display()))?;
        let mode: SyncMode = row
            .sync
            .parse()
            .map_err(|e| anyhow::anyhow!("{}: sync `{}`: {e}", path.display(), row.sync))?;
        Ok(RunWindows {
            path: path.to_path_buf(),
            run,
            row,
            windows,
            mode,
        })
    }

    /// How long a phase of work lasted in the run's baseline blocks, ns: its mean (largest over
    /// ranks) compute phase, the work q and the machine's own noise in it, which the windows'
    /// prediction simulates as its q. The run's SD is an added time over that baseline, so a
    /// prediction at the nominal q overstates every SD by their ratio; for an added time that
    /// does not grow with the phase (a resync landing inside a long detour) nothing else
    /// corrects it. The nominal q where the run recorded no usable baseline.
    fn phase_of_work_ns(&self) -> u64 {
        let measured = self.row.baseline_avg_max_qt_ns;
        if measured.is_finite() && measured >= 1.0 {
            measured.round() as u64
        } else {
            self.run.config.quanta_ns
        }
    }

    /// `base` with the run's configuration: its ranks, mode, phase of work, seed, ranks per node,
    /// S, f, timer and platform (the run's own report), the barrier stage from it with two
    /// ranks or more (unless given).
    pub fn request(&self, base: &PredictRequest) -> anyhow::Result<PredictRequest> {
        let c = &self.run.config;
        let mut a = base.clone();
        a.ranks = vec![self.row.ranks];
        a.modes = vec![self.mode];
        a.quanta_ns = self.phase_of_work_ns();
        a.phases = self.windows.phases_per_window;
        a.ranks_per_node = (c.ranks_per_node as u64).max(1);
        a.seed = c.seed;
        a.model = Model::Des;
        a.platform = PlatformChoice::File(self.path.clone());
        a.replay.scale = Some(Scale::new(c.scale)?);
        a.replay.fraction = Some(Fraction::new(c.fraction)?);
        a.replay.timer = Some(c.timer);
        if a.barrier_stage_ns.is_none() && a.calibrate_from.is_none() && self.row.ranks >= 2 {
            a.calibrate_from = Some(self.path.clone());
        }
        Ok(a)
    }

    /// Refuses a trace other than the one the run replayed: its streams, and the noise and
    /// rate of the streams the run replayed (the first `ranks_per_node`), as the run's report
    /// describes them.
    pub fn check_trace(&self, path: &Path, salvage: jitter_trace::Salvage) -> anyhow::Result<()> {
        let Some(ran) = &self.run.config.trace else {
            anyhow::bail!("{} replayed no trace", self.path.display());
        };
        let loaded = jitter_trace::read_trace(path)
            .with_context(|| format!("cannot read trace {}", path.display()))?;
        loaded.accept(&path.display().to_string(), salvage)?;
        let trace = loaded.trace;
        // By content where the run's report holds its digest.
        if let Some(d) = &ran.digest {
            let here = jitter_trace::digest::content_digest(&trace);
            anyhow::ensure!(
                *d == here,
                "{} replayed {} (content digest {d}), not {} ({here}): a prediction of its \
                 windows needs its trace",
                self.path.display(),
                ran.path,
                path.display()
            );
            return Ok(());
        }
        let k = self
            .run
            .config
            .ranks_per_node
            .max(1)
            .min(trace.streams.len());
        let stats = jitter_trace::stats::Stats::of_streams(&trace.streams[..k]);
        let info = TraceInfo {
            path: path.display().to_string(),
            streams: trace.streams.len(),
            noise_ratio: stats.noise_ratio,
            detours_per_s: stats.detours_per_s,
            ..TraceInfo::default()
        };
        let same = ran.streams == info.streams
            && ran.noise_ratio.to_bits() == info.noise_ratio.to_bits()
            && ran.detours_per_s.to_bits() == info.detours_per_s.to_bits();
        anyhow::ensure!(
            same,
            "{} replayed {} ({} streams, noise {:.4} %, {:.1} detours/s), not {} ({} streams, \
             noise {:.4} %, {:.1} detours/s): a prediction of its windows needs its trace",
            self.path.display(),
            ran.path,
            ran.streams,
            ran.noise_ratio * 100.0,
            ran.detours_per_s,
            info.path,
            info.streams,
            info.noise_ratio * 100.0,
            info.detours_per_s
        );
        Ok(())
    }
}

/// The prediction of a run's windows.
#[derive(Debug, Clone)]
pub struct WindowsPredicted {
    /// One outcome of all their phases.
    pub outcome: DesOutcome,
    /// Trace time each window covered, summed over ranks, ns.
    pub covered_ns: Vec<f64>,
    /// The predicted SD of each window, percent, [eq. 2, eq. 3] (their mean is the pooled
    /// outcome's: every window has the same phases and baseline).
    pub sd_pct: Vec<[f64; 2]>,
}

/// Simulates the run's windows of `input` (the spec from [`RunWindows::request`]).
pub fn simulate(
    input: &TraceInput,
    spec: &PredictSpec,
    w: &RunWindows,
) -> anyhow::Result<WindowsPredicted> {
    anyhow::ensure!(
        input.background.is_none(),
        "--windows-of replays the run's trace alone (--platform-noise is not modelled there)"
    );
    let ranks = w.row.ranks;
    let indexes = TraceIndexes::of(input, spec);
    let quiet = ProgressBar::hidden();
    let point = Point {
        comm: &crate::comm::Solo,
        input,
        indexes: &indexes,
        ranks,
        mode: w.mode,
        progress: &quiet,
    };
    let mut pooled = None;
    let mut covered_ns = Vec::with_capacity(w.windows.windows.len());
    let mut sd_pct = Vec::with_capacity(w.windows.windows.len());
    for (i, win) in w.windows.windows.iter().enumerate() {
        anyhow::ensure!(
            win.points_ns.len() as u64 == ranks,
            "{}: window {i} holds {} start points for {ranks} ranks",
            w.path.display(),
            win.points_ns.len()
        );
        // Every rank from its own point (the ranks of a node share its timeline, copies of the
        // trace have their own: as the run placed them).
        let points_ns = win.points_ns.clone();
        let cfg = DesConfig {
            phases: w.windows.phases_per_window,
            window: Some(Arc::new(RunWindow {
                phase: win.phase,
                points_ns,
            })),
            ..spec.des.clone()
        };
        let out = point.simulate(&cfg, false)?;
        anyhow::ensure!(
            !out.stopped_by_fraction,
            "window {i} of {} reached the fraction f = {} in the prediction, not in the run",
            w.path.display(),
            spec.platform.options().fraction
        );
        covered_ns.push(out.mean_period_ns * out.averages.phases as f64 * ranks as f64);
        let row = des_row("", ranks, w.mode, &out);
        sd_pct.push([row.sd_qtbt_pct, row.sd_qt_pct]);
        pool(&mut pooled, out);
    }
    Ok(WindowsPredicted {
        outcome: pooled.context("the run has no window")?,
        covered_ns,
        sd_pct,
    })
}

/// The injections of the run's windows against those of `out`, their prediction, with the
/// trace's rate, noise and longest detour (`max_run_ns`, unscaled) and the scale `s`: the two
/// cover stretches that differ by the difference of their phase periods over all phases (ΔT,
/// trace time), which holds about `rate · ΔT` detours (the rate the denser of the trace's and
/// the run's own: the run's longer stretches come from its injections, so they lie where its
/// detours are; a count that varies as a Poisson one does: three standard deviations,
/// `3 √(rate · ΔT)`, are allowed beside it) and `noise · ΔT`
/// of their time, and each window may end inside a detour in one and not in the other (one
/// detour per rank and window at each end, at most the trace's longest).
pub(crate) fn injection_check(
    w: &RunWindows,
    p: &WindowsPredicted,
    info: &TraceInfo,
    max_run_ns: u64,
    s: f64,
) -> InjectionCheck {
    let wins = &w.windows.windows;
    let run_injected = wins.iter().map(|x| x.injected).sum::<u64>();
    let run_injected_ns = wins.iter().map(|x| x.injected_ns).sum::<u64>();
    // The trace time each covered (the run's window lengths are replay time, S × trace time).
    let run_covered: Vec<f64> = wins.iter().map(|x| x.span_ns as f64 / s).collect();
    let delta_trace_ns: f64 = (run_covered.iter().zip(&p.covered_ns))
        .map(|(a, b)| (a - b).abs())
        .sum();
    let boundaries = wins.len() as f64 * w.row.ranks as f64;
    let run_covered_ns: f64 = run_covered.iter().sum();
    let run_rate = if run_covered_ns > 0.0 {
        run_injected as f64 * 1e9 / run_covered_ns
    } else {
        0.0
    };
    let in_delta = info.detours_per_s.max(run_rate) * delta_trace_ns / 1e9;
    let tolerance = in_delta + 3.0 * in_delta.sqrt() + 2.0 * boundaries;
    let tolerance_ns =
        s * (info.noise_ratio * delta_trace_ns + 2.0 * boundaries * max_run_ns as f64);
    let (pi, pn) = (p.outcome.emulator.injected, p.outcome.emulator.injected_ns);
    let agrees = (run_injected.abs_diff(pi) as f64) <= tolerance
        && (run_injected_ns.abs_diff(pn) as f64) <= tolerance_ns;
    InjectionCheck {
        run_injected,
        predicted_injected: pi,
        tolerance,
        run_injected_ns,
        predicted_injected_ns: pn,
        tolerance_ns,
        run_covered_ns,
        predicted_covered_ns: p.covered_ns.iter().sum(),
        agrees,
    }
}

/// A run's windows predicted: the row, the check of the injections and the report.
#[derive(Debug, Clone)]
pub struct RunPrediction {
    /// The run and its windows.
    pub run: RunWindows,
    /// The predicted row (the run's ranks and mode).
    pub row: ResultRow,
    /// The injections of both.
    pub check: InjectionCheck,
    /// The prediction's report (its row and [`WindowsOf`]).
    pub report: Report,
    /// The scale S of both.
    pub scale: f64,
}

/// Predicts the windows of the run whose report is `run` on `trace`, with `base`'s other
/// options (its engine among them).
pub fn predict_run(
    run: &Path,
    trace: &Path,
    base: &PredictRequest,
) -> anyhow::Result<RunPrediction> {
    let w = RunWindows::load(run)?;
    let mut a = w.request(base)?;
    a.traces = vec![trace.to_path_buf()];
    w.check_trace(trace, base.salvage)?;
    let (traces, spec) = prepare(&a)?;
    let t = &traces[0];
    let predicted = simulate(t, &spec, &w)?;
    let row = des_row(&t.label, w.row.ranks, w.mode, &predicted.outcome);
    let max_run_ns = (t.plans.iter())
        .flat_map(|p| p.records().iter().map(|r| r.run_ns))
        .max()
        .unwrap_or(0);
    let scale = spec.platform.options().scale;
    let check = injection_check(&w, &predicted, &t.info, max_run_ns, scale);
    let mut report = Report::new(ReportKind::PredictDes, config(&traces, &spec));
    report
        .calibration
        .push(platform_calibration(&spec.platform));
    if let Some(p) = report.config.predict.as_mut() {
        p.windows_of = Some(WindowsOf {
            run: run.display().to_string(),
            windows: w.windows.windows.len() as u64,
            phases_per_window: w.windows.phases_per_window,
            injection: check,
            window_sd_pct: predicted.sd_pct.clone(),
        });
    }
    report.results.push(row.clone());
    check_plausible(&Prediction {
        des: Some(report.clone()),
        order_stats: None,
    })?;
    Ok(RunPrediction {
        run: w,
        row,
        check,
        report,
        scale,
    })
}

/// The measurement of `w` beside `row`, its prediction (`of`: each window's SD and the check
/// of the injections), judged by [`jitter_report::comparison`]'s rule.
pub fn render(w: &RunWindows, row: &ResultRow, of: &WindowsOf, s: f64) -> String {
    use jitter_trace::table::{Align, Table};
    use jitter_trace::units::format_ns;
    let m = &w.row;
    let platform = jitter_report::report::platform_noise_pct(&w.run);
    let mut out = format!(
        "like with like: {} (np {}, sync {}, {} windows of {} phases, S = {}), the same windows \
         predicted on the run's platform\n",
        w.path.display(),
        m.ranks,
        w.mode,
        w.windows.windows.len(),
        w.windows.phases_per_window,
        s
    );
    let mut table = Table::new(["SD", "measured (95 %)", "predicted", "diff", "verdict"])
        .align(0, Align::Left)
        .align(4, Align::Left);
    let blocks = (w.run.config.run.as_ref())
        .and_then(|d| d.paired.as_ref())
        .map_or(&[][..], |p| &p.blocks[..]);
    let judged = jitter_report::comparison::compare(jitter_report::comparison::Inputs {
        measured: m,
        platform_pct: platform,
        same_windows: Some((row, of)),
        blocks,
        whole: None,
        inject: (w.run.config.run.as_ref()).map_or_else(Default::default, |d| d.inject),
    });
    for (name, c) in ["eq. 2", "eq. 3"].into_iter().zip(&judged) {
        let pred = c.same_windows_pct.unwrap_or(f64::NAN);
        table.row([
            name.to_string(),
            jitter_report::formats::fmt_sd(c.measured_pct, c.ci95_pp),
            format!("{pred:.2} %"),
            if c.paired_ci95_pp.is_some() {
                format!("{} (paired)", c.diff_words())
            } else {
                c.diff_words()
            },
            c.verdict_words(),
        ]);
    }
    out.push_str(&table.render());
    let check = &of.injection;
    out.push_str(&format!(
        "platform noise during the run {platform:.2} % (not in the prediction)\n\
         injected in the windows: run {} detours, {}; prediction {} detours, {} (tolerance ± {:.0} \
         detours, ± {}: {})\n",
        check.run_injected,
        format_ns(check.run_injected_ns as f64 / s),
        check.predicted_injected,
        format_ns(check.predicted_injected_ns as f64 / s),
        check.tolerance,
        format_ns(check.tolerance_ns / s),
        if check.agrees {
            "the same stretches"
        } else {
            "NOT the same stretches"
        }
    ));
    out.push_str(&format!(
        "trace covered by the windows (all ranks): run {}, prediction {} (the run {:+.1} %: its \
         phases against the model's, MPI calls outside the model included)\n",
        format_ns(check.run_covered_ns),
        format_ns(check.predicted_covered_ns),
        100.0 * (check.run_covered_ns / check.predicted_covered_ns.max(1.0) - 1.0)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_report::metrics::{PhaseAverages, PhaseSample};
    use jitter_report::report::EmulatorTotals;

    fn outcome(phases: u64, qtbt: f64, period: f64, injected: u64) -> DesOutcome {
        let mut averages = PhaseAverages::default();
        for _ in 0..phases {
            averages.add(PhaseSample {
                max_qt_ns: qtbt,
                max_qtbt_ns: qtbt,
                mean_qt_ns: qtbt,
            });
        }
        DesOutcome {
            averages,
            requested_phases: phases,
            stopped_by_fraction: false,
            mean_period_ns: period,
            baseline_qt_ns: 1e6,
            baseline_qtbt_ns: 1e6,
            baseline_period_ns: 1e6,
            emulator: EmulatorTotals {
                injected,
                injected_ns: injected * 1000,
                ..EmulatorTotals::default()
            },
        }
    }

    #[test]
    fn pooling_weights_by_phases_and_sums_counts() {
        let mut p = None;
        pool(&mut p, outcome(10, 1.1e6, 1.0e6, 3));
        pool(&mut p, outcome(30, 1.5e6, 2.0e6, 5));
        let p = p.unwrap();
        assert_eq!(p.averages.phases, 40);
        assert!((p.averages.avg_max_qtbt_ns() - 1.4e6).abs() < 1e-6);
        assert!((p.mean_period_ns - 1.75e6).abs() < 1e-6);
        assert_eq!((p.emulator.injected, p.emulator.injected_ns), (8, 8000));
        assert_eq!(p.requested_phases, 40);
    }

    /// A trace whose detours (50 µs every 1 ms) all lie in the first half of its 10 s.
    fn half_noisy() -> jitter_trace::Trace {
        use jitter_trace::{Detour, Stream};
        let ds: Vec<Detour> = (0..5_000u64)
            .map(|i| Detour {
                start_ns: i * 1_000_000 + 300_000,
                run_ns: 50_000,
            })
            .collect();
        let mut t = jitter_trace::Trace {
            streams: vec![Stream::from_detours(0, 0, 10_000_000_000, &ds).unwrap()],
            ..jitter_trace::Trace::default()
        };
        t.sync_header();
        t
    }

    fn windows_at(points: [u64; 2], mode: SyncMode) -> RunWindows {
        let window = |phase: u64| jitter_report::report::ReplayedWindow {
            phase,
            points_ns: points.to_vec(),
            ..Default::default()
        };
        RunWindows {
            path: "run.json".into(),
            run: Report::new(ReportKind::Run, jitter_report::report::Config::default()),
            row: ResultRow {
                ranks: 2,
                sync: mode.to_string(),
                ..ResultRow::default()
            },
            windows: ReplayedWindows {
                phases_per_window: 20,
                windows: vec![window(20), window(60)],
            },
            mode,
        }
    }

    #[test]
    fn the_windows_phase_is_the_runs_baseline_phase_not_the_nominal_q() {
        let mut w = windows_at([0, 0], SyncMode::Phase);
        w.run.config.quanta_ns = 1_000_000;
        (w.run.config.scale, w.run.config.fraction) = (1.0, 1.0);
        w.row.baseline_avg_max_qt_ns = 1_023_124.4;
        let base = PredictRequest::new(vec!["t.jtr".into()]);
        assert_eq!(w.request(&base).unwrap().quanta_ns, 1_023_124);
        // A run without a usable baseline keeps its nominal q.
        for missing in [0.0, f64::NAN] {
            w.row.baseline_avg_max_qt_ns = missing;
            assert_eq!(w.request(&base).unwrap().quanta_ns, 1_000_000);
        }
    }

    #[test]
    fn every_window_starts_where_the_run_started_it() {
        use super::super::Engine;
        let trace = half_noisy();
        let input = TraceInput::new(
            &trace,
            "h.jtr",
            "h",
            jitter_emulator::PlanOptions::ideal(),
            1,
        )
        .unwrap();
        let spec = PredictSpec::ideal_offloaded(vec![2], vec![SyncMode::None], 20, Engine::Indexed);
        // Both ranks in the noisy half: every phase of both windows meets its detour (two
        // windows × 20 phases × 2 ranks, one 50 µs detour per 1 ms, about 1.05 ms a phase).
        let noisy = simulate(
            &input,
            &spec,
            &windows_at([1_000_000_000, 2_000_000_000], SyncMode::None),
        )
        .unwrap();
        let n = noisy.outcome.emulator.injected;
        assert!((78..=84).contains(&n), "{n}");
        assert_eq!(noisy.covered_ns.len(), 2);
        // Both in the quiet half: nothing at all, whatever the schedule's own offsets.
        let quiet = simulate(
            &input,
            &spec,
            &windows_at([6_000_000_000, 7_000_000_000], SyncMode::None),
        )
        .unwrap();
        assert_eq!(quiet.outcome.emulator.injected, 0);
        // One rank in each half: half of it.
        let mixed = simulate(
            &input,
            &spec,
            &windows_at([1_000_000_000, 7_000_000_000], SyncMode::None),
        )
        .unwrap();
        let m = mixed.outcome.emulator.injected;
        assert!((39..=42).contains(&m), "{m}");
        // Sync phase: the resyncs inside a window come from the run's schedule at the run's
        // phases (window phase + p), not from phase p of a fresh schedule: the same windows
        // at other run phases replay other points.
        let ph = |first: u64| {
            let mut w = windows_at([1_000_000_000, 1_000_000_000], SyncMode::Phase);
            w.windows.windows.iter_mut().for_each(|x| x.phase = first);
            simulate(&input, &spec, &w)
                .unwrap()
                .outcome
                .emulator
                .injected
        };
        let (a, b) = (ph(20), ph(1_000));
        assert!(a > 0 && b > 0 && a != b, "{a} {b}");
    }
}
