//! The machine's load while a calibration is measured: the evidence that says whether O, L and
//! M are the injector's own costs or include other work's.
//!
//! `/proc/stat`'s aggregate `cpu` line is read before and after the measurement; its busy time
//! (user, nice, system, irq, softirq, steal) less this process's own CPU time (`getrusage`) is
//! what other work, and the hypervisor, took. Over the CPU time this process left, that share is
//! [`MachineLoad::others_busy_share`]. A calibration with a share above [`BUSY_SHARE`] was taken
//! on a busy machine: it is flagged when written and not reused from the cache (measured again).

use serde::{Deserialize, Serialize};

/// Above this share of the CPU time the calibration left, other work (or steal) ran beside it:
/// more than half, the rule `jitter_trace::sanity` applies to a busy probe.
pub(crate) const BUSY_SHARE: f64 = 0.5;

/// What else ran while a calibration was measured.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct MachineLoad {
    /// Share of the CPU time this process did not use that other work and steal took.
    pub others_busy_share: f64,
    /// Of it, steal (the hypervisor gave the CPU to another guest), share of the same time.
    pub steal_share: f64,
    /// `/proc/loadavg`'s 1-minute average at the end.
    pub loadavg_1m: f64,
    /// Online CPUs.
    pub cpus: usize,
    /// Wall time the load was observed over, s.
    pub seconds: f64,
}

impl MachineLoad {
    /// Why the calibration cannot be trusted as the injector's own cost, or `None`.
    pub fn busy(&self) -> Option<String> {
        (self.others_busy_share > BUSY_SHARE).then(|| {
            format!(
                "other work took {:.0} % of the CPU time left to the calibration (steal {:.0} %, \
                 load average {:.2} on {} CPUs) over {:.1} s",
                self.others_busy_share * 100.0,
                self.steal_share * 100.0,
                self.loadavg_1m,
                self.cpus,
                self.seconds
            )
        })
    }
}

/// Busy, steal and total time of all CPUs, ns, from `/proc/stat`'s text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CpuTimes {
    /// user + nice + system + irq + softirq + steal.
    pub busy_ns: u64,
    /// steal.
    pub steal_ns: u64,
    /// busy + idle + iowait.
    pub total_ns: u64,
}

/// The aggregate `cpu` line of `/proc/stat` in ns, with `tick_ns` per USER_HZ tick.
pub(crate) fn parse_cpu_times(stat: &str, tick_ns: u64) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = v[..] else {
        return None;
    };
    let busy = user + nice + system + irq + softirq + steal;
    Some(CpuTimes {
        busy_ns: busy * tick_ns,
        steal_ns: steal * tick_ns,
        total_ns: (busy + idle + iowait) * tick_ns,
    })
}

/// The load between two snapshots: `own_ns` CPU time of this process between them.
pub(crate) fn load_between(
    before: CpuTimes,
    after: CpuTimes,
    own_ns: u64,
    (loadavg_1m, cpus, seconds): (f64, usize, f64),
) -> MachineLoad {
    let total = after.total_ns.saturating_sub(before.total_ns);
    let busy = after.busy_ns.saturating_sub(before.busy_ns);
    let steal = after.steal_ns.saturating_sub(before.steal_ns);
    let left = total.saturating_sub(own_ns);
    let share = |x: u64| {
        if left == 0 {
            0.0
        } else {
            (x as f64 / left as f64).clamp(0.0, 1.0)
        }
    };
    MachineLoad {
        others_busy_share: share(busy.saturating_sub(own_ns)),
        steal_share: share(steal),
        loadavg_1m,
        cpus,
        seconds,
    }
}

/// A load observation in progress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadProbe {
    before: CpuTimes,
    own_before_ns: u64,
    tick_ns: u64,
    started: std::time::Instant,
}

impl LoadProbe {
    /// Starts observing; `None` where `/proc/stat` or USER_HZ is not available.
    pub fn start() -> Option<LoadProbe> {
        let hz = jitter_collect::environment::user_hz().filter(|&h| h > 0)?;
        let tick_ns = 1_000_000_000 / hz;
        Some(LoadProbe {
            before: read_cpu_times(tick_ns)?,
            own_before_ns: own_cpu_ns(),
            tick_ns,
            started: std::time::Instant::now(),
        })
    }

    /// The load since [`LoadProbe::start`]; `None` where `/proc/stat` became unreadable.
    pub fn finish(self) -> Option<MachineLoad> {
        let after = read_cpu_times(self.tick_ns)?;
        let own = own_cpu_ns().saturating_sub(self.own_before_ns);
        let loadavg = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(f64::NAN);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let seconds = self.started.elapsed().as_secs_f64();
        Some(load_between(
            self.before,
            after,
            own,
            (loadavg, cpus, seconds),
        ))
    }
}

fn read_cpu_times(tick_ns: u64) -> Option<CpuTimes> {
    parse_cpu_times(&std::fs::read_to_string("/proc/stat").ok()?, tick_ns)
}

/// CPU time (user + system) of this process so far, ns.
fn own_cpu_ns() -> u64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).map_or(0, |u| {
        let ns = |t: nix::sys::time::TimeVal| {
            (t.tv_sec().max(0) as u64) * 1_000_000_000 + (t.tv_usec().max(0) as u64) * 1000
        };
        ns(u.user_time()) + ns(u.system_time())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n";

    #[test]
    fn cpu_times_come_from_the_aggregate_line() {
        let t = parse_cpu_times(STAT, 10_000_000).unwrap();
        assert_eq!(t.busy_ns, 150 * 10_000_000);
        assert_eq!(t.total_ns, 1000 * 10_000_000);
        assert_eq!(parse_cpu_times("cpu0 1 2 3\n", 1), None);
        assert_eq!(parse_cpu_times("cpu  1 2 x 4 5 6 7 8\n", 1), None);
    }

    #[test]
    fn the_calibration_s_own_time_is_not_load_and_others_over_half_is_busy() {
        let t = |busy: u64, steal: u64, total: u64| CpuTimes {
            busy_ns: busy,
            steal_ns: steal,
            total_ns: total,
        };
        let at = (2.5, 2, 20.0);
        // 2 CPUs for 20 s (40 s of CPU time): the calibration used 20 s of it, others 5 s of
        // the 20 s left: 25 %, quiet enough.
        let quiet = load_between(t(0, 0, 0), t(25, 0, 40), 20, at);
        assert!((quiet.others_busy_share - 0.25).abs() < 1e-12);
        assert_eq!(quiet.busy(), None);
        // Others took 15 s of the 20 s left, 3 s of it steal: 75 %, busy, with its evidence.
        let busy = load_between(t(0, 0, 0), t(35, 3, 40), 20, at);
        assert!((busy.steal_share - 0.15).abs() < 1e-12);
        assert_eq!(
            busy.busy().unwrap(),
            "other work took 75 % of the CPU time left to the calibration (steal 15 %, load \
             average 2.50 on 2 CPUs) over 20.0 s"
        );
        // Exactly half is not over it; nothing left to share is no evidence of load.
        assert_eq!(load_between(t(0, 0, 0), t(30, 0, 40), 20, at).busy(), None);
        assert_eq!(
            load_between(t(0, 0, 0), t(40, 0, 40), 40, at).others_busy_share,
            0.0
        );
    }
}
