//! `jitter-trace`: inspect, compare, synthesise, convert and plot `.jtr` traces.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::json;

use jitter_trace::attribution::{
    csv as attribution_csv, diff, render, render_diff, report_with_periods, samples, sidecar_path,
    within_runs, Attribution, Mode,
};
use jitter_trace::compare::compare;
use jitter_trace::integrity::{Integrity, Salvage, SALVAGED_NOTE};
use jitter_trace::interop::{export, import, per_stream_path, Format};
use jitter_trace::output::{check_output, check_writable, write_output_bytes};
use jitter_trace::plot::{
    plot, series_names, source_bars_svg, source_density_svg, PlotKind, Series,
};
use jitter_trace::stats::{injectability, scale_for_share, TraceStats};
use jitter_trace::synth::{synthesize, Spec};
use jitter_trace::transform;
use jitter_trace::units::parse_duration_ns;
use jitter_trace::Trace;

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

/// How to read the input traces.
#[derive(Debug, Args)]
struct Input {
    /// Input format (default: from the file name).
    #[arg(long, value_name = "FORMAT")]
    from: Option<Format>,
    /// Go on with a trace that lacks detours (its ring dropped some, a chunk is damaged, the
    /// file is truncated), printing the share kept, instead of refusing it.
    #[arg(long)]
    salvage: bool,
}

/// Where to write the output trace.
#[derive(Debug, Args)]
struct Output {
    /// Output file; a device is written through, a link is followed; a LogGOPSim export of
    /// several streams needs `{cpu}` in the name (one file per CPU).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Output format (default: from the file name).
    #[arg(long, value_name = "FORMAT")]
    to: Option<Format>,
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

/// `jitter-trace perfetto`.
#[derive(Debug, Args)]
struct PerfettoArgs {
    /// The trace (its attribution `<trace>.attr.json` is used when present).
    trace: PathBuf,
    #[command(flatten)]
    input: Input,
    /// Keep only this stretch, `FROM..TO` from the trace's start (e.g. 10s..20s).
    #[arg(long, value_name = "FROM..TO")]
    window: Option<String>,
    /// Most detours drawn as slices (the longest); the rest are in the counters only.
    #[arg(long, default_value_t = jitter_trace::interop::perfetto::DEFAULT_MAX_SLICES)]
    max_slices: usize,
    /// Output JSON file.
    #[arg(short, long)]
    output: PathBuf,
}

/// `jitter-trace advice`.
#[derive(Debug, Args)]
struct AdviceArgs {
    /// The attributed trace (its sidecar `<trace>.attr.json` beside it).
    trace: PathBuf,
    /// Sources with less of the noise time get no hint (fraction).
    #[arg(long, default_value_t = 0.01)]
    min_share: f64,
}

/// `jitter-trace filter`.
#[derive(Debug, Args)]
struct FilterArgs {
    /// The attributed trace (its sidecar `<trace>.attr.json` beside it).
    trace: PathBuf,
    /// Drop these sources' time: labels (`timer`, `task:x`), kinds (`task`) or
    /// `category:NAME`, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        conflicts_with = "keep",
        required_unless_present = "keep"
    )]
    drop: Vec<jitter_trace::filter::Selector>,
    /// Keep only these sources' time (same names as --drop).
    #[arg(long, value_delimiter = ',')]
    keep: Vec<jitter_trace::filter::Selector>,
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    output: Output,
}

/// `jitter-trace stats`.
#[derive(Debug, Args)]
struct StatsArgs {
    /// Trace file(s): one .jtr/.csv, or one file per core for sysjitter/LogGOPSim.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    input: Input,
    /// Injector overhead per detour (e.g. 20us): prints injectability.
    #[arg(long, value_parser = duration_arg)]
    overhead: Option<f64>,
    /// Scale factors to evaluate injectability at (with --overhead).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1.0, 2.0, 3.0, 5.0, 10.0], requires = "overhead")]
    scale: Vec<f64>,
    /// Share of detours that must be injectable: prints the smallest scale (with --overhead).
    #[arg(long, requires = "overhead")]
    share: Option<f64>,
}

/// `jitter-trace compare`.
#[derive(Debug, Args)]
struct CompareArgs {
    /// Reference trace.
    a: PathBuf,
    /// Trace compared with it.
    b: PathBuf,
    #[command(flatten)]
    input: Input,
    /// Also draw both log-densities into this SVG.
    #[arg(long, value_name = "SVG")]
    plot: Option<PathBuf>,
}

/// `jitter-trace synth`.
#[derive(Debug, Args)]
struct SynthArgs {
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

/// `jitter-trace convert`.
#[derive(Debug, Args)]
struct ConvertArgs {
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
struct SliceArgs {
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
struct ScaleArgs {
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
struct MergeArgs {
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

/// `jitter-trace attribution`.
#[derive(Debug, Args)]
struct AttributionArgs {
    /// The trace (its sidecar `<trace>.attr.json` must be beside it).
    trace: PathBuf,
    /// frequency: individual sources, a detour's time split over them; time: each
    /// combination of sources is a source.
    #[arg(long, default_value = "frequency")]
    mode: Mode,
    /// Only detours with run-times in `LO..HI` (e.g. 11us..13us): who fills this bucket.
    #[arg(long, value_name = "LO..HI")]
    bucket: Option<String>,
    /// Also write the per-source table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Draw the noise time per run-time bucket, stacked by source, into this SVG.
    #[arg(long, value_name = "SVG")]
    bars_svg: Option<PathBuf>,
    /// Draw each source's density of its time per detour into this SVG.
    #[arg(long, value_name = "SVG")]
    density_svg: Option<PathBuf>,
}

/// `jitter-trace diff`.
#[derive(Debug, Args)]
struct DiffArgs {
    /// The base run's trace.
    base: PathBuf,
    /// The new run's trace.
    new: PathBuf,
    /// frequency (individual sources) or time (combinations).
    #[arg(long, default_value = "frequency")]
    mode: Mode,
}

/// `jitter-trace nodes`.
#[derive(Debug, Args)]
struct NodesArgs {
    /// One trace per node (e.g. `collect-*/*.jtr`).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    #[command(flatten)]
    input: Input,
    /// |z| above which a node is flagged.
    #[arg(long, default_value_t = jitter_trace::nodes::OUTLIER_Z)]
    z: f64,
    /// Smallest difference in noise from the others' median that is flagged, percentage points.
    #[arg(long, default_value_t = jitter_trace::nodes::MIN_NOISE_PP * 100.0)]
    min_noise_pp: f64,
    /// Smallest difference in the longest detour from the others' median that is flagged.
    #[arg(long, default_value = "1ms", value_parser = duration_arg)]
    min_max: f64,
    /// Longest detours listed per node.
    #[arg(long, default_value_t = jitter_trace::nodes::DEFAULT_TOP)]
    top: usize,
    /// Also draw one box per node into this SVG.
    #[arg(long, value_name = "SVG")]
    plot: Option<PathBuf>,
}

/// `jitter-trace plot`.
#[derive(Debug, Args)]
struct PlotArgs {
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

fn duration_arg(s: &str) -> Result<f64, String> {
    parse_duration_ns(s).map_err(|e| e.to_string())
}

/// Reads a trace and applies the one policy on what it lacks (ring loss, damage, truncation:
/// refused unless `--salvage`; what was kept named on stderr).
fn load(paths: &[PathBuf], input: &Input) -> Result<Trace> {
    let (trace, _) = load_checked(paths, input)?;
    Ok(trace)
}

/// [`load`], with what the trace lacks; a salvaged defect is carried in the trace's notes, so
/// that a trace written from it says so too.
fn load_checked(paths: &[PathBuf], input: &Input) -> Result<(Trace, Integrity)> {
    let first = paths.first().ok_or_else(|| anyhow!("no input file"))?;
    let (mut trace, integrity) = import_unchecked(paths, input)?;
    let name = first.display().to_string();
    let integrity = integrity.check(&name, Salvage::from_flag(input.salvage))?;
    if let Some(w) = integrity.warning() {
        eprintln!("warning: {name}: {w}");
    }
    if integrity.salvaged {
        if let Some(defect) = &integrity.defect {
            trace.notes.insert(SALVAGED_NOTE.into(), defect.clone());
        }
    }
    Ok((trace, integrity))
}

/// Reads a trace with what it lacks, applying no policy (`nodes` marks such a node unusable).
fn import_unchecked(paths: &[PathBuf], input: &Input) -> Result<(Trace, Integrity)> {
    let first = paths.first().ok_or_else(|| anyhow!("no input file"))?;
    let format = Format::resolve(input.from, first)?;
    let imported = import(paths, format).map_err(|e| {
        let msg = jitter_trace::error::chain_line(&e);
        let name = first.display().to_string();
        if msg.contains(&name) {
            anyhow!(msg)
        } else {
            anyhow!("{name}: {msg}")
        }
    })?;
    let integrity = Integrity::of(&imported.trace, &imported.completeness);
    Ok((imported.trace, integrity))
}

impl Output {
    /// The output's format (`Format::for_output`: the name's extension, `--to` only where it
    /// agrees) and its path checked writable, before any input is read.
    fn check(&self) -> Result<Format> {
        let format = Format::for_output(self.to, &self.output)?;
        let probe = if format == Format::LogGopSim {
            per_stream_path(&self.output, 0)
        } else {
            self.output.clone()
        };
        check_writable(&probe, "-o")?;
        Ok(format)
    }
}

/// Checks an optional SVG output before any work (see `output::check_output`).
fn check_svg(path: Option<&PathBuf>, flag: &str) -> Result<()> {
    if let Some(p) = path {
        check_output(p, flag, "an SVG image", &["svg"])?;
    }
    Ok(())
}

/// Writes the trace and returns the files written (one per stream for multi-stream LogGOPSim).
fn save(trace: &Trace, output: &Output) -> Result<Vec<PathBuf>> {
    let format = Format::for_output(output.to, &output.output)?;
    export(trace, &output.output, format).with_context(|| output.output.display().to_string())?;
    Ok(if format == Format::LogGopSim && trace.streams.len() > 1 {
        trace
            .streams
            .iter()
            .map(|s| per_stream_path(&output.output, s.cpu))
            .collect()
    } else {
        vec![output.output.clone()]
    })
}

fn print_json(v: &serde_json::Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Prints what a transform produced.
fn report_written(
    json: bool,
    trace: &Trace,
    paths: &[PathBuf],
    extra: serde_json::Value,
) -> Result<()> {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    if json {
        let mut v = json!({
            "output": names,
            "streams": trace.streams.len(),
            "records": trace.record_count(),
        });
        if let (Some(m), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            m.extend(e);
        }
        print_json(&v)
    } else {
        let mut line = format!(
            "wrote {} records in {} streams to {}",
            trace.record_count(),
            trace.streams.len(),
            names.join(" ")
        );
        if let serde_json::Value::Object(e) = extra {
            for (k, v) in e {
                line.push_str(&format!(", {k} {v}"));
            }
        }
        println!("{line}");
        Ok(())
    }
}

/// Reads the attribution sidecar of `trace` and checks that it belongs to that collection.
fn load_attribution(trace: &std::path::Path) -> Result<Attribution> {
    let sidecar = sidecar_path(trace);
    if !sidecar.exists() {
        bail!(
            "{} has no attribution ({} is missing): collect with jitter-collect --attribute",
            trace.display(),
            sidecar.display()
        );
    }
    let a = Attribution::read(&sidecar)?;
    let reader = jitter_trace::TraceReader::open(trace)?;
    let start = reader.header().collection_start_unix_ns;
    if start != a.collection_start_unix_ns {
        bail!(
            "{} belongs to another collection (started at {} ns, the trace at {start} ns)",
            sidecar.display(),
            a.collection_start_unix_ns
        );
    }
    Ok(a)
}

impl StatsArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
        let StatsArgs {
            inputs,
            input,
            overhead,
            scale,
            share,
        } = self;
        let (trace, integrity) = load_checked(&inputs, &input)?;
        let stats = TraceStats::of_trace(&trace);
        let mut inject = Vec::new();
        let mut choice = None;
        if let Some(o) = overhead {
            for &s in &scale {
                inject.push(injectability(&trace.streams, o, s)?);
            }
            if let Some(sh) = share {
                choice = Some(scale_for_share(&trace.streams, o, sh)?);
            }
        } else if share.is_some() {
            bail!("--share needs --overhead");
        }
        if json {
            return print_json(&json!({
                "stats": stats,
                "integrity": integrity,
                "injectability": inject,
                "scale_for_share": choice,
            }));
        }
        if let Some(kept) = integrity.kept_line() {
            println!("# {kept}");
        }
        print!("{}", stats.table());
        if let Some(o) = overhead {
            println!("\ninjectable with overhead {:.3} us:", o / 1e3);
            let mut t =
                jitter_trace::table::Table::new(["scale", "% of detours", "% of noise time"]);
            for i in &inject {
                t.row([
                    i.scale.to_string(),
                    format!("{:.2}", i.detours * 100.0),
                    format!("{:.2}", i.noise * 100.0),
                ]);
            }
            print!("{t}");
        }
        match choice {
            Some(Some(c)) => println!(
                "smallest scale covering {:.1} %: any S > {:.3}; integer S = {} covers {:.2} %",
                c.share * 100.0,
                c.threshold,
                c.integer,
                c.at_integer.detours * 100.0
            ),
            Some(None) => println!("no scale covers that share (too few positive run-times)"),
            None => {}
        }
        Ok(())
    }
}

impl CompareArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
        let CompareArgs {
            a,
            b,
            input,
            plot: svg,
        } = self;
        check_svg(svg.as_ref(), "--plot")?;
        let ta = load(std::slice::from_ref(&a), &input)?;
        let tb = load(std::slice::from_ref(&b), &input)?;
        for (t, p) in [(&ta, &a), (&tb, &b)] {
            if t.record_count() == 0 {
                bail!("{} has no detours: nothing to compare", p.display());
            }
        }
        let c = compare(&ta, &tb);
        if let Some(p) = &svg {
            let names = series_names(&[(&a, &ta.header), (&b, &tb.header)]);
            let series = [
                Series {
                    label: &names[0],
                    streams: &ta.streams,
                },
                Series {
                    label: &names[1],
                    streams: &tb.streams,
                },
            ];
            plot(PlotKind::Density, &series, PlotKind::Density.title(), p)?;
        }
        if json {
            return print_json(&serde_json::to_value(&c)?);
        }
        println!("A: {} ({} detours)", a.display(), c.count_a);
        println!("B: {} ({} detours)", b.display(), c.count_b);
        println!("KL divergence D(A||B):   {:.6} nats", c.kl_divergence);
        println!(
            "KL divergence D(B||A):   {:.6} nats",
            c.kl_divergence_reverse
        );
        println!("KS statistic:            {:.6}", c.ks_statistic);
        println!(
            "noise ratio:             {:.4} % -> {:.4} % (diff {:+.4} %)",
            c.noise_ratio_a * 100.0,
            c.noise_ratio_b * 100.0,
            c.noise_ratio_diff * 100.0
        );
        println!(
            "detours/s per CPU:       {:.1} -> {:.1} (diff {:+.1})",
            c.detour_rate_a, c.detour_rate_b, c.detour_rate_diff
        );
        Ok(())
    }
}

impl SynthArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
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

impl ConvertArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
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
    fn run(self, json: bool) -> Result<()> {
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
    fn run(self, json: bool) -> Result<()> {
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
    fn run(self, json: bool) -> Result<()> {
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

impl AttributionArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
        let AttributionArgs {
            trace,
            mode,
            bucket,
            csv,
            bars_svg,
            density_svg,
        } = self;
        if let Some(p) = &csv {
            check_output(p, "--csv", "a CSV table", &["csv"])?;
        }
        check_svg(bars_svg.as_ref(), "--bars-svg")?;
        check_svg(density_svg.as_ref(), "--density-svg")?;
        let mut a = load_attribution(&trace)?;
        if let Some(b) = &bucket {
            let (lo, hi) = b
                .split_once("..")
                .ok_or_else(|| anyhow!("--bucket must be LO..HI, e.g. 11us..13us"))?;
            let (lo, hi) = (parse_duration_ns(lo)?, parse_duration_ns(hi)?);
            if !(lo >= 0.0 && hi > lo) {
                bail!("--bucket {b}: the upper end must exceed the lower one");
            }
            a = within_runs(&a, lo.round() as u64, hi.round() as u64);
        }
        let mut report = report_with_periods(&a, mode);
        if bucket.is_some() {
            // Steal is counted for the whole run: nothing to compare a bucket's detours with.
            report.steal.clear();
        }
        if let Some(p) = &csv {
            write_output_bytes(p, attribution_csv(&report).as_bytes())?;
        }
        if bars_svg.is_some() || density_svg.is_some() {
            let by_source = samples(&a, mode);
            let name = trace.file_stem().map_or(trace.display().to_string(), |s| {
                s.to_string_lossy().into_owned()
            });
            if let Some(p) = &bars_svg {
                let title = format!("Noise time per detour run-time, by source: {name}");
                source_bars_svg(&by_source, &title, p)?;
            }
            if let Some(p) = &density_svg {
                let title = format!("Time per detour, by source: {name}");
                source_density_svg(&by_source, &title, p)?;
            }
        }
        if json {
            print_json(&serde_json::to_value(&report)?)
        } else {
            print!("{}", render(&report));
            Ok(())
        }
    }
}

impl DiffArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
        let DiffArgs { base, new, mode } = self;
        let d = diff(
            &report_with_periods(&load_attribution(&base)?, mode),
            &report_with_periods(&load_attribution(&new)?, mode),
        );
        if json {
            print_json(&serde_json::to_value(&d)?)
        } else {
            print!("{}", render_diff(&d));
            Ok(())
        }
    }
}

impl NodesArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
        let NodesArgs {
            traces,
            input,
            z,
            min_noise_pp,
            min_max,
            top,
            plot: svg,
        } = self;
        if !(z.is_finite() && z > 0.0) {
            bail!("--z must be a positive number, got {z}");
        }
        check_svg(svg.as_ref(), "--plot")?;
        if !(min_noise_pp.is_finite() && (0.0..=100.0).contains(&min_noise_pp)) {
            bail!("--min-noise-pp must be in 0..=100, got {min_noise_pp}");
        }
        let criteria = jitter_trace::nodes::Criteria {
            z_cut: z,
            min_noise: min_noise_pp / 100.0,
            min_max_ns: min_max,
        };
        let mut nodes = Vec::with_capacity(traces.len());
        let progress = traces.len() > 4 && std::io::stderr().is_terminal();
        for (i, p) in traces.iter().enumerate() {
            if progress {
                eprint!("\rreading {}/{} {}\x1b[K", i + 1, traces.len(), p.display());
            }
            let (t, integrity) = import_unchecked(std::slice::from_ref(p), &input)?;
            let name = p.display().to_string();
            let mut node = jitter_trace::nodes::NodeSummary::of_trace(&t, &name, top);
            let problem = integrity.problem();
            match integrity.check(&name, Salvage::from_flag(input.salvage)) {
                Ok(i) => {
                    if let Some(w) = i.warning() {
                        eprintln!("warning: {name}: {w}");
                    }
                    node.kept = i.kept_line();
                }
                Err(_) => node.lacks = problem,
            }
            nodes.push(node);
        }
        if progress {
            eprintln!();
        }
        let table = jitter_trace::nodes::rank_with(nodes, criteria);
        if let Some(p) = &svg {
            jitter_trace::plot::nodes_svg(&table.rows, "Detour run-times per node", p)?;
        }
        if json {
            return print_json(&serde_json::to_value(&table)?);
        }
        print!("{}", table.render());
        if let Some(p) = &svg {
            println!("plot: {}", p.display());
        }
        Ok(())
    }
}

impl PlotArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
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
        if kind != PlotKind::TimeSeries {
            // A distribution of no run-times is an empty chart that looks like a drawn one.
            let quiet = |t: &Trace| t.streams.iter().all(|s| s.records.is_empty());
            if let Some((p, _)) = traces.iter().zip(&loaded).find(|(_, t)| quiet(t)) {
                bail!(
                    "{} has no detours: no run-times to draw (--kind timeseries draws its quiet \
                     time line)",
                    p.display()
                );
            }
        }
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

impl PerfettoArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
        use jitter_trace::interop::perfetto::{trace_events, Export};
        let t = load(std::slice::from_ref(&self.trace), &self.input)?;
        let a = if sidecar_path(&self.trace).exists() {
            Some(load_attribution(&self.trace)?)
        } else {
            None
        };
        let window = match &self.window {
            None => None,
            Some(w) => {
                let (a, b) = (w.split_once(".."))
                    .ok_or_else(|| anyhow!("--window must be FROM..TO, e.g. 10s..20s"))?;
                let (a, b) = (parse_duration_ns(a)?, parse_duration_ns(b)?);
                if !(a >= 0.0 && b > a) {
                    bail!("--window {w}: the end must come after the start");
                }
                Some((a.round() as u64, b.round() as u64))
            }
        };
        if self.max_slices == 0 {
            bail!("--max-slices must be at least 1");
        }
        let e = Export {
            window,
            max_slices: self.max_slices,
        };
        let (doc, omitted) = trace_events(&t, a.as_ref(), &e)?;
        write_output_bytes(&self.output, &serde_json::to_vec(&doc)?)?;
        if json {
            return print_json(&json!({
                "output": self.output.display().to_string(),
                "attributed": a.is_some(),
                "omitted": omitted,
            }));
        }
        println!(
            "wrote {} ({} of {} detours as slices{}; {} attribution)",
            self.output.display(),
            omitted.slices,
            omitted.detours,
            if omitted.counter_only > 0 {
                format!(
                    ", {} shorter ones ({:.3} ms) in the counters only",
                    omitted.counter_only,
                    omitted.counter_only_ns as f64 / 1e6
                )
            } else {
                String::new()
            },
            if a.is_some() { "with" } else { "without" }
        );
        Ok(())
    }
}

impl AdviceArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
        use jitter_trace::advice::{advise, render as render_advice, NodeConfig};
        if !(self.min_share.is_finite() && (0.0..1.0).contains(&self.min_share)) {
            bail!("--min-share must be in [0, 1), got {}", self.min_share);
        }
        let a = load_attribution(&self.trace)?;
        let header = jitter_trace::TraceReader::open(&self.trace)?
            .header()
            .clone();
        let hints = advise(
            &jitter_trace::attribution::report_in(&a, Mode::Frequency),
            &NodeConfig::of_header(&header),
            self.min_share,
        );
        if json {
            print_json(&serde_json::to_value(&hints)?)
        } else {
            print!("{}", render_advice(&hints));
            Ok(())
        }
    }
}

impl FilterArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    fn run(self, json: bool) -> Result<()> {
        use jitter_trace::filter::{filter, SourceFilter};
        let FilterArgs {
            trace,
            drop,
            keep,
            input,
            output,
        } = self;
        let t = load(std::slice::from_ref(&trace), &input)?;
        let a = load_attribution(&trace)?;
        let f = if keep.is_empty() {
            SourceFilter::drop(drop)
        } else {
            SourceFilter::keep(keep)
        };
        let filtered = filter(&t, &a, &f)?;
        let written = save(&filtered.trace, &output)?;
        if Format::resolve(output.to, &output.output)? == Format::Jtr {
            filtered.attribution.write(&sidecar_path(&output.output))?;
        }
        let extra = json!({
            "filter": f.describe(),
            "removed_ns": filtered.removed_ns,
            "emptied": filtered.emptied,
            "below_threshold": filtered.below_threshold,
            "shortened": filtered.shortened,
        });
        report_written(json, &filtered.trace, &written, extra)
    }
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
    jitter_trace::cli::init();
    let cli: Cli = jitter_trace::cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", jitter_trace::cli::error_line(&e));
            ExitCode::from(2)
        }
    }
}
