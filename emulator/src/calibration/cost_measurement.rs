//! The calibration measurement (talks to the OS): O from real injections into a probe loop
//! in this thread, L and M from single-shot timers, the O-by-rate sweep, with progress.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};

use jitter_collect::clock::{read_counter, Clock};
use jitter_collect::counter::{CounterProfile, DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};
use jitter_collect::probe;
use jitter_trace::{Detour, Stream};

use super::calibration_progress::Progress;
use super::cost_model::{
    lateness_sweep, match_single, min_sleep, rate_points, Calibration, RatePoint, Spread,
    TimerCalibration, MIN_MATCHED_PERCENT, OVERHEAD_RATES_HZ, SWEEP_NS, SWEEP_ROUNDS,
};
use crate::cache::{unix_now_s, MachineKey};
use crate::injector::{self, mono_ns, Emulator, EmulatorError, Handle, InjectorConfig, SIGNAL};
use crate::plan::{Plan, TimerKind};
use crate::setup::ReplaySetup;

/// Runs the probe loop for `duration_ns` and returns every detour above `threshold` ticks
/// (at most `capacity`; further ones are counted in the loop stats only).
pub fn probe_detours(
    clock: &Clock,
    threshold: u64,
    duration_ns: u64,
    capacity: usize,
) -> (Vec<(u64, u64)>, probe::LoopStats) {
    probe_detours_where(clock, threshold, duration_ns, capacity, |_, _| true)
}

/// [`probe_detours`] keeping only the detours `(start, end)` that `keep` accepts, asked as
/// each one ends.
fn probe_detours_where(
    clock: &Clock,
    threshold: u64,
    duration_ns: u64,
    capacity: usize,
    mut keep: impl FnMut(u64, u64) -> bool,
) -> (Vec<(u64, u64)>, probe::LoopStats) {
    let mut detours: Vec<(u64, u64)> = Vec::with_capacity(capacity);
    let stop = AtomicBool::new(false);
    let deadline = read_counter() + clock.ns_to_ticks(duration_ns);
    let stats = probe::run(threshold, deadline, &stop, |a, b| {
        if keep(a, b) && detours.len() < detours.capacity() {
            detours.push((a, b));
        }
        ControlFlow::Continue(())
    });
    (detours, stats)
}

/// Runs the probe loop for `duration_ns` while `handle`'s injector runs in this thread and
/// returns the detours in which a handler may have run ([`HandlerDetours`]). Others are not
/// kept, so a stretch of machine noise dense enough to fill any buffer (seen on a VM: 10⁶
/// detours of ≈ 250 ns a second for 50–100 ms) cannot push the injections' detours out. At
/// most 2 per injection.
fn injection_detours(
    handle: &Handle,
    clock: &Clock,
    threshold: u64,
    duration_ns: u64,
    injections: usize,
) -> Vec<(u64, u64)> {
    let mut filter = HandlerDetours::new(handle.injected_span_ns());
    let keep = |_, _| filter.keep(handle.injected_span_ns());
    probe_detours_where(clock, threshold, duration_ns, 2 * injections + 64, keep).0
}

/// Which probe detours may hold a handler, from the injector's count read after each: one
/// during which the count moved, and the one after it (a handler entered between a detour's
/// end and the look at the count lands in the next detour).
#[derive(Debug, Clone, Copy)]
struct HandlerDetours {
    seen: u64,
    keep_next: bool,
}

impl HandlerDetours {
    /// A filter that starts from the count `seen`.
    fn new(seen: u64) -> Self {
        HandlerDetours {
            seen,
            keep_next: false,
        }
    }

    /// Whether to keep the detour after which the count is `count`.
    fn keep(&mut self, count: u64) -> bool {
        let moved = count != self.seen;
        let keep = moved || self.keep_next;
        (self.seen, self.keep_next) = (count, moved);
        keep
    }
}

/// The probe threshold used by calibration and fidelity runs: the collector's default rule.
pub fn default_threshold() -> u64 {
    CounterProfile::measure(PROFILE_READS).threshold_ticks(DEFAULT_THRESHOLD_FACTOR)
}

/// A periodic stream: one detour of `run_ns` every `period_ns`, over `count` periods.
pub fn periodic_stream(period_ns: u64, run_ns: u64, count: u64) -> Stream {
    let d: Vec<Detour> = (0..count)
        .map(|k| Detour {
            start_ns: k * period_ns + period_ns / 2,
            run_ns,
        })
        .collect();
    Stream::from_detours(0, 0, count * period_ns, &d).expect("periodic detours are ordered")
}

/// Application-side detours of injections with a busy loop of `busy_ns`, minus `busy_ns`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OverheadSample {
    /// Detour length minus busy time, ns, one per injection alone in its detour.
    pub extra_ns: Vec<f64>,
    /// Injections whose handler entry lay in no probe detour.
    pub unmatched: u64,
    /// Injections that ran back to back with others in one detour (after a stall), left out.
    pub stacked: u64,
}

/// Injects `busy_ns`-long detours at `rate_hz` for `duration_ns` with the real injector while a
/// probe loop runs in this thread; returns how much longer than `busy_ns` the probe saw each.
pub fn measure_injection(
    timer: TimerKind,
    clock: &Clock,
    threshold: u64,
    rate_hz: u64,
    busy_ns: u64,
    duration_ns: u64,
) -> Result<OverheadSample, EmulatorError> {
    let period = 1_000_000_000 / rate_hz.max(1);
    let count = duration_ns / period + 2;
    let opts = ReplaySetup::ideal(timer).plan_options();
    let plan = Plan::new(&periodic_stream(period, busy_ns.max(1), count), opts)?;
    let cfg = InjectorConfig {
        timer,
        clock: *clock,
    };
    let handle = Emulator::start_logged(plan.cursor(0), cfg, count as usize + 16)?;
    let detours = injection_detours(&handle, clock, threshold, duration_ns, count as usize);
    let (_, log) = handle.stop_logged()?;
    let m = match_single(&log, &detours);
    let logged = log.len() as u64;
    if logged == 0 || (logged - m.unmatched) * 100 < MIN_MATCHED_PERCENT * logged {
        return Err(EmulatorError::Calibration(format!(
            "the probe saw only {} of {logged} injections ({timer}, {rate_hz} Hz) as detours, \
             fewer than {MIN_MATCHED_PERCENT} %: the probe threshold ({:.1} ns) or the machine \
             is wrong for measuring O (check it with `jitter-collect --check`)",
            logged - m.unmatched,
            clock.ticks_to_ns_f64(threshold)
        )));
    }
    Ok(OverheadSample {
        extra_ns: m
            .single
            .iter()
            .map(|&(i, (a, b))| clock.ticks_to_ns_f64(b - a) - log[i].busy_ns as f64)
            .collect(),
        unmatched: m.unmatched,
        stacked: m.stacked,
    })
}

static PROBE_FIRED: AtomicBool = AtomicBool::new(false);
static PROBE_ENTRY_NS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_probe_signal(_sig: libc::c_int) {
    // A simulated slow host's added cost, as in the injector's handler (test builds only; armed
    // by the injector's start, which every calibration runs before it measures L): a real host's
    // slower delivery shows in L, which the itimer's re-arm takes off.
    jitter_collect::slow_signals::pay();
    // Async-signal-safe: clock_gettime and two atomic stores; errno is untouched on success.
    PROBE_ENTRY_NS.store(mono_ns(), Ordering::Relaxed);
    PROBE_FIRED.store(true, Ordering::Release);
}

/// Wake-up lateness of `n` single-shot timers of `interval_ns`, armed while this thread spins
/// (the application is running when an injection is due), ns.
pub fn measure_lateness(
    timer: TimerKind,
    interval_ns: u64,
    n: usize,
) -> Result<Vec<f64>, EmulatorError> {
    let _claim = injector::Claim::take()?;
    if timer == TimerKind::Itimer && !injector::is_main_thread() {
        return Err(EmulatorError::NotMainThread);
    }
    let action = SigAction::new(
        SigHandler::Handler(on_probe_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: `on_probe_signal` is async-signal-safe; the emulator is not running (claimed).
    let old = unsafe { sigaction(SIGNAL, &action) }.map_err(|source| EmulatorError::Sys {
        what: "sigaction(SIGALRM)",
        source,
    })?;
    let id = match timer {
        TimerKind::Abstime => Some(injector::create_thread_timer()?),
        TimerKind::Itimer => None,
    };
    let mut out = Vec::with_capacity(n);
    let mut timed_out = false;
    for _ in 0..n {
        PROBE_FIRED.store(false, Ordering::Release);
        let t = mono_ns();
        let deadline = match id {
            Some(id) => {
                injector::arm_abstime(id, t + interval_ns);
                t + interval_ns
            }
            None => {
                injector::arm_itimer(interval_ns);
                t + injector::itimer_resolution(interval_ns).max(1_000)
            }
        };
        let give_up = t + interval_ns + 100_000_000;
        while !PROBE_FIRED.load(Ordering::Acquire) {
            // The flag is read again after the clock: a thread preempted past `give_up` between
            // the two reads runs the pending handler first when it resumes, and that firing is
            // a (late) measurement, not a timer that never fired.
            if mono_ns() > give_up && !PROBE_FIRED.load(Ordering::Acquire) {
                timed_out = true;
                break;
            }
            std::hint::spin_loop();
        }
        if timed_out {
            break;
        }
        out.push(PROBE_ENTRY_NS.load(Ordering::Relaxed) as f64 - deadline as f64);
    }
    match id {
        Some(id) => injector::delete_timer(id),
        None => injector::disarm_itimer(),
    }
    // SAFETY: restores the disposition in force before.
    let _ = unsafe { sigaction(SIGNAL, &old) };
    if timed_out {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        return Err(EmulatorError::Calibration(format!(
            "the {timer} timer's signal did not arrive within 100 ms of its deadline (load \
             average {}): a machine too busy to calibrate on, or SIGALRM blocked in this thread \
             by another library; calibrate again when it is quieter",
            load.split_whitespace().next().unwrap_or("unknown")
        )));
    }
    Ok(out)
}

/// How long and how often calibration measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Length of the O run per timer, ns.
    pub overhead_duration_ns: u64,
    /// Injection rate of the O run, Hz.
    pub rate_hz: u64,
    /// Reference interval for L, ns.
    pub interval_ns: u64,
    /// Timers fired for L.
    pub lateness_samples: usize,
    /// Timers fired per sweep interval.
    pub sweep_samples: usize,
    /// Injection rates of the O sweep, Hz.
    pub overhead_rates_hz: &'static [u64],
    /// Injections aimed at per O-sweep rate, over all rounds.
    pub overhead_rate_samples: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            overhead_duration_ns: 2_000_000_000,
            rate_hz: 1_000,
            interval_ns: 200_000,
            lateness_samples: 2_000,
            sweep_samples: 200,
            overhead_rates_hz: &OVERHEAD_RATES_HZ,
            overhead_rate_samples: 180,
        }
    }
}

/// Rounds of the O-by-rate sweep.
const ROUNDS: u64 = 3;

/// The rates of the O sweep: the settings' rates and the main rate, ascending.
fn sweep_rates(s: &Settings) -> Vec<u64> {
    let mut rates: Vec<u64> = s.overhead_rates_hz.to_vec();
    if !rates.contains(&s.rate_hz) {
        rates.push(s.rate_hz);
    }
    rates.sort_unstable();
    rates
}

/// An upper bound on the real-time CPU time a calibration with `s` can take without sleeping,
/// for the watchdog: every measurement that can run back to back (the main O run, the spin run,
/// the L run, the whole M sweep, one O-by-rate round at its slowest rate).
pub(crate) fn longest_burst(s: &Settings) -> std::time::Duration {
    let lateness = s.interval_ns * s.lateness_samples as u64;
    let per_interval = (s.sweep_samples.div_ceil(SWEEP_ROUNDS) * SWEEP_ROUNDS) as u64;
    let sweep: u64 = SWEEP_NS.iter().map(|&i| i * per_interval).sum();
    let per_round = s.overhead_rate_samples.div_ceil(ROUNDS);
    let round = sweep_rates(s)
        .iter()
        .map(|&r| (per_round * 1_000_000_000 / r.max(1)).max(200_000_000))
        .max()
        .unwrap_or(0);
    std::time::Duration::from_nanos(
        s.overhead_duration_ns + s.overhead_duration_ns / 4 + lateness + sweep + round,
    )
}

/// Measurement steps of one timer's calibration (for the progress).
fn timer_steps(s: &Settings) -> u64 {
    3 + ROUNDS * sweep_rates(s).len() as u64 + (SWEEP_ROUNDS * SWEEP_NS.len()) as u64
}

/// O at the sweep's rates, measured in interleaved rounds (each round visits every rate, in an
/// order rotated per round, so that a drift of this machine's injection cost over the seconds
/// of the sweep falls on all rates alike) and anchored on the main O run: the value at a rate
/// is the main run's median plus the sweep's difference between that rate and the main rate,
/// made non-increasing in the rate (sparser injections never cost less; pool-adjacent-violators
/// weighted by samples). Also whether the sweep is consistent with the main run: its own median
/// at the main rate within the larger of 1 µs and half the main run's p10–p90 width of the main
/// median (else the machine's cost moved during calibration and a replay keeps the single O).
fn measure_overhead_by_rate(
    timer: TimerKind,
    clock: &Clock,
    threshold: u64,
    s: &Settings,
    main: &Spread,
    progress: &dyn Progress,
) -> Result<(Vec<RatePoint>, bool), EmulatorError> {
    let rates = sweep_rates(s);
    let mut extra: Vec<Vec<f64>> = vec![Vec::new(); rates.len()];
    let per_round = s.overhead_rate_samples.div_ceil(ROUNDS);
    for round in 0..ROUNDS as usize {
        for k in 0..rates.len() {
            let i = (k + round) % rates.len();
            // A pause first: a SCHED_FIFO thread that spins for most of a second is throttled
            // (50 ms of 1 s by default), a stall that would land inside the run.
            std::thread::sleep(std::time::Duration::from_millis(100));
            let duration_ns = (per_round * 1_000_000_000 / rates[i].max(1)).max(200_000_000);
            let o = measure_injection(timer, clock, threshold, rates[i], 1, duration_ns)?;
            extra[i].extend(o.extra_ns);
            progress.step();
        }
    }
    let spreads: Vec<Spread> = extra.iter().map(|e| Spread::of(e)).collect();
    Ok(rate_points(&rates, &spreads, main, s.rate_hz))
}

impl TimerCalibration {
    /// Measures O, the spin cost, L and M for `timer`, advancing `progress` by `timer_steps`.
    fn measure(
        timer: TimerKind,
        clock: &Clock,
        threshold: u64,
        s: &Settings,
        progress: &dyn Progress,
    ) -> Result<Self, EmulatorError> {
        progress.timer(timer);
        let o = measure_injection(
            timer,
            clock,
            threshold,
            s.rate_hz,
            1,
            s.overhead_duration_ns,
        )?;
        let overhead = Spread::of(&o.extra_ns);
        progress.step();
        let (overhead_by_rate, overhead_by_rate_consistent) =
            measure_overhead_by_rate(timer, clock, threshold, s, &overhead, progress)?;
        let spin = measure_injection(
            timer,
            clock,
            threshold,
            s.rate_hz,
            100_000,
            s.overhead_duration_ns / 4,
        )?;
        let spin_extra_ns = Spread::of(&spin.extra_ns).median_ns - overhead.median_ns;
        progress.step();
        let lateness = Spread::of(&measure_lateness(timer, s.interval_ns, s.lateness_samples)?);
        progress.step();
        let (sweep, tolerance_ns) =
            lateness_sweep(&lateness, s.sweep_samples, |interval_ns, n| {
                let l = measure_lateness(timer, interval_ns, n);
                progress.step();
                l
            })?;
        Ok(TimerCalibration {
            timer,
            overhead,
            unmatched: o.unmatched,
            stacked: o.stacked,
            spin_extra_ns,
            lateness,
            min_sleep_ns: min_sleep(&sweep, s.interval_ns),
            tolerance_ns,
            sweep,
            overhead_by_rate,
            overhead_by_rate_consistent,
            // Opt-in: `Calibration::use_overhead_by_gap` (`calibrate --overhead-by-gap on`).
            overhead_by_rate_used: false,
        })
    }
}

impl Calibration {
    /// Measures both timers (about 20 s with the default settings; main thread for itimer),
    /// telling `progress` how far it is.
    pub fn measure(
        clock: &Clock,
        s: &Settings,
        progress: &dyn Progress,
    ) -> Result<Self, EmulatorError> {
        let threshold = default_threshold();
        let key = MachineKey::current(None);
        let load = super::machine_load::LoadProbe::start();
        progress.start(2 * timer_steps(s));
        let itimer = TimerCalibration::measure(TimerKind::Itimer, clock, threshold, s, progress)?;
        let abstime = TimerCalibration::measure(TimerKind::Abstime, clock, threshold, s, progress)?;
        progress.finish();
        Ok(Calibration {
            host: key.host,
            kernel: key.kernel,
            cpu_model: key.cpu_model,
            counter_khz: clock.khz(),
            measured_unix_s: unix_now_s(),
            interval_ns: s.interval_ns,
            rate_hz: s.rate_hz,
            itimer,
            abstime,
            load: load.and_then(super::machine_load::LoadProbe::finish),
            simulated_signal_ns: key.simulated_signal_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detour_is_kept_when_the_injector_count_moved_during_it_and_the_one_after() {
        // Counts read after each of ten detours: handlers in detours 2, 5 and 6 (two in a
        // row), none elsewhere; each handler's detour and the next one are kept, no other.
        let counts = [7u64, 7, 8, 8, 8, 9, 10, 10, 10, 10];
        let mut f = HandlerDetours::new(7);
        let kept: Vec<bool> = counts.iter().map(|&c| f.keep(c)).collect();
        let want = [
            false, false, true, true, false, true, true, true, false, false,
        ];
        assert_eq!(kept, want);
    }

    #[test]
    fn the_longest_burst_bounds_every_back_to_back_measurement() {
        // Defaults: O run 2 s, spin run 0.5 s, L 2000 × 200 µs = 0.4 s, M sweep 200 × 7.888 ms
        // = 1.5776 s, the slowest O-sweep round 60 injections at 100 Hz = 0.6 s.
        let b = longest_burst(&Settings::default());
        assert_eq!(b.as_nanos(), 5_077_600_000);
    }

    #[test]
    fn periodic_streams_have_the_asked_rate_and_duty() {
        let s = periodic_stream(5_000_000, 150_000, 400);
        assert_eq!(s.records.len(), 400);
        assert_eq!(s.duration_ns(), 2_000_000_000);
        assert_eq!(s.noise_ns(), 400 * 150_000);
        s.validate(0).unwrap();
    }
}
