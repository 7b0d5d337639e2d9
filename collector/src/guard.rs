//! What a collection changes in its process, undone on drop: the signal handlers that set the
//! stop flag (and remove the tracefs instance on a second signal), memory locked with
//! `mlockall`, and SIGXFSZ ignored.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{CollectError, Context, Result};
use crate::tracefs;

/// Signal handlers that set the stop flag, removed on drop.
#[derive(Debug, Default)]
pub(crate) struct SignalGuard {
    ids: Vec<signal_hook::SigId>,
}

impl SignalGuard {
    pub(crate) fn install(stop: &Arc<AtomicBool>, attribute: bool) -> Result<Self> {
        let mut guard = SignalGuard::default();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            if attribute {
                // Registered first, so it runs before the exit below: on the second signal
                // (the stop flag already set) the tracefs instance is removed before exiting.
                let flag = stop.clone();
                // SAFETY: the action only loads atomics and calls rmdir(2), which is
                // async-signal-safe (`tracefs::remove_in_signal_handler`).
                let id = unsafe {
                    signal_hook::low_level::register(sig, move || {
                        if flag.load(Ordering::SeqCst) {
                            tracefs::remove_in_signal_handler();
                        }
                    })
                }
                .context("cannot install the signal handler")?;
                guard.ids.push(id);
            }
            // A second signal while stopping ends the process at once (exit status 130).
            let id = signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
                .context("cannot install the signal handler")?;
            guard.ids.push(id);
            let id = signal_hook::flag::register(sig, stop.clone())
                .context("cannot install the signal handler")?;
            guard.ids.push(id);
        }
        Ok(guard)
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Linux's MCL_ONFAULT: lock pages as they are faulted in, not all at once.
const MCL_ONFAULT: libc::c_int = 4;

/// Memory locked with mlockall for the duration of a collection; unlocked on drop.
#[derive(Debug)]
pub(crate) struct MemoryLock;

impl MemoryLock {
    pub(crate) fn acquire() -> Result<Self> {
        // SAFETY: mlockall has no memory-safety preconditions.
        let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | MCL_ONFAULT) };
        if rc != 0 {
            return Err(CollectError::last_os("mlockall"));
        }
        Ok(MemoryLock)
    }
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        // SAFETY: munlockall has no memory-safety preconditions.
        unsafe {
            libc::munlockall();
        }
    }
}

/// Makes writes past RLIMIT_FSIZE fail with EFBIG instead of killing the process.
pub(crate) fn ignore_sigxfsz() {
    // SAFETY: installing SIG_IGN for SIGXFSZ replaces no Rust handler and is async-signal-safe;
    // it makes writes past RLIMIT_FSIZE fail with EFBIG instead of killing the process.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGXFSZ,
            nix::sys::signal::SigHandler::SigIgn,
        );
    }
}
