//! `predict --app --runs-of APP_REPORT`: the measured runs of a `replay-bench app` report to
//! predict one by one — each counted run with the library, at its own `JITTER_SEED` and from
//! the points the preload library started its ranks at (`crate::app::layout`), so that each
//! run is set beside the prediction of the stretches of trace it replayed.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use jitter_emulator::{SyncMode, SyncSchedule};

use crate::app::layout::LibraryLayout;
use crate::app::{AppReport, Arm};
use crate::predict::placement::RunWindow;

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
    /// Reads the app report at `path`.
    pub fn read(path: &Path, barriers_before: u64) -> anyhow::Result<MeasuredRuns> {
        let shown = path.display().to_string();
        use jitter_trace::interop::sniff::{expect_json, JsonKind};
        expect_json(
            "--runs-of",
            path,
            &[JsonKind::AppReport],
            "an application study (replay-bench app)",
        )?;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--runs-of: cannot read {shown}"))?;
        let report: AppReport = serde_json::from_str(&text)
            .with_context(|| format!("--runs-of: {shown} is not a replay-bench app report"))?;
        let sync: SyncMode = report
            .sync
            .parse()
            .with_context(|| format!("--runs-of: {shown}"))?;
        let counted = || {
            (report.runs.iter()).filter(|r| !r.warmup && r.arm == Arm::With && r.status.success())
        };
        let runs: Vec<MeasuredRun> = counted()
            .filter_map(|r| r.jitter_seed.map(|seed| MeasuredRun { pair: r.pair, seed }))
            .collect();
        anyhow::ensure!(
            !runs.is_empty(),
            "--runs-of: {shown} holds no counted run with the library"
        );
        let ranks = counted()
            .find_map(|r| r.library.as_ref().map(|l| l.ranks))
            .with_context(|| {
                format!("--runs-of: {shown}: no run says how many ranks the library had")
            })?;
        let (host, host_assumed) = match report.host {
            Some(h) => (h, false),
            None => (jitter_emulator::calibration::host_and_kernel().0, true),
        };
        Ok(MeasuredRuns {
            path: shown,
            runs,
            host,
            host_assumed,
            ranks,
            ranks_per_node: report.ranks_per_node,
            sync,
            scale: report.scale,
            barriers_before,
        })
    }

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
