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
    /// `EPERM`: `jitter_collect::rt_refusal::explain` says why.
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

    /// The calling thread's policy, priority and CPUs.
    fn thread_state() -> (libc::c_int, libc::c_int, Vec<usize>) {
        // SAFETY: query only.
        let policy = unsafe { libc::sched_getscheduler(0) };
        let mut p = libc::sched_param { sched_priority: 0 };
        // SAFETY: `p` is a valid, writable sched_param.
        assert_eq!(unsafe { libc::sched_getparam(0, &mut p) }, 0);
        let set = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cpus = (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect();
        (policy, p.sched_priority, cpus)
    }

    #[test]
    fn nested_guards_restore_policy_priority_and_affinity_in_turn() {
        // A thread of its own: the test harness's thread keeps its state whatever happens.
        std::thread::spawn(|| {
            let before = thread_state();
            let cpu = *before.2.last().unwrap();
            let outer = match Realtime::enter(20, None) {
                Ok(g) => g,
                Err(e) => return assert_eq!(e, Errno::EPERM),
            };
            let at_fifo = thread_state();
            assert_eq!((at_fifo.0, at_fifo.1), (libc::SCHED_FIFO, 20));
            assert_eq!(at_fifo.2, before.2);
            let inner = Realtime::enter(10, Some(cpu)).unwrap();
            assert_eq!(thread_state(), (libc::SCHED_FIFO, 10, vec![cpu]));
            drop(inner);
            assert_eq!(thread_state(), at_fifo);
            drop(outer);
            assert_eq!(thread_state(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_refused_priority_leaves_the_affinity_as_it_was() {
        std::thread::spawn(|| {
            let before = thread_state();
            let cpu = *before.2.last().unwrap();
            // 100 is above SCHED_FIFO's range (1..=99): refused after pinning, which is undone.
            assert_eq!(Realtime::enter(100, Some(cpu)).unwrap_err(), Errno::EINVAL);
            assert_eq!(thread_state(), before);
        })
        .join()
        .unwrap();
    }
}
