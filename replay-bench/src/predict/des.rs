//! The virtual-time simulation: N virtual ranks execute the Parallel Benchmark (Algorithm 1 of
//! paper 001) against a virtual clock while each replays its stream through the same
//! [`Plan`] the injector executes against the wall clock.
//!
//! Model of one phase, per rank, in replay time (ns, scaled by S):
//! - compute starts at the rank's own start `s` and needs `S·q` of CPU time; every injection due
//!   before the (growing) end of the window takes `span` from it, so the window ends at
//!   `s + S·q + Σ span` over the injections that land in it;
//! - the barrier completes at `B = max over ranks of compute end + S·latency(N)`;
//! - a rank waiting in the barrier loses nothing to detours that end before `B`; one still
//!   running at `B` holds the rank until its end (its barrier exit);
//! - the barrier at the top of the next phase (Algorithm 1, line 3) completes at the latest exit
//!   plus one latency; a rank leaves it like the other barrier, and its next compute starts there.
//!
//! qt = compute end − s, qtb = barrier exit − s. Memory is O(ranks): one [`RankState`] each,
//! reused across phases; nothing is allocated per phase. Under MPI the ranks are split over the
//! processes and the per-phase maxima and sums are reduced with the [`Collective`]; every
//! virtual rank draws from its own seeded generator, so the split does not change the result.
//!
//! Engines (`Engine`): the walk (a `Cursor` per rank) and the indexed engine (an
//! `IndexedReplay` over the trace's `PlanIndex`, compiled once per trace), the default where
//! it applies (no timer errors); both behind the trait `ReplayEngine`, so that one phase loop,
//! `offloaded`, and the algorithmic collectives serve both. Ranks that are exact copies (one
//! plan, one start offset: `sorted_states`) are one state with a count; sums are multiplied by
//! it, maxima are not. Passes hand out chunks of at least `MIN_CHUNK` states (`chunk_of`); a
//! chunk of one plan's states runs a loop compiled with that plan fixed
//! (`ReplayEngine::uniform`), which asks for the index lines of the ranks `PREFETCH_AHEAD`
//! states ahead so that their cache misses overlap. `set_limit` finds ahead where each replay
//! reaches the fraction f, and the phase it does is dropped when the phases close.

use std::sync::Arc;

use jitter_emulator::{
    Cursor, IndexedReplay, Plan, PlanIndex, PlanOptions, PlanStats, PrefetchTicket, SegmentStart,
    SyncMode, SyncSchedule,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::collective::{self, symmetric, Algorithm, Clocks, CommModel, Costs, LoopShape, Scratch};
use super::placement::{Placement, RunWindow, Timelines};
use crate::comm::{Collective, Solo};
use crate::metrics::{PhaseAverages, PhaseSample};
use crate::report::EmulatorTotals;

/// Barrier latency: `ceil(log2 N) · stage` (a dissemination or tree barrier of N ranks).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BarrierModel {
    /// Latency of one stage, ns (unscaled, the units of a report).
    pub stage_ns: f64,
}

impl BarrierModel {
    /// Barrier latency for `ranks` ranks, ns (unscaled); 0 for one rank.
    pub fn latency_ns(&self, ranks: u64) -> f64 {
        f64::from(ceil_log2(ranks)) * self.stage_ns
    }
}

/// `ceil(log2 n)`, 0 for n ≤ 1.
pub fn ceil_log2(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}

/// Everything a simulation needs besides the plans, the rank count and the sync mode.
#[derive(Debug, Clone, PartialEq)]
pub struct DesConfig {
    /// Work quanta q per phase, ns (unscaled).
    pub quanta_ns: u64,
    /// Phases to simulate (fewer when the fraction stop rule ends the replay first).
    pub phases: u64,
    /// Ranks per node k: rank r belongs to node group `r / k` and replays stream `r mod k` of
    /// node trace `(r / k) mod n` (the plans hold k per node trace: [`Placement`]).
    pub ranks_per_node: u64,
    /// Barrier latency model (of [`Algorithm::Offloaded`]).
    pub barrier: BarrierModel,
    /// The loop and its collective: offloaded (the fixed latency above) or an algorithm whose
    /// messages run on the ranks' replay clocks ([`collective`]).
    pub comm: CommModel,
    /// Standard deviation of one timer error, ns; each injection adds one to the rank's drift
    /// (a random walk, reset at every resync). 0 disables drift (`--timer abstime`).
    pub drift_sd_ns: f64,
    /// Seed of the sync schedule and of the timer errors.
    pub seed: u64,
    /// A real run's window to start from instead of the schedule's offsets (`None`: the
    /// schedule's): a prediction of the stretches the run replayed (`predict --windows-of`).
    pub window: Option<Arc<RunWindow>>,
}

/// What one simulation measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DesOutcome {
    /// Per-phase maxima, averaged (unscaled ns).
    pub averages: PhaseAverages,
    /// Phases requested.
    pub requested_phases: u64,
    /// True when the fraction stop rule ended the run before `requested_phases`.
    pub stopped_by_fraction: bool,
    /// Mean time from one barrier completion to the next (the phase period), ns (unscaled).
    pub mean_period_ns: f64,
    /// Baseline AvgMaxQT: the same model without noise, ns (unscaled).
    pub baseline_qt_ns: f64,
    /// Baseline AvgMaxQTBT, ns (unscaled).
    pub baseline_qtbt_ns: f64,
    /// The phase period without noise, ns (unscaled): what `mean_period_ns` would be.
    pub baseline_period_ns: f64,
    /// What the plans injected, summed over ranks.
    pub emulator: EmulatorTotals,
}

impl DesOutcome {
    /// This outcome (the trace united with a platform's noise) against `base` (the platform's
    /// noise alone, same ranks, mode and offsets, over the same stretch of timeline) as its
    /// baseline: the baselines become
    /// `base`'s measured values, and the emulator counts what the trace added over the
    /// platform's own, with the injected share of `lap` (the trace plans' counts over a lap).
    pub fn over_background(&mut self, base: &DesOutcome, lap: &PlanStats) {
        self.baseline_qt_ns = base.averages.avg_max_qt_ns();
        self.baseline_qtbt_ns = base.averages.avg_max_qtbt_ns();
        self.baseline_period_ns = base.mean_period_ns;
        // The baseline may have run more phases (the same stretch of timeline): per phase.
        let per = self.averages.phases as f64 / base.averages.phases.max(1) as f64;
        let (e, b) = (&mut self.emulator, &base.emulator);
        e.injected = e
            .injected
            .saturating_sub((b.injected as f64 * per).round() as u64);
        e.injected_ns = e
            .injected_ns
            .saturating_sub((b.injected_ns as f64 * per).round() as u64);
        e.injected_share = lap.injected_share();
    }
}

/// Bytes the simulation holds per simulated rank (one `RankState`, nothing per phase).
pub const RANK_STATE_BYTES: usize = std::mem::size_of::<RankState>();

/// One virtual rank: its replay, the next injection (timer error applied) and its clock.
#[derive(Debug, Clone)]
struct RankState {
    cursor: Cursor,
    /// Next injection as (due, span), due already drifted and clamped.
    pending: Option<(u64, u64)>,
    /// Start of the rank's current phase, replay ns.
    start_ns: u64,
    /// End of the last injection applied (injections never overlap).
    busy_until: u64,
    /// Accumulated timer error, ns.
    drift_ns: i64,
    /// Replay time at which the cursor's progress reaches the fraction f (progress grows
    /// linearly with replay time between resyncs), so the stop rule is one comparison.
    limit_at: u64,
    rng: SmallRng,
}

impl RankState {
    /// Recomputes [`RankState::limit_at`] at replay time `now` (after a start or a resync).
    fn set_limit(&mut self, now: u64, fraction: f64, scale: f64) {
        let ns_per_progress = self.cursor.plan().period_ns() as f64 * scale;
        let left = (fraction - self.cursor.progress_at(now)) * ns_per_progress;
        self.limit_at = now.saturating_add(left.max(0.0).ceil() as u64);
    }

    /// Jumps to timeline point `off` at replay time `start` (drift and pending injection reset).
    fn resync(&mut self, off: u64, start: u64, fraction: f64, scale: f64) {
        self.cursor.resync(off, start);
        self.pending = None;
        self.drift_ns = 0;
        self.busy_until = start;
        self.set_limit(start, fraction, scale);
    }

    #[inline]
    fn peek(&mut self, drift_half_width: f64) -> Option<(u64, u64)> {
        if self.pending.is_none() {
            let inj = self.cursor.next()?;
            let mut due = inj.due_ns;
            if drift_half_width > 0.0 {
                self.drift_ns += self
                    .rng
                    .random_range(-drift_half_width..=drift_half_width)
                    .round() as i64;
                due = due.saturating_add_signed(self.drift_ns);
            }
            self.pending = Some((due.max(self.busy_until), inj.span_ns));
        }
        self.pending
    }

    #[inline]
    fn consume(&mut self, due: u64, span: u64) {
        self.pending = None;
        self.busy_until = due + span;
        // Executed: counted now, also when a resync follows before the next is asked for.
        self.cursor.confirm();
    }

    /// Leaves the barrier that completes at `b`: returns the exit time.
    #[inline]
    fn leave_barrier(&mut self, b: u64, w: f64) -> u64 {
        while let Some((due, span)) = self.peek(w) {
            if due >= b {
                break;
            }
            self.consume(due, span);
            if due + span > b {
                return due + span;
            }
        }
        b
    }

    /// Computes `q` from `start`: returns the end of the compute window.
    #[inline]
    fn compute(&mut self, start: u64, q: u64, w: f64) -> u64 {
        let mut end = start + q;
        while let Some((due, span)) = self.peek(w) {
            if due >= end {
                break;
            }
            self.consume(due, span);
            end += span;
        }
        end
    }
}

/// Reduction of one pass over the ranks (integers, so the result does not depend on how rayon
/// splits the ranks).
#[derive(Debug, Clone, Copy, Default)]
struct Pass {
    max_end: u64,
    max_qt: u64,
    sum_qt: u64,
    max_qtb_prev: u64,
    over_limit: bool,
}

/// Combines the passes of all processes (a no-op for one process). Times stay well below
/// 2^53 ns, so the f64 collectives are exact.
fn reduce(comm: &dyn Collective, p: Pass) -> Pass {
    if comm.size() == 1 {
        return p;
    }
    let mut max = [
        p.max_end as f64,
        p.max_qt as f64,
        p.max_qtb_prev as f64,
        f64::from(u8::from(p.over_limit)),
    ];
    comm.all_max(&mut max);
    let mut sum = [p.sum_qt as f64];
    comm.all_sum(&mut sum);
    Pass {
        max_end: max[0] as u64,
        max_qt: max[1] as u64,
        sum_qt: sum[0] as u64,
        max_qtb_prev: max[2] as u64,
        over_limit: max[3] > 0.0,
    }
}

impl Pass {
    fn join(a: Pass, b: Pass) -> Pass {
        Pass {
            max_end: a.max_end.max(b.max_end),
            max_qt: a.max_qt.max(b.max_qt),
            sum_qt: a.sum_qt + b.sum_qt,
            max_qtb_prev: a.max_qtb_prev.max(b.max_qtb_prev),
            over_limit: a.over_limit || b.over_limit,
        }
    }
}

/// The contiguous share `[lo, hi)` of `ranks` simulated ranks that process `me` of `procs`
/// simulates (no overflow for any rank count).
pub fn share(ranks: u64, procs: u64, me: u64) -> (u64, u64) {
    let at = |i: u64| (u128::from(ranks) * u128::from(i) / u128::from(procs.max(1))) as u64;
    (at(me), at(me + 1))
}

/// How the simulation advances each rank through its replay plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Engine {
    /// The plan's cursor, injection by injection (cost grows with the detours walked).
    Walk,
    /// The plan compiled once per stream ([`PlanIndex`]), each question answered by search;
    /// the walk where the index is not exact (timer errors, an O-after-a-gap curve).
    #[default]
    Indexed,
}

/// The fewest states a parallel pass hands one worker at a time: fewer cost more in hand-over
/// than they save.
pub const MIN_CHUNK: usize = 1024;

/// States per chunk of a parallel pass over `states` states: several chunks per worker, so that
/// a worker slowed by other work on the machine does not hold the pass, and at least
/// [`MIN_CHUNK`].
pub fn chunk_of(states: usize) -> usize {
    (states / (rayon::current_num_threads().max(1) * 8)).max(MIN_CHUNK)
}

/// Bytes the indexed simulation holds per simulated rank.
pub const INDEXED_RANK_BYTES: usize = std::mem::size_of::<IdxRank>();

/// Bytes per simulated rank the indexed simulation holds while it sets the ranks up (their
/// stream, start offset and count of copies, sorted).
pub const INDEXED_SETUP_BYTES: usize = std::mem::size_of::<(u32, u64, u64)>();

/// One virtual rank of the indexed engine.
#[derive(Debug, Clone, Copy)]
struct IdxRank {
    rep: IndexedReplay,
    start_ns: u64,
    limit_at: u64,
    /// Simulated ranks this state stands for ([`ReplayEngine::copies`]).
    copies: u64,
}

/// Whether `engine` with `cfg` may answer from the index: the indexed engine without timer
/// errors (drawn per injection, which no index holds); the plans must also have one.
pub fn index_allowed(engine: Engine, cfg: &DesConfig) -> bool {
    engine == Engine::Indexed && cfg.drift_sd_ns == 0.0
}

/// True when `engine` can run `plans` with `cfg` exactly: the indexes, else `None`.
pub fn indexes(plans: &[Arc<Plan>], cfg: &DesConfig, engine: Engine) -> Option<Vec<PlanIndex>> {
    if !index_allowed(engine, cfg) {
        return None;
    }
    Placement::new(cfg.ranks_per_node, plans.len()).ok()?;
    // One plan per stream: indexed side by side.
    plans.par_iter().map(|p| p.index()).collect()
}

/// Simulates `ranks` ranks for `cfg.phases` phases under `mode`; `plans` holds k =
/// `cfg.ranks_per_node` plans per node trace (`plans[t·k + s]` is stream s of node trace t; one
/// trace: `plans[s]` is stream s), mapped to ranks by [`Placement`]. `on_phase` is called
/// after every phase (progress).
pub fn simulate(
    plans: &[Arc<Plan>],
    ranks: u64,
    mode: SyncMode,
    cfg: &DesConfig,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    simulate_on(&Solo, plans, ranks, mode, cfg, on_phase)
}

/// As [`simulate`], with the ranks split over the processes of `comm` (each simulates a
/// contiguous share; per-phase maxima and sums are reduced); every process gets the outcome.
pub fn simulate_on(
    comm: &dyn Collective,
    plans: &[Arc<Plan>],
    ranks: u64,
    mode: SyncMode,
    cfg: &DesConfig,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    simulate_engine(comm, plans, ranks, mode, cfg, Engine::default(), on_phase)
}

/// As [`simulate_on`] with the engine chosen (the indexed one falls back to the walk where it
/// is not exact; both give the same outcome).
pub fn simulate_engine(
    comm: &dyn Collective,
    plans: &[Arc<Plan>],
    ranks: u64,
    mode: SyncMode,
    cfg: &DesConfig,
    engine: Engine,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    let ix = indexes(plans, cfg, engine);
    simulate_with(comm, plans, ix.as_deref(), ranks, mode, cfg, on_phase)
}

/// As [`simulate_engine`] with the indexes built once by the caller ([`indexes`]), so that a
/// table of rank counts and sync modes compiles each stream once; `None`: the walk.
pub fn simulate_with(
    comm: &dyn Collective,
    plans: &[Arc<Plan>],
    ix: Option<&[PlanIndex]>,
    ranks: u64,
    mode: SyncMode,
    cfg: &DesConfig,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    match ix {
        Some(ix)
            if Placement::new(cfg.ranks_per_node, plans.len()).is_ok()
                && ix.len() == plans.len() =>
        {
            simulate_indexed(comm, ix, ranks, mode, cfg, on_phase)
        }
        _ => simulate_walk(comm, plans, ranks, mode, cfg, on_phase),
    }
}

fn simulate_walk(
    comm: &dyn Collective,
    plans: &[Arc<Plan>],
    ranks: u64,
    mode: SyncMode,
    cfg: &DesConfig,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    let periods: Vec<u64> = plans.iter().map(|p| p.period_ns()).collect();
    let lines =
        Timelines::new(cfg.ranks_per_node, &periods)?.at_window(cfg.window.clone(), ranks)?;
    let place = lines.placement;
    let opts = *plans[0].options();
    let scale = opts.scale;
    let schedule = SyncSchedule {
        mode,
        seed: cfg.seed,
    };
    let ph = Phases::new(ranks, cfg, &opts)?;
    // Uniform errors of this half-width have the requested standard deviation; their sum over
    // many injections is normal (central limit), which is what a random-walk drift needs.
    let w = cfg.drift_sd_ns * scale * 3f64.sqrt();

    let (procs, me) = (comm.size() as u64, comm.rank() as u64);
    let (lo, hi) = share(ranks, procs, me);
    // The caller estimates memory first (`predict::budget`); this is the last line of defence:
    // a size that cannot be represented or allocated is an error, never an abort.
    let count = usize::try_from(hi - lo)
        .ok()
        .filter(|n| n.checked_mul(RANK_STATE_BYTES).is_some())
        .ok_or_else(|| anyhow::anyhow!("{} simulated ranks do not fit in memory", hi - lo))?;
    let mut states: Vec<RankState> = Vec::new();
    states.try_reserve_exact(count).map_err(|_| {
        anyhow::anyhow!(
            "cannot allocate {} MiB for {count} simulated ranks",
            (count as u128 * RANK_STATE_BYTES as u128) >> 20
        )
    })?;
    states.extend((lo..hi).map(|r| {
        let plan = &plans[place.plan(r)];
        RankState {
            cursor: plan.cursor(lines.start_offset(&schedule, r)),
            pending: None,
            start_ns: 0,
            busy_until: 0,
            drift_ns: 0,
            limit_at: u64::MAX,
            rng: SmallRng::seed_from_u64(
                cfg.seed ^ r.wrapping_add(1).wrapping_mul(0xA076_1D64_78BD_642F),
            ),
        }
    }));
    let fraction = opts.fraction;
    for s in states.iter_mut() {
        s.set_limit(0, fraction, scale);
    }
    let mut eng = WalkClocks {
        w,
        fraction,
        scale,
        place,
        lo,
    };
    if cfg.comm.resolved().algorithm != Algorithm::Offloaded {
        return algorithmic(
            comm,
            &mut eng,
            &mut states,
            lo,
            ranks,
            &schedule,
            &lines,
            cfg,
            &opts,
            on_phase,
        );
    }
    offloaded(
        comm,
        &mut eng,
        &mut states,
        &lines,
        &schedule,
        cfg,
        ph,
        on_phase,
    )
}

/// The phase loop's bookkeeping, the same for both engines: the scaled quanta and barrier
/// latency, the barrier every rank leaves next, the averages of the phases closed so far, and
/// whether the fraction rule stopped the run.
struct Phases {
    ranks: u64,
    q: u64,
    scale: f64,
    latency: u64,
    averages: PhaseAverages,
    /// When the bottom barrier of the last computed phase completes (replay ns).
    barrier_prev: Option<u64>,
    /// (max qt, sum qt) of the last computed phase.
    prev: Option<(u64, u64)>,
    stopped_by_fraction: bool,
    last_barrier: u64,
    /// The loop has a barrier at its top (Algorithm 1); else a phase starts where the last
    /// one's collective left the rank.
    top_barrier: bool,
    /// The phase period without noise (replay ns).
    baseline_period: u64,
}

impl Phases {
    /// Checks the configuration and scales q and the barrier latency by the plan's S.
    fn new(ranks: u64, cfg: &DesConfig, opts: &PlanOptions) -> anyhow::Result<Self> {
        anyhow::ensure!(ranks > 0, "the rank count must be at least 1");
        anyhow::ensure!(cfg.phases > 0, "the phase count must be at least 1");
        let q = opts.scaled(cfg.quanta_ns);
        anyhow::ensure!(q > 0, "the quanta must be at least 1 ns");
        let latency = (cfg.barrier.latency_ns(ranks) * opts.scale).round() as u64;
        let top_barrier = cfg.comm.shape == LoopShape::BarrierComputeBarrier;
        Ok(Phases {
            ranks,
            q,
            scale: opts.scale,
            latency,
            baseline_period: q + latency * (1 + u64::from(top_barrier)),
            averages: PhaseAverages::default(),
            barrier_prev: None,
            prev: None,
            stopped_by_fraction: false,
            last_barrier: 0,
            top_barrier,
        })
    }

    /// Closes phase `p − 1` once every rank has left its bottom barrier (`exits`, reduced over
    /// processes): records it, or stops the run when some rank's replay reached f during it
    /// (its noise was cut short: pitfall 3). False when the run stops here.
    fn close(&mut self, p: u64, exits: &Pass, on_phase: &(dyn Fn(u64) + Sync)) -> bool {
        if let Some((max_qt, sum_qt)) = self.prev {
            if exits.over_limit {
                self.stopped_by_fraction = true;
                return false;
            }
            self.averages.add(PhaseSample {
                max_qt_ns: max_qt as f64 / self.scale,
                max_qtbt_ns: exits.max_qtb_prev as f64 / self.scale,
                mean_qt_ns: sum_qt as f64 / self.ranks as f64 / self.scale,
            });
            on_phase(p);
            self.last_barrier = self.barrier_prev.unwrap_or(0);
        }
        true
    }

    /// The barrier at the top of the loop (Algorithm 1, line 3): every rank starts computing
    /// once the slowest has left the previous barrier, so a rank held there by a detour delays
    /// that phase once (in its qtb) and not the next phase's compute windows again.
    fn top(&self, exits: &Pass) -> Option<u64> {
        if !self.top_barrier {
            return None;
        }
        self.barrier_prev.map(|_| exits.max_end + self.latency)
    }

    /// Records a computed phase (`pass`, reduced over processes) and its bottom barrier.
    fn computed(&mut self, pass: &Pass) {
        self.prev = Some((pass.max_qt, pass.sum_qt));
        self.barrier_prev = Some(pass.max_end + self.latency);
    }
}

/// Sums the counts over processes and assembles the outcome.
fn finish(
    comm: &dyn Collective,
    mut stats: PlanStats,
    mut max_progress: f64,
    cfg: &DesConfig,
    ph: Phases,
) -> anyhow::Result<DesOutcome> {
    let Phases {
        q,
        scale,
        latency,
        averages,
        stopped_by_fraction,
        last_barrier,
        baseline_period,
        ..
    } = ph;
    let procs = comm.size();
    if procs > 1 {
        let mut sums = [
            stats.injections,
            stats.dropped,
            stats.merged,
            stats.injected_ns,
            stats.dropped_ns,
            stats.noise_ns,
        ]
        .map(|v| v as f64);
        comm.all_sum(&mut sums);
        let [i, d, m, ins, dns, nns] = sums.map(|v| v.round() as u64);
        (stats.injections, stats.dropped, stats.merged) = (i, d, m);
        (stats.injected_ns, stats.dropped_ns, stats.noise_ns) = (ins, dns, nns);
        let mut most = [max_progress];
        comm.all_max(&mut most);
        max_progress = most[0];
    }
    let q_unscaled = q as f64 / scale;
    Ok(DesOutcome {
        averages,
        requested_phases: cfg.phases,
        stopped_by_fraction,
        mean_period_ns: last_barrier as f64 / scale / averages.phases.max(1) as f64,
        baseline_qt_ns: q_unscaled,
        baseline_qtbt_ns: q_unscaled + latency as f64 / scale,
        baseline_period_ns: baseline_period as f64 / scale,
        emulator: EmulatorTotals {
            injected: stats.injections,
            dropped: stats.dropped,
            merged: stats.merged,
            injected_ns: stats.injected_ns,
            dropped_ns: stats.dropped_ns,
            injected_share: stats.injected_share(),
            max_progress,
        },
    })
}

/// What the phase loops ask of an engine, rank by rank: the offloaded loop ([`offloaded`]) and,
/// through [`Clocks`], the algorithmic one ([`algorithmic_loop`]). `at` says where a state sits
/// (the walk: its index; the indexed engine: its plan), found for the first state of a chunk
/// with `locate` and carried to the next states with `step`.
trait ReplayEngine: Clocks {
    /// What a resync hands every rank (the indexed engine: each plan's new segment).
    type Segments: Sync;
    /// Where state `g` sits.
    fn locate(&self, g: usize) -> usize;
    /// Where state `g` sits, given where state `g − 1` sat (`at`).
    fn step(&self, at: usize, g: usize) -> usize;
    /// Where every state `g0..g1` sits, when they all sit at one place (`None`: not known).
    #[inline]
    fn uniform(&self, _g0: usize, _g1: usize) -> Option<usize> {
        None
    }
    /// When the rank's replay reaches the fraction f (the stop rule).
    fn limit_at(r: &Self::Rank) -> u64;
    /// Simulated ranks this state stands for (identical replays: same plan, same start, the
    /// same barriers and resync points).
    #[inline]
    fn copies(_r: &Self::Rank) -> u64 {
        1
    }
    /// The rank waits for a barrier (or a message) that completes at `b`: when it can act.
    fn leave(&self, r: &mut Self::Rank, at: usize, b: u64) -> u64;
    /// The rank computes `work` from `start` (`new`: the segments of a resync in this pass, not
    /// yet handed to [`ReplayEngine::resynced`]): the end of its compute window.
    fn compute(
        &self,
        r: &mut Self::Rank,
        at: usize,
        new: Option<&Self::Segments>,
        start: u64,
        work: u64,
    ) -> u64;
    /// What a resync to the timeline points `points[t]` (one per node trace) hands the ranks.
    fn segments(&self, points: &[u64]) -> Self::Segments;
    /// Resyncs the rank at replay time `start`: the counts of the segment it leaves where the
    /// engine does not keep them per rank.
    fn resync(
        &self,
        r: &mut Self::Rank,
        at: usize,
        points: &[u64],
        new: &Self::Segments,
        start: u64,
    ) -> PlanStats;
    /// Every rank resynced to `new`, leaving segments that injected `left`.
    fn resynced(&mut self, new: Self::Segments, left: PlanStats);
    /// The counts handed to [`ReplayEngine::resynced`] so far.
    fn committed(&self) -> PlanStats;
    /// What the rank's current segment injected and its share of the stream replayed by `now`.
    fn totals_of(&self, r: &Self::Rank, at: usize, now: u64) -> (PlanStats, f64);
    /// Starts loading what `compute(r, at, None, start, work)` reads first, without waiting
    /// (a hint, some ranks ahead; no effect on any answer): the ticket of what that tells it
    /// to read next, for [`ReplayEngine::prefetch_entries`], asked later.
    #[inline]
    fn prefetch_compute(
        &self,
        _r: &Self::Rank,
        _at: usize,
        _start: u64,
        _work: u64,
    ) -> PrefetchTicket {
        PrefetchTicket::default()
    }
    /// Starts loading what a ticket of [`ReplayEngine::prefetch_compute`] names (the second
    /// stage).
    #[inline]
    fn prefetch_entries(&self, _at: usize, _ticket: PrefetchTicket) {}
    /// Starts loading what a barrier search of the rank reads first (near its next entry).
    #[inline]
    fn prefetch_barrier(&self, _r: &Self::Rank, _at: usize) {}
    /// [`Clocks::quiet_until`] of the rank (0: not known).
    #[inline]
    fn quiet(&self, _r: &Self::Rank, _at: usize) -> u64 {
        0
    }
}

/// [`Clocks`] of an engine: its own questions, `at` found by `locate`.
macro_rules! clocks_of_engine {
    ($engine:ty, $rank:ty) => {
        impl Clocks for $engine {
            type Rank = $rank;
            #[inline]
            fn work(&self, r: &mut $rank, g: usize, start: u64, work: u64) -> u64 {
                self.compute(r, self.locate(g), None, start, work)
            }
            #[inline]
            fn idle_until(&self, r: &mut $rank, g: usize, t: u64) -> u64 {
                self.leave(r, self.locate(g), t)
            }
            #[inline]
            fn quiet_until(&self, r: &$rank, g: usize) -> u64 {
                self.quiet(r, self.locate(g))
            }
            #[inline]
            fn copies_of(&self, r: &$rank) -> u64 {
                <$engine as ReplayEngine>::copies(r)
            }
        }
    };
}

clocks_of_engine!(WalkClocks, RankState);
clocks_of_engine!(IdxClocks<'_>, IdxRank);
clocks_of_engine!(Quiet, ());

/// A rank of the offloaded loop, which keeps the start of its phase in its state.
trait PhaseStart {
    /// Start of the rank's current phase, replay ns.
    fn start_ns(&self) -> u64;
    /// Sets it.
    fn set_start(&mut self, t: u64);
}

impl PhaseStart for RankState {
    #[inline]
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
    #[inline]
    fn set_start(&mut self, t: u64) {
        self.start_ns = t;
    }
}

impl PhaseStart for IdxRank {
    #[inline]
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
    #[inline]
    fn set_start(&mut self, t: u64) {
        self.start_ns = t;
    }
}

/// Resyncs every rank, at its own time `now[g]`, to its node trace's timeline point
/// (`points[t]` for node trace t).
fn resync_all<E: ReplayEngine>(eng: &mut E, states: &mut [E::Rank], now: &[u64], points: &[u64]) {
    let new = eng.segments(points);
    let e = &*eng;
    let left = states
        .par_iter_mut()
        .zip(now)
        .enumerate()
        .map(|(g, (s, &start))| e.resync(s, e.locate(g), points, &new, start) * E::copies(s))
        .reduce(PlanStats::default, |mut a, b| {
            a += b;
            a
        });
    eng.resynced(new, left);
}

/// What the plans injected and the largest share of a stream replayed, each rank at `now(g, r)`.
fn totals<E: ReplayEngine>(
    eng: &E,
    states: &[E::Rank],
    now: impl Fn(usize, &E::Rank) -> u64,
) -> (PlanStats, f64) {
    let mut stats = eng.committed();
    let mut most = 0f64;
    let mut at = eng.locate(0);
    for (g, s) in states.iter().enumerate() {
        at = eng.step(at, g);
        let (st, progress) = eng.totals_of(s, at, now(g, s));
        stats += st * E::copies(s);
        most = most.max(progress);
    }
    (stats, most)
}

/// The walk engine's ranks (in rank order).
struct WalkClocks {
    w: f64,
    fraction: f64,
    scale: f64,
    place: Placement,
    /// First rank of this process (states are in rank order).
    lo: u64,
}

impl ReplayEngine for WalkClocks {
    type Segments = ();
    #[inline]
    fn locate(&self, g: usize) -> usize {
        g
    }
    #[inline]
    fn step(&self, _: usize, g: usize) -> usize {
        g
    }
    fn limit_at(r: &RankState) -> u64 {
        r.limit_at
    }
    #[inline]
    fn leave(&self, r: &mut RankState, _: usize, b: u64) -> u64 {
        r.leave_barrier(b, self.w)
    }
    #[inline]
    fn compute(&self, r: &mut RankState, _: usize, _: Option<&()>, start: u64, work: u64) -> u64 {
        r.compute(start, work, self.w)
    }
    fn segments(&self, _: &[u64]) {}
    fn resync(&self, r: &mut RankState, g: usize, points: &[u64], _: &(), start: u64) -> PlanStats {
        let off = points[self.place.trace(self.lo + g as u64)];
        r.resync(off, start, self.fraction, self.scale);
        // The cursor keeps its counts across resyncs.
        PlanStats::default()
    }
    fn resynced(&mut self, _: (), _: PlanStats) {}
    fn committed(&self) -> PlanStats {
        PlanStats::default()
    }
    fn totals_of(&self, r: &RankState, _: usize, now: u64) -> (PlanStats, f64) {
        (r.cursor.stats(), r.cursor.progress_at(now))
    }
}

/// The indexed engine's ranks: in rank order (plan by [`Placement::plan`]), or sorted by plan
/// (`bounds[s]..bounds[s + 1]` the states of plan s, as [`sorted_states`] gives them).
struct IdxClocks<'a> {
    ix: &'a [PlanIndex],
    place: Placement,
    lo: u64,
    /// The states sorted by plan: each plan's range.
    bounds: Option<Vec<usize>>,
    /// The segment every rank of a plan is in after the first resync (all share it).
    shared: Option<Vec<SegmentStart>>,
    /// Counts of the segments left by resyncs.
    committed: PlanStats,
    fraction: f64,
}

impl IdxClocks<'_> {
    /// The segment the rank of plan `si` is in: its own start until the first resync, then
    /// the shared one.
    #[inline]
    fn seg(&self, si: usize, r: &IdxRank) -> SegmentStart {
        match &self.shared {
            Some(v) => v[si],
            None => r.rep.segment(&self.ix[si]),
        }
    }

    /// [`ReplayEngine::leave`] where the fast path does not answer: kept out of the loop, whose
    /// registers its inlining would cost on every question.
    #[cold]
    #[inline(never)]
    fn leave_slow(&self, r: &mut IdxRank, si: usize, b: u64) -> u64 {
        let seg = self.seg(si, r);
        r.rep.leave_barrier(&self.ix[si], &seg, b)
    }

    /// [`ReplayEngine::compute`] where the fast path does not answer (see
    /// [`IdxClocks::leave_slow`]).
    #[cold]
    #[inline(never)]
    fn compute_slow(
        &self,
        r: &mut IdxRank,
        si: usize,
        new: Option<&Vec<SegmentStart>>,
        start: u64,
        work: u64,
    ) -> u64 {
        let seg = match new {
            Some(v) => v[si],
            None => self.seg(si, r),
        };
        r.rep.compute(&self.ix[si], &seg, start, work)
    }
}

impl ReplayEngine for IdxClocks<'_> {
    type Segments = Vec<SegmentStart>;
    #[inline]
    fn locate(&self, g: usize) -> usize {
        match &self.bounds {
            // One plan (the usual case): no search per question.
            Some(b) if b.len() == 2 => 0,
            Some(b) => b.partition_point(|&x| x <= g) - 1,
            None => self.place.plan(self.lo + g as u64),
        }
    }
    #[inline]
    fn step(&self, mut at: usize, g: usize) -> usize {
        match &self.bounds {
            Some(b) => {
                while g >= b[at + 1] {
                    at += 1;
                }
                at
            }
            None => self.place.plan(self.lo + g as u64),
        }
    }
    #[inline]
    fn uniform(&self, g0: usize, g1: usize) -> Option<usize> {
        // Sorted by plan: a range within one plan's.
        let b = self.bounds.as_ref()?;
        let at = self.locate(g0);
        (g1 <= b[at + 1]).then_some(at)
    }
    fn limit_at(r: &IdxRank) -> u64 {
        r.limit_at
    }
    #[inline]
    fn copies(r: &IdxRank) -> u64 {
        r.copies
    }
    #[inline]
    fn leave(&self, r: &mut IdxRank, si: usize, b: u64) -> u64 {
        match r.rep.leave_barrier_fast(&self.ix[si], b) {
            Some(e) => e,
            None => self.leave_slow(r, si, b),
        }
    }
    #[inline]
    fn compute(
        &self,
        r: &mut IdxRank,
        si: usize,
        new: Option<&Vec<SegmentStart>>,
        start: u64,
        work: u64,
    ) -> u64 {
        match r.rep.compute_fast(&self.ix[si], start, work) {
            Some(e) => e,
            None => self.compute_slow(r, si, new, start, work),
        }
    }
    fn segments(&self, points: &[u64]) -> Vec<SegmentStart> {
        (self.ix.iter().enumerate())
            .map(|(i, x)| x.segment_start(points[self.place.trace_of_plan(i)]))
            .collect()
    }
    fn resync(
        &self,
        r: &mut IdxRank,
        si: usize,
        _: &[u64],
        new: &Vec<SegmentStart>,
        start: u64,
    ) -> PlanStats {
        let x = &self.ix[si];
        let old = self.seg(si, r);
        let left = r.rep.resync(x, &old, &new[si], start);
        set_limit(r, x, start, self.fraction);
        left
    }
    fn resynced(&mut self, new: Vec<SegmentStart>, left: PlanStats) {
        self.committed += left;
        self.shared = Some(new);
    }
    fn committed(&self) -> PlanStats {
        self.committed
    }
    fn totals_of(&self, r: &IdxRank, si: usize, now: u64) -> (PlanStats, f64) {
        let x = &self.ix[si];
        (r.rep.stats(x, &self.seg(si, r)), r.rep.progress_at(x, now))
    }
    #[inline]
    fn prefetch_compute(&self, r: &IdxRank, si: usize, start: u64, work: u64) -> PrefetchTicket {
        r.rep.prefetch_compute(&self.ix[si], start, work)
    }
    #[inline]
    fn prefetch_entries(&self, si: usize, ticket: PrefetchTicket) {
        self.ix[si].prefetch_entries(ticket);
    }
    #[inline]
    fn prefetch_barrier(&self, r: &IdxRank, si: usize) {
        r.rep.prefetch_barrier(&self.ix[si]);
    }
    #[inline]
    fn quiet(&self, r: &IdxRank, si: usize) -> u64 {
        r.rep.quiet_until(&self.ix[si])
    }
}

/// Ranks without noise: the baseline of an algorithmic collective.
struct Quiet;

impl ReplayEngine for Quiet {
    type Segments = ();
    fn locate(&self, _: usize) -> usize {
        0
    }
    fn step(&self, _: usize, _: usize) -> usize {
        0
    }
    fn limit_at(_: &()) -> u64 {
        u64::MAX
    }
    fn leave(&self, _: &mut (), _: usize, b: u64) -> u64 {
        b
    }
    fn compute(&self, _: &mut (), _: usize, _: Option<&()>, start: u64, work: u64) -> u64 {
        start + work
    }
    fn segments(&self, _: &[u64]) {}
    fn resync(&self, _: &mut (), _: usize, _: &[u64], _: &(), _: u64) -> PlanStats {
        PlanStats::default()
    }
    fn resynced(&mut self, _: (), _: PlanStats) {}
    fn committed(&self) -> PlanStats {
        PlanStats::default()
    }
    fn totals_of(&self, _: &(), _: usize, _: u64) -> (PlanStats, f64) {
        (PlanStats::default(), 0.0)
    }
}

/// How many states ahead of its search a pass prefetches a rank's index lines (a compute
/// search's second stage; its first stage twice as far): enough that several ranks' misses are
/// in flight at once, few enough that the core still tracks them all (on an AMD Zen 4 VM, 4
/// beat 1–3 and 5–32 on a dense trace; 8 took ≈ 15 % longer, no prefetch 2×).
const PREFETCH_AHEAD: usize = 4;

/// What a pass's searches read, asked for some states ahead of them.
enum Ahead<'a, H> {
    /// Nothing (a pass whose searches start where no state says yet).
    Nothing,
    /// Barrier searches, near each rank's next entry.
    Barrier,
    /// Compute searches: `H(j, state)` is the start and work of the chunk's state j.
    Compute(&'a H),
}

/// The [`Ahead`] of a pass without compute searches.
type NoHint<R> = fn(usize, &R) -> (u64, u64);

/// Visits the states of one chunk (its first state is `g0`) in order, each with where it sits
/// (`body(state, at)`), after asking the engine to prefetch what the searches of the states
/// [`PREFETCH_AHEAD`] ahead (and, for a compute search's first stage, twice that) read, so
/// that the cache misses of several ranks' searches overlap.
fn visit_chunk<E: ReplayEngine, H: Fn(usize, &E::Rank) -> (u64, u64)>(
    e: &E,
    sts: &mut [E::Rank],
    g0: usize,
    ahead: Ahead<'_, H>,
    body: impl FnMut(&mut E::Rank, usize),
) {
    // Where every state of the chunk sits at one place (one plan), no step per state: the
    // loop compiled for that case apart.
    match e.uniform(g0, g0 + sts.len()) {
        Some(at) => visit_states(e, sts, g0, ahead, body, |_, _| at),
        None => visit_states(e, sts, g0, ahead, body, |at, g| e.step(at, g)),
    }
}

/// [`visit_chunk`] with where each state sits found by `step(at, g)`, as
/// [`ReplayEngine::step`].
fn visit_states<E: ReplayEngine, H: Fn(usize, &E::Rank) -> (u64, u64)>(
    e: &E,
    sts: &mut [E::Rank],
    g0: usize,
    ahead: Ahead<'_, H>,
    mut body: impl FnMut(&mut E::Rank, usize),
    step: impl Fn(usize, usize) -> usize,
) {
    const A: usize = PREFETCH_AHEAD;
    let n = sts.len();
    let mut at = e.locate(g0);
    // Where the states being asked for sit: `near` A ahead, `far` 2A ahead.
    let (mut near, mut far) = (at, at);
    match ahead {
        Ahead::Nothing => {
            for (i, s) in sts.iter_mut().enumerate() {
                at = step(at, g0 + i);
                body(s, at);
            }
        }
        Ahead::Barrier => {
            for (j, s) in sts.iter().enumerate().take(A) {
                near = step(near, g0 + j);
                e.prefetch_barrier(s, near);
            }
            for i in 0..n {
                if let Some(s) = sts.get(i + A) {
                    near = step(near, g0 + i + A);
                    e.prefetch_barrier(s, near);
                }
                at = step(at, g0 + i);
                body(&mut sts[i], at);
            }
        }
        Ahead::Compute(hint) => {
            // The tickets of states i..i + 2A (state j's in slot j mod 2A): written by the
            // first stage 2A ahead, read by the second A ahead.
            let mut tickets = [PrefetchTicket::default(); 2 * A];
            let first = |j: usize, far: &mut usize, sts: &[E::Rank], t: &mut [PrefetchTicket]| {
                if let Some(s) = sts.get(j) {
                    *far = step(*far, g0 + j);
                    let (start, work) = hint(j, s);
                    t[j % (2 * A)] = e.prefetch_compute(s, *far, start, work);
                }
            };
            let second = |j: usize, near: &mut usize, t: &[PrefetchTicket]| {
                if j < n {
                    *near = step(*near, g0 + j);
                    e.prefetch_entries(*near, t[j % (2 * A)]);
                }
            };
            for j in 0..2 * A {
                first(j, &mut far, sts, &mut tickets);
            }
            for j in 0..A {
                second(j, &mut near, &tickets);
            }
            for i in 0..n {
                first(i + 2 * A, &mut far, sts, &mut tickets);
                second(i + A, &mut near, &tickets);
                at = step(at, g0 + i);
                body(&mut sts[i], at);
            }
        }
    }
}

/// The benchmark loop with an offloaded collective (a fixed latency, no messages), for either
/// engine: per phase one pass in which every rank leaves the last phase's bottom barrier, then
/// one in which it leaves the top barrier, resyncs when the phase does, and computes.
#[allow(clippy::too_many_arguments)]
fn offloaded<E: ReplayEngine>(
    comm: &dyn Collective,
    eng: &mut E,
    states: &mut [E::Rank],
    lines: &Timelines,
    schedule: &SyncSchedule,
    cfg: &DesConfig,
    mut ph: Phases,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome>
where
    E::Rank: PhaseStart,
{
    let q = ph.q;
    let chunk = chunk_of(states.len());
    let mut points = lines.points_buffer();

    for p in 0..=cfg.phases {
        let compute_phase = p < cfg.phases;
        let resync = compute_phase && lines.resync_points(schedule, p, &mut points);
        let e = &*eng;
        // Leave the bottom barrier of the previous phase: that rank's qtb ends at its exit.
        let exits = match ph.barrier_prev {
            Some(b) => states
                .par_chunks_mut(chunk)
                .enumerate()
                .map(|(c, sts)| {
                    let mut acc = Pass::default();
                    // The barrier search: its answer is near the rank's next entry.
                    let ahead = Ahead::<NoHint<E::Rank>>::Barrier;
                    visit_chunk(e, sts, c * chunk, ahead, |s, at| {
                        let exit = e.leave(s, at, b);
                        acc.max_qtb_prev = acc.max_qtb_prev.max(exit - s.start_ns());
                        acc.over_limit |= exit >= E::limit_at(s);
                        acc.max_end = acc.max_end.max(exit);
                        s.set_start(exit);
                    });
                    acc
                })
                .reduce(Pass::default, Pass::join),
            None => Pass::default(),
        };
        let exits = reduce(comm, exits);
        if !ph.close(p, &exits, on_phase) || !compute_phase {
            break;
        }
        let top = ph.top(&exits);
        let new = resync.then(|| e.segments(&points));
        let (new_ref, points) = (new.as_ref(), &points);
        let (pass, left) = states
            .par_chunks_mut(chunk)
            .enumerate()
            .map(|(c, sts)| {
                let mut acc = Pass::default();
                let mut left = PlanStats::default();
                // Where the phase does not resync, a rank starts about at `top`, or at its
                // last exit.
                let hint = |_: usize, s: &E::Rank| (top.unwrap_or(s.start_ns()), q);
                let ahead = match new_ref {
                    None => Ahead::Compute(&hint),
                    Some(_) => Ahead::Nothing,
                };
                visit_chunk(e, sts, c * chunk, ahead, |s, at| {
                    let start = match top {
                        Some(t) => e.leave(s, at, t),
                        None => s.start_ns(),
                    };
                    s.set_start(start);
                    if let Some(new) = new_ref {
                        left += e.resync(s, at, points, new, start) * E::copies(s);
                    }
                    let end = e.compute(s, at, new_ref, start, q);
                    acc.max_end = acc.max_end.max(end);
                    acc.max_qt = acc.max_qt.max(end - start);
                    acc.sum_qt += (end - start) * E::copies(s);
                });
                (acc, left)
            })
            .reduce(
                || (Pass::default(), PlanStats::default()),
                |(a, mut la), (b, lb)| {
                    la += lb;
                    (Pass::join(a, b), la)
                },
            );
        if let Some(new) = new {
            eng.resynced(new, left);
        }
        ph.computed(&reduce(comm, pass));
    }

    let (stats, max_progress) = totals(eng, states, |_, s| s.start_ns());
    finish(comm, stats, max_progress, cfg, ph)
}

/// What the algorithmic loop measured (scaled ns).
struct LoopRun {
    averages: PhaseAverages,
    stopped_by_fraction: bool,
    /// Latest exit from the collective of the last phase closed.
    last_exit: u64,
    /// Max qtb of the last phase closed.
    last_max_qtb: u64,
    /// Latest exit of the phase before it.
    prev_exit: u64,
}

/// The benchmark loop with the collective run as messages on the ranks' clocks: this process
/// holds ranks `lo..lo + states.len()` of `n`; `resync(p, points)` fills the resync point of
/// each node trace when phase p resyncs (else false); `t` ends as each rank's time.
#[allow(clippy::too_many_arguments)]
fn algorithmic_loop<E: ReplayEngine>(
    comm: &dyn Collective,
    eng: &mut E,
    states: &mut [E::Rank],
    lo: u64,
    n: u64,
    points: &mut [u64],
    resync: &dyn Fn(u64, &mut [u64]) -> bool,
    phases: u64,
    q: u64,
    model: CommModel,
    costs: Costs,
    scale: f64,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<(LoopRun, Vec<u64>)> {
    let len = states.len();
    let alloc = |what: &str| {
        let mut v: Vec<u64> = Vec::new();
        v.try_reserve_exact(len)
            .map_err(|_| anyhow::anyhow!("cannot allocate the {what} of {len} simulated ranks"))?;
        v.resize(len, 0);
        anyhow::Ok(v)
    };
    let (mut t, mut start) = (alloc("clocks")?, alloc("phase starts")?);
    let mut scratch = Scratch::new(n, lo, lo + len as u64, comm.size())?;
    let alg = model.algorithm;
    let chunk = chunk_of(len);
    let mut run = LoopRun {
        averages: PhaseAverages::default(),
        stopped_by_fraction: false,
        last_exit: 0,
        last_max_qtb: 0,
        prev_exit: 0,
    };
    for p in 0..phases {
        if model.shape == LoopShape::BarrierComputeBarrier && p > 0 {
            collective::run(comm, eng, alg, costs, n, lo, states, &mut t, &mut scratch);
        }
        if resync(p, points) {
            resync_all(eng, states, &t, points);
        }
        start.copy_from_slice(&t);
        let e = &*eng;
        let pass = states
            .par_chunks_mut(chunk)
            .zip(t.par_chunks_mut(chunk).zip(start.par_chunks(chunk)))
            .enumerate()
            .map(|(c, (sts, (ts, ss)))| {
                let mut acc = Pass::default();
                let hint = |j: usize, _: &E::Rank| (ss[j], q);
                let mut i = 0;
                visit_chunk(e, sts, c * chunk, Ahead::Compute(&hint), |s, at| {
                    let s0 = ss[i];
                    ts[i] = e.compute(s, at, None, s0, q);
                    acc.max_qt = acc.max_qt.max(ts[i] - s0);
                    acc.sum_qt += (ts[i] - s0) * E::copies(s);
                    i += 1;
                });
                acc
            })
            .reduce(Pass::default, Pass::join);
        let pass = reduce(comm, pass);
        collective::run(comm, eng, alg, costs, n, lo, states, &mut t, &mut scratch);
        let exits = states
            .par_chunks(chunk)
            .zip(t.par_chunks(chunk).zip(start.par_chunks(chunk)))
            .map(|(sts, (ts, ss))| {
                let mut acc = Pass::default();
                for (s, (&x, &s0)) in sts.iter().zip(ts.iter().zip(ss)) {
                    acc.max_qtb_prev = acc.max_qtb_prev.max(x - s0);
                    acc.max_end = acc.max_end.max(x);
                    acc.over_limit |= x >= E::limit_at(s);
                }
                acc
            })
            .reduce(Pass::default, Pass::join);
        let exits = reduce(comm, exits);
        if exits.over_limit {
            run.stopped_by_fraction = true;
            break;
        }
        run.averages.add(PhaseSample {
            max_qt_ns: pass.max_qt as f64 / scale,
            max_qtbt_ns: exits.max_qtb_prev as f64 / scale,
            mean_qt_ns: pass.sum_qt as f64 / n as f64 / scale,
        });
        run.prev_exit = run.last_exit;
        run.last_exit = exits.max_end;
        run.last_max_qtb = exits.max_qtb_prev;
        on_phase(p + 1);
    }
    Ok((run, t))
}

/// Phases of the noise-free run that gives an algorithmic collective's baseline (the loop
/// settles after the first: from then on every phase is the same).
const BASELINE_PHASES: u64 = 3;

/// The algorithmic loop for one engine, with its noise-free baseline, finished into the outcome
/// (the engine's totals at every rank's final time).
#[allow(clippy::too_many_arguments)]
fn algorithmic<E: ReplayEngine>(
    comm: &dyn Collective,
    eng: &mut E,
    states: &mut [E::Rank],
    lo: u64,
    ranks: u64,
    schedule: &SyncSchedule,
    lines: &Timelines,
    cfg: &DesConfig,
    opts: &PlanOptions,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    let mut ph = Phases::new(ranks, cfg, opts)?;
    let model = cfg.comm.resolved();
    let costs = Costs::scaled(&model, opts.scale);
    // The baseline: the same loop without noise, every rank in this process (it is cheap:
    // no replay), the qtb of its last phase.
    let (quiet, _) = {
        let mut units: Vec<()> = Vec::new();
        units.resize(usize::try_from(ranks)?, ());
        algorithmic_loop(
            &Solo,
            &mut Quiet,
            &mut units,
            0,
            ranks,
            &mut [],
            &|_, _| false,
            BASELINE_PHASES.min(cfg.phases),
            ph.q,
            model,
            costs,
            opts.scale,
            &|_| {},
        )?
    };
    let resync = |p: u64, points: &mut [u64]| lines.resync_points(schedule, p, points);
    let mut points = lines.points_buffer();
    let (run, now) = algorithmic_loop(
        comm,
        eng,
        states,
        lo,
        ranks,
        &mut points,
        &resync,
        cfg.phases,
        ph.q,
        model,
        costs,
        opts.scale,
        on_phase,
    )?;
    ph.latency = quiet.last_max_qtb - ph.q;
    ph.baseline_period = quiet.last_exit - quiet.prev_exit;
    ph.averages = run.averages;
    ph.stopped_by_fraction = run.stopped_by_fraction;
    ph.last_barrier = run.last_exit;
    let (stats, max_progress) = totals(eng, states, |g, _| now[g]);
    finish(comm, stats, max_progress, cfg, ph)
}

/// Recomputes `st.limit_at` at replay time `now` (after a start or a resync): progress grows
/// linearly with replay time between resyncs, so the stop rule is one comparison.
fn set_limit(st: &mut IdxRank, ix: &PlanIndex, now: u64, fraction: f64) {
    let ns_per_progress = ix.period_ns() as f64 * ix.options().scale;
    let left = (fraction - st.rep.progress_at(ix, now)) * ns_per_progress;
    st.limit_at = now.saturating_add(left.max(0.0).ceil() as u64);
}

/// The states of ranks `ranks` (built by `new_rank` from their stream's index and start
/// segment) in a cache-friendly order: by stream, then by start offset, so that neighbours
/// search neighbouring parts of the index (all ranks advance with one clock, so the order
/// lasts; what is reduced, maxima and sums of integers, does not depend on it); and the bounds
/// of each stream's states (`bounds[s]..bounds[s + 1]`).
fn sorted_states(
    ix: &[PlanIndex],
    lines: &Timelines,
    ranks: std::ops::Range<u64>,
    schedule: &SyncSchedule,
    count: usize,
    new_rank: impl Fn(&PlanIndex, &SegmentStart) -> IdxRank,
) -> anyhow::Result<(Vec<IdxRank>, Vec<usize>)> {
    let place = lines.placement;
    let oom = |_| {
        anyhow::anyhow!(
            "cannot allocate {} MiB for {count} simulated ranks",
            (count as u128 * (INDEXED_RANK_BYTES + INDEXED_SETUP_BYTES) as u128) >> 20
        )
    };
    let mut order: Vec<(u32, u64, u64)> = Vec::new();
    order.try_reserve_exact(count).map_err(oom)?;
    order.extend(ranks.map(|r| (place.plan(r) as u32, lines.start_offset(schedule, r), 1)));
    order.sort_unstable();
    // Ranks of one plan that start at one offset are copies of one another (the offloaded loop
    // hands every rank the same barriers and every rank of a plan the same resync points): one
    // state each, with its count.
    order.dedup_by(|b, a| {
        let same = a.0 == b.0 && a.1 == b.1;
        if same {
            a.2 += 1;
        }
        same
    });
    let mut bounds = vec![0usize; ix.len() + 1];
    for &(s, ..) in &order {
        bounds[s as usize + 1] += 1;
    }
    for s in 0..ix.len() {
        bounds[s + 1] += bounds[s];
    }
    let mut states: Vec<IdxRank> = Vec::new();
    states.try_reserve_exact(order.len()).map_err(oom)?;
    for &(s, off, copies) in &order {
        let x = &ix[s as usize];
        let mut st = new_rank(x, &x.segment_start(off));
        st.copies = copies;
        states.push(st);
    }
    Ok((states, bounds))
}

/// The indexed engine: the same model as the walk, each rank's questions answered by
/// [`IndexedReplay`] (exact: no timer errors). Counts of a segment are added up when a resync
/// leaves it, so nothing per rank holds them.
fn simulate_indexed(
    comm: &dyn Collective,
    ix: &[PlanIndex],
    ranks: u64,
    mode: SyncMode,
    cfg: &DesConfig,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    let periods: Vec<u64> = ix.iter().map(|x| x.period_ns()).collect();
    let lines =
        Timelines::new(cfg.ranks_per_node, &periods)?.at_window(cfg.window.clone(), ranks)?;
    let place = lines.placement;
    let opts = *ix[0].options();
    let schedule = SyncSchedule {
        mode,
        seed: cfg.seed,
    };
    let ph = Phases::new(ranks, cfg, &opts)?;
    let (procs, me) = (comm.size() as u64, comm.rank() as u64);
    let (lo, hi) = share(ranks, procs, me);
    // The rank states plus, while they are set up, one (stream, offset) pair each.
    let count = usize::try_from(hi - lo)
        .ok()
        .filter(|n| {
            n.checked_mul(INDEXED_RANK_BYTES + INDEXED_SETUP_BYTES)
                .is_some()
        })
        .ok_or_else(|| anyhow::anyhow!("{} simulated ranks do not fit in memory", hi - lo))?;
    let oom = |_| {
        anyhow::anyhow!(
            "cannot allocate {} MiB for {count} simulated ranks",
            (count as u128 * (INDEXED_RANK_BYTES + INDEXED_SETUP_BYTES) as u128) >> 20
        )
    };
    let new_rank = |x: &PlanIndex, seg: &SegmentStart| {
        let mut st = IdxRank {
            rep: x.replay(seg),
            start_ns: 0,
            limit_at: u64::MAX,
            copies: 1,
        };
        set_limit(&mut st, x, 0, opts.fraction);
        st
    };
    let alg = cfg.comm.resolved().algorithm;
    if alg != Algorithm::Offloaded {
        // Rank order: a rank's partners are found by arithmetic on its number. With one plan,
        // a common start (every mode but none) and an algorithm in which every rank sends and
        // receives each round, all ranks stay copies of one another: one state stands for all.
        let mut states: Vec<IdxRank> = Vec::new();
        if ix.len() == 1 && lines.common_start(mode) && procs == 1 && symmetric(alg, ranks) {
            let mut st = new_rank(
                &ix[0],
                &ix[0].segment_start(lines.start_offset(&schedule, 0)),
            );
            st.copies = ranks;
            states.push(st);
        } else {
            states.try_reserve_exact(count).map_err(oom)?;
            states.extend((lo..hi).map(|r| {
                let x = &ix[place.plan(r)];
                new_rank(x, &x.segment_start(lines.start_offset(&schedule, r)))
            }));
        }
        let mut eng = IdxClocks {
            ix,
            place,
            lo,
            bounds: None,
            shared: None,
            committed: PlanStats::default(),
            fraction: opts.fraction,
        };
        return algorithmic(
            comm,
            &mut eng,
            &mut states,
            lo,
            ranks,
            &schedule,
            &lines,
            cfg,
            &opts,
            on_phase,
        );
    }
    let (mut states, bounds) = sorted_states(ix, &lines, lo..hi, &schedule, count, new_rank)?;
    let mut eng = IdxClocks {
        ix,
        place,
        lo,
        bounds: Some(bounds),
        shared: None,
        committed: PlanStats::default(),
        fraction: opts.fraction,
    };
    offloaded(
        comm,
        &mut eng,
        &mut states,
        &lines,
        &schedule,
        cfg,
        ph,
        on_phase,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_emulator::PlanOptions;
    use jitter_trace::{Detour, Stream};

    fn plan(end: u64, detours: &[(u64, u64)]) -> Arc<Plan> {
        let d: Vec<Detour> = detours
            .iter()
            .map(|&(start_ns, run_ns)| Detour { start_ns, run_ns })
            .collect();
        Plan::new(
            &Stream::from_detours(0, 0, end, &d).unwrap(),
            PlanOptions::ideal(),
        )
        .unwrap()
    }

    fn cfg(q: u64, phases: u64, stage: f64) -> DesConfig {
        DesConfig {
            quanta_ns: q,
            phases,
            ranks_per_node: 1,
            barrier: BarrierModel { stage_ns: stage },
            comm: CommModel::OFFLOADED,
            drift_sd_ns: 0.0,
            seed: 1,
            window: None,
        }
    }

    #[test]
    fn ceil_log2_is_the_stage_count() {
        let got: Vec<u32> = [0, 1, 2, 3, 4, 5, 1024, 1025].map(ceil_log2).to_vec();
        assert_eq!(got, vec![0, 0, 1, 2, 2, 3, 10, 11]);
    }

    #[test]
    fn a_single_rank_pays_every_detour_in_its_window_and_the_barrier_hides_none() {
        // One rank, q = 100, no barrier latency: the phases tile the timeline, so every detour
        // lands in some compute window. Detours of 10 ns every 250 ns starting at 50 ns: the
        // first window [0, 100) holds the one at 50 and grows to 110, and so on.
        let p = plan(
            1_000_000,
            &(0..4000).map(|i| (50 + 250 * i, 10)).collect::<Vec<_>>(),
        );
        let mode = "once".parse().unwrap();
        let c = DesConfig {
            seed: 3,
            ..cfg(100, 50, 0.0)
        };
        let out = simulate(std::slice::from_ref(&p), 1, mode, &c, &|_| {}).unwrap();
        let n = out.averages.phases as f64;
        // Total noise met in the replayed time equals the noise added to the phases.
        let total_qt = out.averages.sum_max_qt_ns;
        let noise = total_qt - 100.0 * n;
        let expected = (total_qt / 250.0).floor() * 10.0;
        assert!((noise - expected).abs() <= 10.0, "{noise} vs {expected}");
        assert_eq!(out.averages.sum_max_qtbt_ns, total_qt);
    }

    fn rank(p: &Arc<Plan>) -> RankState {
        RankState {
            cursor: p.cursor(0),
            pending: None,
            start_ns: 0,
            busy_until: 0,
            drift_ns: 0,
            limit_at: u64::MAX,
            rng: SmallRng::seed_from_u64(0),
        }
    }

    #[test]
    fn compute_windows_grow_and_barriers_hide_all_but_a_running_detour() {
        let p = plan(
            10_000,
            &[(50, 10), (105, 20), (300, 40), (500, 100), (700, 5)],
        );
        let mut r = rank(&p);
        // [0, 100) holds 50 (+10) → 110 holds 105 (+20) → 130.
        assert_eq!(r.compute(0, 100, 0.0), 130);
        // Barrier completes at 320: the detour [300, 340) is still running → exit 340.
        assert_eq!(r.leave_barrier(320, 0.0), 340);
        // Barrier completes at 650: [500, 600) ended before → exit at once.
        assert_eq!(r.compute(340, 100, 0.0), 440);
        assert_eq!(r.leave_barrier(650, 0.0), 650);
        // A detour due exactly at the barrier completion belongs to the next window.
        assert_eq!(r.leave_barrier(700, 0.0), 700);
        assert_eq!(r.compute(700, 100, 0.0), 805);
    }

    #[test]
    fn a_resync_into_a_detour_costs_its_rest_in_the_next_window() {
        let p = plan(10_000, &[(500, 100)]);
        let mut r = rank(&p);
        r.cursor.resync(560, 1_000);
        r.busy_until = 1_000;
        assert_eq!(r.compute(1_000, 100, 0.0), 1_140);
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let p = plan(
            50_000_000,
            &(0..20_000)
                .map(|i| (i * 2_500 + (i * 7919) % 1000, 100 + (i * 31) % 400))
                .collect::<Vec<_>>(),
        );
        let c = DesConfig {
            drift_sd_ns: 50.0,
            ..cfg(10_000, 200, 1000.0)
        };
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    simulate(std::slice::from_ref(&p), 3000, SyncMode::Once, &c, &|_| {}).unwrap()
                })
        };
        let a = run(1);
        let b = run(2);
        assert_eq!(a, b);
        assert!(a.averages.phases == 200);
    }

    #[test]
    fn ranks_of_a_node_replay_its_streams_from_one_offset() {
        // Two ranks on one node (k = 2). With two equal streams they see exactly what one
        // rank alone sees (same offset); with a quiet second stream, rank 1 is faster.
        let noisy: Vec<Detour> = (0..1000)
            .map(|i| Detour {
                start_ns: i * 3_000 + 700,
                run_ns: 150,
            })
            .collect();
        let quiet = [Detour {
            start_ns: 2_999_000,
            run_ns: 1,
        }];
        let trace = |second: &[Detour]| jitter_trace::Trace {
            streams: vec![
                Stream::from_detours(0, 0, 3_000_000, &noisy).unwrap(),
                Stream::from_detours(1, 0, 3_000_000, second).unwrap(),
            ],
            ..jitter_trace::Trace::default()
        };
        let plans = |t: &jitter_trace::Trace| -> Vec<Arc<Plan>> {
            (0..2)
                .map(|s| Plan::from_trace(t, s, PlanOptions::ideal()).unwrap())
                .collect()
        };
        let pair = DesConfig {
            ranks_per_node: 2,
            ..cfg(1_000, 300, 0.0)
        };
        let same = plans(&trace(&noisy));
        let alone = simulate(
            &same[..1],
            1,
            SyncMode::None,
            &cfg(1_000, 300, 0.0),
            &|_| {},
        );
        let alone = alone.unwrap();
        let twins = simulate(&same, 2, SyncMode::None, &pair, &|_| {}).unwrap();
        assert_eq!(alone.averages.sum_max_qt_ns, twins.averages.sum_max_qt_ns);
        assert_eq!(twins.averages.sum_lost_rel, 0.0);
        assert!(alone.averages.avg_max_qt_ns() > 1_000.0);
        let mixed = plans(&trace(&quiet));
        let mixed = simulate(&mixed, 2, SyncMode::None, &pair, &|_| {}).unwrap();
        assert!(
            mixed.averages.sum_lost_rel > 0.0,
            "rank 1 is faster than rank 0"
        );
        let three = DesConfig {
            ranks_per_node: 3,
            ..cfg(1_000, 3, 0.0)
        };
        // Three ranks on two streams: rank 2 replays stream 0 again, a copy on a timeline of
        // its own (jitter_emulator::placement): under none it is no twin of rank 0; under once
        // every rank is at one point and the three are twins.
        let copies = simulate(&same, 3, SyncMode::None, &three, &|_| {}).unwrap();
        assert!(copies.averages.sum_lost_rel > 0.0, "{copies:?}");
        let once = simulate(&same, 3, SyncMode::Once, &three, &|_| {}).unwrap();
        assert_eq!(once.averages.sum_lost_rel, 0.0);
    }

    /// 3000 detours of 20–919 ns at irregular points of a 9.1 ms window: every injection path
    /// (dropped, merged, single) and every index search get exercised.
    fn scattered_stream() -> Stream {
        let d: Vec<Detour> = (0..3000u64)
            .map(|i| Detour {
                start_ns: i * 3_000 + (i * 7919) % 1500,
                run_ns: 20 + (i * 31) % 900,
            })
            .collect();
        Stream::from_detours(0, 0, 9_100_000, &d).unwrap()
    }

    /// The plan of `s` at scale S, fraction f and overhead O (sleeps under 400 ns merge),
    /// which the index answers.
    fn indexed_plan(s: &Stream, scale: f64, fraction: f64, overhead: u64) -> Arc<Plan> {
        let o = PlanOptions {
            scale,
            fraction,
            overhead_ns: overhead,
            min_sleep_ns: 400,
            ..PlanOptions::ideal()
        };
        let p = Plan::new(s, o).unwrap();
        assert!(p.index().is_some());
        p
    }

    #[test]
    fn the_indexed_engine_gives_the_walk_s_outcome_in_every_sync_mode() {
        let s = scattered_stream();
        for (scale, fraction, overhead) in [(1.0, 1.0, 0), (1.0, 0.3, 50), (2.5, 0.2, 100)] {
            let p = indexed_plan(&s, scale, fraction, overhead);
            for mode in ["none", "once", "phase", "every:3"] {
                let mode: SyncMode = mode.parse().unwrap();
                let c = cfg(7_000, 400, 500.0);
                let run = |e| {
                    simulate_engine(&Solo, std::slice::from_ref(&p), 37, mode, &c, e, &|_| {})
                        .unwrap()
                };
                let (w, i) = (run(Engine::Walk), run(Engine::Indexed));
                assert_eq!(w, i, "{mode} S={scale} f={fraction}");
                assert!(w.emulator.injected > 0);
            }
        }
    }

    #[test]
    fn synced_ranks_of_one_plan_in_a_symmetric_collective_are_one_state_with_the_same_outcome() {
        // Indexed: one state for all ranks (dissemination; recursive doubling at 16), against
        // the walk, which simulates every rank; recursive doubling at 37 keeps every rank.
        let s = scattered_stream();
        for (alg, ranks, scale, fraction, overhead) in [
            (Algorithm::Dissemination, 37, 1.0, 1.0, 0),
            (Algorithm::Dissemination, 16, 1.0, 1.0, 0),
            (Algorithm::RecursiveDoubling, 16, 1.0, 1.0, 0),
            (Algorithm::RecursiveDoubling, 37, 1.0, 1.0, 0),
            // The general search (S ≠ 1), a fraction limit and dropped detours.
            (Algorithm::Dissemination, 37, 2.5, 0.2, 100),
        ] {
            let p = indexed_plan(&s, scale, fraction, overhead);
            assert_eq!(
                symmetric(alg, ranks),
                alg == Algorithm::Dissemination || ranks == 16
            );
            for mode in ["once", "phase", "every:3"] {
                let mode: SyncMode = mode.parse().unwrap();
                let c = DesConfig {
                    comm: algorithmic(alg, LoopShape::BarrierComputeBarrier, 150.0, 400.0),
                    ..cfg(7_000, 200, 500.0)
                };
                let run = |e| {
                    simulate_engine(&Solo, std::slice::from_ref(&p), ranks, mode, &c, e, &|_| {})
                        .unwrap()
                };
                let (w, i) = (run(Engine::Walk), run(Engine::Indexed));
                assert_eq!(w, i, "{alg:?} {ranks} {mode} S={scale}");
                assert!(w.emulator.injected > 0);
            }
        }
    }

    #[test]
    fn one_node_trace_listed_twice_gives_the_single_trace_outcome() {
        // Two node traces that are the same trace: every rank replays what it replays with
        // one (start and resync points are drawn per node group on the trace's own period).
        let s = scattered_stream();
        let p = Plan::new(&s, PlanOptions::ideal()).unwrap();
        let twice = [Arc::clone(&p), Arc::clone(&p)];
        for comm in [
            CommModel::OFFLOADED,
            algorithmic(
                Algorithm::Dissemination,
                LoopShape::BarrierComputeBarrier,
                150.0,
                400.0,
            ),
        ] {
            for mode in ["none", "once", "phase", "every:3"] {
                let mode: SyncMode = mode.parse().unwrap();
                let c = DesConfig {
                    comm,
                    ..cfg(7_000, 200, 500.0)
                };
                for e in [Engine::Walk, Engine::Indexed] {
                    let one =
                        simulate_engine(&Solo, std::slice::from_ref(&p), 37, mode, &c, e, &|_| {});
                    let two = simulate_engine(&Solo, &twice, 37, mode, &c, e, &|_| {});
                    assert_eq!(one.unwrap(), two.unwrap(), "{comm:?} {mode} {e:?}");
                }
            }
        }
        // Plans that are not whole node traces of k streams are refused.
        let three = DesConfig {
            ranks_per_node: 2,
            ..cfg(1_000, 3, 0.0)
        };
        let odd = [Arc::clone(&p), Arc::clone(&p), Arc::clone(&p)];
        let e = simulate(&odd, 4, SyncMode::None, &three, &|_| {}).unwrap_err();
        assert!(e.to_string().contains("whole node traces"), "{e}");
    }

    #[test]
    fn both_engines_map_ranks_to_node_traces_alike() {
        // Three node traces of two streams each, windows of different length; enough ranks for
        // several chunks per pass, so each engine's own way to find a rank's plan is crossed.
        let trace = |seed: u64, end: u64| {
            let stream = |c: u64| {
                let d: Vec<Detour> = (0..end / 3_000)
                    .map(|i| Detour {
                        start_ns: i * 3_000 + (i * 7919 + seed * 13 + c * 101) % 1500,
                        run_ns: 20 + (i * 31 + seed * 7) % (300 * seed + 100),
                    })
                    .collect();
                Stream::from_detours(c as u32, 0, end, &d).unwrap()
            };
            jitter_trace::Trace {
                streams: vec![stream(0), stream(1)],
                ..jitter_trace::Trace::default()
            }
        };
        let plans: Vec<Arc<Plan>> = [(1, 3_100_000), (2, 2_000_000), (3, 4_500_000)]
            .into_iter()
            .flat_map(|(seed, end)| {
                let t = trace(seed, end);
                (0..2).map(move |s| Plan::from_trace(&t, s, PlanOptions::ideal()).unwrap())
            })
            .collect();
        for comm in [
            CommModel::OFFLOADED,
            algorithmic(
                Algorithm::Dissemination,
                LoopShape::BarrierComputeBarrier,
                150.0,
                400.0,
            ),
        ] {
            for mode in ["none", "once", "phase", "every:3"] {
                let mode: SyncMode = mode.parse().unwrap();
                let c = DesConfig {
                    comm,
                    ranks_per_node: 2,
                    ..cfg(7_000, 60, 500.0)
                };
                let run = |e| simulate_engine(&Solo, &plans, 1001, mode, &c, e, &|_| {}).unwrap();
                let (w, i) = (run(Engine::Walk), run(Engine::Indexed));
                assert_eq!(w, i, "{comm:?} {mode}");
                assert!(w.emulator.injected > 0);
            }
        }
    }

    #[test]
    fn two_node_traces_of_different_duty_give_a_slowdown_between_theirs() {
        // Periodic noise, period P = 20 us, detours d = 300 ns (A) and 60 ns (B), q = 1 us,
        // 16 ranks, one per node: with two node traces ranks 0, 2, … replay A and 1, 3, … B.
        // A window starting after a barrier at a uniform point outside detours meets one detour
        // with probability p = q/P (docs/VALIDATION.md), so with i ranks on A and j on B,
        // E[max delay] = d_A (1 − (1−p)^i) + d_B (1−p)^i (1 − (1−p)^j): 168.0 ns all on A,
        // 33.6 ns all on B, 114.4 ns half and half.
        let periodic = |d: u64| {
            let detours: Vec<(u64, u64)> = (0..100).map(|i| (i * 20_000 + 5_000, d)).collect();
            plan(2_000_000, &detours)
        };
        let (a, b) = (periodic(300), periodic(60));
        let closed = |i: i32, j: i32| {
            let miss: f64 = 1.0 - 1_000.0 / 20_000.0;
            300.0 * (1.0 - miss.powi(i)) + 60.0 * miss.powi(i) * (1.0 - miss.powi(j))
        };
        // Each seed fixes the ranks' start offsets (one sample of the joint start): the mean
        // over 8 seeds, within the two-sided 99 % Student t interval (7 degrees of freedom).
        const T7_99: f64 = 3.499;
        let delay = |plans: &[Arc<Plan>]| {
            let v: Vec<f64> = (1..=8)
                .map(|seed| {
                    let c = DesConfig {
                        seed,
                        ..cfg(1_000, 2_000, 0.0)
                    };
                    let out = simulate(plans, 16, SyncMode::None, &c, &|_| {}).unwrap();
                    out.averages.avg_max_qt_ns() - 1_000.0
                })
                .collect();
            let m = v.iter().sum::<f64>() / 8.0;
            let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 7.0).sqrt();
            (m, T7_99 * sd / 8f64.sqrt())
        };
        let on_a = delay(std::slice::from_ref(&a));
        let on_b = delay(std::slice::from_ref(&b));
        let mixed = delay(&[Arc::clone(&a), Arc::clone(&b)]);
        for ((m, half), want, what) in [
            (on_a, closed(16, 0), "A"),
            (on_b, closed(0, 16), "B"),
            (mixed, closed(8, 8), "A+B"),
        ] {
            assert!((m - want).abs() <= half, "{what}: {m} ± {half} vs {want}");
        }
        assert!(
            on_b.0 < mixed.0 && mixed.0 < on_a.0,
            "B {on_b:?} < A+B {mixed:?} < A {on_a:?}"
        );
    }

    fn algorithmic(alg: Algorithm, shape: LoopShape, o: f64, l: f64) -> CommModel {
        CommModel {
            algorithm: alg,
            shape,
            o_ns: o,
            l_ns: l,
        }
    }

    #[test]
    fn algorithmic_baselines_are_the_rounds_of_the_noise_free_algorithm() {
        // o = 3, l = 4: a round costs 2o + l = 10 ns; 128 ranks: 7 rounds (binomial: 14).
        let p = plan(10_000_000, &[(5_000, 10)]);
        for (alg, shape, qtb, period) in [
            (
                Algorithm::Dissemination,
                LoopShape::BarrierComputeBarrier,
                70,
                140,
            ),
            (Algorithm::Dissemination, LoopShape::ComputeBarrier, 70, 70),
            (Algorithm::BinomialTree, LoopShape::ComputeBarrier, 140, 140),
        ] {
            let c = DesConfig {
                comm: algorithmic(alg, shape, 3.0, 4.0),
                ..cfg(1_000, 5, 0.0)
            };
            let out = simulate(std::slice::from_ref(&p), 128, SyncMode::None, &c, &|_| {});
            let out = out.unwrap();
            assert_eq!(
                out.baseline_qtbt_ns,
                1_000.0 + qtb as f64,
                "{alg:?} {shape:?}"
            );
            assert_eq!(out.baseline_period_ns, 1_000.0 + period as f64);
        }
        let c = DesConfig {
            comm: algorithmic(
                Algorithm::RecursiveDoubling,
                LoopShape::ComputeAllreduce,
                3.0,
                4.0,
            ),
            ..cfg(1_000, 5, 0.0)
        };
        // Recursive doubling over 64 (6 rounds) plus the fold and the unfold of 36 ranks; the
        // critical path is not a whole number of rounds: only its bounds are closed.
        let out = simulate(std::slice::from_ref(&p), 100, SyncMode::None, &c, &|_| {}).unwrap();
        assert!(out.baseline_qtbt_ns > 1_060.0 && out.baseline_qtbt_ns <= 1_080.0);
    }

    #[test]
    fn a_detour_in_a_round_delays_every_rank_offloading_holds_one() {
        // 16 ranks on one node (k = 16, one shared start offset), q = 1000 ns. Rank 0 meets a
        // 500 ns detour at replay time 1020, inside the barrier after its compute.
        // Offloaded, stage 10 ns: the barrier completes at 1040, the detour still runs, rank 0
        // leaves at 1520: max qtb 1520. Dissemination, o = 3, l = 4 (rounds of 10 ns): rank 0
        // sends round 2 at 1020 and the detour takes it to 1523; rank 4 receives at 1527 and
        // ends the round at 1530, 500 late; round 3 passes that on to rank 12: the barrier ends
        // at 1000 + 4 · 10 + 500 = 1540.
        let period = 10_000_000u64;
        let off = SyncSchedule {
            mode: SyncMode::None,
            seed: 1,
        }
        .start_offset(0, period);
        assert!(off + 1_020 + 500 < period, "pick another seed");
        let far = [Detour {
            start_ns: (off + period / 2) % period,
            run_ns: 1,
        }];
        let mut streams: Vec<Stream> = (0..16)
            .map(|c| Stream::from_detours(c, 0, period, &far).unwrap())
            .collect();
        let hit = [Detour {
            start_ns: off + 1_020,
            run_ns: 500,
        }];
        streams[0] = Stream::from_detours(0, 0, period, &hit).unwrap();
        let t = jitter_trace::Trace {
            streams,
            ..jitter_trace::Trace::default()
        };
        let plans: Vec<Arc<Plan>> = (0..16)
            .map(|s| Plan::from_trace(&t, s, PlanOptions::ideal()).unwrap())
            .collect();
        let run = |comm: CommModel| {
            let c = DesConfig {
                ranks_per_node: 16,
                comm,
                ..cfg(1_000, 1, 10.0)
            };
            simulate(&plans, 16, SyncMode::None, &c, &|_| {}).unwrap()
        };
        let offloaded = run(CommModel::OFFLOADED);
        let dissemination = run(algorithmic(
            Algorithm::Dissemination,
            LoopShape::BarrierComputeBarrier,
            3.0,
            4.0,
        ));
        for o in [&offloaded, &dissemination] {
            assert_eq!(o.averages.phases, 1);
            assert_eq!(o.averages.sum_max_qt_ns, 1_000.0);
        }
        assert_eq!(offloaded.averages.sum_max_qtbt_ns, 1_520.0);
        assert_eq!(dissemination.averages.sum_max_qtbt_ns, 1_540.0);
    }

    #[test]
    fn the_indexed_engine_gives_the_walk_s_outcome_with_algorithmic_collectives() {
        let s = scattered_stream();
        for (scale, fraction) in [(1.0, 1.0), (2.5, 0.3)] {
            let o = PlanOptions {
                scale,
                fraction,
                ..PlanOptions::ideal()
            };
            let p = Plan::new(&s, o).unwrap();
            for (alg, shape) in [
                (Algorithm::Dissemination, LoopShape::BarrierComputeBarrier),
                (Algorithm::RecursiveDoubling, LoopShape::ComputeAllreduce),
                (Algorithm::BinomialTree, LoopShape::ComputeBarrier),
                (Algorithm::Offloaded, LoopShape::ComputeBarrier),
            ] {
                for mode in ["none", "phase", "every:3"] {
                    let mode: SyncMode = mode.parse().unwrap();
                    let c = DesConfig {
                        comm: algorithmic(alg, shape, 150.0, 400.0),
                        ..cfg(7_000, 300, 500.0)
                    };
                    let run = |e| {
                        simulate_engine(&Solo, std::slice::from_ref(&p), 37, mode, &c, e, &|_| {})
                            .unwrap()
                    };
                    let (w, i) = (run(Engine::Walk), run(Engine::Indexed));
                    assert_eq!(w, i, "{alg:?} {shape:?} {mode} S={scale} f={fraction}");
                    assert!(w.emulator.injected > 0);
                }
            }
        }
    }

    #[test]
    fn the_fraction_rule_stops_the_run() {
        let d: Vec<(u64, u64)> = (0..100).map(|i| (i * 10_000 + 5_000, 100)).collect();
        let mut o = PlanOptions::ideal();
        o.fraction = 0.5;
        let dd: Vec<Detour> = d
            .iter()
            .map(|&(start_ns, run_ns)| Detour { start_ns, run_ns })
            .collect();
        let p = Plan::new(&Stream::from_detours(0, 0, 1_000_000, &dd).unwrap(), o).unwrap();
        let out = simulate(&[p], 4, SyncMode::None, &cfg(1_000, 10_000, 0.0), &|_| {}).unwrap();
        assert!(out.stopped_by_fraction);
        // Half of a 1 ms stream holds about 500 µs / (1 µs + noise) phases, and never more.
        assert!(
            out.averages.phases < 500 && out.averages.phases > 400,
            "{}",
            out.averages.phases
        );
    }
}
