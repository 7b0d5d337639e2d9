//! The replay plan: which detour a rank sees, when and for how long, after scaling, merging and
//! compensation. Pure arithmetic with no system calls and no allocation after construction, so
//! the signal-driven injector (wall clock) and the predictor (virtual clock) execute the same plan.
//!
//! Times on the trace are mapped onto an *unrolled timeline*: position `U = lap · D + (t − begin)`
//! for a stream window `[begin, end)` of length `D`, so replay wraps around the end of the stream.
//! A replay segment starts at a timeline point `p` and replay time `r0`; a detour starting at `U`
//! is due at `r0 + S · (U − p)`.
//!
//! Two ways to answer "where is this rank's replay at time t": the [`Cursor`] walks injection by
//! injection (the injector, and the predictor's `--engine walk`); [`Plan::index`] compiles one
//! lap of merged groups (cumulative spans and counts, built with the cursor's `merge_group`)
//! into a [`PlanIndex`] that a per-rank [`IndexedReplay`] searches instead of walking. At S = 1
//! the index keeps flat `(a, a − cs)` entries of two laps and a bucket table over `a − cs`, so a
//! question is one threshold found near the rank's next entry (`first_at_least`, a branch-free
//! `count_below`) or through its bucket (`first_key_at_least`); other cases take the general
//! search. Its arrays are advised huge pages (`jitter_trace::memory::large_vec`) and filled in
//! chunks on the caller's rayon pool (`large_vec_filled`). The predictor asks for the lines a
//! search will read a few ranks ahead (`prefetch_compute` returns a [`PrefetchTicket`] that
//! `prefetch_entries` reads; `prefetch_barrier`), a hint that never changes an answer.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use jitter_trace::memory::{large_vec, large_vec_filled};
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

impl std::fmt::Display for TimerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimerKind::Itimer => "itimer",
            TimerKind::Abstime => "abstime",
        })
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
        crate::setup::Scale::new(self.scale)?;
        crate::setup::Fraction::new(self.fraction)?;
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
         nothing would be injected; raise the scale factor S (--scale, or JITTER_SCALE for \
         libjitter_preload.so)"
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
    /// Share of the met noise time that was injected: see [`injected_share`].
    pub fn injected_share(&self) -> f64 {
        injected_share(self.injected_ns, self.dropped_ns)
    }
}

/// Share of the noise a replay met that it injected: injected ÷ (injected + dropped), 0 when
/// it met none. Met noise is counted as injected plus dropped, not as a plan's `noise_ns`,
/// which also holds the detour computed ahead (a resync discards it unmet).
pub fn injected_share(injected_ns: u64, dropped_ns: u64) -> f64 {
    let met = injected_ns + dropped_ns;
    if met == 0 {
        0.0
    } else {
        injected_ns as f64 / met as f64
    }
}

impl std::ops::Mul<u64> for PlanStats {
    type Output = PlanStats;
    /// The counts of `k` replays that did the same.
    fn mul(self, k: u64) -> PlanStats {
        PlanStats {
            detours: self.detours * k,
            injections: self.injections * k,
            injected_detours: self.injected_detours * k,
            injected_ns: self.injected_ns * k,
            busy_ns: self.busy_ns * k,
            dropped: self.dropped * k,
            dropped_ns: self.dropped_ns * k,
            merged: self.merged * k,
            noise_ns: self.noise_ns * k,
        }
    }
}

impl std::ops::AddAssign for PlanStats {
    fn add_assign(&mut self, b: PlanStats) {
        self.detours += b.detours;
        self.injections += b.injections;
        self.injected_detours += b.injected_detours;
        self.injected_ns += b.injected_ns;
        self.busy_ns += b.busy_ns;
        self.dropped += b.dropped;
        self.dropped_ns += b.dropped_ns;
        self.merged += b.merged;
        self.noise_ns += b.noise_ns;
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
        let mut records = large_vec(stream.records.len());
        records.extend_from_slice(&stream.records);
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

    /// This plan without the fraction rule (f = 1): the same records, window and options
    /// otherwise, so scaling, merging and overhead stay identical.
    pub fn unlimited(self: &Arc<Self>) -> Result<Arc<Plan>, PlanError> {
        if self.opts.fraction >= 1.0 {
            return Ok(Arc::clone(self));
        }
        let stream = Stream {
            cpu: 0,
            begin_ns: self.begin_ns,
            end_ns: self.begin_ns + self.period_ns,
            records: self.records.clone(),
            counters: Default::default(),
        };
        Plan::new(
            &stream,
            PlanOptions {
                fraction: 1.0,
                ..self.opts
            },
        )
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
    let (mut longest, mut chain) = (0u64, 0u64);
    // Around the timeline into a second lap, until the chain breaks there: from that break on,
    // the second lap's chains are the first's (a break depends only on its record's gap).
    'laps: for lap in 0..2 {
        for (i, r) in records.iter().enumerate() {
            chain = chain.saturating_add(opts.scaled(r.run_ns));
            longest = longest.max(chain);
            if longest > MAX_DETOUR_NS {
                break 'laps;
            }
            let gap = match records.get(i + 1) {
                Some(next) => next.start_ns - r.end_ns(),
                None => (records[0].start_ns + period_ns).saturating_sub(r.end_ns()),
            };
            if opts.scaled(gap) >= opts.min_sleep_ns {
                if lap == 1 {
                    break 'laps;
                }
                chain = 0;
            }
        }
    }
    // A replay covers at most one pass (f ≤ 1), so no injection exceeds all its run-times.
    let one_pass = records
        .iter()
        .fold(0u64, |a, r| a.saturating_add(opts.scaled(r.run_ns)));
    longest.min(one_pass)
}

/// Trace ns replayed in `replay_ns` of replay time at scale `scale` (rounded), as a resync
/// counts it towards the fraction limit.
#[inline]
fn replayed_ns(replay_ns: u64, scale: f64) -> u64 {
    (replay_ns as f64 / scale + 0.5) as u64
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

    /// Says that the injection handed out last was executed, so that [`Cursor::stats`] counts
    /// it at once rather than when the next one is asked for (the predictor, which may resync
    /// right after executing one).
    pub fn confirm(&mut self) {
        self.executed = self.handed_through;
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

    /// Timeline point (trace ns from the window start, `< D`) the replay reaches at replay time
    /// `now_ns` if it runs on from its last start or resync (a paused injector's resume point).
    pub fn point_at(&self, now_ns: u64) -> u64 {
        let ran = replayed_ns(
            now_ns.saturating_sub(self.seg_replay0),
            self.plan.opts.scale,
        );
        (self.seg_trace0 + ran % self.plan.period_ns) % self.plan.period_ns
    }

    /// Timeline point (trace ns from the window start) of the last start or resync: where the
    /// stretch being replayed now began.
    pub fn segment_point(&self) -> u64 {
        self.seg_trace0
    }

    /// Jumps to timeline point `offset_ns` at replay time `now_ns`: the next injection is the
    /// rest of the detour in progress there, if any, else the next detour after the gap.
    pub fn resync(&mut self, offset_ns: u64, now_ns: u64) {
        self.consumed_before_ns += replayed_ns(
            now_ns.saturating_sub(self.seg_replay0),
            self.plan.opts.scale,
        );
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
            let g = merge_group(
                opts,
                (a, b),
                limit_pos,
                &mut PlanSource(&mut self.pos, plan),
            )?;
            let (run, detours) = (g.run, g.detours);
            self.built.detours += u64::from(detours);
            self.built.merged += u64::from(detours - 1);
            self.built.noise_ns += g.noise_ns;
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

/// A source of trace detours on the unrolled timeline, as (start, end).
trait DetourSource {
    /// The next detour.
    fn next_raw(&mut self) -> Option<(u64, u64)>;
    /// Puts back the detour `next_raw` returned last (the one that did not merge).
    fn put_back(&mut self, d: (u64, u64));
}

struct PlanSource<'a>(&'a mut Position, &'a Plan);

impl DetourSource for PlanSource<'_> {
    #[inline]
    fn next_raw(&mut self) -> Option<(u64, u64)> {
        self.0.next_raw(self.1)
    }
    #[inline]
    fn put_back(&mut self, d: (u64, u64)) {
        self.0.peeked = Some(d);
    }
}

/// One injection before the overhead decides whether it is dropped: detours merged by
/// min-sleep, clipped at the fraction limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RawGroup {
    /// Σ run of the merged (clipped) detours, trace ns.
    run: u64,
    /// Trace detours merged into it.
    detours: u32,
    /// Σ S·run of each detour (the noise met), ns.
    noise_ns: u64,
    /// End of its last detour (clipped), trace ns.
    end: u64,
}

/// The merge rule shared by the cursor and the index: starting from `first`, the following
/// detours merge while their scaled sleep is shorter than M and they start before `limit_pos`;
/// every end is clipped at `limit_pos`.
#[inline]
fn merge_group(
    opts: &PlanOptions,
    first: (u64, u64),
    limit_pos: u64,
    src: &mut impl DetourSource,
) -> Option<RawGroup> {
    let a = first.0;
    let mut b = first.1.min(limit_pos);
    let mut run = b - a;
    let mut detours = 1u32;
    let mut noise_ns = opts.scaled(b - a);
    loop {
        let (c, d) = src.next_raw()?;
        if opts.scaled(c - b) < opts.min_sleep_ns && c < limit_pos {
            let d = d.min(limit_pos);
            run += d - c;
            b = d;
            detours += 1;
            noise_ns += opts.scaled(d - c);
        } else {
            src.put_back((c, d));
            break;
        }
    }
    Some(RawGroup {
        run,
        detours,
        noise_ns,
        end: b,
    })
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

// ---------------------------------------------------------------------------------------------
// The indexed plan: the same transform compiled once per stream into cumulative arrays, so that
// "when does a rank that starts computing q at time t finish?" is a search, not a walk.
// ---------------------------------------------------------------------------------------------

/// One injection of the compiled lap: start and end of its (merged) detours on the compiled
/// timeline, and the Σ span of the injections before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IndexEntry {
    a: u64,
    b: u64,
    cs: u64,
}

/// A plan compiled for the predictor: one lap of the stream as merged groups and injections
/// with cumulative counts, built with the cursor's own merge rule ([`merge_group`]). Timeline
/// points are *compiled*: the records are rotated to start at a group boundary `u0`, so one lap
/// is `[u0, u0 + D)`; a replay segment spans at most two laps.
///
/// It exists (see [`Plan::index`]) when its answers are exactly the cursor's: a constant
/// overhead (no O-after-a-gap curve, which depends on the previous injection), some sleep that
/// does not merge, and, at S ≠ 1, inter-group gaps of at least 3 replay ns so that rounded due
/// times never overlap the previous injection.
#[derive(Debug)]
pub struct PlanIndex {
    opts: PlanOptions,
    period: u64,
    limit_ns: u64,
    u0: u64,
    rs: Vec<u64>,
    re: Vec<u64>,
    run_cum: Vec<u64>,
    noise_cum: Vec<u64>,
    groups: Groups,
    /// At S = 1 (empty otherwise): every injection of two laps, its start beside its key, so
    /// that one cache line serves the barrier search and the compute search that follows it.
    fast: Vec<FastEntry>,
    /// At S = 1: `key_first[j]` is the first entry of `fast` whose key is at least
    /// `j << key_shift` (the last is `fast.len()`), so that the compute search goes straight to
    /// the bucket of its threshold, ≈ 1–2 entries, instead of searching towards it.
    key_first: Vec<u32>,
    /// log₂ of a bucket's width in key ns: the smallest power of two above the mean key
    /// advance per entry.
    key_shift: u32,
}

/// One injection of the fast path (S = 1): its start, and `a − cs`, non-decreasing, which the
/// compute search compares with one per-query threshold (no scaling, no lap arithmetic per
/// probe); `cs = a − key`.
#[derive(Debug, Clone, Copy)]
struct FastEntry {
    a: u64,
    key: u64,
}

impl FastEntry {
    /// Σ span of the injections before this one (within its two laps).
    #[inline]
    fn cs(&self) -> u64 {
        self.a - self.key
    }
}

/// What the second stage of a compute search's prefetch asks for
/// ([`PlanIndex::prefetch_entries`]), as the first ([`IndexedReplay::prefetch_compute`]) found
/// it: the bucket of the search's threshold and the entry it starts from; the default asks
/// for nothing (a search near the rank's next entry, or no fast path).
#[derive(Debug, Clone, Copy)]
pub struct PrefetchTicket {
    bucket: usize,
    lo: usize,
}

impl Default for PrefetchTicket {
    fn default() -> Self {
        PrefetchTicket {
            bucket: usize::MAX,
            lo: 0,
        }
    }
}

/// The rotated records from record `i` on, around the timeline (record `i` of the next lap is
/// `lap_ns` = D later).
struct RotSource<'a> {
    rs: &'a [u64],
    re: &'a [u64],
    period: u64,
    i: usize,
    lap_ns: u64,
    peeked: Option<(u64, u64)>,
}

impl DetourSource for RotSource<'_> {
    #[inline]
    fn next_raw(&mut self) -> Option<(u64, u64)> {
        if let Some(p) = self.peeked.take() {
            return Some(p);
        }
        if self.i == self.rs.len() {
            self.i = 0;
            self.lap_ns += self.period;
        }
        let i = self.i;
        self.i += 1;
        Some((self.rs[i] + self.lap_ns, self.re[i] + self.lap_ns))
    }
    fn put_back(&mut self, d: (u64, u64)) {
        self.peeked = Some(d);
    }
}

impl Plan {
    /// Compiles the plan for the predictor; `None` where the index could not answer exactly as
    /// the cursor does (see [`PlanIndex`]): the caller walks the cursor instead.
    pub fn index(&self) -> Option<PlanIndex> {
        let opts = self.opts;
        if !opts.overhead_by_gap.points().is_empty() {
            return None;
        }
        let n = self.records.len();
        if n == 0 || n >= u32::MAX as usize {
            return None;
        }
        let d = self.period_ns;
        let rel = |k: usize| {
            let r = &self.records[k];
            (r.start_ns - self.begin_ns, r.end_ns() - self.begin_ns)
        };
        let gap_before = |j: usize| {
            if j > 0 {
                rel(j).0 - rel(j - 1).1
            } else {
                d + rel(0).0 - rel(n - 1).1
            }
        };
        let j0 = (0..n).find(|&j| opts.scaled(gap_before(j)) >= opts.min_sleep_ns)?;
        let (mut rs, mut re) = (large_vec(n), large_vec(n));
        // Records j0.. of this lap, then ..j0 of the next.
        for (o, add) in (j0..n).map(|o| (o, 0)).chain((0..j0).map(|o| (o, d))) {
            let (s, e) = rel(o);
            rs.push(s + add);
            re.push(e + add);
        }
        // The cumulative runs on one worker while this one forms the groups (they read only
        // `rs` and `re`): loading a dense trace is a large part of a short prediction.
        let ((run_cum, noise_cum), groups) = rayon::join(
            || {
                // At S = 1 the scaled sums are the sums (`noise_cum` stays empty).
                let scaled = opts.scale != 1.0;
                let mut run_cum = large_vec(n + 1);
                let mut noise_cum = if scaled { large_vec(n + 1) } else { Vec::new() };
                let (mut rc, mut nc) = (0u64, 0u64);
                for k in 0..n {
                    run_cum.push(rc);
                    rc += re[k] - rs[k];
                    if scaled {
                        noise_cum.push(nc);
                        nc += opts.scaled(re[k] - rs[k]);
                    }
                }
                run_cum.push(rc);
                if scaled {
                    noise_cum.push(nc);
                }
                (run_cum, noise_cum)
            },
            || Groups::of(opts, &rs, &re, d),
        );
        let groups = groups?;
        let mut ix = PlanIndex {
            opts,
            period: d,
            limit_ns: (d as f64 * opts.fraction).round() as u64,
            u0: rs[0],
            rs,
            re,
            run_cum,
            noise_cum,
            groups,
            fast: Vec::new(),
            key_first: Vec::new(),
            key_shift: 0,
        };
        if opts.scale == 1.0 {
            // a ≥ cs: at S = 1 a span is its group's run, and the runs before a lie in [u0, a).
            // Two laps (a segment spans at most two), the second shifted by D and Σ span.
            let (m, tot, inj) = (ix.groups.inj.len(), ix.groups.tot_span, &ix.groups.inj[..]);
            ix.fast = large_vec_filled(2 * m, |first, part| {
                for (k, f) in (first..).zip(part) {
                    let (e, lap) = if k < m {
                        (&inj[k], 0)
                    } else {
                        (&inj[k - m], 1)
                    };
                    let a = e.a + lap * d;
                    f.write(FastEntry {
                        a,
                        key: a - (e.cs + lap * tot),
                    });
                }
            });
            ix.bucket_keys()?;
        }
        Some(ix)
    }
}

/// The merged groups of a plan's records, rotated to begin after a sleep (`rs`, `re`), with
/// their injections: the part of a [`PlanIndex`] formed in one pass over the records.
#[derive(Debug)]
struct Groups {
    rgroup: Vec<u32>,
    gfirst: Vec<u32>,
    ginj: Vec<u64>,
    ginj_ns: Vec<u64>,
    gdrop: Vec<u64>,
    gdrop_ns: Vec<u64>,
    inj: Vec<IndexEntry>,
    inj_group: Vec<u32>,
    tot_span: u64,
}

impl Groups {
    /// Forms the groups as the cursor merges them; `None` where the index cannot answer as the
    /// cursor does (see [`PlanIndex`]).
    fn of(opts: PlanOptions, rs: &[u64], re: &[u64], d: u64) -> Option<Groups> {
        let n = rs.len();
        let per_group = || {
            let mut v = large_vec(n + 1);
            v.push(0u64);
            v
        };
        let mut gs = Groups {
            rgroup: {
                let mut v = large_vec(n);
                v.resize(n, 0);
                v
            },
            // Sized for the most groups and injections (one per record): no growth copies.
            gfirst: large_vec(n + 1),
            ginj: per_group(),
            ginj_ns: per_group(),
            gdrop: per_group(),
            gdrop_ns: per_group(),
            inj: large_vec(n),
            inj_group: large_vec(n),
            tot_span: 0,
        };
        let mut k = 0usize;
        let mut prev_end: Option<u64> = None;
        while k < n {
            let mut src = RotSource {
                rs,
                re,
                period: d,
                i: k + 1,
                lap_ns: 0,
                peeked: None,
            };
            let g = merge_group(&opts, (rs[k], re[k]), u64::MAX, &mut src)?;
            let gi = gs.gfirst.len();
            let det = g.detours as usize;
            if k + det > n {
                return None;
            }
            gs.gfirst.push(k as u32);
            gs.rgroup[k..k + det].fill(gi as u32);
            if opts.scale != 1.0 {
                if let Some(e) = prev_end {
                    if ((rs[k] - e) as f64) * opts.scale < 3.0 {
                        return None;
                    }
                }
            }
            prev_end = Some(g.end);
            let span = opts.scaled(g.run);
            let (mut i, mut ins, mut dr, mut drns) =
                (gs.ginj[gi], gs.ginj_ns[gi], gs.gdrop[gi], gs.gdrop_ns[gi]);
            if span <= opts.overhead_ns {
                dr += g.detours as u64;
                drns += span;
            } else {
                gs.inj.push(IndexEntry {
                    a: rs[k],
                    b: g.end,
                    cs: gs.tot_span,
                });
                gs.inj_group.push(gi as u32);
                gs.tot_span += span;
                i += 1;
                ins += span;
            }
            gs.ginj.push(i);
            gs.ginj_ns.push(ins);
            gs.gdrop.push(dr);
            gs.gdrop_ns.push(drns);
            k += det;
        }
        if opts.scale != 1.0 {
            let e = prev_end?;
            if ((rs[0] + d - e) as f64) * opts.scale < 3.0 {
                return None;
            }
        }
        gs.gfirst.push(n as u32);
        if gs.inj.is_empty() {
            return None;
        }
        Some(gs)
    }
}

/// Where a replay segment that starts at one timeline point begins in a [`PlanIndex`]: a pure
/// function of the point, so ranks resynchronised to one point share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentStart {
    p: u64,
    g_mid: u64,
    head: Option<HeadGroup>,
}

/// The first injection of a segment that starts inside a group: the rest of that group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeadGroup {
    k: u64,
    a: u64,
    last: u64,
    g: RawGroup,
}

/// A replay in a [`PlanIndex`]: what the predictor keeps per rank (no allocation, no shared
/// pointer), answering the compute and barrier questions by search. Counts follow the
/// cursor's executed-injection rule with [`Cursor::confirm`] after every executed injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexedReplay {
    p: u64,
    r0: u64,
    consumed_before: u64,
    i_first: u64,
    next: u64,
    head_a: u64,
    head_span: u64,
    /// Unrolled injections below this end before the fraction limit (learnt once per start).
    i_safe: u64,
    flags: u8,
}

const HEAD_INJ: u8 = 1;
const EXHAUSTED: u8 = 2;
const BOUNDED: u8 = 4;
/// The cursor built past the fraction limit once (its look-ahead): it stays finished, also
/// after a resync (the cursor's `finished` is sticky).
const DEAD: u8 = 8;
/// This segment began finished (see [`DEAD`]): nothing in it.
const EMPTY: u8 = 16;

/// The end of a segment near the fraction limit.
#[derive(Debug, Clone, Copy)]
struct Bound {
    /// Head injections counted (0 or 1).
    h: u64,
    /// Full middle injections end (unrolled injection index).
    mid_end: u64,
    /// End of the whole middle groups met (unrolled group index).
    full_end: u64,
    /// The clipped last group (its start, its group) and its span when injected.
    tail: Option<(u64, RawGroup, Option<u64>)>,
    /// The head group when it is met (clipped or not).
    head: Option<RawGroup>,
    count: u64,
}

impl PlanIndex {
    /// The options compiled in.
    pub fn options(&self) -> &PlanOptions {
        &self.opts
    }

    /// Length D of the timeline, trace ns.
    pub fn period_ns(&self) -> u64 {
        self.period
    }

    /// Bytes the index holds (the lengths of its arrays).
    pub fn bytes(&self) -> usize {
        fn b<T>(v: &[T]) -> usize {
            std::mem::size_of_val(v)
        }
        let g = &self.groups;
        b(&self.rs)
            + b(&self.re)
            + b(&self.run_cum)
            + b(&self.noise_cum)
            + b(&g.rgroup)
            + b(&g.gfirst)
            + b(&g.ginj)
            + b(&g.ginj_ns)
            + b(&g.gdrop)
            + b(&g.gdrop_ns)
            + b(&g.inj)
            + b(&g.inj_group)
            + b(&self.fast)
            + b(&self.key_first)
    }

    /// Builds `key_first` over `fast` (its keys non-decreasing); `None` where `fast` has more
    /// entries than a `u32` counts.
    fn bucket_keys(&mut self) -> Option<()> {
        let v = &self.fast;
        let (Some(f), Some(l)) = (v.first(), v.last()) else {
            return Some(());
        };
        if v.len() >= u32::MAX as usize {
            return None;
        }
        // A bucket wider than the mean step: at most as many buckets as entries (+ 2).
        let step = (l.key - f.key) / v.len() as u64;
        self.key_shift = 64 - step.leading_zeros();
        let buckets = (l.key >> self.key_shift) as usize + 2;
        self.key_first = bucket_firsts(v, self.key_shift, buckets);
        Some(())
    }

    /// First entry `i ≥ lo` of `fast` whose key is at least `t`, else `fast.len()`: a search
    /// within `t`'s bucket only (its first entry is the first with a key at least the bucket's
    /// start, and the next bucket's first has a key above `t`).
    #[inline]
    fn first_key_at_least(&self, lo: usize, t: u64) -> usize {
        let v = &self.fast;
        let j = (t >> self.key_shift) as usize;
        let Some(b) = self.key_first.get(j..j + 2) else {
            return v.len();
        };
        let from = (b[0] as usize).max(lo);
        let to = (b[1] as usize).max(from);
        // A bucket holds one or two entries on average: count those below `t` among the
        // first few (every entry from the next bucket's first on has a key above `t`, so the
        // count stops at the answer), where a search's branches on the bucket's varying size
        // are mispredicted.
        if let Some(first) = v.get(from..from + BUCKET_LINEAR) {
            let below = count_below(first, t, |e| e.key);
            if below < BUCKET_LINEAR {
                return from + below;
            }
        }
        from + v[from..to].partition_point(|e| e.key < t)
    }

    /// Whether a compute search from a next entry of key `key` for threshold `t` is short: an
    /// answer expected within a block of the next entry, read there, not in its bucket.
    #[inline]
    fn near(&self, key: u64, t: u64) -> bool {
        t.saturating_sub(key) < (FIRST_BLOCK as u64) << self.key_shift
    }

    /// Starts loading the bucket of compute threshold `t` (the first stage of a search's
    /// prefetch): the ticket of the second, which reads it (the search starts at `lo`).
    #[inline]
    fn prefetch_bucket(&self, lo: usize, t: u64) -> PrefetchTicket {
        let bucket = (t >> self.key_shift) as usize;
        if let Some(b) = self.key_first.get(bucket) {
            prefetch(b);
        }
        PrefetchTicket { bucket, lo }
    }

    /// Starts loading the entries that a compute search reads first, as `ticket` names them
    /// (the second stage of its prefetch, once the bucket's line is there; nothing for an empty
    /// ticket).
    #[inline]
    pub fn prefetch_entries(&self, ticket: PrefetchTicket) {
        let j = ticket.bucket;
        if let Some(b) = self.key_first.get(j..j.wrapping_add(2)) {
            // The bucket's first entry and the next bucket's, where an answer past every entry
            // of the bucket lies (the search reads between them).
            let from = (b[0] as usize).max(ticket.lo);
            for k in [from, (b[1] as usize).max(from)] {
                if let Some(e) = self.fast.get(k) {
                    prefetch(e);
                }
            }
        }
    }

    /// End of the group of unrolled injection `i` (`u64::MAX` beyond two laps).
    #[inline]
    fn b_u(&self, i: u64) -> u64 {
        let m = self.groups.inj.len() as u64;
        if i < m {
            self.groups.inj[i as usize].b
        } else if i < 2 * m {
            self.groups.inj[(i - m) as usize].b + self.period
        } else {
            u64::MAX
        }
    }

    #[inline]
    fn n(&self) -> u64 {
        self.rs.len() as u64
    }

    #[inline]
    fn group_count(&self) -> u64 {
        (self.groups.gfirst.len() - 1) as u64
    }

    #[inline]
    fn split(k: u64, n: u64) -> (usize, u64) {
        ((k % n) as usize, k / n)
    }

    fn rec(&self, k: u64) -> (u64, u64) {
        let (i, lap) = Self::split(k, self.n());
        (
            self.rs[i] + lap * self.period,
            self.re[i] + lap * self.period,
        )
    }

    fn run_cum_u(&self, k: u64) -> u64 {
        let (i, lap) = Self::split(k, self.n());
        self.run_cum[i] + lap * self.run_cum[self.rs.len()]
    }

    fn noise_cum_u(&self, k: u64) -> u64 {
        let (i, lap) = Self::split(k, self.n());
        let v = self.noise_cum();
        v[i] + lap * v[self.rs.len()]
    }

    /// Σ S·run of the records before each record (one more: the lap's): the plain sums at
    /// S = 1.
    fn noise_cum(&self) -> &[u64] {
        if self.noise_cum.is_empty() {
            &self.run_cum
        } else {
            &self.noise_cum
        }
    }

    fn group_of(&self, k: u64) -> u64 {
        let (i, lap) = Self::split(k, self.n());
        u64::from(self.groups.rgroup[i]) + lap * self.group_count()
    }

    fn gfirst_u(&self, g: u64) -> u64 {
        let (i, lap) = Self::split(g, self.group_count());
        u64::from(self.groups.gfirst[i]) + lap * self.n()
    }

    fn gcum(&self, v: &[u64], g: u64) -> u64 {
        let (i, lap) = Self::split(g, self.group_count());
        v[i] + lap * v[self.groups.gfirst.len() - 1]
    }

    #[inline]
    fn inj_u(&self, i: u64) -> IndexEntry {
        let m = self.groups.inj.len() as u64;
        if i < m {
            self.groups.inj[i as usize]
        } else if i < 2 * m {
            let e = self.groups.inj[(i - m) as usize];
            IndexEntry {
                a: e.a + self.period,
                b: e.b + self.period,
                cs: e.cs + self.groups.tot_span,
            }
        } else {
            // Beyond two laps (no segment reaches it): never consumed.
            IndexEntry {
                a: u64::MAX,
                b: u64::MAX,
                cs: u64::MAX / 4,
            }
        }
    }

    #[inline]
    fn cs_u(&self, i: u64) -> u64 {
        let m = self.groups.inj.len() as u64;
        if i < m {
            self.groups.inj[i as usize].cs
        } else if i < 2 * m {
            self.groups.inj[(i - m) as usize].cs + self.groups.tot_span
        } else {
            let (j, lap) = Self::split(i, m);
            self.groups.inj[j].cs + lap * self.groups.tot_span
        }
    }

    fn inj_group_u(&self, i: u64) -> u64 {
        let m = self.groups.inj.len() as u64;
        let (j, lap) = Self::split(i, m);
        u64::from(self.groups.inj_group[j]) + lap * self.group_count()
    }

    /// The group of records `k..=last` (unrolled) started at `a` (≥ their first start), its
    /// ends clipped at `limit` and only records starting before `limit` merged: what
    /// [`merge_group`] makes of them.
    fn clipped(&self, k: u64, a: u64, last: u64, limit: u64) -> RawGroup {
        // Records k..=last starting before the limit (k itself always, as a < limit).
        let (mut lo, mut hi) = (k + 1, last + 1);
        while lo < hi {
            let m = lo + (hi - lo) / 2;
            if self.rec(m).0 < limit {
                lo = m + 1;
            } else {
                hi = m;
            }
        }
        let end_k = lo - 1;
        let (sk, ek) = self.rec(k);
        let (sl, el) = self.rec(end_k);
        let s = |x: u64| self.opts.scaled(x);
        let el_c = el.min(limit);
        let run = self.run_cum_u(end_k + 1) - self.run_cum_u(k) - (a - sk) - (el - el_c);
        let noise = if end_k == k {
            s(ek.min(limit) - a)
        } else {
            s(ek - a) + (self.noise_cum_u(end_k) - self.noise_cum_u(k + 1)) + s(el_c - sl)
        };
        RawGroup {
            run,
            detours: (end_k - k + 1) as u32,
            noise_ns: noise,
            end: el_c,
        }
    }

    /// Where a segment from timeline point `offset_ns` (trace ns from the window start)
    /// begins: the rest of the group in progress there, if any, then whole groups.
    pub fn segment_start(&self, offset_ns: u64) -> SegmentStart {
        let p0 = offset_ns % self.period;
        let p = if p0 < self.u0 { p0 + self.period } else { p0 };
        let k = self.re.partition_point(|&e| e <= p) as u64;
        let (sk, _) = self.rec(k);
        let g = self.group_of(k);
        if sk < p || k != self.gfirst_u(g) {
            let last = self.gfirst_u(g + 1) - 1;
            let a = sk.max(p);
            SegmentStart {
                p,
                g_mid: g + 1,
                head: Some(HeadGroup {
                    k,
                    a,
                    last,
                    g: self.clipped(k, a, last, u64::MAX),
                }),
            }
        } else {
            SegmentStart {
                p,
                g_mid: g,
                head: None,
            }
        }
    }

    /// Starts a replay at timeline point `offset_ns` at replay time 0 (as [`Plan::cursor`]).
    pub fn replay(&self, seg: &SegmentStart) -> IndexedReplay {
        let mut r = self.begin(seg, 0, 0);
        if !self.fast.is_empty() && r.flags & BOUNDED == 0 {
            // Once per start, so that the fast path need not look at the limit again.
            let limit = r.limit_pos(self);
            r.i_safe = gallop(r.i_first, self.fast.len() as u64, |i| self.b_u(i) >= limit);
        }
        r
    }

    fn begin(&self, seg: &SegmentStart, now: u64, consumed_before: u64) -> IndexedReplay {
        let mut r = IndexedReplay {
            p: seg.p,
            r0: now,
            consumed_before,
            i_first: self.gcum(&self.groups.ginj, seg.g_mid),
            next: 0,
            head_a: 0,
            head_span: 0,
            i_safe: 0,
            flags: 0,
        };
        let limit_pos = r.limit_pos(self);
        if limit_pos <= seg.p {
            r.flags |= DEAD;
        }
        if let Some(h) = &seg.head {
            if h.g.end > limit_pos {
                r.flags |= BOUNDED;
            }
            let span = self.opts.scaled(h.g.run);
            if span > self.opts.overhead_ns {
                r.flags |= HEAD_INJ;
                r.head_a = h.a;
                r.head_span = span;
            }
        }
        if r.flags & DEAD != 0 {
            r.flags |= EMPTY | BOUNDED;
        }
        r
    }

    fn bound(&self, r: &IndexedReplay, seg: &SegmentStart) -> Bound {
        let limit = r.limit_pos(self);
        let empty = Bound {
            h: 0,
            mid_end: r.i_first,
            full_end: seg.g_mid,
            tail: None,
            head: None,
            count: 0,
        };
        if limit <= seg.p || r.flags & EMPTY != 0 {
            return empty;
        }
        let over = |g: RawGroup| {
            let span = self.opts.scaled(g.run);
            (span > self.opts.overhead_ns).then_some(span)
        };
        let mut head = None;
        if let Some(h) = &seg.head {
            if h.a >= limit {
                return empty;
            }
            if h.g.end > limit {
                let g = self.clipped(h.k, h.a, h.last, limit);
                let inj = over(g);
                return Bound {
                    h: 0,
                    mid_end: r.i_first,
                    full_end: seg.g_mid,
                    tail: Some((h.a, g, inj)),
                    head: None,
                    count: u64::from(inj.is_some()),
                };
            }
            head = Some(h.g);
        }
        let h = u64::from(r.flags & HEAD_INJ != 0);
        // First group (unrolled, within two laps) starting at or after the limit.
        let (mut lo, mut hi) = (seg.g_mid, 2 * self.group_count() + 1);
        while lo < hi {
            let m = lo + (hi - lo) / 2;
            if self.rec(self.gfirst_u(m)).0 < limit {
                lo = m + 1;
            } else {
                hi = m;
            }
        }
        let g_end = lo;
        let mut b = Bound {
            h,
            mid_end: self.gcum(&self.groups.ginj, g_end),
            full_end: g_end,
            tail: None,
            head,
            count: 0,
        };
        if g_end > seg.g_mid {
            let gl = g_end - 1;
            let (k0, last) = (self.gfirst_u(gl), self.gfirst_u(gl + 1) - 1);
            if self.rec(last).1 > limit {
                let a = self.rec(k0).0;
                let g = self.clipped(k0, a, last, limit);
                b.mid_end = self.gcum(&self.groups.ginj, gl);
                b.full_end = gl;
                b.tail = Some((a, g, over(g)));
            }
        }
        let t = b.tail.map_or(0, |t| u64::from(t.2.is_some()));
        b.count = h + (b.mid_end - r.i_first) + t;
        b
    }

    /// Counts of whole groups `[g0, g1)` (unrolled).
    fn group_stats(&self, g0: u64, g1: u64) -> PlanStats {
        if g1 <= g0 {
            return PlanStats::default();
        }
        let (f0, f1) = (self.gfirst_u(g0), self.gfirst_u(g1));
        let detours = f1 - f0;
        let d = |v: &[u64]| self.gcum(v, g1) - self.gcum(v, g0);
        let (injections, injected_ns, dropped) = (
            d(&self.groups.ginj),
            d(&self.groups.ginj_ns),
            d(&self.groups.gdrop),
        );
        PlanStats {
            detours,
            injections,
            injected_detours: detours - dropped,
            injected_ns,
            busy_ns: injected_ns - injections * self.opts.overhead_ns,
            dropped,
            dropped_ns: d(&self.groups.gdrop_ns),
            merged: detours - (g1 - g0),
            noise_ns: self.noise_cum_u(f1) - self.noise_cum_u(f0),
        }
    }

    fn raw_stats(&self, g: &RawGroup) -> PlanStats {
        let span = self.opts.scaled(g.run);
        let det = u64::from(g.detours);
        let mut st = PlanStats {
            detours: det,
            merged: det - 1,
            noise_ns: g.noise_ns,
            ..PlanStats::default()
        };
        if span <= self.opts.overhead_ns {
            st.dropped = det;
            st.dropped_ns = span;
        } else {
            st.injections = 1;
            st.injected_detours = det;
            st.injected_ns = span;
            st.busy_ns = span - self.opts.overhead_ns;
        }
        st
    }
}

/// Entries [`first_at_least`] counts before its blocks (read one by one, on an AMD Zen 4 VM 4
/// and 8 beat 1 by 5–9 % on dense traces; counted without a branch, 4 beat 8 on an Intel VM;
/// docs/BENCHMARKS.md).
const FIRST_LINEAR: usize = 4;
/// Entries of a bucket that [`PlanIndex::first_key_at_least`] counts before it searches.
const BUCKET_LINEAR: usize = 4;
/// Entries per block of [`first_at_least`]'s search.
const FIRST_BLOCK: usize = 8;
/// Blocks [`first_at_least`] looks at before it gallops.
const FIRST_BLOCKS: usize = 4;

/// For each of `buckets` buckets of key width 2^`shift`, the first entry of `v` (keys
/// non-decreasing) whose key is at least the bucket's start (`v.len()` past the last key).
fn bucket_firsts(v: &[FastEntry], shift: u32, buckets: usize) -> Vec<u32> {
    large_vec_filled(buckets, |j0, part| {
        // The chunk's first bucket begins at the first entry with a key at least its start.
        let mut i = v.partition_point(|e| e.key < (j0 as u64) << shift);
        for (j, f) in (j0 as u64..).zip(part) {
            let lo = j << shift;
            while i < v.len() && v[i].key < lo {
                i += 1;
            }
            f.write(i as u32);
        }
    })
}

/// Starts loading the cache line of `e` without waiting for it (a hint: it never faults and
/// changes no value); nothing where no prefetch instruction is available.
#[inline(always)]
fn prefetch<T>(e: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults (any address is allowed, and `e` is a
    // valid reference); it reads and writes nothing the program can observe. (Safe to call
    // from Rust 1.87; the workspace's MSRV is 1.85.)
    #[allow(unused_unsafe)]
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((e as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = e;
}

/// First index `i ≥ lo` of `v` with `key(v[i]) ≥ t` (`key` non-decreasing), else `v.len()`,
/// for answers expected near `lo` (a barrier's): the first [`FIRST_LINEAR`] entries counted
/// without a branch, then blocks of 8 entries, each with one branch and a branch-free search
/// inside, then galloping.
#[inline]
fn first_at_least(
    v: &[FastEntry],
    lo: usize,
    t: u64,
    key: impl Fn(&FastEntry) -> u64 + Copy,
) -> usize {
    const W: usize = FIRST_BLOCK;
    // The next few first, counted: most answers (a message's o, an idle wait) are among them,
    // on the line already read; a block's last entry is often a line further.
    let Some(first) = v.get(lo..lo + FIRST_LINEAR) else {
        return first_at_least_near_end(v, lo, t, key);
    };
    let below = count_below(first, t, key);
    if below < FIRST_LINEAR {
        return lo + below;
    }
    // Entry `at` is below t (the block search needs only its last entry at or above).
    let mut at = lo + FIRST_LINEAR - 1;
    for _ in 0..FIRST_BLOCKS {
        let Some(block) = v.get(at..at + W) else {
            break;
        };
        if key(&block[W - 1]) >= t {
            let mut b = usize::from(key(&block[3]) < t) * 4;
            b += usize::from(key(&block[b + 1]) < t) * 2;
            b += usize::from(key(&block[b]) < t);
            return at + b;
        }
        at += W;
    }
    gallop(at as u64, v.len() as u64, |i| key(&v[i as usize]) >= t) as usize
}

/// [`first_at_least`] where fewer than [`FIRST_LINEAR`] entries are left from `lo`: where the
/// first at or above `t` sits among them, else the end (rare: kept out of the searches' code).
#[cold]
#[inline(never)]
fn first_at_least_near_end(
    v: &[FastEntry],
    lo: usize,
    t: u64,
    key: impl Fn(&FastEntry) -> u64,
) -> usize {
    let from = lo.min(v.len());
    from + count_below(&v[from..], t, key)
}

/// How many entries of `w` (`key` non-decreasing) have a key below `t`, counted without a
/// branch: those below are a prefix, so the count is where the first at or above `t` sits
/// (where the answer lies varies from rank to rank, and a branch on it is mispredicted).
#[inline]
fn count_below(w: &[FastEntry], t: u64, key: impl Fn(&FastEntry) -> u64) -> usize {
    w.iter().fold(0, |c, e| c + usize::from(key(e) < t))
}

/// Smallest `v` in `[l, r]` with `pred(v)` (monotone), given `pred(r)` or `r` the end.
#[inline]
fn bisect(mut l: u64, mut r: u64, mut pred: impl FnMut(u64) -> bool) -> u64 {
    while l < r {
        let m = l + (r - l) / 2;
        if pred(m) {
            r = m;
        } else {
            l = m + 1;
        }
    }
    l
}

/// Smallest `v` in `[lo, hi)` with `pred(v)` (monotone), else `hi`: galloping from `lo`, so
/// the cost grows with the log of the distance, not of the array.
#[inline]
fn gallop(lo: u64, hi: u64, mut pred: impl FnMut(u64) -> bool) -> u64 {
    let mut l = lo;
    let mut step = 1u64;
    let r = loop {
        let c = l.saturating_add(step - 1);
        if c >= hi {
            break hi;
        }
        if pred(c) {
            break c;
        }
        l = c + 1;
        step = step.saturating_mul(2);
    };
    bisect(l, r, pred)
}

impl IndexedReplay {
    #[inline]
    fn limit_pos(&self, ix: &PlanIndex) -> u64 {
        self.p + ix.limit_ns.saturating_sub(self.consumed_before)
    }

    /// Injections before the middle ones (0 or 1: the head).
    #[inline]
    fn h(&self, bound: Option<&Bound>) -> u64 {
        bound.map_or(u64::from(self.flags & HEAD_INJ != 0), |b| b.h)
    }

    /// Start and group end of virtual injection `v` (`v` below the bound's count).
    #[inline]
    fn entry(&self, ix: &PlanIndex, bound: Option<&Bound>, v: u64) -> (u64, u64) {
        let h = self.h(bound);
        if v < h {
            return (self.head_a, self.head_a);
        }
        let i = self.i_first + (v - h);
        if let Some(b) = bound {
            if i >= b.mid_end {
                let (a, g, _) = b.tail.expect("a virtual injection past the bound");
                return (a, g.end);
            }
        }
        let e = ix.inj_u(i);
        (e.a, e.b)
    }

    /// Σ span of the virtual injections before `v` (`v` up to the bound's count).
    #[inline]
    fn cs_before(&self, ix: &PlanIndex, bound: Option<&Bound>, v: u64) -> u64 {
        let h = self.h(bound);
        if v <= h {
            return if v == 1 { self.head_span } else { 0 };
        }
        let hs = if h == 1 { self.head_span } else { 0 };
        let i = self.i_first + (v - h);
        if let Some(b) = bound {
            if i > b.mid_end {
                let t = b.tail.and_then(|t| t.2).unwrap_or(0);
                return hs + ix.cs_u(b.mid_end) - ix.cs_u(self.i_first) + t;
            }
        }
        hs + ix.cs_u(i) - ix.cs_u(self.i_first)
    }
}

impl IndexedReplay {
    /// Replay time of virtual injection `v`'s due (no timer error: the index is exact only
    /// then).
    #[inline]
    fn due(&self, ix: &PlanIndex, a: u64) -> u64 {
        self.r0.saturating_add(ix.opts.scaled(a - self.p))
    }

    /// Runs `query` without the limit when neither the answer nor the cursor's look-ahead
    /// can reach it, else with it. `query` returns the first injection not executed, the
    /// answer, and whether it returned right after executing one (without a look at the next).
    #[inline]
    fn answer<T>(
        &mut self,
        ix: &PlanIndex,
        seg: &SegmentStart,
        mut query: impl FnMut(&Self, Option<&Bound>) -> (u64, T, bool),
    ) -> T {
        if self.flags & BOUNDED == 0 {
            let (k, out, early) = query(self, None);
            // The walk built every injection up to the one after the last it looked at.
            let built = if early { k } else { k + 1 };
            if self.entry(ix, None, built).1 <= self.limit_pos(ix) {
                self.next = k;
                return out;
            }
            self.flags |= BOUNDED;
        }
        let bound = ix.bound(self, seg);
        let (k, out, early) = query(self, Some(&bound));
        self.next = k;
        if !early && k == bound.count {
            self.flags |= EXHAUSTED | DEAD;
        }
        if (if early { k } else { k + 1 }) >= bound.count {
            self.flags |= DEAD;
        }
        out
    }

    /// Whether the walk's look-ahead, unrolled injection `built`, ends before the fraction
    /// limit: then every injection up to it starts before the limit as well, and a fast answer
    /// is the walk's.
    #[inline]
    fn before_limit(&self, ix: &PlanIndex, built: u64) -> bool {
        built < self.i_safe || ix.b_u(built) < self.limit_pos(ix)
    }

    /// Where the fast path applies (S = 1, away from the limit, the head of the segment passed):
    /// the unrolled index of the next injection.
    #[inline]
    fn fast_start(&self, ix: &PlanIndex) -> Option<usize> {
        let h = u64::from(self.flags & HEAD_INJ != 0);
        if self.flags & BOUNDED != 0 || self.next < h {
            return None;
        }
        let i = self.i_first + (self.next - h);
        (i < ix.fast.len() as u64).then_some(i as usize)
    }

    /// [`IndexedReplay::compute`] where S = 1, the head of the segment is passed and neither the
    /// answer nor the walk's look-ahead reaches the fraction limit: one threshold on the
    /// precomputed `a − cs`, a branch-free count over the next entries, else galloping. `None`
    /// (nothing changed) elsewhere; `compute` then answers.
    #[inline]
    pub fn compute_fast(&mut self, ix: &PlanIndex, start: u64, q: u64) -> Option<u64> {
        let i0 = self.fast_start(ix)?;
        let v = &ix.fast[..];
        let end0 = start + q;
        // The first injection left out is due at or after the grown end:
        // r0 + (a_i − p) + cs_{i0} ≥ end0 + cs_i, i.e. a_i − cs_i ≥ end0 + p − r0 − cs_{i0}
        // (a threshold ≤ 0 holds for every key: all keys are ≥ 0). One starting at or after
        // the limit would come first, but then the look-ahead is not before it: no answer.
        let base = v[i0].cs();
        let t = (end0 + self.p).saturating_sub(self.r0 + base);
        // A short window (a message's o, a window ending near the next injection) is answered
        // near the rank's next entry, whose lines are cached; a long one in its bucket.
        let i = if ix.near(v[i0].key, t) {
            first_at_least(v, i0, t, |e| e.key)
        } else {
            ix.first_key_at_least(i0, t)
        };
        if i >= v.len() || !self.before_limit(ix, i as u64 + 1) {
            return None;
        }
        self.next += (i - i0) as u64;
        Some(end0 + v[i].cs() - base)
    }

    /// Asks the memory system, without waiting, for the index lines that
    /// [`IndexedReplay::compute_fast`]`(ix, start, q)` reads first: called some ranks ahead of
    /// the search, the cache misses of several ranks overlap instead of queueing. A compute
    /// search reads its threshold's bucket, then the entries it names: this first stage asks
    /// for the bucket (and for the line after the next entry, which the barrier search before
    /// the compute reads next); [`PlanIndex::prefetch_entries`] with the returned ticket, later,
    /// when the bucket's line is there, for the entries. Changes nothing; reads the rank's next
    /// entry, which its last search has just read.
    #[inline]
    pub fn prefetch_compute(&self, ix: &PlanIndex, start: u64, q: u64) -> PrefetchTicket {
        let Some(i0) = self.fast_start(ix) else {
            return PrefetchTicket::default();
        };
        let v = &ix.fast[..];
        let t = (start + q + self.p).saturating_sub(self.r0 + v[i0].cs());
        // The barrier search before the compute reads the next FIRST_LINEAR entries first, one
        // line or two.
        if let Some(e) = v.get(i0 + FIRST_LINEAR - 1) {
            prefetch(e);
        }
        if ix.near(v[i0].key, t) {
            // Answered near the next entry (see `compute_fast`).
            return PrefetchTicket::default();
        }
        ix.prefetch_bucket(i0, t)
    }

    /// Asks, without waiting, for the index lines that a barrier search
    /// ([`IndexedReplay::leave_barrier_fast`]) reads first: its answer is near the rank's next
    /// entry; it reads the next entry and, when that one is due before the barrier, the first
    /// block from there. Changes nothing.
    #[inline]
    pub fn prefetch_barrier(&self, ix: &PlanIndex) {
        let Some(i0) = self.fast_start(ix) else {
            return;
        };
        let v = &ix.fast[..];
        prefetch(&v[i0]);
        // The first block's middle and its last entry, which `first_at_least` reads first when
        // the answer is not among the next FIRST_LINEAR.
        let first_block = i0 + FIRST_LINEAR - 1;
        for k in [
            first_block,
            first_block + FIRST_BLOCK / 2 - 1,
            first_block + FIRST_BLOCK - 1,
        ] {
            if let Some(e) = v.get(k) {
                prefetch(e);
            }
        }
    }

    /// Replay time by which nothing is due where the fast path applies (0 elsewhere): a compute
    /// window that ends by it, or a barrier that completes by it, is answered on time and
    /// leaves the replay as it is (the next injection is due at or after the window's end).
    #[inline]
    pub fn quiet_until(&self, ix: &PlanIndex) -> u64 {
        match self.fast_start(ix) {
            Some(i0) if self.before_limit(ix, i0 as u64 + 1) => {
                self.r0 + ix.fast[i0].a.saturating_sub(self.p)
            }
            _ => 0,
        }
    }

    /// [`IndexedReplay::leave_barrier`] where [`IndexedReplay::compute_fast`] applies: one
    /// search on the injections' starts; `None` (nothing changed) elsewhere.
    #[inline]
    pub fn leave_barrier_fast(&mut self, ix: &PlanIndex, b: u64) -> Option<u64> {
        let i0 = self.fast_start(ix)?;
        let v = &ix.fast[..];
        // Due at or after b: r0 + (a − p) ≥ b, i.e. a ≥ p + (b − r0) (every a ≥ p).
        let t = self.p + b.saturating_sub(self.r0);
        let i = first_at_least(v, i0, t, |e| e.a);
        if i >= v.len() {
            return None;
        }
        // The last injection due before b (where one is, i > i0): still running at b, it holds
        // the rank. Without a branch (whether it does varies from rank to rank): where none is
        // due before b, j = i and `end` is not used.
        let j = i.max(i0 + 1) - 1;
        let end = self.r0 + (v[j].a - self.p) + (v[i].cs() - v[j].cs());
        let held = (i > i0) & (end > b);
        let (out, built) = if held {
            (end, i as u64)
        } else {
            (b, i as u64 + 1)
        };
        if !self.before_limit(ix, built) {
            return None;
        }
        self.next += (i - i0) as u64;
        Some(out)
    }

    /// Computes `q` (replay ns) from `start`: the end of the compute window, every injection
    /// due before the growing end taking its span (the predictor's compute phase).
    pub fn compute(&mut self, ix: &PlanIndex, seg: &SegmentStart, start: u64, q: u64) -> u64 {
        if let Some(end) = self.compute_fast(ix, start, q) {
            return end;
        }
        self.answer(ix, seg, |r, bound| {
            let next = r.next;
            let (hi, limit) = match bound {
                Some(b) => (b.count, u64::MAX),
                None => (u64::MAX / 2, r.limit_pos(ix)),
            };
            let cs_next = r.cs_before(ix, bound, next);
            let k = gallop(next, hi, |v| {
                let a = r.entry(ix, bound, v).0;
                a >= limit
                    || r.due(ix, a).saturating_add(cs_next) >= start + q + r.cs_before(ix, bound, v)
            });
            let cs_k = if k < hi || bound.is_some() {
                r.cs_before(ix, bound, k)
            } else {
                cs_next
            };
            (k, start + q + cs_k - cs_next, false)
        })
    }

    /// Leaves a barrier that completes at `b`: detours that end before it are hidden; one still
    /// running holds the rank until its end. Returns the exit time.
    pub fn leave_barrier(&mut self, ix: &PlanIndex, seg: &SegmentStart, b: u64) -> u64 {
        if let Some(exit) = self.leave_barrier_fast(ix, b) {
            return exit;
        }
        self.answer(ix, seg, |r, bound| {
            let next = r.next;
            let (hi, limit) = match bound {
                Some(bd) => (bd.count, u64::MAX),
                None => (u64::MAX / 2, r.limit_pos(ix)),
            };
            let k = gallop(next, hi, |v| {
                let a = r.entry(ix, bound, v).0;
                a >= limit || r.due(ix, a) >= b
            });
            if k > next {
                let a = r.entry(ix, bound, k - 1).0;
                let span = r.cs_before(ix, bound, k) - r.cs_before(ix, bound, k - 1);
                let end = r.due(ix, a) + span;
                if end > b {
                    return (k, end, true);
                }
            }
            (k, b, false)
        })
    }

    /// Jumps to timeline point `seg` at replay time `now` (as [`Cursor::resync`]); returns the
    /// counts of the segment left.
    pub fn resync(
        &mut self,
        ix: &PlanIndex,
        old: &SegmentStart,
        new: &SegmentStart,
        now: u64,
    ) -> PlanStats {
        let st = self.stats(ix, old);
        let consumed =
            self.consumed_before + replayed_ns(now.saturating_sub(self.r0), ix.opts.scale);
        let dead = self.flags & DEAD;
        *self = ix.begin(new, now, consumed);
        if dead != 0 {
            self.flags |= DEAD | EMPTY | BOUNDED;
        }
        st
    }

    /// The segment this replay is in (a pure function of its start point, so it need not be
    /// kept per rank).
    pub fn segment(&self, ix: &PlanIndex) -> SegmentStart {
        ix.segment_start(self.p)
    }

    /// Share of the stream replayed by replay time `now_ns` (as [`Cursor::progress_at`]).
    pub fn progress_at(&self, ix: &PlanIndex, now_ns: u64) -> f64 {
        let seg = now_ns.saturating_sub(self.r0) as f64 / ix.opts.scale;
        (self.consumed_before as f64 + seg) / ix.period as f64
    }

    /// Counts of this segment's executed injections (as [`Cursor::stats`] with
    /// [`Cursor::confirm`] after each): every group up to the last one executed, or every group
    /// met once the segment ran out.
    pub fn stats(&self, ix: &PlanIndex, seg: &SegmentStart) -> PlanStats {
        let exhausted = self.flags & EXHAUSTED != 0;
        if !exhausted && self.next == 0 {
            return PlanStats::default();
        }
        let bound = (self.flags & BOUNDED != 0).then(|| ix.bound(self, seg));
        let head = match &bound {
            Some(b) => b.head,
            None => seg.head.map(|h| h.g),
        };
        let mut st = head.map_or_else(PlanStats::default, |h| ix.raw_stats(&h));
        let h = self.h(bound.as_ref());
        let through_tail = |st: &mut PlanStats, b: &Bound| {
            *st += ix.group_stats(seg.g_mid, b.full_end);
            if let Some((_, g, _)) = &b.tail {
                *st += ix.raw_stats(g);
            }
        };
        if exhausted {
            if let Some(b) = &bound {
                through_tail(&mut st, b);
            }
            return st;
        }
        let v = self.next - 1;
        if v >= h {
            let i = self.i_first + (v - h);
            match &bound {
                Some(b) if i >= b.mid_end => through_tail(&mut st, b),
                _ => st += ix.group_stats(seg.g_mid, ix.inj_group_u(i) + 1),
            }
        }
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use jitter_trace::memory::HUGE_PAGE;
    use jitter_trace::Detour;
    use proptest::prelude::*;

    #[test]
    fn a_vector_filled_side_by_side_holds_every_element_in_order() {
        // Five chunks and a part (a chunk is at least a huge page of u64).
        let n = 5 * HUGE_PAGE / 8 + 123;
        let v: Vec<u64> = large_vec_filled(n, |first, part| {
            for (k, x) in (first..).zip(part) {
                x.write(3 * k as u64);
            }
        });
        assert_eq!(v.len(), n);
        assert!(v.iter().enumerate().all(|(k, &x)| x == 3 * k as u64));
    }

    #[test]
    fn a_large_index_is_built_as_one_pass_over_it_would_build_it() {
        // 400 000 detours: the sums are formed beside the groups, and the fast entries span
        // several chunks of `large_vec_filled` (the buckets' chunks have their own test).
        let n = 400_000u64;
        let detours: Vec<(u64, u64)> = (0..n)
            .map(|i| (i * 10_000 + (i * 7919) % 5000, 200 + (i * 31) % 1800))
            .collect();
        let ix = Plan::new(&stream(n * 10_000, &detours), opts())
            .unwrap()
            .index()
            .unwrap();
        let (mut rc, mut nc) = (0, 0);
        for k in 0..n as usize {
            assert_eq!(
                (ix.run_cum[k], ix.noise_cum()[k]),
                (rc, nc),
                "sums before {k}"
            );
            rc += ix.re[k] - ix.rs[k];
            nc += ix.opts.scaled(ix.re[k] - ix.rs[k]);
        }
        assert_eq!(
            (ix.run_cum[n as usize], ix.noise_cum()[n as usize]),
            (rc, nc)
        );
        let m = ix.groups.inj.len();
        assert_eq!(ix.fast.len(), 2 * m);
        assert!(ix.fast.len() * std::mem::size_of::<FastEntry>() > 2 * HUGE_PAGE);
        for (k, f) in ix.fast.iter().enumerate() {
            let (e, lap) = if k < m {
                (&ix.groups.inj[k], 0)
            } else {
                (&ix.groups.inj[k - m], 1)
            };
            assert_eq!(f.a, e.a + lap * ix.period, "entry {k}");
            assert_eq!(f.cs(), e.cs + lap * ix.groups.tot_span, "entry {k}");
        }
        assert!(ix.key_first.len() > 2);
        for (j, &first) in ix.key_first.iter().enumerate() {
            let lo = (j as u64) << ix.key_shift;
            let expected = ix.fast.partition_point(|e| e.key < lo);
            assert_eq!(first as usize, expected, "bucket {j}");
        }
    }

    #[test]
    fn buckets_filled_in_chunks_each_name_their_first_key() {
        // 2^21 buckets of width 8 over keys that advance by 0..=15 (empty buckets, buckets of
        // several entries, equal keys): four chunks of a huge page's worth of u32.
        let mut key = 0u64;
        let v: Vec<FastEntry> = (0..1u64 << 21)
            .map(|i| {
                key += (i * 7919) % 16;
                FastEntry { a: key, key }
            })
            .collect();
        let buckets = (key >> 3) as usize + 2;
        assert!(buckets > 3 * HUGE_PAGE / 4);
        let first = bucket_firsts(&v, 3, buckets);
        assert_eq!(first.len(), buckets);
        for (j, &f) in first.iter().enumerate() {
            let expected = v.partition_point(|e| e.key < (j as u64) << 3);
            assert_eq!(f as usize, expected, "bucket {j}");
        }
    }

    #[test]
    fn searches_in_crowded_buckets_and_near_the_end_find_the_first_key_at_least() {
        // Bursts of 12 detours 2 ns apart every 10 µs: each burst's keys share a bucket, more
        // than the entries a bucket search counts before it bisects; the searches near the
        // end of the entries have fewer entries left than they count.
        let d: Vec<(u64, u64)> = (0..50u64)
            .flat_map(|b| (0..12u64).map(move |k| (1 + b * 10_000 + 2 * k, 1)))
            .collect();
        let plan = Plan::new(&stream(500_000, &d), opts()).unwrap();
        let ix = plan.index().expect("an index at S = 1");
        let v = &ix.fast;
        let crowded = ix.key_first.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert!(crowded as usize > BUCKET_LINEAR, "{crowded}");
        let mut ts: Vec<u64> = v.iter().flat_map(|e| [e.key, e.a]).collect();
        ts.extend(
            ts.clone()
                .iter()
                .flat_map(|&t| [t.saturating_sub(1), t + 1]),
        );
        for t in ts {
            let by_key: fn(&FastEntry) -> u64 = |e| e.key;
            let by_start: fn(&FastEntry) -> u64 = |e| e.a;
            for (key, what) in [(by_key, "key"), (by_start, "a")] {
                let first = v.partition_point(|e| key(e) < t);
                for lo in [
                    0,
                    first.saturating_sub(5),
                    first.saturating_sub(1),
                    first,
                    v.len() - 2,
                ] {
                    let expected = first.max(lo);
                    assert_eq!(
                        first_at_least(v, lo, t, key),
                        expected,
                        "{what} ≥ {t} from {lo}"
                    );
                    if what == "key" {
                        assert_eq!(
                            ix.first_key_at_least(lo, t),
                            expected,
                            "key ≥ {t} from {lo}"
                        );
                    }
                }
            }
        }
    }

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
    fn a_paused_replay_resumes_where_it_would_have_been() {
        // The paired design's resume: the timeline ran on while nothing was injected.
        let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
        let plan = Plan::new(
            &s,
            PlanOptions {
                scale: 2.0,
                ..opts()
            },
        )
        .unwrap();
        let mut c = plan.cursor(300);
        assert_eq!(c.point_at(0), 300);
        assert_eq!(c.point_at(400), 500);
        assert_eq!(c.point_at(1600), 100, "wraps around the timeline");
        c.resync(c.point_at(400), 400);
        // From 500 the next detour is (900, 5): due (900 − 500)·2 after the resync.
        assert_eq!(c.next().map(|i| i.due_ns), Some(400 + 800));
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
        // The advice names the knob of every tool, the preload library's included.
        assert!(
            e.to_string()
                .ends_with("(--scale, or JITTER_SCALE for libjitter_preload.so)"),
            "{e}"
        );
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
        /// The bound on one injection is the longest chain of merged detours around the
        /// timeline (the largest sum from any record over the records that follow it across
        /// sleeps shorter than M, wrapping past the end, at most one pass), at least up to just
        /// above [`MAX_DETOUR_NS`].
        #[test]
        fn the_longest_injection_is_the_longest_merged_chain_around_the_timeline(
            s in arb_stream(),
            scale in prop::sample::select(vec![1.0, 0.5, 3.0, 2e6]),
            min_sleep in 0u64..6_000,
        ) {
            let o = PlanOptions { scale, min_sleep_ns: min_sleep, ..PlanOptions::ideal() };
            let (r, d) = (&s.records, s.end_ns - s.begin_ns);
            let n = r.len();
            let gap_after = |k: usize| match r.get(k + 1) {
                Some(next) => next.start_ns - r[k].end_ns(),
                None => (r[0].start_ns + d).saturating_sub(r[k].end_ns()),
            };
            let mut want = 0u64;
            for j in 0..n {
                let mut chain = 0u64;
                for k in (j..j + n).map(|k| k % n) {
                    chain = chain.saturating_add(o.scaled(r[k].run_ns));
                    want = want.max(chain);
                    if o.scaled(gap_after(k)) >= o.min_sleep_ns {
                        break;
                    }
                }
            }
            let cap = |x: u64| x.min(MAX_DETOUR_NS + 1);
            prop_assert_eq!(cap(longest_injection_ns(r, d, &o)), cap(want));
        }

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

    /// The predictor's walk (des.rs without timer errors): the reference for the index.
    struct Walk {
        c: Cursor,
        pending: Option<(u64, u64)>,
        busy_until: u64,
    }

    impl Walk {
        fn peek(&mut self) -> Option<(u64, u64)> {
            if self.pending.is_none() {
                let i = self.c.next()?;
                self.pending = Some((i.due_ns.max(self.busy_until), i.span_ns));
            }
            self.pending
        }
        fn consume(&mut self, due: u64, span: u64) {
            self.pending = None;
            self.busy_until = due + span;
            self.c.confirm();
        }
        fn compute(&mut self, start: u64, q: u64) -> u64 {
            let mut end = start + q;
            while let Some((due, span)) = self.peek() {
                if due >= end {
                    break;
                }
                self.consume(due, span);
                end += span;
            }
            end
        }
        fn leave(&mut self, b: u64) -> u64 {
            while let Some((due, span)) = self.peek() {
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
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn the_index_answers_exactly_as_the_walk(
            s in arb_stream(),
            scale in prop::sample::select(vec![1.0f64, 1.0, 0.7, 1.5, 3.0, 7.3]),
            overhead in 0u64..300,
            min_sleep in prop::sample::select(vec![0u64, 0, 50, 400, 3_000]),
            offset in 0u64..1_000_000,
            fraction in prop::sample::select(vec![1.0f64, 0.9, 0.3, 0.05]),
            ops in prop::collection::vec((0u64..4_000, 0u64..3_000, 0u64..1_000, 0u64..1_000_000, 0u8..4), 1..40),
        ) {
            let o = PlanOptions { scale, overhead_ns: overhead, min_sleep_ns: min_sleep, fraction, ..PlanOptions::ideal() };
            let Ok(plan) = Plan::new(&s, o) else { return Ok(()); };
            let Some(ix) = plan.index() else {
                // Only these cases may fall back to the walk.
                prop_assert!(scale != 1.0 || min_sleep > 0);
                return Ok(());
            };
            let mut w = Walk { c: plan.cursor(offset), pending: None, busy_until: 0 };
            let mut seg = ix.segment_start(offset);
            let mut r = ix.replay(&seg);
            let mut done = PlanStats::default();
            let mut start = 0u64;
            for (k, &(q, wait, top, off, what)) in ops.iter().enumerate() {
                if what == 0 {
                    w.c.resync(off, start);
                    w.pending = None;
                    w.busy_until = start;
                    let new = ix.segment_start(off);
                    done += r.resync(&ix, &seg, &new, start);
                    seg = new;
                }
                prop_assert_eq!(r.segment(&ix), seg);
                let q = q + 1;
                let (e1, e2) = (w.compute(start, q), r.compute(&ix, &seg, start, q));
                prop_assert_eq!(e1, e2, "compute at op {}", k);
                let b = e1 + wait;
                let (x1, x2) = (w.leave(b), r.leave_barrier(&ix, &seg, b));
                prop_assert_eq!(x1, x2, "bottom barrier at op {}", k);
                let t = x1 + top;
                let (s1, s2) = (w.leave(t), r.leave_barrier(&ix, &seg, t));
                prop_assert_eq!(s1, s2, "top barrier at op {}", k);
                start = s1;
                let mut got = done;
                got += r.stats(&ix, &seg);
                prop_assert_eq!(w.c.stats(), got, "counts at op {}", k);
                prop_assert_eq!(w.c.progress_at(start), r.progress_at(&ix, start));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Long, dense streams at S = 1: the fast path (the compute in its bucket of keys, a barrier
        /// in blocks then galloping, over two laps) answers most questions, each exactly as the walk.
        #[test]
        fn the_fast_path_answers_as_the_walk_on_long_streams(
            gaps in prop::collection::vec((1u64..400, 1u64..200), 50..400),
            min_sleep in prop::sample::select(vec![0u64, 0, 30]),
            overhead in prop::sample::select(vec![0u64, 0, 40]),
            fraction in prop::sample::select(vec![1.0f64, 1.0, 0.5]),
            offset in 0u64..1_000_000,
            ops in prop::collection::vec((0u64..20_000, 0u64..3_000, 0u64..1_000, 0u64..1_000_000, 0u8..12), 1..60),
        ) {
            let mut t = 0u64;
            let mut d = Vec::new();
            for (g, r) in gaps { t += g; d.push(Detour { start_ns: t, run_ns: r }); t += r; }
            let s = Stream::from_detours(0, 0, t + 100, &d).unwrap();
            let o = PlanOptions { overhead_ns: overhead, min_sleep_ns: min_sleep, fraction, ..PlanOptions::ideal() };
            let plan = Plan::new(&s, o).unwrap();
            let Some(ix) = plan.index() else { return Ok(()); };
            let mut w = Walk { c: plan.cursor(offset), pending: None, busy_until: 0 };
            let mut seg = ix.segment_start(offset);
            let mut r = ix.replay(&seg);
            let (mut start, mut fast) = (0u64, 0u32);
            for (n, &(q, wait, top, off, what)) in ops.iter().enumerate() {
                if what == 0 {
                    w.c.resync(off, start);
                    w.pending = None;
                    w.busy_until = start;
                    let new = ix.segment_start(off);
                    r.resync(&ix, &seg, &new, start);
                    seg = new;
                }
                let q = q + 1;
                let e1 = w.compute(start, q);
                let mut f = r;
                if let Some(e) = f.compute_fast(&ix, start, q) {
                    prop_assert_eq!(e, e1);
                    fast += 1;
                }
                // The first question after the start is answered fast when its window is far
                // from the limit and the segment has no head.
                if n == 0 && what != 0 && fraction == 1.0 && seg.head.is_none()
                    && (e1 - start) * 4 < ix.period_ns() {
                    prop_assert_eq!(fast, 1);
                }
                prop_assert_eq!(r.compute(&ix, &seg, start, q), e1);
                for b in [e1 + wait, e1 + wait + top] {
                    let x1 = w.leave(b);
                    let mut f = r;
                    if let Some(x) = f.leave_barrier_fast(&ix, b) {
                        prop_assert_eq!(x, x1);
                        fast += 1;
                    }
                    prop_assert_eq!(r.leave_barrier(&ix, &seg, b), x1);
                    start = x1;
                }
            }
        }
    }

    #[test]
    fn questions_past_the_lap_end_are_answered_fast_in_the_second_lap_as_the_walk() {
        // A detour of 100–399 ns every 1000 ns over 200 µs; the replay starts 5 µs before the
        // lap's end and computes 3 µs windows with barriers between them, well into its second
        // lap (the fast entries' second half).
        let d: Vec<(u64, u64)> = (0..200u64)
            .map(|k| (k * 1000 + 1, 100 + (k * 37) % 300))
            .collect();
        let plan = Plan::new(&stream(200_000, &d), opts()).unwrap();
        let ix = plan.index().expect("an index at S = 1");
        let m = ix.groups.inj.len();
        let offset = ix.u0 + ix.period_ns() - 5_000;
        let mut w = Walk {
            c: plan.cursor(offset),
            pending: None,
            busy_until: 0,
        };
        let seg = ix.segment_start(offset);
        let mut r = ix.replay(&seg);
        let second_lap = |r: &IndexedReplay| matches!(r.fast_start(&ix), Some(i) if i >= m);
        let (mut start, mut computed, mut left, mut held) = (0u64, 0u32, 0u32, 0u32);
        for _ in 0..30 {
            let e1 = w.compute(start, 3_000);
            let mut f = r;
            if let Some(e) = f.compute_fast(&ix, start, 3_000) {
                assert_eq!(e, e1);
                computed += u32::from(second_lap(&r));
            }
            assert_eq!(r.compute(&ix, &seg, start, 3_000), e1);
            let b = e1 + 700;
            let x1 = w.leave(b);
            let mut f = r;
            if let Some(x) = f.leave_barrier_fast(&ix, b) {
                assert_eq!(x, x1);
                left += u32::from(second_lap(&r));
                held += u32::from(x > b);
            }
            assert_eq!(r.leave_barrier(&ix, &seg, b), x1);
            start = x1;
        }
        // Past the lap's end the questions are answered fast, some barriers held by a detour
        // running at them.
        assert!(computed >= 25, "{computed} computed fast in the second lap");
        assert!(left >= 25 && held > 0, "{left} barriers fast, {held} held");
    }

    #[test]
    fn the_index_refuses_what_it_cannot_answer_exactly() {
        let s = stream(1000, &[(100, 10), (110, 20), (900, 5)]);
        let curve = OverheadByGap::new(&[(10, 1), (100, 2)]).unwrap();
        let with = |o: PlanOptions| Plan::new(&s, o).unwrap().index().is_some();
        assert!(with(opts()));
        assert!(!with(PlanOptions {
            overhead_by_gap: curve,
            ..opts()
        }));
        // Every sleep merges: one endless injection.
        assert!(!with(PlanOptions {
            min_sleep_ns: 10_000,
            ..opts()
        }));
        // A gap of 0 ns at S = 1.5 could let rounded dues overlap: walked instead.
        let touching = stream(1000, &[(100, 10), (110, 20)]);
        let sc = PlanOptions {
            scale: 1.5,
            ..opts()
        };
        assert!(Plan::new(&touching, sc).unwrap().index().is_none());
        assert!(Plan::new(&s, sc).unwrap().index().is_none());
        let apart = stream(1000, &[(100, 10), (120, 20)]);
        assert!(Plan::new(&apart, sc).unwrap().index().is_some());
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
