//! `jitter-trace plot`: run-time densities, CDFs or time series of traces into an SVG.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use jitter_trace::plot::{plot, series_names, PlotKind, Series};
use jitter_trace::Trace;

use crate::commands::input::{load, Input};
use crate::commands::output::{check_svg, print_json};

/// `jitter-trace plot`.
#[derive(Debug, Args)]
pub(crate) struct PlotArgs {
    /// Traces to overlay (each one file).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    #[command(flatten)]
    input: Input,
    /// density, cdf or timeseries.
    #[arg(long, default_value = "density")]
    kind: PlotKind,
    /// Title of the plot (default: the kind in words, e.g. "Time series of detour run-times").
    #[arg(long)]
    title: Option<String>,
    /// Output SVG.
    #[arg(short, long)]
    output: PathBuf,
}

impl PlotArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let PlotArgs {
            traces,
            input,
            kind,
            title,
            output,
        } = self;
        check_svg(Some(&output), "-o")?;
        let loaded: Vec<Trace> = traces
            .iter()
            .map(|p| load(std::slice::from_ref(p), &input))
            .collect::<Result<_>>()?;
        let items: Vec<(&std::path::Path, &jitter_trace::Header)> = traces
            .iter()
            .map(PathBuf::as_path)
            .zip(loaded.iter().map(|t| &t.header))
            .collect();
        let labels = series_names(&items);
        let series: Vec<Series> = loaded
            .iter()
            .zip(&labels)
            .map(|(t, l)| Series {
                label: l,
                streams: &t.streams,
            })
            .collect();
        let title = title.unwrap_or_else(|| kind.title().to_string());
        plot(kind, &series, &title, &output)?;
        if json {
            print_json(&json!({ "output": output.display().to_string() }))
        } else {
            println!("wrote {}", output.display());
            Ok(())
        }
    }
}
