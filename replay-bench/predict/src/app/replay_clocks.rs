//! The simulated ranks' replay clocks as the application's steps ask them
//! ([`AppClock`]: the collectives' [`Clocks`] plus resync, the fraction limit and the counts):
//! on the compiled index ([`IdxClock`], the engine's `IndexedReplay` with its quiet times, the
//! default), or walking each rank's cursor with timer errors ([`WalkClock`], where the index is
//! not exact: itimer errors, an O-after-a-gap curve), and without noise ([`QuietClock`], the
//! baseline). Each answers exactly as the loop's engines do (`des`): a detour due before the
//! growing end of work takes its span; an idle rank loses only to a detour still running when
//! it may go on.

use std::sync::Arc;

use jitter_emulator::{Cursor, Plan, PlanStats};

use crate::indexed_replay::IndexedReplay;
use crate::plan_index::PlanIndex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::collective::Clocks;
use crate::rank_layout::Placement;

/// What the application's iteration loop asks of the ranks besides [`Clocks`].
pub(crate) trait AppClock: Clocks {
    /// Resyncs state `g` to timeline point `point` at replay time `now`: the counts of the
    /// segment left where the clock does not keep them per rank.
    fn resync(&self, r: &mut Self::Rank, g: usize, point: u64, now: u64) -> PlanStats;
    /// When the state's replay reaches the fraction f.
    fn limit_at(&self, r: &Self::Rank) -> u64;
    /// What the state's current segment injected and its share of the stream by `now`.
    fn totals(&self, r: &Self::Rank, g: usize, now: u64) -> (PlanStats, f64);
}

/// The plan index of state `g`: its rank's, or the one plan of a shared state.
#[inline]
fn plan_of(place: Placement, g: usize) -> usize {
    place.plan(g as u64)
}

/// One rank on the index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdxRank {
    rep: IndexedReplay,
    limit_at: u64,
    copies: u64,
}

/// The ranks on the compiled index of each plan (states in rank order, or one shared state).
pub(crate) struct IdxClock<'a> {
    pub(crate) ix: &'a [PlanIndex],
    pub(crate) place: Placement,
    pub(crate) fraction: f64,
}

impl IdxClock<'_> {
    /// A rank starting at timeline point `offset` on plan `plan`, standing for `copies` ranks.
    pub(crate) fn rank(&self, plan: usize, offset: u64, copies: u64) -> IdxRank {
        let x = &self.ix[plan];
        let mut r = IdxRank {
            rep: x.replay(&x.segment_start(offset)),
            limit_at: u64::MAX,
            copies,
        };
        self.set_limit(&mut r, x, 0);
        r
    }

    fn set_limit(&self, r: &mut IdxRank, x: &PlanIndex, now: u64) {
        let ns_per_progress = x.period_ns() as f64 * x.options().scale;
        let left = (self.fraction - r.rep.progress_at(x, now)) * ns_per_progress;
        r.limit_at = now.saturating_add(left.max(0.0).ceil() as u64);
    }
}

impl Clocks for IdxClock<'_> {
    type Rank = IdxRank;
    #[inline]
    fn work(&self, r: &mut IdxRank, g: usize, start: u64, work: u64) -> u64 {
        let x = &self.ix[plan_of(self.place, g)];
        match r.rep.compute_fast(x, start, work) {
            Some(e) => e,
            None => r.rep.compute(x, &r.rep.segment(x), start, work),
        }
    }
    #[inline]
    fn idle_until(&self, r: &mut IdxRank, g: usize, t: u64) -> u64 {
        let x = &self.ix[plan_of(self.place, g)];
        match r.rep.leave_barrier_fast(x, t) {
            Some(e) => e,
            None => r.rep.leave_barrier(x, &r.rep.segment(x), t),
        }
    }
    #[inline]
    fn quiet_until(&self, r: &IdxRank, _: usize) -> u64 {
        r.rep.quiet_until()
    }
    #[inline]
    fn copies_of(&self, r: &IdxRank) -> u64 {
        r.copies
    }
}

impl AppClock for IdxClock<'_> {
    fn resync(&self, r: &mut IdxRank, g: usize, point: u64, now: u64) -> PlanStats {
        let x = &self.ix[plan_of(self.place, g)];
        let old = r.rep.segment(x);
        let left = r.rep.resync(x, &old, &x.segment_start(point), now);
        self.set_limit(r, x, now);
        left * r.copies
    }
    fn limit_at(&self, r: &IdxRank) -> u64 {
        r.limit_at
    }
    fn totals(&self, r: &IdxRank, g: usize, now: u64) -> (PlanStats, f64) {
        let x = &self.ix[plan_of(self.place, g)];
        (
            r.rep.stats(x, &r.rep.segment(x)) * r.copies,
            r.rep.progress_at(x, now),
        )
    }
}

/// One rank walking its cursor, with its timer errors.
#[derive(Debug, Clone)]
pub(crate) struct WalkRank {
    cursor: Cursor,
    /// Next injection as (due, span), due already drifted and clamped.
    pending: Option<(u64, u64)>,
    busy_until: u64,
    drift_ns: i64,
    limit_at: u64,
    rng: SmallRng,
}

/// The ranks walking their cursors (states in rank order).
pub(crate) struct WalkClock {
    /// Half-width of one uniform timer error (its sd × √3), replay ns; 0: none.
    pub(crate) w: f64,
    pub(crate) fraction: f64,
    pub(crate) scale: f64,
}

impl WalkClock {
    /// Rank `rank` starting at timeline point `offset` of `plan`; its timer errors drawn from
    /// `seed` as the loop's walk draws them.
    pub(crate) fn rank(&self, plan: &Arc<Plan>, offset: u64, rank: u64, seed: u64) -> WalkRank {
        let mut r = WalkRank {
            cursor: plan.cursor(offset),
            pending: None,
            busy_until: 0,
            drift_ns: 0,
            limit_at: u64::MAX,
            rng: SmallRng::seed_from_u64(
                seed ^ rank.wrapping_add(1).wrapping_mul(0xA076_1D64_78BD_642F),
            ),
        };
        self.set_limit(&mut r, 0);
        r
    }

    fn set_limit(&self, r: &mut WalkRank, now: u64) {
        let ns_per_progress = r.cursor.plan().period_ns() as f64 * self.scale;
        let left = (self.fraction - r.cursor.progress_at(now)) * ns_per_progress;
        r.limit_at = now.saturating_add(left.max(0.0).ceil() as u64);
    }

    #[inline]
    fn peek(&self, r: &mut WalkRank) -> Option<(u64, u64)> {
        if r.pending.is_none() {
            let inj = r.cursor.next()?;
            let mut due = inj.due_ns;
            if self.w > 0.0 {
                r.drift_ns += r.rng.random_range(-self.w..=self.w).round() as i64;
                due = due.saturating_add_signed(r.drift_ns);
            }
            r.pending = Some((due.max(r.busy_until), inj.span_ns));
        }
        r.pending
    }

    #[inline]
    fn consume(r: &mut WalkRank, due: u64, span: u64) {
        r.pending = None;
        r.busy_until = due + span;
        r.cursor.confirm();
    }
}

impl Clocks for WalkClock {
    type Rank = WalkRank;
    fn work(&self, r: &mut WalkRank, _: usize, start: u64, work: u64) -> u64 {
        let mut end = start + work;
        while let Some((due, span)) = self.peek(r) {
            if due >= end {
                break;
            }
            Self::consume(r, due, span);
            end += span;
        }
        end
    }
    fn idle_until(&self, r: &mut WalkRank, _: usize, t: u64) -> u64 {
        while let Some((due, span)) = self.peek(r) {
            if due >= t {
                break;
            }
            Self::consume(r, due, span);
            if due + span > t {
                return due + span;
            }
        }
        t
    }
}

impl AppClock for WalkClock {
    fn resync(&self, r: &mut WalkRank, _: usize, point: u64, now: u64) -> PlanStats {
        r.cursor.resync(point, now);
        r.pending = None;
        r.drift_ns = 0;
        r.busy_until = now;
        self.set_limit(r, now);
        // The cursor keeps its counts across resyncs.
        PlanStats::default()
    }
    fn limit_at(&self, r: &WalkRank) -> u64 {
        r.limit_at
    }
    fn totals(&self, r: &WalkRank, _: usize, now: u64) -> (PlanStats, f64) {
        (r.cursor.stats(), r.cursor.progress_at(now))
    }
}

/// Ranks without noise (the baseline); a state is the count of ranks it stands for.
pub(crate) struct QuietClock;

impl Clocks for QuietClock {
    type Rank = u64;
    fn work(&self, _: &mut u64, _: usize, start: u64, work: u64) -> u64 {
        start + work
    }
    fn idle_until(&self, _: &mut u64, _: usize, t: u64) -> u64 {
        t
    }
    fn quiet_until(&self, _: &u64, _: usize) -> u64 {
        u64::MAX
    }
    fn copies_of(&self, r: &u64) -> u64 {
        *r
    }
}

impl AppClock for QuietClock {
    fn resync(&self, _: &mut u64, _: usize, _: u64, _: u64) -> PlanStats {
        PlanStats::default()
    }
    fn limit_at(&self, _: &u64) -> u64 {
        u64::MAX
    }
    fn totals(&self, _: &u64, _: usize, _: u64) -> (PlanStats, f64) {
        (PlanStats::default(), 0.0)
    }
}
