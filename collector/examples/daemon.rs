//! A synthetic daemon (as in paper 000): pinned to one CPU at SCHED_FIFO, it wakes every
//! PERIOD_US and spins SPIN_US, for SECS seconds. Usage: `daemon CPU PERIOD_US SPIN_US SECS [PRIO]`.

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
    while Instant::now() < end {
        next = next + step;
        let _ = clock_nanosleep(
            ClockId::CLOCK_MONOTONIC,
            ClockNanosleepFlags::TIMER_ABSTIME,
            &next,
        );
        spin_until(read_counter() + spin);
    }
    Ok(())
}
