//! `predict`'s precision mode: every point's offset draws planned by Stein's two-stage rule so
//! that both its slowdowns' 95 % intervals meet the precision asked (`--precision`,
//! [`DEFAULT_PRECISION`]), within its phase budget and the prediction's time budget; the report
//! says what each point reached and why it stopped.
//!
//! A draw is one simulation of the point from its own seed (`seed + d`: its own offsets and
//! resync points, as `--draws` takes them) for [`phases_per_draw`] phases after a warm-up of
//! [`WARMUP_PHASES`]: the first phase starts every rank at once at its offset rather than out
//! of a barrier, the start of a run and not its steady state (10 % below the steady state at
//! 65 536 ranks of a dense trace, `docs/VALIDATION.md`), so it is left out. The interval over
//! the draws is [`jitter_trace::interval`]'s (independent draws, each carrying its phases' and
//! its offsets' error; t with D − 1 degrees of freedom) and the rule is
//! [`jitter_trace::precision::TwoStage`]: a pilot of 16 draws plans how many the point needs,
//! and the final interval is the pilot's, scaled to them.
//!
//! Every point first gets two draws (an interval), whatever the time budget; then its pilot;
//! then the planned draws in rounds that at most double each point's draws, point after point in
//! table order, so that a time budget that runs out leaves every point with its share. The time
//! budget is judged by rank 0 between draws and agreed by every process, so none is left waiting
//! in a collective; where it stops the prediction, the result depends on the machine's speed
//! (the report says `time`). After every draw the progress says the time left at the pace
//! measured so far (rank-phases per second): to the end of the pilots while they run, then to
//! the end of the draws the pilots planned.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::ProgressBar;
use jitter_emulator::SyncMode;
use jitter_trace::interval::MeanInterval;
use jitter_trace::precision::{Precision, TwoStage};

use super::budget::{self, Estimate};
use super::des::{self, DesConfig, DesOutcome};
use super::input::TraceInput;
use super::prediction::{order_stats_rows, DrawSlowdowns, Point};
use super::prediction_report::{config, des_row, platform_calibration, Prediction};
use super::spec::{Model, PredictSpec};
use crate::comm::Collective;
use jitter_report::report::{DrawSpread, Report, ReportKind};

/// The precision a prediction aims at unless `--precision` says otherwise: 2 % of the slowdown,
/// or 0.1 pp where that is wider (a slowdown under 5 %: no one acts on a tenth of a point).
pub const DEFAULT_PRECISION: Precision = Precision::Either {
    relative: 0.02,
    absolute: 0.1,
};

/// Phases each draw runs first and leaves out (the start of a run: module documentation).
pub const WARMUP_PHASES: u64 = 1;

/// Rank-phases one draw aims at: with N ranks, ⌊2²⁰ / N⌋ phases (within
/// [`PHASES_PER_DRAW`]), so that a draw's set-up (sorting its ranks' offsets, its warm-up
/// phase) is a small part of its cost at any N and a small N's draw still covers a long
/// stretch of its trace.
pub(crate) const RANK_PHASES_PER_DRAW: u64 = 1 << 20;

/// Fewest and most phases of one draw (its warm-up besides).
pub(crate) const PHASES_PER_DRAW: (u64, u64) = (1, 256);

/// The precision mode's target and budgets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrecisionPlan {
    /// What every interval must meet.
    pub precision: Precision,
    /// The prediction's time budget (every point gets two draws first).
    pub max_time: Duration,
    /// Most phases of one point, warm-ups included.
    pub max_phases: u64,
    /// Draws of each point's pilot ([`jitter_trace::precision::MIN_DRAWS`]).
    pub pilot: u64,
}

impl PrecisionPlan {
    /// The two-stage rule of a point with at most `max_draws` draws (raised to the pilot).
    pub fn rule(&self, max_draws: u64) -> TwoStage {
        let pilot = self.pilot.max(2);
        TwoStage {
            precision: self.precision,
            pilot,
            max_draws: max_draws.max(pilot),
        }
    }

    /// Default `--max-time`, ns (10 min).
    pub const DEFAULT_MAX_TIME_NS: u64 = 600_000_000_000;
    /// Default `--max-phases`.
    pub const DEFAULT_MAX_PHASES: u64 = 1_000_000;
}

/// Phases of one draw of `ranks` ranks (its warm-up besides): ⌊[`RANK_PHASES_PER_DRAW`] / N⌋
/// within [`PHASES_PER_DRAW`], and within `fits` (the phases one lap of the trace holds, so
/// that the fraction rule does not cut the draw short).
pub fn phases_per_draw(ranks: u64, fits: u64) -> u64 {
    let (lo, hi) = PHASES_PER_DRAW;
    let want = (RANK_PHASES_PER_DRAW / ranks.max(1)).clamp(lo, hi);
    want.min(fits.saturating_sub(WARMUP_PHASES)).max(1)
}

/// Phases one lap of the shortest trace holds with room to spare: three quarters of its
/// length in q (a phase lasts q and its noise; a draw the fraction rule cut short would be
/// shorter than the others).
pub fn phases_in_trace(traces: &[TraceInput], quanta_ns: u64) -> u64 {
    (traces.iter().flat_map(|t| &t.plans))
        .map(|p| p.period_ns() / 4 * 3 / quanta_ns.max(1))
        .min()
        .unwrap_or(0)
}

/// The budget's estimate of the pilot (`plan.pilot` draws of every point, each of
/// [`phases_per_draw`] phases and its warm-up), for process `me` of `procs` with `threads`
/// workers: the least the precision mode costs (the draws beyond are estimated from it as they
/// run). Memory is the largest rank count's.
pub fn pilot_estimate(
    traces: &[TraceInput],
    spec: &PredictSpec,
    plan: &PrecisionPlan,
    procs: u64,
    me: u64,
    threads: usize,
) -> Estimate {
    let fits = phases_in_trace(traces, spec.des.quanta_ns);
    let mut total = Estimate {
        events: 0.0,
        seconds: 0.0,
        bytes: Some(0),
    };
    for &n in &spec.ranks {
        let one = PredictSpec {
            ranks: vec![n],
            des: DesConfig {
                phases: phases_per_draw(n, fits) + WARMUP_PHASES,
                ..spec.des.clone()
            },
            draws: plan.pilot,
            ..spec.clone()
        };
        let e = budget::estimate(traces, &one, procs, me, threads);
        total.events += e.events;
        total.seconds += e.seconds;
        total.bytes = total.bytes.zip(e.bytes).map(|(a, b)| a.max(b));
    }
    total
}

/// The line `predict` prints before the precision mode starts: the target, the budgets and the
/// pilot's estimate (`pilot`, [`pilot_estimate`]), and what the rest is estimated from.
pub fn announce(plan: &PrecisionPlan, pilot: &Estimate) -> String {
    format!(
        "precision {} (each slowdown's 95 % half-width; budget {} and {} phases a point): the \
         pilot, {} draws of every point, is estimated at about {:.0} s on this machine \
         ({} MiB); the draws beyond it are estimated from its pace as they run",
        plan.precision,
        jitter_trace::units::format_ns(plan.max_time.as_nanos() as f64),
        plan.max_phases,
        plan.pilot,
        pilot.seconds,
        pilot.bytes.map_or(u64::MAX, |b| b.div_ceil(1 << 20)),
    )
}

/// The line `predict` prints after the precision mode: how many points reached the precision,
/// how many a budget stopped (and the widest interval left), the draws and the time taken.
pub fn summary(p: &Prediction, plan: &PrecisionPlan, took: Duration) -> String {
    let rows: Vec<&jitter_report::report::ResultRow> = (p.des.iter())
        .flat_map(|r| &r.results)
        .filter(|r| r.interval.is_some())
        .collect();
    fn stop(r: &jitter_report::report::ResultRow) -> &str {
        r.interval.as_ref().map_or("", |i| i.stopped_by.as_str())
    }
    let reached = rows.iter().filter(|r| stop(r) == "precision").count();
    let draws: u64 = (rows.iter())
        .filter_map(|r| r.interval.as_ref().map(|i| i.draws))
        .sum();
    let mut s = format!(
        "precision {}: {reached} of {} points reached it, {draws} draws in {:.1} s",
        plan.precision,
        rows.len(),
        took.as_secs_f64()
    );
    // The point farthest from its target, where a budget stopped it.
    let ratio = |r: &jitter_report::report::ResultRow| {
        let h = r
            .sd_qtbt_ci95_pct
            .unwrap_or(f64::NAN)
            .max(r.sd_qt_ci95_pct.unwrap_or(f64::NAN));
        h / plan
            .precision
            .allowed(r.sd_qtbt_pct)
            .min(plan.precision.allowed(r.sd_qt_pct))
    };
    if let Some(worst) = (rows.iter())
        .filter(|r| stop(r) != "precision")
        .max_by(|a, b| ratio(a).total_cmp(&ratio(b)))
    {
        let stopped: Vec<String> = ["time", "phases"]
            .iter()
            .map(|&k| (k, rows.iter().filter(|r| stop(r) == k).count()))
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} by --max-{k}"))
            .collect();
        s.push_str(&format!(
            "; {} stopped first, the widest {} at {} ranks, sync {}: SD eq.2 {:.2} % ± {:.2}, \
             eq.3 {:.2} % ± {:.2}",
            stopped.join(", "),
            worst.trace,
            worst.ranks,
            worst.sync,
            worst.sd_qtbt_pct,
            worst.sd_qtbt_ci95_pct.unwrap_or(f64::NAN),
            worst.sd_qt_pct,
            worst.sd_qt_ci95_pct.unwrap_or(f64::NAN),
        ));
    }
    s
}

/// One point's draws so far.
struct Tally {
    trace: usize,
    mode: SyncMode,
    ranks: u64,
    /// Phases of each draw, its warm-up included.
    phases: u64,
    each: DrawSlowdowns,
    spread: DrawSpread,
    pooled: Option<DesOutcome>,
    draws: u64,
    /// The pilot's intervals (eq. 2, eq. 3) once it is complete.
    pilot: Option<[MeanInterval; 2]>,
    /// The draws the pilot planned.
    planned: u64,
    /// Draws the fraction rule cut short.
    cut: u64,
    stopped_by: Option<&'static str>,
}

impl Tally {
    fn new(trace: usize, mode: SyncMode, ranks: u64, phases: u64) -> Self {
        Tally {
            trace,
            mode,
            ranks,
            phases,
            each: DrawSlowdowns::default(),
            spread: DrawSpread {
                draws: 0,
                sd_qtbt_range_pct: [f64::INFINITY, f64::NEG_INFINITY],
                sd_qt_range_pct: [f64::INFINITY, f64::NEG_INFINITY],
            },
            pooled: None,
            draws: 0,
            pilot: None,
            planned: 0,
            cut: 0,
            stopped_by: None,
        }
    }

    /// The draws' intervals now (eq. 2, eq. 3).
    fn intervals(&self) -> Option<[MeanInterval; 2]> {
        self.pooled.as_ref().map(|p| self.each.intervals(p))
    }
}

/// The traces' plan indexes, compiled once for every point.
struct Indexes {
    ix: Vec<Option<Vec<crate::plan_index::PlanIndex>>>,
    bg: Vec<Option<Option<Vec<crate::plan_index::PlanIndex>>>>,
}

/// What the rounds share: the inputs, the indexes, the budgets and the progress.
struct Rounds<'a> {
    comm: &'a dyn Collective,
    traces: &'a [TraceInput],
    spec: &'a PredictSpec,
    indexes: Indexes,
    plan: PrecisionPlan,
    started: Instant,
    progress: &'a ProgressBar,
}

impl Rounds<'_> {
    fn point(&self, t: &Tally) -> Point<'_> {
        Point {
            comm: self.comm,
            input: &self.traces[t.trace],
            ix: self.indexes.ix[t.trace].as_deref(),
            bg_ix: self.indexes.bg[t.trace].as_ref().map(|b| b.as_deref()),
            ranks: t.ranks,
            mode: t.mode,
            progress: self.progress,
        }
    }

    /// The two-stage rule of a point: its phase budget in draws.
    fn rule(&self, t: &Tally) -> TwoStage {
        self.plan.rule(self.plan.max_phases / t.phases.max(1))
    }

    /// Runs the point's next draw into its tally; completes its pilot at the pilot's size.
    fn draw(&self, t: &mut Tally) -> anyhow::Result<()> {
        let cfg = DesConfig {
            seed: self.spec.des.seed.wrapping_add(t.draws),
            phases: t.phases,
            ..self.spec.des.clone()
        };
        let out = self.point(t).simulate(&cfg, true)?;
        t.draws += 1;
        let label = &self.traces[t.trace].label;
        anyhow::ensure!(
            out.averages.phases > 0,
            "{label} at {} ranks, sync {}: the trace is too short for a phase after the \
             warm-up (give --phases for a fixed count)",
            t.ranks,
            t.mode
        );
        t.cut += u64::from(out.stopped_by_fraction);
        let row = des_row(label, t.ranks, t.mode, &out);
        t.each.add(&mut t.spread, &row, out.averages.phases);
        des::pool(&mut t.pooled, out);
        let rule = self.rule(t);
        if t.draws == rule.pilot && t.pilot.is_none() {
            let pilot = t.intervals().context("a pilot has draws")?;
            t.planned = rule.draws_needed(&pilot);
            t.pilot = Some(pilot);
        }
        Ok(())
    }

    /// True once the time budget is spent: rank 0's clock, agreed by every process.
    fn out_of_time(&self) -> bool {
        let mine = if self.comm.rank() == 0 && self.started.elapsed() >= self.plan.max_time {
            1.0
        } else {
            0.0
        };
        let mut v = [mine];
        self.comm.all_max(&mut v);
        v[0] > 0.0
    }
}

/// The precision mode of [`super::predict`]: the model(s) of `spec` (its phases and draws
/// ignored) over every trace, rank count and mode, each simulated point's draws added until
/// `plan` is met. `progress` counts rank-phases; its length is re-estimated after every round
/// and its message says the time left and what it is estimated from.
pub fn predict_precise(
    traces: &[TraceInput],
    spec: &PredictSpec,
    plan: PrecisionPlan,
    progress: &ProgressBar,
) -> anyhow::Result<Prediction> {
    predict_precise_on(&crate::comm::Solo, traces, spec, plan, progress)
}

/// As [`predict_precise`], with the simulated ranks split over the processes of `comm`.
pub fn predict_precise_on(
    comm: &dyn Collective,
    traces: &[TraceInput],
    spec: &PredictSpec,
    plan: PrecisionPlan,
    progress: &ProgressBar,
) -> anyhow::Result<Prediction> {
    anyhow::ensure!(!traces.is_empty(), "no trace to predict");
    anyhow::ensure!(!spec.ranks.is_empty(), "no rank count to predict");
    let run_des = matches!(spec.model, Model::Des | Model::Both);
    let run_os = matches!(spec.model, Model::OrderStats | Model::Both);
    let fits = phases_in_trace(traces, spec.des.quanta_ns);
    let mut os = None;
    if run_os {
        let mut r = Report::new(ReportKind::PredictOrderStats, config(traces, spec));
        r.calibration.push(platform_calibration(&spec.platform));
        for t in traces {
            order_stats_rows(&mut r, t, spec, spec.platform.options().scale)?;
        }
        os = Some(r);
    }
    if !run_des {
        return Ok(Prediction {
            des: None,
            order_stats: os,
        });
    }
    let indexes = Indexes {
        ix: (traces.iter())
            .map(|t| des::indexes(&t.plans, &spec.des, spec.engine))
            .collect(),
        bg: (traces.iter())
            .map(|t| {
                (t.background.as_ref()).map(|b| des::indexes(&b.plans, &spec.des, spec.engine))
            })
            .collect(),
    };
    let mut tallies: Vec<Tally> = Vec::new();
    for (i, _) in traces.iter().enumerate() {
        for &mode in &spec.modes {
            for &n in &spec.ranks {
                let phases = phases_per_draw(n, fits) + WARMUP_PHASES;
                tallies.push(Tally::new(i, mode, n, phases));
            }
        }
    }
    let rounds = Rounds {
        comm,
        traces,
        spec,
        indexes,
        plan,
        started: Instant::now(),
        progress,
    };
    progress.set_length(pilot_rank_phases(&tallies, plan.pilot));
    progress.set_message(format!("the pilot: {} draws a point", plan.pilot));
    run_rounds(&rounds, &mut tallies)?;
    let mut r = Report::new(ReportKind::PredictDes, config(traces, spec));
    r.calibration.push(platform_calibration(&spec.platform));
    r.config.phases = tallies.iter().map(|t| t.phases).max().unwrap_or(0);
    r.config.warmup_phases = WARMUP_PHASES;
    for t in &tallies {
        rows_of(&mut r, traces, t, &plan)?;
    }
    Ok(Prediction {
        des: Some(r),
        order_stats: os,
    })
}

/// Rank-phases of the pilots of every point (`pilot` draws each).
fn pilot_rank_phases(t: &[Tally], pilot: u64) -> u64 {
    (t.iter())
        .map(|t| pilot * t.phases * t.ranks)
        .fold(0u64, u64::saturating_add)
}

/// Two draws of every point, then every point's pilot, then the planned draws in rounds that
/// at most double each point's draws, until every point has its draws or the time is spent.
/// The time left is said after every draw.
fn run_rounds(r: &Rounds<'_>, tallies: &mut [Tally]) -> anyhow::Result<()> {
    for i in 0..tallies.len() {
        while tallies[i].draws < 2 {
            r.draw(&mut tallies[i])?;
            say_left(r, tallies, Stage::Pilot);
        }
    }
    // The pilots (whole), then rounds of the planned draws (at most as many as a point has).
    for stage in 0.. {
        let mut any = false;
        for i in 0..tallies.len() {
            let t = &tallies[i];
            if t.stopped_by.is_some() {
                continue;
            }
            let more = if stage == 0 {
                r.rule(t).pilot.saturating_sub(t.draws)
            } else {
                t.planned.saturating_sub(t.draws).min(t.draws)
            };
            for _ in 0..more {
                if r.out_of_time() {
                    for t in tallies.iter_mut().filter(|t| t.stopped_by.is_none()) {
                        t.stopped_by = Some("time");
                    }
                    return Ok(());
                }
                r.draw(&mut tallies[i])?;
                say_left(
                    r,
                    tallies,
                    if stage == 0 {
                        Stage::Pilot
                    } else {
                        Stage::Planned
                    },
                );
            }
            any |= more > 0;
        }
        if stage > 0 && !any {
            break;
        }
    }
    for t in tallies.iter_mut() {
        // The draws the pilot planned are done: the precision, unless the budget capped them.
        let capped = t.pilot.is_some_and(|p| {
            let rule = r.rule(t);
            rule.draws_needed(&p) >= rule.max_draws && !p.iter().all(|i| rule.precision.met_by(i))
        });
        t.stopped_by = Some(if capped { "phases" } else { "precision" });
    }
    Ok(())
}

/// What the draws left are counted to: every point's pilot, or the draws its pilot planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Pilot,
    Planned,
}

/// Rank-phases of the draws `t` still has to run in `stage` (none once it stopped).
fn rank_phases_left(r: &Rounds<'_>, t: &Tally, stage: Stage) -> u64 {
    if t.stopped_by.is_some() {
        return 0;
    }
    let target = match stage {
        Stage::Pilot => r.rule(t).pilot,
        Stage::Planned => t.planned,
    };
    target.saturating_sub(t.draws) * t.phases * t.ranks
}

/// Sets the progress bar's length to the rank-phases done and left, and its message to the
/// time they will take at the pace measured so far (rank-phases per second of this
/// prediction): during the pilot, to its end; after it, to the end of the planned draws.
fn say_left(r: &Rounds<'_>, tallies: &[Tally], stage: Stage) {
    let left: u64 = (tallies.iter())
        .map(|t| rank_phases_left(r, t, stage))
        .fold(0, u64::saturating_add);
    let pos = r.progress.position();
    let done_s = r.started.elapsed().as_secs_f64().max(1e-3);
    r.progress.set_length(pos.saturating_add(left));
    let secs = left as f64 * done_s / pos.max(1) as f64;
    let what = match stage {
        Stage::Pilot => "to the end of the pilot",
        Stage::Planned => "to the end of the planned draws",
    };
    r.progress
        .set_message(format!("about {secs:.0} s left {what}, at the pace so far"));
}

/// The point's row (its draws pooled, with their range and interval, the precision asked and
/// why it stopped) and its warnings, into `r`.
fn rows_of(
    r: &mut Report,
    traces: &[TraceInput],
    t: &Tally,
    plan: &PrecisionPlan,
) -> anyhow::Result<()> {
    let label = &traces[t.trace].label;
    let (n, mode) = (t.ranks, t.mode);
    let out = t.pooled.as_ref().context("no draw")?;
    if t.cut > 0 {
        r.warnings.push(format!(
            "{label} at {n} ranks, sync {mode}: in {} of {} draws a rank replayed f of its \
             stream before {} phases; those draws stopped there",
            t.cut, t.draws, t.phases
        ));
    }
    if out.emulator.dropped > 0 {
        r.warnings.push(format!(
            "{label} at {n} ranks, sync {mode}: {} detours ({} ns) dropped (S·run ≤ O)",
            out.emulator.dropped, out.emulator.dropped_ns
        ));
    }
    let mut row = des_row(label, n, mode, out);
    let mut spread = t.spread;
    spread.draws = t.draws;
    row.draws = Some(spread);
    // The pilot's intervals scaled to the draws done (the draws' own while the pilot is not
    // complete: a time budget spent first).
    let now = t.intervals().context("no draw")?;
    let rule = plan.rule(u64::MAX);
    let ivs = match t.pilot {
        Some(p) => [0, 1].map(|k| rule.interval(&p[k], &now[k], t.draws)),
        None => now,
    };
    t.each.interval_into(
        &mut row,
        ivs,
        (t.phases, WARMUP_PHASES),
        Some(plan.precision.to_string()),
        t.stopped_by.unwrap_or("time"),
    );
    r.results.push(row);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draw_aims_at_a_million_rank_phases_within_its_bounds_and_the_trace() {
        assert_eq!(phases_per_draw(16, 10_000), 256);
        assert_eq!(phases_per_draw(4096, 10_000), 256);
        assert_eq!(phases_per_draw(8192, 10_000), 128);
        assert_eq!(phases_per_draw(65_536, 10_000), 16);
        assert_eq!(phases_per_draw(1 << 19, 10_000), 2);
        assert_eq!(phases_per_draw(1_000_000, 10_000), 1);
        assert_eq!(phases_per_draw(1 << 22, 10_000), 1);
        // A short trace: one lap holds the draw, its warm-up included.
        assert_eq!(phases_per_draw(16, 100), 99);
        assert_eq!(phases_per_draw(16, 1), 1);
    }
}
