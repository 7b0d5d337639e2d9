//! `jitter-collect daemon`: a synthetic daemon (paper 000 §IV-B) that wakes every period on one
//! CPU, runs for its busy time, and reports its wake-up lateness: noise of known source, period
//! and length, to check attribution and collection against.

use std::ffi::CString;
use std::time::{Duration, Instant};

use jitter_trace::units::parse_positive_duration;
use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, clock_nanosleep, ClockId, ClockNanosleepFlags};

use crate::clock::{read_counter, spin_until, Clock};
use crate::cpuset;
use crate::error::{refuse, CollectError, Context, Result};
use crate::watchdog::Watchdog;

/// Arguments of `jitter-collect daemon`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct DaemonArgs {
    /// Time between wake-ups: `10ms`, `10.5ms`, `250us`, ...
    #[cfg_attr(feature = "cli", arg(long))]
    pub period: String,
    /// Busy time per wake-up (spun on the CPU).
    #[cfg_attr(feature = "cli", arg(long))]
    pub busy: String,
    /// Task name (what attribution reports as `task:<name>`; at most 15 bytes).
    #[cfg_attr(feature = "cli", arg(long, default_value = "daemon"))]
    pub name: String,
    /// CPU to run on.
    #[cfg_attr(feature = "cli", arg(long))]
    pub cpu: u32,
    /// Run at SCHED_FIFO with this priority (1-99; `--rt` alone: 50), so it preempts a probe.
    #[cfg_attr(feature = "cli", arg(long, num_args = 0..=1, default_missing_value = "50"))]
    pub rt: Option<i32>,
    /// How long to run.
    #[cfg_attr(feature = "cli", arg(short = 'd', long, default_value = "10s"))]
    pub duration: String,
}

/// What a daemon run did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DaemonRun {
    /// Wake-ups.
    pub wakeups: u64,
    /// Median wake-up lateness (deadline to the first instruction after the sleep), ns.
    pub lateness_median_ns: u64,
    /// 95th percentile of the wake-up lateness, ns.
    pub lateness_p95_ns: u64,
}

/// The checked settings of a daemon.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    period: Duration,
    busy: Duration,
    name: CString,
    duration: Duration,
}

/// The longest run a daemon accepts.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

impl DaemonArgs {
    fn settings(&self) -> Result<Settings> {
        let period = parse_positive_duration(&self.period).context("--period")?;
        let busy = parse_positive_duration(&self.busy).context("--busy")?;
        let duration = parse_positive_duration(&self.duration).context("--duration")?;
        if period < Duration::from_micros(100) {
            refuse!(
                "--period {}: at least 100us (the daemon sleeps between wake-ups)",
                self.period
            );
        }
        if busy >= period {
            refuse!(
                "--busy {} must be shorter than --period {}: the daemon would never sleep",
                self.busy,
                self.period
            );
        }
        if duration > MAX_DURATION {
            refuse!("--duration {}: at most 24h", self.duration);
        }
        // The CPU must exist, be online and in this process's mask (the rule of --cpus).
        cpuset::select(Some(&cpuset::CpuList::from_ids(vec![self.cpu])))
            .map_err(|e| CollectError::Refused(format!("--cpu {}: {e}", self.cpu)))?;
        if let Some(p) = self.rt.filter(|p| !(1..=99).contains(p)) {
            refuse!("--rt {p}: a priority is 1-99");
        }
        if self.name.is_empty() || self.name.len() > 15 {
            refuse!(
                "--name `{}`: 1 to 15 bytes (the kernel's task name length)",
                self.name
            );
        }
        let name = CString::new(self.name.clone()).map_err(|e| {
            CollectError::Refused(format!("--name `{}` holds a NUL byte: {e}", self.name))
        })?;
        Ok(Settings {
            period,
            busy,
            name,
            duration,
        })
    }
}

/// Runs the daemon in this thread and prints its wake-up lateness when the time is up.
pub fn run(args: &DaemonArgs) -> Result<DaemonRun> {
    let s = args.settings()?;
    let clock = Clock::for_tools().context("counter frequency")?;
    nix::sys::prctl::set_name(&s.name).context("cannot set the task name")?;
    cpuset::pin_current_thread(&[args.cpu])
        .with_context(|| format!("cannot run on CPU {}", args.cpu))?;
    // Busy time per period is below the period: the thread sleeps every period, so a watchdog
    // of one second without sleep only trips on a bug.
    let _watchdog = match args.rt {
        Some(prio) => {
            let w = Watchdog::arm(Duration::from_secs(1) + s.busy)
                .context("cannot arm the real-time watchdog (RLIMIT_RTTIME)")?;
            let param = libc::sched_param {
                sched_priority: prio,
            };
            // SAFETY: `param` is a valid sched_param; pid 0 is this thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                return Err(CollectError::Refused(format!(
                    "cannot set SCHED_FIFO: {}",
                    crate::rt_refusal::explain(nix::errno::Errno::last())
                )));
            }
            Some(w)
        }
        None => None,
    };
    let spin = clock.ns_to_ticks(s.busy.as_nanos() as u64);
    let step = TimeSpec::from(s.period);
    let wakeups = (s.duration.as_nanos() / s.period.as_nanos()) as usize + 1;
    let mut late = Vec::with_capacity(wakeups);
    let mut next = clock_gettime(ClockId::CLOCK_MONOTONIC).context("clock_gettime")?;
    let end = Instant::now() + s.duration;
    while Instant::now() < end {
        next = next + step;
        let _ = clock_nanosleep(
            ClockId::CLOCK_MONOTONIC,
            ClockNanosleepFlags::TIMER_ABSTIME,
            &next,
        );
        let woke = clock_gettime(ClockId::CLOCK_MONOTONIC).context("clock_gettime")?;
        spin_until(read_counter() + spin);
        late.push(Duration::from(woke - next).as_nanos() as u64);
    }
    if late.is_empty() {
        return Err(CollectError::Failed("the daemon never woke up".into()));
    }
    late.sort_unstable();
    Ok(DaemonRun {
        wakeups: late.len() as u64,
        lateness_median_ns: late[late.len() / 2],
        lateness_p95_ns: late[late.len() * 95 / 100],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(period: &str, busy: &str) -> DaemonArgs {
        DaemonArgs {
            period: period.into(),
            busy: busy.into(),
            name: "d1".into(),
            cpu: 0,
            rt: None,
            duration: "1s".into(),
        }
    }

    #[test]
    fn settings_take_durations_and_refuse_a_daemon_that_never_sleeps() {
        let s = args("10.5ms", "300us").settings().unwrap();
        assert_eq!(s.period, Duration::from_micros(10_500));
        assert_eq!(s.busy, Duration::from_micros(300));
        let e = args("1ms", "1ms").settings().unwrap_err().to_string();
        assert!(e.contains("never sleep"), "{e}");
        assert!(args("50us", "10us").settings().is_err());
        let long = DaemonArgs {
            name: "a-name-of-16-byt".into(),
            ..args("10ms", "1ms")
        };
        assert!(format!("{:#}", long.settings().unwrap_err()).contains("15 bytes"));
        let prio = DaemonArgs {
            rt: Some(0),
            ..args("10ms", "1ms")
        };
        assert!(prio.settings().is_err());
    }
}
