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

/// The least share under which a real-time task that spins still runs for most of each period:
/// below it `jitter-collect --sched` refuses without `--force` (its probes would record mostly
/// the throttle).
pub(crate) const SPIN_SHARE: f64 = 0.5;

/// The binding limit on this process's real-time tasks: the smaller share of the kernel's and
/// its cgroup-v1 `cpu` group's.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The share of each period real-time tasks may run, 0 to 1.
    pub share: f64,
    /// The period, µs.
    pub period_us: i64,
    /// The file that sets it (`…/sched_rt_runtime_us` or `…/cpu.rt_runtime_us`).
    pub set_by: PathBuf,
}

impl Limit {
    /// Whether a real-time task that spins would be stopped for most of each period (a share
    /// below half of it, `SPIN_SHARE`).
    pub fn stops_spinning(&self) -> bool {
        self.share < SPIN_SHARE
    }

    /// One line: what a real-time task that spins is granted and where that is set.
    pub fn line(&self) -> String {
        let period_ms = self.period_us as f64 / 1e3;
        format!(
            "real-time tasks may run {:.0} ms of every {period_ms:.0} ms ({}): one that spins is \
             stopped for up to {:.0} ms of each",
            self.share * period_ms,
            self.set_by.display(),
            (1.0 - self.share) * period_ms
        )
    }
}

/// The share of every real-time period this process's real-time tasks may run: the smaller of
/// the kernel's and its cgroup-v1 `cpu` group's; 1.0 where neither limits it (a runtime of −1,
/// cgroup v2, nothing readable).
pub fn share() -> f64 {
    limit().map_or(1.0, |l| l.share)
}

/// The binding limit on this process's real-time tasks; `None` where nothing limits them.
pub fn limit() -> Option<Limit> {
    limit_in(
        Path::new("/proc/sys/kernel"),
        Path::new("/proc/self/cgroup"),
        Path::new(CPU_ROOT),
    )
}

/// [`limit`] from the kernel's settings in `sysctl` and the group `self_cgroup` names under
/// `cpu_root`.
fn limit_in(sysctl: &Path, self_cgroup: &Path, cpu_root: &Path) -> Option<Limit> {
    let kernel = ratio(
        &sysctl.join("sched_rt_runtime_us"),
        &sysctl.join("sched_rt_period_us"),
    );
    let group = cpu_group(self_cgroup, cpu_root)
        .and_then(|g| ratio(&g.join("cpu.rt_runtime_us"), &g.join("cpu.rt_period_us")));
    [kernel, group]
        .into_iter()
        .flatten()
        .min_by(|a, b| a.share.total_cmp(&b.share))
}

/// The limit a runtime file and its period file (both µs) set; `None` when unlimited (−1) or
/// unreadable.
fn ratio(runtime: &Path, period: &Path) -> Option<Limit> {
    let read = |p: &Path| -> Option<i64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let (r, p) = (read(runtime)?, read(period)?);
    (r >= 0 && p > 0).then(|| Limit {
        share: r as f64 / p as f64,
        period_us: p,
        set_by: runtime.to_path_buf(),
    })
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
    fn fixture(
        kernel: (&str, &str),
        group: Option<(&str, &str)>,
    ) -> (tempfile::TempDir, Option<Limit>) {
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
        let l = limit_in(&sysctl, &self_cgroup, &root);
        (dir, l)
    }

    /// The share `fixture` finds, 1.0 where nothing limits it (as [`share`]).
    fn share_of(f: (tempfile::TempDir, Option<Limit>)) -> f64 {
        f.1.map_or(1.0, |l| l.share)
    }

    #[test]
    fn the_smaller_of_the_kernels_and_the_groups_share_binds() {
        let p = "1000000";
        for (kernel, group, want) in [
            (("950000\n", "1000000\n"), None, 0.95),
            (("950000", p), Some(("900000", p)), 0.9),
            (("500000", p), Some(("900000", p)), 0.5),
            (("950000", p), Some(("0", p)), 0.0),
            // Unlimited (−1) or unreadable: the whole period.
            (("-1", p), None, 1.0),
            (("-1", p), Some(("-1", p)), 1.0),
            (("x", p), None, 1.0),
        ] {
            assert_eq!(
                share_of(fixture(kernel, group)),
                want,
                "{kernel:?} {group:?}"
            );
        }
    }

    #[test]
    fn the_binding_limit_names_its_file_and_what_a_spinning_task_loses() {
        let (_d, l) = fixture(("950000", "1000000"), Some(("50000", "1000000")));
        let l = l.unwrap();
        assert!(l.set_by.ends_with("cpu/jobs/42/cpu.rt_runtime_us"), "{l:?}");
        let line = l.line();
        assert!(
            line.contains("50 ms of every 1000 ms") && line.contains("up to 950 ms"),
            "{line}"
        );
        let (_d, l) = fixture(("950000", "1000000"), None);
        assert!(l.unwrap().set_by.ends_with("sys/sched_rt_runtime_us"));
        assert_eq!(fixture(("-1", "1000000"), None).1, None);
    }
}
