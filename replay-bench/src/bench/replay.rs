//! The in-process JitterEmulator of one rank, seen from the benchmark: its measured cost, its
//! start at the node's offset, resyncs at the phases the sync schedule names, and its totals.
//!
//! Two injectors behind one hook ([`Injector`]): the timer signal (`--inject signal`) and the
//! payment at the loop's MPI calls (`--inject boundary`, `jitter_emulator::Boundary`): the
//! compute's detours are paid when the rank enters the phase's barrier (before t2, so that qt
//! holds them), the barrier and the reductions after it run through their nonblocking twins with
//! the detours that fall due inside paid at their time, and a resync takes effect at the return
//! of the barrier before it (the predictor's exit). Baseline blocks pause either injector; the
//! calls stay polled in them, so both blocks' calls cost the same.

use std::sync::Arc;

use anyhow::Context;
use jitter_collect::clock::read_counter;
use jitter_collect::clock::Clock;
use jitter_emulator::calibration::Calibration as EmulatorCalibration;
use jitter_emulator::ledger::{Missed, PaidClass, LATENESS_BUCKETS};
use jitter_emulator::{
    Boundary, Emulator, Handle, InjectionCost, InjectionMode, InjectorConfig, InjectorStats,
    LedgerStats, Overrides, PhaseShares, Plan, ReplayPosition, SyncSchedule, TimerKind,
};

use super::phases::PhaseHook;
use jitter_report::report::{CallPayments, EmulatorTotals, PaymentClass};

/// The injector's own cost on this rank (pitfalls 1 and 2) with its spread, ns.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct EmulatorCost {
    /// O, L, M and the timer the plan is built with.
    pub cost: InjectionCost,
    /// Spread of O.
    pub overhead_sd_ns: f64,
    /// Spread of L.
    pub lateness_sd_ns: f64,
}

impl EmulatorCost {
    /// The cost of `timer` from an emulator calibration, with command-line overrides.
    pub fn from_calibration(c: &EmulatorCalibration, timer: TimerKind, o: &Overrides) -> Self {
        let t = c.timer(timer);
        EmulatorCost {
            cost: c.cost(timer, o),
            overhead_sd_ns: t.overhead.sd_ns,
            lateness_sd_ns: t.lateness.sd_ns,
        }
    }
}

/// What one rank's emulator did.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct ReplayTotals {
    /// Injections performed.
    pub injected: u64,
    /// Detours dropped (S·run ≤ O).
    pub dropped: u64,
    /// Detours merged (S·sleep < M).
    pub merged: u64,
    /// Injected time, ns (scaled).
    pub injected_ns: u64,
    /// Dropped time, ns (scaled).
    pub dropped_ns: u64,
    /// Noise met, ns (scaled).
    pub noise_ns: u64,
    /// Share of the stream replayed.
    pub progress: f64,
    /// Paying at calls: the rank's account.
    pub calls: Option<CallsAccount>,
}

/// What a rank paying at its calls did: its ledger's account, its phases' shares, its calls.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct CallsAccount {
    /// Paid by class, missed, the plan's counts.
    pub ledger: LedgerStats,
    /// The phases and their shares.
    pub phases: PhaseShares,
    /// MPI calls of the loop (each a boundary, each through its nonblocking twin).
    pub calls: u64,
    /// Polls of those calls' requests.
    pub polls: u64,
}

impl ReplayTotals {
    /// The counters as a vector to sum over ranks.
    pub(crate) fn to_sums(self) -> [f64; 6] {
        [
            self.injected as f64,
            self.dropped as f64,
            self.merged as f64,
            self.injected_ns as f64,
            self.dropped_ns as f64,
            self.noise_ns as f64,
        ]
    }

    /// Totals from summed counters and the largest progress.
    pub(crate) fn from_sums(s: &[f64; 6], max_progress: f64) -> Self {
        ReplayTotals {
            injected: s[0] as u64,
            dropped: s[1] as u64,
            merged: s[2] as u64,
            injected_ns: s[3] as u64,
            dropped_ns: s[4] as u64,
            noise_ns: s[5] as u64,
            progress: max_progress,
            calls: None,
        }
    }

    /// The totals of one injector run.
    pub(crate) fn from_stats(st: &InjectorStats, progress: f64) -> Self {
        ReplayTotals {
            injected: st.injected,
            dropped: st.dropped,
            merged: st.merged,
            injected_ns: st.injected_ns,
            dropped_ns: st.plan.dropped_ns,
            noise_ns: st.plan.noise_ns,
            progress,
            calls: None,
        }
    }

    /// The totals of a rank that paid at its calls.
    pub(crate) fn from_calls(account: CallsAccount, progress: f64) -> Self {
        let (l, paid) = (&account.ledger, account.ledger.paid());
        ReplayTotals {
            injected: paid.injections,
            dropped: l.plan.dropped,
            merged: l.plan.merged,
            injected_ns: paid.span_ns,
            dropped_ns: l.plan.dropped_ns,
            noise_ns: l.plan.noise_ns,
            progress,
            calls: Some(account),
        }
    }

    /// The report's form.
    pub(crate) fn to_report(self) -> EmulatorTotals {
        EmulatorTotals {
            injected: self.injected,
            dropped: self.dropped,
            merged: self.merged,
            injected_ns: self.injected_ns,
            dropped_ns: self.dropped_ns,
            injected_share: jitter_emulator::plan::injected_share(
                self.injected_ns,
                self.dropped_ns,
            ),
            max_progress: self.progress,
        }
    }
}

/// Where one rank's replay opened a measured stretch of jitter ([`PhaseHook::open_window`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct WindowMark {
    /// Phase index (warm-up included) of the window's first phase.
    pub phase: u64,
    /// Timeline point the replay started the window at, trace ns: where it resumed or resynced,
    /// else where it stood when the window opened.
    pub point_ns: u64,
    /// Injections executed before the window (the rest of a detour a resync lands in belongs
    /// to the window).
    pub injected_before: u64,
    /// Their span, ns (scaled).
    pub injected_ns_before: u64,
    /// When the window opened and closed (the emulator's monotonic clock, ns; closed 0 while
    /// open): its length in replay time, S × the trace time it covered.
    pub opened_ns: u64,
    /// See `opened_ns`.
    pub closed_ns: u64,
}

/// Values of one [`PaidClass`] in [`CallsAccount::to_sums`].
const CLASS_SUMS: usize = 5 + LATENESS_BUCKETS;
/// Length of [`CallsAccount::to_sums`].
pub(crate) const CALLS_SUMS: usize = 3 * CLASS_SUMS + 7;

impl CallsAccount {
    /// The counts to add up over ranks, as floats (one MPI reduction).
    pub(crate) fn to_sums(self) -> [f64; CALLS_SUMS] {
        let mut v = [0.0; CALLS_SUMS];
        let l = &self.ledger;
        for (k, c) in [&l.at_boundary, &l.in_call, &l.on_return]
            .iter()
            .enumerate()
        {
            let at = &mut v[k * CLASS_SUMS..(k + 1) * CLASS_SUMS];
            let head = [
                c.injections,
                c.detours,
                c.span_ns,
                c.spun_ns,
                c.lateness_sum_ns,
            ];
            for (x, y) in at.iter_mut().zip(head.iter().chain(&c.lateness)) {
                *x = *y as f64;
            }
        }
        let m = &l.missed;
        let tail = [
            m.injections,
            m.detours,
            m.span_ns,
            self.phases.phases,
            self.phases.phases_missing,
            self.calls,
            self.polls,
        ];
        for (x, y) in v[3 * CLASS_SUMS..].iter_mut().zip(tail) {
            *x = y as f64;
        }
        v
    }

    /// The largest values over ranks: each class's largest lateness, and 1 − the worst phase's
    /// time share (its largest is the worst share).
    pub(crate) fn to_maxes(self) -> [f64; 4] {
        let l = &self.ledger;
        [
            l.at_boundary.lateness_max_ns as f64,
            l.in_call.lateness_max_ns as f64,
            l.on_return.lateness_max_ns as f64,
            1.0 - self.phases.worst_time_share,
        ]
    }

    /// The report's form of the sums and maxima over ranks, with each rank's shares.
    pub(crate) fn to_report(
        sums: &[f64],
        maxes: &[f64; 4],
        rank_shares: Vec<[f64; 2]>,
    ) -> CallPayments {
        let class = |k: usize| {
            let at = &sums[k * CLASS_SUMS..(k + 1) * CLASS_SUMS];
            let mut c = PaidClass {
                injections: at[0] as u64,
                detours: at[1] as u64,
                span_ns: at[2] as u64,
                spun_ns: at[3] as u64,
                lateness_sum_ns: at[4] as u64,
                lateness_max_ns: maxes[k] as u64,
                ..PaidClass::default()
            };
            for (b, x) in c.lateness.iter_mut().zip(&at[5..]) {
                *b = *x as u64;
            }
            c
        };
        let (a, i, r) = (class(0), class(1), class(2));
        let t = &sums[3 * CLASS_SUMS..];
        let ledger = LedgerStats {
            at_boundary: a,
            in_call: i,
            on_return: r,
            missed: Missed {
                injections: t[0] as u64,
                detours: t[1] as u64,
                span_ns: t[2] as u64,
            },
            ..LedgerStats::default()
        };
        let report = |c: &PaidClass| PaymentClass {
            payments: c.injections,
            detours: c.detours,
            span_ns: c.span_ns,
            lateness_mean_ns: c.lateness_mean_ns(),
            lateness_p50_at_most_ns: c.lateness_quantile_bound_ns(0.5),
            lateness_p99_at_most_ns: c.lateness_quantile_bound_ns(0.99),
            lateness_max_ns: c.lateness_max_ns,
        };
        CallPayments {
            detour_share: ledger.detour_share(),
            time_share: ledger.time_share(),
            rank_shares,
            phases: t[3] as u64,
            phases_missing: t[4] as u64,
            worst_phase_time_share: 1.0 - maxes[3],
            at_entry: report(&a),
            in_call: report(&i),
            on_return: report(&r),
            missed: ledger.missed.detours,
            missed_ns: ledger.missed.span_ns,
            calls: t[5] as u64,
            polls: t[6] as u64,
        }
    }
}

/// The injector of one rank: a timer signal, or payment at the loop's calls (the larger, once
/// per rank: not boxed).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Injector {
    Signal(Handle),
    Calls {
        boundary: Boundary,
        /// Counter readings when the last call was entered (after paying) and when the last
        /// polled call completed.
        entered: u64,
        /// See `entered`.
        returned: u64,
        phases: PhaseShares,
        calls: u64,
        polls: u64,
    },
}

impl Injector {
    fn pause(&mut self) {
        match self {
            Injector::Signal(h) => h.pause(),
            Injector::Calls { boundary, .. } => boundary.pause(),
        }
    }

    fn resume(&mut self) {
        match self {
            Injector::Signal(h) => h.resume(),
            Injector::Calls { boundary, .. } => boundary.resume(),
        }
    }

    fn resync(&mut self, offset: u64) {
        match self {
            Injector::Signal(h) => h.resync(offset),
            Injector::Calls {
                boundary, returned, ..
            } => boundary.resync_at(offset, *returned),
        }
    }

    fn position(&self) -> ReplayPosition {
        match self {
            Injector::Signal(h) => h.position(),
            Injector::Calls { boundary, .. } => boundary.position(),
        }
    }

    fn injected_span_ns(&self) -> u64 {
        match self {
            Injector::Signal(h) => h.injected_span_ns(),
            Injector::Calls { boundary, .. } => boundary.spun_ns(),
        }
    }

    fn progress(&self) -> f64 {
        match self {
            Injector::Signal(h) => h.progress(),
            Injector::Calls { boundary, .. } => boundary.progress(),
        }
    }

    fn stop(self) -> anyhow::Result<ReplayTotals> {
        match self {
            Injector::Signal(h) => {
                let progress = h.progress();
                let stats = h.stop().context("cannot stop the emulator")?;
                Ok(ReplayTotals::from_stats(&stats, progress))
            }
            Injector::Calls {
                mut boundary,
                phases,
                calls,
                polls,
                ..
            } => {
                boundary.settle();
                let progress = boundary.progress();
                let account = CallsAccount {
                    ledger: boundary.finish(),
                    phases,
                    calls,
                    polls,
                };
                Ok(ReplayTotals::from_calls(account, progress))
            }
        }
    }
}

/// A running emulator with its sync schedule: the benchmark's [`PhaseHook`].
#[derive(Debug)]
pub(crate) struct Replay {
    handle: Injector,
    schedule: SyncSchedule,
    timeline_ns: u64,
    resyncs: u64,
    /// Paired design: whether the coming phase runs with jitter, and whether the emulator is
    /// paused now.
    jitter: bool,
    paused: bool,
    /// The window `open_window` announced for the coming phase: the position before it and
    /// the time.
    opening: Option<(jitter_emulator::ReplayPosition, u64)>,
    /// Every window opened so far.
    windows: Vec<WindowMark>,
}

impl Replay {
    /// Starts replaying `plan` now at the offset of `node` (call right after a barrier, so all
    /// ranks share one replay origin).
    pub fn start(
        plan: &Arc<Plan>,
        node: u64,
        schedule: SyncSchedule,
        (clock, mode): (&Clock, InjectionMode),
    ) -> anyhow::Result<Replay> {
        let timeline_ns = plan.period_ns();
        let cursor = plan.cursor(schedule.start_offset(node, timeline_ns));
        let handle = match mode {
            InjectionMode::Signal => {
                let config = InjectorConfig {
                    timer: plan.options().timer,
                    clock: *clock,
                };
                Injector::Signal(
                    Emulator::start(cursor, config).context("cannot start the emulator")?,
                )
            }
            InjectionMode::Boundary => Injector::Calls {
                boundary: Boundary::start(cursor, *clock),
                entered: read_counter(),
                returned: read_counter(),
                phases: PhaseShares::default(),
                calls: 0,
                polls: 0,
            },
        };
        Ok(Replay {
            handle,
            schedule,
            timeline_ns,
            resyncs: 0,
            jitter: true,
            paused: false,
            opening: None,
            windows: Vec::new(),
        })
    }

    /// The measured stretches of jitter opened so far, in order; the last one closes now.
    pub fn windows(&mut self) -> &[WindowMark] {
        self.close_window();
        &self.windows
    }

    /// Closes the window in progress, if any, now.
    fn close_window(&mut self) {
        if let Some(w) = self.windows.last_mut().filter(|w| w.closed_ns == 0) {
            w.closed_ns = jitter_emulator::injector::mono_ns();
        }
    }

    /// Stops the injector and returns its totals.
    pub fn stop(self) -> anyhow::Result<ReplayTotals> {
        self.handle.stop()
    }
}

/// One process playing K barrier-free virtual ranks on one emulator: each virtual rank keeps
/// its own point on the trace's timeline, which advances only while its compute window (and
/// what follows it up to the next switch) runs; the emulator jumps there before each window.
#[derive(Debug)]
pub(crate) struct VirtualReplay {
    replay: Replay,
    /// Timeline point of each virtual rank, trace ns in [0, timeline).
    points: Vec<u64>,
    /// Trace ns each virtual rank has replayed.
    consumed: Vec<u64>,
    /// The virtual rank playing now, and the replay-clock time it started.
    current: Option<(usize, u64)>,
    scale: f64,
}

impl VirtualReplay {
    /// Starts `k` virtual ranks with global ids `first_id..first_id + k` (their sync-schedule
    /// nodes) on `plan`.
    pub fn start(
        plan: &Arc<Plan>,
        first_id: u64,
        k: u64,
        schedule: SyncSchedule,
        clock: &Clock,
    ) -> anyhow::Result<VirtualReplay> {
        let replay = Replay::start(plan, first_id, schedule, (clock, InjectionMode::Signal))?;
        let timeline = plan.period_ns();
        let points = (first_id..first_id + k)
            .map(|id| schedule.start_offset(id, timeline))
            .collect();
        Ok(VirtualReplay {
            replay,
            points,
            consumed: vec![0; k as usize],
            current: None,
            scale: plan.options().scale,
        })
    }

    /// Charges the time since the last switch to the virtual rank that was playing.
    fn settle(&mut self) {
        if let Some((v, since)) = self.current.take() {
            let used = (jitter_emulator::injector::mono_ns().saturating_sub(since) as f64
                / self.scale) as u64;
            self.points[v] = (self.points[v] + used) % self.replay.timeline_ns;
            self.consumed[v] += used;
        }
    }

    /// Stops the injector and returns its totals.
    pub fn stop(mut self) -> anyhow::Result<ReplayTotals> {
        self.settle();
        let progress = self.progress();
        let mut totals = self.replay.stop()?;
        totals.progress = progress;
        Ok(totals)
    }
}

impl PhaseHook for VirtualReplay {
    fn before_phase(&mut self, phase: u64) {
        let timeline = self.replay.timeline_ns;
        if let Some(offset) = self.replay.schedule.resync_offset(phase, timeline) {
            self.settle();
            self.points.iter_mut().for_each(|p| *p = offset);
        }
    }

    fn injected_span_ns(&self) -> u64 {
        self.replay.handle.injected_span_ns()
    }

    fn progress(&self) -> f64 {
        let most = self.consumed.iter().copied().max().unwrap_or(0);
        most as f64 / self.replay.timeline_ns as f64
    }

    fn before_window(&mut self, _phase: u64, v: u64) {
        self.settle();
        let v = v as usize;
        self.replay.handle.resync(self.points[v]);
        self.replay.resyncs += 1;
        self.current = Some((v, jitter_emulator::injector::mono_ns()));
    }
}

impl PhaseHook for Replay {
    /// A baseline phase pauses the emulator (no timer is armed); the first jittered phase after
    /// it resyncs where the schedule says (`phase`, `every:K`) or else resumes at the point the
    /// timeline reached meanwhile (`none`, `once`: each node keeps its offset).
    fn before_phase(&mut self, phase: u64) {
        let opening = self.opening.take();
        if !self.jitter {
            if !self.paused {
                self.handle.pause();
                self.paused = true;
                self.close_window();
            }
            return;
        }
        let moved = if let Some(offset) = self.schedule.resync_offset(phase, self.timeline_ns) {
            self.handle.resync(offset);
            self.resyncs += 1;
            true
        } else if self.paused {
            self.handle.resume();
            true
        } else {
            false
        };
        self.paused = false;
        if let Some((before, opened)) = opening {
            // A resync or resume starts the window at its point; a replay running on starts it
            // where it stood when the window opened.
            let point_ns = if moved {
                self.handle.position().segment_point_ns
            } else {
                before.point_now_ns
            };
            self.close_window();
            self.windows.push(WindowMark {
                phase,
                point_ns,
                injected_before: before.injected,
                injected_ns_before: before.injected_ns,
                opened_ns: opened,
                closed_ns: 0,
            });
        }
    }

    fn set_jitter(&mut self, on: bool) {
        self.jitter = on;
    }

    fn open_window(&mut self, _phase: u64) {
        self.opening = Some((self.handle.position(), jitter_emulator::injector::mono_ns()));
    }

    fn injected_span_ns(&self) -> u64 {
        self.handle.injected_span_ns()
    }

    fn progress(&self) -> f64 {
        self.handle.progress()
    }

    fn pays_at_calls(&self) -> bool {
        matches!(self.handle, Injector::Calls { .. })
    }

    fn settle(&mut self) {
        if let Injector::Calls {
            boundary,
            calls,
            entered,
            ..
        } = &mut self.handle
        {
            *calls += 1;
            *entered = read_counter();
            if boundary.owes(*entered) {
                *entered = boundary.settle();
            }
        }
    }

    fn poll(&mut self) {
        if let Injector::Calls {
            boundary, polls, ..
        } = &mut self.handle
        {
            *polls += 1;
            if boundary.owes(read_counter()) {
                boundary.poll();
            }
        }
    }

    fn returned(&mut self) {
        if let Injector::Calls {
            boundary,
            entered,
            returned,
            ..
        } = &mut self.handle
        {
            *returned = boundary.after_polled(*entered, read_counter());
        }
    }

    fn end_phase(&mut self) {
        if let Injector::Calls {
            boundary, phases, ..
        } = &mut self.handle
        {
            phases.end_phase(&boundary.stats());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_emulator::calibration::RatePoint;
    use jitter_emulator::{Fraction, ReplaySetup, Scale};

    #[test]
    fn a_rank_takes_o_after_each_gap_unless_o_was_given() {
        let mut c = EmulatorCalibration::default();
        c.abstime.overhead.median_ns = 5_000.0;
        c.abstime.lateness.median_ns = 3_000.0;
        c.abstime.min_sleep_ns = 1_000;
        c.abstime.overhead_by_rate = [(10, 9_000.0), (1_000, 5_000.0)]
            .map(|(rate_hz, o)| RatePoint {
                rate_hz,
                overhead_median_ns: o,
                sweep_median_ns: o,
                overhead_p90_ns: o,
                samples: 100,
            })
            .to_vec();
        c.abstime.overhead_by_rate_consistent = true;
        c.use_overhead_by_gap(true);
        let cost = EmulatorCost::from_calibration(&c, TimerKind::Abstime, &Overrides::default());
        let o = ReplaySetup {
            scale: Scale::new(2.0).unwrap(),
            fraction: Fraction::new(0.5).unwrap(),
            cost: cost.cost,
        }
        .plan_options();
        assert_eq!(
            (
                o.overhead_ns,
                o.lateness_ns,
                o.min_sleep_ns,
                o.fraction,
                o.scale
            ),
            (5_000, 3_000, 1_000, 0.5, 2.0)
        );
        assert_eq!(o.overhead_after(Some(100_000_000)), 9_000);
        assert_eq!(o.overhead_after(Some(1_000_000)), 5_000);
        let given = Overrides {
            overhead_ns: Some(7_000),
            ..Overrides::default()
        };
        let cost = EmulatorCost::from_calibration(&c, TimerKind::Abstime, &given);
        let o = ReplaySetup {
            cost: cost.cost,
            ..ReplaySetup::default()
        }
        .plan_options();
        assert_eq!(o.overhead_after(Some(100_000_000)), 7_000);
    }
}
