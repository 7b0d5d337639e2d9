//! What the emulator shows people: its calibrations (in-process and separate-process) as text.

use std::fmt;

use crate::cache::{age, unix_now_s};
use crate::calibration::Calibration;
use crate::plan::TimerKind;
use crate::process::ProcessCalibration;

fn us(ns: f64) -> f64 {
    ns / 1_000.0
}

impl fmt::Display for Calibration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "calibration on {} (kernel {}, CPU {}), counter {} kHz, {}",
            self.host,
            self.kernel,
            self.cpu_model,
            self.counter_khz,
            age(self.measured_unix_s, unix_now_s())
        )?;
        for t in [&self.itimer, &self.abstime] {
            let name = match t.timer {
                TimerKind::Itimer => "itimer  (setitimer ITIMER_REAL, relative)",
                TimerKind::Abstime => "abstime (timer_create CLOCK_MONOTONIC, absolute)",
            };
            let o = &t.overhead;
            let l = &t.lateness;
            writeln!(f, "{name}")?;
            writeln!(
                f,
                "  O overhead   median {:7.2} µs  sd {:6.2}  p10 {:7.2}  p90 {:7.2}  p99 {:7.2}  \
                 (n = {}, {} Hz, unmatched {}, stacked {})",
                us(o.median_ns),
                us(o.sd_ns),
                us(o.p10_ns),
                us(o.p90_ns),
                us(o.p99_ns),
                o.samples,
                self.rate_hz,
                t.unmatched,
                t.stacked
            )?;
            if !t.overhead_by_rate.is_empty() {
                write!(f, "  O by rate   ")?;
                for p in &t.overhead_by_rate {
                    write!(
                        f,
                        " {} Hz→{:.2} (sweep {:.2}, n {})",
                        p.rate_hz,
                        us(p.overhead_median_ns),
                        us(p.sweep_median_ns),
                        p.samples
                    )?;
                }
                writeln!(
                    f,
                    " µs; {}",
                    if t.overhead_by_rate_used {
                        "a replay takes O after each gap from it"
                    } else if !t.overhead_by_rate_consistent {
                        "not usable: the sweep disagreed with the main O run (the cost moved)"
                    } else {
                        "not used (`jitter-emulate calibrate --overhead-by-gap on` to use it)"
                    }
                )?;
            }
            writeln!(
                f,
                "  spin cost    {:+7.2} µs beyond 100 µs + O",
                us(t.spin_extra_ns)
            )?;
            writeln!(
                f,
                "  L lateness   mean {:7.2} µs  sd {:6.2}  p50 {:7.2}  p99 {:7.2}  ({} µs interval, n = {})",
                us(l.mean_ns),
                us(l.sd_ns),
                us(l.median_ns),
                us(l.p99_ns),
                self.interval_ns / 1_000,
                l.samples
            )?;
            write!(
                f,
                "  M min sleep  {} µs (tolerance {:.1} µs); sweep:",
                t.min_sleep_ns / 1_000,
                us(t.tolerance_ns)
            )?;
            for p in &t.sweep {
                write!(
                    f,
                    " {}µs→{:.1}{}",
                    p.interval_ns / 1_000,
                    us(p.lateness_median_ns),
                    if p.honoured { "" } else { "✗" }
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

impl fmt::Display for ProcessCalibration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |ns: f64| ns / 1e3;
        let o = &self.overhead;
        write!(
            f,
            "O {:.1} µs (median; sd {:.1}, p10 {:.1}, p90 {:.1}, n {}, {} Hz, {} unmatched, {} \
             stacked), L {:.1} µs (median at {} µs; p99 {:.1}), M {} µs",
            us(o.median_ns),
            us(o.sd_ns),
            us(o.p10_ns),
            us(o.p90_ns),
            o.samples,
            self.rate_hz,
            self.unmatched,
            self.stacked,
            us(self.lateness.median_ns),
            self.interval_ns / 1_000,
            us(self.lateness.p99_ns),
            self.min_sleep_ns / 1_000,
        )?;
        write!(
            f,
            " on CPU {} ({}, kernel {}), {}",
            self.key.cpu.map_or("?".into(), |c| c.to_string()),
            self.key.cpu_model,
            self.key.kernel,
            age(self.measured_unix_s, unix_now_s())
        )
    }
}
