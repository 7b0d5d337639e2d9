//! The options of `replay-bench run` (`RunArgs`), with the rules by which they fit together
//! (`RunArgs::design`, `RunArgs::check_length`): checked on every rank before anything is
//! measured.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use jitter_emulator::{InjectionMode, ReplaySetup, SyncMode, TimerKind};
use jitter_emulator_cli::{CalibrationArgs, ReplayArgs, SalvageArgs};

use super::duration::{duration_flag, positive_duration_flag, MAX_DURATION_NS};
use super::shared::NodeTraceArgs;
use super::shared::{Inject, Quanta, RanksPerNode};
use crate::bench::baseline::Baseline;

/// Options of `replay-bench run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Jitter trace (.jtr) to replay; without it (or --node-traces) the benchmark runs without
    /// jitter.
    #[arg(long, value_name = "FILE", conflicts_with = "node_traces")]
    pub trace: Option<PathBuf>,
    /// One trace per node instead of --trace: each rank replays its node group's.
    #[command(flatten)]
    pub nodes: NodeTraceArgs,
    /// Label of the trace in tables and plots (default: the file stem; `nodes(n)` for a set).
    #[arg(long)]
    pub label: Option<String>,
    /// k ranks per emulated node.
    #[command(flatten)]
    pub ranks_per_node: RanksPerNode,
    /// Work quanta q of one compute phase.
    #[command(flatten)]
    pub quanta: Quanta,
    /// Benchmark period: measured phases run until this much time elapsed (unscaled).
    #[arg(long, default_value = "10s", value_parser = positive_duration_flag)]
    pub period: u64,
    /// Run exactly this many measured phases instead of a period.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub phases: Option<u64>,
    /// Warm-up phases, run first and excluded from the averages (at most 10^6, as many as
    /// --block-phases allows: beyond that a warm-up is a run of its own).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub warmup: u64,
    /// Synchronisation of the replays: none, once, phase or every:K.
    #[arg(long, default_value = "none")]
    pub sync: SyncMode,
    /// How detours get into the ranks.
    #[command(flatten)]
    pub inject: Inject,
    /// S, f, the timer and O/L/M in place of the calibrated ones.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Where this host's emulator calibration comes from.
    #[command(flatten)]
    pub calibration: CalibrationArgs,
    /// Whether to go on with a trace that lacks detours.
    #[command(flatten)]
    pub salvage: SalvageArgs,
    /// Seed of the offsets and resync points (rank 0's is broadcast; default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Design: `paired` (baseline and jitter blocks interleaved in one run; the default with a
    /// trace) or `sequential` (the baseline run first; the default without a trace).
    #[arg(long, value_name = "paired|sequential", value_parser = parse_design)]
    pub design: Option<Design>,
    /// Phases per block of the paired design.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub block_phases: u64,
    /// Paired design: run block pairs until both slowdowns' 95 % half-widths are at most this
    /// (percentage points, e.g. `0.5pp`), instead of a period.
    #[arg(long, value_name = "PP", value_parser = parse_precision)]
    pub precision: Option<f64>,
    /// Paired design: run block pairs until both slowdowns' 95 % intervals are narrower than
    /// half of the slowdowns (so that a comparison with a prediction can reach a verdict),
    /// instead of a period; `--max-time` bounds it.
    #[arg(long, conflicts_with_all = ["precision", "phases"])]
    pub until_verdict: bool,
    /// Time budget of `--precision` or `--until-verdict` (unscaled; default 10min): stops and
    /// reports the precision reached.
    #[arg(long, value_parser = positive_duration_flag)]
    pub max_time: Option<u64>,
    /// No-jitter reference of the sequential design: `measured` (run it first), `quanta`
    /// (q itself) or a report file.
    #[arg(long, default_value = "measured", value_name = "measured|quanta|FILE")]
    pub baseline: Baseline,
    /// Period of the measured baseline of the sequential design (default: the period).
    #[arg(long, value_parser = positive_duration_flag)]
    pub baseline_period: Option<u64>,
    /// Probe the platform's own noise on every rank for this long before the run (0 skips).
    #[arg(long, default_value = "1s", value_parser = duration_flag)]
    pub noise_probe: u64,
    /// Write the JSON report here (rank 0).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write per-phase MaxQT / MaxQTBT / mean qt (ns, unscaled) as CSV here (rank 0).
    #[arg(long, value_name = "FILE")]
    pub phases_csv: Option<PathBuf>,
    /// Allow more ranks on a host than it has online CPUs (timings are then meaningless).
    #[arg(long)]
    pub allow_oversubscribe: bool,
    /// Barrier-free virtual ranks per process (paper 001 §VI): each phase runs K compute windows
    /// one after another, each from its own point of the trace; MaxQT is over all of them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub virtual_ranks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// Baseline and jitter blocks alternate in one run, in an order drawn per pair.
    Paired,
    /// The whole baseline first, then the whole jitter run (paper 001).
    Sequential,
}

impl std::fmt::Display for Design {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Design::Paired => "paired",
            Design::Sequential => "sequential",
        })
    }
}

fn parse_design(s: &str) -> Result<Design, String> {
    match s {
        "paired" => Ok(Design::Paired),
        "sequential" => Ok(Design::Sequential),
        _ => Err(format!("design must be paired or sequential, got `{s}`")),
    }
}

fn parse_precision(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .strip_suffix("pp")
        .unwrap_or(s)
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a precision in percentage points (e.g. 0.5pp)"))?;
    if v.is_finite() && v > 0.0 && v <= 1e6 {
        Ok(v)
    } else {
        Err(format!("precision must be in (0, 1e6] pp, got {s}"))
    }
}

/// Default time budget of `--precision`, ns (10 min).
pub(crate) const DEFAULT_MAX_TIME_NS: u64 = 600_000_000_000;

impl RunArgs {
    /// True when the run replays jitter (`--trace` or `--node-traces`).
    pub(crate) fn has_trace(&self) -> bool {
        self.trace.is_some() || !self.nodes.node_traces.is_empty()
    }

    /// The time budget of `--precision`/`--until-verdict`, ns.
    pub fn max_time_ns(&self) -> u64 {
        self.max_time.unwrap_or(DEFAULT_MAX_TIME_NS)
    }

    /// Refuses a phase count whose run would outlast the one-day limit of every duration
    /// option (a `--period` cannot exceed it; `--phases` and `--warmup` are counts): (warm-up +
    /// phases) × q × S is the least time the run takes, every phase lasting at least its scaled
    /// quanta.
    pub(crate) fn check_length(&self) -> anyhow::Result<()> {
        let args = self;
        let scale = args
            .replay
            .setup_over(&ReplaySetup::ideal(TimerKind::Abstime))
            .scale
            .get();
        let phases = args.warmup.saturating_add(args.phases.unwrap_or(0));
        let least_ns = phases as f64 * args.quanta.ns as f64 * scale;
        if least_ns > MAX_DURATION_NS {
            bail!(
                "{} warm-up and {} measured phases of q = {} at S = {scale} last at least {}, \
             over the limit of 1d: fewer phases or a shorter --quanta",
                args.warmup,
                args.phases.unwrap_or(0),
                jitter_trace::units::format_ns(args.quanta.ns as f64),
                jitter_trace::units::format_ns(least_ns)
            );
        }
        Ok(())
    }

    /// Why the injection mode does not fit the other options, if it does not: paying at calls
    /// has no timer and no O, L or M, and pays on one timeline per process (no virtual ranks).
    pub(crate) fn check_inject(&self) -> anyhow::Result<()> {
        if self.inject.mode != InjectionMode::Boundary {
            return Ok(());
        }
        let o = &self.replay.overrides;
        if self.replay.timer.is_some()
            || o.overhead.is_some()
            || o.lateness.is_some()
            || o.min_sleep.is_some()
        {
            bail!(
                "--timer, --overhead, --lateness and --min-sleep are the signal injector's: \
                 --inject boundary has no timer and pays no O, L or M"
            );
        }
        if self.virtual_ranks > 1 {
            bail!("--virtual-ranks needs --inject signal (paying at calls replays one timeline)");
        }
        Ok(())
    }

    /// The design a run uses, or why its options do not fit together.
    pub(crate) fn resolved_design(&self) -> anyhow::Result<Design> {
        let args = self;
        let default = if args.has_trace() && args.virtual_ranks == 1 {
            Design::Paired
        } else {
            Design::Sequential
        };
        let design = args.design.unwrap_or(default);
        if design == Design::Paired {
            if args.baseline != Baseline::Measured {
                bail!(
                    "--baseline {} needs --design sequential: the paired design measures its \
                 baseline in blocks interleaved with the jitter",
                    args.baseline
                );
            }
            if args.baseline_period.is_some() {
                bail!(
                    "--baseline-period needs --design sequential (paired blocks share the period)"
                );
            }
            if args.virtual_ranks > 1 {
                bail!("--virtual-ranks needs --design sequential");
            }
            if args.precision.is_some() && args.phases.is_some() {
                bail!("--precision and --phases are two stop rules: give one");
            }
        } else if args.precision.is_some() || args.until_verdict {
            bail!(
                "--precision and --until-verdict need --design paired (the interval comes from \
             block pairs)"
            );
        }
        if args.max_time.is_some() && args.precision.is_none() && !args.until_verdict {
            bail!("--max-time is the time budget of --precision or --until-verdict: give one");
        }
        Ok(design)
    }
}
