//! A prediction: every trace, rank count and sync mode of the spec through its model(s) — the
//! simulation (`des`, each point over its offset draws, pooled: `Point`) and the analytic tier
//! (`order_stats`) — into the reports of a [`Prediction`] (`prediction_report`). One entry point,
//! [`predict`], for the work the spec fixes (its phases and draws) and for the precision mode
//! (`precision_mode` plans the draws, simulated here); the ranks split over the processes of its
//! `comm`. The only module that runs the models: the precision mode, `--drivers`
//! (`size_classes`) and `--windows-of` (`window`) simulate through its [`Point`].

use anyhow::Context as _;
use indicatif::ProgressBar;
use jitter_emulator::SyncMode;
use rayon::prelude::*;

use super::comm::{Collective, Solo};
use super::des;
use super::input::TraceInput;
use super::order_stats::{order_stats_row_mix, Analytic};
use super::plan_index::PlanIndex;
use super::precision_mode::{self, PointDraws, Precise};
use super::prediction_report::{config, des_row, platform_calibration, DrawSlowdowns, Prediction};
use super::rank_layout::Placement;
use super::simulation::{pool, DesConfig, DesOutcome};
use super::spec::{Model, PrecisionPlan, PredictSpec};
use jitter_report::report::{DrawSpread, Report, ReportKind};

/// Runs the model(s) of `spec` over every trace, rank count and mode, the simulated ranks split
/// over the processes of `comm` ([`crate::comm::Solo`]: this one): the phases and draws of the
/// spec, or where it has a precision plan, the draws the precision mode plans (in batches of
/// whole draws per process). `progress` advances by the rank count after every simulated phase
/// (its length: [`crate::spec::rank_phases`]; the precision mode re-estimates it and says the
/// time left in its message); `say` gets the precision mode's lines of its measured estimate.
///
/// ```
/// use jitter_emulator::SyncMode;
/// use jitter_predict::{comm::Solo, predict, prepare, PredictRequest};
/// use jitter_trace::synth::{synthesize, Spec};
///
/// // A 120 µs detour every 4 ms, one stream of 2 s.
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("periodic.jtr");
/// let noise: Spec = "periodic:period=4ms,dur=120us".parse()?;
/// jitter_trace::write_trace(&path, &synthesize(&noise, 1, 2_000_000_000, 3)?)?;
///
/// // 64 ranks, each replaying the trace from its own offset (sync none), 1 ms of work a phase.
/// let mut req = PredictRequest::new(vec![path]);
/// req.ranks = vec![64];
/// req.modes = vec![SyncMode::None];
/// (req.quanta_ns, req.phases) = (1_000_000, 200);
/// let (traces, spec) = prepare(&req)?;
/// let p = predict(&Solo, &traces, &spec, &indicatif::ProgressBar::hidden(), &|_| {})?;
/// let row = &p.des.expect("the simulation ran").results[0];
/// // A phase's q = 1 ms of work meets at most one detour (q + d < P), and of 64 ranks one
/// // almost surely does (1 − (1 − q/P)⁶⁴ ≈ 1): the slowest rank's compute takes q + d.
/// let (q, d) = (1e6, 120e3);
/// let slowest = row.avg_max_qt_ns;
/// assert!(slowest > q + 0.95 * d && slowest <= q + d + 1.0, "{slowest}");
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn predict(
    comm: &dyn Collective,
    traces: &[TraceInput],
    spec: &PredictSpec,
    progress: &ProgressBar,
    say: &dyn Fn(&str),
) -> anyhow::Result<Prediction> {
    anyhow::ensure!(!traces.is_empty(), "no trace to predict");
    anyhow::ensure!(!spec.ranks.is_empty(), "no rank count to predict");
    let run_des = matches!(spec.model, Model::Des | Model::Both);
    let run_os = matches!(spec.model, Model::OrderStats | Model::Both);
    let scale = spec.platform.options().scale;
    let mut des = run_des.then(|| {
        let mut r = Report::new(ReportKind::PredictDes, config(traces, spec));
        r.calibration.push(platform_calibration(&spec.platform));
        r
    });
    let mut os = run_os.then(|| {
        let mut r = Report::new(ReportKind::PredictOrderStats, config(traces, spec));
        r.calibration.push(platform_calibration(&spec.platform));
        r
    });
    for t in traces {
        if let Some(r) = os.as_mut() {
            order_stats_rows(r, t, spec, scale)?;
        }
        if let (Some(r), None) = (des.as_mut(), spec.precision) {
            des_rows(comm, r, t, spec, progress)?;
        }
    }
    if let (Some(r), Some(plan)) = (des.as_mut(), spec.precision) {
        precise_rows(comm, r, traces, spec, plan, progress, say)?;
    }
    Ok(Prediction {
        des,
        order_stats: os,
    })
}

/// The plans' indexes of one trace and of its platform's noise, compiled once for every point
/// (`None` where the spec's engine walks).
pub(crate) struct TraceIndexes {
    ix: Option<Vec<PlanIndex>>,
    bg: Option<Option<Vec<PlanIndex>>>,
}

impl TraceIndexes {
    /// The indexes of `t` for `spec`'s engine and configuration.
    pub(crate) fn of(t: &TraceInput, spec: &PredictSpec) -> Self {
        TraceIndexes {
            ix: des::indexes(&t.plans, &spec.des, spec.engine),
            bg: (t.background.as_ref()).map(|b| des::indexes(&b.plans, &spec.des, spec.engine)),
        }
    }
}

/// One simulated point (a trace, a rank count and a mode) of [`predict`], of the precision
/// mode's draws, of `--drivers` and of `--windows-of`.
pub(crate) struct Point<'a> {
    pub(crate) comm: &'a dyn Collective,
    pub(crate) input: &'a TraceInput,
    pub(crate) indexes: &'a TraceIndexes,
    pub(crate) ranks: u64,
    pub(crate) mode: SyncMode,
    pub(crate) progress: &'a ProgressBar,
}

impl Point<'_> {
    /// Simulates the point with `cfg` (its seed: one draw), over the platform's noise when
    /// the input has one; with `warmup`, the first phase of the draw (and of its baseline on
    /// the platform's noise) is left out of its averages.
    pub(crate) fn simulate(&self, cfg: &DesConfig, warmup: bool) -> anyhow::Result<DesOutcome> {
        let (comm, t, n, mode) = (self.comm, self.input, self.ranks, self.mode);
        let progress = self.progress;
        let ix = self.indexes.ix.as_deref();
        let mut out = des::simulate(comm, &t.plans, ix, n, mode, cfg, &|_| progress.inc(n))?;
        if warmup {
            out.averages = out.averages.without_first();
        }
        if let (Some(b), Some(bix)) = (&t.background, &self.indexes.bg) {
            // The baseline: the platform's noise alone, the same ranks and offsets,
            // over the same stretch of the timeline: its phases are shorter, and the
            // platform's noise is not the same everywhere (a burst just past the
            // baseline's end would count for the trace), so it runs on for as many
            // more phases as the trace's own stretch takes.
            let base = |phases: u64| {
                let cfg = DesConfig {
                    phases,
                    ..cfg.clone()
                };
                des::simulate(comm, &b.plans, bix.as_deref(), n, mode, &cfg, &|_| {})
            };
            let mut b0 = base(cfg.phases)?;
            let span = out.mean_period_ns * out.averages.phases as f64;
            let more = (span / b0.mean_period_ns.max(1.0)).ceil() as u64;
            if more > b0.averages.phases && !b0.stopped_by_fraction {
                b0 = base(more)?;
            }
            if warmup {
                b0.averages = b0.averages.without_first();
            }
            out.over_background(&b0, &b.lap);
        }
        Ok(out)
    }
}

/// The precision mode's rows of every trace into `r`: `precision_mode` plans each point's
/// draws and adds them; they are simulated here, in this process alone with all the ranks
/// (their seeds offsets to the spec's, their phases the mode's, the warm-up left out), side by
/// side on the pool.
fn precise_rows(
    comm: &dyn Collective,
    r: &mut Report,
    traces: &[TraceInput],
    spec: &PredictSpec,
    plan: PrecisionPlan,
    progress: &ProgressBar,
    say: &dyn Fn(&str),
) -> anyhow::Result<()> {
    let indexes: Vec<TraceIndexes> = traces.iter().map(|t| TraceIndexes::of(t, spec)).collect();
    let draws = |p: &PointDraws| -> Vec<anyhow::Result<DesOutcome>> {
        let sim = |d: &u64| {
            let cfg = DesConfig {
                seed: spec.des.seed.wrapping_add(*d),
                phases: p.phases,
                ..spec.des.clone()
            };
            let point = Point {
                comm: &Solo,
                input: &traces[p.trace],
                indexes: &indexes[p.trace],
                ranks: p.ranks,
                mode: p.mode,
                progress,
            };
            point.simulate(&cfg, true)
        };
        match p.draws {
            [one] => vec![sim(one)],
            _ => p.draws.par_iter().map(sim).collect(),
        }
    };
    let precise = Precise {
        comm,
        traces,
        modes: &spec.modes,
        ranks: &spec.ranks,
        quanta_ns: spec.des.quanta_ns,
        plan,
        progress,
        say,
        draws: &draws,
    };
    precision_mode::rows(&precise, r)
}

/// The analytic tier's rows of trace `t` into `r` (one stream per node only).
fn order_stats_rows(
    r: &mut Report,
    t: &TraceInput,
    spec: &PredictSpec,
    scale: f64,
) -> anyhow::Result<()> {
    if spec.des.ranks_per_node > 1 {
        r.warnings.push(format!(
            "{}: order-stats models one stream per node (--ranks-per-node 1); skipped",
            t.label
        ));
    } else {
        // One stream per node: plan t is node trace t (one for a single trace).
        let dists = (t.plans.iter())
            .map(|p| Analytic::from_plan(p, spec.des.quanta_ns))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let place = Placement::new(1, dists.len())?;
        for &mode in &spec.modes {
            let mut any = false;
            for &n in &spec.ranks {
                let parts: Vec<(&Analytic, u64)> = (dists.iter().enumerate())
                    .map(|(i, d)| (d, place.ranks_on_trace(n, i)))
                    .collect();
                if let Some(row) = order_stats_row_mix(&t.label, &parts, n, mode, &spec.des, scale)
                {
                    r.results.push(row);
                    any = true;
                }
            }
            if !any {
                r.warnings.push(format!(
                    "{}: sync {mode} depends on timer drift; order-stats models only \
                     none and phase",
                    t.label
                ));
            }
        }
    }
    Ok(())
}

/// The simulation's rows of trace `t` into `r`: its indexes compiled once for every rank count
/// and mode, then each point over its draws.
fn des_rows(
    comm: &dyn Collective,
    r: &mut Report,
    t: &TraceInput,
    spec: &PredictSpec,
    progress: &ProgressBar,
) -> anyhow::Result<()> {
    // Compiled once per trace for every rank count and sync mode.
    let indexes = TraceIndexes::of(t, spec);
    if let Some(note) =
        jitter_emulator::placement::note(spec.des.ranks_per_node, t.info.streams as u64)
    {
        r.warnings.push(format!("{}: {note}", t.label));
    }
    if let Some(b) = t.background.as_ref().filter(|b| b.lap.dropped > 0) {
        r.warnings.push(format!(
            "{}: one lap of its plans drops {} detours ({} ns; S·run ≤ O) before the \
             union with {}",
            t.label, b.lap.dropped, b.lap.dropped_ns, b.label
        ));
    }
    for &mode in &spec.modes {
        for &n in &spec.ranks {
            let point = Point {
                comm,
                input: t,
                indexes: &indexes,
                ranks: n,
                mode,
                progress,
            };
            point.row(r, spec)?;
        }
    }
    Ok(())
}

impl Point<'_> {
    /// The point's row over its offset draws (pooled, with the range of the draws'
    /// slowdowns), and its warnings, into `r`.
    fn row(&self, r: &mut Report, spec: &PredictSpec) -> anyhow::Result<()> {
        let (t, n, mode, progress) = (self.input, self.ranks, self.mode, self.progress);
        let mut pooled = None;
        let mut spread = DrawSpread {
            draws: spec.draws.max(1),
            sd_qtbt_range_pct: [f64::INFINITY, f64::NEG_INFINITY],
            sd_qt_range_pct: [f64::INFINITY, f64::NEG_INFINITY],
        };
        let mut each = DrawSlowdowns::default();
        for d in 0..spec.draws.max(1) {
            let cfg = DesConfig {
                seed: spec.des.seed.wrapping_add(d),
                ..spec.des.clone()
            };
            let out = self.simulate(&cfg, false)?;
            each.add(
                &mut spread,
                &des_row(&t.label, n, mode, &out),
                out.averages.phases,
            );
            pool(&mut pooled, out);
        }
        let out = pooled.context("no draw")?;
        let draws = spec.draws.max(1);
        if out.stopped_by_fraction {
            progress.inc(
                (spec.des.phases * draws)
                    .saturating_sub(out.averages.phases)
                    .saturating_mul(n),
            );
            r.warnings.push(format!(
                "{} at {n} ranks, sync {mode}: a rank replayed f = {} of its stream \
                 after {} of {} phases; the run stopped there",
                t.label,
                spec.platform.options().fraction,
                out.averages.phases,
                spec.des.phases * draws
            ));
        }
        anyhow::ensure!(
            out.averages.phases > 0,
            "{} at {n} ranks, sync {mode}: the trace is too short for one phase",
            t.label
        );
        if out.emulator.dropped > 0 {
            r.warnings.push(format!(
                "{} at {n} ranks, sync {mode}: {} detours ({} ns) dropped (S·run ≤ O)",
                t.label, out.emulator.dropped, out.emulator.dropped_ns
            ));
        }
        let mut row = des_row(&t.label, n, mode, &out);
        row.draws = (draws > 1).then_some(spread);
        let ivs = each.intervals(&out);
        each.interval_into(&mut row, ivs, (spec.des.phases, 0), None, "fixed");
        r.results.push(row);
        Ok(())
    }
}
