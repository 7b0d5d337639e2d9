//! What the probe loop can see of its counter: the resolution (the smallest step the counter is
//! seen to advance by), the undisturbed loop period t_min, and the detour threshold they imply.
//!
//! The statistics take the counter as a closure, so simulated counters (stepped, coarse, fine)
//! drive them in tests exactly as `read_counter` drives them on the machine.

use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;

use jitter_trace::summary::mean;
use serde::Serialize;

use crate::clock::{read_counter, Clock};
use crate::probe;

/// Default number of back-to-back reads used to profile the counter (≥ 10⁶).
pub const PROFILE_READS: usize = 1 << 20;

/// Default threshold multiplier k (threshold = k × t_min, as in paper 001).
pub const DEFAULT_THRESHOLD_FACTOR: u64 = 10;

/// The loop period leaves out back-to-back differences longer than this many times their 90th
/// percentile (or the resolution, if larger): those are disturbances, not the loop.
pub(crate) const LOOP_TRIM_FACTOR: u64 = 4;

/// The threshold is never below this many resolution steps: a quantised reading is off by up to
/// one step at each end, so a shorter gap cannot be told from an undisturbed iteration.
pub(crate) const RESOLUTION_FLOOR_STEPS: u64 = 4;

/// Differences below this many ticks are histogrammed exactly.
const HISTOGRAM_TICKS: usize = 1 << 14;

/// The counter as a tight read loop sees it on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CounterProfile {
    /// Smallest step the counter is seen to advance by, ticks (≥ 1).
    pub resolution_ticks: u64,
    /// Undisturbed loop period t_min: the probe loop's mean iteration with differences beyond
    /// the trim cut (see `LOOP_TRIM_FACTOR`) left out, ticks (below 1 on a coarse counter).
    pub loop_ticks: f64,
    /// Shortest non-zero back-to-back difference seen, ticks (reported, never used as t_min).
    pub min_step_ticks: u64,
    /// Share of back-to-back reads that returned the same value.
    pub zero_share: f64,
    /// Reads the profile is made of.
    pub reads: usize,
    /// Differences too long for the histogram (detours, mostly).
    pub beyond_histogram: u64,
}

impl CounterProfile {
    /// Profiles this build's counter (`read_counter`) on the calling thread over `reads` reads.
    pub fn measure(reads: usize) -> Self {
        Self::measure_with(read_counter, reads)
    }

    /// Profiles any counter, given as a closure returning successive readings.
    #[inline(never)]
    pub(crate) fn measure_with(mut read: impl FnMut() -> u64, reads: usize) -> Self {
        let reads = reads.max(2);
        let mut histogram = vec![0u64; HISTOGRAM_TICKS];
        let mut beyond = 0u64;
        let mut current = read();
        let first = current;
        for _ in 0..reads {
            let prev = current;
            current = read();
            match histogram.get_mut(current.wrapping_sub(prev) as usize) {
                Some(slot) => *slot += 1,
                None => beyond += 1,
            }
        }
        let min_step_ticks = histogram[1..]
            .iter()
            .position(|&c| c > 0)
            .map_or(0, |i| i as u64 + 1);
        let resolution_ticks = resolution_of(&histogram);
        let zero_share = histogram[0] as f64 / reads as f64;
        // The histogram loop above is slower than the probe's own loop (it writes memory every
        // read), so the loop period is measured on the probe loop itself: its mean undisturbed
        // iteration, with every difference above the trim cut left out as a disturbance.
        let cut = trim_cut(&histogram, resolution_ticks)
            .unwrap_or_else(|| current.wrapping_sub(first) / reads as u64 * LOOP_TRIM_FACTOR);
        let mean = current.wrapping_sub(first) as f64 / reads as f64;
        let start = read();
        let deadline = start.saturating_add((mean * reads as f64) as u64);
        let stop = AtomicBool::new(false);
        let stats = probe::run_on(&mut read, cut.max(1), deadline, &stop, |_, _| {
            ControlFlow::Continue(())
        });
        CounterProfile {
            resolution_ticks,
            loop_ticks: stats.loop_ticks(),
            min_step_ticks,
            zero_share,
            reads,
            beyond_histogram: beyond,
        }
    }

    /// t_min in ticks: the undisturbed loop period (not the shortest difference).
    pub fn t_min_ticks(&self) -> f64 {
        self.loop_ticks
    }

    /// Lowest threshold this counter supports, ticks: `RESOLUTION_FLOOR_STEPS` steps.
    pub(crate) fn floor_ticks(&self) -> u64 {
        RESOLUTION_FLOOR_STEPS.saturating_mul(self.resolution_ticks.max(1))
    }

    /// Detour threshold for factor `k`, ticks: max(⌈k · t_min⌉, the resolution floor).
    pub fn threshold_ticks(&self, k: u64) -> u64 {
        let by_loop = (k as f64 * self.loop_ticks).ceil();
        let by_loop = if by_loop >= u64::MAX as f64 {
            u64::MAX
        } else {
            by_loop as u64
        };
        by_loop.max(self.floor_ticks()).max(1)
    }

    /// Why an absolute threshold of `ticks` cannot tell detours from loop iterations, if so.
    pub(crate) fn refuse_threshold(&self, ticks: u64, clock: &Clock) -> Option<String> {
        let loop_bound = (2.0 * self.loop_ticks).ceil() as u64;
        let lowest = self.floor_ticks().max(loop_bound);
        (ticks < lowest).then(|| {
            format!(
                "the threshold {:.1} ns is below what this counter can resolve ({:.1} ns: \
                 loop period {:.1} ns, resolution {:.1} ns); every loop iteration could count \
                 as a detour — use at least {:.0} ns",
                clock.ticks_to_ns_f64(ticks),
                clock.ticks_to_ns_f64(lowest),
                clock.ticks_to_ns_f64(1) * self.loop_ticks,
                clock.ticks_to_ns_f64(self.resolution_ticks),
                clock.ticks_to_ns_f64(lowest).ceil()
            )
        })
    }

    /// The profile of several CPUs: the median loop period and the coarsest resolution.
    pub fn combine(profiles: &[CounterProfile]) -> Option<CounterProfile> {
        let mut loops: Vec<f64> = profiles.iter().map(|p| p.loop_ticks).collect();
        loops.sort_by(f64::total_cmp);
        let first = profiles.first()?;
        Some(CounterProfile {
            resolution_ticks: profiles.iter().map(|p| p.resolution_ticks).max()?,
            loop_ticks: loops[(loops.len() - 1) / 2],
            min_step_ticks: profiles.iter().map(|p| p.min_step_ticks).min()?,
            zero_share: mean(&profiles.iter().map(|p| p.zero_share).collect::<Vec<_>>())?,
            reads: first.reads,
            beyond_histogram: profiles.iter().map(|p| p.beyond_histogram).sum(),
        })
    }
}

/// The step a counter advances by: the greatest common divisor of the common non-zero
/// differences, those seen at least a tenth as often as the most common one. On a counter that
/// ticks faster than the loop this is the tick (neighbouring differences are both common); on a
/// stepped counter it is the step (its odd one-tick readings are rare). A counter whose every
/// read advances by the same amount shows that amount: finer steps cannot be seen.
fn resolution_of(histogram: &[u64]) -> u64 {
    let mode = histogram.iter().skip(1).copied().max().unwrap_or(0);
    if mode == 0 {
        return 1;
    }
    histogram
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, &c)| c * 10 >= mode)
        .fold(0, |g, (d, _)| gcd(g, d as u64))
        .max(1)
}

/// `LOOP_TRIM_FACTOR` × max(90th percentile of the differences, resolution); `None` when the
/// 90th percentile lies beyond the histogram.
fn trim_cut(histogram: &[u64], resolution: u64) -> Option<u64> {
    let total: u64 = histogram.iter().sum();
    let mut seen = 0;
    let p90 = histogram.iter().position(|&c| {
        seen += c;
        seen * 10 >= total * 9
    })? as u64;
    Some(LOOP_TRIM_FACTOR * p90.max(resolution))
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
pub(crate) mod sim {
    //! Simulated counters: a true clock in ns advanced by each read's cost (and by planted
    //! interruptions), read through a counter of a given tick length and visible step.

    /// An interruption plan for a simulated counter.
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Gaps {
        /// No interruptions.
        None,
        /// A gap of `ns` before every `every`-th read.
        EveryReads { every: u64, ns: f64 },
        /// A gap of `ns` at the first read after each multiple of `period_ns` of true time.
        Train { period_ns: f64, ns: f64 },
    }

    /// One kind of counter hardware.
    #[derive(Debug, Clone, Copy)]
    pub struct Kind {
        /// Name for messages.
        pub name: &'static str,
        /// Length of one tick, ns.
        pub tick_ns: f64,
        /// Visible step, ticks (26 on AMD Zen's TSC, 1 elsewhere).
        pub step: u64,
        /// Readings never repeat: one that falls in the step already read returns the last
        /// reading + 1 (AMD Zen: the odd 1-tick difference, then a 25-tick one).
        pub unique: bool,
        /// Cost of each read, ns, cycled through (a loop's iterations differ a little).
        pub costs_ns: &'static [f64],
    }

    /// Intel: a 2.6 GHz TSC advancing every tick, ~9 ns reads.
    pub(crate) const INTEL: Kind = Kind {
        name: "intel-tsc",
        tick_ns: 1.0 / 2.6,
        step: 1,
        unique: false,
        costs_ns: &[8.4, 9.1, 8.8, 9.6, 8.5],
    };
    /// AMD Zen: 2.6 GHz TSC read in 26-tick steps, never the same value twice.
    pub(crate) const AMD: Kind = Kind {
        name: "amd-zen-tsc",
        tick_ns: 1.0 / 2.6,
        step: 26,
        unique: true,
        costs_ns: &[9.2, 10.9, 11.3, 10.7],
    };
    /// aarch64 cntvct_el0 at 1 GHz.
    pub(crate) const ARM_1GHZ: Kind = Kind {
        name: "aarch64-1ghz",
        tick_ns: 1.0,
        step: 1,
        unique: false,
        costs_ns: &[7.2, 7.5, 7.1, 7.6],
    };
    /// aarch64 cntvct_el0 at 25 MHz (40 ns ticks: most differences are 0).
    pub(crate) const ARM_25MHZ: Kind = Kind {
        name: "aarch64-25mhz",
        tick_ns: 40.0,
        step: 1,
        unique: false,
        costs_ns: &[9.7, 10.4, 10.1, 9.9],
    };
    /// clock_gettime(CLOCK_MONOTONIC_RAW) through the vDSO: ns, ~25 ns a read.
    pub(crate) const CLOCK_GETTIME: Kind = Kind {
        name: "clock_gettime",
        tick_ns: 1.0,
        step: 1,
        unique: false,
        costs_ns: &[24.0, 26.5, 25.2, 23.7, 27.1],
    };

    /// Every kind above.
    pub const ALL: [Kind; 5] = [INTEL, AMD, ARM_1GHZ, ARM_25MHZ, CLOCK_GETTIME];

    /// A simulated counter with its interruption log.
    #[derive(Debug, Clone)]
    pub(crate) struct SimCounter {
        kind: Kind,
        costs: Vec<f64>,
        gaps: Gaps,
        t_ns: f64,
        reads: u64,
        next_train_ns: f64,
        last: u64,
        /// (true time before, true time after) of each planted interruption.
        pub planted: Vec<(f64, f64)>,
    }

    impl SimCounter {
        /// A counter of `kind` with `gaps` planted, starting at true time 1 ms.
        pub fn new(kind: Kind, gaps: Gaps) -> Self {
            let next_train_ns = match gaps {
                Gaps::Train { period_ns, .. } => 1e6 + period_ns,
                _ => f64::INFINITY,
            };
            SimCounter {
                kind,
                costs: kind.costs_ns.to_vec(),
                gaps,
                t_ns: 1e6,
                reads: 0,
                next_train_ns,
                last: 0,
                planted: Vec::new(),
            }
        }

        /// A counter like `kind` but with its own read costs, ns (cycled through).
        pub(crate) fn with_costs(kind: Kind, costs: Vec<f64>, gaps: Gaps) -> Self {
            SimCounter {
                costs,
                ..SimCounter::new(kind, gaps)
            }
        }

        /// The counter's ticks per ns.
        pub(crate) fn ticks_per_ns(&self) -> f64 {
            1.0 / self.kind.tick_ns
        }

        /// The mean read cost, ns.
        pub(crate) fn mean_cost_ns(&self) -> f64 {
            jitter_trace::summary::mean(&self.costs).unwrap_or(f64::NAN)
        }

        /// One reading.
        pub fn read(&mut self) -> u64 {
            self.reads += 1;
            self.t_ns += self.costs[(self.reads % self.costs.len() as u64) as usize];
            let gap = match self.gaps {
                Gaps::EveryReads { every, ns } if self.reads % every == 0 => Some(ns),
                Gaps::Train { period_ns, ns } if self.t_ns >= self.next_train_ns => {
                    self.next_train_ns += period_ns;
                    Some(ns)
                }
                _ => None,
            };
            if let Some(ns) = gap {
                self.planted.push((self.t_ns, self.t_ns + ns));
                self.t_ns += ns;
            }
            let ticks = (self.t_ns / self.kind.tick_ns).floor() as u64;
            let v = ticks / self.kind.step * self.kind.step;
            self.last = if self.kind.unique && v <= self.last {
                self.last + 1
            } else {
                self.last.max(v)
            };
            self.last
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sim::{Gaps, SimCounter, ALL, AMD, ARM_25MHZ, CLOCK_GETTIME, INTEL};
    use super::*;

    fn profile(kind: sim::Kind) -> (CounterProfile, SimCounter) {
        let mut c = SimCounter::new(kind, Gaps::None);
        let p = CounterProfile::measure_with(|| c.read(), PROFILE_READS);
        (p, c)
    }

    #[test]
    fn the_loop_period_is_the_mean_read_cost_on_every_counter() {
        for kind in ALL {
            let (p, c) = profile(kind);
            let expect = c.mean_cost_ns() * c.ticks_per_ns();
            assert!(
                (p.loop_ticks - expect).abs() <= 0.01 * expect,
                "{}: loop {} ticks, expected {expect}",
                kind.name,
                p.loop_ticks
            );
        }
    }

    #[test]
    fn the_resolution_is_the_counter_step_not_its_odd_readings() {
        let expect = [
            (INTEL.name, 1),
            (AMD.name, 26),
            (sim::ARM_1GHZ.name, 1),
            (ARM_25MHZ.name, 1),
            (CLOCK_GETTIME.name, 1),
        ];
        for (kind, (name, res)) in ALL.into_iter().zip(expect) {
            assert_eq!(kind.name, name);
            let (p, _) = profile(kind);
            assert_eq!(p.resolution_ticks, res, "{name}: {p:?}");
        }
        // The stepped counter's odd readings are visible, and they are what fooled the minimum.
        let (amd, _) = profile(AMD);
        assert_eq!(amd.min_step_ticks, 1);
        // Most back-to-back reads of the coarse counter see no change at all.
        let (arm, _) = profile(ARM_25MHZ);
        assert!(arm.zero_share > 0.7, "{arm:?}");
    }

    #[test]
    fn thresholds_are_ten_loop_periods_or_four_steps() {
        // 2.6 GHz TSC, 10.525 ns loop: 10 × 27.365 ticks → 274 ticks (≈ 105 ns).
        let (amd, _) = profile(AMD);
        assert_eq!(
            amd.threshold_ticks(10),
            (10.0 * amd.loop_ticks).ceil() as u64
        );
        assert!((272..=276).contains(&amd.threshold_ticks(10)), "{amd:?}");
        // 25 MHz: 10 × 0.25 ticks = 2.5 ticks is below four 40 ns steps: the floor rules.
        let (arm, _) = profile(ARM_25MHZ);
        assert_eq!(arm.threshold_ticks(10), 4);
        // An absolute threshold below the floor or two loop periods is refused.
        let clock = Clock::from_khz(25_000, crate::clock::FrequencySource::Given).unwrap();
        assert!(arm.refuse_threshold(3, &clock).is_some());
        assert!(arm.refuse_threshold(4, &clock).is_none());
        let tsc = Clock::from_khz(2_600_000, crate::clock::FrequencySource::Given).unwrap();
        assert!(amd
            .refuse_threshold(3, &tsc)
            .unwrap()
            .contains("below what this counter can resolve"));
        assert!(amd.refuse_threshold(260, &tsc).is_none());
    }

    #[test]
    fn the_minimum_difference_would_make_every_iteration_a_detour_on_a_stepped_counter() {
        // The rule this module replaces: t_min = the shortest back-to-back difference.
        let (amd, _) = profile(AMD);
        let old_threshold = 10 * amd.min_step_ticks;
        assert!(
            (old_threshold as f64) < amd.loop_ticks,
            "old threshold {old_threshold} ticks vs loop {} ticks",
            amd.loop_ticks
        );
    }

    #[test]
    fn combining_cpus_takes_the_median_loop_and_the_coarsest_step() {
        let (a, _) = profile(INTEL);
        let (b, _) = profile(AMD);
        let c = CounterProfile::combine(&[a, b, b]).unwrap();
        assert_eq!(c.resolution_ticks, 26);
        assert_eq!(c.loop_ticks, b.loop_ticks);
        assert!(CounterProfile::combine(&[]).is_none());
    }

    #[test]
    fn the_real_counter_profiles_sanely() {
        let p = CounterProfile::measure(1 << 16);
        assert!(p.loop_ticks > 0.0 && p.resolution_ticks >= 1, "{p:?}");
        assert!(p.threshold_ticks(10) >= p.floor_ticks());
    }
}
