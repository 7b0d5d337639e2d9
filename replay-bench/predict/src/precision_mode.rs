//! `predict`'s precision mode: every point's offset draws planned by Stein's two-stage rule so
//! that both its slowdowns' 95 % intervals meet the precision asked (`--precision`,
//! [`DEFAULT_PRECISION`]), within its phase budget and the prediction's time budget; the report
//! says what each point reached and why it stopped. [`crate::predict`] asks for it where the
//! spec has a plan (`PrecisionPlan`); this module plans the draws and adds them up, and
//! `prediction` simulates them (`PointDraws`): it runs no model itself.
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
//! budget is judged by rank 0 between batches of draws and agreed by every process, so none is
//! left waiting in a collective; where it stops the prediction, the result depends on the
//! machine's speed (the report says `time`).
//!
//! A point's draws run in batches, as many at once as there are workers (`Rounds::at_once`):
//! in one process each draw of a batch on the pool (its passes stealing from the others', so
//! that one draw's serial set-up overlaps another's passes); over processes each process runs
//! whole draws of all the ranks alone and the outcomes are exchanged after the batch
//! (one sum of their bits), so that no phase waits for a message. A draw's outcome
//! does not depend on where it ran, and the draws are added in seed order: the same prediction
//! in one process or many, with any number of threads.
//!
//! Its time is estimated from the draws measured (`Pace`): once every point has its first two
//! draws, the pilot's time is those draws' seconds per draw times the draws its pilot still
//! needs (`stage_left_s`, said by `measured`); once a point's pilot is done, the draws
//! Stein's rule planned for it at its own pace. After every batch the progress says the time
//! left so: to the end of the pilots while they run, then to the end of the planned draws.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::ProgressBar;
use jitter_emulator::SyncMode;
use jitter_trace::interval::MeanInterval;
use jitter_trace::precision::{Precision, TwoStage};

use super::budget::{self, Estimate};
use super::input::TraceInput;
use super::prediction_report::{des_row, DrawSlowdowns, Prediction};
use super::simulation::{pool, DesConfig, DesOutcome};
use super::spec::{PrecisionPlan, PredictSpec};
use crate::comm::Collective;
use jitter_report::metrics::PhaseAverages;
use jitter_report::report::{DrawSpread, Report};

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
/// [`phases_per_draw`] phases and its warm-up) for one of `procs` processes with `threads`
/// workers, which admits the job: every process runs its share of the draws with all the
/// ranks, `threads` draws at once (their rank states side by side). Memory is the largest rank
/// count's. Its time is the budget's model, for the admission only: the time said is measured
/// (`measured`).
pub fn pilot_estimate(
    traces: &[TraceInput],
    spec: &PredictSpec,
    plan: &PrecisionPlan,
    procs: u64,
    threads: usize,
) -> Estimate {
    let fits = phases_in_trace(traces, spec.des.quanta_ns);
    let mut total = Estimate {
        events: 0.0,
        seconds: 0.0,
        bytes: Some(0),
    };
    let share = procs.max(1) as f64;
    for &n in &spec.ranks {
        let one = |n: u64| PredictSpec {
            ranks: vec![n],
            des: DesConfig {
                phases: phases_per_draw(n, fits) + WARMUP_PHASES,
                ..spec.des.clone()
            },
            draws: plan.pilot,
            ..spec.clone()
        };
        let e = budget::estimate(traces, &one(n), 1, 0, threads);
        // The rank states of one draw: what N ranks hold beyond one.
        let base = budget::estimate(traces, &one(1), 1, 0, threads).bytes;
        let per_draw = e.bytes.zip(base).map(|(b, b1)| b.saturating_sub(b1));
        let more = (threads.max(1) as u64).saturating_sub(1);
        let bytes = (e.bytes.zip(per_draw)).and_then(|(b, d)| b.checked_add(d.checked_mul(more)?));
        total.events += e.events / share;
        total.seconds += e.seconds / share;
        total.bytes = total.bytes.zip(bytes).map(|(a, b)| a.max(b));
    }
    total
}

/// The line `predict` prints before the precision mode starts: the target, the budgets, the
/// memory of the pilot's estimate ([`pilot_estimate`]) and how its time will be known.
pub fn announce(plan: &PrecisionPlan, pilot: &Estimate) -> String {
    format!(
        "precision {} (each slowdown's 95 % half-width; budget {} and {} phases a point): a \
         pilot of {} draws of every point, then the draws Stein's rule plans from it ({} MiB); \
         the time is estimated from the first two draws of every point",
        plan.precision,
        jitter_trace::units::format_ns(plan.max_time.as_nanos() as f64),
        plan.max_phases,
        plan.pilot,
        pilot.bytes.map_or(u64::MAX, |b| b.div_ceil(1 << 20)),
    )
}

/// A point's measured pace: the wall seconds its batches of draws took and how many draws
/// they ran (at the concurrency they ran at: `Rounds::at_once`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Pace {
    /// Wall seconds of its batches.
    secs: f64,
    /// Draws they ran.
    draws: u64,
}

impl Pace {
    /// Counts a batch of `draws` draws that took `secs`.
    fn add(&mut self, secs: f64, draws: u64) {
        self.secs += secs;
        self.draws += draws;
    }

    /// Seconds per draw (0 before any: nothing measured, nothing counted).
    fn per_draw(&self) -> f64 {
        if self.draws == 0 {
            0.0
        } else {
            self.secs / self.draws as f64
        }
    }
}

/// Seconds until every point has `target` draws (its pilot, or the draws Stein's rule
/// planned), from `(done, target, pace)` of each: the draws it lacks at its own pace.
fn stage_left_s(points: impl IntoIterator<Item = (u64, u64, Pace)>) -> f64 {
    (points.into_iter())
        .map(|(done, target, pace)| target.saturating_sub(done) as f64 * pace.per_draw())
        .sum()
}

/// The line said once every one of `points` points has its first draws (`took` s): the
/// pilot's time in all, `took` and `left_s` more ([`stage_left_s`]).
fn measured(plan: &PrecisionPlan, points: usize, took: f64, left_s: f64) -> String {
    format!(
        "precision {}: the first two draws of every point ({points}) took {took:.1} s; the \
         pilot, {} draws of every point, is estimated at about {:.0} s in all on this machine \
         from their pace (the draws beyond it from Stein's rule once it is done)",
        plan.precision,
        plan.pilot,
        took + left_s,
    )
}

/// The line said once every pilot is done: the draws Stein's rule planned beyond them and
/// their time at each point's pace (`left_s`).
fn planned(plan: &PrecisionPlan, beyond: u64, took: f64, left_s: f64) -> String {
    format!(
        "precision {}: the pilots took {took:.1} s and plan {beyond} draws beyond them \
         (Stein's rule), about {left_s:.0} s more at their pace",
        plan.precision,
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
    /// The wall time of its draws.
    pace: Pace,
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
            pace: Pace::default(),
        }
    }

    /// The draws' intervals now (eq. 2, eq. 3).
    fn intervals(&self) -> Option<[MeanInterval; 2]> {
        self.pooled.as_ref().map(|p| self.each.intervals(p))
    }
}

/// A batch of one point's draws as the precision mode asks for them: `draws` (offsets to the
/// spec's seed) of trace `trace` at `ranks` ranks under `mode`, `phases` phases each (the
/// warm-up included, left out of the outcome); `prediction` simulates them.
pub(crate) struct PointDraws<'a> {
    pub(crate) trace: usize,
    pub(crate) mode: SyncMode,
    pub(crate) ranks: u64,
    pub(crate) phases: u64,
    pub(crate) draws: &'a [u64],
}

/// What the precision mode plans over: the processes, the traces, the points' sync modes and
/// rank counts, q (for the phases a trace holds), the plan, the progress, where the lines of
/// the estimate go, and the simulation of a batch of a point's draws (in this process alone,
/// all the ranks; one outcome per draw, in order).
pub(crate) struct Precise<'a> {
    pub(crate) comm: &'a dyn Collective,
    pub(crate) traces: &'a [TraceInput],
    pub(crate) modes: &'a [SyncMode],
    pub(crate) ranks: &'a [u64],
    pub(crate) quanta_ns: u64,
    pub(crate) plan: PrecisionPlan,
    pub(crate) progress: &'a ProgressBar,
    pub(crate) say: &'a dyn Fn(&str),
    pub(crate) draws: &'a dyn Fn(&PointDraws) -> Vec<anyhow::Result<DesOutcome>>,
}

/// What the rounds share: the job and when it started (the time budget's clock).
struct Rounds<'a> {
    job: &'a Precise<'a>,
    started: Instant,
}

impl Rounds<'_> {
    /// The two-stage rule of a point: its phase budget in draws.
    fn rule(&self, t: &Tally) -> TwoStage {
        self.job
            .plan
            .rule(self.job.plan.max_phases / t.phases.max(1))
    }

    /// Draws of one point run at once: the most workers of any process, times the processes
    /// (agreed by all, so that every process cuts the same batches even where their pools
    /// differ in size).
    fn at_once(&self) -> u64 {
        let mut most = [rayon::current_num_threads().max(1) as f64];
        self.job.comm.all_max(&mut most);
        most[0] as u64 * self.job.comm.size().max(1) as u64
    }

    /// Runs the point's next `k` draws (a batch, at most `Rounds::at_once`), adds them in
    /// seed order (completing its pilot at the pilot's size) and counts their time in its pace.
    fn draws(&self, t: &mut Tally, k: u64) -> anyhow::Result<()> {
        let started = Instant::now();
        let first = t.draws;
        let outs = if self.job.comm.size() == 1 {
            let seeds: Vec<u64> = (first..first + k).collect();
            self.run_here(t, &seeds)
                .into_iter()
                .collect::<anyhow::Result<Vec<_>>>()?
        } else {
            self.run_split(t, first, k)?
        };
        for out in outs {
            self.add(t, out)?;
        }
        t.pace.add(started.elapsed().as_secs_f64(), k);
        Ok(())
    }

    /// Draws `draws` (offsets to the spec's seed) of the point in this process alone, all
    /// its ranks, side by side on the pool.
    fn run_here(&self, t: &Tally, draws: &[u64]) -> Vec<anyhow::Result<DesOutcome>> {
        (self.job.draws)(&PointDraws {
            trace: t.trace,
            mode: t.mode,
            ranks: t.ranks,
            phases: t.phases,
            draws,
        })
    }

    /// The point's draws `first..first + k` over the processes: process p of P runs draws
    /// `first + p`, `first + p + P`, … alone with all the ranks, and every process gets every
    /// outcome (an error in one fails all, after the exchange, so that none is left waiting).
    fn run_split(&self, t: &Tally, first: u64, k: u64) -> anyhow::Result<Vec<DesOutcome>> {
        let (procs, me) = (self.job.comm.size() as u64, self.job.comm.rank() as u64);
        let mine: Vec<u64> = (first + me..first + k).step_by(procs as usize).collect();
        let mut buf = vec![0f64; k as usize * WORDS];
        let mut failed = None;
        for (&d, out) in mine.iter().zip(self.run_here(t, &mine)) {
            let slot = &mut buf[(d - first) as usize * WORDS..][..WORDS];
            match out {
                Ok(o) => encode(&o, slot),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        self.job.comm.all_sum(&mut buf);
        let mut outs = Vec::with_capacity(k as usize);
        for (j, slot) in buf.chunks_exact(WORDS).enumerate() {
            if j as u64 % procs != me {
                // Another process's draw: its phases on this one's progress.
                self.job.progress.inc(t.ranks.saturating_mul(t.phases));
            }
            match decode(slot) {
                Some(o) => outs.push(o),
                None => {
                    return Err(failed.unwrap_or_else(|| {
                        anyhow::anyhow!("a draw failed in another process (its error above)")
                    }))
                }
            }
        }
        Ok(outs)
    }

    /// Adds one draw's outcome to the point's tally; completes its pilot at the pilot's size.
    fn add(&self, t: &mut Tally, out: DesOutcome) -> anyhow::Result<()> {
        t.draws += 1;
        let label = &self.job.traces[t.trace].label;
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
        pool(&mut t.pooled, out);
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
        let mine = if self.job.comm.rank() == 0 && self.started.elapsed() >= self.job.plan.max_time
        {
            1.0
        } else {
            0.0
        };
        let mut v = [mine];
        self.job.comm.all_max(&mut v);
        v[0] > 0.0
    }
}

/// The precision mode of [`crate::predict`]: the simulation's rows of every trace, rank count
/// and mode into `r` (its phases per draw and warm-up in its configuration), each point's draws
/// added until `p.plan` is met. The progress counts rank-phases; its length is re-estimated
/// after every batch and its message says the time left and what it is estimated from.
pub(crate) fn rows(p: &Precise<'_>, r: &mut Report) -> anyhow::Result<()> {
    let fits = phases_in_trace(p.traces, p.quanta_ns);
    let mut tallies: Vec<Tally> = Vec::new();
    for (i, _) in p.traces.iter().enumerate() {
        for &mode in p.modes {
            for &n in p.ranks {
                let phases = phases_per_draw(n, fits) + WARMUP_PHASES;
                tallies.push(Tally::new(i, mode, n, phases));
            }
        }
    }
    let rounds = Rounds {
        job: p,
        started: Instant::now(),
    };
    let (plan, progress) = (p.plan, p.progress);
    progress.set_length(pilot_rank_phases(&tallies, plan.pilot));
    progress.set_message(format!("the pilot: {} draws a point", plan.pilot));
    run_rounds(&rounds, &mut tallies)?;
    r.config.phases = tallies.iter().map(|t| t.phases).max().unwrap_or(0);
    r.config.warmup_phases = WARMUP_PHASES;
    for t in &tallies {
        rows_of(r, p.traces, t, &plan)?;
    }
    Ok(())
}

/// Rank-phases of the pilots of every point (`pilot` draws each).
fn pilot_rank_phases(t: &[Tally], pilot: u64) -> u64 {
    (t.iter())
        .map(|t| pilot * t.phases * t.ranks)
        .fold(0u64, u64::saturating_add)
}

/// Two draws of every point, then every point's pilot, then the planned draws in rounds that
/// at most double each point's draws, until every point has its draws or the time is spent;
/// each point's draws in batches of [`Rounds::at_once`]. The time left is said after every
/// batch, the measured estimates once every point has two draws and once the pilots are done.
fn run_rounds(r: &Rounds<'_>, tallies: &mut [Tally]) -> anyhow::Result<()> {
    let at_once = r.at_once();
    for i in 0..tallies.len() {
        while tallies[i].draws < 2 {
            let k = (2 - tallies[i].draws).min(at_once);
            r.draws(&mut tallies[i], k)?;
            say_left(r, tallies, Stage::Pilot);
        }
    }
    let took = r.started.elapsed().as_secs_f64();
    let left = stage_left_s(tallies.iter().map(|t| (t.draws, r.rule(t).pilot, t.pace)));
    (r.job.say)(&measured(&r.job.plan, tallies.len(), took, left));
    // The pilots (whole), then rounds of the planned draws (at most as many as a point has).
    for stage in 0.. {
        let mut any = false;
        for i in 0..tallies.len() {
            let t = &tallies[i];
            if t.stopped_by.is_some() {
                continue;
            }
            let mut more = if stage == 0 {
                r.rule(t).pilot.saturating_sub(t.draws)
            } else {
                t.planned.saturating_sub(t.draws).min(t.draws)
            };
            any |= more > 0;
            while more > 0 {
                if r.out_of_time() {
                    for t in tallies.iter_mut().filter(|t| t.stopped_by.is_none()) {
                        t.stopped_by = Some("time");
                    }
                    return Ok(());
                }
                let k = more.min(at_once);
                r.draws(&mut tallies[i], k)?;
                more -= k;
                let s = if stage == 0 {
                    Stage::Pilot
                } else {
                    Stage::Planned
                };
                say_left(r, tallies, s);
            }
        }
        if stage == 0 {
            let beyond: u64 = (tallies.iter())
                .map(|t| t.planned.saturating_sub(t.draws))
                .sum();
            let took = r.started.elapsed().as_secs_f64();
            let left = stage_left_s(tallies.iter().map(|t| (t.draws, t.planned, t.pace)));
            (r.job.say)(&planned(&r.job.plan, beyond, took, left));
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

/// The draws `t` is to have at the end of `stage` (its own, once it stopped).
fn target(r: &Rounds<'_>, t: &Tally, stage: Stage) -> u64 {
    if t.stopped_by.is_some() {
        return t.draws;
    }
    match stage {
        Stage::Pilot => r.rule(t).pilot,
        Stage::Planned => t.planned,
    }
}

/// Sets the progress bar's length to the rank-phases done and left, and its message to the
/// time they will take at each point's measured pace ([`stage_left_s`]): during the pilot,
/// to its end; after it, to the end of the planned draws.
fn say_left(r: &Rounds<'_>, tallies: &[Tally], stage: Stage) {
    let left: u64 = (tallies.iter())
        .map(|t| target(r, t, stage).saturating_sub(t.draws) * t.phases * t.ranks)
        .fold(0, u64::saturating_add);
    let pos = r.job.progress.position();
    r.job.progress.set_length(pos.saturating_add(left));
    let secs = stage_left_s(
        tallies
            .iter()
            .map(|t| (t.draws, target(r, t, stage), t.pace)),
    );
    let what = match stage {
        Stage::Pilot => "to the end of the pilot",
        Stage::Planned => "to the end of the planned draws",
    };
    r.job
        .progress
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

/// The numbers of an outcome a precision-mode draw carries (its warm-up left out: the batch
/// means are empty).
const NUMBERS: usize = 20;

/// f64s of one draw's outcome as the processes exchange it ([`Rounds::run_split`]): one
/// process's are set and the others' 0, summed over the processes, so each number travels as
/// the two 32-bit halves of its bits (exact integers, which a sum with zeros leaves as they
/// are); the first word says an outcome is there (a failed draw leaves it 0).
const WORDS: usize = 1 + 2 * NUMBERS;

/// Writes `o` into its `WORDS` f64s.
fn encode(o: &DesOutcome, slot: &mut [f64]) {
    let (a, e) = (&o.averages, &o.emulator);
    let bits: [u64; NUMBERS] = [
        a.phases,
        a.sum_max_qt_ns.to_bits(),
        a.sum_max_qtbt_ns.to_bits(),
        a.sum_lost_rel.to_bits(),
        a.first[0].to_bits(),
        a.first[1].to_bits(),
        a.first[2].to_bits(),
        o.requested_phases,
        u64::from(o.stopped_by_fraction),
        o.mean_period_ns.to_bits(),
        o.baseline_qt_ns.to_bits(),
        o.baseline_qtbt_ns.to_bits(),
        o.baseline_period_ns.to_bits(),
        e.injected,
        e.dropped,
        e.merged,
        e.injected_ns,
        e.dropped_ns,
        e.injected_share.to_bits(),
        e.max_progress.to_bits(),
    ];
    slot[0] = 1.0;
    for (i, b) in bits.iter().enumerate() {
        slot[1 + 2 * i] = (b >> 32) as f64;
        slot[2 + 2 * i] = (b & 0xFFFF_FFFF) as f64;
    }
}

/// The outcome in `slot`, if one is there.
fn decode(slot: &[f64]) -> Option<DesOutcome> {
    if slot[0] != 1.0 {
        return None;
    }
    let b = |i: usize| ((slot[1 + 2 * i] as u64) << 32) | slot[2 + 2 * i] as u64;
    let f = |i: usize| f64::from_bits(b(i));
    Some(DesOutcome {
        averages: PhaseAverages {
            phases: b(0),
            sum_max_qt_ns: f(1),
            sum_max_qtbt_ns: f(2),
            sum_lost_rel: f(3),
            first: [f(4), f(5), f(6)],
            batches: Default::default(),
        },
        requested_phases: b(7),
        stopped_by_fraction: b(8) != 0,
        mean_period_ns: f(9),
        baseline_qt_ns: f(10),
        baseline_qtbt_ns: f(11),
        baseline_period_ns: f(12),
        emulator: jitter_report::report::EmulatorTotals {
            injected: b(13),
            dropped: b(14),
            merged: b(15),
            injected_ns: b(16),
            dropped_ns: b(17),
            injected_share: f(18),
            max_progress: f(19),
        },
    })
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

    #[test]
    fn the_time_left_is_each_point_s_missing_draws_at_its_own_pace() {
        let pace = |secs, draws| Pace { secs, draws };
        // 10⁶ ranks: two draws took 6 s (3 s a draw), 14 more to a pilot of 16: 42 s; a small
        // point: 0.5 s for two, 14 more: 3.5 s; a point done or past its target: nothing.
        let left = stage_left_s([
            (2, 16, pace(6.0, 2)),
            (2, 16, pace(0.5, 2)),
            (16, 16, pace(48.0, 16)),
            (20, 16, pace(60.0, 20)),
        ]);
        assert!((left - 45.5).abs() < 1e-12, "{left}");
        // Stein's rule planned 43 draws after a pilot of 16 at 3 s a draw: 81 s more.
        assert!((stage_left_s([(16, 43, pace(48.0, 16))]) - 81.0).abs() < 1e-12);
        // Nothing measured yet: nothing counted.
        assert_eq!(stage_left_s([(0, 16, Pace::default())]), 0.0);
        let mut p = Pace::default();
        p.add(4.0, 2);
        p.add(2.0, 1);
        assert_eq!(p, pace(6.0, 3));
        assert_eq!(p.per_draw(), 2.0);
        // The line says the pilot in all: the first draws' time and the rest.
        let plan = PrecisionPlan {
            precision: DEFAULT_PRECISION,
            max_time: Duration::from_secs(600),
            max_phases: PrecisionPlan::DEFAULT_MAX_PHASES,
            pilot: 16,
        };
        let line = measured(&plan, 2, 6.5, left);
        assert!(
            line.contains("took 6.5 s") && line.contains("about 52 s in all"),
            "{line}"
        );
        let line = planned(&plan, 27, 52.0, 81.0);
        assert!(
            line.contains("plan 27 draws") && line.contains("about 81 s more"),
            "{line}"
        );
    }

    #[test]
    fn an_outcome_crosses_the_exchange_bit_for_bit() {
        use jitter_report::metrics::{PhaseAverages, PhaseSample};
        let mut averages = PhaseAverages::default();
        for (qt, qtbt) in [(1.1e6, 1.3e6), (1.7e6, 2.05e6), (0.1 + 0.2, 1e-300)] {
            averages.add(PhaseSample {
                max_qt_ns: qt,
                max_qtbt_ns: qtbt,
                mean_qt_ns: 1e6 / 3.0,
            });
        }
        let o = DesOutcome {
            averages: averages.without_first(),
            requested_phases: 3,
            stopped_by_fraction: true,
            mean_period_ns: 2.0f64.sqrt() * 1e6,
            baseline_qt_ns: 1e6,
            baseline_qtbt_ns: -0.0,
            baseline_period_ns: f64::NAN,
            emulator: jitter_report::report::EmulatorTotals {
                injected: u64::MAX,
                dropped: 1 << 53 | 1,
                merged: 0,
                injected_ns: 123_456_789_012_345,
                dropped_ns: 7,
                injected_share: 0.999_999_999_999,
                max_progress: f64::INFINITY,
            },
        };
        let mut slots = vec![0.0; 2 * WORDS];
        encode(&o, &mut slots[WORDS..]);
        // Summed with another process's zeros.
        let summed: Vec<f64> = slots.iter().map(|x| x + 0.0).collect();
        assert!(decode(&summed[..WORDS]).is_none());
        let back = decode(&summed[WORDS..]).unwrap();
        assert_eq!(format!("{back:?}"), format!("{o:?}"));
        assert_eq!(back.baseline_qtbt_ns.to_bits(), (-0.0f64).to_bits());
    }
}
