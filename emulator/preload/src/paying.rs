//! `JITTER_INJECT=boundary`: the rank pays its detours at its MPI calls ([`Boundary`]) instead
//! of being interrupted by a timer signal. Every wrapper of [`crate::calls`] goes through here.
//!
//! * A call that returns at once ([`local`]): the detours due while the rank computed since its
//!   last call are paid at the entry, then the call is forwarded.
//! * A call that may wait ([`blocking`]): the same at the entry; then its nonblocking twin is
//!   started and its request polled, paying each detour at its time between two polls (nothing
//!   progresses while the rank spins: a detour's effect). A collective always takes its twin
//!   (MPI does not match a blocking collective with a nonblocking one, so every rank must choose
//!   alike); a point-to-point call or a wait takes it only when an injection may fall due before
//!   the call's likely end (the call's own recent duration, [`Estimate`]). A call forwarded
//!   blocking (no twin, or none due soon) pays on return, for the part that reaches past the
//!   return, a detour that nevertheless fell due inside it (counted apart: `on_return`).
//!
//! **Only the thread that called `MPI_Init` replays**: a call from another thread is forwarded
//! untouched (under `MPI_THREAD_MULTIPLE` the other threads' time is not disturbed). A call the
//! MPI library makes to an `MPI_`/`PMPI_` function from inside a wrapped call is forwarded
//! untouched too (`nesting`: the outermost wrapper acts); the state's own re-entry flag below
//! keeps its exclusive use whatever calls it.
//!
//! **Hot path** (no detour due): a relaxed load, `pthread_self`, one counter read and a compare;
//! a blocking call adds one counter read after it. No allocation, no lock, no system call: the
//! state lives in a static only the replaying thread touches, guarded by the owner check and a
//! re-entry flag.

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use jitter_collect::clock::read_counter;
use jitter_emulator::{Boundary, LedgerStats, PhaseShares};

/// Storage for one `MPI_Request` (a pointer in OpenMPI, an `int` in MPICH).
pub(crate) type Request = u64;

/// What the replaying thread's calls did.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CallCounts {
    /// MPI calls that were boundaries (made by the replaying thread, not from inside another).
    pub calls: u64,
    /// Calls that may wait and were made nonblocking and polled (a detour was due soon).
    pub polled: u64,
    /// Calls that may wait and were forwarded blocking (no detour due before their likely end).
    pub blocking: u64,
    /// Calls that may wait and have no nonblocking twin (always forwarded blocking).
    pub without_twin: u64,
    /// The phases (ended by `MPI_Barrier`) and their shares.
    pub phases: PhaseShares,
}

/// The state of the replaying thread.
struct State {
    boundary: Boundary,
    /// Counter reading when the last call that may wait returned.
    returned: u64,
    counts: CallCounts,
}

struct Slot(UnsafeCell<Option<State>>);

// SAFETY: only the thread recorded in `OWNER` reads or writes the cell, and only while it holds
// `INSIDE` (see `Inside::enter`): there is never more than one reference to it.
unsafe impl Sync for Slot {}

static SLOT: Slot = Slot(UnsafeCell::new(None));
/// Set while a replay runs in this mode: the wrappers' first test.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// `pthread_self()` of the thread that replays.
static OWNER: AtomicUsize = AtomicUsize::new(0);
/// The replaying thread is inside a wrapper (written by that thread only).
static INSIDE: AtomicBool = AtomicBool::new(false);

/// The replaying thread's exclusive use of the state, for one outermost wrapper.
struct Inside(&'static mut State);

impl Inside {
    /// The state, if this is the replaying thread's outermost MPI call of a running replay.
    #[inline]
    fn enter() -> Option<Inside> {
        if !ACTIVE.load(Ordering::Relaxed) {
            return None;
        }
        // SAFETY: pthread_self has no preconditions.
        if unsafe { libc::pthread_self() } as usize != OWNER.load(Ordering::Relaxed) {
            return None;
        }
        if INSIDE.load(Ordering::Relaxed) {
            return None;
        }
        INSIDE.store(true, Ordering::Relaxed);
        // SAFETY: this is the owner thread and it was not inside: no other reference exists
        // (module docs); `stop` takes the state out only on this thread, outside any wrapper.
        let state = unsafe { (*SLOT.0.get()).as_mut() };
        match state {
            Some(s) => Some(Inside(s)),
            None => {
                INSIDE.store(false, Ordering::Relaxed);
                None
            }
        }
    }

    /// Counts the call and pays what the computing before it owes; the counter reading after.
    #[inline]
    fn entry(&mut self) -> u64 {
        self.0.counts.calls += 1;
        let tick = read_counter();
        if self.0.boundary.owes(tick) {
            self.0.boundary.settle()
        } else {
            tick
        }
    }
}

impl Drop for Inside {
    #[inline]
    fn drop(&mut self) {
        INSIDE.store(false, Ordering::Relaxed);
    }
}

/// A call's recent duration, counter ticks: the horizon within which a due detour makes the
/// next call nonblocking. It jumps up to a longer call and decays by 1/8 of the gap per
/// shorter one. Written by the replaying thread only.
#[derive(Debug)]
pub(crate) struct Estimate(AtomicU64);

impl Estimate {
    /// No call seen yet: the first is forwarded blocking (and measured).
    pub(crate) const fn new() -> Estimate {
        Estimate(AtomicU64::new(0))
    }

    #[inline]
    fn horizon(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    fn record(&self, ticks: u64) {
        let e = self.horizon();
        let next = if ticks >= e {
            ticks
        } else {
            e - (e - ticks) / 8
        };
        self.0.store(next, Ordering::Relaxed);
    }
}

/// The nonblocking form of a call: given the function that pays what is due between two
/// polls, it starts the twin and polls it to completion; its MPI return code.
pub(crate) type Polled<'a> = &'a mut dyn FnMut(&mut dyn FnMut()) -> c_int;

/// A boundary that forwards no call (`MPI_Finalize`, before the profile records it): pays what
/// the computing since the last call owes.
pub(crate) fn boundary() {
    if let Some(mut inside) = Inside::enter() {
        inside.entry();
    }
}

/// A call that returns at once: pays at its entry, then forwards it.
#[inline]
pub(crate) fn local(call: impl FnOnce() -> c_int) -> c_int {
    let Some(mut inside) = Inside::enter() else {
        return call();
    };
    inside.entry();
    call()
}

/// How a call that may wait chooses between its blocking form and its nonblocking twin.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Choice<'a> {
    /// A collective: always the twin. MPI does not match a blocking collective with a
    /// nonblocking one, and every rank must choose alike without asking the others.
    Collective,
    /// A point-to-point call or a wait (they match either form): the twin only when a detour
    /// may fall due within the call's recent duration.
    Local(&'a Estimate),
}

/// A call that may wait: `call` forwards it blocking; `polled`, where the call has a
/// nonblocking twin, runs that twin to completion paying between polls (module docs).
#[inline]
pub(crate) fn blocking(
    choice: Choice<'_>,
    call: impl FnOnce() -> c_int,
    polled: Option<Polled<'_>>,
) -> c_int {
    let Some(mut inside) = Inside::enter() else {
        return call();
    };
    let tick = inside.entry();
    let st = &mut *inside.0;
    let soon = match choice {
        Choice::Collective => true,
        Choice::Local(est) => st.boundary.due_within(tick, est.horizon()),
    };
    match polled {
        Some(run) if soon => {
            st.counts.polled += 1;
            let b = &mut st.boundary;
            let rc = run(&mut || {
                if b.owes(read_counter()) {
                    b.poll();
                }
            });
            let returned = read_counter();
            st.returned = st.boundary.after_polled(tick, returned);
            if let Choice::Local(est) = choice {
                est.record(returned.wrapping_sub(tick));
            }
            rc
        }
        twin => {
            if twin.is_some() {
                st.counts.blocking += 1;
            } else {
                st.counts.without_twin += 1;
            }
            let rc = call();
            let returned = read_counter();
            if let Choice::Local(est) = choice {
                est.record(returned.wrapping_sub(tick));
            }
            st.returned = if st.boundary.owes(returned) {
                st.boundary.after_blocking(tick, returned)
            } else {
                returned
            };
            rc
        }
    }
}

/// Polls with `test` (it sets its flag when the operation completed; MPI return code) until
/// done, calling `pay` between two polls.
pub(crate) fn until_done(
    pay: &mut dyn FnMut(),
    mut test: impl FnMut(*mut c_int) -> c_int,
) -> c_int {
    loop {
        let mut flag: c_int = 0;
        let rc = test(&mut flag);
        if rc != 0 || flag != 0 {
            return rc;
        }
        pay();
    }
}

/// Starts the replay on this thread (after `PMPI_Init`).
pub(crate) fn start(boundary: Boundary) {
    // SAFETY: not active yet: no wrapper touches the cell (ACTIVE is published below).
    unsafe {
        *SLOT.0.get() = Some(State {
            boundary,
            returned: read_counter(),
            counts: CallCounts::default(),
        })
    };
    // SAFETY: pthread_self has no preconditions.
    OWNER.store(unsafe { libc::pthread_self() } as usize, Ordering::Relaxed);
    ACTIVE.store(true, Ordering::Release);
}

/// After a barrier (the last call that may wait): one phase ended (its fidelity is noted), and
/// a resync to `offset` if given. Only on the replaying thread.
pub(crate) fn end_phase(offset: Option<u64>) -> bool {
    let Some(inside) = Inside::enter() else {
        return false;
    };
    let st = &mut *inside.0;
    if let Some(offset) = offset {
        // At the barrier's return, where the predictor resyncs: a detour due after it on the
        // old segment was never met.
        st.boundary.resync_at(offset, st.returned);
    }
    // After the resync: a detour the jump passed unpaid belongs to the phase that ended.
    st.counts.phases.end_phase(&st.boundary.stats());
    offset.is_some()
}

/// What a replay in this mode did, at its end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stopped {
    /// The ledger's account.
    pub ledger: LedgerStats,
    /// The calls' counts.
    pub calls: CallCounts,
    /// Replay time from the start, ns.
    pub elapsed_ns: u64,
    /// Share of the stream replayed.
    pub progress: f64,
}

/// Ends the replay (on the replaying thread, at `MPI_Finalize`). `None` when it does not run
/// here.
pub(crate) fn stop() -> Option<Stopped> {
    let inside = Inside::enter()?;
    ACTIVE.store(false, Ordering::Release);
    drop(inside);
    // SAFETY: the owner thread, outside any wrapper, with ACTIVE cleared: nothing else touches
    // the cell again.
    let mut st = unsafe { (*SLOT.0.get()).take() }?;
    // The end is a boundary: what the computing before it owes is paid.
    st.boundary.settle();
    let (elapsed_ns, progress) = (st.boundary.now_ns(), st.boundary.progress());
    Some(Stopped {
        ledger: st.boundary.finish(),
        calls: st.counts,
        elapsed_ns,
        progress,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_horizon_jumps_to_a_longer_call_and_decays_by_an_eighth_of_the_gap() {
        let e = Estimate::new();
        assert_eq!(e.horizon(), 0);
        e.record(8_000);
        assert_eq!(e.horizon(), 8_000);
        e.record(0);
        assert_eq!(e.horizon(), 7_000);
        e.record(7_800);
        assert_eq!(e.horizon(), 7_800);
    }

    #[test]
    fn a_call_outside_a_replay_is_forwarded_untouched() {
        assert_eq!(local(|| 7), 7);
        let est = Estimate::new();
        let mut polled = |_: &mut dyn FnMut()| -> c_int { panic!("no replay runs: not polled") };
        assert_eq!(blocking(Choice::Collective, || 3, Some(&mut polled)), 3);
        assert_eq!(blocking(Choice::Local(&est), || 4, None), 4);
        assert_eq!(est.horizon(), 0, "nothing measured outside a replay");
        assert!(stop().is_none());
    }
}
