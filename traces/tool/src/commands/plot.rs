//! `jitter-trace plot`: run-time densities, CDFs or time series of traces into an SVG.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::commands::input::{source, Input, Source};
use crate::commands::output::{check_svg, print_json};
use jitter_plot::{plot, series_names, PlotKind, Series};

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
        // Read stream by stream: only the density holds every run-time (8 bytes each).
        let loaded: Vec<Source> = traces
            .iter()
            .map(|p| source(std::slice::from_ref(p), &input))
            .collect::<Result<_>>()?;
        if kind != PlotKind::TimeSeries {
            // A distribution of no run-times is an empty chart that looks like a drawn one.
            let quiet = |t: &Source| t.detours == 0;
            if let Some((p, _)) = traces.iter().zip(&loaded).find(|(_, t)| quiet(t)) {
                anyhow::bail!(
                    "{} has no detours: no run-times to draw (--kind timeseries draws its quiet \
                     time line)",
                    p.display()
                );
            }
        }
        let items: Vec<(&std::path::Path, &jitter_trace::Header)> = traces
            .iter()
            .map(PathBuf::as_path)
            .zip(loaded.iter().map(|t| &t.src.frame().header))
            .collect();
        let labels = series_names(&items);
        let series: Vec<Series> = loaded
            .iter()
            .zip(&labels)
            .map(|(t, l)| Series {
                label: l,
                source: t.src.as_ref(),
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
