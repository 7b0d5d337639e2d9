//! `jitter-trace`: inspect, compare, synthesise, convert and plot `.jtr` traces. The commands
//! are in `commands/`, one file each; this file holds the command line and `main`.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

mod commands;

use commands::advice::AdviceArgs;
use commands::attribution::{AttributionArgs, DiffArgs};
use commands::compare::CompareArgs;
use commands::filter::FilterArgs;
use commands::nodes::NodesArgs;
use commands::perfetto::PerfettoArgs;
use commands::plot::PlotArgs;
use commands::stats::StatsArgs;
use commands::synth::SynthArgs;
use commands::transform::{ConvertArgs, MergeArgs, ScaleArgs, SliceArgs};

/// Inspect, compare, synthesise, convert and plot OS-jitter traces.
#[derive(Debug, Parser)]
#[command(name = "jitter-trace", version, about)]
struct Cli {
    /// Print results as JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Statistics per stream and overall, and optionally what an injector can reproduce.
    Stats(StatsArgs),
    /// Compare trace B with trace A: KL divergence, KS statistic, noise ratio and rate.
    Compare(CompareArgs),
    /// Generate a synthetic trace from a spec, e.g. `periodic:period=10ms,dur=200us`.
    Synth(SynthArgs),
    /// Convert between .jtr, CSV, JSON lines, LogGOPSim and sysjitter raw files.
    Convert(ConvertArgs),
    /// Keep part of a trace: a time window or fraction, some CPUs, detours above a threshold.
    Slice(SliceArgs),
    /// Multiply every run-time and sleep-time by a factor S > 0.
    Scale(ScaleArgs),
    /// Merge detours separated by sleeps shorter than a minimum (run-times add).
    Merge(MergeArgs),
    /// Per-source table of a trace collected with `jitter-collect --attribute` (reads
    /// `<trace>.attr.json`).
    Attribution(AttributionArgs),
    /// Sources that are new, vanished or changed between two runs collected with
    /// `jitter-collect --attribute` (reads both sidecars).
    Diff(DiffArgs),
    /// Rank the nodes of a cluster-wide collection (one trace per node), noisiest first, and
    /// flag the outliers: robust z-score of noise ratio and max against the other nodes.
    Nodes(NodesArgs),
    /// Draw run-time densities, CDFs or time series of one or more traces into an SVG.
    Plot(PlotArgs),
    /// Export a collection (with its attribution when present) as Chrome/Perfetto trace-event
    /// JSON: a track per CPU, a slice per detour, noise % per 100 ms as a counter.
    Perfetto(PerfettoArgs),
    /// Tuning advice per source of an attributed trace, from the node's recorded configuration.
    Advice(AdviceArgs),
    /// Keep or drop the detour time of named sources of an attributed trace (net times);
    /// writes the trace and its attribution sidecar.
    Filter(FilterArgs),
}

/// Runs the chosen subcommand.
fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    match cli.command {
        Command::Stats(c) => c.run(json),
        Command::Compare(c) => c.run(json),
        Command::Synth(c) => c.run(json),
        Command::Convert(c) => c.run(json),
        Command::Slice(c) => c.run(json),
        Command::Scale(c) => c.run(json),
        Command::Merge(c) => c.run(json),
        Command::Attribution(c) => c.run(json),
        Command::Diff(c) => c.run(json),
        Command::Nodes(c) => c.run(json),
        Command::Plot(c) => c.run(json),
        Command::Filter(c) => c.run(json),
        Command::Advice(c) => c.run(json),
        Command::Perfetto(c) => c.run(json),
    }
}

fn main() -> ExitCode {
    jitter_cli::init();
    let cli: Cli = jitter_cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", jitter_cli::error_line(&e));
            ExitCode::from(2)
        }
    }
}
