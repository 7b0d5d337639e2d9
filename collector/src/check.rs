//! `jitter-collect --check`: is this machine's counter fit to collect with, and is the machine fit
//! to replay on? Counter source and frequency, resolution, loop period, threshold, timer wake-up
//! lateness and the cost of a SIGALRM to the application, in about two seconds.

use std::fmt;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use serde::Serialize;

use crate::clock::{kernel_tsc_khz, read_counter, tsc_flags, Clock, CounterSource, TscFlags};
use crate::counter::{CounterProfile, DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};
use crate::cpuset;
use crate::error::{CollectError, Context, Result};
use crate::probe;
use jitter_trace::sanity::Observation;
use jitter_trace::summary::Spread;

/// Timer wake-ups measured for the lateness figure.
const LATENESS_SLEEPS: usize = 200;
/// Requested sleep for each wake-up, ns.
const LATENESS_SLEEP_NS: u64 = 1_000_000;
/// SIGALRMs sent to measure their cost (at 1 kHz).
const SIGNALS: usize = 500;
/// Largest number of handler entries recorded.
const MAX_ENTRIES: usize = 1024;
/// A signal measurement that matches fewer handler entries to probe detours is not a number.
const MIN_MATCHED: f64 = 0.9;
/// Reference detour length for the scale factor the verdict names, ns.
const REFERENCE_DETOUR_NS: f64 = 10_000.0;
/// A platform noisier than this share of time overstates every replayed slowdown noticeably.
const QUIET_NOISE_RATIO: f64 = 0.01;

/// The spread of a sample that is not empty; `None` for an empty one.
fn spread(v: &[f64]) -> Option<Spread> {
    (!v.is_empty()).then(|| Spread::of(v))
}

/// Everything `--check` measured.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// CPU the check ran on.
    pub cpu: u32,
    /// Counter instruction or call.
    pub counter: &'static str,
    /// Counter frequency used, kHz.
    pub khz: u64,
    /// Where it came from.
    pub frequency_source: String,
    /// The kernel's own TSC frequency, kHz, where exposed.
    pub kernel_khz: Option<u64>,
    /// constant_tsc / nonstop_tsc (x86 only).
    pub tsc_constant: Option<bool>,
    /// See `tsc_constant`.
    pub tsc_nonstop: Option<bool>,
    /// Counter resolution, ns.
    pub resolution_ns: f64,
    /// Shortest non-zero back-to-back difference, ns (not t_min).
    pub min_step_ns: f64,
    /// Share of back-to-back reads that saw no change.
    pub zero_share: f64,
    /// Undisturbed loop period t_min, ns.
    pub t_min_ns: f64,
    /// Default detour threshold, ns.
    pub threshold_ns: f64,
    /// What a short probe at that threshold saw: detours per second.
    pub probe_detours_per_s: f64,
    /// Its noise ratio.
    pub probe_noise_ratio: f64,
    /// Lateness of 1 ms timer wake-ups.
    pub timer_lateness: Option<Spread>,
    /// Time a SIGALRM (empty handler) takes from the application.
    pub sigalrm_cost: Option<Spread>,
    /// Share of SIGALRMs whose handler entry lay in a probe detour.
    pub sigalrm_matched: f64,
    /// `Ok(line)` when fit to collect, `Err(reason)` otherwise.
    pub collect_verdict: Result<String, String>,
    /// `Ok(line)` when fit to replay, `Err(reason)` otherwise.
    pub replay_verdict: Result<String, String>,
}

impl CheckReport {
    /// Whether both verdicts are positive.
    pub fn fit(&self) -> bool {
        self.collect_verdict.is_ok() && self.replay_verdict.is_ok()
    }
}

fn us(ns: f64) -> String {
    if ns < 1_000.0 {
        format!("{ns:.1} ns")
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flag = |b: Option<bool>| match b {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "n/a",
        };
        writeln!(f, "cpu               {}", self.cpu)?;
        writeln!(f, "counter           {}", self.counter)?;
        writeln!(
            f,
            "frequency         {} kHz ({}{})",
            self.khz,
            self.frequency_source,
            self.kernel_khz
                .map_or(String::new(), |k| format!(", kernel says {k} kHz"))
        )?;
        writeln!(
            f,
            "constant/nonstop  {} / {}",
            flag(self.tsc_constant),
            flag(self.tsc_nonstop)
        )?;
        writeln!(
            f,
            "resolution        {} (shortest step seen {}, {:.0} % of reads unchanged)",
            us(self.resolution_ns),
            us(self.min_step_ns),
            self.zero_share * 100.0
        )?;
        writeln!(f, "loop period t_min {}", us(self.t_min_ns))?;
        writeln!(
            f,
            "threshold         {} (max({DEFAULT_THRESHOLD_FACTOR} × t_min, 4 steps))",
            us(self.threshold_ns)
        )?;
        writeln!(
            f,
            "probe             {:.0} detours/s, noise ratio {:.2} %",
            self.probe_detours_per_s,
            self.probe_noise_ratio * 100.0
        )?;
        match &self.timer_lateness {
            Some(s) => writeln!(
                f,
                "timer lateness    {} median, {} p90 (n = {}, 1 ms sleeps)",
                us(s.median_ns),
                us(s.p90_ns),
                s.samples
            )?,
            None => writeln!(f, "timer lateness    not measured")?,
        }
        match &self.sigalrm_cost {
            Some(s) => writeln!(
                f,
                "SIGALRM cost      {} median, {} p90 (n = {}, {:.0} % matched)",
                us(s.median_ns),
                us(s.p90_ns),
                s.samples,
                self.sigalrm_matched * 100.0
            )?,
            None => writeln!(
                f,
                "SIGALRM cost      not measured ({:.0} % matched)",
                self.sigalrm_matched * 100.0
            )?,
        }
        let verdict = |v: &Result<String, String>| match v {
            Ok(s) => format!("fit {s}"),
            Err(s) => format!("NOT fit {s}"),
        };
        writeln!(
            f,
            "verdict           {}; {}",
            verdict(&self.collect_verdict),
            verdict(&self.replay_verdict)
        )
    }
}

static ENTRIES: [AtomicU64; MAX_ENTRIES] = [const { AtomicU64::new(0) }; MAX_ENTRIES];
static ENTRY_COUNT: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_alarm(_: libc::c_int) {
    // Async-signal-safe: one counter read and two atomic operations on static memory (and the
    // spin of a simulated slow host, a test build's).
    crate::slow_signals::pay();
    let t = read_counter();
    let i = ENTRY_COUNT.fetch_add(1, Ordering::Relaxed);
    if let Some(slot) = ENTRIES.get(i) {
        slot.store(t, Ordering::Relaxed);
    }
}

fn set_itimer(interval_us: i64) -> Result<()> {
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: interval_us as libc::suseconds_t,
    };
    let it = libc::itimerval {
        it_interval: tv,
        it_value: tv,
    };
    // SAFETY: `it` is a valid itimerval; the old value is not asked for.
    let rc = unsafe { libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(CollectError::last_os("setitimer"));
    }
    Ok(())
}

/// Runs the probe at `threshold` while SIGALRMs arrive at 1 kHz; returns the detour each handler
/// entry fell in (its length is what the signal cost the application) and the matched share.
fn sigalrm_cost(clock: &Clock, threshold: u64) -> Result<(Option<Spread>, f64)> {
    let handler = SigAction::new(
        SigHandler::Handler(on_alarm),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    crate::slow_signals::configure(clock).map_err(CollectError::Refused)?;
    ENTRY_COUNT.store(0, Ordering::Relaxed);
    // SAFETY: the handler is async-signal-safe (see `on_alarm`); the previous one is restored.
    let old = unsafe { sigaction(Signal::SIGALRM, &handler) }.context("sigaction(SIGALRM)")?;
    let mut detours: Vec<(u64, u64)> = Vec::with_capacity(1 << 18);
    let stop = AtomicBool::new(false);
    let run_ns = SIGNALS as u64 * 1_000_000 + 5_000_000;
    let armed = set_itimer(1_000);
    let deadline = read_counter() + clock.ns_to_ticks(run_ns);
    if armed.is_ok() {
        probe::run(threshold, deadline, &stop, |a, b| {
            if detours.len() < detours.capacity() {
                detours.push((a, b));
            }
            ControlFlow::Continue(())
        });
    }
    let disarmed = set_itimer(0);
    // SAFETY: restores the handler that was installed before.
    unsafe { sigaction(Signal::SIGALRM, &old) }.context("restoring SIGALRM")?;
    armed?;
    disarmed?;
    let n = ENTRY_COUNT.load(Ordering::Relaxed).min(MAX_ENTRIES);
    let mut costs = Vec::with_capacity(n);
    for slot in &ENTRIES[..n] {
        let t = slot.load(Ordering::Relaxed);
        let i = detours.partition_point(|&(a, _)| a < t);
        if i > 0 && detours[i - 1].1 >= t {
            let (a, b) = detours[i - 1];
            costs.push(clock.ticks_to_ns_f64(b - a));
        }
    }
    let matched = if n == 0 {
        0.0
    } else {
        costs.len() as f64 / n as f64
    };
    let spread = if matched >= MIN_MATCHED {
        spread(&costs)
    } else {
        None
    };
    Ok((spread, matched))
}

/// Lateness of `LATENESS_SLEEPS` timer wake-ups of 1 ms.
fn timer_lateness(clock: &Clock) -> Option<Spread> {
    let late: Vec<f64> = (0..LATENESS_SLEEPS)
        .map(|_| {
            let t0 = read_counter();
            std::thread::sleep(Duration::from_nanos(LATENESS_SLEEP_NS));
            clock.ticks_to_ns_f64(read_counter().wrapping_sub(t0)) - LATENESS_SLEEP_NS as f64
        })
        .collect();
    spread(&late)
}

/// Runs the check on `cpu` (default: the last CPU this process may use) with `clock`.
pub fn run(cpu: Option<u32>, clock: Clock) -> Result<CheckReport> {
    let cpu = match cpu {
        Some(c) => c,
        None => *cpuset::affinity()?.ids().last().ok_or_else(|| {
            CollectError::Refused("no CPU in this process's affinity mask".into())
        })?,
    };
    cpuset::pin_current_thread(&[cpu])?;
    let profile = CounterProfile::measure(PROFILE_READS);
    let threshold = profile.threshold_ticks(DEFAULT_THRESHOLD_FACTOR);
    let stop = AtomicBool::new(false);
    let probe_ns = 500_000_000;
    let stats = probe::run(
        threshold,
        read_counter() + clock.ns_to_ticks(probe_ns),
        &stop,
        |_, _| ControlFlow::Continue(()),
    );
    let elapsed = stats.last.wrapping_sub(stats.first).max(1);
    let observation = Observation {
        cpu,
        detours: stats.detours,
        iterations: Some(stats.iterations),
        duration_ns: clock.ticks_to_ns(elapsed),
        noise_ns: clock.ticks_to_ns(stats.detour_ticks),
        median_ns: 0,
        threshold_ns: clock.ticks_to_ns_f64(threshold),
        resolution_ns: Some(clock.ticks_to_ns_f64(profile.resolution_ticks)),
        loop_ns: Some(clock.ticks_to_ns_f64(1) * profile.loop_ticks),
        collection_ns: Some(probe_ns),
    };
    let lateness = timer_lateness(&clock);
    let (cost, matched) = sigalrm_cost(&clock, threshold)?;
    let flags = tsc_flags();
    let kernel_khz = kernel_tsc_khz();
    let ns = |t: f64| clock.ticks_to_ns_f64(1) * t;
    let t_min_ns = ns(profile.loop_ticks);
    let threshold_ns = ns(threshold as f64);
    let collect_verdict = collect_verdict(&observation, flags, kernel_khz, &clock, t_min_ns);
    let noise_ratio = stats.detour_ticks as f64 / elapsed as f64;
    let replay_verdict = match (&cost, &lateness) {
        (None, _) => Err(format!(
            "to replay: only {:.0} % of the SIGALRMs were seen by the probe (need {:.0} %), so \
             their cost is unknown",
            matched * 100.0,
            MIN_MATCHED * 100.0
        )),
        (_, None) => Err("to replay: timer wake-ups could not be measured".into()),
        (Some(c), Some(_)) => {
            let scale = (c.p90_ns / REFERENCE_DETOUR_NS).ceil().max(1.0);
            let mut line = format!(
                "to replay with --scale ≥ {scale:.0} (a SIGALRM costs {}: at scale S only \
                 detours longer than {} / S are injectable; S = {scale:.0} injects detours from \
                 {} up)",
                us(c.median_ns),
                us(c.p90_ns),
                us(REFERENCE_DETOUR_NS)
            );
            if noise_ratio > QUIET_NOISE_RATIO {
                line.push_str(&format!(
                    ", but this machine's own noise ({:.2} %) adds to every replay: measure it \
                     with a baseline",
                    noise_ratio * 100.0
                ));
            }
            Ok(line)
        }
    };
    Ok(CheckReport {
        cpu,
        counter: CounterSource::current().name(),
        khz: clock.khz(),
        frequency_source: clock.source.to_string(),
        kernel_khz,
        tsc_constant: flags.map(|f| f.constant),
        tsc_nonstop: flags.map(|f| f.nonstop),
        resolution_ns: ns(profile.resolution_ticks as f64),
        min_step_ns: ns(profile.min_step_ticks as f64),
        zero_share: profile.zero_share,
        t_min_ns,
        threshold_ns,
        probe_detours_per_s: observation.rate_per_s(),
        probe_noise_ratio: noise_ratio,
        timer_lateness: lateness,
        sigalrm_cost: cost,
        sigalrm_matched: matched,
        collect_verdict,
        replay_verdict,
    })
}

fn collect_verdict(
    observation: &Observation,
    flags: Option<TscFlags>,
    kernel_khz: Option<u64>,
    clock: &Clock,
    t_min_ns: f64,
) -> Result<String, String> {
    if let Some(why) = observation.implausibility() {
        return Err(format!("to collect: {why}"));
    }
    if let Some(f) = flags {
        if !f.constant || !f.nonstop {
            return Err(
                "to collect: the TSC is not constant and nonstop, so detour lengths change with \
                 the CPU's frequency"
                    .into(),
            );
        }
    }
    if let Some(k) = kernel_khz {
        let diff = (clock.khz() as f64 - k as f64).abs() / k as f64;
        if diff > 0.005 {
            return Err(format!(
                "to collect: the counter frequency {} kHz differs from the kernel's {k} kHz by \
                 {:.2} % (pass --khz)",
                clock.khz(),
                diff * 100.0
            ));
        }
    }
    let mut line = format!(
        "to collect (detours from {} up; loop period {})",
        us(observation.threshold_ns),
        us(t_min_ns)
    );
    // Fit, but what a collection would warn of afterwards (short stalls of the loop, other work
    // on the CPU) is worth knowing before it.
    for w in [observation.short_stalls(), observation.busy()]
        .into_iter()
        .flatten()
    {
        line.push_str(&format!(", but {w}"));
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_take_the_median_and_the_90th_percentile() {
        let s = spread(&(1..=11).map(f64::from).collect::<Vec<_>>()).unwrap();
        assert_eq!((s.median_ns, s.p90_ns, s.samples), (6.0, 10.0, 11));
        assert!(spread(&[]).is_none());
    }

    #[test]
    fn a_wrong_frequency_or_an_unsteady_tsc_is_not_fit_to_collect_and_stalls_are_named() {
        let clock = Clock::from_khz(2_600_000, crate::clock::FrequencySource::Given).unwrap();
        // The report names the source as it did with Debug, lower-cased.
        assert_eq!(clock.source.to_string(), "given");
        let quiet = Observation {
            detours: 1000,
            iterations: Some(100_000_000),
            duration_ns: 1_000_000_000,
            noise_ns: 1_000_000,
            threshold_ns: 100.0,
            ..Observation::default()
        };
        let steady = Some(TscFlags {
            constant: true,
            nonstop: true,
        });
        assert!(collect_verdict(&quiet, steady, Some(2_600_100), &clock, 10.0).is_ok());
        let e = collect_verdict(&quiet, steady, Some(2_000_000), &clock, 10.0).unwrap_err();
        assert!(e.contains("--khz"), "{e}");
        let unsteady = Some(TscFlags {
            constant: false,
            nonstop: true,
        });
        assert!(collect_verdict(&quiet, unsteady, None, &clock, 10.0).is_err());
        let every_iteration = Observation {
            detours: 90_000_000,
            ..quiet
        };
        assert!(
            collect_verdict(&every_iteration, steady, None, &clock, 10.0)
                .unwrap_err()
                .contains("iterations")
        );
        let fit = collect_verdict(&quiet, steady, None, &clock, 10.0).unwrap();
        assert!(!fit.contains("but"), "{fit}");
        // A very noisy CPU (CI on this VM, 2026-11-26): 1.1 % of the iterations were detours at
        // 10 loop periods, short stalls: fit to collect, and said so.
        let stalls = Observation {
            detours: 367_512,
            iterations: Some(33_400_000),
            noise_ns: 125_900_000,
            threshold_ns: 207.1,
            resolution_ns: Some(1.0),
            loop_ns: Some(20.7),
            ..quiet
        };
        let w = collect_verdict(&stalls, steady, None, &clock, 20.7).unwrap();
        assert!(w.contains("but CPU 0") && w.contains("short stalls"), "{w}");
        // Over half of the time in detours: other work shared the CPU.
        let busy = Observation {
            noise_ns: 600_000_000,
            ..quiet
        };
        let w = collect_verdict(&busy, steady, None, &clock, 10.0).unwrap();
        assert!(w.contains("other work ran on this CPU"), "{w}");
    }
}
