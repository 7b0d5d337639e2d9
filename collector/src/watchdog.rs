//! The watchdog of real-time threads: RLIMIT_RTTIME bounds the real-time CPU time a thread may
//! take without blocking, so that a bug in a SCHED_FIFO loop (the collector's probes, the
//! emulator's injector) ends the process instead of holding a CPU for ever.

use nix::errno::Errno;

/// The real-time CPU time a thread of the process may take without blocking (a sleep, a wait)
/// before the watchdog ends the process: at `limit` the kernel sends SIGXCPU, whose handler
/// says so in one line and exits with status 1 (no core file); one second later SIGKILL
/// (RLIMIT_RTTIME's hard limit), in case the handler cannot run. The limit and the SIGXCPU
/// disposition are restored on drop.
#[derive(Debug)]
pub struct Watchdog {
    old: libc::rlimit,
    old_action: nix::sys::signal::SigAction,
}

impl Watchdog {
    /// Arms the watchdog for every real-time thread of this process.
    pub fn arm(limit: std::time::Duration) -> Result<Watchdog, Errno> {
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `old` is a valid, writable rlimit.
        if unsafe { libc::getrlimit(libc::RLIMIT_RTTIME, &mut old) } != 0 {
            return Err(Errno::last());
        }
        let us = limit.as_micros().min(u128::from(u64::MAX / 2)) as libc::rlim_t;
        // Never above a hard limit already set (raising it needs CAP_SYS_RESOURCE).
        let max = us.saturating_add(1_000_000).min(old.rlim_max);
        let new = libc::rlimit {
            rlim_cur: us.min(max),
            rlim_max: max,
        };
        let handler = nix::sys::signal::SigAction::new(
            nix::sys::signal::SigHandler::Handler(on_sigxcpu),
            nix::sys::signal::SaFlags::empty(),
            nix::sys::signal::SigSet::empty(),
        );
        // SAFETY: `on_sigxcpu` is async-signal-safe (write and _exit only).
        let old_action =
            unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGXCPU, &handler) }?;
        // SAFETY: `new` is a valid rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_RTTIME, &new) } != 0 {
            let e = Errno::last();
            // SAFETY: puts back the disposition that was there.
            let _ = unsafe {
                nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGXCPU, &old_action)
            };
            return Err(e);
        }
        Ok(Watchdog { old, old_action })
    }
}

/// The RLIMIT_RTTIME of process `pid` (0: this one) as (soft, hard) µs: what a watchdog armed
/// there allows (`RLIM_INFINITY`, `u64::MAX`, when none is).
pub fn limits_of(pid: i32) -> Result<(u64, u64), Errno> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new limit only reads the old one into `r`, a valid, writable rlimit.
    if unsafe { libc::prlimit(pid, libc::RLIMIT_RTTIME, std::ptr::null(), &mut r) } != 0 {
        return Err(Errno::last());
    }
    Ok((r.rlim_cur, r.rlim_max))
}

extern "C" fn on_sigxcpu(_: libc::c_int) {
    const MSG: &[u8] = b"error: the real-time watchdog stopped this process: a SCHED_FIFO thread \
ran past its limit without sleeping (RLIMIT_RTTIME)\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe; MSG is a static buffer.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        libc::_exit(1);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // SAFETY: restores the limit read in `arm` (raising a hard limit back needs the same
        // privilege that lowered it; failing leaves the stricter limit, which is safe).
        unsafe { libc::setrlimit(libc::RLIMIT_RTTIME, &self.old) };
        // SAFETY: puts back the SIGXCPU disposition that was there before `arm`.
        let _ = unsafe {
            nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGXCPU, &self.old_action)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rttime() -> (u64, u64) {
        limits_of(0).unwrap()
    }

    #[test]
    fn arming_sets_the_limit_and_dropping_restores_it() {
        let before = rttime();
        // Far above anything a test thread does at real-time priority.
        let w = Watchdog::arm(Duration::from_secs(1000)).unwrap();
        let max = 1_001_000_000u64.min(before.1);
        assert_eq!(rttime(), (1_000_000_000u64.min(max), max));
        drop(w);
        if before.1 >= max {
            // The hard limit can only go back up with CAP_SYS_RESOURCE.
            let now = rttime();
            assert!(now == before || now.1 == max, "{now:?} vs {before:?}");
        }
    }
}
