//! The options of `replay-bench study`, `replay-bench choose-scale` and `choose-inject`.

use std::path::PathBuf;

use clap::Args;
use jitter_emulator::TimerKind;
use jitter_emulator_cli::SalvageArgs;

/// Options of `replay-bench study`.
#[derive(Debug, Clone, Args)]
pub struct StudyArgs {
    /// Folder written by scripts/demo.sh (trace.jtr, calibration.json, run-*.json, predict*.json).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Where to write the Markdown report (default: DIR/report.md).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Rank count of the predicted headline.
    #[arg(long, default_value_t = 2048)]
    pub headline_ranks: u64,
    /// Whether to go on with a trace that lacks detours.
    #[command(flatten)]
    pub salvage: SalvageArgs,
}

/// Options of `replay-bench choose-scale`.
#[derive(Debug, Clone, Args)]
pub struct ChooseScaleArgs {
    /// Trace to replay.
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Emulator calibration (JSON of `jitter-emulate calibrate --json`).
    #[arg(long, value_name = "FILE")]
    pub calibration: PathBuf,
    /// Timer whose overhead counts.
    #[arg(long, default_value = "abstime", value_parser = parse_timer)]
    pub timer: TimerKind,
    /// Share of detours that must become injectable (the paper's S = 3 covered 77 %).
    #[arg(long, default_value_t = 0.77)]
    pub share: f64,
    /// Largest scale accepted (replays take S times longer).
    #[arg(long, default_value_t = 20)]
    pub max: u64,
    /// When --max does not reach --share, print --max (with a warning) instead of failing.
    #[arg(long)]
    pub allow_capped: bool,
    /// Whether to go on with a trace that lacks detours.
    #[command(flatten)]
    pub salvage: SalvageArgs,
}

/// Options of `replay-bench choose-inject`.
#[derive(Debug, Clone, Args)]
pub struct ChooseInjectArgs {
    /// Trace to replay.
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Emulator calibration (JSON of `jitter-emulate calibrate --json`): the signal's cost O.
    #[arg(long, value_name = "FILE")]
    pub calibration: PathBuf,
    /// Timer whose overhead counts.
    #[arg(long, default_value = "abstime", value_parser = parse_timer)]
    pub timer: TimerKind,
    /// Whether to go on with a trace that lacks detours.
    #[command(flatten)]
    pub salvage: SalvageArgs,
}

fn parse_timer(s: &str) -> Result<TimerKind, String> {
    s.parse()
        .map_err(|e: jitter_emulator::PlanError| e.to_string())
}
