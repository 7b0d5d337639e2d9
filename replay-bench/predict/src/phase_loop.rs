//! The phase loops of the simulation, the same for both engines: the benchmark loop with an
//! offloaded collective ([`offloaded`]) and with a collective run as messages on the ranks'
//! clocks ([`algorithmic`], with its noise-free baseline), what they ask of an engine
//! ([`ReplayEngine`], [`PhaseStart`]), how a pass visits the states of a chunk (prefetching the
//! index lines of the ranks [`PREFETCH_AHEAD`] states ahead), and the phases' bookkeeping
//! ([`Phases`], [`finish`]).

use jitter_emulator::{PlanOptions, PlanStats, SyncSchedule};

use crate::plan_index::PrefetchTicket;
use rayon::prelude::*;

use super::collective::{self, Call, Clocks, CommModel, Costs, LoopShape, Scratch};
use super::rank_layout::Timelines;
use super::ranks::chunk_of;
use super::simulation::{DesConfig, DesOutcome};
use crate::comm::{Collective, Solo};
use jitter_report::metrics::{PhaseAverages, PhaseSample};
use jitter_report::report::EmulatorTotals;

/// Reduction of one pass over the ranks (integers, so the result does not depend on how rayon
/// splits the ranks).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pass {
    max_end: u64,
    max_qt: u64,
    sum_qt: u64,
    max_qtb_prev: u64,
    over_limit: bool,
}

/// Combines the passes of all processes (a no-op for one process). Times stay well below
/// 2^53 ns, so the f64 collectives are exact.
pub(crate) fn reduce(comm: &dyn Collective, p: Pass) -> Pass {
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

/// The phase loop's bookkeeping, the same for both engines: the scaled quanta and barrier
/// latency, the barrier every rank leaves next, the averages of the phases closed so far, and
/// whether the fraction rule stopped the run.
pub(crate) struct Phases {
    pub(crate) ranks: u64,
    pub(crate) q: u64,
    pub(crate) scale: f64,
    pub(crate) latency: u64,
    pub(crate) averages: PhaseAverages,
    /// When the bottom barrier of the last computed phase completes (replay ns).
    pub(crate) barrier_prev: Option<u64>,
    /// (max qt, sum qt) of the last computed phase.
    pub(crate) prev: Option<(u64, u64)>,
    pub(crate) stopped_by_fraction: bool,
    pub(crate) last_barrier: u64,
    /// The loop has a barrier at its top (Algorithm 1); else a phase starts where the last
    /// one's collective left the rank.
    pub(crate) top_barrier: bool,
    /// The phase period without noise (replay ns).
    pub(crate) baseline_period: u64,
}

impl Phases {
    /// Checks the configuration and scales q and the barrier latency by the plan's S.
    pub(crate) fn new(ranks: u64, cfg: &DesConfig, opts: &PlanOptions) -> anyhow::Result<Self> {
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
    pub(crate) fn close(&mut self, p: u64, exits: &Pass, on_phase: &(dyn Fn(u64) + Sync)) -> bool {
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
    pub(crate) fn top(&self, exits: &Pass) -> Option<u64> {
        if !self.top_barrier {
            return None;
        }
        self.barrier_prev.map(|_| exits.max_end + self.latency)
    }

    /// Records a computed phase (`pass`, reduced over processes) and its bottom barrier.
    pub(crate) fn computed(&mut self, pass: &Pass) {
        self.prev = Some((pass.max_qt, pass.sum_qt));
        self.barrier_prev = Some(pass.max_end + self.latency);
    }
}

/// Sums the counts over processes and assembles the outcome.
pub(crate) fn finish(
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
pub(crate) trait ReplayEngine: Clocks {
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
    /// A message's receive answered in one search where the engine can (see
    /// [`Clocks::receive`]): idle until `until`, then work `o`; the end and the quiet time after
    /// it. `None`: nothing changed (the questions are asked one after the other).
    #[inline]
    fn receive_fast(
        &self,
        _r: &mut Self::Rank,
        _at: usize,
        _until: u64,
        _o: u64,
    ) -> Option<(u64, u64)> {
        None
    }
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

            #[inline]
            fn receive(&self, r: &mut $rank, g: usize, until: u64, o: u64, q: &mut u64) -> u64 {
                match self.receive_fast(r, self.locate(g), until, o) {
                    Some((end, quiet)) => {
                        *q = quiet;
                        end
                    }
                    None => $crate::collective::idle_then_work(self, r, g, until, o, q),
                }
            }
            #[inline]
            fn prefetch(&self, r: &$rank, g: usize) {
                self.prefetch_barrier(r, self.locate(g))
            }
        }
    };
}
pub(crate) use clocks_of_engine;

clocks_of_engine!(Quiet, ());

/// A rank of the offloaded loop, which keeps the start of its phase in its state.
pub(crate) trait PhaseStart {
    /// Start of the rank's current phase, replay ns.
    fn start_ns(&self) -> u64;
    /// Sets it.
    fn set_start(&mut self, t: u64);
}

/// Resyncs every rank, at its own time `now[g]`, to its node trace's timeline point
/// (`points[t]` for node trace t).
pub(crate) fn resync_all<E: ReplayEngine>(
    eng: &mut E,
    states: &mut [E::Rank],
    now: &[u64],
    points: &[u64],
) {
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
pub(crate) fn totals<E: ReplayEngine>(
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

/// Ranks without noise: the baseline of an algorithmic collective.
pub(crate) struct Quiet;

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
    fn quiet(&self, _: &(), _: usize) -> u64 {
        // Nothing is ever due: every question of a collective has its closed form.
        u64::MAX
    }
}

/// How many states ahead of its search a pass prefetches a rank's index lines (a compute
/// search's second stage; its first stage twice as far): enough that several ranks' misses are
/// in flight at once, few enough that the core still tracks them all (`scripts/bench-predict.sh`
/// on a dense trace: 4 beat 1–3 and 5–32; 8 took ≈ 15 % longer, no prefetch 2×).
pub(crate) const PREFETCH_AHEAD: usize = 4;

/// What a pass's searches read, asked for some states ahead of them.
pub(crate) enum Ahead<'a, H> {
    /// Nothing (a pass whose searches start where no state says yet).
    Nothing,
    /// Barrier searches, near each rank's next entry.
    Barrier,
    /// Compute searches: `H(j, state)` is the start and work of the chunk's state j.
    Compute(&'a H),
}

/// The [`Ahead`] of a pass without compute searches.
pub(crate) type NoHint<R> = fn(usize, &R) -> (u64, u64);

/// Visits the states of one chunk (its first state is `g0`) in order, each with where it sits
/// (`body(state, at)`), after asking the engine to prefetch what the searches of the states
/// [`PREFETCH_AHEAD`] ahead (and, for a compute search's first stage, twice that) read, so
/// that the cache misses of several ranks' searches overlap.
pub(crate) fn visit_chunk<E: ReplayEngine, H: Fn(usize, &E::Rank) -> (u64, u64)>(
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
pub(crate) fn visit_states<E: ReplayEngine, H: Fn(usize, &E::Rank) -> (u64, u64)>(
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
pub(crate) fn offloaded<E: ReplayEngine>(
    comm: &dyn Collective,
    eng: &mut E,
    states: &mut [E::Rank],
    layout: &Layout,
    cfg: &DesConfig,
    mut ph: Phases,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome>
where
    E::Rank: PhaseStart,
{
    let Layout {
        lines, schedule, ..
    } = *layout;
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
pub(crate) struct LoopRun {
    averages: PhaseAverages,
    stopped_by_fraction: bool,
    /// Latest exit from the collective of the last phase closed.
    last_exit: u64,
    /// Max qtb of the last phase closed.
    last_max_qtb: u64,
    /// Latest exit of the phase before it.
    prev_exit: u64,
}

/// What [`algorithmic_loop`] runs: this process holds ranks `lo..lo + states.len()` of `n`;
/// `resync(p, points)` fills the resync point of each node trace when phase p resyncs (else
/// false); `phases` phases of `q` (replay ns) under `model` with the scaled `costs`.
#[derive(Clone, Copy)]
pub(crate) struct LoopSpec<'a> {
    pub(crate) lo: u64,
    pub(crate) n: u64,
    pub(crate) resync: &'a dyn Fn(u64, &mut [u64]) -> bool,
    pub(crate) phases: u64,
    pub(crate) q: u64,
    pub(crate) model: CommModel,
    pub(crate) costs: Costs,
    pub(crate) scale: f64,
}

/// Where this process's ranks stand: their timelines and sync schedule, and its share
/// `lo..lo + states` of `ranks` (both phase loops read it).
#[derive(Clone, Copy)]
pub(crate) struct Layout<'a> {
    pub(crate) lines: &'a Timelines,
    pub(crate) schedule: &'a SyncSchedule,
    pub(crate) lo: u64,
    pub(crate) ranks: u64,
}

/// The benchmark loop with the collective run as messages on the ranks' clocks ([`LoopSpec`]);
/// `t` ends as each rank's time.
pub(crate) fn algorithmic_loop<E: ReplayEngine>(
    comm: &dyn Collective,
    eng: &mut E,
    states: &mut [E::Rank],
    points: &mut [u64],
    spec: &LoopSpec,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<(LoopRun, Vec<u64>)> {
    let LoopSpec {
        lo,
        n,
        resync,
        phases,
        q,
        model,
        costs,
        scale,
    } = *spec;
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
    let call = Call {
        alg: model.algorithm,
        costs,
        n,
        lo,
    };
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
            collective::run(comm, eng, &call, states, &mut t, &mut scratch);
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
        collective::run(comm, eng, &call, states, &mut t, &mut scratch);
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
pub(crate) const BASELINE_PHASES: u64 = 3;

/// The algorithmic loop for one engine, with its noise-free baseline, finished into the outcome
/// (the engine's totals at every rank's final time).
pub(crate) fn algorithmic<E: ReplayEngine>(
    comm: &dyn Collective,
    eng: &mut E,
    states: &mut [E::Rank],
    layout: &Layout,
    cfg: &DesConfig,
    opts: &PlanOptions,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    let Layout {
        lines,
        schedule,
        lo,
        ranks,
    } = *layout;
    let mut ph = Phases::new(ranks, cfg, opts)?;
    let model = cfg.comm.resolved();
    let costs = Costs::scaled(&model, opts.scale);
    // The baseline: the same loop without noise, every rank in this process (it is cheap:
    // no replay), the qtb of its last phase.
    let (quiet, _) = {
        let mut units: Vec<()> = Vec::new();
        units.resize(usize::try_from(ranks)?, ());
        let spec = LoopSpec {
            lo: 0,
            n: ranks,
            resync: &|_, _| false,
            phases: BASELINE_PHASES.min(cfg.phases),
            q: ph.q,
            model,
            costs,
            scale: opts.scale,
        };
        algorithmic_loop(&Solo, &mut Quiet, &mut units, &mut [], &spec, &|_| {})?
    };
    let resync = |p: u64, points: &mut [u64]| lines.resync_points(schedule, p, points);
    let mut points = lines.points_buffer();
    let spec = LoopSpec {
        lo,
        n: ranks,
        resync: &resync,
        phases: cfg.phases,
        q: ph.q,
        model,
        costs,
        scale: opts.scale,
    };
    let (run, now) = algorithmic_loop(comm, eng, states, &mut points, &spec, on_phase)?;
    ph.latency = quiet.last_max_qtb - ph.q;
    ph.baseline_period = quiet.last_exit - quiet.prev_exit;
    ph.averages = run.averages;
    ph.stopped_by_fraction = run.stopped_by_fraction;
    ph.last_barrier = run.last_exit;
    let (stats, max_progress) = totals(eng, states, |g, _| now[g]);
    finish(comm, stats, max_progress, cfg, ph)
}
