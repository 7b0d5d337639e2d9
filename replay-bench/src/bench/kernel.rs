//! The work of one compute phase: the Linear Congruential Generator of paper 001, eq. (1),
//! `x ← (a·x + b) mod p`, and the calibration of its iteration count to a quanta.

use std::hint::black_box;

use jitter_collect::clock::{read_counter_ordered, Clock};

/// Multiplier a (the C library's classic LCG constant).
pub(crate) const LCG_A: u64 = 1_103_515_245;
/// Increment b.
pub(crate) const LCG_B: u64 = 12_345;
/// Modulus p = 2^31.
pub(crate) const LCG_P: u64 = 1 << 31;

/// Runs `iterations` LCG steps from `x` and returns the last value (`do_work` of Algorithm 1).
///
/// Every step goes through [`black_box`], so the compiler can neither fold the loop nor
/// vectorise it: each iteration costs the same dependent multiply-add-modulo chain.
#[inline(never)]
pub(crate) fn do_work(iterations: u64, mut x: u64) -> u64 {
    for _ in 0..iterations {
        x = black_box((LCG_A.wrapping_mul(x).wrapping_add(LCG_B)) % LCG_P);
    }
    x
}

/// How long one LCG iteration takes on this core.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WorkRate {
    /// ns per iteration (the fastest of several repeats: the undisturbed cost).
    pub ns_per_iteration: f64,
}

impl WorkRate {
    /// Measures the cost of one iteration: the fastest of batches of about `window_ns`, timed
    /// back to back for at least `span_ns` (and 50 batches).
    ///
    /// The fastest batch is the undisturbed cost: a detour inflates only the batches it hits. The
    /// span must outlast the platform's longest slow stretch (a virtual CPU can run the loop
    /// 3–15× slower for over 100 ms at a time, so 10 ms of batches inside one give phases of
    /// 0.25 q; the test
    /// `a_slow_stretch_shorter_than_the_span_does_not_set_the_rate` holds the rule).
    pub fn measure(clock: &Clock, window_ns: u64, span_ns: u64) -> WorkRate {
        let mut x = 1u64;
        let rate = Self::fastest(window_ns, span_ns, |n| {
            let t0 = read_counter_ordered();
            x = do_work(n, x);
            clock.ticks_to_ns_f64(read_counter_ordered().wrapping_sub(t0))
        });
        black_box(x);
        rate
    }

    /// The fastest ns per iteration of batches timed by `time(n)` (ns for n iterations): the
    /// batch grows until it lasts `window_ns`, then batches run until `span_ns` have passed.
    fn fastest(window_ns: u64, span_ns: u64, mut time: impl FnMut(u64) -> f64) -> WorkRate {
        const MIN_BATCHES: u32 = 50;
        // Grow the batch until it lasts ~window_ns.
        let mut n: u64 = 1_000;
        let mut spent = 0.0;
        loop {
            let dt = time(n);
            spent += dt;
            if dt >= window_ns as f64 || n >= 1 << 40 {
                break;
            }
            let grow = if dt >= 1.0 {
                (window_ns as f64 / dt).clamp(2.0, 16.0) as u64
            } else {
                16
            };
            n = n.saturating_mul(grow);
        }
        let mut best = f64::INFINITY;
        let mut batches = 0u32;
        while batches < MIN_BATCHES || spent < span_ns as f64 {
            let dt = time(n);
            spent += dt;
            batches += 1;
            best = best.min(dt / n as f64);
        }
        WorkRate {
            ns_per_iteration: best.max(1e-3),
        }
    }

    /// Iterations that make one phase last `quanta_ns` at this rate (at least 1).
    pub(crate) fn iterations_for(&self, quanta_ns: f64) -> u64 {
        ((quanta_ns / self.ns_per_iteration).round() as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcg_follows_the_recurrence() {
        let x1 = (LCG_A * 7 + LCG_B) % LCG_P;
        let x2 = (LCG_A.wrapping_mul(x1).wrapping_add(LCG_B)) % LCG_P;
        assert_eq!(do_work(1, 7), x1);
        assert_eq!(do_work(2, 7), x2);
        assert_eq!(do_work(0, 7), 7);
        assert!(do_work(1000, 7) < LCG_P);
    }

    /// A simulated core at 2 ns per iteration that runs 4× slower for its first 150 ms.
    fn slow_then_fast(now: &mut f64, n: u64) -> f64 {
        let per = if *now < 150e6 { 8.0 } else { 2.0 };
        *now += per * n as f64;
        per * n as f64
    }

    #[test]
    fn a_slow_stretch_shorter_than_the_span_does_not_set_the_rate() {
        let mut now = 0.0;
        let rate = WorkRate::fastest(200_000, 400_000_000, |n| slow_then_fast(&mut now, n));
        assert_eq!(rate.ns_per_iteration, 2.0);
        // 50 batches of 200 µs (a span of 0) see only the slow core.
        now = 0.0;
        let short = WorkRate::fastest(200_000, 0, |n| slow_then_fast(&mut now, n));
        assert_eq!(short.ns_per_iteration, 8.0);
    }

    #[test]
    fn iteration_counts_follow_the_rate() {
        let r = WorkRate {
            ns_per_iteration: 4.0,
        };
        assert_eq!(r.iterations_for(1_000_000.0), 250_000);
        assert_eq!(r.iterations_for(0.0), 1);
    }
}
