//! Where each rank runs and what it replays: ranks in node groups of k (ranks g·k … g·k+k−1
//! form node group g), node group g replays node trace g mod n, its local rank j = r mod k
//! stream j mod s of it (s: the streams of each node trace used, k or fewer) on the timeline
//! `jitter_emulator::placement::slot` gives (the rule of the preload library and `run`: ranks
//! beyond the first s of a node replay copies on timelines of their own). One node trace
//! (n = 1) is the single-trace layout.

use std::sync::Arc;

use jitter_emulator::SyncSchedule;

/// The label of a node-trace set of `n` traces in tables and plots.
pub fn set_label(n: usize) -> String {
    format!("nodes({n})")
}

/// The rank → (node trace, stream, timeline) mapping of k ranks per node over n node traces
/// of s streams each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    k: u64,
    n: u64,
    /// Streams (plans) per node trace: k, or fewer for a single trace of fewer streams.
    s: u64,
}

impl Placement {
    /// `k` ranks per node over `plans` plans: k per node trace (trace t's at t·k … t·k+k−1),
    /// or, with fewer plans than k, one trace of that many streams (its copies: the
    /// placement rule).
    pub fn new(k: u64, plans: usize) -> anyhow::Result<Self> {
        anyhow::ensure!(k > 0, "ranks per node must be at least 1");
        let plans = plans as u64;
        anyhow::ensure!(plans > 0, "no stream to replay");
        if plans < k {
            return Ok(Placement { k, n: 1, s: plans });
        }
        anyhow::ensure!(
            plans % k == 0,
            "{plans} plans are not whole node traces of {k} streams each"
        );
        Ok(Placement {
            k,
            n: plans / k,
            s: k,
        })
    }

    /// Ranks per node k.
    pub fn ranks_per_node(self) -> u64 {
        self.k
    }

    /// Node traces n.
    pub fn node_traces(self) -> usize {
        self.n as usize
    }

    /// Node group of `rank` (its ranks share one start offset).
    #[inline]
    pub fn node(self, rank: u64) -> u64 {
        rank / self.k
    }

    /// Node trace that `rank` replays: its node group mod n.
    #[inline]
    pub fn trace(self, rank: u64) -> usize {
        ((rank / self.k) % self.n) as usize
    }

    /// Stream of its node trace that `rank` replays: (rank mod k) mod s.
    #[inline]
    pub fn stream(self, rank: u64) -> usize {
        ((rank % self.k) % self.s) as usize
    }

    /// Streams used of each node trace, s.
    pub fn streams(self) -> u64 {
        self.s
    }

    /// Timeline of `rank` in the sync schedule: its node group's for the first s ranks of
    /// the group, one of its own for each further copy (`jitter_emulator::placement::slot`).
    #[inline]
    pub fn timeline(self, rank: u64) -> u64 {
        jitter_emulator::placement::slot(self.node(rank), rank % self.k, self.s).timeline
    }

    /// Plan index of `rank`: `((rank / k) mod n) · s + (rank mod k) mod s` (0 without a
    /// division where there is one plan, the usual case, asked once per question of a
    /// collective).
    #[inline]
    pub fn plan(self, rank: u64) -> usize {
        if self.s == 1 && self.n == 1 {
            return 0;
        }
        self.trace(rank) * self.s as usize + self.stream(rank)
    }

    /// Node trace of plan `plan`.
    #[inline]
    pub(crate) fn trace_of_plan(self, plan: usize) -> usize {
        plan / self.s as usize
    }

    /// How many of ranks `0..ranks` replay node trace `t`.
    pub(crate) fn ranks_on_trace(self, ranks: u64, t: usize) -> u64 {
        let t = t as u64;
        let (full, rest) = (ranks / self.k, ranks % self.k);
        let groups = full / self.n + u64::from(t < full % self.n);
        groups * self.k + if full % self.n == t { rest } else { 0 }
    }
}

/// Where the nodes of a real run started one measured stretch of jitter (a window of
/// `ReplayedWindows`): a prediction of the same stretch starts there instead of at the sync
/// schedule's offsets, and resyncs as the run's schedule did from the run's phase `phase` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunWindow {
    /// The run's phase index (warm-up included) of the window's first phase.
    pub phase: u64,
    /// Timeline point of each rank, trace ns.
    pub points_ns: Vec<u64>,
}

/// A placement with the timeline length of each node trace (each has its own window): the
/// start and resync points every engine draws.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timelines {
    /// The mapping.
    pub placement: Placement,
    /// Period of each node trace's timeline, trace ns.
    periods: Vec<u64>,
    /// A run's window to replay instead of the schedule's start (`None`: the schedule's).
    window: Option<Arc<RunWindow>>,
}

impl Timelines {
    /// `k` ranks per node over plans of these periods (k per node trace; the streams of one
    /// trace share its window).
    pub fn new(k: u64, plan_periods: &[u64]) -> anyhow::Result<Self> {
        let placement = Placement::new(k, plan_periods.len())?;
        let periods = (plan_periods.iter())
            .step_by(placement.s as usize)
            .copied()
            .collect();
        Ok(Timelines {
            placement,
            periods,
            window: None,
        })
    }

    /// These timelines started at a run's `window` (for `ranks` ranks: one point per rank).
    pub(crate) fn at_window(
        mut self,
        window: Option<Arc<RunWindow>>,
        ranks: u64,
    ) -> anyhow::Result<Self> {
        if let Some(w) = &window {
            anyhow::ensure!(
                w.points_ns.len() as u64 >= ranks,
                "the run's window holds the start points of {} ranks, not {ranks}",
                w.points_ns.len()
            );
        }
        self.window = window;
        Ok(self)
    }

    /// True when every rank starts at one point (the schedule's mode is not `none`, or a run's
    /// window whose ranks all started at one point).
    pub(crate) fn common_start(&self, mode: jitter_emulator::SyncMode) -> bool {
        match &self.window {
            None => mode != jitter_emulator::SyncMode::None,
            Some(w) => w.points_ns.windows(2).all(|p| p[0] == p[1]),
        }
    }

    /// Where `rank`'s replay starts on its timeline under `schedule`.
    #[inline]
    pub fn start_offset(&self, schedule: &SyncSchedule, rank: u64) -> u64 {
        let t = self.placement.trace(rank);
        match &self.window {
            Some(w) => w.points_ns[rank as usize] % self.periods[t].max(1),
            None => schedule.start_offset(self.placement.timeline(rank), self.periods[t]),
        }
    }

    /// The resync point of each node trace at the start of `phase` into `out` (one per node
    /// trace); false when the phase does not resync.
    pub(crate) fn resync_points(
        &self,
        schedule: &SyncSchedule,
        phase: u64,
        out: &mut [u64],
    ) -> bool {
        // A run's window starts at its own points; its later phases are the run's phases.
        let phase = match &self.window {
            Some(_) if phase == 0 => return false,
            Some(w) => w.phase + phase,
            None => phase,
        };
        for (o, &p) in out.iter_mut().zip(&self.periods) {
            match schedule.resync_offset(phase, p) {
                Some(x) => *o = x,
                None => return false,
            }
        }
        !self.periods.is_empty()
    }

    /// A buffer for [`Timelines::resync_points`].
    pub(crate) fn points_buffer(&self) -> Vec<u64> {
        vec![0; self.periods.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_emulator::SyncMode;

    #[test]
    fn node_groups_cycle_over_the_node_traces() {
        let p = Placement::new(2, 6).unwrap();
        assert_eq!(p.node_traces(), 3);
        let plans: Vec<usize> = (0..8).map(|r| p.plan(r)).collect();
        assert_eq!(plans, vec![0, 1, 2, 3, 4, 5, 0, 1]);
        assert_eq!((p.node(7), p.trace(7), p.stream(7)), (3, 0, 1));
        // One node trace: the single-trace layout r mod k.
        let one = Placement::new(3, 3).unwrap();
        assert!((0..10).all(|r| one.plan(r) == (r % 3) as usize));
        assert!(Placement::new(2, 3)
            .unwrap_err()
            .to_string()
            .contains("whole"));
        assert!(Placement::new(2, 0).is_err());
    }

    #[test]
    fn more_ranks_per_node_than_streams_replay_copies_on_their_own_timelines() {
        // k = 3 on a two-stream trace: local ranks 0, 1, 2 replay streams 0, 1, 0; rank 2 (copy
        // 1) on a timeline of its own, as the preload library and run place it.
        let p = Placement::new(3, 2).unwrap();
        assert_eq!((p.node_traces(), p.streams()), (1, 2));
        let plans: Vec<usize> = (0..6).map(|r| p.plan(r)).collect();
        assert_eq!(plans, vec![0, 1, 0, 0, 1, 0]);
        for r in 0..6 {
            let want = jitter_emulator::placement::slot(r / 3, r % 3, 2);
            assert_eq!((p.stream(r), p.timeline(r)), (want.stream, want.timeline));
        }
        assert_eq!((p.timeline(0), p.timeline(1), p.timeline(4)), (0, 0, 1));
        assert_ne!(p.timeline(2), p.timeline(0));
        // Under sync none, ranks 0 and 2 start at different points; under once, at one.
        let t = Timelines::new(3, &[1_000_000_000; 2]).unwrap();
        let none = SyncSchedule {
            mode: SyncMode::None,
            seed: 5,
        };
        let once = SyncSchedule {
            mode: SyncMode::Once,
            seed: 5,
        };
        assert_ne!(t.start_offset(&none, 0), t.start_offset(&none, 2));
        assert_eq!(t.start_offset(&none, 0), t.start_offset(&none, 1));
        assert_eq!(t.start_offset(&once, 0), t.start_offset(&once, 2));
        // One stream, two ranks per node (issue 32's case): both stream 0, own offsets.
        let one = Placement::new(2, 1).unwrap();
        assert_eq!((one.plan(0), one.plan(1)), (0, 0));
        assert_ne!(one.timeline(0), one.timeline(1));
    }

    #[test]
    fn each_node_trace_draws_on_its_own_period() {
        let t = Timelines::new(1, &[1_000, 50]).unwrap();
        let s = SyncSchedule {
            mode: SyncMode::Phase,
            seed: 7,
        };
        let mut out = t.points_buffer();
        assert!(t.resync_points(&s, 1, &mut out));
        assert_eq!(
            out,
            vec![
                s.resync_offset(1, 1_000).unwrap(),
                s.resync_offset(1, 50).unwrap()
            ]
        );
        assert!(!t.resync_points(&s, 0, &mut out));
        assert_eq!(t.start_offset(&s, 3), s.start_offset(3, 50));
    }

    #[test]
    fn a_runs_window_starts_every_rank_at_its_point_and_resyncs_at_the_runs_phases() {
        let schedule = SyncSchedule {
            mode: SyncMode::Phase,
            seed: 7,
        };
        let window = RunWindow {
            phase: 120,
            points_ns: vec![5, 900, 40],
        };
        let t = Timelines::new(1, &[1_000])
            .unwrap()
            .at_window(Some(Arc::new(window)), 3)
            .unwrap();
        assert_eq!(
            (0..3)
                .map(|r| t.start_offset(&schedule, r))
                .collect::<Vec<_>>(),
            vec![5, 900, 40]
        );
        assert!(!t.common_start(SyncMode::Phase));
        let mut out = t.points_buffer();
        // The window's first phase is its start, never a resync.
        assert!(!t.resync_points(&schedule, 0, &mut out));
        for p in [1, 2, 7] {
            assert!(t.resync_points(&schedule, p, &mut out));
            assert_eq!(
                out[0],
                schedule.resync_offset(120 + p, 1_000).unwrap(),
                "phase {p}"
            );
        }
        // Too few points for the ranks: refused.
        let short = RunWindow {
            phase: 0,
            points_ns: vec![1],
        };
        assert!(Timelines::new(1, &[1_000])
            .unwrap()
            .at_window(Some(Arc::new(short)), 2)
            .is_err());
    }
}
