//! `jitter-trace synth`: a synthetic trace from a spec.

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;

use jitter_trace::synth::{synthesize, Spec};

use crate::commands::input::duration_arg;
use crate::commands::output::{report_written, save, Output};

/// `jitter-trace synth`.
#[derive(Debug, Args)]
pub(crate) struct SynthArgs {
    /// Noise sources joined by `+` (see the crate docs of `synth`).
    spec: String,
    /// Length of each stream (e.g. 10s).
    #[arg(long, value_parser = duration_arg)]
    duration: f64,
    /// Number of streams (CPUs 0..n).
    #[arg(long, default_value_t = 1)]
    streams: u32,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    output: Output,
}

impl SynthArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let SynthArgs {
            spec,
            duration,
            streams,
            seed,
            output,
        } = self;
        output.check()?;
        let spec: Spec = spec.parse()?;
        if duration < 1.0 || duration >= u64::MAX as f64 {
            bail!("duration must be at least 1 ns");
        }
        let trace = synthesize(&spec, streams, duration.round() as u64, seed)?;
        let written = save(&trace, &output)?;
        report_written(json, &trace, &written, json!({}))
    }
}
