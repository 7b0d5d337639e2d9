//! The replay machine's own noise, measured with the collector's probe loop before a run: an
//! emulation on a noisy platform overstates slowdown, so every report states it.

use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;

use jitter_collect::clock::{read_counter, Clock};
use jitter_collect::counter::{CounterProfile, DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};

/// What the probe saw on this rank.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct PlatformNoise {
    /// Σ detour time / probe time.
    pub noise_ratio: f64,
    /// Detours seen.
    pub detours: u64,
    /// Longest detour, ns.
    pub max_ns: u64,
    /// Probe time, ns.
    pub duration_ns: u64,
}

/// Runs the probe loop (the collector's default threshold, Algorithm 2) for `duration_ns` on
/// this core.
pub fn measure(clock: &Clock, duration_ns: u64) -> PlatformNoise {
    if duration_ns == 0 {
        return PlatformNoise::default();
    }
    let threshold =
        CounterProfile::measure(PROFILE_READS).threshold_ticks(DEFAULT_THRESHOLD_FACTOR);
    let stop = AtomicBool::new(false);
    let mut max_ticks = 0u64;
    let deadline = read_counter() + clock.ns_to_ticks(duration_ns);
    let stats = jitter_collect::probe::run(threshold, deadline, &stop, |a, b| {
        max_ticks = max_ticks.max(b.wrapping_sub(a));
        ControlFlow::Continue(())
    });
    let total = stats.last.wrapping_sub(stats.first).max(1);
    PlatformNoise {
        noise_ratio: stats.detour_ticks as f64 / total as f64,
        detours: stats.detours,
        max_ns: clock.ticks_to_ns(max_ticks),
        duration_ns: clock.ticks_to_ns(total),
    }
}

/// The warning for a platform whose noise exceeds 10 % of the trace's noise ratio, if it does.
pub fn warning(rank: usize, platform: f64, trace: f64) -> Option<String> {
    (trace > 0.0 && platform > 0.1 * trace).then(|| {
        format!(
            "rank {rank}: platform noise {:.3} % is {:.0} % of the trace's {:.3} %: \
             the emulation overstates slowdown",
            platform * 100.0,
            platform / trace * 100.0,
            trace * 100.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn probe_reports_a_plausible_ratio() {
        let clock = Clock::calibrate(Duration::from_millis(200)).unwrap();
        let n = measure(&clock, 100_000_000);
        assert!((0.0..1.0).contains(&n.noise_ratio), "{n:?}");
        assert!((99_000_000..200_000_000).contains(&n.duration_ns), "{n:?}");
        assert_eq!(measure(&clock, 0), PlatformNoise::default());
    }

    #[test]
    fn warns_above_a_tenth_of_the_trace() {
        assert!(warning(0, 0.002, 0.01).is_some());
        assert!(warning(0, 0.0009, 0.01).is_none());
        assert!(warning(0, 0.5, 0.0).is_none());
    }
}
