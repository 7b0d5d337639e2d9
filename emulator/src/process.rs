//! The separate-process injector (paper 001 §III-C option 2): a process pinned to the target CPU
//! at SCHED_FIFO sleeps until each injection's absolute deadline (`clock_nanosleep` with
//! `TIMER_ABSTIME`, drift-free) and busy-spins for its length, so any unmodified program on that
//! CPU loses the trace's time. Its own cost on the victim (O), its wake-up lateness (L) and the
//! shortest sleep it honours (M) are calibrated on the CPU it injects on (`ProcessCalibration`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use jitter_collect::clock::{read_counter, Clock};

use crate::cache::{
    cache_dir, decide, file_name_part, read_json, unix_now_s, write_json, Decision, MachineKey,
};
use crate::calibration::{
    default_threshold, lateness_sweep, match_single, min_sleep, periodic_stream, probe_detours,
    Spread, SweepPoint, MIN_MATCHED_PERCENT,
};
use crate::injector::{mono_ns, LoggedInjection};
use crate::plan::{Cursor, Plan, TimerKind};
use crate::realtime::Realtime;
use crate::setup::{InjectionCost, ReplaySetup};

/// What a separate-process replay did.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ProcessStats {
    /// Injections executed.
    pub injected: u64,
    /// Σ busy time, ns.
    pub busy_ns: u64,
    /// Mean wake-up lateness against the due time, ns.
    pub lateness_mean_ns: f64,
    /// Largest wake-up lateness, ns.
    pub lateness_max_ns: u64,
    /// Replay time, ns.
    pub elapsed_ns: u64,
    /// True when a stop request ended the replay (rather than its end or the duration).
    pub interrupted: bool,
}

/// Sleeps until CLOCK_MONOTONIC `deadline_ns`; false if a signal interrupted the sleep.
fn sleep_until(deadline_ns: u64) -> bool {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remaining time is not requested (absolute sleep).
    let rc = unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
    rc == 0
}

/// Replays `cursor` in this thread from now for at most `duration_ns` (replay time), until the
/// cursor ends or `stop` is set (checked after every wake-up; a signal interrupts the sleep).
pub fn replay(cursor: Cursor, clock: &Clock, duration_ns: u64, stop: &AtomicBool) -> ProcessStats {
    replay_with(cursor, clock, duration_ns, stop, |_, _| {})
}

/// `replay`, calling `on_injection(counter at wake-up, busy ns)` after each injection's spin
/// (it must not allocate: it runs between two injections).
pub(crate) fn replay_with(
    cursor: Cursor,
    clock: &Clock,
    duration_ns: u64,
    stop: &AtomicBool,
    mut on_injection: impl FnMut(u64, u64),
) -> ProcessStats {
    let origin = mono_ns();
    let end = origin.saturating_add(duration_ns);
    let mut st = ProcessStats::default();
    let mut lateness_sum = 0i128;
    for inj in cursor {
        let due = origin + inj.due_ns;
        if due >= end {
            break;
        }
        while mono_ns() < due {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if !sleep_until(due) && stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if stop.load(Ordering::Relaxed) {
            st.interrupted = true;
            break;
        }
        let woke = read_counter();
        let now = mono_ns();
        let late = now as i64 - due as i64;
        // Bounded: the planned busy time, never past the replay's end, and a stop request
        // (SIGINT/SIGTERM set `stop`) ends it at once.
        let busy = inj.busy_ns.min(end.saturating_sub(now));
        let until = woke + clock.ns_to_ticks(busy);
        while read_counter() < until {
            if stop.load(Ordering::Relaxed) {
                st.interrupted = true;
                break;
            }
            core::hint::spin_loop();
        }
        on_injection(woke, busy);
        st.injected += 1;
        st.busy_ns += busy;
        lateness_sum += i128::from(late);
        st.lateness_max_ns = st.lateness_max_ns.max(late.max(0) as u64);
        if st.interrupted {
            break;
        }
    }
    st.elapsed_ns = mono_ns() - origin;
    if st.injected > 0 {
        st.lateness_mean_ns = lateness_sum as f64 / st.injected as f64;
    }
    st
}

/// How the separate-process injector is calibrated on its CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessSettings {
    /// Injection rate of the O run, Hz.
    pub rate_hz: u64,
    /// Busy spin of each O-run injection, ns (O is the victim's detour minus it).
    pub busy_ns: u64,
    /// Length of the O run, ns; with the victim's lead it stays under the kernel's real-time
    /// budget (950 ms per second by default), so throttling does not land inside it.
    pub overhead_duration_ns: u64,
    /// Reference interval of L, ns.
    pub interval_ns: u64,
    /// Sleeps measured for L.
    pub lateness_samples: usize,
    /// Sleeps measured per interval of the M sweep.
    pub sweep_samples: usize,
}

impl Default for ProcessSettings {
    fn default() -> Self {
        ProcessSettings {
            rate_hz: 500,
            busy_ns: 100_000,
            overhead_duration_ns: 600_000_000,
            interval_ns: 200_000,
            lateness_samples: 500,
            sweep_samples: 40,
        }
    }
}

/// The separate-process injector measured on one CPU: what one injection costs the program it
/// interrupts (O, seen by a victim thread on the same CPU), how late it wakes (L) and the
/// shortest sleep it honours (M).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProcessCalibration {
    /// Machine, kernel, CPU model and CPU measured on.
    pub key: MachineKey,
    /// When, s since the Unix epoch.
    pub measured_unix_s: u64,
    /// SCHED_FIFO priority of the injector.
    pub priority: i32,
    /// O: the victim's detour minus the busy spin, ns, per injection alone in its detour.
    pub overhead: Spread,
    /// Injection rate of the O run, Hz.
    pub rate_hz: u64,
    /// Busy spin of the O run's injections, ns.
    pub busy_ns: u64,
    /// O-run injections the victim did not see as a detour.
    pub unmatched: u64,
    /// O-run injections sharing one victim detour with another (left out of O).
    pub stacked: u64,
    /// L: wake-up lateness of absolute sleeps of `interval_ns` while the victim runs, ns.
    pub lateness: Spread,
    /// Reference interval of L, ns.
    pub interval_ns: u64,
    /// M: the shortest sleep honoured within `tolerance_ns`, ns.
    pub min_sleep_ns: u64,
    /// Tolerance of the M sweep, ns.
    pub tolerance_ns: f64,
    /// The sweep behind M.
    pub sweep: Vec<SweepPoint>,
}

/// Runs `f` in this thread (at SCHED_FIFO above priority 1, pinned to `cpu`) while a victim
/// thread pinned to `cpu` at SCHED_FIFO 1 runs the probe loop for `probe_ns` (started 20 ms
/// before `f`, so that it spins when `f` begins); returns `f`'s result and the victim's detours.
fn beside_victim<T>(
    clock: &Clock,
    cpu: usize,
    threshold: u64,
    probe_ns: u64,
    f: impl FnOnce() -> T,
) -> anyhow::Result<(T, Vec<(u64, u64)>)> {
    std::thread::scope(|scope| {
        let victim = scope.spawn(move || {
            let _rt = Realtime::enter(1, Some(cpu)).map_err(|e| {
                anyhow::anyhow!(
                    "cannot run the victim at SCHED_FIFO 1: {}",
                    jitter_collect::rt_refusal::explain(e)
                )
            })?;
            let (detours, _) = probe_detours(clock, threshold, probe_ns, 200_000);
            anyhow::Ok(detours)
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        let out = f();
        let detours = victim
            .join()
            .map_err(|_| anyhow::anyhow!("the calibration's victim thread panicked"))??;
        Ok((out, detours))
    })
}

/// Wake-up lateness of `n` absolute sleeps of `interval_ns` each, ns.
fn sleep_lateness(interval_ns: u64, n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let due = mono_ns() + interval_ns;
        while mono_ns() < due {
            sleep_until(due);
        }
        out.push((mono_ns() - due) as f64);
    }
    out
}

impl ProcessCalibration {
    /// What one injection from the separate process costs the program on its CPU: O and M
    /// measured; no L (it sleeps to absolute deadlines, so lateness is reported only).
    pub fn cost(&self) -> InjectionCost {
        InjectionCost {
            overhead_ns: self.overhead.median_ns.max(0.0).round() as u64,
            min_sleep_ns: self.min_sleep_ns,
            ..InjectionCost::ideal(TimerKind::Abstime)
        }
    }

    /// Measures O, L and M on `cpu` (under 2 s). The calling thread must already run at
    /// SCHED_FIFO `priority` (> 1), pinned to `cpu`, as the injector does.
    pub fn measure(
        clock: &Clock,
        cpu: usize,
        priority: i32,
        s: &ProcessSettings,
    ) -> anyhow::Result<ProcessCalibration> {
        if priority <= 1 {
            bail!("the injector's priority must be above the calibration victim's (1)");
        }
        let threshold = default_threshold();
        // O: periodic injections of `busy_ns` into a victim spinning the probe loop.
        let period = 1_000_000_000 / s.rate_hz.max(1);
        let count = s.overhead_duration_ns / period + 2;
        let opts = ReplaySetup::ideal(TimerKind::Abstime).plan_options();
        let plan = Plan::new(&periodic_stream(period, s.busy_ns.max(1), count), opts)?;
        let mut log: Vec<LoggedInjection> = Vec::with_capacity(count as usize + 16);
        let stop = AtomicBool::new(false);
        let (_, detours) = beside_victim(
            clock,
            cpu,
            threshold,
            s.overhead_duration_ns + 100_000_000,
            || {
                replay_with(
                    plan.cursor(0),
                    clock,
                    s.overhead_duration_ns,
                    &stop,
                    |woke, busy| {
                        if log.len() < log.capacity() {
                            log.push(LoggedInjection {
                                entry_ticks: woke,
                                busy_ns: busy,
                                ..LoggedInjection::default()
                            });
                        }
                    },
                )
            },
        )?;
        let m = match_single(&log, &detours);
        let logged = log.len() as u64;
        if logged == 0 || (logged - m.unmatched) * 100 < MIN_MATCHED_PERCENT * logged {
            bail!(
                "the victim saw only {} of {logged} injections on CPU {cpu} as detours, fewer \
                 than {MIN_MATCHED_PERCENT} %: O cannot be measured here (give --overhead-ns)",
                logged - m.unmatched
            );
        }
        let extra: Vec<f64> = m
            .single
            .iter()
            .map(|&(i, (a, b))| clock.ticks_to_ns_f64(b - a) - log[i].busy_ns as f64)
            .collect();
        // A pause: the victim used most of this second's real-time budget.
        std::thread::sleep(std::time::Duration::from_millis(300));
        // L and M: absolute sleeps while the victim spins (the CPU is busy when a detour is due).
        let (lm, _) = beside_victim(clock, cpu, threshold, 600_000_000, || {
            let lateness = Spread::of(&sleep_lateness(s.interval_ns, s.lateness_samples));
            let sweep = lateness_sweep(&lateness, s.sweep_samples, |interval_ns, n| {
                Ok::<_, std::convert::Infallible>(sleep_lateness(interval_ns, n))
            });
            (lateness, sweep)
        })?;
        let (lateness, sweep) = lm;
        let Ok((sweep, tolerance_ns)) = sweep;
        Ok(ProcessCalibration {
            key: MachineKey::current(Some(cpu)),
            measured_unix_s: unix_now_s(),
            priority,
            overhead: Spread::of(&extra),
            rate_hz: s.rate_hz,
            busy_ns: s.busy_ns,
            unmatched: m.unmatched,
            stacked: m.stacked,
            lateness,
            interval_ns: s.interval_ns,
            min_sleep_ns: min_sleep(&sweep, s.interval_ns),
            tolerance_ns,
            sweep,
        })
    }

    /// The cache file for `cpu` of this machine: `cache::cache_dir()`/`inject-<host>-cpu<N>.json`.
    pub fn cache_path(cpu: usize) -> PathBuf {
        let key = MachineKey::current(Some(cpu));
        cache_dir().join(format!(
            "inject-{}-cpu{cpu}.json",
            file_name_part(&key.host)
        ))
    }

    /// Reads a cached calibration; `None` when the file does not exist or is unreadable (a
    /// damaged cache is measured again).
    pub fn load(path: &std::path::Path) -> Option<ProcessCalibration> {
        read_json(path).ok().flatten()
    }

    /// Writes the calibration as JSON (creating the directory).
    pub fn save(&self, path: &std::path::Path) -> anyhow::Result<()> {
        write_json(self, path)
    }

    /// The cached calibration of `cpu` when it holds on this machine now, else measured (see
    /// `measure`) and cached; also why it was measured (None: taken from the cache).
    pub fn load_or_measure(
        clock: &Clock,
        cpu: usize,
        priority: i32,
        recalibrate: bool,
    ) -> anyhow::Result<(ProcessCalibration, Option<String>)> {
        let path = ProcessCalibration::cache_path(cpu);
        let cached = ProcessCalibration::load(&path);
        let now = MachineKey::current(Some(cpu));
        let why = match (
            decide(cached.as_ref().map(|c| &c.key), &now, recalibrate),
            cached,
        ) {
            (Decision::Reuse, Some(c)) => return Ok((c, None)),
            (Decision::Measure(why), _) => why,
            (Decision::Reuse, None) => "no calibration cached".into(),
        };
        eprintln!("calibrating the injector on CPU {cpu} (about 2 s): {why}");
        let c = ProcessCalibration::measure(clock, cpu, priority, &ProcessSettings::default())?;
        c.save(&path)?;
        Ok((c, Some(why)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use jitter_trace::{Detour, Stream};

    use crate::plan::{Plan, PlanOptions};

    /// A plan with one 5 s detour due at once, and the counter clock.
    fn one_long_detour() -> (Arc<Plan>, jitter_collect::clock::Clock) {
        let d = [Detour {
            start_ns: 1,
            run_ns: 5_000_000_000,
        }];
        let s = Stream::from_detours(0, 0, 6_000_000_000, &d).unwrap();
        let plan = Plan::new(&s, PlanOptions::ideal()).unwrap();
        (plan, Clock::for_tools().unwrap())
    }

    #[test]
    fn a_cached_process_calibration_round_trips_and_a_damaged_one_is_measured_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/inject.json");
        assert!(ProcessCalibration::load(&path).is_none());
        let c = ProcessCalibration {
            key: MachineKey::current(Some(1)),
            overhead: Spread::of(&[40_000.0, 45_000.0]),
            min_sleep_ns: 2_000,
            ..ProcessCalibration::default()
        };
        c.save(&path).unwrap();
        let back = ProcessCalibration::load(&path).unwrap();
        assert_eq!(back, c);
        assert_eq!(
            decide(Some(&back.key), &MachineKey::current(Some(1)), false),
            Decision::Reuse
        );
        let older_kernel = MachineKey {
            kernel: "0.0.1".into(),
            ..back.key.clone()
        };
        assert!(matches!(
            decide(Some(&older_kernel), &MachineKey::current(Some(1)), false),
            Decision::Measure(_)
        ));
        std::fs::write(&path, "{").unwrap();
        assert!(ProcessCalibration::load(&path).is_none());
        assert!(ProcessCalibration::cache_path(3)
            .to_string_lossy()
            .ends_with("-cpu3.json"));
    }

    #[test]
    fn a_stop_request_ends_a_long_busy_spin_at_once() {
        // Stop is requested 50 ms into the 5 s detour.
        let (plan, clock) = one_long_detour();
        let stop = Arc::new(AtomicBool::new(false));
        let setter = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                stop.store(true, Ordering::Relaxed);
            })
        };
        let t = Instant::now();
        let st = replay(plan.cursor(0), &clock, u64::MAX, &stop);
        setter.join().unwrap();
        assert!(st.interrupted);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }

    #[test]
    fn a_busy_spin_never_outlasts_the_replay() {
        let (plan, clock) = one_long_detour();
        let t = Instant::now();
        let st = replay(plan.cursor(0), &clock, 100_000_000, &AtomicBool::new(false));
        assert!(!st.interrupted);
        assert!(st.busy_ns <= 100_000_000, "{}", st.busy_ns);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
}
