//! Real-time scheduling for the measuring thread and the separate-process injector: SCHED_FIFO
//! and CPU pinning, restored on drop; and the watchdog that keeps a runaway real-time loop from
//! holding a CPU for ever (RLIMIT_RTTIME, `jitter_collect::watchdog`).

use nix::errno::Errno;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// The watchdog of real-time threads (RLIMIT_RTTIME), shared with the collector's probes.
pub use jitter_collect::watchdog::Watchdog;

/// The calling thread at SCHED_FIFO (and optionally pinned) until dropped.
#[derive(Debug)]
pub struct Realtime {
    old_policy: libc::c_int,
    old_priority: libc::c_int,
    old_affinity: Option<CpuSet>,
}

impl Realtime {
    /// Puts the calling thread at SCHED_FIFO `priority`, pinned to `cpu` if given.
    /// `EPERM` means the process lacks CAP_SYS_NICE (or an RLIMIT_RTPRIO allowance).
    pub fn enter(priority: i32, cpu: Option<usize>) -> Result<Realtime, Errno> {
        // SAFETY: sched_getscheduler(0) queries the calling thread; no memory is passed.
        let old_policy = unsafe { libc::sched_getscheduler(0) };
        if old_policy < 0 {
            return Err(Errno::last());
        }
        let mut old = libc::sched_param { sched_priority: 0 };
        // SAFETY: `old` is a valid, writable sched_param.
        if unsafe { libc::sched_getparam(0, &mut old) } != 0 {
            return Err(Errno::last());
        }
        let old_affinity = match cpu {
            Some(c) => {
                let before = sched_getaffinity(Pid::from_raw(0))?;
                let mut set = CpuSet::new();
                set.set(c)?;
                sched_setaffinity(Pid::from_raw(0), &set)?;
                Some(before)
            }
            None => None,
        };
        let p = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: `p` is a valid sched_param; pid 0 is the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
            let e = Errno::last();
            if let Some(a) = &old_affinity {
                let _ = sched_setaffinity(Pid::from_raw(0), a);
            }
            return Err(e);
        }
        Ok(Realtime {
            old_policy,
            old_priority: old.sched_priority,
            old_affinity,
        })
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        let p = libc::sched_param {
            sched_priority: self.old_priority,
        };
        // SAFETY: restores the calling thread's previous policy with a valid sched_param.
        unsafe { libc::sched_setscheduler(0, self.old_policy, &p) };
        if let Some(a) = &self.old_affinity {
            let _ = sched_setaffinity(Pid::from_raw(0), a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_is_entered_and_restored_or_refused_with_eperm() {
        // SAFETY: query only.
        let before = unsafe { libc::sched_getscheduler(0) };
        match Realtime::enter(10, None) {
            Ok(g) => {
                // SAFETY: query only.
                assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_FIFO);
                drop(g);
                // SAFETY: query only.
                assert_eq!(unsafe { libc::sched_getscheduler(0) }, before);
            }
            Err(e) => assert_eq!(e, Errno::EPERM),
        }
    }
}
