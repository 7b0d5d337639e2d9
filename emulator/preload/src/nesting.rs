//! The one rule of a call reached twice: **the outermost wrapper acts**. Every wrapper is
//! exported under both names of its function, `MPI_X` and `PMPI_X` (Fortran bindings, ROMIO and
//! other PMPI tools call the `PMPI_` names), so one call of the program can enter this library
//! twice: `MPI_File_open` whose implementation calls `PMPI_Allreduce`, a `mpi_send_` of the
//! Fortran binding that reaches `PMPI_Send` under a tool that wrapped `MPI_Send`. The first
//! wrapper a thread enters records the call (`profiling`), pays at it (`paying`) and counts the
//! barrier's phase; a wrapper entered while the thread is inside another forwards its
//! arguments untouched.
//!
//! The guard is one thread-local flag: no allocation, no lock, no system call, so it is
//! async-signal-safe (a signal handler's MPI call inside a wrapper is forwarded untouched). The
//! flag is a `const`-initialised `Cell` without a destructor, which Rust keeps in the thread's
//! static TLS block directly (no lazy registration); in a library loaded at start
//! (`LD_PRELOAD`, or linked) that block is allocated with the thread, so its access never
//! allocates.

use std::cell::Cell;

thread_local! {
    /// This thread is inside a wrapper.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// The thread's outermost wrapper, for as long as it lives.
pub(crate) struct Outermost(());

impl Outermost {
    /// `Some` when the calling thread is in no other wrapper of this library.
    #[inline]
    pub(crate) fn enter() -> Option<Outermost> {
        INSIDE.with(|inside| {
            if inside.get() {
                None
            } else {
                inside.set(true);
                Some(Outermost(()))
            }
        })
    }
}

impl Drop for Outermost {
    #[inline]
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(false));
    }
}

/// `outer()` from the thread's outermost wrapper, else `nested()` (the bare forward).
#[inline]
pub(crate) fn outermost<T>(nested: impl FnOnce() -> T, outer: impl FnOnce() -> T) -> T {
    match Outermost::enter() {
        Some(_outer) => outer(),
        None => nested(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_outermost_entry_acts_and_the_flag_clears_on_its_return() {
        let acted = outermost(
            || 0,
            || {
                let inner = outermost(|| 1, || 2);
                assert_eq!(inner, 1, "a wrapper inside a wrapper forwards");
                3
            },
        );
        assert_eq!(acted, 3);
        assert_eq!(outermost(|| 1, || 2), 2, "the flag is clear again");
        let other = std::thread::spawn(|| {
            let _held = Outermost::enter().expect("a new thread is outermost");
            std::thread::spawn(|| Outermost::enter().is_some())
                .join()
                .unwrap()
        });
        assert!(other.join().unwrap(), "the flag is per thread");
    }
}
