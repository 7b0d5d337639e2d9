//! Call-boundary injection against the wall clock: a rank's [`Ledger`] with the cycle counter,
//! the spin, and the per-call check. No signal, no timer, no system call: the mode costs a
//! counter read and a compare per call, and a spin per detour.
//!
//! A driver (the preload library's MPI wrappers, `replay-bench run`'s collectives) calls, on the
//! one thread that replays:
//!
//! * at the entry of every call, [`Boundary::owes`] with a counter reading (the hot path: one
//!   compare against the next due time, cached in ticks) and, when it says so,
//!   [`Boundary::settle`], which pays every detour due before now in full, and those that fall due
//!   while it spins;
//! * inside a call made nonblocking, between two polls of its request, [`Boundary::poll`]: a
//!   detour due now is paid at its time, and nothing progresses while the rank spins;
//! * after a call left blocking, [`Boundary::after_blocking`]: a detour that fell due inside it
//!   holds the rank until its own end (the part past the return is spun).
//!
//! The next due time is cached as a counter value; 0 means "ask the ledger", which a driver
//! then does on its next check (the ledger asks its cursor only when needed, as the
//! predictor's walk does).

use jitter_collect::clock::{read_counter, spin_until, Clock};

use crate::injector::ReplayPosition;
use crate::ledger::{Ledger, LedgerStats, Paid};
use crate::plan::{Cursor, MAX_DETOUR_NS};

/// One rank's call-boundary replay, started at the counter reading it was made at.
#[derive(Debug, Clone)]
pub struct Boundary {
    ledger: Ledger,
    clock: Clock,
    /// Counter reading at replay time 0.
    origin: u64,
    /// Counter value from which the next injection is owed (0: unknown, `u64::MAX`: none).
    next_due: u64,
    /// Σ time spun, ns.
    spun_ns: u64,
}

impl Boundary {
    /// Starts replaying `cursor` now.
    pub fn start(cursor: Cursor, clock: Clock) -> Boundary {
        Boundary {
            ledger: Ledger::new(cursor),
            clock,
            origin: read_counter(),
            next_due: 0,
            spun_ns: 0,
        }
    }

    /// Whether something may be owed at counter value `tick` (a call's entry): the hot path.
    #[inline]
    pub fn owes(&self, tick: u64) -> bool {
        tick >= self.next_due
    }

    /// Whether an injection may fall due within `horizon` ticks of `tick` (a call expected to
    /// last that long is then made nonblocking and polled).
    #[inline]
    pub fn due_within(&self, tick: u64, horizon: u64) -> bool {
        tick.saturating_add(horizon) >= self.next_due
    }

    /// Replay time at counter value `tick`, ns.
    #[inline]
    pub(crate) fn ns_at(&self, tick: u64) -> u64 {
        self.clock.ticks_to_ns(tick.wrapping_sub(self.origin))
    }

    /// Replay time now, ns.
    pub fn now_ns(&self) -> u64 {
        self.ns_at(read_counter())
    }

    /// The counter value of replay time `ns`.
    fn tick_at(&self, ns: u64) -> u64 {
        if ns == u64::MAX {
            u64::MAX
        } else {
            self.origin
                .saturating_add(self.clock.ns_to_ticks(ns))
                .max(1)
        }
    }

    /// Caches the next due time if the ledger knows it, else marks it unknown.
    fn cache_due(&mut self) {
        self.next_due = match self.ledger.known_due_ns() {
            Some(due) => self.tick_at(due),
            None => 0,
        };
    }

    /// Spins until replay time `end_ns` (at most [`MAX_DETOUR_NS`] from `start_ns`); counts the
    /// planned span as spun. A spin that ends late (the rank was descheduled) ends the chain of
    /// payments no later: the next one starts at this one's planned end, so that the machine's
    /// own interruptions overlap the detours, as they would a real one, instead of adding debt.
    fn spin(&mut self, start_ns: u64, end_ns: u64) {
        let end_ns = end_ns.min(start_ns + MAX_DETOUR_NS);
        if end_ns > start_ns {
            spin_until(self.tick_at(end_ns));
            self.spun_ns += end_ns - start_ns;
        }
    }

    /// Pays what the computing before now owes: every injection due before now in full, each
    /// from the planned end of the previous payment. Returns the counter reading at the end.
    pub fn settle(&mut self) -> u64 {
        let mut at = self.now_ns();
        while let Some(p) = self.ledger.take(at, Paid::Boundary) {
            self.spin(p.start_ns, p.end_ns);
            at = p.end_ns;
        }
        self.cache_due();
        read_counter()
    }

    /// Inside a polled call: pays, at its time, the injection due now. Returns whether it paid.
    pub fn poll(&mut self) -> bool {
        let now = self.now_ns();
        match self.ledger.take(now, Paid::InCall) {
            Some(p) => {
                self.spin(p.start_ns, p.end_ns);
                // The call may have completed meanwhile: the caller polls it before the ledger
                // is asked for the next injection.
                self.next_due = 0;
                true
            }
            None => {
                self.cache_due();
                false
            }
        }
    }

    /// After a polled call entered at counter value `entered` completed at `returned`: a detour
    /// that fell due after the last poll holds the rank until its own end (the walk's barrier
    /// exit), counted with the payments inside polled calls. Returns the counter value of the
    /// exit.
    pub fn after_polled(&mut self, entered: u64, returned: u64) -> u64 {
        if !self.owes(returned) {
            return returned;
        }
        let how = Paid::AtCompletion {
            entered_ns: self.ns_at(entered),
            returned_ns: self.ns_at(returned),
        };
        self.pay_after(how, returned)
    }

    /// After a blocking call entered at counter value `entered` returned at `returned`: an
    /// injection due inside it holds the rank until its own end; one due before the entry is
    /// paid in full (each payment from the planned end of the previous). Returns the counter
    /// value of the exit.
    pub fn after_blocking(&mut self, entered: u64, returned: u64) -> u64 {
        let how = Paid::OnReturn {
            entered_ns: self.ns_at(entered),
            returned_ns: self.ns_at(returned),
        };
        self.pay_after(how, returned)
    }

    /// Pays what `how` owes from counter value `returned` on, each payment from the planned end
    /// of the previous one; the counter value of the planned end (`returned` if nothing was
    /// owed): where the walk leaves the call, and a resync there takes effect (a spin that
    /// ended late does not move it).
    fn pay_after(&mut self, how: Paid, returned: u64) -> u64 {
        let mut at = self.ns_at(returned);
        let mut paid = false;
        while let Some(p) = self.ledger.take(at, how) {
            self.spin(p.start_ns, p.end_ns);
            at = p.end_ns;
            paid = true;
        }
        self.cache_due();
        if paid {
            self.tick_at(at).max(returned)
        } else {
            returned
        }
    }

    /// Jumps to timeline point `offset_ns` now (settle first).
    pub fn resync(&mut self, offset_ns: u64) {
        self.resync_at(offset_ns, read_counter());
    }

    /// Jumps to timeline point `offset_ns` as of counter value `tick`, a moment just past
    /// (the return of the barrier that ends a phase: the predictor resyncs at the barrier's
    /// exit, so the time the rank took to get here is not on the old segment).
    pub fn resync_at(&mut self, offset_ns: u64, tick: u64) {
        let at = self.catch_up(self.ns_at(tick));
        self.ledger.resync(offset_ns, at);
        self.next_due = 0;
    }

    /// Pays what fell due before `at_ns` and was not paid ([`Ledger::overdue`]); the end.
    fn catch_up(&mut self, mut at_ns: u64) -> u64 {
        while let Some(p) = self.ledger.overdue(at_ns) {
            self.spin(p.start_ns, p.end_ns);
            at_ns = p.end_ns;
        }
        at_ns
    }

    /// Pauses now: nothing is owed until [`Boundary::resume`]; the timeline runs on.
    pub fn pause(&mut self) {
        let now = self.catch_up(self.now_ns());
        self.ledger.pause(now);
        self.next_due = u64::MAX;
    }

    /// Resumes where the timeline reached meanwhile.
    pub fn resume(&mut self) {
        let now = self.now_ns();
        self.ledger.resume(now);
        self.next_due = 0;
    }

    /// Where the replay stands now.
    pub fn position(&self) -> ReplayPosition {
        let now = self.now_ns();
        let c = self.ledger.cursor();
        let paid = self.ledger.stats().paid();
        ReplayPosition {
            point_now_ns: c.point_at(now),
            segment_point_ns: c.segment_point(),
            injected: paid.injections,
            injected_ns: paid.span_ns,
        }
    }

    /// Σ time spun so far, ns: what a caller subtracts to tell a call's own cost from the
    /// detours paid in it.
    pub fn spun_ns(&self) -> u64 {
        self.spun_ns
    }

    /// Share of the stream replayed by now.
    pub fn progress(&self) -> f64 {
        self.ledger.cursor().progress_at(self.now_ns())
    }

    /// True once the fraction limit was reached.
    pub fn finished(&self) -> bool {
        self.ledger.finished()
    }

    /// The account so far.
    pub fn stats(&self) -> LedgerStats {
        self.ledger.stats()
    }

    /// Ends the replay now: its account (what fell due and was not paid is paid first).
    pub fn finish(mut self) -> LedgerStats {
        let at = self.catch_up(self.now_ns());
        self.ledger.finish(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::stream;
    use crate::plan::{Plan, PlanOptions};
    use jitter_collect::clock::FrequencySource;

    fn clock() -> Clock {
        Clock::for_tools()
            .unwrap_or_else(|_| Clock::from_khz(1_000_000, FrequencySource::Given).unwrap())
    }

    /// A computing stretch longer than the replay's first detours pays them all at the next
    /// boundary: the spin ends no earlier than start + compute + Σ spans, and the account holds
    /// each detour once, late by about the compute.
    #[test]
    fn a_boundary_pays_every_detour_due_in_the_stretch_before_it() {
        // Detours of 200 µs at 0.1, 1.1 and 50 ms.
        let d = [
            (100_000, 200_000),
            (1_100_000, 200_000),
            (50_000_000, 200_000),
        ];
        let plan = Plan::new(&stream(100_000_000, &d), PlanOptions::ideal()).unwrap();
        let clock = clock();
        let mut b = Boundary::start(plan.cursor(0), clock);
        assert!(
            b.owes(read_counter()),
            "the next due time is not known before the first check"
        );
        spin_until(b.tick_at(1_500_000));
        let end = b.settle();
        // Owed at 1.5 ms: the detours at 0.1 and 1.1 ms (0.4 ms), ending ≥ 1.9 ms; the one at
        // 50 ms is not yet due then.
        let st = b.stats();
        assert_eq!(st.at_boundary.injections, 2);
        assert!(b.ns_at(end) >= 1_900_000);
        assert!(st.at_boundary.lateness_max_ns >= 1_400_000);
        assert_eq!(b.spun_ns(), 400_000);
        assert!(!b.owes(b.tick_at(49_999_999)) && b.owes(b.tick_at(50_000_000)));
        let st = b.finish();
        assert_eq!(st.missed.injections, 0);
    }
}
