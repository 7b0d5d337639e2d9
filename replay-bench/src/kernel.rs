//! The work of one compute phase: the Linear Congruential Generator of paper 001, eq. (1),
//! `x ← (a·x + b) mod p`, and the calibration of its iteration count to a quanta.

use std::hint::black_box;

use jitter_collect::clock::{read_counter_ordered, Clock};

/// Multiplier a (the C library's classic LCG constant).
pub const LCG_A: u64 = 1_103_515_245;
/// Increment b.
pub const LCG_B: u64 = 12_345;
/// Modulus p = 2^31.
pub const LCG_P: u64 = 1 << 31;

/// Runs `iterations` LCG steps from `x` and returns the last value (`do_work` of Algorithm 1).
///
/// Every step goes through [`black_box`], so the compiler can neither fold the loop nor
/// vectorise it: each iteration costs the same dependent multiply-add-modulo chain.
#[inline(never)]
pub fn do_work(iterations: u64, mut x: u64) -> u64 {
    for _ in 0..iterations {
        x = black_box((LCG_A.wrapping_mul(x).wrapping_add(LCG_B)) % LCG_P);
    }
    x
}

/// How long one LCG iteration takes on this core.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkRate {
    /// ns per iteration (the fastest of several repeats: the undisturbed cost).
    pub ns_per_iteration: f64,
}

impl WorkRate {
    /// Measures the cost of one iteration: batches of at least `window_ns` are timed `repeats`
    /// times and the fastest batch is kept, so a detour during calibration does not inflate it
    /// (short windows and many repeats make an undisturbed batch likely on a noisy machine).
    pub fn measure(clock: &Clock, window_ns: u64, repeats: u32) -> WorkRate {
        // Grow the batch until it lasts ~window_ns.
        let mut n: u64 = 1_000;
        let mut x = 1u64;
        loop {
            let t0 = read_counter_ordered();
            x = do_work(n, x);
            let dt = clock.ticks_to_ns(read_counter_ordered().wrapping_sub(t0));
            if dt >= window_ns || n >= 1 << 40 {
                break;
            }
            let grow = window_ns.checked_div(dt).map_or(16, |g| g.clamp(2, 16));
            n = n.saturating_mul(grow);
        }
        let mut best = f64::INFINITY;
        for _ in 0..repeats.max(1) {
            let t0 = read_counter_ordered();
            x = do_work(n, x);
            let dt = clock.ticks_to_ns_f64(read_counter_ordered().wrapping_sub(t0));
            best = best.min(dt / n as f64);
        }
        black_box(x);
        WorkRate {
            ns_per_iteration: best.max(1e-3),
        }
    }

    /// Iterations that make one phase last `quanta_ns` at this rate (at least 1).
    pub fn iterations_for(&self, quanta_ns: f64) -> u64 {
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

    #[test]
    fn iteration_counts_follow_the_rate() {
        let r = WorkRate {
            ns_per_iteration: 4.0,
        };
        assert_eq!(r.iterations_for(1_000_000.0), 250_000);
        assert_eq!(r.iterations_for(0.0), 1);
    }
}
