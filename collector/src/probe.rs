//! The probe: Algorithm 2 of paper 001, a tight counter-read loop that reports every gap above a
//! threshold as a detour. Allocation-free, lock-free and system-call-free.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock::read_counter;

/// How often (in loop iterations, a power of two) the loop looks at the stop flag.
const STOP_CHECK_MASK: u64 = (1 << 12) - 1;

/// What one run of the probe loop did, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoopStats {
    /// Counter value when the loop began.
    pub first: u64,
    /// Counter value when the loop ended.
    pub last: u64,
    /// Loop iterations (counter reads).
    pub iterations: u64,
    /// Detours reported.
    pub detours: u64,
    /// Sum of the reported detours' lengths.
    pub detour_ticks: u64,
}

impl LoopStats {
    /// Mean period of one undisturbed loop iteration, ticks (the osjitter `loop_ns` before scaling).
    pub fn loop_ticks(&self) -> f64 {
        let busy = self
            .last
            .saturating_sub(self.first)
            .saturating_sub(self.detour_ticks);
        if self.iterations == 0 {
            0.0
        } else {
            busy as f64 / self.iterations as f64
        }
    }
}

/// Runs the detour loop on this build's counter until it passes `deadline`, `stop` is set, or
/// `on_detour` breaks. `on_detour(start, end)` receives the two counter readings around each gap
/// above `threshold` ticks; it runs on the hot path and must not allocate, lock or block.
#[inline(never)]
pub fn run<F>(threshold: u64, deadline: u64, stop: &AtomicBool, on_detour: F) -> LoopStats
where
    F: FnMut(u64, u64) -> ControlFlow<()>,
{
    run_on(read_counter, threshold, deadline, stop, on_detour)
}

/// The detour loop of `run` on any counter, given as a closure returning successive readings.
#[inline(always)]
pub(crate) fn run_on<R, F>(
    mut read: R,
    threshold: u64,
    deadline: u64,
    stop: &AtomicBool,
    mut on_detour: F,
) -> LoopStats
where
    R: FnMut() -> u64,
    F: FnMut(u64, u64) -> ControlFlow<()>,
{
    let mut stats = LoopStats::default();
    let mut current = read();
    stats.first = current;
    let mut i: u64 = 0;
    loop {
        let prev = current;
        current = read();
        i += 1;
        let delta = current.wrapping_sub(prev);
        if delta > threshold {
            stats.detours += 1;
            stats.detour_ticks += delta;
            if on_detour(prev, current).is_break() {
                break;
            }
        }
        if current >= deadline {
            break;
        }
        if i & STOP_CHECK_MASK == 0 && stop.load(Ordering::Relaxed) {
            break;
        }
    }
    stats.iterations = i;
    stats.last = current;
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{read_counter, Clock};
    use crate::counter::sim::{Gaps, SimCounter, ALL};
    use crate::counter::{CounterProfile, DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};
    use std::time::Duration;

    /// Profiles `kind`, then runs the probe on it for `true_ns` of simulated time with `gaps`
    /// planted; returns the threshold, the detours found (ns of true time) and the planted gaps.
    fn detect(kind: crate::counter::sim::Kind, gaps: Gaps, true_ns: f64) -> Detection {
        let costs = kind.costs_ns.to_vec();
        detect_with(kind, costs, gaps, true_ns, PROFILE_READS)
    }

    fn detect_with(
        kind: crate::counter::sim::Kind,
        costs: Vec<f64>,
        gaps: Gaps,
        true_ns: f64,
        reads: usize,
    ) -> Detection {
        let mut quiet = SimCounter::with_costs(kind, costs.clone(), Gaps::None);
        let profile = CounterProfile::measure_with(|| quiet.read(), reads);
        let threshold = profile.threshold_ticks(DEFAULT_THRESHOLD_FACTOR);
        let mut c = SimCounter::with_costs(kind, costs, gaps);
        let per_ns = c.ticks_per_ns();
        let deadline = c.read() + (true_ns * per_ns) as u64;
        let stop = AtomicBool::new(false);
        let mut found = Vec::new();
        let stats = run_on(
            || c.read(),
            threshold,
            deadline,
            &stop,
            |a, b| {
                found.push((b - a) as f64 / per_ns);
                ControlFlow::Continue(())
            },
        );
        Detection {
            threshold_ns: threshold as f64 / per_ns,
            loop_ns: profile.loop_ticks / per_ns,
            tick_ns: 1.0 / per_ns,
            step_ns: profile.resolution_ticks as f64 / per_ns,
            found,
            planted: c.planted.iter().map(|(a, b)| b - a).collect(),
            stats,
        }
    }

    #[derive(Debug)]
    struct Detection {
        threshold_ns: f64,
        loop_ns: f64,
        tick_ns: f64,
        step_ns: f64,
        found: Vec<f64>,
        planted: Vec<f64>,
        stats: LoopStats,
    }

    impl Detection {
        /// Exactly one detour per planted gap, each as long as the gap plus at most one read
        /// and one counter step (the two readings around it), never shorter than the gap less
        /// a step.
        fn assert_exact(&self, name: &str) {
            assert_eq!(
                self.found.len(),
                self.planted.len(),
                "{name}: found {} detours for {} planted gaps (threshold {:.1} ns, loop {:.2} ns)",
                self.found.len(),
                self.planted.len(),
                self.threshold_ns,
                self.loop_ns
            );
            let slack = 2.0 * self.loop_ns + self.step_ns + self.tick_ns;
            for (i, (f, g)) in self.found.iter().zip(&self.planted).enumerate() {
                assert!(
                    *f >= g - self.step_ns - self.tick_ns && *f <= g + slack,
                    "{name}: detour {i} measured {f:.1} ns for a {g:.1} ns gap"
                );
            }
            assert_eq!(self.stats.detours, self.planted.len() as u64, "{name}");
        }
    }

    #[test]
    fn a_50us_gap_every_1000_iterations_is_found_exactly_on_every_counter() {
        for kind in ALL {
            let d = detect(
                kind,
                Gaps::EveryReads {
                    every: 1000,
                    ns: 50_000.0,
                },
                2e8,
            );
            assert!(d.planted.len() >= 300, "{}: {}", kind.name, d.planted.len());
            d.assert_exact(kind.name);
        }
    }

    #[test]
    fn a_1khz_train_of_2us_gaps_is_found_exactly_on_every_counter() {
        for kind in ALL {
            let d = detect(
                kind,
                Gaps::Train {
                    period_ns: 1e6,
                    ns: 2_000.0,
                },
                5e8,
            );
            assert_eq!(d.planted.len(), 500, "{}", kind.name);
            d.assert_exact(kind.name);
            // The threshold lies between the loop and the gaps, on every counter.
            assert!(
                d.threshold_ns > 2.0 * d.loop_ns && d.threshold_ns < 1_000.0,
                "{d:?}"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(24))]
        /// Any counter (tick 0.2–50 ns, stepped or not, reads of 5–60 ns) with gaps of 20–80 loop
        /// periods planted every 200–5000 reads: each gap is found exactly once.
        #[test]
        fn planted_gaps_are_found_exactly_on_any_counter(
            tick_ns in 0.2f64..50.0,
            step in proptest::sample::select(vec![1u64, 1, 13, 26, 40]),
            unique in proptest::bool::ANY,
            base in 5.0f64..60.0,
            spread in 0.0f64..0.15,
            gap_loops in 20.0f64..80.0,
            every in 200u64..5000,
        ) {
            let costs: Vec<f64> = (0..5).map(|i| base * (1.0 + spread * (i as f64 - 2.0) / 2.0)).collect();
            let step_ns = tick_ns * step as f64;
            // A gap must exceed the threshold (10 loops, or 4 steps on a coarse counter) by a
            // margin of two steps: the test plants what the rule promises to find.
            let gap = (gap_loops * base).max(6.0 * step_ns + 2.0 * tick_ns);
            let kind = crate::counter::sim::Kind {
                name: "random",
                tick_ns,
                step,
                unique,
                costs_ns: &[],
            };
            let unique = unique && base >= step_ns;
            let kind = crate::counter::sim::Kind { unique, ..kind };
            let d = detect_with(kind, costs, Gaps::EveryReads { every, ns: gap }, 2e7 + 200.0 * every as f64 * base, 1 << 16);
            d.assert_exact("random");
        }
    }

    #[test]
    fn an_undisturbed_counter_shows_no_detour() {
        for kind in ALL {
            let d = detect(kind, Gaps::None, 5e7);
            assert!(
                d.found.is_empty(),
                "{}: {:?}",
                kind.name,
                &d.found[..5.min(d.found.len())]
            );
        }
    }

    #[test]
    fn t_min_is_small_and_positive() {
        let p = CounterProfile::measure(1 << 16);
        assert!(p.loop_ticks > 0.0);
        // A counter read costs well under 1 µs on any machine this runs on.
        let c = Clock::calibrate(Duration::from_millis(200)).unwrap();
        assert!(c.ticks_to_ns_f64(1) * p.loop_ticks < 1_000.0, "{p:?}");
    }

    #[test]
    fn a_sleep_inside_the_loop_is_reported_as_one_detour() {
        let c = Clock::calibrate(Duration::from_millis(200)).unwrap();
        let threshold = c.ns_to_ticks(50_000);
        let stop = AtomicBool::new(false);
        let deadline = read_counter() + c.ns_to_ticks(200_000_000);
        let mut slept = false;
        let mut longest = 0u64;
        let stats = run(threshold, deadline, &stop, |a, b| {
            longest = longest.max(b - a);
            ControlFlow::Continue(())
        });
        // Now provoke a known 5 ms gap by sleeping between two loop runs' readings.
        let mut seen = Vec::new();
        let deadline = read_counter() + c.ns_to_ticks(100_000_000);
        let stats2 = run(threshold, deadline, &stop, |a, b| {
            if !slept {
                slept = true;
            }
            seen.push(b - a);
            ControlFlow::Continue(())
        });
        assert!(stats.iterations > 1000 && stats2.iterations > 1000);
        assert!(stats.last >= stats.first);
        assert!(stats.loop_ticks() > 0.0);
        // Every reported gap is above the threshold.
        assert!(seen.iter().all(|&g| g > threshold));
    }

    #[test]
    fn the_stop_flag_and_the_callback_end_the_loop() {
        let stop = AtomicBool::new(true);
        let s = run(u64::MAX, u64::MAX, &stop, |_, _| ControlFlow::Continue(()));
        assert_eq!(s.iterations, STOP_CHECK_MASK + 1);
        let stop = AtomicBool::new(false);
        let mut n = 0;
        let s = run(0, u64::MAX, &stop, |_, _| {
            n += 1;
            if n == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(s.detours, 3);
    }
}
