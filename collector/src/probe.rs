//! The probe: Algorithm 2 of paper 001, a tight counter-read loop that reports every gap above a
//! threshold as a detour. Allocation-free, lock-free and system-call-free.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock::read_counter;

/// Default number of back-to-back reads used to find t_min (the paper's N = 2^20).
pub const T_MIN_READS: usize = 1 << 20;

/// Default threshold multiplier k (threshold = k × t_min, as in the paper).
pub const DEFAULT_THRESHOLD_FACTOR: u64 = 10;

/// How often (in loop iterations, a power of two) the loop looks at the stop flag.
const STOP_CHECK_MASK: u64 = (1 << 12) - 1;

/// Shortest delta between two back-to-back counter reads over `reads` reads, in ticks (≥ 1).
pub fn find_t_min(reads: usize) -> u64 {
    let mut t_min = u64::MAX;
    let mut current = read_counter();
    for _ in 0..reads {
        let prev = current;
        current = read_counter();
        let delta = current.wrapping_sub(prev);
        if delta < t_min {
            t_min = delta;
        }
    }
    t_min.max(1)
}

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

/// Runs the detour loop until the counter passes `deadline`, `stop` is set, or `on_detour`
/// breaks. `on_detour(start, end)` receives the two counter readings around each gap above
/// `threshold` ticks; it runs on the hot path and must not allocate, lock or block.
#[inline(never)]
pub fn run<F>(threshold: u64, deadline: u64, stop: &AtomicBool, mut on_detour: F) -> LoopStats
where
    F: FnMut(u64, u64) -> ControlFlow<()>,
{
    let mut stats = LoopStats::default();
    let mut current = read_counter();
    stats.first = current;
    let mut i: u64 = 0;
    loop {
        let prev = current;
        current = read_counter();
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
    use std::time::Duration;

    #[test]
    fn t_min_is_small_and_positive() {
        let t = find_t_min(1 << 16);
        assert!(t >= 1);
        // A counter read costs well under 1 µs on any machine this runs on.
        let c = Clock::calibrate(Duration::from_millis(200)).unwrap();
        assert!(c.ticks_to_ns(t) < 1_000, "t_min = {t} ticks");
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
