//! The options of the commands that read reports: `replay-bench compare` and
//! `replay-bench plot-study`.

use std::path::PathBuf;

use clap::Args;

use jitter_report::plot::Metric;

/// Options of `replay-bench plot-study`.
#[derive(Debug, Clone, Args)]
pub struct PlotStudyArgs {
    /// Reports (JSON) of the study.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Write the plot here.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Slowdown equation plotted.
    #[arg(long, value_enum, default_value_t = Metric::Qtbt)]
    pub metric: Metric,
    /// Plot title.
    #[arg(long, default_value = "Slowdown vs processes")]
    pub title: String,
}

/// Options of `replay-bench compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// First report (e.g. a measurement).
    pub a: PathBuf,
    /// Second report (e.g. a prediction).
    pub b: PathBuf,
}
