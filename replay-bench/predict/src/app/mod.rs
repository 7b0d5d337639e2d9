//! `replay-bench predict --app app.json`: the application profile's main loop (crate
//! `jitter-profile`) in virtual time with the trace's noise at any N — the same traces, plans,
//! placement, offsets, sync schedule, platform and report as the loop (`predict`), the loop's
//! compute–collective phase replaced by the program's iteration.
//!
//! `skeleton` turns the main loop into steps at N ranks (compute means, collectives by their
//! algorithm, messages to the recorded peers grown to N); `clock` answers the ranks' replay
//! questions on the compiled index (the loop's engine: `IndexedReplay`, its quiet times) or by
//! walking the cursor where the index is not exact; `iteration` runs the iterations (the
//! collectives through `collective::run`). Here: every trace, sync mode and rank count over its
//! offset draws into the `predict` report, with the model line that says what was assumed.
//! The simulation runs in one process (no MPI split) and needs no timer-error-free platform.

mod iteration;
pub mod layout;
pub mod measured;
mod replay_clocks;
pub(crate) mod skeleton;
mod stretch;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use jitter_emulator::{SyncMode, SyncSchedule};

use crate::plan_index::{CompileIndex as _, PlanIndex};
use jitter_profile::peers::Growth;
use jitter_profile::{Call, MainLoop, Profile};
use jitter_trace::units::format_ns;

use self::iteration::{iterate, Run, Spec};
pub use self::measured::{MeasuredRun, MeasuredRuns};
use self::replay_clocks::{IdxClock, QuietClock, WalkClock};
pub use self::skeleton::{main_loop, Skeleton};
use super::budget::{self, Estimate};
use super::collective::Costs;
use super::des::{INDEXED_RANK_BYTES, RANK_STATE_BYTES};
use super::input::TraceInput;
use super::phase_loop::BASELINE_PHASES;
use super::prediction_report::{config, des_row, platform_calibration, DrawSlowdowns, Prediction};
use super::rank_layout::{RunWindow, Timelines};
use super::simulation::{pool, DesOutcome};
use super::spec::PredictSpec;
use jitter_report::report::{DrawSpread, EmulatorTotals, Report, ReportKind, RunPredicted};

/// A profile ready to predict: its main loop and how its peers grow.
#[derive(Debug, Clone)]
pub struct App {
    /// The profile's path, as given.
    pub path: String,
    /// The main loop.
    pub main_loop: MainLoop,
    /// Ranks of the profiled job (the size its peer offsets were recorded at).
    pub profiled_ranks: u64,
    /// The program's Cartesian topology, if any.
    pub cartesian: Option<jitter_profile::profile::Cartesian>,
    /// `--runs-of`: measured runs to predict one by one instead of offset draws.
    pub runs: Option<MeasuredRuns>,
}

impl App {
    /// Reads the profile at `path` and finds its main loop.
    pub fn read(path: &Path) -> anyhow::Result<App> {
        let shown = path.display().to_string();
        let profile = Profile::read(path)
            .map_err(|e| anyhow::Error::new(e).context("cannot read the profile"))?;
        let l = main_loop(&profile, &shown)?.clone();
        Ok(App {
            path: shown,
            main_loop: l,
            profiled_ranks: profile.ranks.max(1),
            cartesian: profile.cartesian,
            runs: None,
        })
    }

    /// How the profile's peers grow to `ranks`.
    pub fn growth(&self, ranks: u64) -> Growth {
        Growth {
            profiled_ranks: self.profiled_ranks,
            ranks,
            cartesian: self.cartesian.clone(),
        }
    }

    /// Simulations per point: the measured runs of `--runs-of`, else the offset draws.
    fn draws(&self, spec: &PredictSpec) -> u64 {
        self.runs
            .as_ref()
            .map_or(spec.draws.max(1), |m| m.runs.len() as u64)
    }

    /// The model line: what was assumed, and what was predicted on the platform.
    pub fn model_line(&self, spec: &PredictSpec) -> String {
        let c = &spec.des.comm;
        let grown = if self.growth(2).cartesian() {
            "Cartesian strides grown by MPI_Dims_create"
        } else {
            "ring offsets mod N"
        };
        format!(
            "model: application {} ({} calls per iteration, profiled at {} ranks): compute = \
             each slot's mean (Σ {} per iteration; its spread not drawn); barrier and allgather \
             by dissemination, allreduce by recursive doubling, reduce/bcast by binomial tree \
             halves at rank 0, alltoall(v) pairwise; point-to-point to the profiled peers, {grown} \
             (P/2 and a 2-rank dimension alternating); messages LogP o = {}, l = {} (bytes not modelled: no G); {}; {}{}{}",
            self.path,
            self.main_loop.slots.len(),
            self.profiled_ranks,
            format_ns(self.main_loop.mean_compute_ns()),
            format_ns(c.o_ns),
            format_ns(c.l_ns),
            self.resyncs(),
            spec.platform.predicted(),
            self.kinds(),
            self.alltoall_note()
        )
    }

    /// Where the loop has an alltoall(v): what its pairwise model assumes.
    fn alltoall_note(&self) -> &'static str {
        let l = &self.main_loop;
        let has = (l.slots.iter())
            .chain(l.kinds.iter().flat_map(|k| k.slots.iter()))
            .any(|s| matches!(s.site.call, Call::Alltoall | Call::Alltoallv));
        if has {
            "; each alltoall(v) round waits on a new partner: under sync none the ranks' detours \
             add up along its N − 1 rounds, a library's worst case (Bruck's log₂ N rounds or an \
             all-at-once exchange wait on fewer)"
        } else {
            ""
        }
    }

    /// The kinds of iteration replayed besides the body, if any.
    fn kinds(&self) -> String {
        let l = &self.main_loop;
        if l.kinds.is_empty() {
            return String::new();
        }
        let n: u64 = l.order.iter().map(|r| r.1).sum();
        format!(
            "; {} kinds of iteration besides the body ({} of {n} recorded iterations), each \
             iteration replayed as its kind in the recorded order (a run of fewer iterations \
             takes every (recorded ÷ run)-th; compute above: the mean per iteration)",
            l.kinds.len(),
            n - l
                .order
                .iter()
                .filter(|r| r.0 == 0)
                .map(|r| r.1)
                .sum::<u64>()
        )
    }

    /// Where the replay resyncs: at each `MPI_Barrier` of the loop, the preload library's rule.
    fn resyncs(&self) -> String {
        let barriers = (self.main_loop.slots.iter())
            .filter(|s| s.site.call == jitter_profile::Call::Barrier)
            .count();
        if barriers == 0 {
            "resync at MPI_Barrier as the preload library does: the loop has none, so sync \
             phase and every:K replay as once"
                .into()
        } else {
            format!("resync at MPI_Barrier as the preload library does ({barriers} per iteration)")
        }
    }
}

/// Checks what `predict --app` cannot model before anything runs.
pub fn check(spec: &PredictSpec, traces: &[TraceInput]) -> anyhow::Result<()> {
    anyhow::ensure!(
        traces.iter().all(|t| t.background.is_none()),
        "--app does not model --platform-noise"
    );
    anyhow::ensure!(!spec.ranks.is_empty(), "no rank count to predict");
    Ok(())
}

/// The cost of `app` at the largest rank count, every trace, mode and draw (one process).
pub fn estimate(app: &App, traces: &[TraceInput], spec: &PredictSpec) -> anyhow::Result<Estimate> {
    let n = spec.ranks.iter().copied().max().unwrap_or(1);
    let sk = Skeleton::new(
        &app.main_loop,
        &app.growth(n),
        spec.platform.options().scale,
    )?;
    let opts = spec.platform.options();
    // The walk where the index is not exact: timer errors or an O-after-a-gap curve; it walks
    // every detour an iteration meets (its compute at least).
    let walk = spec.des.drift_sd_ns > 0.0 || !opts.overhead_by_gap.points().is_empty();
    let rounds: f64 = sk.per_iteration(|steps| {
        (steps.iter())
            .map(|s| match s {
                skeleton::Step::Collective(a) => super::collective::round_count(*a, n) as f64,
                _ => 0.0,
            })
            .sum()
    });
    let steps = sk.per_iteration(|steps| steps.len() as f64);
    let costs = Costs::scaled(&spec.des.comm.resolved(), opts.scale);
    let per_rank_iteration = |t: &TraceInput, mode: SyncMode| {
        if walk {
            // Every round and step asked, each detour of the compute walked.
            let others = steps - sk.per_iteration(|s| collectives(s) as f64);
            let asked = rounds * (budget::COLLECTIVE_NS_PER_ROUND + budget::COLLECTIVE_NS_PER_ASK)
                + others * 2.0 * budget::INDEXED_NS_PER_EVENT;
            let walked = budget::density(t) * sk.compute_ns as f64 * budget::NS_PER_EVENT;
            asked * 3.0 + walked
        } else {
            cost_indexed(&sk, rounds, t, (mode, n), costs)
        }
    };
    // States per point: one where the ranks stay alike (as `Point::simulate` decides), else N.
    let states = |t: &TraceInput, mode: SyncMode| {
        let common = mode != SyncMode::None;
        let alike = !walk && t.plans.len() == 1 && common && sk.symmetric;
        if alike {
            1.0
        } else {
            n as f64
        }
    };
    // The index of every replayed stream, compiled once (none when walked).
    let index_ns = if walk {
        0.0
    } else {
        (traces.iter().flat_map(|t| t.plans.iter()))
            .map(|p| p.records().len() as f64 * budget::INDEX_NS_PER_RECORD)
            .sum()
    };
    let repeats = spec.des.phases as f64 * app.draws(spec) as f64;
    let (mut rank_iterations, mut ns) = (0.0, 0.0);
    for t in traces {
        for &m in &spec.modes {
            rank_iterations += states(t, m) * repeats;
            ns += states(t, m) * repeats * per_rank_iteration(t, m);
        }
    }
    let threads = rayon::current_num_threads() as f64 * budget::THREAD_EFFICIENCY;
    let state = if walk {
        RANK_STATE_BYTES
    } else {
        INDEXED_RANK_BYTES
    };
    let per_rank = (state + 8 * (3 + sk.buffers) + super::collective::BYTES_PER_RANK) as u64;
    Ok(Estimate {
        events: rank_iterations * steps,
        seconds: (ns / threads.max(1.0) + index_ns) * 1e-9,
        bytes: n.checked_mul(per_rank),
    })
}

/// Cost of one step inside a local stretch once the rank's quiet time is known (an addition
/// and a maximum; [`cost_indexed`]), ns: ≈ 35 instructions per step under callgrind
/// (`scripts/bench-predict-app.sh --cachegrind`); the estimate it enters is checked within ×2 of the CPU
/// time by the release test `predict_estimate_app`.
pub(crate) const APP_NS_PER_LOCAL_STEP: f64 = 3.0;

/// Collective steps of `steps`.
fn collectives(steps: &[skeleton::Step]) -> usize {
    (steps.iter())
        .filter(|s| matches!(s, skeleton::Step::Collective(_)))
        .count()
}

/// One rank-iteration on the index, ns: each local stretch a visit to the rank and an addition
/// per step ([`APP_NS_PER_LOCAL_STEP`] each), each detour met in the compute one question;
/// the collectives' `rounds` in closed form and one question per detour due while a rank is in
/// them (at most one per round): their noise-free rounds and, without resyncs, the slowest
/// rank's lag ([`budget::slowest_lag_ns`]), as the loop's estimate prices its collectives.
fn cost_indexed(sk: &Skeleton, rounds: f64, t: &TraceInput, at: (SyncMode, u64), c: Costs) -> f64 {
    let (mode, n) = at;
    let density = budget::density(t);
    let busy = t.info.noise_ratio.clamp(0.0, 0.9);
    let local = sk.per_iteration(|steps| {
        (stretch::stretches(steps, sk.buffers).iter())
            .map(|s| match s {
                // The pass's visit to the rank (its state, time and compute, the cached quiet
                // time compared: a step's work) and its steps; a question only for a detour
                // met (`met`, below).
                stretch::Stretch::Local(r) => (r.len() + 1) as f64 * APP_NS_PER_LOCAL_STEP,
                stretch::Stretch::Single(i) => match steps[*i] {
                    skeleton::Step::Collective(_) => 0.0,
                    _ => budget::INDEXED_NS_PER_EVENT,
                },
            })
            .sum()
    });
    let compute = sk.compute_ns as f64;
    let met = density * compute / (1.0 - busy);
    let lag = if mode == SyncMode::None {
        budget::slowest_lag_ns(t, compute, n)
    } else {
        0.0
    };
    let due = density * (rounds * (2 * c.o + c.l) as f64 + lag);
    // A detour met in a stretch: the question, then the rank's quiet time asked again.
    local
        + met * (budget::COLLECTIVE_NS_PER_ASK + budget::INDEXED_NS_PER_EVENT)
        + rounds * budget::COLLECTIVE_NS_PER_ROUND
        + due.min(rounds) * budget::COLLECTIVE_NS_PER_ASK
}

/// Predicts `app` on every trace, mode and rank count of `spec`, over its draws.
pub fn predict(app: &App, traces: &[TraceInput], spec: &PredictSpec) -> anyhow::Result<Prediction> {
    check(spec, traces)?;
    if let Some(m) = &app.runs {
        m.check(&spec.ranks, &spec.modes, spec.platform.options().scale)?;
    }
    let mut cfg = config(traces, spec);
    let scale = spec.platform.options().scale;
    cfg.quanta_ns = app.main_loop.mean_compute_ns().round() as u64;
    if let Some(d) = cfg.predict.as_mut() {
        d.loop_shape = "application".into();
        d.collective = "per call".into();
        d.communication_model = app.model_line(spec);
    }
    let mut r = Report::new(ReportKind::PredictDes, cfg);
    r.calibration.push(platform_calibration(&spec.platform));
    if let Some(note) = app.runs.as_ref().and_then(MeasuredRuns::note) {
        r.warnings.push(note);
    }
    for t in traces {
        // The index where it answers exactly (no timer errors, no O-after-a-gap curve).
        let ix: Option<Vec<PlanIndex>> = (spec.des.drift_sd_ns == 0.0)
            .then(|| {
                t.plans
                    .iter()
                    .map(|p| p.index())
                    .collect::<Option<Vec<_>>>()
            })
            .flatten();
        if let Some(note) =
            jitter_emulator::placement::note(spec.des.ranks_per_node, t.info.streams as u64)
        {
            r.warnings.push(format!("{}: {note}", t.label));
        }
        for &mode in &spec.modes {
            for &n in &spec.ranks {
                let sk = Skeleton::new(&app.main_loop, &app.growth(n), scale)
                    .with_context(|| format!("profile {}", app.path))?;
                for w in &sk.warnings {
                    r.warnings.push(format!("{} at {n} ranks: {w}", app.path));
                }
                let point = Point {
                    runs: app.runs.as_ref(),
                    input: t,
                    ix: ix.as_deref(),
                    skeleton: &sk,
                    n,
                    mode,
                };
                point.row(&mut r, spec)?;
            }
        }
    }
    r.warnings.dedup();
    Ok(Prediction {
        des: Some(r),
        order_stats: None,
    })
}

/// One trace, rank count and mode.
struct Point<'a> {
    runs: Option<&'a MeasuredRuns>,
    input: &'a TraceInput,
    ix: Option<&'a [PlanIndex]>,
    skeleton: &'a Skeleton,
    n: u64,
    mode: SyncMode,
}

impl Point<'_> {
    /// The point's row over its draws (pooled, with the range of the draws' slowdowns).
    fn row(&self, r: &mut Report, spec: &PredictSpec) -> anyhow::Result<()> {
        let (t, n, mode) = (self.input, self.n, self.mode);
        let draws = self.draws(spec);
        let mut pooled = None;
        let mut spread = DrawSpread {
            draws: draws.len() as u64,
            sd_qtbt_range_pct: [f64::INFINITY, f64::NEG_INFINITY],
            sd_qt_range_pct: [f64::INFINITY, f64::NEG_INFINITY],
        };
        let mut each = DrawSlowdowns::default();
        let mut baselines = Baselines::default();
        for (run, seed, at) in draws {
            let out = self.simulate(spec, seed, at)?;
            baselines.add(&out);
            let row = des_row(&t.label, n, mode, &out);
            each.add(&mut spread, &row, out.averages.phases);
            if let Some(run) = run {
                r.measured_runs.push(RunPredicted {
                    trace: t.label.clone(),
                    ranks: n,
                    sync: mode.to_string(),
                    pair: run.pair,
                    seed,
                    sd_qtbt_pct: row.sd_qtbt_pct,
                    sd_qt_pct: row.sd_qt_pct,
                    noise_share: noise_share(&out, n, spec.platform.options().scale),
                });
            }
            pool(&mut pooled, out);
        }
        let draws = spread.draws;
        let mut out = pooled.context("no draw")?;
        baselines.into_pooled(&mut out);
        anyhow::ensure!(
            out.averages.phases > 0,
            "{} at {n} ranks, sync {mode}: the trace is too short for one iteration",
            t.label
        );
        if out.stopped_by_fraction {
            r.warnings.push(format!(
                "{} at {n} ranks, sync {mode}: a rank replayed f = {} of its stream after {} \
                 of {} iterations; the run stopped there",
                t.label,
                spec.platform.options().fraction,
                out.averages.phases,
                spec.des.phases * draws
            ));
        }
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

    /// The simulations of the point: each measured run of `--runs-of` (its pair, its seed, the
    /// library's points), else the offset draws (seeds seed, seed + 1, …).
    fn draws(&self, spec: &PredictSpec) -> Vec<(Option<MeasuredRun>, u64, Option<Arc<RunWindow>>)> {
        match self.runs {
            Some(m) => {
                let streams = self.input.info.streams as u64;
                let period = self.input.plans[0].period_ns();
                (m.runs.iter())
                    .map(|&run| (Some(run), run.seed, Some(m.window(run, streams, period))))
                    .collect()
            }
            None => (0..spec.draws.max(1))
                .map(|d| (None, spec.des.seed.wrapping_add(d), None))
                .collect(),
        }
    }

    /// One draw (seed `seed`, started at a run's `window` if given): the skeleton with the
    /// trace's noise beside the same skeleton without noise (the baseline: its last iteration,
    /// or with kinds the iterations the noisy run recorded).
    fn simulate(
        &self,
        spec: &PredictSpec,
        seed: u64,
        window: Option<Arc<RunWindow>>,
    ) -> anyhow::Result<DesOutcome> {
        let (plans, n, sk) = (&self.input.plans, self.n, self.skeleton);
        let opts = *plans[0].options();
        let periods: Vec<u64> = plans.iter().map(|p| p.period_ns()).collect();
        let lines = Timelines::new(spec.des.ranks_per_node, &periods)?.at_window(window, n)?;
        let place = lines.placement;
        let schedule = SyncSchedule {
            mode: self.mode,
            seed,
        };
        let s = Spec {
            skeleton: sk,
            n,
            iterations: spec.des.phases,
            costs: Costs::scaled(&spec.des.comm.resolved(), opts.scale),
            lines: &lines,
            schedule,
            scale: opts.scale,
            planned: spec.des.phases,
        };
        let count = usize::try_from(n).context("the rank count does not fit in memory")?;
        let run = match self.ix {
            Some(ix) => {
                let clock = IdxClock {
                    ix,
                    place,
                    fraction: opts.fraction,
                };
                let alike = plans.len() == 1 && lines.common_start(self.mode) && sk.symmetric;
                let mut states =
                    if alike {
                        vec![clock.rank(0, lines.start_offset(&schedule, 0), n)]
                    } else {
                        let mut v = Vec::new();
                        v.try_reserve_exact(count)
                            .map_err(|_| anyhow::anyhow!("cannot allocate {n} simulated ranks"))?;
                        v.extend((0..n).map(|r| {
                            clock.rank(place.plan(r), lines.start_offset(&schedule, r), 1)
                        }));
                        v
                    };
                iterate(&clock, &mut states, &s)?.0
            }
            None => {
                let clock = WalkClock {
                    w: spec.des.drift_sd_ns * opts.scale * 3f64.sqrt(),
                    fraction: opts.fraction,
                    scale: opts.scale,
                };
                let mut states = Vec::new();
                states
                    .try_reserve_exact(count)
                    .map_err(|_| anyhow::anyhow!("cannot allocate {n} simulated ranks"))?;
                states.extend((0..n).map(|r| {
                    let plan = &plans[place.plan(r)];
                    clock.rank(plan, lines.start_offset(&schedule, r), r, seed)
                }));
                iterate(&clock, &mut states, &s)?.0
            }
        };
        let quiet = {
            // Every rank starts at 0: a symmetric skeleton keeps them alike (one state).
            let mut units: Vec<u64> = Vec::new();
            if sk.symmetric {
                units.push(n);
            } else {
                units.try_reserve_exact(count).map_err(|_| {
                    anyhow::anyhow!("cannot allocate the baseline's {n} simulated ranks")
                })?;
                units.resize(count, 1);
            }
            // With kinds, the iterations the run recorded (the same kinds in the same order,
            // also where a rank reached f and cut the run short).
            let q = Spec {
                iterations: if sk.order.is_empty() {
                    BASELINE_PHASES.min(spec.des.phases)
                } else {
                    run.averages.phases
                },
                ..s
            };
            iterate(&QuietClock, &mut units, &q)?.0
        };
        Ok(outcome(&run, &quiet, sk, spec.des.phases, opts.scale))
    }
}

/// The draws' baselines, for their pool: with kinds, a draw cut short at f has the baseline of
/// the iterations it recorded, and the pool's is their mean weighted as its phases are.
#[derive(Debug, Default)]
struct Baselines {
    /// Σ phases × (compute, period) baseline, Σ phases.
    sums: [f64; 3],
    /// The first draw's (compute, period), and whether another draw's differed.
    first: Option<[f64; 2]>,
    differ: bool,
}

impl Baselines {
    fn add(&mut self, o: &DesOutcome) {
        let b = [o.baseline_qt_ns, o.baseline_qtbt_ns];
        let p = o.averages.phases as f64;
        self.sums[0] += p * b[0];
        self.sums[1] += p * b[1];
        self.sums[2] += p;
        match self.first {
            None => self.first = Some(b),
            Some(f) => self.differ |= f != b,
        }
    }

    /// Sets the pool's baselines where the draws' differ (equal ones stay as they are).
    fn into_pooled(self, out: &mut DesOutcome) {
        if self.differ && self.sums[2] > 0.0 {
            out.baseline_qt_ns = self.sums[0] / self.sums[2];
            out.baseline_qtbt_ns = self.sums[1] / self.sums[2];
            out.baseline_period_ns = out.baseline_qtbt_ns;
        }
    }
}

/// Mean over the `n` ranks of the injected share of their simulated time (the preload
/// library's `noise_share`: injected span ÷ elapsed).
/// `scale` turns the injected time (scaled, as the plan gives it) into the run's.
fn noise_share(o: &DesOutcome, n: u64, scale: f64) -> f64 {
    let elapsed = o.mean_period_ns * o.averages.phases as f64 * n as f64;
    if elapsed > 0.0 {
        o.emulator.injected_ns as f64 / scale / elapsed
    } else {
        0.0
    }
}

/// The outcome of a run beside its noise-free baseline (its last iteration: the loop settles
/// after the first; with kinds of iteration, the mean over the same iterations), in the loop's
/// fields: qt is an iteration's compute, qtbt its period.
fn outcome(run: &Run, quiet: &Run, sk: &Skeleton, requested: u64, scale: f64) -> DesOutcome {
    let (compute, period) = if sk.order.is_empty() {
        (
            sk.compute_ns as f64 / scale,
            (quiet.last_exit - quiet.prev_exit) as f64 / scale,
        )
    } else {
        (
            quiet.averages.avg_max_qt_ns(),
            quiet.last_exit as f64 / scale / quiet.averages.phases.max(1) as f64,
        )
    };
    let st = &run.stats;
    DesOutcome {
        averages: run.averages,
        requested_phases: requested,
        stopped_by_fraction: run.stopped_by_fraction,
        mean_period_ns: run.last_exit as f64 / scale / run.averages.phases.max(1) as f64,
        baseline_qt_ns: compute,
        baseline_qtbt_ns: period,
        baseline_period_ns: period,
        emulator: EmulatorTotals {
            injected: st.injections,
            dropped: st.dropped,
            merged: st.merged,
            injected_ns: st.injected_ns,
            dropped_ns: st.dropped_ns,
            injected_share: st.injected_share(),
            max_progress: run.max_progress,
        },
    }
}

#[cfg(test)]
mod tests;
