//! Calibration of the injector on the machine at hand: its overhead O (the detour one injection
//! with an empty busy loop causes, as a probe loop in the same thread sees it), the timer's
//! wake-up lateness L, the shortest interval M the timer honours, and the busy spin's own cost.
//! Measured, never assumed; cached per host and kernel; overridable.

use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use indicatif::{ProgressBar, ProgressStyle};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
use serde::{Deserialize, Serialize};

use jitter_collect::clock::{read_counter, Clock};
use jitter_collect::counter::{CounterProfile, DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};
use jitter_collect::probe;
use jitter_trace::{Detour, Stream};

use crate::cache::{cache_dir, decide, file_name_part, unix_now_s, Decision, MachineKey};
use crate::injector::{
    self, mono_ns, Emulator, EmulatorError, InjectorConfig, LoggedInjection, SIGNAL,
};
use crate::plan::{OverheadByGap, Plan, PlanOptions, TimerKind};

/// Summary of a sample of durations, ns.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Spread {
    /// Sample size.
    pub samples: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Standard deviation (n − 1).
    pub sd_ns: f64,
    /// 10th percentile.
    pub p10_ns: f64,
    /// Median.
    pub median_ns: f64,
    /// 90th percentile.
    pub p90_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Largest value.
    pub max_ns: f64,
}

impl Spread {
    /// Summarises `values` (any order); all zero for an empty sample.
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = if v.len() > 1 {
            v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Spread {
            samples: v.len() as u64,
            mean_ns: mean,
            sd_ns: var.sqrt(),
            p10_ns: quantile(&v, 0.10),
            median_ns: quantile(&v, 0.50),
            p90_ns: quantile(&v, 0.90),
            p99_ns: quantile(&v, 0.99),
            max_ns: v[v.len() - 1],
        }
    }
}

/// Quantile `q` of sorted `v` by linear interpolation between order statistics.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// For each logged injection, the probe detour `(start, end)` (ticks) that contains its handler
/// entry, if any. Both inputs are in time order.
pub fn match_injections(
    log: &[LoggedInjection],
    detours: &[(u64, u64)],
) -> Vec<Option<(u64, u64)>> {
    let mut out = Vec::with_capacity(log.len());
    let mut k = 0;
    for inj in log {
        while k < detours.len() && detours[k].1 < inj.entry_ticks {
            k += 1;
        }
        out.push(match detours.get(k) {
            Some(&(a, b)) if a <= inj.entry_ticks && inj.entry_ticks <= b => Some((a, b)),
            _ => None,
        });
    }
    out
}

/// A measurement of O that matches fewer of its injections to probe detours is not a number.
pub const MIN_MATCHED_PERCENT: u64 = 90;

/// How logged injections map onto probe detours.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Matching {
    /// (injection index, detour) for injections alone in their detour.
    pub single: Vec<(usize, (u64, u64))>,
    /// Injections that shared a detour with others (handlers run back to back after a stall).
    pub stacked: u64,
    /// Injections inside no detour.
    pub unmatched: u64,
}

/// Matches injections to detours and separates those alone in their detour from stacked ones.
pub fn match_single(log: &[LoggedInjection], detours: &[(u64, u64)]) -> Matching {
    let m = match_injections(log, detours);
    let mut out = Matching::default();
    for (i, d) in m.iter().enumerate() {
        match d {
            None => out.unmatched += 1,
            Some(d) => {
                let shared = (i > 0 && m[i - 1] == Some(*d)) || m.get(i + 1) == Some(&Some(*d));
                if shared {
                    out.stacked += 1;
                } else {
                    out.single.push((i, *d));
                }
            }
        }
    }
    out
}

/// Runs the probe loop for `duration_ns` and returns every detour above `threshold` ticks
/// (at most `capacity`; further ones are counted in the loop stats only).
pub fn probe_detours(
    clock: &Clock,
    threshold: u64,
    duration_ns: u64,
    capacity: usize,
) -> (Vec<(u64, u64)>, probe::LoopStats) {
    let mut detours: Vec<(u64, u64)> = Vec::with_capacity(capacity);
    let stop = AtomicBool::new(false);
    let deadline = read_counter() + clock.ns_to_ticks(duration_ns);
    let stats = probe::run(threshold, deadline, &stop, |a, b| {
        if detours.len() < detours.capacity() {
            detours.push((a, b));
        }
        ControlFlow::Continue(())
    });
    (detours, stats)
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
    let opts = PlanOptions {
        timer,
        ..PlanOptions::ideal()
    };
    let plan = Plan::new(&periodic_stream(period, busy_ns.max(1), count), opts)?;
    let cfg = InjectorConfig {
        timer,
        clock: *clock,
    };
    let handle = Emulator::start_logged(plan.cursor(0), cfg, count as usize + 16)?;
    let (detours, _) = probe_detours(clock, threshold, duration_ns, 4 * count as usize + 100_000);
    let (_, log) = handle.stop_logged()?;
    let m = match_single(&log, &detours);
    let logged = log.len() as u64;
    if logged == 0 || (logged - m.unmatched) * 100 < MIN_MATCHED_PERCENT * logged {
        return Err(EmulatorError::Calibration(format!(
            "the probe saw only {} of {logged} injections ({timer:?}, {rate_hz} Hz) as detours, \
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
            if mono_ns() > give_up {
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
        return Err(EmulatorError::Sys {
            what: "timer did not fire within 100 ms",
            source: nix::errno::Errno::ETIMEDOUT,
        });
    }
    Ok(out)
}

/// Lateness at one interval of the M sweep.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Interval asked for, ns.
    pub interval_ns: u64,
    /// Median lateness, ns.
    pub lateness_median_ns: f64,
    /// 90th percentile of lateness, ns.
    pub lateness_p90_ns: f64,
    /// Whether the median is at most the reference lateness plus the tolerance.
    pub honoured: bool,
}

/// Intervals of the M sweep, ns.
pub const SWEEP_NS: [u64; 11] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 2_000_000, 5_000_000,
];

/// M: the smallest sweep interval from which on every longer one up to `reference_ns` is
/// honoured (intervals above the reference say nothing about the minimum); the reference itself
/// if none below it is.
pub fn min_sleep(points: &[SweepPoint], reference_ns: u64) -> u64 {
    let mut m = reference_ns;
    for p in points
        .iter()
        .rev()
        .filter(|p| p.interval_ns <= reference_ns)
    {
        if !p.honoured {
            break;
        }
        m = p.interval_ns;
    }
    m
}

/// The M sweep: lateness at each of `SWEEP_NS` (from `measure`) against the `reference`
/// interval's lateness. An interval is honoured when its median wake-up is no later than the
/// reference's, within the larger of 2 µs and the reference's own p10–p90 half-width (waking
/// less late is fine); returns the points and that tolerance, ns.
pub fn lateness_sweep<E>(
    reference: &Spread,
    mut measure: impl FnMut(u64) -> Result<Spread, E>,
) -> Result<(Vec<SweepPoint>, f64), E> {
    let tolerance_ns = (0.5 * (reference.p90_ns - reference.p10_ns)).max(2_000.0);
    let mut sweep = Vec::with_capacity(SWEEP_NS.len());
    for &interval_ns in &SWEEP_NS {
        let l = measure(interval_ns)?;
        sweep.push(SweepPoint {
            interval_ns,
            lateness_median_ns: l.median_ns,
            lateness_p90_ns: l.p90_ns,
            honoured: l.median_ns - reference.median_ns <= tolerance_ns,
        });
    }
    Ok((sweep, tolerance_ns))
}

/// Injection rates of the O sweep, Hz (the main O run's rate joins them).
pub const OVERHEAD_RATES_HZ: [u64; 3] = [100, 300, 3_000];

/// O measured at one injection rate.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RatePoint {
    /// Injection rate, Hz.
    pub rate_hz: u64,
    /// O at this rate, ns: the main O run's median plus the sweep's difference to the main rate.
    pub overhead_median_ns: f64,
    /// Median O of the sweep's own injections at this rate, ns.
    #[serde(default)]
    pub sweep_median_ns: f64,
    /// 90th percentile of the sweep's O at this rate, ns.
    pub overhead_p90_ns: f64,
    /// Sweep injections alone in their detour.
    pub samples: u64,
}

/// The plan's O-after-a-gap curve from a rate sweep: a periodic injection at rate r follows
/// the previous one by about 1/r.
pub fn overhead_by_gap(points: &[RatePoint]) -> OverheadByGap {
    let mut g: Vec<(u64, u64)> = points
        .iter()
        .filter(|p| p.rate_hz > 0)
        .map(|p| {
            (
                1_000_000_000 / p.rate_hz,
                p.overhead_median_ns.max(0.0).round() as u64,
            )
        })
        .collect();
    g.sort_unstable();
    g.dedup_by_key(|p| p.0);
    g.truncate(crate::plan::OVERHEAD_POINTS);
    OverheadByGap::new(&g).unwrap_or_default()
}

/// Calibration of one timer kind.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TimerCalibration {
    /// The timer.
    pub timer: TimerKind,
    /// O: application-side detour of an injection with an empty busy loop.
    pub overhead: Spread,
    /// Injections seen by no probe detour during the O run.
    pub unmatched: u64,
    /// Injections stacked with others in one detour during the O run (left out of O).
    #[serde(default)]
    pub stacked: u64,
    /// Extra cost of a 100 µs busy spin beyond 100 µs + median O, ns.
    pub spin_extra_ns: f64,
    /// L: wake-up lateness of single-shot timers at the reference interval.
    pub lateness: Spread,
    /// M: shortest interval the timer honours within tolerance, ns.
    pub min_sleep_ns: u64,
    /// Tolerance used for M, ns.
    pub tolerance_ns: f64,
    /// The sweep behind M.
    pub sweep: Vec<SweepPoint>,
    /// O at several injection rates, sorted by rate (empty in calibrations from before it).
    #[serde(default)]
    pub overhead_by_rate: Vec<RatePoint>,
    /// Whether the sweep agreed with the main O run (see `measure_overhead_by_rate`).
    #[serde(default)]
    pub overhead_by_rate_consistent: bool,
    /// Whether replays take O after each gap from `overhead_by_rate`: asked for
    /// (`jitter-emulate calibrate --overhead-by-gap on`) and consistent.
    #[serde(default)]
    pub overhead_by_rate_used: bool,
}

impl TimerCalibration {
    /// The O-after-a-gap curve a replay uses: empty when the sweep was not consistent.
    pub fn overhead_by_gap(&self) -> OverheadByGap {
        if self.overhead_by_rate_used {
            overhead_by_gap(&self.overhead_by_rate)
        } else {
            OverheadByGap::default()
        }
    }
}

/// Everything measured about the injector on one host and kernel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Calibration {
    /// Host name.
    pub host: String,
    /// Kernel release.
    pub kernel: String,
    /// CPU model name (empty in calibrations cached before it was recorded: measured again).
    #[serde(default)]
    pub cpu_model: String,
    /// Counter frequency used, kHz.
    pub counter_khz: u64,
    /// When it was measured, s since the Unix epoch.
    pub measured_unix_s: u64,
    /// Reference interval of the L measurement, ns.
    pub interval_ns: u64,
    /// Injection rate of the O measurement, Hz.
    pub rate_hz: u64,
    /// `setitimer(ITIMER_REAL)`.
    pub itimer: TimerCalibration,
    /// `timer_create(CLOCK_MONOTONIC)` with absolute deadlines.
    pub abstime: TimerCalibration,
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

/// Values given on the command line in place of the measured ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Overrides {
    /// O, ns.
    pub overhead_ns: Option<u64>,
    /// L, ns.
    pub lateness_ns: Option<u64>,
    /// M, ns.
    pub min_sleep_ns: Option<u64>,
}

/// This host's name and kernel release.
pub fn host_and_kernel() -> (String, String) {
    let k = MachineKey::current(None);
    (k.host, k.kernel)
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

/// Measurement steps of one timer's calibration (for the progress bar).
fn timer_steps(s: &Settings) -> u64 {
    3 + ROUNDS * sweep_rates(s).len() as u64 + SWEEP_NS.len() as u64
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
    progress: &ProgressBar,
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
            progress.inc(1);
        }
    }
    let spreads: Vec<Spread> = extra.iter().map(|e| Spread::of(e)).collect();
    let at_main = rates
        .iter()
        .position(|&r| r == s.rate_hz)
        .map_or(main.median_ns, |i| spreads[i].median_ns);
    let tolerance = (0.5 * (main.p90_ns - main.p10_ns)).max(1_000.0);
    let consistent = (at_main - main.median_ns).abs() <= tolerance;
    let anchored: Vec<f64> = spreads
        .iter()
        .map(|sp| main.median_ns + (sp.median_ns - at_main))
        .collect();
    let weights: Vec<f64> = spreads.iter().map(|sp| sp.samples.max(1) as f64).collect();
    let monotone = non_increasing(&anchored, &weights);
    let points = rates
        .iter()
        .zip(&spreads)
        .zip(monotone)
        .map(|((&rate_hz, sp), o)| RatePoint {
            rate_hz,
            overhead_median_ns: o,
            sweep_median_ns: sp.median_ns,
            overhead_p90_ns: sp.p90_ns,
            samples: sp.samples,
        })
        .collect();
    Ok((points, consistent))
}

/// The weighted least-squares non-increasing fit of `values` (pool adjacent violators).
fn non_increasing(values: &[f64], weights: &[f64]) -> Vec<f64> {
    // Blocks of (mean, weight, length); a block larger than its predecessor merges into it.
    let mut blocks: Vec<(f64, f64, usize)> = Vec::with_capacity(values.len());
    for (&v, &w) in values.iter().zip(weights) {
        blocks.push((v, w, 1));
        while blocks.len() > 1 && blocks[blocks.len() - 1].0 > blocks[blocks.len() - 2].0 {
            let (m2, w2, n2) = blocks.pop().unwrap_or_default();
            if let Some(b) = blocks.last_mut() {
                *b = ((b.0 * b.1 + m2 * w2) / (b.1 + w2), b.1 + w2, b.2 + n2);
            }
        }
    }
    blocks
        .iter()
        .flat_map(|&(m, _, n)| std::iter::repeat_n(m, n))
        .collect()
}

impl TimerCalibration {
    /// Measures O, the spin cost, L and M for `timer`, advancing `progress` by `timer_steps`.
    fn measure(
        timer: TimerKind,
        clock: &Clock,
        threshold: u64,
        s: &Settings,
        progress: &ProgressBar,
    ) -> Result<Self, EmulatorError> {
        progress.set_message(format!("{timer:?}"));
        let o = measure_injection(
            timer,
            clock,
            threshold,
            s.rate_hz,
            1,
            s.overhead_duration_ns,
        )?;
        let overhead = Spread::of(&o.extra_ns);
        progress.inc(1);
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
        progress.inc(1);
        let lateness = Spread::of(&measure_lateness(timer, s.interval_ns, s.lateness_samples)?);
        progress.inc(1);
        let (sweep, tolerance_ns) = lateness_sweep(&lateness, |interval_ns| {
            let l = measure_lateness(timer, interval_ns, s.sweep_samples);
            progress.inc(1);
            l.map(|v| Spread::of(&v))
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
    /// with a progress bar on a terminal and one line on stderr otherwise.
    pub fn measure(clock: &Clock, s: &Settings) -> Result<Self, EmulatorError> {
        let threshold = default_threshold();
        let key = MachineKey::current(None);
        let progress = ProgressBar::new(2 * timer_steps(s));
        if progress.is_hidden() {
            eprintln!("calibrating the emulator on this machine (about 20 s)");
        } else {
            progress.set_style(
                ProgressStyle::with_template(
                    "calibrating {msg:8} [{bar:30}] {pos}/{len} steps, eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
        }
        let itimer = TimerCalibration::measure(TimerKind::Itimer, clock, threshold, s, &progress)?;
        let abstime =
            TimerCalibration::measure(TimerKind::Abstime, clock, threshold, s, &progress)?;
        progress.finish_and_clear();
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
        })
    }

    /// The calibration of one timer kind.
    pub fn timer(&self, timer: TimerKind) -> &TimerCalibration {
        match timer {
            TimerKind::Itimer => &self.itimer,
            TimerKind::Abstime => &self.abstime,
        }
    }

    /// Plan options for `timer`: O = median overhead (and O after a gap from the rate sweep,
    /// when it agreed with the main run), L = median lateness (robust against the rare
    /// preemptions that dominate the mean; unused with absolute deadlines), M = min sleep;
    /// overrides win (a given O holds for every gap).
    pub fn plan_options(
        &self,
        timer: TimerKind,
        scale: f64,
        fraction: f64,
        overrides: &Overrides,
    ) -> PlanOptions {
        let t = self.timer(timer);
        PlanOptions {
            scale,
            overhead_ns: overrides
                .overhead_ns
                .unwrap_or(t.overhead.median_ns.max(0.0).round() as u64),
            min_sleep_ns: overrides.min_sleep_ns.unwrap_or(t.min_sleep_ns),
            lateness_ns: overrides
                .lateness_ns
                .unwrap_or(t.lateness.median_ns.max(0.0).round() as u64),
            fraction,
            timer,
            overhead_by_gap: if overrides.overhead_ns.is_some() {
                OverheadByGap::default()
            } else {
                t.overhead_by_gap()
            },
        }
    }

    /// Default cache file: `cache::cache_dir()`/`calibration-<host>-<kernel>.json`.
    pub fn cache_path() -> PathBuf {
        let (host, kernel) = host_and_kernel();
        cache_dir().join(format!(
            "calibration-{}-{}.json",
            file_name_part(&host),
            file_name_part(&kernel)
        ))
    }

    /// The machine this calibration was measured on (any CPU).
    pub fn key(&self) -> MachineKey {
        MachineKey {
            host: self.host.clone(),
            kernel: self.kernel.clone(),
            cpu_model: self.cpu_model.clone(),
            cpu: None,
        }
    }

    /// Reads a cached calibration; `Ok(None)` when the file does not exist.
    pub fn load(path: &Path) -> anyhow::Result<Option<Calibration>> {
        match std::fs::read_to_string(path) {
            Ok(s) => {
                let c: Calibration = serde_json::from_str(&s).map_err(|e| {
                    anyhow::anyhow!("calibration cache {} is unreadable: {e}", path.display())
                })?;
                Ok(Some(c))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
        }
    }

    /// Writes the calibration as JSON (creating the directory).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        }
        let s = serde_json::to_string_pretty(self)?;
        jitter_trace::output::write_output_bytes(path, s.as_bytes())?;
        Ok(())
    }

    /// Lets replays take O after each gap from the rate sweep (`on`, when the sweep is
    /// consistent) or the single O (`off`).
    pub fn use_overhead_by_gap(&mut self, on: bool) {
        for t in [&mut self.itimer, &mut self.abstime] {
            t.overhead_by_rate_used = on && t.overhead_by_rate_consistent;
        }
    }

    /// The cached calibration for this host, kernel and CPU model, measured and cached if
    /// missing, stale or `refresh` (saying why on stderr).
    pub fn load_or_measure(clock: &Clock, refresh: bool) -> anyhow::Result<Calibration> {
        let path = Calibration::cache_path();
        let now = MachineKey::current(None);
        let cached = if refresh {
            None
        } else {
            Calibration::load(&path)?
        };
        match decide(
            cached.as_ref().map(Calibration::key).as_ref(),
            &now,
            refresh,
        ) {
            Decision::Reuse => {
                if let Some(c) = cached {
                    return Ok(c);
                }
            }
            Decision::Measure(why) => eprintln!("calibrating the emulator: {why}"),
        }
        let c = Calibration::measure(clock, &Settings::default())?;
        c.save(&path)?;
        Ok(c)
    }
}

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
            crate::cache::age(self.measured_unix_s, unix_now_s())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_matches_hand_computed_values() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!(s.samples, 5);
        assert_eq!(s.mean_ns, 3.0);
        assert!((s.sd_ns - 2.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.median_ns, 3.0);
        // Linear interpolation: p90 at position 3.6 between 4 and 5.
        assert!((s.p90_ns - 4.6).abs() < 1e-12);
        assert!((s.p10_ns - 1.4).abs() < 1e-12);
        assert_eq!(s.max_ns, 5.0);
        assert_eq!(Spread::of(&[]), Spread::default());
        assert_eq!(Spread::of(&[7.0]).sd_ns, 0.0);
    }

    #[test]
    fn quantiles_of_a_uniform_grid_are_exact() {
        let v: Vec<f64> = (0..=100).map(f64::from).collect();
        for q in [0.0, 0.1, 0.5, 0.99, 1.0] {
            assert!((quantile(&v, q) - 100.0 * q).abs() < 1e-9);
        }
    }

    #[test]
    fn injections_match_the_detour_that_contains_their_entry() {
        let log = |t: u64| LoggedInjection {
            entry_ticks: t,
            ..LoggedInjection::default()
        };
        let detours = [(10, 20), (30, 31), (50, 90)];
        let got = match_injections(
            &[log(5), log(15), log(31), log(40), log(60), log(95)],
            &detours,
        );
        assert_eq!(
            got,
            vec![
                None,
                Some((10, 20)),
                Some((30, 31)),
                None,
                Some((50, 90)),
                None
            ]
        );
    }

    #[test]
    fn stacked_injections_are_told_apart_from_single_ones() {
        let log = |t: u64| LoggedInjection {
            entry_ticks: t,
            ..LoggedInjection::default()
        };
        let detours = [(10, 20), (50, 90)];
        let m = match_single(&[log(15), log(55), log(60), log(70), log(95)], &detours);
        assert_eq!(m.single, vec![(0, (10, 20))]);
        assert_eq!((m.stacked, m.unmatched), (3, 1));
    }

    #[test]
    fn min_sleep_is_the_start_of_the_honoured_tail() {
        let p = |interval_ns, honoured| SweepPoint {
            interval_ns,
            honoured,
            ..SweepPoint::default()
        };
        assert_eq!(min_sleep(&[p(1, false), p(2, true), p(5, true)], 5), 2);
        // A dip below the tail does not count: honoured only if every longer interval is.
        assert_eq!(min_sleep(&[p(1, true), p(2, false), p(5, true)], 5), 5);
        assert_eq!(min_sleep(&[p(1, true), p(2, true)], 2), 1);
        assert_eq!(min_sleep(&[p(1, false), p(2, false)], 2), 2);
        // Intervals longer than the reference do not decide M.
        assert_eq!(min_sleep(&[p(1, true), p(2, true), p(9, false)], 2), 1);
    }

    #[test]
    fn periodic_streams_have_the_asked_rate_and_duty() {
        let s = periodic_stream(5_000_000, 150_000, 400);
        assert_eq!(s.records.len(), 400);
        assert_eq!(s.duration_ns(), 2_000_000_000);
        assert_eq!(s.noise_ns(), 400 * 150_000);
        s.validate(0).unwrap();
    }

    #[test]
    fn overrides_replace_measured_values_and_lateness_is_the_median() {
        let mut c = Calibration::default();
        c.itimer.overhead.median_ns = 20_400.0;
        c.itimer.lateness.mean_ns = 30_000.0;
        c.itimer.lateness.median_ns = 28_000.0;
        c.itimer.min_sleep_ns = 5_000;
        let o = c.plan_options(TimerKind::Itimer, 3.0, 0.5, &Overrides::default());
        assert_eq!(
            (
                o.overhead_ns,
                o.lateness_ns,
                o.min_sleep_ns,
                o.scale,
                o.fraction
            ),
            (20_400, 28_000, 5_000, 3.0, 0.5)
        );
        let o = c.plan_options(
            TimerKind::Itimer,
            1.0,
            1.0,
            &Overrides {
                overhead_ns: Some(1),
                lateness_ns: Some(2),
                min_sleep_ns: Some(3),
            },
        );
        assert_eq!((o.overhead_ns, o.lateness_ns, o.min_sleep_ns), (1, 2, 3));
    }

    #[test]
    fn the_cache_round_trips_and_is_keyed_by_host_and_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x/cal.json");
        assert!(Calibration::load(&path).unwrap().is_none());
        let mut c = Calibration {
            host: "h".into(),
            ..Calibration::default()
        };
        c.itimer.sweep.push(SweepPoint::default());
        c.save(&path).unwrap();
        assert_eq!(Calibration::load(&path).unwrap().unwrap(), c);
        std::fs::write(&path, "{").unwrap();
        assert!(Calibration::load(&path).is_err());
        let p = Calibration::cache_path();
        let (host, _) = host_and_kernel();
        assert!(p.to_string_lossy().contains(&host), "{}", p.display());
    }

    fn point(rate_hz: u64, o_ns: f64) -> RatePoint {
        RatePoint {
            rate_hz,
            overhead_median_ns: o_ns,
            sweep_median_ns: o_ns,
            overhead_p90_ns: o_ns,
            samples: 100,
        }
    }

    #[test]
    fn the_rate_sweep_becomes_o_after_a_gap_when_it_agreed_with_the_main_run() {
        let mut c = Calibration::default();
        c.abstime.overhead.median_ns = 6_000.0;
        c.abstime.overhead_by_rate = vec![point(100, 10_000.0), point(1_000, 6_000.0)];
        c.abstime.overhead_by_rate_consistent = true;
        c.use_overhead_by_gap(true);
        assert!(c.abstime.overhead_by_rate_used && !c.itimer.overhead_by_rate_used);
        let o = c.plan_options(TimerKind::Abstime, 1.0, 1.0, &Overrides::default());
        assert_eq!(o.overhead_ns, 6_000);
        assert_eq!(
            o.overhead_by_gap.points(),
            &[(1_000_000, 6_000), (10_000_000, 10_000)]
        );
        assert_eq!(o.overhead_after(Some(5_000_000)), {
            let t = (5e6f64.ln() - 1e6f64.ln()) / (1e7f64.ln() - 1e6f64.ln());
            (6_000.0 + t * 4_000.0 + 0.5) as u64
        });
        assert_eq!(o.overhead_after(None), 6_000);
        // A given O holds for every gap.
        let fixed = Overrides {
            overhead_ns: Some(7),
            ..Overrides::default()
        };
        let o = c.plan_options(TimerKind::Abstime, 1.0, 1.0, &fixed);
        assert_eq!((o.overhead_after(Some(50_000_000)), o.overhead_ns), (7, 7));
        // Not asked for, or a sweep that disagreed with the main run: the single O.
        c.use_overhead_by_gap(false);
        let o = c.plan_options(TimerKind::Abstime, 1.0, 1.0, &Overrides::default());
        assert!(o.overhead_by_gap.points().is_empty());
        c.abstime.overhead_by_rate_consistent = false;
        c.use_overhead_by_gap(true);
        let o = c.plan_options(TimerKind::Abstime, 1.0, 1.0, &Overrides::default());
        assert!(o.overhead_by_gap.points().is_empty());
        assert_eq!(o.overhead_after(Some(50_000_000)), 6_000);
    }

    #[test]
    fn calibrations_cached_before_the_rate_sweep_still_load() {
        let mut v = serde_json::to_value(Calibration::default()).unwrap();
        v["itimer"]
            .as_object_mut()
            .unwrap()
            .remove("overhead_by_rate");
        let c: Calibration = serde_json::from_value(v).unwrap();
        assert!(c.itimer.overhead_by_rate.is_empty());
    }

    #[test]
    fn the_rate_curve_is_made_non_increasing_by_weighted_pooling() {
        assert_eq!(non_increasing(&[], &[]), Vec::<f64>::new());
        assert_eq!(
            non_increasing(&[9.0, 7.0, 5.0], &[1.0; 3]),
            vec![9.0, 7.0, 5.0]
        );
        // 7.26 after 7.05 pools to their weighted mean; 6.44 after 5.24 likewise.
        let f = non_increasing(&[7.0, 8.0, 5.0, 6.0], &[1.0, 3.0, 1.0, 1.0]);
        assert_eq!(f, vec![7.75, 7.75, 5.5, 5.5]);
        let f = non_increasing(&[1.0, 2.0, 3.0], &[1.0; 3]);
        assert_eq!(f, vec![2.0, 2.0, 2.0]);
    }
}
