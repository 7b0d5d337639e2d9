//! The Parallel Benchmark kernel (Algorithm 1 of paper 001): compute–barrier phases timed with
//! the cycle counter, reduced per phase to MaxQT, MaxQTBT and the mean qt over ranks.

use jitter_collect::clock::{read_counter_ordered, Clock};

use crate::comm::Collective;
use crate::kernel::do_work;
use crate::metrics::{PhaseAverages, PhaseSample};

/// When the phase loop ends (besides the fraction rule of the emulator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// Rank 0's elapsed time since the end of warm-up reaches this many ns (wall, scaled).
    Elapsed(u64),
    /// This many measured phases were run.
    Phases(u64),
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
    /// Stop as soon as any rank's replay progress reaches this (1.0 and more: never).
    pub fraction: f64,
    /// Scale factor S: reported times are measured times divided by S.
    pub scale: f64,
    /// Keep every measured phase (rank 0) for `--phases-csv`.
    pub keep_samples: bool,
    /// Virtual ranks per process: compute windows run one after another in each phase, each
    /// one rank's (paper 001 §VI future work); 1 is the plain benchmark.
    pub virtual_ranks: u64,
}

/// Hooks into the loop for the emulator: where to resync and how far the replay got.
pub trait PhaseHook {
    /// Called on every rank right after the phase's first barrier, before t1.
    fn before_phase(&mut self, phase: u64);
    /// Share of this rank's stream replayed so far (0 without an emulator).
    fn progress(&self) -> f64;
    /// Called right before virtual rank `v`'s compute window (only with virtual ranks).
    fn before_window(&mut self, _phase: u64, _v: u64) {}
}

/// No emulator: the benchmark without jitter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJitter;

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
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Period => "period",
            StopReason::Phases => "phases",
            StopReason::Fraction => "fraction",
        })
    }
}

/// The outcome of a phase loop. Averages and samples are meaningful on rank 0 only.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOutcome {
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
}

/// Runs Algorithm 1: barrier; t1; do_work; t2; barrier; t3 — then one all-reduce (MAX) of
/// `[qt, qtb, progress, stop]` where only rank 0 contributes its stop decision (the elapsed-time
/// broadcast of line 13, folded into the reduction with the fraction rule), and one reduce (SUM)
/// of qt to rank 0 for the mean. Memory is O(1) unless samples are kept.
pub fn run_phases<C, H>(comm: &C, clock: &Clock, spec: &LoopSpec, hook: &mut H) -> LoopOutcome
where
    C: Collective + ?Sized,
    H: PhaseHook + ?Sized,
{
    let root = comm.rank() == 0;
    let size = comm.size() as f64;
    let scale = spec.scale;
    let mut averages = PhaseAverages::default();
    let mut samples = Vec::new();
    let mut spread_qt = Spread::default();
    let mut spread_qtbt = Spread::default();
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
        comm.barrier();
        hook.before_phase(phase);
        // One compute window per (virtual) rank: qt is the longest, its sum feeds the mean.
        let windows = spec.virtual_ranks.max(1);
        let (mut qt, mut qt_sum) = (0.0f64, 0.0f64);
        let mut first_t1 = 0;
        for v in 0..windows {
            if windows > 1 {
                hook.before_window(phase, v);
            }
            let t1 = read_counter_ordered();
            x = do_work(spec.iterations, x);
            let t2 = read_counter_ordered();
            if v == 0 {
                first_t1 = t1;
            }
            let w = clock.ticks_to_ns_f64(t2.wrapping_sub(t1)) / scale;
            qt = qt.max(w);
            qt_sum += w;
        }
        comm.barrier();
        let t3 = read_counter_ordered();
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
        // Rank 0 decides on the period or phase count; everyone contributes its progress.
        let root_stop = root
            && !warm
            && match spec.until {
                Until::Elapsed(ns) => {
                    let start = measure_start.unwrap_or(t3);
                    clock.ticks_to_ns(t3.wrapping_sub(start)) >= ns
                }
                Until::Phases(n) => measured >= n,
            };
        let mut maxes = [qt, qtb, hook.progress(), if root_stop { 1.0 } else { 0.0 }];
        comm.all_max(&mut maxes);
        let mut sum = [qt_sum];
        comm.sum_to_root(&mut sum);
        if !warm && root {
            let s = PhaseSample {
                max_qt_ns: maxes[0],
                max_qtbt_ns: maxes[1],
                mean_qt_ns: sum[0] / (size * windows as f64),
            };
            averages.add(s);
            spread_qt.add(s.max_qt_ns);
            spread_qtbt.add(s.max_qtbt_ns);
            if spec.keep_samples {
                samples.push(s);
            }
        }
        phase += 1;
        if maxes[3] > 0.0 {
            let reason = match spec.until {
                Until::Elapsed(_) => StopReason::Period,
                Until::Phases(_) => StopReason::Phases,
            };
            break (reason, maxes[2]);
        }
        if maxes[2] >= spec.fraction && !warm {
            break (StopReason::Fraction, maxes[2]);
        }
    };
    let elapsed_ns = measure_start.map_or(0, |s| clock.ticks_to_ns(last_end.wrapping_sub(s)));
    LoopOutcome {
        averages,
        samples,
        warmup_phases: spec.warmup_phases.min(phase),
        elapsed_ns,
        stopped_by,
        sd_max_qt_ns: spread_qt.sd(),
        sd_max_qtbt_ns: spread_qtbt.sd(),
        max_progress,
        checksum: x,
    }
}

/// Running mean and variance (Welford), constant memory.
#[derive(Debug, Clone, Copy, Default)]
struct Spread {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Spread {
    fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    fn sd(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::Solo;
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
            fraction: 1.0,
            scale: 1.0,
            keep_samples: true,
            virtual_ranks: 1,
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

    #[test]
    fn the_fraction_rule_stops_after_warmup_and_hooks_see_every_phase() {
        let c = clock();
        let spec = LoopSpec {
            iterations: 100,
            warmup_phases: 2,
            until: Until::Phases(1000),
            fraction: 0.55,
            scale: 1.0,
            keep_samples: false,
            virtual_ranks: 1,
        };
        let mut h = Recorder {
            phases: Vec::new(),
            progress: 0.0,
        };
        let out = run_phases(&Solo, &c, &spec, &mut h);
        // Progress 0.1 per phase: ≥ 0.55 after the 6th phase.
        assert_eq!(h.phases, (0..6).collect::<Vec<_>>());
        assert_eq!(out.stopped_by, StopReason::Fraction);
        assert_eq!(out.averages.phases, 4);
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
                fraction: 1.0,
                scale,
                keep_samples: true,
                virtual_ranks: 1,
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
