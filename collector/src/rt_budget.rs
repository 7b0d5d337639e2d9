//! The real-time budget: the share of each real-time period (1 s by default) that this
//! process's SCHED_FIFO and SCHED_RR tasks may run, the kernel's (`sched_rt_runtime_us` of
//! `sched_rt_period_us`, 950 ms of 1 s by default) and, under cgroup v1 with real-time group
//! scheduling, its `cpu` group's (`cpu.rt_runtime_us` of `cpu.rt_period_us`; a new group's is 0).
//! Real-time tasks that spin for more than that within one period are throttled for the rest of
//! it, every real-time task of the group on that CPU with them: a measurement that spins at
//! SCHED_FIFO beside a real-time injector stays within it.

use std::path::{Path, PathBuf};

/// Where the cgroup-v1 `cpu` controller is mounted.
pub(crate) const CPU_ROOT: &str = "/sys/fs/cgroup/cpu";

/// The share of every real-time period this process's real-time tasks may run: the smaller of
/// the kernel's and its cgroup-v1 `cpu` group's; 1.0 where neither limits it (a runtime of −1,
/// cgroup v2, nothing readable).
pub fn share() -> f64 {
    share_in(
        Path::new("/proc/sys/kernel"),
        Path::new("/proc/self/cgroup"),
        Path::new(CPU_ROOT),
    )
}

/// [`share`] from the kernel's settings in `sysctl` and the group `self_cgroup` names under
/// `cpu_root`.
fn share_in(sysctl: &Path, self_cgroup: &Path, cpu_root: &Path) -> f64 {
    let kernel = ratio(
        &sysctl.join("sched_rt_runtime_us"),
        &sysctl.join("sched_rt_period_us"),
    );
    let group = cpu_group(self_cgroup, cpu_root)
        .and_then(|g| ratio(&g.join("cpu.rt_runtime_us"), &g.join("cpu.rt_period_us")));
    [kernel, group].into_iter().flatten().fold(1.0, f64::min)
}

/// A runtime of a period, both µs, as a share; `None` when unlimited (−1) or unreadable.
fn ratio(runtime: &Path, period: &Path) -> Option<f64> {
    let read = |p: &Path| -> Option<i64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let (r, p) = (read(runtime)?, read(period)?);
    (r >= 0 && p > 0).then(|| r as f64 / p as f64)
}

/// The cgroup-v1 `cpu` group of the process whose `/proc/PID/cgroup` is `self_cgroup`, under
/// `cpu_root`; `None` for the root group, cgroup v2 or nothing readable.
pub(crate) fn cpu_group(self_cgroup: &Path, cpu_root: &Path) -> Option<PathBuf> {
    let listing = std::fs::read_to_string(self_cgroup).ok()?;
    let rel = listing.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers
            .split(',')
            .any(|c| c == "cpu")
            .then(|| path.trim_start_matches('/').to_string())
    })?;
    (!rel.is_empty()).then(|| cpu_root.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel granting `kernel` (runtime, period) and a process in group `jobs/42` granted
    /// `group`, if any.
    fn fixture(kernel: (&str, &str), group: Option<(&str, &str)>) -> (tempfile::TempDir, f64) {
        let dir = tempfile::tempdir().unwrap();
        let sysctl = dir.path().join("sys");
        std::fs::create_dir_all(&sysctl).unwrap();
        std::fs::write(sysctl.join("sched_rt_runtime_us"), kernel.0).unwrap();
        std::fs::write(sysctl.join("sched_rt_period_us"), kernel.1).unwrap();
        let self_cgroup = dir.path().join("cgroup");
        let root = dir.path().join("cpu");
        match group {
            Some((r, p)) => {
                std::fs::write(&self_cgroup, "2:memory:/x\n1:cpuacct,cpu:/jobs/42\n").unwrap();
                std::fs::create_dir_all(root.join("jobs/42")).unwrap();
                std::fs::write(root.join("jobs/42/cpu.rt_runtime_us"), r).unwrap();
                std::fs::write(root.join("jobs/42/cpu.rt_period_us"), p).unwrap();
            }
            None => std::fs::write(&self_cgroup, "0::/user.slice\n").unwrap(),
        }
        let s = share_in(&sysctl, &self_cgroup, &root);
        (dir, s)
    }

    #[test]
    fn the_smaller_of_the_kernels_and_the_groups_share_binds() {
        assert_eq!(fixture(("950000\n", "1000000\n"), None).1, 0.95);
        assert_eq!(
            fixture(("950000", "1000000"), Some(("900000", "1000000"))).1,
            0.9
        );
        assert_eq!(
            fixture(("500000", "1000000"), Some(("900000", "1000000"))).1,
            0.5
        );
        assert_eq!(
            fixture(("950000", "1000000"), Some(("0", "1000000"))).1,
            0.0
        );
    }

    #[test]
    fn an_unlimited_or_unreadable_budget_is_the_whole_period() {
        assert_eq!(fixture(("-1", "1000000"), None).1, 1.0);
        assert_eq!(fixture(("-1", "1000000"), Some(("-1", "1000000"))).1, 1.0);
        assert_eq!(fixture(("x", "1000000"), None).1, 1.0);
    }
}
