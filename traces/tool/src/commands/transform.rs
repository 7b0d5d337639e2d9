//! The commands that rewrite a trace: `convert`, `slice`, `scale`, `merge`, each stream by
//! stream in constant memory in a `.jtr` input's length (other formats are read whole).

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;

use jitter_trace::rewritten::{Merged, Scaled};
use jitter_trace::sliced::{Part, SliceSpec, Sliced};

use crate::commands::input::{duration_arg, source, Input};
use crate::commands::output::{report_count, save_streams, Output};

/// `jitter-trace convert`.
#[derive(Debug, Args)]
pub(crate) struct ConvertArgs {
    /// Input file(s).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    output: Output,
}

/// `jitter-trace slice`.
#[derive(Debug, Args)]
pub(crate) struct SliceArgs {
    /// Input trace.
    trace: PathBuf,
    #[command(flatten)]
    input: Input,
    /// Start of the window, from the trace start (e.g. 1s).
    #[arg(long, value_parser = duration_arg)]
    start: Option<f64>,
    /// End of the window, from the trace start (e.g. 2s).
    #[arg(long, value_parser = duration_arg)]
    end: Option<f64>,
    /// Part of each stream as fractions `FROM:TO`, e.g. 0:0.5.
    #[arg(long, value_name = "FROM:TO", conflicts_with_all = ["start", "end"])]
    fraction: Option<String>,
    /// Keep only these CPUs (comma-separated).
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<u32>,
    /// Drop detours shorter than this (e.g. 1us).
    #[arg(long, value_parser = duration_arg)]
    drop_below: Option<f64>,
    #[command(flatten)]
    output: Output,
}

/// `jitter-trace scale`.
#[derive(Debug, Args)]
pub(crate) struct ScaleArgs {
    /// Input trace.
    trace: PathBuf,
    /// Scale factor.
    #[arg(allow_negative_numbers = true)]
    factor: f64,
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    output: Output,
}

/// `jitter-trace merge`.
#[derive(Debug, Args)]
pub(crate) struct MergeArgs {
    /// Input trace.
    trace: PathBuf,
    /// Shortest sleep kept (e.g. 10us).
    #[arg(long, value_parser = duration_arg)]
    min_sleep: f64,
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    output: Output,
}

impl ConvertArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let ConvertArgs {
            inputs,
            input,
            output,
        } = self;
        output.check()?;
        let src = source(&inputs, &input)?.src;
        let (written, count) = save_streams(src.as_ref(), &output)?;
        report_count(json, count, &written, json!({}))
    }
}

impl SliceArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let SliceArgs {
            trace,
            input,
            start,
            end,
            fraction,
            cpus,
            drop_below,
            output,
        } = self;
        output.check()?;
        let part = match fraction {
            Some(f) => Some(Part::Fraction(fraction_arg(&f, 0)?, fraction_arg(&f, 1)?)),
            None if start.is_some() || end.is_some() => Some(Part::Time(
                start.unwrap_or(0.0).round() as u64,
                end.map_or(u64::MAX, |e| e.round() as u64),
            )),
            None => None,
        };
        let spec = SliceSpec {
            cpus,
            part,
            drop_below: drop_below.map(|th| th.round() as u64),
        };
        let src = source(std::slice::from_ref(&trace), &input)?.src;
        let sliced = Sliced::new(src.as_ref(), &spec)?;
        let (written, count) = save_streams(&sliced, &output)?;
        let extra = json!({ "dropped": sliced.dropped() });
        report_count(json, count, &written, extra)
    }
}

/// Part `i` (0: FROM, 1: TO) of `--fraction FROM:TO`.
fn fraction_arg(f: &str, i: usize) -> Result<f64> {
    let (a, b) = f
        .split_once(':')
        .ok_or_else(|| anyhow!("--fraction must be FROM:TO, e.g. 0:0.5"))?;
    let v = if i == 0 { a } else { b };
    v.trim()
        .parse()
        .map_err(|_| anyhow!("`{v}` is not a number"))
}

impl ScaleArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let ScaleArgs {
            trace,
            factor,
            input,
            output,
        } = self;
        output.check()?;
        let src = source(std::slice::from_ref(&trace), &input)?.src;
        let scaled = Scaled::new(src.as_ref(), factor)?;
        let (written, count) = save_streams(&scaled, &output)?;
        report_count(json, count, &written, json!({ "scale": factor }))
    }
}

impl MergeArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let MergeArgs {
            trace,
            min_sleep,
            input,
            output,
        } = self;
        output.check()?;
        let src = source(std::slice::from_ref(&trace), &input)?.src;
        let merged = Merged::new(src.as_ref(), min_sleep.round() as u64)?;
        let (written, count) = save_streams(&merged, &output)?;
        report_count(json, count, &written, json!({ "merged": merged.merged() }))
    }
}
