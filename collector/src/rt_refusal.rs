//! Why the kernel refused a real-time policy: the message that names the cause a user can act
//! on. `EPERM` from `sched_setscheduler` has three causes: no CAP_SYS_NICE (and no
//! RLIMIT_RTPRIO allowance), or, for root too, a cgroup-v1 `cpu` group that grants real-time
//! tasks no runtime (`cpu.rt_runtime_us` = 0, the default of every new group when the kernel
//! has real-time group scheduling; batch systems and container runtimes create such groups).

use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::rt_budget::{self, CPU_ROOT};

/// One line saying why SCHED_FIFO (or SCHED_RR) was refused with `errno`, and what to do.
pub fn explain(errno: Errno) -> String {
    if errno != Errno::EPERM {
        return format!("the kernel refused it: {errno}");
    }
    if let Some(group) = zero_runtime_group(Path::new("/proc/self/cgroup"), Path::new(CPU_ROOT)) {
        return format!(
            "this process's cpu cgroup grants real-time tasks no time ({}/cpu.rt_runtime_us is 0): \
             give the group a share of the parent's, or run outside it",
            group.display()
        );
    }
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        "the kernel refused it to root (a security module or a container's limit?)".to_string()
    } else {
        "this needs root or CAP_SYS_NICE (`setcap cap_sys_nice+ep` on the binary) or an RLIMIT_RTPRIO \
         allowance".to_string()
    }
}

/// The cgroup-v1 `cpu` group of this process when it is not the root group and its
/// `cpu.rt_runtime_us` reads 0; `None` otherwise (cgroup v2, the root group, no such file).
fn zero_runtime_group(self_cgroup: &Path, cpu_root: &Path) -> Option<PathBuf> {
    let group = rt_budget::cpu_group(self_cgroup, cpu_root)?;
    let runtime = std::fs::read_to_string(group.join("cpu.rt_runtime_us")).ok()?;
    (runtime.trim() == "0").then_some(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(cgroup: &str, runtime: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let self_cgroup = dir.path().join("cgroup");
        std::fs::write(&self_cgroup, cgroup).unwrap();
        let root = dir.path().join("cpu");
        if let Some(r) = runtime {
            std::fs::create_dir_all(root.join("jobs/42")).unwrap();
            std::fs::write(root.join("jobs/42/cpu.rt_runtime_us"), r).unwrap();
        }
        (dir, self_cgroup, root)
    }

    #[test]
    fn a_v1_group_without_realtime_runtime_is_named() {
        let (_d, c, root) = fixture("4:memory:/x\n1:cpu,cpuacct:/jobs/42\n0::/\n", Some("0\n"));
        assert_eq!(zero_runtime_group(&c, &root), Some(root.join("jobs/42")));
    }

    #[test]
    fn a_group_with_runtime_the_root_group_and_cgroup_v2_are_not_blamed() {
        let (_d, c, root) = fixture("1:cpu:/jobs/42\n", Some("950000\n"));
        assert_eq!(zero_runtime_group(&c, &root), None);
        let (_d, c, root) = fixture("1:cpu:/\n", Some("0\n"));
        assert_eq!(zero_runtime_group(&c, &root), None);
        let (_d, c, root) = fixture("0::/user.slice\n", None);
        assert_eq!(zero_runtime_group(&c, &root), None);
        // `cpuset` is not `cpu`.
        let (_d, c, root) = fixture("3:cpuset:/jobs/42\n", Some("0\n"));
        assert_eq!(zero_runtime_group(&c, &root), None);
    }

    #[test]
    fn other_errors_are_passed_on() {
        assert!(explain(Errno::EINVAL).contains("Invalid argument"));
    }
}
