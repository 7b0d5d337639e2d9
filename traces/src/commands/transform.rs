//! The commands that rewrite a trace: `convert`, `slice`, `scale`, `merge`.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;

use jitter_trace::transform;

use crate::commands::input::{duration_arg, load, Input};
use crate::commands::output::{report_written, save, Output};

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
        let trace = load(&inputs, &input)?;
        let written = save(&trace, &output)?;
        report_written(json, &trace, &written, json!({}))
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
        let mut t = load(std::slice::from_ref(&trace), &input)?;
        let mut dropped = 0;
        if !cpus.is_empty() {
            t = transform::select_streams(&t, &cpus)?;
        }
        if let Some(f) = fraction {
            let (a, b) = f
                .split_once(':')
                .ok_or_else(|| anyhow!("--fraction must be FROM:TO, e.g. 0:0.5"))?;
            let a: f64 = a
                .trim()
                .parse()
                .map_err(|_| anyhow!("`{a}` is not a number"))?;
            let b: f64 = b
                .trim()
                .parse()
                .map_err(|_| anyhow!("`{b}` is not a number"))?;
            t = transform::slice_fraction(&t, a, b)?;
        } else if start.is_some() || end.is_some() {
            let s = start.unwrap_or(0.0).round() as u64;
            let e = end.map_or(u64::MAX, |e| e.round() as u64);
            t = transform::slice_time(&t, s, e)?;
        }
        if let Some(th) = drop_below {
            (t, dropped) = transform::drop_below(&t, th.round() as u64)?;
        }
        let written = save(&t, &output)?;
        report_written(json, &t, &written, json!({ "dropped": dropped }))
    }
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
        let t = load(std::slice::from_ref(&trace), &input)?;
        let t = transform::scale(&t, factor)?;
        let written = save(&t, &output)?;
        report_written(json, &t, &written, json!({ "scale": factor }))
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
        let t = load(std::slice::from_ref(&trace), &input)?;
        let (t, merged) = transform::merge_short_sleeps(&t, min_sleep.round() as u64)?;
        let written = save(&t, &output)?;
        report_written(json, &t, &written, json!({ "merged": merged }))
    }
}
