//! What the emulator shows people: its calibrations (in-process and separate-process) as text.

use std::fmt;

use crate::cache::{age, unix_now_s};
use crate::calibration::Calibration;
use crate::process::ProcessCalibration;
use jitter_trace::table::{Align, Table};

fn us(ns: f64) -> f64 {
    ns / 1_000.0
}

impl fmt::Display for Calibration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        header(self, f)?;
        write!(f, "{}", table(self))?;
        timer_lines(self, f)
    }
}

/// Where and when the calibration was measured, and the machine's load meanwhile.
fn header(c: &Calibration, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(
        f,
        "calibration on {} (kernel {}, CPU {}), counter {} kHz, {}",
        c.host,
        c.kernel,
        c.cpu_model,
        c.counter_khz,
        age(c.measured_unix_s, unix_now_s())
    )?;
    if let Some(l) = &c.load {
        match l.busy() {
            Some(why) => writeln!(
                f,
                "BUSY MACHINE while measuring: {why}: O, L and M include that work's time"
            )?,
            None => writeln!(
                f,
                "load while measuring: other work took {:.0} % of the CPU time left to it \
                     (load average {:.2} on {} CPUs)",
                l.others_busy_share * 100.0,
                l.loadavg_1m,
                l.cpus
            )?,
        }
    }
    Ok(())
}

/// O and L of both timers, one row each.
fn table(c: &Calibration) -> Table {
    let mut table = Table::new([
        "timer",
        "",
        "median µs",
        "mean µs",
        "sd µs",
        "p10 µs",
        "p90 µs",
        "p99 µs",
        "n",
        "",
    ])
    .left(2)
    .align(9, Align::Left);
    for t in [&c.itimer, &c.abstime] {
        let name = t.timer.to_string();
        for (what, s, note) in [
            (
                "O overhead",
                &t.overhead,
                format!(
                    "{} Hz, unmatched {}, stacked {}",
                    c.rate_hz, t.unmatched, t.stacked
                ),
            ),
            (
                "L lateness",
                &t.lateness,
                format!("{} µs interval", c.interval_ns / 1_000),
            ),
        ] {
            table.row([
                name.clone(),
                what.to_string(),
                format!("{:.2}", us(s.median_ns)),
                format!("{:.2}", us(s.mean_ns)),
                format!("{:.2}", us(s.sd_ns)),
                format!("{:.2}", us(s.p10_ns)),
                format!("{:.2}", us(s.p90_ns)),
                format!("{:.2}", us(s.p99_ns)),
                s.samples.to_string(),
                note,
            ]);
        }
    }
    table
}

/// M, its sweep and the spin cost of each timer; O by rate where it was measured.
fn timer_lines(c: &Calibration, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for t in [&c.itimer, &c.abstime] {
        write!(
            f,
            "{}: M min sleep {} µs (tolerance {:.1} µs; sweep:",
            t.timer,
            t.min_sleep_ns / 1_000,
            us(t.tolerance_ns)
        )?;
        for p in &t.sweep {
            let mark = if p.honoured { "" } else { "✗" };
            write!(
                f,
                " {}µs→{:.1}{mark}",
                p.interval_ns / 1_000,
                us(p.lateness_median_ns)
            )?;
        }
        writeln!(
            f,
            "); spin cost {:+.2} µs beyond 100 µs + O",
            us(t.spin_extra_ns)
        )?;
        if !t.overhead_by_rate.is_empty() {
            write!(f, "{}: O by rate", t.timer)?;
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
    }
    Ok(())
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
