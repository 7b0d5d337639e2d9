//! `predict --app --runs-of APP_REPORT`: the measured runs of a `replay-bench app` report to
//! predict one by one — each counted run with the library, at its own `JITTER_SEED` and from
//! the points the preload library stood at when the run's main loop began, so that each run is
//! set beside the prediction of the stretches of trace it replayed. The harness reads them from
//! its report (`replay-bench`'s `app::runs_of`).
//!
//! Where the run timed its loop (`app --metric loop`: each rank's loop start and the barriers
//! before it, from its profile), a rank's point is where its replay stood then: its start
//! offset plus the time since `MPI_Init` returned, or, where a barrier before the loop resynced
//! it, that resync point plus the time since that barrier returned — wall time ÷ S on the
//! trace's timeline. Otherwise (a report without loop timings) the points are those of
//! `layout` after `--barriers-before` barriers, the set-up's time not added.

use std::sync::Arc;

use jitter_emulator::{SyncMode, SyncSchedule};
use jitter_profile::structure::RankTiming;

use super::layout::LibraryLayout;
use crate::rank_layout::RunWindow;

/// One run to predict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasuredRun {
    /// Its pair in the app report.
    pub pair: u64,
    /// Its `JITTER_SEED`.
    pub seed: u64,
}

/// The runs of one app report and how the library laid them out.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredRuns {
    /// The report's path, as given.
    pub path: String,
    /// The counted runs with the library, in the order they ran.
    pub runs: Vec<MeasuredRun>,
    /// The host they ran on (the report's; this host's for a report that does not say).
    pub host: String,
    /// True when the report did not name its host and this host's name was taken.
    pub host_assumed: bool,
    /// Ranks of each run.
    pub ranks: u64,
    /// `JITTER_RANKS_PER_NODE`, if given.
    pub ranks_per_node: Option<u64>,
    /// `JITTER_SYNC`.
    pub sync: SyncMode,
    /// S.
    pub scale: f64,
    /// `MPI_Barrier` calls before the program's main loop (`--barriers-before`).
    pub barriers_before: u64,
    /// Each run's ranks' loop timings (by rank; empty where the run did not time its loop).
    pub timings: Vec<Vec<RankTiming>>,
}

impl MeasuredRuns {
    /// The library's layout of the runs on a trace of `streams` streams.
    pub fn layout(&self, streams: u64) -> LibraryLayout {
        LibraryLayout {
            host: self.host.clone(),
            ranks: self.ranks,
            ranks_per_node: self.ranks_per_node,
            streams,
        }
    }

    /// The window of `run` on a timeline of `period_ns`: every rank's point at the loop's start;
    /// its later resyncs are the run's phases after the barriers before the loop.
    pub fn window(&self, run: MeasuredRun, streams: u64, period_ns: u64) -> Arc<RunWindow> {
        let schedule = SyncSchedule {
            mode: self.sync,
            seed: run.seed,
        };
        let timed = (self.runs.iter())
            .position(|r| *r == run)
            .and_then(|i| self.timings.get(i))
            .filter(|t| t.len() as u64 == self.ranks);
        if let Some(w) = timed.and_then(|t| self.timed_window(t, &schedule, streams, period_ns)) {
            return Arc::new(w);
        }
        Arc::new(RunWindow {
            phase: self.barriers_before,
            points_ns: self
                .layout(streams)
                .loop_points(&schedule, self.barriers_before, period_ns),
        })
    }

    /// The window of a run that timed its loop: each rank's point when its loop began.
    fn timed_window(
        &self,
        ranks: &[RankTiming],
        schedule: &SyncSchedule,
        streams: u64,
        period_ns: u64,
    ) -> Option<RunWindow> {
        let phase = ranks.first()?.barriers_before?;
        let layout = self.layout(streams);
        let wrap = |ns: u64| ns % period_ns.max(1);
        let on_trace = |wall_ns: u64| (wall_ns as f64 / self.scale).round() as u64;
        let resync = schedule.resync_offset(phase, period_ns);
        let earlier = (1..phase).any(|b| schedule.resync_offset(b, period_ns).is_some());
        let points = (ranks.iter().enumerate())
            .map(|(r, t)| {
                let start = t.loop_start_ns?;
                match resync {
                    // Resynced at the last barrier before the loop: from there.
                    Some(at) => {
                        let since = start.saturating_sub(t.last_barrier_exit_ns?);
                        Some(wrap(at + on_trace(since)))
                    }
                    // Resynced at an earlier barrier only: its time is not kept.
                    None if earlier => None,
                    None => {
                        let timeline = layout.slot(r as u64).timeline;
                        Some(wrap(
                            schedule.start_offset(timeline, period_ns) + on_trace(start),
                        ))
                    }
                }
            })
            .collect::<Option<Vec<u64>>>()?;
        Some(RunWindow {
            phase,
            points_ns: points,
        })
    }

    /// Refuses a prediction that is not of these runs (other ranks, sync mode or scale).
    pub fn check(&self, ranks: &[u64], modes: &[SyncMode], scale: f64) -> anyhow::Result<()> {
        anyhow::ensure!(
            ranks == [self.ranks] && modes == [self.sync],
            "--runs-of: the runs of {} are {} ranks under sync {}: give --ranks {} --sync {}",
            self.path,
            self.ranks,
            self.sync,
            self.ranks,
            self.sync
        );
        anyhow::ensure!(
            (scale - self.scale).abs() <= 1e-12 * self.scale.abs(),
            "--runs-of: the runs of {} replayed at S = {}, not {scale}",
            self.path,
            self.scale
        );
        Ok(())
    }

    /// What the report's warnings say about the layout, if anything.
    pub fn note(&self) -> Option<String> {
        self.host_assumed.then(|| {
            format!(
                "--runs-of: {} does not name its host; the runs are taken to have run on this \
                 one ({}), whose name sets the library's timelines under sync none",
                self.path, self.host
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(sync: SyncMode, scale: f64, timings: Vec<Vec<RankTiming>>) -> MeasuredRuns {
        MeasuredRuns {
            path: "app.json".into(),
            runs: vec![MeasuredRun { pair: 1, seed: 77 }],
            host: "node-a".into(),
            host_assumed: false,
            ranks: 2,
            ranks_per_node: None,
            sync,
            scale,
            barriers_before: 0,
            timings,
        }
    }

    fn timing(start: u64, barriers: u64, barrier_exit: Option<u64>) -> RankTiming {
        RankTiming {
            startup_ns: 1_000,
            mpi_init_ns: 2_000,
            loop_start_ns: Some(start),
            loop_end_ns: Some(start + 1_000_000),
            iterations: 10,
            barriers_before: Some(barriers),
            last_barrier_exit_ns: barrier_exit,
        }
    }

    /// Under phase the loop starts at the resync point of the barrier before it plus the time
    /// since that barrier (÷ S); under none at each rank's start offset plus the time since
    /// MPI_Init; a report without timings keeps the layout's points.
    #[test]
    fn a_timed_run_starts_each_rank_where_its_replay_stood_when_its_loop_began() {
        let period = 10_000_000_000;
        let run = MeasuredRun { pair: 1, seed: 77 };
        let t = vec![timing(5_000_000, 1, Some(4_000_000)); 2];
        let m = runs(SyncMode::Phase, 2.0, vec![t.clone()]);
        let s = SyncSchedule {
            mode: SyncMode::Phase,
            seed: 77,
        };
        let at = s.resync_offset(1, period).unwrap();
        let w = m.window(run, 1, period);
        assert_eq!(w.phase, 1);
        assert_eq!(w.points_ns, vec![(at + 500_000) % period; 2]);
        let m = runs(SyncMode::None, 1.0, vec![t]);
        let w = m.window(run, 1, period);
        let s = SyncSchedule {
            mode: SyncMode::None,
            seed: 77,
        };
        let layout = m.layout(1);
        for r in 0..2 {
            let off = s.start_offset(layout.slot(r).timeline, period);
            assert_eq!(w.points_ns[r as usize], (off + 5_000_000) % period);
        }
        // Without timings: the layout's points (no set-up time added).
        let m = runs(SyncMode::None, 1.0, vec![Vec::new()]);
        assert_eq!(
            m.window(run, 1, period).points_ns,
            layout.loop_points(&s, 0, period)
        );
    }
}
