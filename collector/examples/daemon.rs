//! A synthetic daemon (as in paper 000): pinned to one CPU at SCHED_FIFO, it wakes every
//! PERIOD_US and spins SPIN_US, for SECS seconds. Usage: `daemon CPU PERIOD_US SPIN_US SECS [PRIO]`.
//! At the end it prints its wake-up lateness (deadline → first instruction after the sleep):
//! `wake-lateness-median-ns N` and `wake-lateness-p95-ns N`.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use jitter_collect::clock::{read_counter, spin_until, Clock};
use jitter_collect::cpuset;
use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, clock_nanosleep, ClockId, ClockNanosleepFlags};

fn main() -> Result<()> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().with_context(|| format!("bad number {a:?}")))
        .collect::<Result<_>>()?;
    let [cpu, period_us, spin_us, secs, rest @ ..] = args.as_slice() else {
        bail!("usage: daemon CPU PERIOD_US SPIN_US SECS [PRIO]");
    };
    let prio = rest.first().copied().unwrap_or(50) as i32;
    let clock = Clock::calibrate(Duration::from_millis(200))?;
    cpuset::pin_current_thread(&[*cpu as u32])?;
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: valid sched_param; pid 0 is this thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error()).context("cannot set SCHED_FIFO");
    }
    let spin = clock.ns_to_ticks(spin_us * 1000);
    let step = TimeSpec::from(Duration::from_micros(*period_us));
    let mut next = clock_gettime(ClockId::CLOCK_MONOTONIC)?;
    let end = Instant::now() + Duration::from_secs(*secs);
    let mut late = Vec::with_capacity((*secs * 1_000_000 / (*period_us).max(1)) as usize + 1);
    while Instant::now() < end {
        next = next + step;
        let _ = clock_nanosleep(
            ClockId::CLOCK_MONOTONIC,
            ClockNanosleepFlags::TIMER_ABSTIME,
            &next,
        );
        let woke = clock_gettime(ClockId::CLOCK_MONOTONIC)?;
        spin_until(read_counter() + spin);
        late.push(Duration::from(woke - next).as_nanos() as u64);
    }
    late.sort_unstable();
    if !late.is_empty() {
        println!("wake-lateness-median-ns {}", late[late.len() / 2]);
        println!("wake-lateness-p95-ns {}", late[late.len() * 95 / 100]);
    }
    Ok(())
}
