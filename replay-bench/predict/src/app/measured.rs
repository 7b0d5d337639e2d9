//! `predict --app --runs-of APP_REPORT`: the measured runs of a `replay-bench app` report to
//! predict one by one — each counted run with the library, at its own `JITTER_SEED` and from
//! the points the preload library started its ranks at (`layout`), so that each run is set
//! beside the prediction of the stretches of trace it replayed. The harness reads them from its
//! report (`replay-bench`'s `app::runs_of`).

use std::sync::Arc;

use jitter_emulator::{SyncMode, SyncSchedule};

use super::layout::LibraryLayout;
use crate::placement::RunWindow;

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
        Arc::new(RunWindow {
            phase: self.barriers_before,
            points_ns: self
                .layout(streams)
                .loop_points(&schedule, self.barriers_before, period_ns),
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
