//! The cycle counter, its frequency calibration, and exact conversion between cycles and ns.

use std::time::Duration;

use thiserror::Error;

/// Which hardware or OS counter `read_counter` uses on this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterSource {
    /// x86_64 time-stamp counter (`rdtsc`).
    Tsc,
    /// aarch64 virtual counter (`cntvct_el0`).
    Cntvct,
    /// `clock_gettime(CLOCK_MONOTONIC_RAW)` in ns (no cycle counter on this architecture).
    MonotonicRaw,
}

impl CounterSource {
    /// The source used by this build.
    pub const fn current() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            CounterSource::Tsc
        }
        #[cfg(target_arch = "aarch64")]
        {
            CounterSource::Cntvct
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            CounterSource::MonotonicRaw
        }
    }

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            CounterSource::Tsc => "rdtsc",
            CounterSource::Cntvct => "cntvct_el0",
            CounterSource::MonotonicRaw => "clock_gettime(CLOCK_MONOTONIC_RAW)",
        }
    }
}

/// Reads the cycle counter: cheap, unserialised (the probe loop's read).
#[inline(always)]
pub fn read_counter() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no memory effects and is available on every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: reading cntvct_el0 is permitted at EL0 on Linux and has no side effects.
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        monotonic_raw_ns()
    }
}

/// Reads the cycle counter after all earlier instructions completed (for timing intervals).
#[inline(always)]
pub fn read_counter_ordered() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut aux = 0u32;
        // SAFETY: rdtscp is available on every x86_64 CPU Linux runs on (checked by `tsc_flags`
        // users); it waits for earlier instructions and writes only `aux`.
        unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: `isb` orders the read after earlier instructions; cntvct_el0 is readable at EL0.
        unsafe {
            core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack))
        };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        monotonic_raw_ns()
    }
}

/// `clock_gettime(CLOCK_MONOTONIC_RAW)` in ns.
pub fn monotonic_raw_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC_RAW exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Problems establishing the counter frequency.
#[derive(Debug, Error)]
pub enum ClockError {
    /// The frequency given or measured is not usable.
    #[error("counter frequency {0} kHz is not usable")]
    BadFrequency(u64),
    /// Calibration was asked for less than the minimum window.
    #[error("calibration window {0:?} is shorter than 200 ms")]
    ShortWindow(Duration),
}

/// What the kernel says about the TSC (from `/proc/cpuinfo` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TscFlags {
    /// The TSC ticks at a constant rate regardless of frequency scaling.
    pub constant: bool,
    /// The TSC keeps ticking in deep C-states.
    pub nonstop: bool,
}

/// Reads the `constant_tsc` and `nonstop_tsc` flags; `None` where not applicable or unreadable.
pub fn tsc_flags() -> Option<TscFlags> {
    if CounterSource::current() != CounterSource::Tsc {
        return None;
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let flags = info.lines().find(|l| l.starts_with("flags"))?;
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    Some(TscFlags {
        constant: has("constant_tsc"),
        nonstop: has("nonstop_tsc"),
    })
}

/// The kernel's own TSC frequency (`/sys/devices/system/cpu/cpu0/tsc_freq_khz`), when exposed.
pub fn kernel_tsc_khz() -> Option<u64> {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/tsc_freq_khz")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&k| k > 0)
}

/// How a `Clock`'s frequency was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrequencySource {
    /// Measured against CLOCK_MONOTONIC_RAW.
    Calibrated,
    /// Given by the user (`--khz`).
    Given,
    /// Read from the kernel's sysfs file.
    Kernel,
    /// The counter already counts ns.
    Nanoseconds,
}

impl FrequencySource {
    /// Lower-case name for reports and trace headers.
    pub fn name(self) -> &'static str {
        match self {
            FrequencySource::Calibrated => "calibrated",
            FrequencySource::Given => "given",
            FrequencySource::Kernel => "kernel",
            FrequencySource::Nanoseconds => "nanoseconds",
        }
    }
}

/// Converts counter ticks to ns and back, exactly (integer arithmetic, no drift).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    khz: u64,
    /// Where the frequency came from.
    pub source: FrequencySource,
}

impl Clock {
    /// A clock with a known frequency in kHz.
    pub fn from_khz(khz: u64, source: FrequencySource) -> Result<Self, ClockError> {
        if khz == 0 || khz > 100_000_000 {
            return Err(ClockError::BadFrequency(khz));
        }
        Ok(Clock { khz, source })
    }

    /// Measures the counter frequency against CLOCK_MONOTONIC_RAW over at least `window`.
    pub fn calibrate(window: Duration) -> Result<Self, ClockError> {
        if CounterSource::current() == CounterSource::MonotonicRaw {
            return Clock::from_khz(1_000_000, FrequencySource::Nanoseconds);
        }
        if window < Duration::from_millis(200) {
            return Err(ClockError::ShortWindow(window));
        }
        let (c0, t0) = paired_reading();
        std::thread::sleep(window);
        let (c1, t1) = paired_reading();
        let dt = t1.saturating_sub(t0).max(1) as u128;
        let dc = c1.saturating_sub(c0) as u128;
        let khz = ((dc * 1_000_000 + dt / 2) / dt) as u64;
        Clock::from_khz(khz, FrequencySource::Calibrated)
    }

    /// The counter's frequency on this machine, the one rule every tool uses: `given` if any,
    /// else the kernel's `tsc_freq_khz` when a 200 ms measurement agrees with it within 0.5 %,
    /// else the measurement (with a warning saying how far they disagree).
    pub fn choose(given: Option<u64>) -> Result<(Self, Option<String>), ClockError> {
        if let Some(k) = given {
            return Ok((Clock::from_khz(k, FrequencySource::Given)?, None));
        }
        let measured = Clock::calibrate(Duration::from_millis(200))?;
        let Some(k) = kernel_tsc_khz() else {
            return Ok((measured, None));
        };
        let diff = (measured.khz() as f64 - k as f64).abs() / k as f64;
        if diff <= 0.005 {
            // The kernel's refined calibration is the more precise of the two.
            return Ok((Clock::from_khz(k, FrequencySource::Kernel)?, None));
        }
        let warning = format!(
            "the measured counter frequency {} kHz differs from the kernel's {k} kHz by {:.2} %; \
             using the measured one",
            measured.khz(),
            diff * 100.0
        );
        Ok((measured, Some(warning)))
    }

    /// Counter frequency, kHz.
    pub fn khz(&self) -> u64 {
        self.khz
    }

    /// Ticks to ns (floor), exact for any span up to centuries.
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        (u128::from(ticks) * 1_000_000 / u128::from(self.khz)) as u64
    }

    /// ns to ticks (rounded up, so a spin of that many ticks lasts at least `ns`).
    #[inline]
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        ((u128::from(ns) * u128::from(self.khz)).div_ceil(1_000_000)) as u64
    }

    /// Ticks to ns as a float (for statistics and reports).
    #[inline]
    pub fn ticks_to_ns_f64(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e6 / self.khz as f64
    }
}

/// A counter reading and a CLOCK_MONOTONIC_RAW reading taken as close together as possible.
fn paired_reading() -> (u64, u64) {
    let mut best = (u64::MAX, 0u64, 0u64);
    for _ in 0..16 {
        let a = read_counter_ordered();
        let t = monotonic_raw_ns();
        let b = read_counter_ordered();
        let width = b.wrapping_sub(a);
        if width < best.0 {
            best = (width, a + width / 2, t);
        }
    }
    (best.1, best.2)
}

/// Busy-waits until the counter reaches `deadline` (ticks).
#[inline]
pub fn spin_until(deadline: u64) {
    while read_counter() < deadline {
        core::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_is_exact_and_round_trips() {
        let c = Clock::from_khz(2_445_000, FrequencySource::Given).unwrap();
        assert_eq!(c.ticks_to_ns(2_445_000_000), 1_000_000_000);
        // An hour of ticks converts without drift.
        let hour = 2_445_000_000u64 * 3600;
        assert_eq!(c.ticks_to_ns(hour), 3_600_000_000_000);
        for ns in [0u64, 1, 999, 1_000_000, 123_456_789] {
            let t = c.ns_to_ticks(ns);
            assert!(
                c.ticks_to_ns(t) >= ns && c.ticks_to_ns(t.saturating_sub(1)) <= ns,
                "{ns}"
            );
        }
        assert!(Clock::from_khz(0, FrequencySource::Given).is_err());
    }

    #[test]
    fn counter_is_monotonic_on_one_thread() {
        let mut prev = read_counter_ordered();
        for _ in 0..100_000 {
            let now = read_counter_ordered();
            assert!(now >= prev);
            prev = now;
        }
    }

    #[test]
    fn calibration_agrees_with_the_kernel_clock() {
        let c = Clock::calibrate(Duration::from_millis(200)).unwrap();
        // Cross-check with an independent 100 ms interval: within 0.5 % (sleep wake-up jitter on a
        // noisy VM is a few hundred µs at most, i.e. < 0.5 % of 100 ms).
        let (c0, t0) = paired_reading();
        std::thread::sleep(Duration::from_millis(100));
        let (c1, t1) = paired_reading();
        let ns = c.ticks_to_ns(c1 - c0) as f64;
        let real = (t1 - t0) as f64;
        assert!(
            (ns - real).abs() / real < 0.005,
            "counter says {ns} ns, kernel {real} ns"
        );
        if let Some(k) = kernel_tsc_khz() {
            assert!((c.khz() as f64 - k as f64).abs() / (k as f64) < 0.001);
        }
        assert!(Clock::calibrate(Duration::from_millis(10)).is_err());
    }
}
