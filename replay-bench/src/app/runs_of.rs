//! `predict --app --runs-of APP_REPORT`: a `replay-bench app` report read for the predictor,
//! which predicts each of its counted runs with the library from its own `JITTER_SEED` and the
//! points the preload library stood at when the run's main loop began (each rank's loop timing,
//! where the run timed its loop).

use std::path::Path;

use anyhow::Context as _;
use jitter_emulator::SyncMode;
use jitter_predict::app::{MeasuredRun, MeasuredRuns};

use super::app_report::AppReport;
use super::pairs::Arm;

/// The measured runs of the app report at `path` (`--runs-of`), as the predictor replays them
/// (`jitter_predict::app::MeasuredRuns`): its counted runs with the library, their seeds, host,
/// ranks, sync mode and S; `barriers_before` is `--barriers-before`.
pub fn runs_of(path: &Path, barriers_before: u64) -> anyhow::Result<MeasuredRuns> {
    let shown = path.display().to_string();
    use jitter_trace::sniff::{expect_json, JsonKind};
    expect_json(
        "--runs-of",
        path,
        &[JsonKind::AppReport],
        "an application study (replay-bench app)",
    )?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--runs-of: cannot read {shown}"))?;
    let report: AppReport = serde_json::from_str(&text)
        .with_context(|| format!("--runs-of: {shown} is not a replay-bench app report"))?;
    let sync: SyncMode = report
        .sync
        .parse()
        .with_context(|| format!("--runs-of: {shown}"))?;
    let counted =
        || (report.runs.iter()).filter(|r| !r.warmup && r.arm == Arm::With && r.status.success());
    let runs: Vec<MeasuredRun> = counted()
        .filter_map(|r| r.jitter_seed.map(|seed| MeasuredRun { pair: r.pair, seed }))
        .collect();
    let timings = counted()
        .filter(|r| r.jitter_seed.is_some())
        .map(|r| r.ranks.clone())
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
        timings,
    })
}
