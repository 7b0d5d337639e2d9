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

use jitter_emulator::{Cursor, Plan, PlanStats, SyncMode, SyncSchedule};

use crate::indexed_replay::{IndexedReplay, SegmentStart};
use crate::plan_index::{CompileIndex as _, PlanIndex, PrefetchTicket};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::collective::{symmetric, Algorithm, Clocks};
use super::phase_loop::{
    algorithmic, clocks_of_engine, offloaded, Layout, PhaseStart, Phases, ReplayEngine,
};
use super::rank_layout::{Placement, Timelines};
pub use super::ranks::{share, MIN_CHUNK};
use super::simulation::index_allowed;
pub use super::simulation::{pool, BarrierModel, DesConfig, DesOutcome, Engine};
use crate::comm::Collective;

/// Bytes the simulation holds per simulated rank (one `RankState`, nothing per phase).
pub(crate) const RANK_STATE_BYTES: usize = std::mem::size_of::<RankState>();

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

/// Bytes the indexed simulation holds per simulated rank.
pub(crate) const INDEXED_RANK_BYTES: usize = std::mem::size_of::<IdxRank>();

/// Bytes per simulated rank the indexed simulation holds while it sets the ranks up (their
/// stream, start offset and count of copies, sorted).
pub(crate) const INDEXED_SETUP_BYTES: usize = std::mem::size_of::<(u32, u64, u64)>();

/// One virtual rank of the indexed engine.
#[derive(Debug, Clone, Copy)]
struct IdxRank {
    rep: IndexedReplay,
    start_ns: u64,
    limit_at: u64,
    /// Simulated ranks this state stands for ([`ReplayEngine::copies`]).
    copies: u64,
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
/// trace: `plans[s]` is stream s), mapped to ranks by [`Placement`]. The ranks are split over
/// the processes of `comm` (each simulates a contiguous share; per-phase maxima and sums are
/// reduced; [`crate::comm::Solo`] for one process); every process gets the outcome. `ix` holds the plans'
/// indexes, built once by the caller for every rank count and mode ([`indexes`], which says
/// where an engine may answer from them); `None`: the walk; both give the same outcome.
/// `on_phase` is called after every phase (progress).
pub fn simulate(
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
    let layout = Layout {
        lines: &lines,
        schedule: &schedule,
        lo,
        ranks,
    };
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
        return algorithmic(comm, &mut eng, &mut states, &layout, cfg, &opts, on_phase);
    }
    offloaded(comm, &mut eng, &mut states, &layout, cfg, ph, on_phase)
}

clocks_of_engine!(WalkClocks, RankState);
clocks_of_engine!(IdxClocks<'_>, IdxRank);

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
    #[inline]
    fn quiet(&self, r: &RankState, _: usize) -> u64 {
        // The next injection, once peeked, is fixed (its timer error drawn, clamped to the end
        // of the last): nothing is due before it. Not yet peeked: not known.
        r.pending.map_or(0, |(due, _)| due)
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
        // One plan (the usual case): no search, no placement arithmetic per question.
        if self.ix.len() == 1 {
            return 0;
        }
        match &self.bounds {
            Some(b) => b.partition_point(|&x| x <= g) - 1,
            None => self.place.plan(self.lo + g as u64),
        }
    }
    #[inline]
    fn step(&self, mut at: usize, g: usize) -> usize {
        if self.ix.len() == 1 {
            return 0;
        }
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
    fn quiet(&self, r: &IdxRank, _: usize) -> u64 {
        r.rep.quiet_until()
    }
    #[inline]
    fn receive_fast(&self, r: &mut IdxRank, si: usize, until: u64, o: u64) -> Option<(u64, u64)> {
        r.rep.receive_fast(&self.ix[si], until, o)
    }
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

/// The states of ranks `ranks` in rank order (as an algorithmic collective finds partners),
/// each built by `new_rank` from its stream's index and start segment; the segments are found in
/// order of position in their stream, so that neighbouring searches read neighbouring parts of
/// the index (in rank order, a million ranks' searches of a large index miss the cache at nearly
/// every step: half the cost of a two-phase draw). The same states as building each in rank
/// order; memory besides them: one (plan, position, rank) triple per rank while they are built.
fn states_in_rank_order(
    ix: &[PlanIndex],
    lines: &Timelines,
    ranks: std::ops::Range<u64>,
    schedule: &SyncSchedule,
    count: usize,
    new_rank: impl Fn(&PlanIndex, &SegmentStart) -> IdxRank,
) -> anyhow::Result<Vec<IdxRank>> {
    let place = lines.placement;
    let oom = |_| {
        anyhow::anyhow!(
            "cannot allocate {} MiB for {count} simulated ranks",
            (count as u128 * (INDEXED_RANK_BYTES + INDEXED_SETUP_BYTES) as u128) >> 20
        )
    };
    let lo = ranks.start;
    let mut order: Vec<(u32, u64, u64)> = Vec::new();
    order.try_reserve_exact(count).map_err(oom)?;
    order.extend(ranks.map(|r| {
        let s = place.plan(r);
        // A segment depends on the offset's position in its stream's period only.
        let pos = lines.start_offset(schedule, r) % ix[s].period_ns().max(1);
        (s as u32, pos, r - lo)
    }));
    order.par_sort_unstable();
    let Some(&(s0, p0, _)) = order.first() else {
        return Ok(Vec::new());
    };
    let first = new_rank(&ix[s0 as usize], &ix[s0 as usize].segment_start(p0));
    let mut states: Vec<IdxRank> = Vec::new();
    states.try_reserve_exact(count).map_err(oom)?;
    states.resize(count, first);
    for &(s, pos, g) in &order {
        let x = &ix[s as usize];
        states[g as usize] = new_rank(x, &x.segment_start(pos));
    }
    Ok(states)
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
    let layout = Layout {
        lines: &lines,
        schedule: &schedule,
        lo,
        ranks,
    };
    // The rank states plus, while they are set up, one (stream, offset) pair each.
    let count = usize::try_from(hi - lo)
        .ok()
        .filter(|n| {
            n.checked_mul(INDEXED_RANK_BYTES + INDEXED_SETUP_BYTES)
                .is_some()
        })
        .ok_or_else(|| anyhow::anyhow!("{} simulated ranks do not fit in memory", hi - lo))?;
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
            states = states_in_rank_order(ix, &lines, lo..hi, &schedule, count, new_rank)?;
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
        return algorithmic(comm, &mut eng, &mut states, &layout, cfg, &opts, on_phase);
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
    offloaded(comm, &mut eng, &mut states, &layout, cfg, ph, on_phase)
}

#[cfg(test)]
mod tests;
