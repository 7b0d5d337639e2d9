//! The Parallel Benchmark kernel (Algorithm 1 of paper 001): compute–barrier phases timed with
//! the cycle counter, reduced per phase to MaxQT, MaxQTBT and the mean qt over ranks.

use jitter_collect::clock::{read_counter_ordered, Clock};
use jitter_emulator::Fraction;
use jitter_trace::summary::Moments;

use super::kernel::do_work;
use jitter_predict::comm::Collective;
use jitter_report::metrics::{paired_slowdown, PhaseAverages, PhaseSample};
use jitter_report::report::BlockMeans;

/// When the phase loop ends (besides the fraction rule of the emulator).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Until {
    /// Rank 0's elapsed time since the end of warm-up reaches this many ns (wall, scaled).
    Elapsed(u64),
    /// This many measured phases were run.
    Phases(u64),
    /// Paired design only: the 95 % half-width of both slowdowns is at most this many
    /// percentage points (from [`MIN_PAIRS`] pairs on), or `max_ns` elapsed (wall, scaled).
    Precision {
        /// Target half-width, percentage points.
        half_width_pct: f64,
        /// Time budget, ns.
        max_ns: u64,
    },
    /// Paired design only: until both slowdowns' 95 % half-widths are below half of the
    /// slowdowns themselves (a comparison can then reach a verdict), from [`MIN_PAIRS`] pairs
    /// on, or `max_ns` elapsed (wall, scaled).
    Verdict {
        /// Time budget, ns.
        max_ns: u64,
    },
}

/// Fewest block pairs a precision target is judged on (a t-interval from 2 is too wild).
pub(crate) const MIN_PAIRS: usize = 3;

/// The paired, interleaved design: measured phases come in pairs of blocks of `phases`
/// phases, one block without jitter (A, the emulator paused) and one with (B), in an order
/// drawn per pair from `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Blocks {
    /// Phases per block.
    pub phases: u64,
    /// Shared seed of the block order.
    pub seed: u64,
}

impl Blocks {
    /// Whether measured phase `m` (0 = the first after warm-up) runs with jitter: a pure
    /// function of the seed and `m`, so every rank switches at the same phase unprompted.
    pub(crate) fn jittered(&self, m: u64) -> bool {
        let len = self.phases.max(1);
        let pair = m / (2 * len);
        let second = (m / len) % 2 == 1;
        let baseline_first =
            splitmix(self.seed ^ pair.wrapping_mul(0x9E37_79B9_7F4A_7C15)) & 1 == 0;
        baseline_first == second
    }

    /// Whether measured phase `m` is the last of its pair.
    pub(crate) fn ends_pair(&self, m: u64) -> bool {
        (m + 1) % (2 * self.phases.max(1)) == 0
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What the paired design adds to a loop's outcome (rank 0).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct PairedOutcome {
    /// Every complete pair, in order.
    pub pairs: Vec<BlockMeans>,
    /// Averages of the baseline blocks of the complete pairs.
    pub baseline: PhaseAverages,
    /// Standard deviation of MaxQT over the baseline phases.
    pub baseline_sd_max_qt_ns: f64,
    /// Standard deviation of MaxQTBT over the baseline phases.
    pub baseline_sd_max_qtbt_ns: f64,
    /// Whether each kept sample ran with jitter (parallel to `LoopOutcome::samples`).
    pub sample_jitter: Vec<bool>,
}

impl PairedOutcome {
    /// (baseline, jitter) block means of MaxQTBT (eq. 2) of every pair.
    pub(crate) fn qtbt_pairs(&self) -> Vec<(f64, f64)> {
        self.pairs
            .iter()
            .map(|p| (p.base_qtbt_ns, p.jit_qtbt_ns))
            .collect()
    }

    /// (baseline, jitter) block means of MaxQT (eq. 3) of every pair.
    pub(crate) fn qt_pairs(&self) -> Vec<(f64, f64)> {
        self.pairs
            .iter()
            .map(|p| (p.base_qt_ns, p.jit_qt_ns))
            .collect()
    }

    /// True when both slowdowns' 95 % half-widths are below half of the slowdowns (never
    /// before two pairs).
    pub fn decisive(&self) -> bool {
        [self.qtbt_pairs(), self.qt_pairs()].iter().all(|pairs| {
            let sd = paired_slowdown(pairs);
            sd.ci95_pct.is_finite() && sd.ci95_pct < sd.pct.abs() / 2.0
        })
    }

    /// The larger of the two slowdowns' 95 % half-widths (NaN before two pairs).
    pub(crate) fn half_width_pct(&self) -> f64 {
        let a = paired_slowdown(&self.qtbt_pairs()).ci95_pct;
        let b = paired_slowdown(&self.qt_pairs()).ci95_pct;
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    }
}

/// What the loop needs besides the communicator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopSpec {
    /// LCG iterations per phase (agreed over ranks).
    pub iterations: u64,
    /// Phases run first and excluded from the averages.
    pub warmup_phases: u64,
    /// End of the measured part.
    pub until: Until,
    /// Stop as soon as any rank's replay reached this share of its stream (`None`: no replay
    /// limits the loop).
    pub fraction: Option<Fraction>,
    /// Scale factor S: reported times are measured times divided by S.
    pub scale: f64,
    /// Keep every measured phase (rank 0) for `--phases-csv`.
    pub keep_samples: bool,
    /// Virtual ranks per process: compute windows run one after another in each phase, each
    /// one rank's (paper 001 §VI future work); 1 is the plain benchmark.
    pub virtual_ranks: u64,
    /// The paired design's blocks; `None`: every phase as the hook runs it (sequential).
    pub blocks: Option<Blocks>,
}

/// Hooks into the loop for the emulator: where to resync and how far the replay got.
pub(crate) trait PhaseHook {
    /// Called on every rank right after the phase's first barrier, before t1.
    fn before_phase(&mut self, phase: u64);
    /// Share of this rank's stream replayed so far (0 without an emulator).
    fn progress(&self) -> f64;
    /// Called right before virtual rank `v`'s compute window (only with virtual ranks).
    fn before_window(&mut self, _phase: u64, _v: u64) {}
    /// Σ span of the injections executed so far, ns (0 without an emulator): the time a hook
    /// call spent in them belongs to the window that follows (the rest of a detour a resync
    /// landed in), the call's own cost (re-arming a timer) does not.
    fn injected_span_ns(&self) -> u64 {
        0
    }
    /// Paired design: called on every rank before `before_phase` with whether this phase runs
    /// with jitter (false: the emulator pauses).
    fn set_jitter(&mut self, _on: bool) {}
    /// Called on every rank before `before_phase` when `phase` opens a measured stretch of
    /// jitter (the first measured phase of the sequential design, the first phase of each jitter
    /// block of the paired design): where the replay starts it is what a prediction of the same
    /// stretches replays (`ReplayedWindows` in the report).
    fn open_window(&mut self, _phase: u64) {}
    /// Whether the hook pays detours at the loop's MPI calls (`--inject boundary`): each
    /// collective of the loop then pays at its entry ([`PhaseHook::settle`]) and runs through
    /// its nonblocking twin with [`PhaseHook::poll`] between two polls, in baseline and jitter
    /// blocks alike (the calls cost the same in both).
    fn pays_at_calls(&self) -> bool {
        false
    }
    /// At the entry of an MPI call: pays what the computing before it owes.
    fn settle(&mut self) {}
    /// Inside a polled call: pays the detour due now.
    fn poll(&mut self) {}
    /// A polled call just completed: what fell due after its last poll is paid, and a resync at
    /// the next phase takes effect from here.
    fn returned(&mut self) {}
    /// After the phase's second barrier: paying at calls, the phase's fidelity is noted.
    fn end_phase(&mut self) {}
}

/// The loop's barrier, as the hook pays (module docs of `replay`).
fn barrier<C, H>(comm: &C, hook: &mut H)
where
    C: Collective + ?Sized,
    H: PhaseHook + ?Sized,
{
    if hook.pays_at_calls() {
        hook.settle();
        comm.barrier_polled(&mut || hook.poll());
        hook.returned();
    } else {
        comm.barrier();
    }
}

/// The loop's reductions after a phase (`[qt, qtb, progress, stop]` to all, the qt sum to rank
/// 0), as the hook pays.
fn reduce<C, H>(comm: &C, hook: &mut H, maxes: &mut [f64], sum: &mut [f64])
where
    C: Collective + ?Sized,
    H: PhaseHook + ?Sized,
{
    if hook.pays_at_calls() {
        hook.settle();
        comm.all_max_polled(maxes, &mut || hook.poll());
        hook.returned();
        hook.settle();
        comm.sum_to_root_polled(sum, &mut || hook.poll());
        hook.returned();
    } else {
        comm.all_max(maxes);
        comm.sum_to_root(sum);
    }
}

/// No emulator: the benchmark without jitter.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NoJitter;

impl PhaseHook for NoJitter {
    fn before_phase(&mut self, _: u64) {}
    fn progress(&self) -> f64 {
        0.0
    }
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The period elapsed.
    Period,
    /// The phase count was reached.
    Phases,
    /// A rank replayed the requested fraction of its stream.
    Fraction,
    /// The slowdowns' intervals reached the requested precision.
    Precision,
    /// The time budget of a precision target ran out first.
    MaxTime,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Period => "period",
            StopReason::Phases => "phases",
            StopReason::Fraction => "fraction",
            StopReason::Precision => "precision",
            StopReason::MaxTime => "max-time",
        })
    }
}

/// The outcome of a phase loop. Averages and samples are meaningful on rank 0 only.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoopOutcome {
    /// Averages over measured phases (unscaled ns), rank 0.
    pub averages: PhaseAverages,
    /// Every measured phase (unscaled ns), rank 0, when asked for.
    pub samples: Vec<PhaseSample>,
    /// Warm-up phases run.
    pub warmup_phases: u64,
    /// Wall time of the measured phases on rank 0, ns (scaled: as it elapsed).
    pub elapsed_ns: u64,
    /// Why the loop ended.
    pub stopped_by: StopReason,
    /// Standard deviation of MaxQT over measured phases (unscaled ns), rank 0.
    pub sd_max_qt_ns: f64,
    /// Standard deviation of MaxQTBT over measured phases (unscaled ns), rank 0.
    pub sd_max_qtbt_ns: f64,
    /// Largest replay progress of any rank at the end.
    pub max_progress: f64,
    /// The LCG's last value (returned so the work cannot be optimised away).
    pub checksum: u64,
    /// The paired design's pairs and baseline (rank 0); `None` for the sequential design.
    pub paired: Option<PairedOutcome>,
}

impl LoopOutcome {
    /// Writes the measured phases as CSV (`replay-bench run --phases-csv`):
    /// `phase,max_qt_ns,max_qtbt_ns,mean_qt_ns,jitter`, ns unscaled to 0.1 ns; `jitter` is 1 for
    /// a jitter phase and 0 for a baseline block's phase of the paired design.
    pub(crate) fn write_phases_csv(&self, w: &mut dyn std::io::Write) -> csv::Result<()> {
        let mut out = csv::Writer::from_writer(w);
        out.write_record(["phase", "max_qt_ns", "max_qtbt_ns", "mean_qt_ns", "jitter"])?;
        for (i, s) in self.samples.iter().enumerate() {
            let jitter = self
                .paired
                .as_ref()
                .and_then(|p| p.sample_jitter.get(i).copied())
                .unwrap_or(true);
            out.write_record([
                i.to_string(),
                format!("{:.1}", s.max_qt_ns),
                format!("{:.1}", s.max_qtbt_ns),
                format!("{:.1}", s.mean_qt_ns),
                u8::from(jitter).to_string(),
            ])?;
        }
        out.flush()?;
        Ok(())
    }
}

/// Runs Algorithm 1: barrier; t1; do_work; t2; barrier; t3 — then one all-reduce (MAX) of
/// `[qt, qtb, progress, stop]` where only rank 0 contributes its stop decision (the elapsed-time
/// broadcast of line 13, folded into the reduction with the fraction rule), and one reduce (SUM)
/// of qt to rank 0 for the mean. Memory is O(1) unless samples are kept.
pub(crate) fn run_phases<C, H>(
    comm: &C,
    clock: &Clock,
    spec: &LoopSpec,
    hook: &mut H,
) -> LoopOutcome
where
    C: Collective + ?Sized,
    H: PhaseHook + ?Sized,
{
    let root = comm.rank() == 0;
    let size = comm.size() as f64;
    let scale = spec.scale;
    let mut rec = Recorder::new(spec);
    let mut x = 1 + comm.rank() as u64;
    let mut phase: u64 = 0;
    let mut measured: u64 = 0;
    let mut measure_start: Option<u64> = None;
    let mut last_end = read_counter_ordered();
    let (stopped_by, max_progress) = loop {
        let warm = phase < spec.warmup_phases;
        if !warm && measure_start.is_none() {
            measure_start = Some(last_end);
        }
        let m = phase.saturating_sub(spec.warmup_phases);
        let jitter = match spec.blocks {
            Some(b) if !warm => b.jittered(m),
            _ => true,
        };
        let ends_pair = spec.blocks.is_some_and(|b| !warm && b.ends_pair(m));
        barrier(comm, hook);
        if spec.blocks.is_some() {
            hook.set_jitter(jitter);
        }
        let opens = match spec.blocks {
            Some(b) => !warm && jitter && m % b.phases.max(1) == 0,
            None => !warm && m == 0,
        };
        if opens {
            hook.open_window(phase);
        }
        // A resync that lands inside a detour injects the rest of it at once, inside the hook:
        // that time belongs to the phase (as in the predictor, where a rank resynced into a
        // detour computes only after it), so the window opens that much before the hook
        // returned; the hook's own cost (re-arming the timer, a VM exit here) stays outside.
        let carried = hook.injected_span_ns();
        hook.before_phase(phase);
        // One compute window per (virtual) rank: qt is the longest, its sum feeds the mean.
        let windows = spec.virtual_ranks.max(1);
        let (qt, qt_sum, first_t1) = compute(clock, spec, hook, (phase, carried), &mut x);
        barrier(comm, hook);
        let t3 = read_counter_ordered();
        hook.end_phase();
        last_end = t3;
        // Virtual ranks record qt only (no barrier among them): qtb is then qt.
        let qtb = if windows > 1 {
            qt
        } else {
            clock.ticks_to_ns_f64(t3.wrapping_sub(first_t1)) / scale
        };
        if !warm {
            measured += 1;
        }
        // Rank 0 decides on the period, phase count or precision (the paired design at the
        // end of a pair, or one phase after the pair that reached the precision, whose phase
        // is then discarded with its incomplete pair); everyone contributes its progress.
        let root_stop = if root && !warm {
            let elapsed = clock.ticks_to_ns(t3.wrapping_sub(measure_start.unwrap_or(t3)));
            let whole = spec.blocks.is_none() || ends_pair;
            stop_decision(spec.until, elapsed, whole, measured, rec.precise)
        } else {
            None
        };
        let code = stop_code(root_stop);
        let mut maxes = [qt, qtb, hook.progress(), code];
        let mut sum = [qt_sum];
        reduce(comm, hook, &mut maxes, &mut sum);
        // The stop rule of partial replay, as the predictor's: a phase in which some rank's
        // replay reached f had its noise cut short, so it is not recorded and the run ends.
        let cut = !warm && spec.fraction.is_some_and(|f| f.reached(maxes[2]));
        if !warm && root && !cut {
            let s = PhaseSample {
                max_qt_ns: maxes[0],
                max_qtbt_ns: maxes[1],
                mean_qt_ns: sum[0] / (size * windows as f64),
            };
            rec.record(s, jitter, ends_pair);
        }
        phase += 1;
        if cut {
            break (StopReason::Fraction, maxes[2]);
        }
        if maxes[3] > 0.0 {
            break (stop_reason(maxes[3]), maxes[2]);
        }
    };
    let elapsed_ns = measure_start.map_or(0, |s| clock.ticks_to_ns(last_end.wrapping_sub(s)));
    LoopOutcome {
        averages: rec.averages,
        samples: rec.samples,
        warmup_phases: spec.warmup_phases.min(phase),
        elapsed_ns,
        stopped_by,
        sd_max_qt_ns: rec.spread_qt.sd(),
        sd_max_qtbt_ns: rec.spread_qtbt.sd(),
        max_progress,
        checksum: x,
        paired: rec.paired.map(|mut p| {
            p.baseline_sd_max_qt_ns = rec.base_qt.sd();
            p.baseline_sd_max_qtbt_ns = rec.base_qtbt.sd();
            p
        }),
    }
}

/// The compute windows of one phase (one per virtual rank), each timed from the counter less
/// the injections the hook ran since the last (`carried` at the start): (qt, the sum of the
/// windows, the first window's start). Allocates nothing.
fn compute<H: PhaseHook + ?Sized>(
    clock: &Clock,
    spec: &LoopSpec,
    hook: &mut H,
    (phase, mut carried): (u64, u64),
    x: &mut u64,
) -> (f64, f64, u64) {
    let windows = spec.virtual_ranks.max(1);
    let scale = spec.scale;
    let (mut qt, mut qt_sum) = (0.0f64, 0.0f64);
    let mut first_t1 = 0;
    for v in 0..windows {
        if windows > 1 {
            hook.before_window(phase, v);
        }
        let t1 = read_counter_ordered();
        let span = hook.injected_span_ns();
        let t1 = t1.wrapping_sub(clock.ns_to_ticks(span.wrapping_sub(carried)));
        carried = span;
        *x = do_work(spec.iterations, *x);
        if hook.pays_at_calls() {
            // The barrier is the next call: what the compute owes is paid on entering it, and
            // the window holds it (the predictor's compute window).
            hook.settle();
        }
        let t2 = read_counter_ordered();
        if v == 0 {
            first_t1 = t1;
        }
        let w = clock.ticks_to_ns_f64(t2.wrapping_sub(t1)) / scale;
        qt = qt.max(w);
        qt_sum += w;
    }
    (qt, qt_sum, first_t1)
}

/// Rank 0's stop decision after a measured phase: the period elapsed, the phase count reached
/// (both only at the end of a pair in the paired design: `whole`), the precision or verdict
/// reached (`precise`), or the time budget spent.
fn stop_decision(
    until: Until,
    elapsed: u64,
    whole: bool,
    measured: u64,
    precise: bool,
) -> Option<StopReason> {
    match until {
        Until::Elapsed(ns) => (whole && elapsed >= ns).then_some(StopReason::Period),
        Until::Phases(n) => (whole && measured >= n).then_some(StopReason::Phases),
        Until::Precision { max_ns, .. } | Until::Verdict { max_ns } => {
            if precise {
                Some(StopReason::Precision)
            } else {
                (elapsed >= max_ns).then_some(StopReason::MaxTime)
            }
        }
    }
}

/// A stop decision as the number the phase's all-reduce (MAX) carries: 0 goes on.
fn stop_code(stop: Option<StopReason>) -> f64 {
    match stop {
        None => 0.0,
        Some(StopReason::Period) => 1.0,
        Some(StopReason::Phases) => 2.0,
        Some(StopReason::Precision) => 3.0,
        Some(_) => 4.0,
    }
}

/// The stop reason of a non-zero [`stop_code`].
fn stop_reason(code: f64) -> StopReason {
    match code as u8 {
        1 => StopReason::Period,
        2 => StopReason::Phases,
        3 => StopReason::Precision,
        _ => StopReason::MaxTime,
    }
}

/// What rank 0 records of the measured phases: the averages and spreads of the jitter phases,
/// the samples when kept, and in the paired design the pair in progress (committed when it
/// completes), the baseline's spreads and whether the stop rule's precision is reached. Its
/// buffers grow only with kept samples and one pair's phases.
struct Recorder<'a> {
    spec: &'a LoopSpec,
    averages: PhaseAverages,
    samples: Vec<PhaseSample>,
    spread_qt: Moments,
    spread_qtbt: Moments,
    paired: Option<PairedOutcome>,
    pair_buf: Vec<(PhaseSample, bool)>,
    base_qt: Moments,
    base_qtbt: Moments,
    precise: bool,
}

impl<'a> Recorder<'a> {
    fn new(spec: &'a LoopSpec) -> Self {
        Recorder {
            spec,
            averages: PhaseAverages::default(),
            samples: Vec::new(),
            spread_qt: Moments::default(),
            spread_qtbt: Moments::default(),
            paired: spec.blocks.map(|_| PairedOutcome::default()),
            pair_buf: Vec::new(),
            base_qt: Moments::default(),
            base_qtbt: Moments::default(),
            precise: false,
        }
    }

    /// Records one measured phase `s` (a jitter phase unless `jitter` is false), closing the
    /// pair when the phase `ends_pair`.
    fn record(&mut self, s: PhaseSample, jitter: bool, ends_pair: bool) {
        let spec = self.spec;
        match self.paired.as_mut() {
            None => {
                self.averages.add(s);
                self.spread_qt.add(s.max_qt_ns);
                self.spread_qtbt.add(s.max_qtbt_ns);
                if spec.keep_samples {
                    self.samples.push(s);
                }
            }
            Some(p) => {
                self.pair_buf.push((s, jitter));
                if ends_pair {
                    let (mut a, mut b) = (PhaseAverages::default(), PhaseAverages::default());
                    for &(s, j) in &self.pair_buf {
                        if j {
                            b.add(s);
                            self.spread_qt.add(s.max_qt_ns);
                            self.spread_qtbt.add(s.max_qtbt_ns);
                        } else {
                            a.add(s);
                            self.base_qt.add(s.max_qt_ns);
                            self.base_qtbt.add(s.max_qtbt_ns);
                        }
                        if spec.keep_samples {
                            self.samples.push(s);
                            p.sample_jitter.push(j);
                        }
                    }
                    self.averages.merge(&b);
                    p.baseline.merge(&a);
                    p.pairs.push(BlockMeans {
                        base_qt_ns: a.avg_max_qt_ns(),
                        base_qtbt_ns: a.avg_max_qtbt_ns(),
                        jit_qt_ns: b.avg_max_qt_ns(),
                        jit_qtbt_ns: b.avg_max_qtbt_ns(),
                    });
                    self.pair_buf.clear();
                    match spec.until {
                        Until::Precision { half_width_pct, .. } => {
                            self.precise =
                                p.pairs.len() >= MIN_PAIRS && p.half_width_pct() <= half_width_pct;
                        }
                        Until::Verdict { .. } => {
                            self.precise = p.pairs.len() >= MIN_PAIRS && p.decisive();
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_predict::comm::Solo;
    use std::time::Duration;

    struct Recorder {
        phases: Vec<u64>,
        progress: f64,
    }

    impl PhaseHook for Recorder {
        fn before_phase(&mut self, phase: u64) {
            self.phases.push(phase);
            self.progress += 0.1;
        }
        fn progress(&self) -> f64 {
            self.progress
        }
    }

    fn clock() -> Clock {
        Clock::calibrate(Duration::from_millis(200)).unwrap()
    }

    #[test]
    fn phase_count_and_warmup_are_honoured() {
        let c = clock();
        let spec = LoopSpec {
            iterations: 1000,
            warmup_phases: 3,
            until: Until::Phases(7),
            fraction: None,
            scale: 1.0,
            keep_samples: true,
            virtual_ranks: 1,
            blocks: None,
        };
        let out = run_phases(&Solo, &c, &spec, &mut NoJitter);
        assert_eq!(out.averages.phases, 7);
        assert_eq!(out.samples.len(), 7);
        assert_eq!(out.warmup_phases, 3);
        assert_eq!(out.stopped_by, StopReason::Phases);
        for s in &out.samples {
            assert!(s.max_qt_ns > 0.0 && s.max_qtbt_ns >= s.max_qt_ns);
            assert_eq!(s.mean_qt_ns, s.max_qt_ns);
        }
        assert_eq!(out.averages.lost_rel(), 0.0);
        let m = out.averages.avg_max_qt_ns();
        let var: f64 = out
            .samples
            .iter()
            .map(|s| (s.max_qt_ns - m).powi(2))
            .sum::<f64>()
            / 6.0;
        assert!((out.sd_max_qt_ns - var.sqrt()).abs() < 1e-6 * m);
    }

    /// Records the jitter switch of every phase.
    #[derive(Default)]
    struct Switches {
        on: Vec<bool>,
        next: bool,
    }

    impl PhaseHook for Switches {
        fn before_phase(&mut self, _phase: u64) {
            self.on.push(self.next);
        }
        fn progress(&self) -> f64 {
            0.0
        }
        fn set_jitter(&mut self, on: bool) {
            self.next = on;
        }
    }

    #[test]
    fn paired_blocks_alternate_in_a_seeded_order_and_only_whole_pairs_count() {
        let b = Blocks { phases: 3, seed: 7 };
        let mut firsts = Vec::new();
        for pair in 0..40 {
            let on: Vec<bool> = (pair * 6..pair * 6 + 6).map(|m| b.jittered(m)).collect();
            assert!(on[0] == on[1] && on[1] == on[2] && on[3] == on[4] && on[4] == on[5]);
            assert_ne!(on[0], on[3], "pair {pair}: {on:?}");
            assert!(b.ends_pair(pair * 6 + 5) && !b.ends_pair(pair * 6 + 2));
            firsts.push(on[0]);
        }
        // The order is drawn, not fixed: both orders occur.
        assert!(firsts.contains(&true) && firsts.contains(&false));
        let c = clock();
        let spec = LoopSpec {
            iterations: 1000,
            warmup_phases: 2,
            until: Until::Phases(12),
            fraction: None,
            scale: 1.0,
            keep_samples: true,
            virtual_ranks: 1,
            blocks: Some(b),
        };
        let mut h = Switches::default();
        let out = run_phases(&Solo, &c, &spec, &mut h);
        assert_eq!(&h.on[..2], &[true, true], "warm-up runs with jitter");
        let want: Vec<bool> = (0..12).map(|m| b.jittered(m)).collect();
        assert_eq!(&h.on[2..], &want[..]);
        let p = out.paired.as_ref().unwrap();
        assert_eq!(
            (p.pairs.len(), out.averages.phases, p.baseline.phases),
            (2, 6, 6)
        );
        assert_eq!(p.sample_jitter, want);
        assert_eq!(out.samples.len(), 12);
        let mut text = Vec::new();
        out.write_phases_csv(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "phase,max_qt_ns,max_qtbt_ns,mean_qt_ns,jitter");
        assert_eq!(lines.len(), 13, "{text}");
        for (i, (line, s)) in lines[1..].iter().zip(&out.samples).enumerate() {
            let want_line = format!(
                "{i},{:.1},{:.1},{:.1},{}",
                s.max_qt_ns,
                s.max_qtbt_ns,
                s.mean_qt_ns,
                u8::from(want[i])
            );
            assert_eq!(*line, want_line);
        }
        // A precision target met at once stops one phase after the third pair; that phase
        // (an incomplete pair) is discarded.
        let spec = LoopSpec {
            until: Until::Precision {
                half_width_pct: 1e9,
                max_ns: u64::MAX,
            },
            keep_samples: false,
            ..spec
        };
        let mut h = Switches::default();
        let out = run_phases(&Solo, &c, &spec, &mut h);
        assert_eq!(out.stopped_by, StopReason::Precision);
        assert_eq!(h.on.len(), 2 + 3 * 6 + 1);
        assert_eq!(out.paired.unwrap().pairs.len(), MIN_PAIRS);
        // A time budget of 0 stops at the first measured phase, with no pair.
        let spec = LoopSpec {
            until: Until::Precision {
                half_width_pct: 1e-9,
                max_ns: 0,
            },
            ..spec
        };
        let out = run_phases(&Solo, &c, &spec, &mut Switches::default());
        assert_eq!(out.stopped_by, StopReason::MaxTime);
        assert!(out.paired.unwrap().pairs.is_empty());
    }

    #[test]
    fn the_fraction_rule_stops_after_warmup_and_hooks_see_every_phase() {
        let c = clock();
        let spec = LoopSpec {
            iterations: 100,
            warmup_phases: 2,
            until: Until::Phases(1000),
            fraction: Some(Fraction::new(0.55).unwrap()),
            scale: 1.0,
            keep_samples: false,
            virtual_ranks: 1,
            blocks: None,
        };
        let mut h = Recorder {
            phases: Vec::new(),
            progress: 0.0,
        };
        let out = run_phases(&Solo, &c, &spec, &mut h);
        // Progress 0.1 per phase: ≥ 0.55 after the 6th phase, whose noise was cut short: it
        // is not recorded (phases 2–4 are, after two warm-up phases 0 and 1), as in the predictor.
        assert_eq!(h.phases, (0..6).collect::<Vec<_>>());
        assert_eq!(out.stopped_by, StopReason::Fraction);
        assert_eq!(out.averages.phases, 3);
        assert!(out.samples.is_empty());
    }

    #[test]
    fn a_period_ends_the_loop_and_reported_times_are_divided_by_the_scale() {
        // Load-independent checks: the loop stops in the first phase that reaches the period,
        // and Σ qtb · S (the phases' own spans) is at most the elapsed wall time.
        let c = clock();
        for scale in [1.0, 3.0] {
            let period = (20_000_000.0 * scale) as u64;
            let spec = LoopSpec {
                iterations: 20_000,
                warmup_phases: 2,
                until: Until::Elapsed(period),
                fraction: None,
                scale,
                keep_samples: true,
                virtual_ranks: 1,
                blocks: None,
            };
            let out = run_phases(&Solo, &c, &spec, &mut NoJitter);
            assert_eq!(out.stopped_by, StopReason::Period);
            assert!(out.elapsed_ns >= period, "{} < {period}", out.elapsed_ns);
            let spans: f64 = out.samples.iter().map(|s| s.max_qtbt_ns * scale).sum();
            assert!(spans <= out.elapsed_ns as f64 + 1.0, "S = {scale}");
            // A single process spends almost all its time inside phases (the gap between t3
            // and the next t1 is a few instructions), so dividing twice by S would fail here.
            assert!(spans >= 0.5 * out.elapsed_ns as f64, "S = {scale}");
        }
    }
}
