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
//! injection (the injector, and the predictor's `--engine walk`); the plan compiled by
//! The predictor's compiled index of a plan (crate `jitter-predict`, `plan_index` and
//! `indexed_replay`) is searched instead by a per-rank replay. Both apply the one merge rule of
//! this module ([`merge_group`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use jitter_trace::memory::large_vec;
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

/// Largest scale factor S a plan accepts (one constant with the trace tools' figures).
pub const MAX_SCALE: f64 = jitter_trace::stats::MAX_SCALE;

/// Longest planned injection (one detour or a merged run of them, scaled), ns: no injection
/// holds a CPU longer; also the bound of O, M and L.
pub const MAX_DETOUR_NS: u64 = 10_000_000_000;

/// Most points an [`OverheadByGap`] holds.
pub(crate) const OVERHEAD_POINTS: usize = 8;

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
        check_scale(self.scale)?;
        check_fraction(self.fraction)?;
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

/// `s` when it is a usable scale factor S: finite, in (0, [`MAX_SCALE`]].
pub fn check_scale(s: f64) -> Result<f64, PlanError> {
    if s.is_finite() && s > 0.0 && s <= MAX_SCALE {
        Ok(s)
    } else {
        Err(PlanError::Option(format!(
            "scale must be a finite number in (0, {MAX_SCALE}], got {s}"
        )))
    }
}

/// `f` when it is a usable fraction f of a stream: in (0, 1].
pub(crate) fn check_fraction(f: f64) -> Result<f64, PlanError> {
    if f > 0.0 && f <= 1.0 {
        Ok(f)
    } else {
        Err(PlanError::Option(format!(
            "fraction must be in (0, 1], got {f}"
        )))
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
    /// The stream's window holds no time outside its detours.
    #[error(
        "stream {0} has no time between its detours (its window is only their span, as in a \
         trace imported from a format that states no window): a replay would be one detour \
         after another"
    )]
    NoQuietTime(usize),
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
    pub(crate) records: Vec<Record>,
    pub(crate) begin_ns: u64,
    pub(crate) period_ns: u64,
    pub(crate) opts: PlanOptions,
}

impl Plan {
    /// Prepares `stream` (validated) for replay over its own window.
    pub fn new(stream: &Stream, opts: PlanOptions) -> Result<Arc<Self>, PlanError> {
        Plan::with_window(stream, 0, stream.begin_ns, stream.end_ns, opts)
    }

    /// Prepares stream `index` of `trace` over the trace's common window, so that all streams of
    /// one node share one timeline (per-core traces are replayed as a group).
    ///
    /// ```
    /// use jitter_emulator::{Plan, PlanOptions};
    /// use jitter_trace::synth::synthesize;
    ///
    /// // 120 µs every 4 ms; the ideal options (S = 1, O = L = 0) replay it as it was collected.
    /// let trace = synthesize(&"periodic:period=4ms,dur=120us".parse()?, 1, 1_000_000_000, 3)?;
    /// let plan = Plan::from_trace(&trace, 0, PlanOptions::ideal())?;
    /// let next: Vec<_> = plan.cursor(0).take(3).collect();
    /// assert!(next.iter().all(|i| i.span_ns == 120_000 && i.detours == 1));
    /// assert_eq!(next[1].due_ns - next[0].due_ns, 4_000_000);
    /// assert_eq!(next[0].next_due_ns, next[1].due_ns);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
        let noise: u64 = stream.records.iter().map(|r| r.run_ns).sum();
        if noise >= end_ns.saturating_sub(begin_ns) {
            return Err(PlanError::NoQuietTime(index));
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
pub fn replayed_ns(replay_ns: u64, scale: f64) -> u64 {
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
    pub(crate) fn point_at(&self, now_ns: u64) -> u64 {
        let ran = replayed_ns(
            now_ns.saturating_sub(self.seg_replay0),
            self.plan.opts.scale,
        );
        (self.seg_trace0 + ran % self.plan.period_ns) % self.plan.period_ns
    }

    /// Timeline point (trace ns from the window start) of the last start or resync: where the
    /// stretch being replayed now began.
    pub(crate) fn segment_point(&self) -> u64 {
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

/// A source of trace detours on the unrolled timeline, as (start, end): the cursor's position,
/// or the predictor's compiled lap (crate `jitter-predict`), which merge by [`merge_group`].
pub trait DetourSource {
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
pub struct RawGroup {
    /// Σ run of the merged (clipped) detours, trace ns.
    pub run: u64,
    /// Trace detours merged into it.
    pub detours: u32,
    /// Σ S·run of each detour (the noise met), ns.
    pub noise_ns: u64,
    /// End of its last detour (clipped), trace ns.
    pub end: u64,
}

/// The merge rule shared by the cursor and the index: starting from `first`, the following
/// detours merge while their scaled sleep is shorter than M and they start before `limit_pos`;
/// every end is clipped at `limit_pos`.
#[inline]
pub fn merge_group(
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

#[cfg(test)]
pub(crate) mod tests;
