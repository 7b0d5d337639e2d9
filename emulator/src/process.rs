//! The separate-process injector (paper 001 §III-C option 2): a process pinned to the target CPU
//! at SCHED_FIFO sleeps until each injection's absolute deadline (`clock_nanosleep` with
//! `TIMER_ABSTIME`, drift-free) and busy-spins for its length, so any unmodified program on that
//! CPU loses the trace's time.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use jitter_collect::clock::{read_counter, Clock};

use crate::injector::mono_ns;
use crate::plan::Cursor;

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
        (plan, crate::cli::counter_clock().unwrap())
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
