//! The ledger of call-boundary injection: which detours a rank owes at a given moment of its
//! replay, and the account of what it paid. Pure (no clock, no system call, no allocation after
//! construction): the wall-clock side ([`crate::boundary`]) reads the counter and spins, a test
//! drives it in virtual time.
//!
//! A rank's replay places detours at fixed times on its timeline, exactly as the absolute-deadline
//! injector does: the plan's due times from the start or the last resync ([`Cursor`]). Instead of
//! a timer signal interrupting the rank at a due time, the rank pays what it owes when it next
//! enters an MPI call (a *boundary*): every detour due strictly before that moment is paid in full,
//! one after another, each starting when the previous payment ends, and detours that fall due
//! while the rank spins the earlier ones are paid too. Computing `q` from `t` then ends at the
//! smallest `T` with `T = t + q + Σ span` over the detours due before `T` — the predictor's
//! compute window, whatever the order of computing and paying.
//!
//! Detours due while the rank waits inside a call are paid in one of two ways ([`Paid`]): at their
//! due time by a loop that polls a nonblocking twin of the call (`InCall`: exactly a detour's
//! effect, since nothing progresses while the rank spins), or, after a blocking call returned,
//! for the part of them that reaches past the return (`OnReturn`: exact for the rank's own clock;
//! the messages it would have forwarded during the detour were not held back). Each class is
//! counted apart ([`LedgerStats`]).
//!
//! **Met and missed.** Every injection the cursor hands out is either paid or discarded (by a
//! resync, a pause or the end of the replay). One discarded after its due time was *missed*:
//! the rank passed it without paying. The injected share is paid ÷ (paid + missed), by detours
//! and by time; the drivers settle before every resync, pause and stop, so a miss means a
//! detour fell due between the settle and the jump.

use serde::{Deserialize, Serialize};

use crate::plan::{Cursor, Injection, PlanStats};

/// Where a detour was paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paid {
    /// At the entry of a call, for the stretch the rank computed since the last call: every
    /// detour due strictly before `now`, in full from `now`.
    Boundary,
    /// Inside a call that polls a nonblocking twin: every detour due at or before `now`, in full
    /// from its due time (or the end of the payment before it, if later): the rank was waiting,
    /// so a poll that saw it late (the rank was descheduled) does not lengthen it.
    InCall,
    /// After a blocking call entered at `entered_ns` returned at `returned_ns`: every detour due
    /// before the return; one due before the entry in full from `now` (it belongs to the
    /// stretch before), one due inside the call for the part of it that ends after `now` (the
    /// rest overlapped the wait). Detours due from the return on belong to the stretch after.
    OnReturn {
        /// When the call was entered, replay ns.
        entered_ns: u64,
        /// When it returned, replay ns.
        returned_ns: u64,
    },
    /// As `OnReturn`, after a polled call completed: a detour that fell due after the last poll
    /// (the rank was descheduled between two polls) holds the rank until its own end, and counts
    /// with the payments inside polled calls.
    AtCompletion {
        /// When the call was entered, replay ns.
        entered_ns: u64,
        /// When it completed, replay ns.
        returned_ns: u64,
    },
}

/// One payment: spin from `start_ns` to `end_ns` (replay ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Payment {
    /// The injection's due time.
    pub due_ns: u64,
    /// When the payment starts: the `now` it was taken at, or for a detour paid inside a
    /// polled call, its due time (or the end of the payment before it).
    pub start_ns: u64,
    /// When it ends: `start_ns + span`, or for a detour that fell inside a blocking call, the
    /// later of `start_ns` and its own end.
    pub end_ns: u64,
    /// The injection's planned span.
    pub span_ns: u64,
    /// Trace detours it stands for.
    pub detours: u32,
}

/// Buckets of the lateness histogram: bucket 0 holds 0 ns, bucket b ≥ 1 holds [2^(b−1), 2^b)
/// ns; the last one everything from 2^30 ns (1.07 s) on.
pub const LATENESS_BUCKETS: usize = 32;

/// The payments of one class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PaidClass {
    /// Injections paid.
    pub injections: u64,
    /// Trace detours in them.
    pub detours: u64,
    /// Σ planned span, ns.
    pub span_ns: u64,
    /// Σ time spun for them, ns (less than the span where a blocking call's wait overlapped it).
    pub spun_ns: u64,
    /// Σ lateness (the `now` it was paid at − due), ns.
    pub lateness_sum_ns: u64,
    /// Largest lateness, ns.
    pub lateness_max_ns: u64,
    /// Lateness histogram ([`LATENESS_BUCKETS`] log₂ buckets).
    pub lateness: [u64; LATENESS_BUCKETS],
}

impl PaidClass {
    fn add(&mut self, p: &Payment, now_ns: u64) {
        let late = now_ns.saturating_sub(p.due_ns);
        self.injections += 1;
        self.detours += u64::from(p.detours);
        self.span_ns += p.span_ns;
        self.spun_ns += p.end_ns.saturating_sub(p.start_ns.max(now_ns));
        self.lateness_sum_ns += late;
        self.lateness_max_ns = self.lateness_max_ns.max(late);
        self.lateness[lateness_bucket(late)] += 1;
    }

    fn merge(&mut self, b: &PaidClass) {
        self.injections += b.injections;
        self.detours += b.detours;
        self.span_ns += b.span_ns;
        self.spun_ns += b.spun_ns;
        self.lateness_sum_ns += b.lateness_sum_ns;
        self.lateness_max_ns = self.lateness_max_ns.max(b.lateness_max_ns);
        for (a, b) in self.lateness.iter_mut().zip(b.lateness) {
            *a += b;
        }
    }

    /// Mean lateness, ns (0 with no payment).
    pub fn lateness_mean_ns(&self) -> f64 {
        if self.injections == 0 {
            0.0
        } else {
            self.lateness_sum_ns as f64 / self.injections as f64
        }
    }

    /// An upper bound of the lateness quantile `q` (in [0, 1]) from the histogram: the upper
    /// end of the bucket that holds it (0 with no payment; the largest lateness for the top
    /// bucket).
    pub fn lateness_quantile_bound_ns(&self, q: f64) -> u64 {
        let n = self.injections;
        if n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (b, &c) in self.lateness.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return if b + 1 == LATENESS_BUCKETS {
                    self.lateness_max_ns
                } else {
                    ((1u64 << b) - 1).min(self.lateness_max_ns)
                };
            }
        }
        self.lateness_max_ns
    }
}

/// The bucket of a lateness of `ns`.
#[inline]
fn lateness_bucket(ns: u64) -> usize {
    ((u64::BITS - ns.leading_zeros()) as usize).min(LATENESS_BUCKETS - 1)
}

/// Injections discarded unpaid after their due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Missed {
    /// Injections.
    pub injections: u64,
    /// Trace detours in them.
    pub detours: u64,
    /// Σ span, ns.
    pub span_ns: u64,
}

/// The account of a ledger: what it paid, by class, and what it missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LedgerStats {
    /// Paid at the entry of a call, for the computing before it.
    pub at_boundary: PaidClass,
    /// Paid at their time inside a call polling a nonblocking twin.
    pub in_call: PaidClass,
    /// Paid after a blocking call returned (only the part past the return was spun).
    pub on_return: PaidClass,
    /// Passed without being paid.
    pub missed: Missed,
    /// The plan's counts for the injections paid (its drops and merges: 0 when built for this
    /// mode).
    pub plan: PlanStats,
}

impl LedgerStats {
    /// Every payment, whatever its class.
    pub fn paid(&self) -> PaidClass {
        let mut all = self.at_boundary;
        all.merge(&self.in_call);
        all.merge(&self.on_return);
        all
    }

    /// Share of the detours met that were paid: paid ÷ (paid + missed), 1 with none met.
    pub fn detour_share(&self) -> f64 {
        share(self.paid().detours, self.missed.detours)
    }

    /// Share of the noise time met that was paid (a detour inside a blocking call counts its
    /// whole span: the rank's clock lost what the detour would have cost it), 1 with none met.
    pub fn time_share(&self) -> f64 {
        share(self.paid().span_ns, self.missed.span_ns)
    }

    /// Adds another rank's (or phase's) account.
    pub fn merge(&mut self, b: &LedgerStats) {
        self.at_boundary.merge(&b.at_boundary);
        self.in_call.merge(&b.in_call);
        self.on_return.merge(&b.on_return);
        self.missed.injections += b.missed.injections;
        self.missed.detours += b.missed.detours;
        self.missed.span_ns += b.missed.span_ns;
        self.plan += b.plan;
    }
}

/// The shares of each phase (between two ends of phases): how many phases missed a detour, and
/// the smallest share of a phase's met noise time that was paid.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseShares {
    /// Phases ended.
    pub phases: u64,
    /// Phases in which a detour was missed.
    pub phases_missing: u64,
    /// The smallest share of a phase's met noise time that was paid (1 when none missed).
    pub worst_time_share: f64,
    /// (paid, missed) span at the end of the last phase, ns.
    #[serde(skip)]
    mark: (u64, u64),
}

impl Default for PhaseShares {
    fn default() -> Self {
        PhaseShares {
            phases: 0,
            phases_missing: 0,
            worst_time_share: 1.0,
            mark: (0, 0),
        }
    }
}

impl PhaseShares {
    /// A phase ended with the ledger's account at `now`.
    pub fn end_phase(&mut self, now: &LedgerStats) {
        let (paid, missed) = (now.paid().span_ns, now.missed.span_ns);
        let (p, m) = (paid - self.mark.0, missed - self.mark.1);
        self.phases += 1;
        if m > 0 {
            self.phases_missing += 1;
            self.worst_time_share = self.worst_time_share.min(p as f64 / (p + m) as f64);
        }
        self.mark = (paid, missed);
    }

    /// Adds another rank's phases (the worst share: the least of both).
    pub fn merge(&mut self, b: &PhaseShares) {
        self.phases += b.phases;
        self.phases_missing += b.phases_missing;
        self.worst_time_share = self.worst_time_share.min(b.worst_time_share);
    }
}

fn share(paid: u64, missed: u64) -> f64 {
    if paid + missed == 0 {
        1.0
    } else {
        paid as f64 / (paid + missed) as f64
    }
}

/// One rank's ledger over its replay cursor. It asks the cursor for the next injection only
/// when a driver needs it (as the predictor's walk does): near the fraction limit a cursor that
/// has built past the limit stays finished, also across a resync, so when it is asked decides
/// what a replay near its end still injects.
#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    cursor: Cursor,
    /// The next injection, once asked for (`fetched`); `None` then: the replay is finished.
    pending: Option<Injection>,
    fetched: bool,
    paused: bool,
    /// Planned end of the last payment of the segment (0 after a start or a resync).
    last_end_ns: u64,
    stats: LedgerStats,
}

impl Ledger {
    /// A ledger replaying `cursor` from replay time 0 (the cursor's segment starts there).
    pub fn new(cursor: Cursor) -> Ledger {
        Ledger {
            cursor,
            pending: None,
            fetched: false,
            paused: false,
            last_end_ns: 0,
            stats: LedgerStats::default(),
        }
    }

    fn peek(&mut self) -> Option<Injection> {
        if self.paused {
            return None;
        }
        if !self.fetched {
            self.pending = self.cursor.next();
            self.fetched = true;
        }
        self.pending
    }

    /// When the next unpaid injection is due, replay ns (`u64::MAX`: none, paused or finished).
    #[cfg(test)]
    pub(crate) fn next_due_ns(&mut self) -> u64 {
        self.peek().map_or(u64::MAX, |p| p.due_ns)
    }

    /// The due time of the next injection if it was asked for already (`Some(u64::MAX)`: none
    /// left), `None` if not: what a driver may cache without changing when the cursor is asked.
    pub(crate) fn known_due_ns(&self) -> Option<u64> {
        if self.paused {
            Some(u64::MAX)
        } else if self.fetched {
            Some(self.pending.map_or(u64::MAX, |p| p.due_ns))
        } else {
            None
        }
    }

    /// The next payment owed at `now_ns` in the way `how` pays, if any; the ledger counts it as
    /// paid. Call until it returns `None`, each time at the end of the previous payment:
    /// detours due while the earlier ones are paid are owed too. After a blocking call, a
    /// payment that reaches past the return ends the settling (the next injection is then not
    /// asked for: the walk's barrier exit).
    pub fn take(&mut self, now_ns: u64, how: Paid) -> Option<Payment> {
        let wait = match how {
            Paid::OnReturn {
                entered_ns,
                returned_ns,
            }
            | Paid::AtCompletion {
                entered_ns,
                returned_ns,
            } => Some((entered_ns, returned_ns)),
            Paid::Boundary | Paid::InCall => None,
        };
        if wait.is_some_and(|(_, returned)| now_ns > returned) {
            return None;
        }
        let p = self.peek()?;
        let owed = match (how, wait) {
            (Paid::InCall, _) => p.due_ns <= now_ns,
            (_, Some((_, returned))) => p.due_ns < returned,
            _ => p.due_ns < now_ns,
        };
        if !owed {
            return None;
        }
        let inside_wait = wait.is_some_and(|(entered, _)| p.due_ns >= entered);
        let (start_ns, end_ns) = if inside_wait {
            (now_ns, now_ns.max(p.due_ns + p.span_ns))
        } else if how == Paid::InCall {
            let start = p.due_ns.max(self.last_end_ns).min(now_ns);
            (start, start + p.span_ns)
        } else {
            (now_ns, now_ns + p.span_ns)
        };
        self.last_end_ns = end_ns;
        let pay = Payment {
            due_ns: p.due_ns,
            start_ns,
            end_ns,
            span_ns: p.span_ns,
            detours: p.detours,
        };
        let class = match how {
            Paid::OnReturn { .. } if inside_wait => &mut self.stats.on_return,
            Paid::AtCompletion { .. } if inside_wait => &mut self.stats.in_call,
            Paid::InCall => &mut self.stats.in_call,
            _ => &mut self.stats.at_boundary,
        };
        class.add(&pay, now_ns);
        self.pending = None;
        self.fetched = false;
        self.cursor.confirm();
        Some(pay)
    }

    /// Before a resync or a pause at `at_ns`: the next injection if it fell due before then and
    /// was not paid (the rank's clock slipped past the walk's: a spin or a poll that ended late),
    /// paid for what reaches past `at_ns` (counted at a call's entry). Call until `None`, at the
    /// end of each payment; the walk never leaves one (its exit follows every detour due before
    /// it), so asking costs it nothing: the next injection is looked up on a copy of the cursor
    /// and fetched only when it is overdue.
    pub(crate) fn overdue(&mut self, at_ns: u64) -> Option<Payment> {
        if self.paused {
            return None;
        }
        let next = if self.fetched {
            self.pending
        } else {
            self.cursor.clone().next()
        };
        if next?.due_ns >= at_ns {
            return None;
        }
        let p = self.peek()?;
        let pay = Payment {
            due_ns: p.due_ns,
            start_ns: at_ns,
            end_ns: at_ns.max(p.due_ns + p.span_ns),
            span_ns: p.span_ns,
            detours: p.detours,
        };
        self.last_end_ns = pay.end_ns;
        self.stats.at_boundary.add(&pay, at_ns);
        self.pending = None;
        self.fetched = false;
        self.cursor.confirm();
        Some(pay)
    }

    /// Counts the next injection as missed if it was due before `now_ns`, then forgets it. One
    /// not asked for yet is looked up on a copy of the cursor, which is left as it was.
    fn discard(&mut self, now_ns: u64) {
        let next = if self.fetched {
            self.pending
        } else if self.paused {
            None
        } else {
            self.cursor.clone().next()
        };
        if let Some(p) = next.filter(|p| p.due_ns < now_ns) {
            self.stats.missed.injections += 1;
            self.stats.missed.detours += u64::from(p.detours);
            self.stats.missed.span_ns += p.span_ns;
        }
        self.pending = None;
        self.fetched = false;
    }

    /// Jumps to timeline point `offset_ns` at replay time `now_ns` (the rest of a detour in
    /// progress there is due at once). Settle first: an injection still owed is missed.
    pub fn resync(&mut self, offset_ns: u64, now_ns: u64) {
        self.discard(now_ns);
        self.cursor.resync(offset_ns, now_ns);
        self.paused = false;
        self.last_end_ns = 0;
    }

    /// Stops owing anything from `now_ns` on; the trace's timeline runs on (see
    /// [`Ledger::resume`]). Settle first: an injection still owed is missed.
    pub fn pause(&mut self, now_ns: u64) {
        self.discard(now_ns);
        self.paused = true;
    }

    /// Resumes after [`Ledger::pause`] at the timeline point the replay reached meanwhile.
    pub fn resume(&mut self, now_ns: u64) {
        let point = self.cursor.point_at(now_ns);
        self.resync(point, now_ns);
    }

    /// Whether the ledger is paused.
    #[cfg(test)]
    pub(crate) fn paused(&self) -> bool {
        self.paused
    }

    /// True once the fraction limit was reached: nothing more will be owed.
    pub fn finished(&self) -> bool {
        !self.paused && (self.cursor.finished() || (self.fetched && self.pending.is_none()))
    }

    /// The replay's cursor (its position, progress and segment point).
    pub fn cursor(&self) -> &Cursor {
        &self.cursor
    }

    /// The account so far, with the plan's counts of the injections paid.
    pub fn stats(&self) -> LedgerStats {
        LedgerStats {
            plan: self.cursor.stats(),
            ..self.stats
        }
    }

    /// Ends the replay at `now_ns`: the next injection is counted as missed if it was due.
    pub fn finish(&mut self, now_ns: u64) -> LedgerStats {
        self.discard(now_ns);
        self.stats()
    }
}

#[cfg(test)]
mod tests;
