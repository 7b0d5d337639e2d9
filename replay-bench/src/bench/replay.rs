//! The in-process JitterEmulator of one rank, seen from the benchmark: its measured cost, its
//! start at the node's offset, resyncs at the phases the sync schedule names, and its totals.

use std::sync::Arc;

use anyhow::Context;
use jitter_collect::clock::Clock;
use jitter_emulator::calibration::Calibration as EmulatorCalibration;
use jitter_emulator::{
    Emulator, Handle, InjectionCost, InjectorConfig, InjectorStats, Overrides, Plan, SyncSchedule,
    TimerKind,
};

use super::phases::PhaseHook;
use jitter_report::report::EmulatorTotals;

/// The injector's own cost on this rank (pitfalls 1 and 2) with its spread, ns.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct EmulatorCost {
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
pub struct ReplayTotals {
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
}

impl ReplayTotals {
    /// The counters as a vector to sum over ranks.
    pub fn to_sums(self) -> [f64; 6] {
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
    pub fn from_sums(s: &[f64; 6], max_progress: f64) -> Self {
        ReplayTotals {
            injected: s[0] as u64,
            dropped: s[1] as u64,
            merged: s[2] as u64,
            injected_ns: s[3] as u64,
            dropped_ns: s[4] as u64,
            noise_ns: s[5] as u64,
            progress: max_progress,
        }
    }

    /// The totals of one injector run.
    pub fn from_stats(st: &InjectorStats, progress: f64) -> Self {
        ReplayTotals {
            injected: st.injected,
            dropped: st.dropped,
            merged: st.merged,
            injected_ns: st.injected_ns,
            dropped_ns: st.plan.dropped_ns,
            noise_ns: st.plan.noise_ns,
            progress,
        }
    }

    /// The report's form.
    pub fn to_report(self) -> EmulatorTotals {
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
pub struct WindowMark {
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

/// A running emulator with its sync schedule: the benchmark's [`PhaseHook`].
#[derive(Debug)]
pub struct Replay {
    handle: Handle,
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
        clock: &Clock,
    ) -> anyhow::Result<Replay> {
        let timeline_ns = plan.period_ns();
        let cursor = plan.cursor(schedule.start_offset(node, timeline_ns));
        let config = InjectorConfig {
            timer: plan.options().timer,
            clock: *clock,
        };
        let handle = Emulator::start(cursor, config).context("cannot start the emulator")?;
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
        let progress = self.handle.progress();
        let stats = self.handle.stop().context("cannot stop the emulator")?;
        Ok(ReplayTotals::from_stats(&stats, progress))
    }
}

/// One process playing K barrier-free virtual ranks on one emulator: each virtual rank keeps
/// its own point on the trace's timeline, which advances only while its compute window (and
/// what follows it up to the next switch) runs; the emulator jumps there before each window.
#[derive(Debug)]
pub struct VirtualReplay {
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
        let replay = Replay::start(plan, first_id, schedule, clock)?;
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
