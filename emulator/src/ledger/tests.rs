use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::plan::tests::{arb_stream, stream};
use crate::plan::{Plan, PlanOptions};
use crate::sync::{SyncMode, SyncSchedule};

/// The predictor's walk (`replay-bench`'s `des::RankState` without timer errors), rule for rule:
/// a compute window takes the span of every injection due before its growing end; a rank
/// leaving a barrier that completes at `b` is held by an injection still running at `b`.
struct Walk {
    cursor: Cursor,
    pending: Option<(u64, u64)>,
    busy_until: u64,
    consumed: (u64, u64),
}

impl Walk {
    fn new(plan: &Arc<Plan>, offset: u64) -> Walk {
        Walk {
            cursor: plan.cursor(offset),
            pending: None,
            busy_until: 0,
            consumed: (0, 0),
        }
    }

    fn peek(&mut self) -> Option<(u64, u64)> {
        if self.pending.is_none() {
            let i = self.cursor.next()?;
            self.pending = Some((i.due_ns.max(self.busy_until), i.span_ns));
        }
        self.pending
    }

    fn consume(&mut self, due: u64, span: u64) {
        self.pending = None;
        self.busy_until = due + span;
        self.consumed.0 += 1;
        self.consumed.1 += span;
        self.cursor.confirm();
    }

    fn compute(&mut self, start: u64, q: u64) -> u64 {
        let mut end = start + q;
        while let Some((due, span)) = self.peek() {
            if due >= end {
                break;
            }
            self.consume(due, span);
            end += span;
        }
        end
    }

    fn leave_barrier(&mut self, b: u64) -> u64 {
        while let Some((due, span)) = self.peek() {
            if due >= b {
                break;
            }
            self.consume(due, span);
            if due + span > b {
                return due + span;
            }
        }
        b
    }

    fn resync(&mut self, off: u64, start: u64) {
        self.cursor.resync(off, start);
        self.pending = None;
        self.busy_until = start;
    }
}

/// Pays everything `how` owes from `now` on, one payment after another: the end.
fn settle(l: &mut Ledger, mut now: u64, how: Paid) -> u64 {
    while let Some(p) = l.take(now, how) {
        assert!(p.end_ns >= p.start_ns && p.start_ns <= now);
        now = p.end_ns;
    }
    now
}

/// A call entered at `entry` that the other ranks complete at `b`, paid by polling a
/// nonblocking twin: a detour due before completion is paid at its time; the rank sees the
/// completion at the first poll after `b` that is not inside a payment.
fn wait_polling(l: &mut Ledger, entry: u64, b: u64) -> u64 {
    let mut now = entry;
    loop {
        if now >= b {
            return now;
        }
        let due = l.next_due_ns();
        if due >= b {
            return b;
        }
        now = now.max(due);
        now = l.take(now, Paid::InCall).expect("due").end_ns;
    }
}

/// The call polled every `step` ns only (the rank descheduled between polls), its completion
/// seen at `b`: a poll pays the detour it finds due, from its due time; the completion pays what
/// fell due after the last poll.
fn wait_polling_sparsely(l: &mut Ledger, entry: u64, b: u64, step: u64) -> u64 {
    let mut now = entry;
    while now < b {
        match l.take(now, Paid::InCall) {
            Some(p) => now = p.end_ns.max(now),
            None => now = (now + step).min(b),
        }
    }
    let how = Paid::AtCompletion {
        entered_ns: entry,
        returned_ns: b.max(entry),
    };
    settle(l, now.max(b), how)
}

/// The same call made blocking: it returns at `b`, and what fell due inside is paid then.
fn wait_blocking(l: &mut Ledger, entry: u64, b: u64) -> u64 {
    let how = Paid::OnReturn {
        entered_ns: entry,
        returned_ns: b,
    };
    settle(l, b, how)
}

/// How a rank waits inside a call.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// Polling its nonblocking twin without pause.
    Polling,
    /// Polling it every so many ns.
    PollingSparsely(u64),
    /// Blocking.
    Blocking,
}

/// One phase of a rank: compute `q` then a call the others complete `wait` after its entry.
#[derive(Debug, Clone, Copy)]
struct Phase {
    q: u64,
    wait: u64,
    how: Wait,
}

fn arb_phases() -> impl Strategy<Value = Vec<Phase>> {
    let how = prop_oneof![
        Just(Wait::Polling),
        (1u64..3_000).prop_map(Wait::PollingSparsely),
        Just(Wait::Blocking),
    ];
    let wait = prop::sample::select(vec![0u64, 1, 300, 5_000, 40_000]);
    prop::collection::vec(
        (0u64..20_000, wait, how).prop_map(|(q, wait, how)| Phase { q, wait, how }),
        1..40,
    )
}

proptest! {
    /// One model, three paths: the ledger paying at call boundaries ends every compute window
    /// and every call where the predictor's walk ends them, for the same plan, start offset and
    /// resync points, and pays exactly the injections the walk consumed; nothing is missed.
    #[test]
    fn paying_at_call_boundaries_keeps_the_predictors_timeline(
        s in arb_stream(),
        scale in prop::sample::select(vec![1.0, 2.5]),
        fraction in prop::sample::select(vec![1.0, 0.3]),
        mode in prop::sample::select(vec![SyncMode::None, SyncMode::Phase, SyncMode::Every(3)]),
        seed in 0u64..1_000,
        phases in arb_phases(),
    ) {
        let opts = PlanOptions { scale, fraction, ..PlanOptions::ideal() };
        let plan = Plan::new(&s, opts).unwrap();
        let schedule = SyncSchedule { mode, seed };
        let offset = schedule.start_offset(0, plan.period_ns());
        let mut walk = Walk::new(&plan, offset);
        let mut ledger = Ledger::new(plan.cursor(offset));
        let (mut t_walk, mut t_ledger) = (0u64, 0u64);
        for (k, ph) in phases.iter().enumerate() {
            if let Some(off) = schedule.resync_offset(k as u64, plan.period_ns()) {
                walk.resync(off, t_walk);
                // The walk leaves nothing overdue at its exit.
                prop_assert_eq!(ledger.overdue(t_ledger), None);
                ledger.resync(off, t_ledger);
            }
            let end = walk.compute(t_walk, ph.q);
            let paid_end = settle(&mut ledger, t_ledger + ph.q, Paid::Boundary);
            prop_assert_eq!(paid_end, end, "compute of phase {}", k);
            let b = end + ph.wait;
            t_walk = walk.leave_barrier(b);
            t_ledger = match ph.how {
                Wait::Polling => wait_polling(&mut ledger, paid_end, b),
                Wait::PollingSparsely(step) => {
                    wait_polling_sparsely(&mut ledger, paid_end, b, step)
                }
                Wait::Blocking => wait_blocking(&mut ledger, paid_end, b),
            };
            prop_assert_eq!(t_ledger, t_walk, "call of phase {}", k);
        }
        let st = ledger.finish(t_ledger);
        let paid = st.paid();
        prop_assert_eq!((paid.injections, paid.span_ns), walk.consumed);
        prop_assert_eq!(st.paid().detours, st.plan.injected_detours);
        prop_assert_eq!(st.missed, Missed::default());
        prop_assert_eq!((st.plan.dropped, st.plan.merged), (0, 0));
        prop_assert_eq!(st.plan.injected_ns, paid.span_ns);
        prop_assert_eq!(st.detour_share(), 1.0);
        prop_assert!(paid.spun_ns <= paid.span_ns);
    }
}

fn two_detours() -> Arc<Plan> {
    // Detours of 100 ns at 1 000 and 2 000 on a 10 000 ns timeline.
    Plan::new(
        &stream(10_000, &[(1_000, 100), (2_000, 100)]),
        PlanOptions::ideal(),
    )
    .unwrap()
}

#[test]
fn a_detour_due_inside_a_blocking_call_is_paid_for_what_reaches_past_its_return() {
    let plan = two_detours();
    // Entered at 950, returned at 1 040: the detour ran 1 000–1 100, 60 ns of it after the return.
    let mut l = Ledger::new(plan.cursor(0));
    let how = Paid::OnReturn {
        entered_ns: 950,
        returned_ns: 1_040,
    };
    let p = l.take(1_040, how).unwrap();
    assert_eq!((p.start_ns, p.end_ns, p.span_ns), (1_040, 1_100, 100));
    assert_eq!(l.take(1_100, how), None, "the next is due after the return");
    let st = l.stats();
    assert_eq!(
        (
            st.on_return.injections,
            st.on_return.spun_ns,
            st.on_return.span_ns
        ),
        (1, 60, 100)
    );
    assert_eq!(st.on_return.lateness_max_ns, 40);
    // Returned after the detour ended: nothing left to spin, the detour still counts as paid.
    let mut l = Ledger::new(plan.cursor(0));
    let late = Paid::OnReturn {
        entered_ns: 950,
        returned_ns: 1_500,
    };
    let p = l.take(1_500, late).unwrap();
    assert_eq!((p.start_ns, p.end_ns), (1_500, 1_500));
    // Due before the entry: the computing before the call owes it in full.
    let mut l = Ledger::new(plan.cursor(0));
    let before = Paid::OnReturn {
        entered_ns: 1_010,
        returned_ns: 1_040,
    };
    let p = l.take(1_040, before).unwrap();
    assert_eq!(p.end_ns, 1_140);
    assert_eq!(l.stats().at_boundary.injections, 1);
}

/// A poll that sees a detour late (the waiting rank was descheduled) pays it from its due time:
/// the wait already covered the part before the poll; a boundary pays in full from now.
#[test]
fn a_detour_seen_late_inside_a_polled_call_is_paid_from_its_due_time() {
    let plan = two_detours();
    let mut l = Ledger::new(plan.cursor(0));
    let p = l.take(1_060, Paid::InCall).unwrap();
    assert_eq!((p.start_ns, p.end_ns), (1_000, 1_100));
    let st = l.stats();
    assert_eq!((st.in_call.lateness_max_ns, st.in_call.spun_ns), (60, 40));
    // Seen after its end: nothing left to spin, paid all the same.
    let p = l.take(2_500, Paid::InCall).unwrap();
    assert_eq!((p.start_ns, p.end_ns), (2_000, 2_100));
    assert_eq!(l.stats().in_call.injections, 2);
}

#[test]
fn a_boundary_owes_what_was_due_strictly_before_it_and_a_poll_what_is_due_now() {
    let plan = two_detours();
    let mut l = Ledger::new(plan.cursor(0));
    assert_eq!(l.next_due_ns(), 1_000);
    assert_eq!(l.take(1_000, Paid::Boundary), None);
    let p = l.take(1_000, Paid::InCall).unwrap();
    assert_eq!((p.start_ns, p.end_ns), (1_000, 1_100));
    // The second is paid 900 ns late at a boundary, in full from there.
    let p = l.take(2_900, Paid::Boundary).unwrap();
    assert_eq!((p.due_ns, p.start_ns, p.end_ns), (2_000, 2_900, 3_000));
    let st = l.stats();
    assert_eq!(st.at_boundary.lateness_max_ns, 900);
    assert_eq!(st.in_call.lateness_max_ns, 0);
    assert_eq!(st.paid().injections, 2);
}

#[test]
fn a_due_injection_discarded_by_a_resync_or_a_pause_is_missed_one_not_yet_due_is_not() {
    let plan = two_detours();
    let mut l = Ledger::new(plan.cursor(0));
    l.resync(0, 1_500);
    // The detour due at 1 000 was passed unpaid; the new segment's first is due at 2 500.
    assert_eq!(l.stats().missed.injections, 1);
    assert_eq!(l.stats().missed.span_ns, 100);
    assert_eq!(l.next_due_ns(), 2_500);
    l.pause(2_000);
    assert_eq!(l.stats().missed.injections, 1, "not due yet: not missed");
    assert_eq!(l.next_due_ns(), u64::MAX);
    assert!(l.paused() && !l.finished());
    // Resumed at 3 000 = timeline point 1 500 of the segment started at 1 500: the next is the
    // detour at 2 000, due at 3 500.
    l.resume(3_000);
    assert_eq!(l.next_due_ns(), 3_500);
    assert!((l.stats().detour_share() - 0.0).abs() < 1e-12);
}

#[test]
fn the_lateness_quantiles_are_bounded_by_their_buckets() {
    let mut c = PaidClass::default();
    for late in [0u64, 1, 3, 900, 1_000_000] {
        let p = Payment {
            due_ns: 0,
            start_ns: late,
            end_ns: late + 10,
            span_ns: 10,
            detours: 1,
        };
        c.add(&p, late);
    }
    assert_eq!(c.lateness_quantile_bound_ns(0.0), 0);
    assert_eq!(c.lateness_quantile_bound_ns(0.4), 1);
    assert_eq!(c.lateness_quantile_bound_ns(0.6), 3);
    assert_eq!(c.lateness_quantile_bound_ns(0.8), 1_023);
    assert_eq!(c.lateness_quantile_bound_ns(1.0), 1_000_000);
    assert_eq!(c.lateness_mean_ns(), 1_000_904.0 / 5.0);
    assert_eq!(lateness_bucket(u64::MAX), LATENESS_BUCKETS - 1);
}

#[test]
fn a_phase_with_a_missed_detour_counts_and_its_share_is_the_worst() {
    let plan = two_detours();
    let mut l = Ledger::new(plan.cursor(0));
    let mut ph = PhaseShares::default();
    l.take(1_200, Paid::Boundary).unwrap();
    ph.end_phase(&l.stats());
    // The second phase passes the detour at 2 000 and resyncs without paying it.
    l.resync(0, 2_500);
    ph.end_phase(&l.stats());
    ph.end_phase(&l.stats());
    assert_eq!((ph.phases, ph.phases_missing), (3, 1));
    assert_eq!(ph.worst_time_share, 0.0);
    let mut all = PhaseShares::default();
    all.merge(&ph);
    all.merge(&PhaseShares::default());
    assert_eq!(
        (all.phases, all.phases_missing, all.worst_time_share),
        (3, 1, 0.0)
    );
}

/// A detour that fell due before a resync point and was not paid (the rank's clock slipped) is
/// paid there for what reaches past it, not missed.
#[test]
fn a_detour_overdue_at_a_resync_is_paid_there_not_missed() {
    let plan = two_detours();
    let mut l = Ledger::new(plan.cursor(0));
    assert_eq!(l.overdue(900), None);
    let p = l.overdue(1_050).unwrap();
    assert_eq!((p.due_ns, p.start_ns, p.end_ns), (1_000, 1_050, 1_100));
    assert_eq!(l.overdue(1_100), None);
    l.resync(0, 1_100);
    let st = l.stats();
    assert_eq!((st.missed.injections, st.at_boundary.injections), (0, 1));
}
