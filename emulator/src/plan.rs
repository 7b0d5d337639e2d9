//! The replay plan: which detour a rank sees, when and for how long, after scaling, merging and
//! compensation. Pure arithmetic with no system calls and no allocation after construction, so
//! the signal-driven injector (wall clock) and the predictor (virtual clock) execute the same plan.
//!
//! Times on the trace are mapped onto an *unrolled timeline*: position `U = lap · D + (t − begin)`
//! for a stream window `[begin, end)` of length `D`, so replay wraps around the end of the stream.
//! A replay segment starts at a timeline point `p` and replay time `r0`; a detour starting at `U`
//! is due at `r0 + S · (U − p)`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use jitter_trace::{Record, Stream, Trace};

/// How the injector arms its timer, which decides how timer lateness is compensated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TimerKind {
    /// `setitimer(ITIMER_REAL)`: relative intervals armed L early; errors accumulate.
    Itimer,
    /// `timer_create(CLOCK_MONOTONIC)` with absolute deadlines from the plan: no accumulation.
    #[default]
    Abstime,
}

impl std::str::FromStr for TimerKind {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, PlanError> {
        match s {
            "itimer" => Ok(TimerKind::Itimer),
            "abstime" => Ok(TimerKind::Abstime),
            other => Err(PlanError::Option(format!(
                "unknown timer '{other}' (use itimer or abstime)"
            ))),
        }
    }
}

/// The knobs of a replay: scale S, overhead O, minimum sleep M, lateness L, fraction f, timer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// Scale factor S applied to run- and sleep-times (pitfall 1).
    pub scale: f64,
    /// Overhead O, ns of application time one injection costs beyond its busy loop.
    pub overhead_ns: u64,
    /// Minimum sleep M, ns: scaled sleeps shorter than this merge two detours (pitfall 2).
    pub min_sleep_ns: u64,
    /// Timer lateness L, ns: relative timers are armed this much early.
    pub lateness_ns: u64,
    /// Fraction f of the stream after which the replay stops (pitfall 3), in (0, 1].
    pub fraction: f64,
    /// Timer the injector uses.
    pub timer: TimerKind,
    /// O as a function of the time since the previous injection (sparser injections cost
    /// more); empty: `overhead_ns` for every injection.
    #[serde(default)]
    pub overhead_by_gap: OverheadByGap,
}

/// Largest scale factor S a plan accepts.
pub const MAX_SCALE: f64 = 1000.0;

/// Longest planned injection (one detour or a merged run of them, scaled), ns: no injection
/// holds a CPU longer; also the bound of O, M and L.
pub const MAX_DETOUR_NS: u64 = 10_000_000_000;

/// Most points an [`OverheadByGap`] holds.
pub const OVERHEAD_POINTS: usize = 8;

/// O after a gap: points (gap since the previous injection's end, O), both ns, sorted by gap;
/// linear in log(gap) between points, the end point's value beyond them. Fixed size, so that
/// [`PlanOptions`] stays `Copy` for the signal handler and the predictor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OverheadByGap {
    points: [(u64, u64); OVERHEAD_POINTS],
    len: u8,
}

impl OverheadByGap {
    /// The curve through `points` (gap ns, O ns); refused when there are more than
    /// [`OVERHEAD_POINTS`], a gap of 0, or gaps not strictly increasing.
    pub fn new(points: &[(u64, u64)]) -> Result<Self, PlanError> {
        if points.len() > OVERHEAD_POINTS {
            return Err(PlanError::Option(format!(
                "at most {OVERHEAD_POINTS} overhead points, got {}",
                points.len()
            )));
        }
        if points.first().is_some_and(|p| p.0 == 0) || points.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(PlanError::Option(
                "overhead points need gaps > 0 in increasing order".into(),
            ));
        }
        let mut c = OverheadByGap::default();
        c.points[..points.len()].copy_from_slice(points);
        c.len = points.len() as u8;
        Ok(c)
    }

    /// The points, sorted by gap.
    pub fn points(&self) -> &[(u64, u64)] {
        &self.points[..usize::from(self.len)]
    }

    /// O after a gap of `gap_ns`; `None` for an empty curve.
    #[inline]
    pub fn at(&self, gap_ns: u64) -> Option<u64> {
        let p = self.points();
        let (first, last) = (p.first()?, p.last()?);
        if gap_ns <= first.0 {
            return Some(first.1);
        }
        if gap_ns >= last.0 {
            return Some(last.1);
        }
        let i = p.partition_point(|q| q.0 <= gap_ns);
        let ((g0, o0), (g1, o1)) = (p[i - 1], p[i]);
        // `ln` is a libm call (pure, async-signal-safe); it runs only with a curve (opt-in),
        // once per injection built.
        let t = ((gap_ns as f64).ln() - (g0 as f64).ln()) / ((g1 as f64).ln() - (g0 as f64).ln());
        Some((o0 as f64 + t * (o1 as f64 - o0 as f64) + 0.5) as u64)
    }
}

impl PlanOptions {
    /// O for an injection due `gap_ns` after the previous one ended (`None`: the first after a
    /// start or a resync, which takes `overhead_ns`).
    #[inline]
    pub fn overhead_after(&self, gap_ns: Option<u64>) -> u64 {
        gap_ns
            .and_then(|g| self.overhead_by_gap.at(g))
            .unwrap_or(self.overhead_ns)
    }

    /// Every detour exactly as recorded: S = 1, no overhead, no merging, no lateness, f = 1.
    pub fn ideal() -> Self {
        PlanOptions {
            scale: 1.0,
            overhead_ns: 0,
            min_sleep_ns: 0,
            lateness_ns: 0,
            fraction: 1.0,
            timer: TimerKind::Abstime,
            overhead_by_gap: OverheadByGap::default(),
        }
    }

    /// Checks S, f, and that O, M and L are within [`MAX_DETOUR_NS`].
    pub fn validate(&self) -> Result<(), PlanError> {
        if !self.scale.is_finite() || self.scale <= 0.0 || self.scale > MAX_SCALE {
            return Err(PlanError::Option(format!(
                "scale must be a finite number in (0, {MAX_SCALE}], got {}",
                self.scale
            )));
        }
        for (name, v) in [
            ("overhead", self.overhead_ns),
            ("minimum sleep", self.min_sleep_ns),
            ("lateness", self.lateness_ns),
        ] {
            if v > MAX_DETOUR_NS {
                return Err(PlanError::Option(format!(
                    "{name} must be at most {} s, got {v} ns",
                    MAX_DETOUR_NS / 1_000_000_000
                )));
            }
        }
        if !(self.fraction > 0.0 && self.fraction <= 1.0) {
            return Err(PlanError::Option(format!(
                "fraction must be in (0, 1], got {}",
                self.fraction
            )));
        }
        Ok(())
    }

    /// `x` ns of trace time in replay time (× S, rounded).
    #[inline]
    pub fn scaled(&self, x: u64) -> u64 {
        if self.scale == 1.0 {
            return x;
        }
        // Round half up without a libm call (x and S are non-negative); this is the hot path
        // of both the signal handler and the predictor.
        (x as f64 * self.scale + 0.5) as u64
    }
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions::ideal()
    }
}

/// Why a plan cannot be built.
#[derive(Debug, Error)]
pub enum PlanError {
    /// A bad option value.
    #[error("{0}")]
    Option(String),
    /// The stream has nothing to replay.
    #[error("stream {0} has no records: nothing to replay")]
    Empty(usize),
    /// The stream index does not exist.
    #[error("stream {index} does not exist (the trace has {count})")]
    NoStream {
        /// Requested index.
        index: usize,
        /// Streams in the trace.
        count: usize,
    },
    /// Every detour is shorter than the overhead.
    #[error(
        "overhead {overhead_ns} ns is at least every scaled detour (longest {longest_ns} ns): \
         nothing would be injected; raise --scale"
    )]
    NothingInjectable {
        /// Overhead O.
        overhead_ns: u64,
        /// Longest scaled run-time in the stream.
        longest_ns: u64,
    },
    /// The stream breaks the trace invariants.
    #[error(transparent)]
    Trace(#[from] jitter_trace::TraceError),
}

/// One detour to inject, in replay time (ns from the replay origin, scaled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Injection {
    /// When the detour should begin.
    pub due_ns: u64,
    /// Intended detour length S·run (runs of merged detours added).
    pub span_ns: u64,
    /// Busy-loop length: span − O (O after the gap since the previous injection).
    pub busy_ns: u64,
    /// Unrolled timeline position of the detour's start (trace ns).
    pub trace_ns: u64,
    /// When the next injection is due (`u64::MAX` when this is the last).
    pub next_due_ns: u64,
    /// Relative timer interval from the end of this detour to the next, less L (itimer).
    pub arm_after_ns: u64,
    /// How many trace detours this injection stands for (> 1 when sleeps were merged).
    pub detours: u32,
}

/// What a plan did and could not do, counted for the injections executed: one handed out
/// counts once the next is asked for; the one computed ahead, and one handed out but
/// discarded by a resync, never count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PlanStats {
    /// Trace detours met (injected, merged or dropped).
    pub detours: u64,
    /// Injections produced.
    pub injections: u64,
    /// Trace detours inside those injections.
    pub injected_detours: u64,
    /// Σ span of produced injections (application time taken, intended), ns.
    pub injected_ns: u64,
    /// Σ busy of produced injections, ns.
    pub busy_ns: u64,
    /// Trace detours dropped because S·run ≤ O.
    pub dropped: u64,
    /// Σ S·run of dropped detours, ns.
    pub dropped_ns: u64,
    /// Detours merged into their predecessor because S·sleep < M.
    pub merged: u64,
    /// Σ S·run of every detour met, ns.
    pub noise_ns: u64,
}

impl PlanStats {
    /// Share of the met noise time that was injected.
    pub fn injected_share(&self) -> f64 {
        if self.noise_ns == 0 {
            0.0
        } else {
            self.injected_ns as f64 / self.noise_ns as f64
        }
    }
}

/// A stream prepared for replay with fixed options; cheap to share between cursors.
#[derive(Debug)]
pub struct Plan {
    records: Vec<Record>,
    begin_ns: u64,
    period_ns: u64,
    opts: PlanOptions,
}

impl Plan {
    /// Prepares `stream` (validated) for replay over its own window.
    pub fn new(stream: &Stream, opts: PlanOptions) -> Result<Arc<Self>, PlanError> {
        Plan::with_window(stream, 0, stream.begin_ns, stream.end_ns, opts)
    }

    /// Prepares stream `index` of `trace` over the trace's common window, so that all streams of
    /// one node share one timeline (per-core traces are replayed as a group).
    pub fn from_trace(
        trace: &Trace,
        index: usize,
        opts: PlanOptions,
    ) -> Result<Arc<Self>, PlanError> {
        let stream = trace.streams.get(index).ok_or(PlanError::NoStream {
            index,
            count: trace.streams.len(),
        })?;
        let (begin, end) = common_window(trace);
        Plan::with_window(stream, index, begin, end, opts)
    }

    fn with_window(
        stream: &Stream,
        index: usize,
        begin_ns: u64,
        end_ns: u64,
        opts: PlanOptions,
    ) -> Result<Arc<Self>, PlanError> {
        opts.validate()?;
        stream.validate(index)?;
        if stream.records.is_empty() {
            return Err(PlanError::Empty(index));
        }
        let first = stream.records[0].start_ns;
        let last = stream.records[stream.records.len() - 1].end_ns();
        if first < begin_ns || last > end_ns || end_ns <= begin_ns {
            return Err(PlanError::Option(format!(
                "stream {index} does not fit its window [{begin_ns}, {end_ns}) ns"
            )));
        }
        let longest = stream
            .records
            .iter()
            .map(|r| opts.scaled(r.run_ns))
            .max()
            .unwrap_or(0);
        if longest <= opts.overhead_ns {
            return Err(PlanError::NothingInjectable {
                overhead_ns: opts.overhead_ns,
                longest_ns: longest,
            });
        }
        let merged = longest_injection_ns(&stream.records, end_ns - begin_ns, &opts);
        if merged > MAX_DETOUR_NS {
            return Err(PlanError::Option(format!(
                "one planned injection of stream {index} would last at least {:.3} s (run-times × S {}, \
                 merged across scaled sleeps shorter than M = {} ns), over the bound of {} s: \
                 lower the scale or the minimum sleep",
                merged as f64 / 1e9,
                opts.scale,
                opts.min_sleep_ns,
                MAX_DETOUR_NS / 1_000_000_000
            )));
        }
        let mut records = stream.records.clone();
        // Sleeps are re-derived from the window so the last one reaches the common end.
        let n = records.len();
        records[n - 1].sleep_ns = end_ns - records[n - 1].end_ns();
        Ok(Arc::new(Plan {
            records,
            begin_ns,
            period_ns: end_ns - begin_ns,
            opts,
        }))
    }

    /// The options in force.
    pub fn options(&self) -> &PlanOptions {
        &self.opts
    }

    /// Length D of the timeline (one pass over the stream), trace ns.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Start of the window, trace ns.
    pub fn begin_ns(&self) -> u64 {
        self.begin_ns
    }

    /// The records replayed.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Starts a replay at timeline point `offset_ns` (trace ns from the window start, < D).
    pub fn cursor(self: &Arc<Self>, offset_ns: u64) -> Cursor {
        let mut c = Cursor {
            plan: Arc::clone(self),
            pos: Position::default(),
            lookahead: None,
            seg_trace0: 0,
            seg_replay0: 0,
            consumed_before_ns: 0,
            limit_ns: (self.period_ns as f64 * self.opts.fraction).round() as u64,
            finished: false,
            built: PlanStats::default(),
            executed: PlanStats::default(),
            handed_through: PlanStats::default(),
            last_end_ns: None,
        };
        c.position(offset_ns % self.period_ns, 0);
        c
    }
}

/// The longest injection `records` can give (scaled run-times, merged across scaled sleeps
/// shorter than M, around the timeline of length `period_ns`), saturating just above
/// [`MAX_DETOUR_NS`].
fn longest_injection_ns(records: &[Record], period_ns: u64, opts: &PlanOptions) -> u64 {
    let n = records.len();
    let (mut longest, mut chain) = (0u64, 0u64);
    for i in 0..2 * n {
        let r = &records[i % n];
        chain = chain.saturating_add(opts.scaled(r.run_ns));
        longest = longest.max(chain);
        if longest > MAX_DETOUR_NS {
            break;
        }
        let gap = match records.get(i % n + 1) {
            Some(next) => next.start_ns - r.end_ns(),
            None => (records[0].start_ns + period_ns).saturating_sub(r.end_ns()),
        };
        if opts.scaled(gap) >= opts.min_sleep_ns {
            chain = 0;
        }
    }
    // A replay covers at most one pass (f ≤ 1), so no injection exceeds all its run-times.
    let one_pass = records
        .iter()
        .fold(0u64, |a, r| a.saturating_add(opts.scaled(r.run_ns)));
    longest.min(one_pass)
}

/// The common window `[min begin, max end)` of a trace's streams.
pub fn common_window(trace: &Trace) -> (u64, u64) {
    let begin = trace.streams.iter().map(|s| s.begin_ns).min().unwrap_or(0);
    let end = trace.streams.iter().map(|s| s.end_ns).max().unwrap_or(0);
    (begin, end)
}

/// Where a cursor stands in the trace's records.
#[derive(Debug, Clone, Default)]
struct Position {
    next_index: usize,
    lap: u64,
    partial: Option<(u64, u64)>,
    peeked: Option<(u64, u64)>,
}

impl Position {
    /// Next trace detour of `plan` on the unrolled timeline, as (start, end).
    fn next_raw(&mut self, plan: &Plan) -> Option<(u64, u64)> {
        if let Some(p) = self.peeked.take() {
            return Some(p);
        }
        if let Some(p) = self.partial.take() {
            return Some(p);
        }
        let recs = &plan.records;
        if self.next_index >= recs.len() {
            self.next_index = 0;
            self.lap += 1;
        }
        let r = recs[self.next_index];
        self.next_index += 1;
        let lap = self.lap * plan.period_ns;
        let begin = plan.begin_ns;
        Some((lap + (r.start_ns - begin), lap + (r.end_ns() - begin)))
    }
}

/// A replay in progress: yields injections in order; resync jumps to another timeline point.
#[derive(Debug, Clone)]
pub struct Cursor {
    plan: Arc<Plan>,
    pos: Position,
    lookahead: Option<Injection>,
    seg_trace0: u64,
    seg_replay0: u64,
    consumed_before_ns: u64,
    limit_ns: u64,
    finished: bool,
    /// Counts of everything built so far, the look-ahead included.
    built: PlanStats,
    /// `built` as it stood after the last injection known to be executed: what
    /// [`Cursor::stats`] reports.
    executed: PlanStats,
    /// `built` as it stood after the injection handed out last was built: executed once the
    /// next one is asked for, discarded by a resync.
    handed_through: PlanStats,
    /// Replay time at which the last injection built ends (due + span); `None` after a start
    /// or a resync. The gap from it sets the next injection's O.
    last_end_ns: Option<u64>,
}

impl Cursor {
    /// The plan being replayed.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// Counts so far, for the injections executed (see [`PlanStats`]).
    pub fn stats(&self) -> PlanStats {
        self.executed
    }

    /// True once the fraction limit was reached: no more injections will come.
    pub fn finished(&self) -> bool {
        self.finished && self.lookahead.is_none()
    }

    /// Share of the stream replayed by replay time `now_ns` (for the fraction stop rule).
    pub fn progress_at(&self, now_ns: u64) -> f64 {
        let seg = now_ns.saturating_sub(self.seg_replay0) as f64 / self.plan.opts.scale;
        (self.consumed_before_ns as f64 + seg) / self.plan.period_ns as f64
    }

    /// Jumps to timeline point `offset_ns` at replay time `now_ns`: the next injection is the
    /// rest of the detour in progress there, if any, else the next detour after the gap.
    pub fn resync(&mut self, offset_ns: u64, now_ns: u64) {
        let seg = now_ns.saturating_sub(self.seg_replay0) as f64 / self.plan.opts.scale + 0.5;
        self.consumed_before_ns += seg as u64;
        self.position(offset_ns % self.plan.period_ns, now_ns);
    }

    fn position(&mut self, offset_ns: u64, now_ns: u64) {
        let p = self.plan.begin_ns + offset_ns;
        let recs = &self.plan.records;
        let idx = recs.partition_point(|r| r.end_ns() <= p);
        self.pos.partial = None;
        self.pos.next_index = idx;
        if let Some(r) = recs.get(idx) {
            if r.start_ns < p {
                self.pos.partial = Some((offset_ns, r.end_ns() - self.plan.begin_ns));
                self.pos.next_index = idx + 1;
            }
        }
        self.pos.lap = 0;
        self.pos.peeked = None;
        self.lookahead = None;
        // What was built after the last executed injection is discarded unmet.
        self.built = self.executed;
        self.handed_through = self.executed;
        self.last_end_ns = None;
        self.seg_trace0 = offset_ns;
        self.seg_replay0 = now_ns;
        if self.consumed_before_ns >= self.limit_ns {
            self.finished = true;
        }
    }

    fn within_limit(&self, start: u64) -> bool {
        self.consumed_before_ns + (start - self.seg_trace0) < self.limit_ns
    }

    fn build_next(&mut self) -> Option<Injection> {
        // Borrowed, not copied: this runs for every injection, in the signal handler and in
        // the predictor's inner loop, and the options hold the O-after-a-gap curve.
        let plan = &*self.plan;
        let opts = &plan.opts;
        loop {
            if self.finished {
                return None;
            }
            let (a, b) = self.pos.next_raw(plan)?;
            if !self.within_limit(a) {
                self.finished = true;
                return None;
            }
            let limit_pos = self.seg_trace0 + (self.limit_ns - self.consumed_before_ns);
            let mut b = b.min(limit_pos);
            let mut run = b - a;
            let mut detours = 1u32;
            self.built.detours += 1;
            self.built.noise_ns += opts.scaled(b - a);
            loop {
                let (c, d) = self.pos.next_raw(plan)?;
                if opts.scaled(c - b) < opts.min_sleep_ns && self.within_limit(c) {
                    let d = d.min(limit_pos);
                    run += d - c;
                    b = d;
                    detours += 1;
                    self.built.detours += 1;
                    self.built.merged += 1;
                    self.built.noise_ns += opts.scaled(d - c);
                } else {
                    self.pos.peeked = Some((c, d));
                    break;
                }
            }
            let span = opts.scaled(run);
            let due = self.seg_replay0 + opts.scaled(a - self.seg_trace0);
            let overhead = opts.overhead_after(self.last_end_ns.map(|e| due.saturating_sub(e)));
            if span <= overhead {
                self.built.dropped += u64::from(detours);
                self.built.dropped_ns += span;
                continue;
            }
            self.last_end_ns = Some(due + span);
            self.built.injections += 1;
            self.built.injected_detours += u64::from(detours);
            self.built.injected_ns += span;
            self.built.busy_ns += span - overhead;
            return Some(Injection {
                due_ns: due,
                span_ns: span,
                busy_ns: span - overhead,
                trace_ns: a,
                next_due_ns: u64::MAX,
                arm_after_ns: u64::MAX,
                detours,
            });
        }
    }
}

impl Iterator for Cursor {
    type Item = Injection;

    /// The next injection, with the timing of the one after it filled in.
    fn next(&mut self) -> Option<Injection> {
        // Asking for the next injection says the one handed out before was executed.
        self.executed = self.handed_through;
        let mut current = match self.lookahead.take() {
            Some(i) => i,
            None => match self.build_next() {
                Some(i) => i,
                None => {
                    // The end: the detours met on the way there count as well.
                    self.executed = self.built;
                    return None;
                }
            },
        };
        self.handed_through = self.built;
        self.lookahead = self.build_next();
        if let Some(n) = &self.lookahead {
            current.next_due_ns = n.due_ns;
            let end = current.due_ns + current.span_ns;
            let lateness = match self.plan.opts.timer {
                TimerKind::Itimer => self.plan.opts.lateness_ns,
                TimerKind::Abstime => 0,
            };
            current.arm_after_ns = n.due_ns.saturating_sub(end).saturating_sub(lateness).max(1);
        }
        Some(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_trace::Detour;
    use proptest::prelude::*;

    fn stream(end: u64, detours: &[(u64, u64)]) -> Stream {
        let d: Vec<Detour> = detours
            .iter()
            .map(|&(s, r)| Detour {
                start_ns: s,
                run_ns: r,
            })
            .collect();
        Stream::from_detours(0, 0, end, &d).unwrap()
    }

    fn opts() -> PlanOptions {
        PlanOptions::ideal()
    }

    #[test]
    fn a_plan_refuses_scales_and_injections_beyond_its_bounds() {
        // 1 s of trace with a 20 ms detour every 100 ms.
        let d: Vec<(u64, u64)> = (0..10).map(|i| (i * 100_000_000 + 1, 20_000_000)).collect();
        let s = stream(1_000_000_000, &d);
        let with = |scale: f64, min_sleep_ns: u64| {
            Plan::new(
                &s,
                PlanOptions {
                    scale,
                    min_sleep_ns,
                    ..opts()
                },
            )
        };
        for bad in [
            1e19,
            1e300,
            f64::INFINITY,
            f64::NAN,
            0.0,
            -1.0,
            MAX_SCALE * 1.01,
        ] {
            let e = with(bad, 0).unwrap_err().to_string();
            assert!(e.contains("scale must be"), "{bad}: {e}");
        }
        // 20 ms × 1000 = 20 s for one detour: over the 10 s bound.
        let e = with(1000.0, 0).unwrap_err().to_string();
        assert!(e.contains("20.000 s") && e.contains("bound of 10 s"), "{e}");
        // Every sleep merged (80 ms × 100 < M = 10 s): one pass is one 20 s injection.
        let e = with(100.0, MAX_DETOUR_NS).unwrap_err().to_string();
        assert!(e.contains("lower the scale or the minimum sleep"), "{e}");
        let e = with(1.0, MAX_DETOUR_NS + 1).unwrap_err().to_string();
        assert!(e.contains("minimum sleep must be at most 10 s"), "{e}");
        assert!(with(100.0, 0).is_ok());
        assert!(with(1.0, 50_000_000).is_ok());
    }

    #[test]
    fn ideal_replay_reproduces_the_stream_from_offset_zero() {
        let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
        let plan = Plan::new(&s, opts()).unwrap();
        let inj: Vec<Injection> = plan.cursor(0).collect();
        let got: Vec<(u64, u64)> = inj.iter().map(|i| (i.due_ns, i.busy_ns)).collect();
        assert_eq!(got, vec![(100, 10), (400, 20), (900, 5)]);
        assert_eq!(inj[0].next_due_ns, 400);
        assert_eq!(inj[0].arm_after_ns, 400 - 110);
        assert_eq!(inj[2].next_due_ns, u64::MAX);
    }

    #[test]
    fn stats_count_executed_injections_not_the_ones_a_resync_discards() {
        let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
        let plan = Plan::new(&s, opts()).unwrap();
        let mut c = plan.cursor(0);
        let injections = |c: &Cursor| (c.stats().injections, c.stats().injected_ns);
        c.next().unwrap(); // (100, 10) handed out, (400, 20) computed ahead
        assert_eq!(injections(&c), (0, 0));
        c.next().unwrap(); // (100, 10) executed
        assert_eq!(injections(&c), (1, 10));
        // A resync discards (400, 20), handed out but not executed, and the look-ahead.
        c.resync(850, 300);
        let i = c.next().unwrap();
        assert_eq!((i.trace_ns, i.busy_ns), (900, 5));
        assert_eq!(injections(&c), (1, 10));
        c.next().unwrap(); // (900, 5) executed
        assert_eq!(injections(&c), (2, 15));
        // Running out counts the last one handed out.
        let mut rest = plan.cursor(0);
        assert_eq!(rest.by_ref().count(), 3);
        assert_eq!(injections(&rest), (3, 35));
    }

    #[test]
    fn an_offset_inside_a_detour_injects_its_rest_at_once_and_wraps() {
        let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
        let plan = Plan::new(&s, opts()).unwrap();
        let got: Vec<(u64, u64, u64)> = plan
            .cursor(405)
            .map(|i| (i.due_ns, i.busy_ns, i.trace_ns))
            .collect();
        // Rest of (400, 20) now, then 900 at +495, wrap: 100 at +695, and the first 5 ns of
        // (400, 20) again: f = 1 replays exactly [405, 1405).
        assert_eq!(
            got,
            vec![(0, 15, 405), (495, 5, 900), (695, 10, 1100), (995, 5, 1400)]
        );
    }

    #[test]
    fn a_window_that_does_not_begin_at_zero_is_replayed_relative_to_its_begin() {
        let d = [
            Detour {
                start_ns: 5_100,
                run_ns: 10,
            },
            Detour {
                start_ns: 5_400,
                run_ns: 20,
            },
        ];
        let s = Stream::from_detours(0, 5_000, 6_000, &d).unwrap();
        let plan = Plan::new(&s, opts()).unwrap();
        let got: Vec<(u64, u64)> = plan
            .cursor(0)
            .take(3)
            .map(|i| (i.due_ns, i.trace_ns))
            .collect();
        assert_eq!(got, vec![(100, 100), (400, 400)]);
        let wrapped: Vec<u64> = plan.cursor(500).map(|i| i.due_ns).collect();
        assert_eq!(wrapped, vec![600, 900]);
    }

    #[test]
    fn an_offset_in_a_gap_waits_for_the_next_detour() {
        let s = stream(1000, &[(100, 10), (400, 20)]);
        let plan = Plan::new(&s, opts()).unwrap();
        let first = plan.cursor(950).next().unwrap();
        assert_eq!((first.due_ns, first.busy_ns), (150, 10));
    }

    #[test]
    fn scaling_multiplies_times_and_overhead_is_subtracted_or_drops() {
        let s = stream(1000, &[(100, 10), (400, 2), (900, 5)]);
        let o = PlanOptions {
            scale: 3.0,
            overhead_ns: 7,
            ..opts()
        };
        let plan = Plan::new(&s, o).unwrap();
        let mut c = plan.cursor(0);
        let inj: Vec<(u64, u64)> = c.by_ref().map(|i| (i.due_ns, i.busy_ns)).collect();
        // 3·2 = 6 ≤ 7: dropped; 3·10 − 7 = 23; 3·5 − 7 = 8.
        assert_eq!(inj, vec![(300, 23), (2700, 8)]);
        let st = c.stats();
        assert_eq!(
            (st.detours, st.injections, st.dropped, st.dropped_ns),
            (3, 2, 1, 6)
        );
        assert_eq!(st.noise_ns, 51);
        assert_eq!(st.injected_ns, 45);
    }

    #[test]
    fn short_sleeps_merge_and_runs_add() {
        let s = stream(1000, &[(100, 10), (113, 10), (200, 5)]);
        let o = PlanOptions {
            min_sleep_ns: 5,
            ..opts()
        };
        let plan = Plan::new(&s, o).unwrap();
        let mut c = plan.cursor(0);
        let inj: Vec<(u64, u64, u32)> = c
            .by_ref()
            .map(|i| (i.due_ns, i.busy_ns, i.detours))
            .collect();
        assert_eq!(inj, vec![(100, 20, 2), (200, 5, 1)]);
        assert_eq!(c.stats().merged, 1);
    }

    #[test]
    fn itimer_arms_early_by_the_lateness_abstime_does_not() {
        let s = stream(1000, &[(100, 10), (400, 20)]);
        for (timer, arm) in [(TimerKind::Itimer, 290 - 30), (TimerKind::Abstime, 290)] {
            let plan = Plan::new(
                &s,
                PlanOptions {
                    lateness_ns: 30,
                    timer,
                    ..opts()
                },
            )
            .unwrap();
            assert_eq!(plan.cursor(0).next().unwrap().arm_after_ns, arm);
        }
    }

    #[test]
    fn fraction_stops_the_replay_and_progress_reports_it() {
        let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
        let plan = Plan::new(
            &s,
            PlanOptions {
                fraction: 0.5,
                scale: 2.0,
                ..opts()
            },
        )
        .unwrap();
        let mut c = plan.cursor(0);
        let dues: Vec<u64> = c.by_ref().map(|i| i.due_ns).collect();
        assert_eq!(dues, vec![200, 800]);
        assert!(c.finished());
        assert!((c.progress_at(1000) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn resync_jumps_and_keeps_counting_progress() {
        let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
        let plan = Plan::new(&s, opts()).unwrap();
        let mut c = plan.cursor(0);
        assert_eq!(c.next().unwrap().due_ns, 100);
        c.resync(850, 300);
        let i = c.next().unwrap();
        assert_eq!((i.due_ns, i.busy_ns), (350, 5));
        assert!((c.progress_at(300) - 0.3).abs() < 1e-12);
        // Resync into a detour: its rest at once.
        c.resync(105, 600);
        let i = c.next().unwrap();
        assert_eq!((i.due_ns, i.busy_ns), (600, 5));
        // The fraction limit counts every segment: 600 ns used, 400 left from 105.
        let rest: Vec<u64> = c.map(|i| i.trace_ns).collect();
        assert_eq!(rest, vec![400]);
    }

    #[test]
    fn bad_options_and_hopeless_overheads_are_refused() {
        let s = stream(1000, &[(100, 10)]);
        for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Plan::new(&s, PlanOptions { scale, ..opts() }).is_err());
        }
        for fraction in [0.0, 1.5, -0.1] {
            assert!(Plan::new(&s, PlanOptions { fraction, ..opts() }).is_err());
        }
        let e = Plan::new(
            &s,
            PlanOptions {
                overhead_ns: 10,
                ..opts()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("nothing would be injected"), "{e}");
        assert!(Plan::new(&stream(1000, &[]), opts()).is_err());
        let t = Trace {
            streams: vec![s],
            ..Trace::default()
        };
        assert!(matches!(
            Plan::from_trace(&t, 1, opts()),
            Err(PlanError::NoStream { .. })
        ));
    }

    #[test]
    fn uniform_offsets_keep_the_density_of_periodic_noise() {
        // Period 1000, duration 50: a window of q = 300 sees 300 · 50/1000 = 15 ns on average.
        let d: Vec<(u64, u64)> = (0..10).map(|k| (k * 1000 + 200, 50)).collect();
        let s = stream(10_000, &d);
        let plan = Plan::new(&s, opts()).unwrap();
        let q = 300u64;
        let mut total = 0u64;
        for offset in 0..10_000u64 {
            // Detour time inside [0, q): injections due before q, clipped at q.
            let mut c = plan.cursor(offset);
            for i in c.by_ref() {
                if i.due_ns >= q {
                    break;
                }
                total += i.span_ns.min(q - i.due_ns);
            }
        }
        assert_eq!(total, 15 * 10_000);
    }

    prop_compose! {
        fn arb_stream()(
            gaps in prop::collection::vec((1u64..5_000, 1u64..500), 1..60),
            tail in 0u64..5_000,
            begin in prop::sample::select(vec![0u64, 1, 7_777, 1 << 40]),
        ) -> Stream {
            let mut t = begin;
            let mut d = Vec::new();
            for (g, r) in gaps { t += g; d.push(Detour { start_ns: t, run_ns: r }); t += r; }
            Stream::from_detours(0, begin, t + tail, &d).unwrap()
        }
    }

    proptest! {
        #[test]
        fn injections_are_ordered_non_overlapping_and_add_up(
            s in arb_stream(),
            scale in 0.5f64..8.0,
            overhead in 0u64..300,
            min_sleep in 0u64..400,
            offset in 0u64..1_000_000,
            fraction in 0.05f64..1.0,
        ) {
            let o = PlanOptions { scale, overhead_ns: overhead, min_sleep_ns: min_sleep, fraction, ..PlanOptions::ideal() };
            let Ok(plan) = Plan::new(&s, o) else { return Ok(()); };
            let mut c = plan.cursor(offset);
            let inj: Vec<Injection> = c.by_ref().take(10_000).collect();
            let st = c.stats();
            let mut prev_end = 0u64;
            for (k, i) in inj.iter().enumerate() {
                prop_assert!(i.busy_ns > 0 && i.busy_ns + overhead == i.span_ns);
                prop_assert!(i.due_ns >= prev_end.saturating_sub(2), "overlap at {}", k);
                prev_end = i.due_ns + i.span_ns;
                if let Some(n) = inj.get(k + 1) { prop_assert_eq!(i.next_due_ns, n.due_ns); }
            }
            prop_assert_eq!(st.injections as usize, inj.len());
            prop_assert_eq!(st.injected_ns, inj.iter().map(|i| i.span_ns).sum::<u64>());
            prop_assert_eq!(st.busy_ns, inj.iter().map(|i| i.busy_ns).sum::<u64>());
            prop_assert_eq!(st.injected_detours + st.dropped, st.detours);
            // Merged runs are scaled as one sum: rounding differs by at most 1 ns per merge.
            let accounted = (st.injected_ns + st.dropped_ns) as i64;
            prop_assert!((st.noise_ns as i64 - accounted).unsigned_abs() <= st.merged);
            // Nothing beyond f of the stream is replayed.
            if let Some(last) = inj.last() {
                let replayed = last.trace_ns - (offset % plan.period_ns());
                prop_assert!((replayed as f64) < fraction * plan.period_ns() as f64 + 1.0);
            }
        }
    }

    #[test]
    fn o_after_a_gap_is_interpolated_in_log_gap_and_clamped_at_the_ends() {
        let c = OverheadByGap::new(&[(100_000, 5_000), (1_000_000, 6_000), (10_000_000, 9_000)])
            .unwrap();
        assert_eq!(OverheadByGap::default().at(5), None);
        assert_eq!(c.at(1), Some(5_000));
        assert_eq!(c.at(1_000_000), Some(6_000));
        assert_eq!(c.at(u64::MAX), Some(9_000));
        // √(10⁶ · 10⁷) is halfway in log gap.
        assert_eq!(c.at(3_162_278), Some(7_500));
        assert!(OverheadByGap::new(&[(0, 1)]).is_err());
        assert!(OverheadByGap::new(&[(5, 1), (5, 2)]).is_err());
        assert!(OverheadByGap::new(&[(1, 1); OVERHEAD_POINTS + 1]).is_err());
    }

    #[test]
    fn each_injection_is_compensated_with_o_after_its_own_gap() {
        // Detours at 0, 100 µs and 10 ms (10 µs each); O = 2 µs after 90 µs, 8 µs after ≈ 10 ms.
        let s = stream(
            20_000_000,
            &[(0, 10_000), (100_000, 10_000), (10_000_000, 10_000)],
        );
        let o = PlanOptions {
            overhead_ns: 5_000,
            overhead_by_gap: OverheadByGap::new(&[(90_000, 2_000), (9_890_000, 8_000)]).unwrap(),
            ..opts()
        };
        let plan = Plan::new(&s, o).unwrap();
        let busy: Vec<u64> = plan.cursor(0).take(3).map(|i| i.busy_ns).collect();
        // The first has no predecessor: O = 5 µs.
        assert_eq!(busy, vec![5_000, 8_000, 2_000]);
        let st = {
            let mut c = plan.cursor(0);
            c.by_ref().take(4).for_each(drop);
            c.stats()
        };
        assert_eq!(st.busy_ns, 5_000 + 8_000 + 2_000);
        // A resync forgets the predecessor: O = 5 µs again.
        let mut c = plan.cursor(0);
        c.next();
        c.resync(10_000_000, 0);
        assert_eq!(c.next().unwrap().busy_ns, 5_000);
    }
}
