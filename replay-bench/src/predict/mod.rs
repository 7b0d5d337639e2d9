//! `replay-bench predict`: the Parallel Benchmark in virtual time for any number of ranks,
//! executing the same replay plan as the emulator (one plan, two clocks), and the analytic
//! order-statistics model beside it.
//!
//! This module holds the flags (`PredictArgs`, `NodeTraceArgs`), the preparation of every
//! trace's plans (`TraceInput`; a node-trace set is one more row, `TraceInput::node_set`) and
//! the table of rows. The main thread is worker 0 of rayon's pool (`use_current_thread`, built
//! before the traces are read), so parallel passes start on a worker and MPI calls stay on the
//! main thread; without `--threads` the pool has no more workers than the largest rank count's
//! chunks where it makes several, nor than the process's share of the host's CPUs
//! (`cores_of_process`).

pub mod background;
pub mod budget;
pub mod collective;
pub mod des;
pub mod drivers;
pub mod order_stats;
pub(crate) mod phase_loop;
pub mod placement;
pub mod platform;
pub(crate) mod ranks;
pub(crate) mod simulation;
pub mod whatif;
pub mod whatif_chart;
pub mod window;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use jitter_emulator::cli::{ReplayArgs, SalvageArgs};
use jitter_emulator::{Plan, PlanOptions, SyncMode, TimerKind};
use jitter_trace::Trace;
use rayon::prelude::*;

use crate::metrics::slowdown_pct;
use crate::report::{
    Config, DrawSpread, PredictDetails, RankCost, Report, ReportKind, ResultRow, TraceInfo,
};

pub use collective::{Algorithm, CommModel, LoopShape};
pub use des::{
    simulate, simulate_engine, simulate_on, BarrierModel, DesConfig, DesOutcome, Engine,
};
pub use order_stats::{DelayDistribution, WindowStart};
pub use placement::{NodeTraceArgs, Placement, Timelines};
pub use platform::{barrier_stage_from_report, Platform, PlatformFile};

/// Which model predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Model {
    /// Virtual-time simulation of every rank and phase.
    Des,
    /// Analytic expected maximum of independent per-rank delays.
    OrderStats,
    /// Both, side by side.
    Both,
}

/// How the barrier latency grows with the rank count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BarrierKind {
    /// `ceil(log2 N) · stage`.
    Log2,
}

/// Options of `replay-bench predict`.
#[derive(Debug, Clone, Args)]
pub struct PredictArgs {
    /// Trace to replay (.jtr); repeat for several traces in one table and plot.
    #[arg(
        long = "trace",
        required_unless_present = "node_traces",
        value_name = "FILE"
    )]
    pub traces: Vec<PathBuf>,
    /// The node-trace set: one more row of the table, labelled `nodes(n)`.
    #[command(flatten)]
    pub nodes: NodeTraceArgs,
    /// Rank counts: `16..65536` (powers of two from 16) or an increasing list `16,100,1000`.
    #[arg(long, default_value = "16..2048")]
    pub ranks: RankCounts,
    /// Sync modes, comma separated: none, once, phase, every:K.
    #[arg(long, value_delimiter = ',', default_value = "none,once,phase")]
    pub sync: Vec<SyncMode>,
    /// Work quanta q per phase (e.g. 1ms).
    #[arg(long, default_value = "1ms", value_parser = crate::run::positive_duration_flag)]
    pub quanta: u64,
    /// Phases to simulate.
    #[arg(long, default_value_t = 2000)]
    pub phases: u64,
    /// Model: des (virtual-time simulation), order-stats (analytic) or both.
    #[arg(long, value_enum, default_value_t = Model::Des)]
    pub model: Model,
    /// Ranks per node k: rank r replays stream r mod k; the ranks of a node share an offset.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub ranks_per_node: u64,
    /// Barrier latency model.
    #[arg(long, value_enum, default_value_t = BarrierKind::Log2)]
    pub barrier_model: BarrierKind,
    /// Latency of one barrier stage, ns [default: from --calibrate-from, else 1000].
    #[arg(long, value_name = "NS")]
    pub barrier_stage_ns: Option<f64>,
    /// The loop of one phase: barrier-compute-barrier (Algorithm 1 of paper 001),
    /// compute-barrier (a bulk-synchronous step), compute-allreduce (a solver's residual check).
    #[arg(long, value_enum, default_value_t = LoopShape::BarrierComputeBarrier)]
    pub loop_shape: LoopShape,
    /// The collective's algorithm: messages on the ranks' replay clocks, so detours delay them
    /// and pass from rank to rank (dissemination, recursive-doubling, binomial-tree), or
    /// offloaded (fixed latency ceil(log2 N) x stage, as before). auto: dissemination for a
    /// barrier, the classic software barrier of ceil(log2 N) rounds at every N (the predictor
    /// cannot know which algorithm an MPI library picks), recursive doubling for an allreduce.
    /// A message costs its sender CPU work o (detours landing in it take their span, as in
    /// compute), travels l, and costs its receiver o once the receiver is free and the message
    /// is there (a detour running at its arrival holds it): in dissemination round k, rank i
    /// entered at t_i sends s_i = work(t_i, o) and leaves at
    /// work(idle(max(s_i, s_(i-2^k) + l)), o); without noise a round costs 2o + l.
    #[arg(long, value_enum, default_value_t = Algorithm::Auto)]
    pub collective: Algorithm,
    /// LogP overhead o: CPU time to send or to receive one message, ns; one round costs
    /// 2o + l without noise [default: a third of the barrier stage].
    #[arg(long, value_name = "NS")]
    pub logp_o_ns: Option<f64>,
    /// LogP latency l of one message on the wire, ns (not the emulator's timer lateness L)
    /// [default: a third of the barrier stage].
    #[arg(long, value_name = "NS")]
    pub logp_l_ns: Option<f64>,
    /// Report of a real `replay-bench run` to calibrate the barrier stage latency from.
    #[arg(long, value_name = "RUN_JSON")]
    pub calibrate_from: Option<PathBuf>,
    /// `ideal` (every detour exactly as recorded), `this` (the emulator's calibration of this
    /// machine, measured when not cached), or a file: a calibration (`PlatformFile`), a saved
    /// emulator calibration, or the report of a real run.
    #[arg(long, default_value = "ideal", value_name = "ideal|this|FILE")]
    pub platform: PlatformChoice,
    /// S, f, the timer and O/L/M in place of the platform's.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// The replay machine's own noise (a trace of it, e.g. `jitter-collect` there): predict the
    /// trace on top of it against it alone, as a real run measures (simulation, S = 1, f = 1,
    /// abstime).
    #[arg(long, value_name = "FILE")]
    pub platform_noise: Option<PathBuf>,
    /// Standard deviation of one timer error for itimer (e.g. 20us)
    /// [default: the platform's, else 20us as on Blue Gene/L, paper 001 §V-C].
    #[arg(long, value_name = "DURATION", value_parser = crate::run::duration_flag)]
    pub lateness_sd: Option<u64>,
    /// Seed of offsets, resync points and timer errors.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads (default: the cores this process may use, at most its share of the host's
    /// among the job's processes there; where it simulates over 1024 ranks, at most one per 1024).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Write the report (JSON); with `--model both` the analytic one goes to `<stem>.order-stats.json`.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write the slowdown plot (SVG).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Run even when the estimate exceeds 30 min or half of the available memory, or when a
    /// trace's CPUs were busy with other work for more than half of the time.
    #[arg(long)]
    pub force: bool,
    /// Whether to go on with a trace that lacks detours.
    #[command(flatten)]
    pub salvage: SalvageArgs,
    /// Predict the stretches of the trace that a real run replayed (its report, `run -o`): the
    /// run's ranks, sync mode, seed, quanta, S and platform, each measured window from the run's
    /// start points; prints the measurement beside this prediction with its verdict, and checks
    /// that both injected the same detours.
    #[arg(
        long,
        value_name = "RUN_JSON",
        conflicts_with_all = ["ranks", "sync", "quanta", "phases", "whole_trace", "seed", "ranks_per_node", "model", "platform", "platform_noise", "node_traces", "draws"]
    )]
    pub windows_of: Option<PathBuf>,
    /// Simulate as many phases as it takes one rank to replay its whole trace once (trace
    /// length ÷ q; the fraction rule stops it where the noise makes it sooner) instead of
    /// --phases.
    #[arg(long, conflicts_with = "phases")]
    pub whole_trace: bool,
    /// Say what drives each prediction at the largest rank count: the share of its slowdown
    /// due to the detours of each size class (≥ 10 µs, 100 µs, 1 ms, 10 ms), from the same
    /// prediction without them.
    #[arg(long, conflicts_with_all = ["node_traces", "platform_noise"])]
    pub drivers: bool,
    /// Offset draws: simulate each point this many times (seeds seed, seed + 1, …), pool their
    /// phases and report the range of the draws' slowdowns (how much the stretch of trace
    /// replayed moves the answer).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub draws: u64,
}

impl PredictArgs {
    /// The report(s) and the plot this prediction writes, checked (by `jitter_trace::output`'s
    /// rules) before anything is read or simulated.
    pub fn check_outputs(&self) -> anyhow::Result<()> {
        use jitter_trace::output::check_output;
        if let Some(p) = &self.output {
            check_output(p, "-o", "a JSON report", &["json"])?;
            if matches!(self.model, Model::Both) {
                check_output(&order_stats_path(p), "-o", "a JSON report", &["json"])?;
            }
        }
        if let Some(p) = &self.plot {
            check_output(p, "--plot", "an SVG image", &["svg"])?;
        }
        Ok(())
    }

    /// `predict`'s options from its flags (as after `replay-bench predict`), defaults filled in
    /// by the one definition above.
    pub fn from_flags(flags: &[&str]) -> Result<PredictArgs, clap::Error> {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            args: PredictArgs,
        }
        let argv = std::iter::once("predict").chain(flags.iter().copied());
        <Flags as clap::Parser>::try_parse_from(argv).map(|f| f.args)
    }
}

/// A trace prepared for prediction: its label, description and one plan per stream used.
#[derive(Debug, Clone)]
pub struct TraceInput {
    /// Label in tables and plots.
    pub label: String,
    /// Description for the report.
    pub info: TraceInfo,
    /// Plans of streams 0..k, of each node trace in turn for a set ([`Placement`]); with a
    /// background, the trace united with it ([`background`]).
    pub plans: Vec<Arc<Plan>>,
    /// The platform's own noise the plans are united with, if any: the baseline's plans.
    pub background: Option<BackgroundPlans>,
}

/// The platform noise of a prediction with a background, laid out as [`TraceInput::plans`].
#[derive(Debug, Clone)]
pub struct BackgroundPlans {
    /// The platform-noise trace.
    pub label: String,
    /// The platform's streams alone (the baseline), one per united plan.
    pub plans: Vec<Arc<Plan>>,
    /// The trace plans' counts over one lap each (drops and merges happen before the union).
    pub lap: jitter_emulator::PlanStats,
}

impl TraceInput {
    /// Prepares streams `0..ranks_per_node` of `trace` with `options` (all its streams when it
    /// has fewer: the ranks beyond them replay copies, `jitter_emulator::placement`).
    pub fn new(
        trace: &Trace,
        path: &str,
        label: &str,
        options: PlanOptions,
        ranks_per_node: u64,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(ranks_per_node >= 1, "--ranks-per-node must be at least 1");
        anyhow::ensure!(!trace.streams.is_empty(), "trace {path} has no streams");
        let plans = (0..trace.streams.len().min(ranks_per_node as usize))
            .into_par_iter()
            .map(|s| {
                Plan::from_trace(trace, s, options)
                    .map_err(|e| anyhow::anyhow!("trace {path}: {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(TraceInput {
            label: label.to_string(),
            info: TraceInfo {
                path: path.to_string(),
                label: label.to_string(),
                host: trace.header.host.clone(),
                kernel: trace.header.kernel_release.clone(),
                streams: trace.streams.len(),
                noise_ratio: trace.noise_ratio(),
                detours_per_s: trace.detours_per_s(),
                nodes: Vec::new(),
                integrity: None,
                digest: Some(jitter_trace::digest::content_digest(trace)),
            },
            plans,
            background: None,
        })
    }

    /// One input of a node-trace set (each prepared by [`TraceInput::new`], in node order):
    /// node group g of ranks replays the (g mod n)-th; labelled `nodes(n)`.
    pub fn node_set(nodes: Vec<TraceInput>) -> anyhow::Result<Self> {
        anyhow::ensure!(!nodes.is_empty(), "--node-traces needs at least one trace");
        let n = nodes.len();
        let label = placement::set_label(n);
        let info = TraceInfo::node_set(&label, nodes.iter().map(|t| t.info.clone()).collect());
        Ok(TraceInput {
            label,
            info,
            plans: nodes.into_iter().flat_map(|t| t.plans).collect(),
            background: None,
        })
    }
}

/// Everything a prediction needs besides the traces.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictSpec {
    /// Rank counts, increasing.
    pub ranks: Vec<u64>,
    /// Sync modes.
    pub modes: Vec<SyncMode>,
    /// Model(s) to run.
    pub model: Model,
    /// Simulation parameters (quanta, phases, k, barrier, drift, seed).
    pub des: DesConfig,
    /// The platform the plans were built for.
    pub platform: Platform,
    /// How the simulation walks the plans.
    pub engine: Engine,
    /// Offset draws per point (seeds `des.seed`, `des.seed + 1`, …), pooled.
    pub draws: u64,
}

#[cfg(test)]
impl PredictSpec {
    /// The tests' common spec: the offloaded barrier without latency on the ideal platform,
    /// q = 1 ms, no timer errors, seed 1, one draw.
    pub(crate) fn ideal_offloaded(
        ranks: Vec<u64>,
        modes: Vec<SyncMode>,
        phases: u64,
        engine: Engine,
    ) -> Self {
        PredictSpec {
            ranks,
            modes,
            model: Model::Des,
            des: DesConfig {
                quanta_ns: 1_000_000,
                phases,
                ranks_per_node: 1,
                barrier: BarrierModel { stage_ns: 0.0 },
                comm: CommModel::OFFLOADED,
                drift_sd_ns: 0.0,
                seed: 1,
                window: None,
            },
            platform: Platform::ideal(),
            engine,
            draws: 1,
        }
    }
}

/// The reports of one prediction (one per model run).
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The simulation's report.
    pub des: Option<Report>,
    /// The analytic model's report.
    pub order_stats: Option<Report>,
}

/// Parses `16..65536` (powers of two from the first to at most the second) or `16,100,1000`
/// (strictly increasing); every count must be at least 1.
pub fn parse_ranks(text: &str) -> anyhow::Result<Vec<u64>> {
    let num = |s: &str| -> anyhow::Result<u64> {
        s.trim()
            .replace('_', "")
            .parse::<u64>()
            .map_err(|_| anyhow::anyhow!("`{s}` in --ranks `{text}` is not a rank count"))
    };
    let v = if let Some((a, b)) = text.split_once("..") {
        let (a, b) = (num(a)?, num(b)?);
        anyhow::ensure!(
            a >= 1,
            "--ranks `{text}`: the rank count must be at least 1"
        );
        anyhow::ensure!(b >= a, "--ranks `{text}`: the range must be increasing");
        let mut v = vec![a];
        while let Some(n) = v.last().and_then(|n| n.checked_mul(2)).filter(|&n| n <= b) {
            v.push(n);
        }
        v
    } else {
        let v = text
            .split(',')
            .map(num)
            .collect::<anyhow::Result<Vec<u64>>>()?;
        anyhow::ensure!(
            v.iter().all(|&n| n >= 1),
            "--ranks `{text}`: the rank count must be at least 1"
        );
        anyhow::ensure!(
            v.windows(2).all(|w| w[0] < w[1]),
            "--ranks `{text}`: the rank counts must be strictly increasing"
        );
        v
    };
    Ok(v)
}

/// A list of sync modes (`--sync` of `predict` and `validate`): at least one, each once (a
/// mode listed twice would be two identical rows of every table).
pub fn check_sync_modes(modes: &[SyncMode]) -> anyhow::Result<()> {
    anyhow::ensure!(!modes.is_empty(), "--sync needs at least one mode");
    let twice = (1..modes.len()).find_map(|i| modes[..i].contains(&modes[i]).then_some(modes[i]));
    if let Some(m) = twice {
        anyhow::bail!("--sync lists {m} twice: list every mode once");
    }
    Ok(())
}

/// Rank counts to predict, strictly increasing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankCounts(pub Vec<u64>);

impl std::str::FromStr for RankCounts {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<RankCounts> {
        parse_ranks(s).map(RankCounts)
    }
}

/// The platform a prediction assumes, as `--platform` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlatformChoice {
    /// Every detour exactly as recorded.
    Ideal,
    /// This machine's emulator calibration (measured when not cached).
    This,
    /// A calibration file, a saved emulator calibration or the report of a real run.
    File(PathBuf),
}

impl std::str::FromStr for PlatformChoice {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<PlatformChoice, Self::Err> {
        Ok(match s {
            "ideal" => PlatformChoice::Ideal,
            "this" => PlatformChoice::This,
            file => PlatformChoice::File(PathBuf::from(file)),
        })
    }
}

/// Why the simulation walks every detour although the index was asked for, and how to get
/// the index: timer errors (itimer drift) are drawn per injection, which no index holds.
fn walk_note(spec: &PredictSpec) -> Option<String> {
    let simulates = matches!(spec.model, Model::Des | Model::Both);
    // The index asked for, and refused for the timer errors alone.
    let refused =
        spec.engine == des::Engine::Indexed && !des::index_allowed(spec.engine, &spec.des);
    (simulates && refused).then(|| {
        format!(
            "timer itimer (errors of sd {} drawn per injection): the simulation walks every \
             detour, at a cost that grows with the trace's density; --timer abstime replays \
             without timer errors on the index (cost independent of density)",
            jitter_trace::units::format_ns(spec.des.drift_sd_ns)
        )
    })
}

/// Refuses a trace whose CPUs spent more than half their time in detours
/// ([`jitter_trace::sanity::BUSY_NOISE_RATIO`]): it recorded other work, not the operating
/// system's jitter, and its prediction would be that work's slowdown; `force` predicts anyway.
fn refuse_busy(trace: &Trace, path: &Path, force: bool) -> anyhow::Result<()> {
    if force {
        return Ok(());
    }
    let busy = (trace.streams.iter()).find_map(jitter_trace::sanity::busy);
    match busy {
        Some(why) => anyhow::bail!(
            "trace {}: {why}; a prediction from it would be that work's slowdown (--force \
             predicts anyway)",
            path.display()
        ),
        None => Ok(()),
    }
}

/// Resolves the command line into traces and a spec (reads every file; simulates nothing).
pub fn prepare(args: &PredictArgs) -> anyhow::Result<(Vec<TraceInput>, PredictSpec)> {
    let ranks = args.ranks.0.clone();
    let modes = args.sync.clone();
    check_sync_modes(&modes)?;
    anyhow::ensure!(args.phases >= 1, "--phases must be at least 1");
    let quanta = args.quanta;
    let requested_timer = args.replay.timer;
    let mut platform = match &args.platform {
        PlatformChoice::Ideal => Platform::ideal(),
        PlatformChoice::This => Platform::this(requested_timer.unwrap_or_default())?,
        PlatformChoice::File(file) => Platform::load(file, requested_timer)?,
    };
    let is_ideal = args.platform == PlatformChoice::Ideal;
    // The ideal platform replays every detour as recorded (abstime, no timer errors) unless
    // an emulation's timer is asked for (`--timer itimer`: errors of --lateness-sd).
    platform.setup = args.replay.setup_over(&platform.setup);
    let timer = platform.setup.cost.timer;
    platform.options().validate()?;
    let sd = match (args.lateness_sd, is_ideal) {
        (Some(s), _) => s as f64,
        (None, true) => platform::DEFAULT_LATENESS_SD_NS,
        (None, false) => platform.lateness_sd_ns,
    };
    platform.lateness_sd_ns = if timer == TimerKind::Abstime { 0.0 } else { sd };
    let stage = match (args.barrier_stage_ns, &args.calibrate_from) {
        (Some(x), _) => {
            anyhow::ensure!(
                x.is_finite() && (0.0..=1e9).contains(&x),
                "--barrier-stage-ns must be in 0..=1e9 (1 s), got {x}"
            );
            x
        }
        (None, Some(p)) => barrier_stage_from_report(p)?,
        (None, None) => platform::DEFAULT_BARRIER_STAGE_NS,
    };
    let logp = |flag: &str, v: Option<f64>| -> anyhow::Result<f64> {
        let x = v.unwrap_or(stage / 3.0);
        anyhow::ensure!(
            x.is_finite() && (0.0..=1e9).contains(&x),
            "--{flag} must be in 0..=1e9 (1 s), got {x}"
        );
        Ok(x)
    };
    let comm = CommModel {
        algorithm: args.collective,
        shape: args.loop_shape,
        o_ns: logp("logp-o-ns", args.logp_o_ns)?,
        l_ns: logp("logp-l-ns", args.logp_l_ns)?,
    }
    .resolved();
    let stem = |path: &PathBuf| {
        path.file_stem()
            .map_or_else(|| "trace".to_string(), |s| s.to_string_lossy().into_owned())
    };
    let load = |path: &PathBuf, label: &str| -> anyhow::Result<TraceInput> {
        let loaded = jitter_trace::read_trace(path)
            .with_context(|| format!("cannot read trace {}", path.display()))?;
        let integrity = loaded.accept(&path.display().to_string(), args.salvage.choice())?;
        // The sanity checks beside the plans, on another worker.
        let (warnings, input) = rayon::join(
            || loaded.warnings(),
            || {
                TraceInput::new(
                    &loaded.trace,
                    &path.display().to_string(),
                    label,
                    platform.options(),
                    args.ranks_per_node,
                )
            },
        );
        for w in warnings {
            eprintln!("warning: {}: {w}", path.display());
        }
        refuse_busy(&loaded.trace, path, args.force)?;
        let mut input = input?;
        input.info.integrity = (!integrity.is_whole()).then_some(integrity);
        Ok(input)
    };
    let mut traces: Vec<TraceInput> = Vec::new();
    for path in &args.traces {
        let stem = stem(path);
        let label = if traces.iter().any(|t| t.label == stem) {
            format!("{stem}#{}", traces.len() + 1)
        } else {
            stem
        };
        traces.push(load(path, &label)?);
    }
    if !args.nodes.node_traces.is_empty() {
        let nodes = (args.nodes.node_traces.iter())
            .map(|p| load(p, &stem(p)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        // A set's node traces each hold k streams (copies are for a single trace).
        for (t, path) in nodes.iter().zip(&args.nodes.node_traces) {
            anyhow::ensure!(
                t.plans.len() as u64 == args.ranks_per_node,
                "node trace {} has {} streams, fewer than --ranks-per-node {}: every trace of \
                 a set needs k",
                path.display(),
                t.plans.len(),
                args.ranks_per_node
            );
        }
        traces.push(TraceInput::node_set(nodes)?);
    }
    if let Some(path) = &args.platform_noise {
        anyhow::ensure!(
            args.model == Model::Des,
            "--platform-noise is modelled by the simulation only (--model des)"
        );
        background::check_setup(&platform.options(), platform.lateness_sd_ns > 0.0)?;
        let loaded = jitter_trace::read_trace(path)
            .with_context(|| format!("cannot read platform-noise trace {}", path.display()))?;
        loaded.accept(&path.display().to_string(), args.salvage.choice())?;
        for w in loaded.warnings() {
            eprintln!("warning: {}: {w}", path.display());
        }
        let bg = background::Background::new(&loaded.trace, &stem(path))?;
        // The platform's streams are laid out as further node traces of k streams each: a
        // trace of fewer streams than k (replayed in copies) has no such layout yet.
        for t in &traces {
            anyhow::ensure!(
                t.plans.len() as u64 >= args.ranks_per_node,
                "--platform-noise needs a trace of at least --ranks-per-node {} streams; {} has {}",
                args.ranks_per_node,
                t.label,
                t.plans.len()
            );
        }
        traces = traces
            .into_iter()
            .map(|t| t.with_background(&bg))
            .collect::<anyhow::Result<_>>()?;
    }
    let phases = if args.whole_trace {
        let longest = (traces.iter().flat_map(|t| &t.plans))
            .map(|p| p.period_ns())
            .max()
            .unwrap_or(0);
        longest.div_ceil(quanta.max(1)).max(1)
    } else {
        args.phases
    };
    let spec = PredictSpec {
        ranks,
        modes,
        model: args.model,
        des: DesConfig {
            quanta_ns: quanta,
            phases,
            ranks_per_node: args.ranks_per_node,
            barrier: BarrierModel { stage_ns: stage },
            comm,
            drift_sd_ns: platform.lateness_sd_ns,
            seed: args.seed,
            window: None,
        },
        platform,
        engine: Engine::default(),
        draws: args.draws,
    };
    Ok((traces, spec))
}

fn config(traces: &[TraceInput], spec: &PredictSpec) -> Config {
    let o = &spec.platform.options();
    let c = &spec.des.comm;
    Config {
        trace: traces.first().map(|t| t.info.clone()),
        ranks_per_node: spec.des.ranks_per_node as usize,
        quanta_ns: spec.des.quanta_ns,
        period_ns: 0,
        phases: spec.des.phases,
        warmup_phases: 0,
        scale: o.scale,
        fraction: o.fraction,
        timer: o.timer,
        seed: spec.des.seed,
        baseline: "quanta".into(),
        platform: spec.platform.name.clone(),
        run: None,
        predict: Some(PredictDetails {
            barrier_model: "log2".into(),
            loop_shape: c.shape.name().into(),
            collective: c.algorithm.name().into(),
            logp_o_ns: c.o_ns,
            logp_l_ns: c.l_ns,
            communication_model: platform::model_line(c, spec.des.barrier.stage_ns, &spec.platform),
            barrier_stage_ns: spec.des.barrier.stage_ns,
            timer_error_sd_ns: spec.des.drift_sd_ns,
            traces: traces.iter().map(|t| t.label.clone()).collect(),
            platform_noise: (traces.iter())
                .find_map(|t| t.background.as_ref())
                .map(|b| b.label.clone()),
            trace_digests: (traces.iter())
                .map(|t| t.info.digest.clone().unwrap_or_default())
                .collect(),
            windows_of: None,
            drivers: Vec::new(),
        }),
    }
}

fn platform_calibration(p: &Platform) -> RankCost {
    RankCost {
        rank: -1,
        host: p.name.clone(),
        overhead_ns: p.options().overhead_ns,
        overhead_sd_ns: 0.0,
        lateness_ns: p.options().lateness_ns,
        lateness_sd_ns: p.lateness_sd_ns,
        min_sleep_ns: p.options().min_sleep_ns,
        tsc_khz: 0,
        platform_noise_ratio: 0.0,
        overhead_by_gap: p.options().overhead_by_gap.points().to_vec(),
    }
}

/// One simulated point as a report row.
pub fn des_row(trace: &str, ranks: u64, mode: SyncMode, o: &DesOutcome) -> ResultRow {
    let (qt, qtbt) = (o.averages.avg_max_qt_ns(), o.averages.avg_max_qtbt_ns());
    ResultRow {
        trace: trace.to_string(),
        ranks,
        sync: mode.to_string(),
        phases: o.averages.phases,
        avg_max_qt_ns: qt,
        avg_max_qtbt_ns: qtbt,
        baseline_avg_max_qt_ns: o.baseline_qt_ns,
        baseline_avg_max_qtbt_ns: o.baseline_qtbt_ns,
        sd_qtbt_pct: slowdown_pct(qtbt, o.baseline_qtbt_ns),
        sd_qt_pct: slowdown_pct(qt, o.baseline_qt_ns),
        // A virtual-time prediction is deterministic given its seed: no sampling interval.
        sd_qtbt_ci95_pct: None,
        sd_qt_ci95_pct: None,
        lost_rel: o.averages.lost_rel(),
        emulator: o.emulator,
        period_ns: Some([o.mean_period_ns, o.baseline_period_ns]),
        draws: None,
    }
}

/// The two delay distributions of one stream that the analytic rows need.
#[derive(Debug, Clone, PartialEq)]
pub struct Analytic {
    /// Windows starting anywhere (per-phase resync; the barrier-to-barrier period).
    pub anywhere: DelayDistribution,
    /// Windows starting outside detours (the compute window after a barrier).
    pub after_barrier: DelayDistribution,
}

impl Analytic {
    /// Both distributions of `plan` for quanta `quanta_ns` (unscaled).
    pub fn from_plan(plan: &Arc<Plan>, quanta_ns: u64) -> anyhow::Result<Self> {
        Ok(Analytic {
            anywhere: DelayDistribution::from_plan(plan, quanta_ns, WindowStart::Anywhere)?,
            after_barrier: DelayDistribution::from_plan(
                plan,
                quanta_ns,
                WindowStart::OutsideDetours,
            )?,
        })
    }
}

/// The analytic row for `ranks` ranks under `mode`, or `None` for modes it does not model.
///
/// `none`: independent ranks; AvgMaxQT = q + E[max of N compute delays (windows after a
/// barrier)], AvgMaxQTBT is taken as the mean phase period q + L + E[max of N delays of windows
/// starting anywhere]. `phase`: every rank sees the same window, started anywhere by the resync.
pub fn order_stats_row(
    trace: &str,
    a: &Analytic,
    ranks: u64,
    mode: SyncMode,
    des: &DesConfig,
    scale: f64,
) -> Option<ResultRow> {
    order_stats_row_mix(trace, &[(a, ranks)], ranks, mode, des, scale)
}

/// [`order_stats_row`] for ranks on several node traces (one stream each), `parts[t]` = (the
/// distributions of trace t, how many ranks replay it): `none` takes the maximum over all
/// ranks' independent delays ([`order_stats::expected_max_mix`]); `phase` the maximum over the
/// traces present of one window each (each trace resyncs to its own point); the mean compute
/// delay is the ranks' average. One part is [`order_stats_row`] exactly.
pub fn order_stats_row_mix(
    trace: &str,
    parts: &[(&Analytic, u64)],
    ranks: u64,
    mode: SyncMode,
    des: &DesConfig,
    scale: f64,
) -> Option<ResultRow> {
    let q = des.quanta_ns as f64;
    let lat = des.barrier.latency_ns(ranks);
    type Pick = fn(&Analytic) -> &DelayDistribution;
    let (after, anywhere): (Pick, Pick) = (|a| &a.after_barrier, |a| &a.anywhere);
    let mix = |pick: Pick, count: fn(u64) -> f64| {
        let v: Vec<(&DelayDistribution, f64)> =
            parts.iter().map(|&(a, n)| (pick(a), count(n))).collect();
        order_stats::expected_max_mix(&v)
    };
    let mean = |pick: Pick| {
        (parts.iter())
            .map(|&(a, n)| n as f64 / ranks as f64 * pick(a).mean_ns())
            .sum::<f64>()
    };
    let (max_qt, mean_qt, period) = match mode {
        SyncMode::None => (
            mix(after, |n| n as f64),
            mean(after),
            mix(anywhere, |n| n as f64),
        ),
        SyncMode::Phase => {
            let m = mix(anywhere, |n| f64::from(u8::from(n > 0)));
            (m, mean(anywhere), m)
        }
        SyncMode::Once | SyncMode::Every(_) => return None,
    };
    let (max_qt, mean_qt, period) = (max_qt / scale, mean_qt / scale, period / scale);
    Some(ResultRow {
        trace: trace.to_string(),
        ranks,
        sync: mode.to_string(),
        phases: 0,
        avg_max_qt_ns: q + max_qt,
        avg_max_qtbt_ns: q + lat + period,
        baseline_avg_max_qt_ns: q,
        baseline_avg_max_qtbt_ns: q + lat,
        sd_qtbt_pct: slowdown_pct(q + lat + period, q + lat),
        sd_qt_pct: slowdown_pct(q + max_qt, q),
        sd_qtbt_ci95_pct: None,
        sd_qt_ci95_pct: None,
        lost_rel: (max_qt - mean_qt) / (q + mean_qt),
        emulator: Default::default(),
        period_ns: None,
        draws: None,
    })
}

/// Runs the model(s) of `spec` over every trace, rank count and mode; `progress` advances by
/// the rank count after every simulated phase (its length: [`rank_phases`]).
pub fn predict(
    traces: &[TraceInput],
    spec: &PredictSpec,
    progress: &ProgressBar,
) -> anyhow::Result<Prediction> {
    predict_on(&crate::comm::Solo, traces, spec, progress)
}

/// As [`predict`], with the simulated ranks split over the processes of `comm`.
pub fn predict_on(
    comm: &dyn crate::comm::Collective,
    traces: &[TraceInput],
    spec: &PredictSpec,
    progress: &ProgressBar,
) -> anyhow::Result<Prediction> {
    anyhow::ensure!(!traces.is_empty(), "no trace to predict");
    anyhow::ensure!(!spec.ranks.is_empty(), "no rank count to predict");
    let run_des = matches!(spec.model, Model::Des | Model::Both);
    let run_os = matches!(spec.model, Model::OrderStats | Model::Both);
    let scale = spec.platform.options().scale;
    let mut des = run_des.then(|| {
        let mut r = Report::new(ReportKind::PredictDes, config(traces, spec));
        r.calibration.push(platform_calibration(&spec.platform));
        r
    });
    let mut os = run_os.then(|| {
        let mut r = Report::new(ReportKind::PredictOrderStats, config(traces, spec));
        r.calibration.push(platform_calibration(&spec.platform));
        r
    });
    for t in traces {
        if let Some(r) = os.as_mut() {
            if spec.des.ranks_per_node > 1 {
                r.warnings.push(format!(
                    "{}: order-stats models one stream per node (--ranks-per-node 1); skipped",
                    t.label
                ));
            } else {
                // One stream per node: plan t is node trace t (one for a single trace).
                let dists = (t.plans.iter())
                    .map(|p| Analytic::from_plan(p, spec.des.quanta_ns))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let place = Placement::new(1, dists.len())?;
                for &mode in &spec.modes {
                    let mut any = false;
                    for &n in &spec.ranks {
                        let parts: Vec<(&Analytic, u64)> = (dists.iter().enumerate())
                            .map(|(i, d)| (d, place.ranks_on_trace(n, i)))
                            .collect();
                        if let Some(row) =
                            order_stats_row_mix(&t.label, &parts, n, mode, &spec.des, scale)
                        {
                            r.results.push(row);
                            any = true;
                        }
                    }
                    if !any {
                        r.warnings.push(format!(
                            "{}: sync {mode} depends on timer drift; order-stats models only \
                             none and phase",
                            t.label
                        ));
                    }
                }
            }
        }
        if let Some(r) = des.as_mut() {
            // Compiled once per trace for every rank count and sync mode.
            let ix = des::indexes(&t.plans, &spec.des, spec.engine);
            let bg_ix =
                (t.background.as_ref()).map(|b| des::indexes(&b.plans, &spec.des, spec.engine));
            if let Some(note) =
                jitter_emulator::placement::note(spec.des.ranks_per_node, t.info.streams as u64)
            {
                r.warnings.push(format!("{}: {note}", t.label));
            }
            if let Some(b) = t.background.as_ref().filter(|b| b.lap.dropped > 0) {
                r.warnings.push(format!(
                    "{}: one lap of its plans drops {} detours ({} ns; S·run ≤ O) before the \
                     union with {}",
                    t.label, b.lap.dropped, b.lap.dropped_ns, b.label
                ));
            }
            for &mode in &spec.modes {
                for &n in &spec.ranks {
                    let mut pooled = None;
                    let mut spread = DrawSpread {
                        draws: spec.draws.max(1),
                        sd_qtbt_range_pct: [f64::INFINITY, f64::NEG_INFINITY],
                        sd_qt_range_pct: [f64::INFINITY, f64::NEG_INFINITY],
                    };
                    for d in 0..spec.draws.max(1) {
                        let cfg = DesConfig {
                            seed: spec.des.seed.wrapping_add(d),
                            ..spec.des.clone()
                        };
                        let point = Point {
                            comm,
                            input: t,
                            ix: ix.as_deref(),
                            bg_ix: bg_ix.as_ref().map(|b| b.as_deref()),
                            ranks: n,
                            mode,
                            progress,
                        };
                        let out = point.simulate(&cfg)?;
                        let row = des_row(&t.label, n, mode, &out);
                        let widen = |r: &mut [f64; 2], x: f64| *r = [r[0].min(x), r[1].max(x)];
                        widen(&mut spread.sd_qtbt_range_pct, row.sd_qtbt_pct);
                        widen(&mut spread.sd_qt_range_pct, row.sd_qt_pct);
                        window::pool(&mut pooled, out);
                    }
                    let out = pooled.context("no draw")?;
                    let draws = spec.draws.max(1);
                    if out.stopped_by_fraction {
                        progress.inc(
                            (spec.des.phases * draws)
                                .saturating_sub(out.averages.phases)
                                .saturating_mul(n),
                        );
                        r.warnings.push(format!(
                            "{} at {n} ranks, sync {mode}: a rank replayed f = {} of its stream \
                             after {} of {} phases; the run stopped there",
                            t.label,
                            spec.platform.options().fraction,
                            out.averages.phases,
                            spec.des.phases * draws
                        ));
                    }
                    anyhow::ensure!(
                        out.averages.phases > 0,
                        "{} at {n} ranks, sync {mode}: the trace is too short for one phase",
                        t.label
                    );
                    if out.emulator.dropped > 0 {
                        r.warnings.push(format!(
                            "{} at {n} ranks, sync {mode}: {} detours ({} ns) dropped (S·run ≤ O)",
                            t.label, out.emulator.dropped, out.emulator.dropped_ns
                        ));
                    }
                    let mut row = des_row(&t.label, n, mode, &out);
                    row.draws = (draws > 1).then_some(spread);
                    r.results.push(row);
                }
            }
        }
    }
    Ok(Prediction {
        des,
        order_stats: os,
    })
}

/// One simulated point (a trace, a rank count and a mode) of [`predict_on`].
struct Point<'a> {
    comm: &'a dyn crate::comm::Collective,
    input: &'a TraceInput,
    ix: Option<&'a [jitter_emulator::PlanIndex]>,
    bg_ix: Option<Option<&'a [jitter_emulator::PlanIndex]>>,
    ranks: u64,
    mode: SyncMode,
    progress: &'a ProgressBar,
}

impl Point<'_> {
    /// Simulates the point with `cfg` (its seed: one draw), over the platform's noise when
    /// the input has one.
    fn simulate(&self, cfg: &DesConfig) -> anyhow::Result<DesOutcome> {
        let (comm, t, n, mode) = (self.comm, self.input, self.ranks, self.mode);
        let progress = self.progress;
        let mut out =
            des::simulate_with(comm, &t.plans, self.ix, n, mode, cfg, &|_| progress.inc(n))?;
        if let (Some(b), Some(bix)) = (&t.background, &self.bg_ix) {
            // The baseline: the platform's noise alone, the same ranks and offsets,
            // over the same stretch of the timeline: its phases are shorter, and the
            // platform's noise is not the same everywhere (a burst just past the
            // baseline's end would count for the trace), so it runs on for as many
            // more phases as the trace's own stretch takes.
            let base = |phases: u64| {
                let cfg = DesConfig {
                    phases,
                    ..cfg.clone()
                };
                des::simulate_with(comm, &b.plans, *bix, n, mode, &cfg, &|_| {})
            };
            let mut b0 = base(cfg.phases)?;
            let span = out.mean_period_ns * out.averages.phases as f64;
            let more = (span / b0.mean_period_ns.max(1.0)).ceil() as u64;
            if more > b0.averages.phases && !b0.stopped_by_fraction {
                b0 = base(more)?;
            }
            out.over_background(&b0, &b.lap);
        }
        Ok(out)
    }
}

/// Most negative slowdown a prediction may show, percent: noise only slows a run down, and the
/// virtual clock's own sampling noise stays well inside this.
pub const SD_FLOOR_PCT: f64 = -1.0;

/// Refuses to print a prediction with a non-finite slowdown or one below [`SD_FLOOR_PCT`].
pub fn check_plausible(p: &Prediction) -> anyhow::Result<()> {
    for row in [&p.des, &p.order_stats]
        .into_iter()
        .flatten()
        .flat_map(|r| &r.results)
    {
        for sd in [row.sd_qtbt_pct, row.sd_qt_pct] {
            anyhow::ensure!(
                sd.is_finite() && sd >= SD_FLOOR_PCT,
                "implausible prediction: slowdown {sd:.2} % for {} ranks ({}, sync {}), below \
                 {SD_FLOOR_PCT} % or not finite; the input is outside what the model handles \
                 (check --scale, --quanta and --barrier-stage-ns)",
                row.ranks,
                row.trace,
                row.sync
            );
        }
    }
    Ok(())
}

/// The prediction as rows of the SD-vs-ranks table and plot ([`crate::plot`]), sorted by trace,
/// sync, model and ranks.
pub fn study_rows(p: &Prediction) -> Vec<crate::plot::StudyRow> {
    crate::plot::rows([&p.des, &p.order_stats].into_iter().flatten())
}

/// Where the analytic report goes when both models run: `<stem>.order-stats.json`.
pub fn order_stats_path(output: &Path) -> PathBuf {
    let stem = output
        .file_stem()
        .map_or_else(|| "report".into(), |s| s.to_string_lossy().into_owned());
    output.with_file_name(format!("{stem}.order-stats.json"))
}

/// Worker threads without `--threads`: every core, but where the largest rank count a process
/// simulates (`ranks` over `procs` processes) makes several chunks, no more than those: more
/// would only wake and sleep at every pass (2048 ranks on a 16-core machine: 16 threads
/// 2.0-2.3 s, 2 threads 1.7-1.9 s). A pass of one chunk runs on this thread and wakes no
/// worker, so there the idle workers cost nothing and loading the traces uses them all.
fn default_threads(ranks: u64, procs: u64, cores: usize) -> usize {
    let own = ranks.div_ceil(procs.max(1));
    match own.div_ceil(des::MIN_CHUNK as u64) {
        0 | 1 => cores,
        chunks => cores.min(usize::try_from(chunks).unwrap_or(usize::MAX)),
    }
}

/// Refuses `--threads` outside 1 ..= the host's online CPUs: more workers than CPUs can only
/// take turns on them (no speed, a stack and a context switch each; `--threads 100000` spent
/// the whole 30 s limit starting threads), and the default never exceeds them either.
fn check_threads(threads: usize, online: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=online).contains(&threads),
        "--threads {threads}: give 1 to {online} (this host's online CPUs; more workers than \
         CPUs only take turns)"
    );
    Ok(())
}

/// Cores one process uses by default: those its affinity allows (`allowed`), but no more than
/// its share of the host's `online` CPUs among the `on_host` processes of the job there. Under
/// `mpirun` without binding every process is allowed every core, and all of them taking all
/// would oversubscribe the host; bound to a core or a socket, the affinity is the smaller.
fn cores_of_process(allowed: usize, online: usize, on_host: usize) -> usize {
    allowed.min(online / on_host.max(1)).max(1)
}

/// `replay-bench predict`: prints the SD table, writes the report(s) and the plot.
pub fn main(args: PredictArgs) -> anyhow::Result<()> {
    main_with(args, Engine::default())
}

/// [`main`] with the simulation engine chosen (`--engine`).
pub fn main_with(args: PredictArgs, engine: Engine) -> anyhow::Result<()> {
    // Under an MPI launcher the simulated ranks are split over the processes (rank 0 reports).
    let universe = match crate::launcher_rank() {
        Some(_) => Some(mpi::initialize().context("MPI is not available or already initialised")?),
        None => None,
    };
    let mpi_comm = universe.as_ref().map(|u| crate::comm::Mpi::new(u.world()));
    let comm: &dyn crate::comm::Collective = match &mpi_comm {
        Some(c) => c,
        None => &crate::comm::Solo,
    };
    let root = comm.rank() == 0;
    // Rank 0 writes: it checks its outputs, and every process learns the outcome before
    // anything collective.
    let online = jitter_collect::cpuset::online_cpus().map_or_else(
        |_| std::thread::available_parallelism().map_or(1, |n| n.get()),
        |c| c.len(),
    );
    let outputs = if root { args.check_outputs() } else { Ok(()) };
    let checked = outputs.and_then(|()| args.threads.map_or(Ok(()), |t| check_threads(t, online)));
    if let Err(e) = crate::comm::agree(comm, checked) {
        if root {
            return Err(e);
        }
        std::thread::sleep(Duration::from_millis(300));
        return Err(crate::OtherRankFailed.into());
    }
    let on_host = mpi_comm
        .as_ref()
        .map_or(1, crate::comm::Mpi::ranks_on_this_host);
    let threads = args.threads.unwrap_or_else(|| {
        let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
        let online = jitter_collect::cpuset::online_cpus().map_or(allowed, |c| c.len());
        default_threads(
            args.ranks.0.iter().max().copied().unwrap_or(1),
            comm.size() as u64,
            cores_of_process(allowed, online, on_host),
        )
    });
    // The global pool (the communicator cannot move into another pool's threads), with this
    // thread as its worker 0: the phase loop's parallel passes then start on a worker, so the
    // other workers steal from it instead of this thread handing each pass to the pool and
    // sleeping until it is done (a context switch per pass, 2 per phase), and MPI calls stay on
    // this thread. Built before the traces are read, which uses it too. Fails harmlessly when
    // the pool already exists (a second call).
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .use_current_thread()
        .build_global();
    anyhow::ensure!(
        args.threads.is_none() || rayon::current_num_threads() == threads,
        "cannot set {threads} worker threads: the pool already has {}",
        rayon::current_num_threads()
    );
    if args.windows_of.is_some() {
        anyhow::ensure!(
            mpi_comm.is_none(),
            "--windows-of predicts the few ranks of one run: run it without an MPI launcher"
        );
        return window::main(&args, engine);
    }
    let (traces, mut spec) = prepare(&args)?;
    spec.engine = engine;
    // Estimate before anything large is allocated; every process checks its own share and all
    // agree, so that none is left waiting in a collective.
    let estimate = budget::estimate(
        &traces,
        &spec,
        comm.size() as u64,
        comm.rank() as u64,
        rayon::current_num_threads(),
    );
    let admitted = budget::admit(&estimate, &budget::Limits::here(on_host), args.force);
    if let Err(e) = crate::comm::agree(comm, admitted) {
        if root {
            return Err(e);
        }
        // Rank 0 reports; the launcher stops the job at the first non-zero exit.
        std::thread::sleep(Duration::from_millis(300));
        return Err(crate::OtherRankFailed.into());
    }
    if root && estimate.seconds > budget::ANNOUNCE_S {
        eprintln!("{estimate}");
        if let Some(note) = walk_note(&spec) {
            eprintln!("note: {note}");
        }
    }
    let total = rank_phases(traces.len(), &spec);
    let terminal = std::io::stderr().is_terminal();
    let bar = if root && terminal && total > 0 {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {percent:>3} % of {human_len} rank-phases ({eta} left)",
            )?
            .progress_chars("=> "),
        );
        b
    } else {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden())
    };
    let lines = (root && !terminal && total > 0 && estimate.seconds > budget::TEXT_PROGRESS_S)
        .then(|| TextProgress::start(bar.clone(), estimate.seconds, TEXT_PROGRESS_EVERY));
    let p = predict_on(comm, &traces, &spec, &bar);
    if let Some(l) = lines {
        l.stop();
    }
    let p = p?;
    if !root {
        return Ok(());
    }
    bar.finish_and_clear();
    check_plausible(&p)?;
    let mut p = p;
    if args.drivers {
        let found = drivers_of(&args, &traces, &spec)?;
        for d in &found {
            println!("drivers: {}", d.line());
        }
        if let Some(det) = p.des.as_mut().and_then(|r| r.config.predict.as_mut()) {
            det.drivers = found;
        }
    }
    println!(
        "{}",
        platform::model_line(&spec.des.comm, spec.des.barrier.stage_ns, &spec.platform)
    );
    let rows = study_rows(&p);
    print!("{}", crate::plot::render_table(&rows));
    for t in &traces {
        for line in t.info.kept_lines() {
            println!("{line}");
        }
    }
    for r in [&p.des, &p.order_stats].into_iter().flatten() {
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
    }
    if let Some(out) = &args.output {
        match (&p.des, &p.order_stats) {
            (Some(d), Some(o)) => {
                d.save(out)?;
                o.save(&order_stats_path(out))?;
            }
            (Some(r), None) | (None, Some(r)) => r.save(out)?,
            (None, None) => {}
        }
    }
    if let Some(path) = &args.plot {
        let q = jitter_trace::units::format_ns(spec.des.quanta_ns as f64);
        crate::plot::draw(
            &rows,
            crate::plot::Metric::Qtbt,
            &format!("Predicted slowdown, q = {q}, {} phases", spec.des.phases),
            path,
        )?;
    }
    Ok(())
}

/// [`drivers::drivers`] of every trace and mode at the largest rank count.
fn drivers_of(
    args: &PredictArgs,
    traces: &[TraceInput],
    spec: &PredictSpec,
) -> anyhow::Result<Vec<drivers::Drivers>> {
    let n = spec.ranks.iter().copied().max().unwrap_or(1);
    let mut out = Vec::new();
    for (path, input) in args.traces.iter().zip(traces) {
        let loaded = jitter_trace::read_trace(path)
            .with_context(|| format!("cannot read trace {}", path.display()))?;
        loaded.accept(&path.display().to_string(), args.salvage.choice())?;
        for &mode in &spec.modes {
            out.push(drivers::drivers(&loaded.trace, input, spec, n, mode)?);
        }
    }
    Ok(out)
}

/// The simulation's work in rank-phases (what the progress counts; 0 for the analytic tier).
pub fn rank_phases(traces: usize, spec: &PredictSpec) -> u64 {
    if matches!(spec.model, Model::OrderStats) {
        return 0;
    }
    let per_mode = spec.ranks.iter().fold(0u64, |a, &n| {
        a.saturating_add(n.saturating_mul(spec.des.phases))
    });
    per_mode.saturating_mul(traces as u64 * spec.modes.len() as u64 * spec.draws.max(1))
}

/// How often a non-terminal stderr gets a line of progress.
pub const TEXT_PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// One line of progress: `predict: 40 % (800/2000 rank-phases), eta 12 s`; before the first
/// phase the eta is what the estimate leaves.
pub fn progress_line(done: u64, total: u64, elapsed: Duration, estimate_s: f64) -> String {
    let pct = if total == 0 {
        100.0
    } else {
        100.0 * done as f64 / total as f64
    };
    let eta = if done == 0 {
        (estimate_s - elapsed.as_secs_f64()).max(0.0)
    } else {
        elapsed.as_secs_f64() * total.saturating_sub(done) as f64 / done as f64
    };
    format!("predict: {pct:.0} % ({done}/{total} rank-phases), eta {eta:.0} s")
}

/// Prints [`progress_line`] to stderr every `every` while a prediction runs (for logs, where
/// the progress bar is hidden).
#[derive(Debug)]
struct TextProgress {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl TextProgress {
    fn start(bar: ProgressBar, estimate_s: f64, every: Duration) -> Self {
        let (stop, rx) = mpsc::channel::<()>();
        let t0 = Instant::now();
        let thread = std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                let total = bar.length().unwrap_or(0);
                eprintln!(
                    "{}",
                    progress_line(bar.position(), total, t0.elapsed(), estimate_s)
                );
            }
        });
        TextProgress { stop, thread }
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_line_gives_share_and_eta() {
        assert_eq!(
            progress_line(800, 2000, Duration::from_secs(8), 30.0),
            "predict: 40 % (800/2000 rank-phases), eta 12 s"
        );
        assert_eq!(
            progress_line(0, 2000, Duration::from_secs(8), 30.0),
            "predict: 0 % (0/2000 rank-phases), eta 22 s"
        );
    }

    #[test]
    fn the_default_pool_has_no_more_workers_than_chunks_of_the_largest_count() {
        // 2048 ranks: two chunks of 1024 states, whatever the cores.
        assert_eq!(default_threads(2048, 1, 16), 2);
        assert_eq!(default_threads(2049, 1, 16), 3);
        // One chunk: no pass wakes a worker; loading uses every core.
        assert_eq!(default_threads(100, 1, 16), 16);
        assert_eq!(default_threads(1024, 1, 16), 16);
        // Split over processes: each process's share counts.
        assert_eq!(default_threads(4096, 2, 16), 2);
        assert_eq!(default_threads(1 << 20, 2, 16), 16);
        // Never more than the cores.
        assert_eq!(default_threads(1 << 20, 1, 2), 2);
    }

    #[test]
    fn a_sync_mode_listed_twice_is_refused() {
        let m = |s: &str| s.parse::<SyncMode>().unwrap();
        check_sync_modes(&[m("none"), m("phase")]).unwrap();
        assert_eq!(
            check_sync_modes(&[m("none"), m("phase"), m("none")])
                .unwrap_err()
                .to_string(),
            "--sync lists none twice: list every mode once"
        );
        assert!(check_sync_modes(&[]).is_err());
    }

    #[test]
    fn a_given_thread_count_is_bounded_by_the_online_cpus() {
        check_threads(1, 2).unwrap();
        check_threads(2, 2).unwrap();
        for bad in [0, 3, 100_000] {
            assert_eq!(
                check_threads(bad, 2).unwrap_err().to_string(),
                format!(
                    "--threads {bad}: give 1 to 2 (this host's online CPUs; more workers than \
                     CPUs only take turns)"
                )
            );
        }
    }

    #[test]
    fn a_process_takes_its_share_of_the_host_unless_its_affinity_is_smaller() {
        // Alone: every core it may use.
        assert_eq!(cores_of_process(16, 16, 1), 16);
        assert_eq!(cores_of_process(4, 16, 1), 4);
        // mpirun without binding, 4 processes on a 16-core host: a quarter each.
        assert_eq!(cores_of_process(16, 16, 4), 4);
        // Bound to a socket of 8 cores, 2 processes on the host: the socket.
        assert_eq!(cores_of_process(8, 16, 2), 8);
        // Bound to a core, or more processes than cores: one.
        assert_eq!(cores_of_process(1, 16, 16), 1);
        assert_eq!(cores_of_process(16, 2, 4), 1);
    }

    #[test]
    fn rank_lists_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_ranks("16..128").unwrap(), vec![16, 32, 64, 128]);
        assert_eq!(parse_ranks("16..100").unwrap(), vec![16, 32, 64]);
        assert_eq!(parse_ranks("1,3, 10").unwrap(), vec![1, 3, 10]);
        assert_eq!(parse_ranks("1_000_000").unwrap(), vec![1_000_000]);
        for (bad, why) in [
            ("0..16", "at least 1"),
            ("0", "at least 1"),
            ("16,8", "strictly increasing"),
            ("16,16", "strictly increasing"),
            ("64..16", "increasing"),
            ("x", "not a rank count"),
        ] {
            let e = parse_ranks(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_command_line_is_typed_once_and_bad_values_are_refused_by_the_parser() {
        let a = PredictArgs::from_flags(&[
            "--trace",
            "t.jtr",
            "--sync",
            "none,once,phase,every:4",
            "--ranks",
            "16..64",
            "--quanta",
            "2ms",
            "--scale",
            "2",
            "--overhead",
            "3us",
            "--platform",
            "this",
        ])
        .unwrap();
        assert_eq!(
            a.sync,
            vec![
                SyncMode::None,
                SyncMode::Once,
                SyncMode::Phase,
                SyncMode::Every(4)
            ]
        );
        assert_eq!(a.ranks.0, vec![16, 32, 64]);
        assert_eq!(a.quanta, 2_000_000);
        assert_eq!(a.replay.scale.map(|s| s.get()), Some(2.0));
        assert_eq!(a.replay.overrides.overhead, Some(3_000));
        assert_eq!(a.platform, PlatformChoice::This);
        for (flags, why) in [
            (
                ["--sync", "none,sometimes"],
                "unknown sync mode 'sometimes'",
            ),
            (["--scale", "0"], "scale must be"),
            (["--fraction", "2"], "fraction must be"),
            (["--ranks", "16,8"], "strictly increasing"),
            (["--quanta", "0s"], "must be positive"),
        ] {
            let mut v = vec!["--trace", "t.jtr"];
            v.extend(flags);
            let e = PredictArgs::from_flags(&v).unwrap_err().to_string();
            assert!(e.contains(why), "{flags:?}: {e}");
        }
    }

    #[test]
    fn the_walk_forced_by_timer_errors_is_said_with_how_to_get_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let s: jitter_trace::Spec = "poisson:rate=1000/s,dur=5us".parse().unwrap();
        let t = jitter_trace::synth::synthesize(&s, 1, 1_000_000_000, 1).unwrap();
        let path = dir.path().join("t.jtr");
        jitter_trace::write_trace(&path, &t).unwrap();
        let trace = path.display().to_string();
        let spec = |extra: &[&str]| {
            let mut flags = vec!["--trace", trace.as_str()];
            flags.extend(extra);
            prepare(&PredictArgs::from_flags(&flags).unwrap())
                .unwrap()
                .1
        };
        // The ideal platform's default replays the trace as recorded: no timer errors, the
        // index. Its itimer (an emulation's timer) draws errors of 20 us, which force the walk.
        assert!(walk_note(&spec(&[])).is_none());
        assert_eq!(spec(&[]).des.drift_sd_ns, 0.0);
        let n = walk_note(&spec(&["--timer", "itimer"])).expect("itimer walks");
        assert!(
            n.contains("--timer abstime") && n.contains("20.00 us"),
            "{n}"
        );
        assert!(walk_note(&spec(&["--timer", "abstime"])).is_none());
        assert!(walk_note(&spec(&["--model", "order-stats"])).is_none());
        // The walk asked for: nothing to say.
        let walk = PredictSpec {
            engine: des::Engine::Walk,
            ..spec(&[])
        };
        assert!(walk_note(&walk).is_none());
    }

    #[test]
    fn a_trace_over_a_platform_adds_only_what_the_platform_does_not_already_lose() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, spec: &str| {
            let s: jitter_trace::Spec = spec.parse().unwrap();
            let t = jitter_trace::synth::synthesize(&s, 2, 4_000_000_000, 1).unwrap();
            let path = dir.path().join(name);
            jitter_trace::write_trace(&path, &t).unwrap();
            path.display().to_string()
        };
        let trace = write("t.jtr", "periodic:period=4ms,dur=120us");
        let same = write("same.jtr", "periodic:period=4ms,dur=120us");
        let other = write("other.jtr", "periodic:period=4ms,dur=120us,phase=2ms");
        let sd = |platform: Option<&str>| {
            let mut flags = vec![
                "--trace",
                &trace,
                "--ranks",
                "1,2",
                "--sync",
                "none,once",
                "--phases",
                "500",
                "--timer",
                "abstime",
            ];
            if let Some(p) = platform {
                flags.extend(["--platform-noise", p]);
            }
            let (traces, spec) = prepare(&PredictArgs::from_flags(&flags).unwrap()).unwrap();
            let des = predict(&traces, &spec, &ProgressBar::hidden())
                .unwrap()
                .des
                .unwrap();
            assert_eq!(
                des.config.predict.unwrap().platform_noise.is_some(),
                platform.is_some()
            );
            des.results
        };
        let alone = sd(None);
        // The platform loses exactly the trace's detours already: the trace adds nothing.
        for (a, b) in alone.iter().zip(sd(Some(&same))) {
            assert!(a.sd_qt_pct > 2.0, "{a:?}");
            assert_eq!((b.sd_qt_pct, b.sd_qtbt_pct), (0.0, 0.0), "{b:?}");
            assert!(b.baseline_avg_max_qt_ns > 1.02e6, "{b:?}");
        }
        // A platform whose detours fall between the trace's: one rank loses both, and the
        // slowdown against the platform alone is (1 − d/P) / (1 − 2d/P) − 1 = 3.19 % for d/P =
        // 3 % (the trace alone: 1 / (1 − d/P) − 1 = 3.09 %, which this tolerance excludes).
        let closed = 100.0 * (0.97 / 0.94 - 1.0);
        for b in sd(Some(&other)).iter().filter(|b| b.ranks == 1) {
            assert!((b.sd_qt_pct - closed).abs() < 0.03, "{b:?}");
        }
        let e = prepare(
            &PredictArgs::from_flags(&[
                "--trace",
                &trace,
                "--platform-noise",
                &same,
                "--timer",
                "itimer",
            ])
            .unwrap(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("--timer abstime"), "{e}");
    }

    #[test]
    fn the_baseline_covers_the_stretch_of_platform_noise_the_trace_s_run_covers() {
        // One rank, sync once: the replay starts at the schedule's point o. Without the trace a
        // phase lasts q, so 1000 phases end at o + 1 s; with it about 3 % later. A 10 ms burst
        // of platform noise 1 ms past o + 1 s lies inside the trace's stretch only: a baseline
        // of 1000 phases would miss it and charge it to the trace (+1 pp).
        let dir = tempfile::tempdir().unwrap();
        let (q, phases, d) = (1_000_000u64, 1000u64, 4_000_000_000u64);
        let s: jitter_trace::Spec = "periodic:period=4ms,dur=120us".parse().unwrap();
        let t = jitter_trace::synth::synthesize(&s, 1, d, 1).unwrap();
        let trace = dir.path().join("t.jtr");
        jitter_trace::write_trace(&trace, &t).unwrap();
        let o = jitter_emulator::SyncSchedule {
            mode: SyncMode::Once,
            seed: 1,
        }
        .start_offset(0, d);
        let burst = (o + phases * q + 1_000_000) % (d - 20_000_000);
        let detour = |start_ns, run_ns| jitter_trace::Detour { start_ns, run_ns };
        let stream = jitter_trace::Stream::from_detours(0, 0, d, &[detour(burst, 10_000_000)]);
        let mut platform = t.clone();
        platform.streams = vec![stream.unwrap()];
        let bg = dir.path().join("bg.jtr");
        jitter_trace::write_trace(&bg, &platform).unwrap();
        let (trace, bg) = (trace.display().to_string(), bg.display().to_string());
        let flags = [
            "--trace",
            &trace,
            "--ranks",
            "1",
            "--sync",
            "once",
            "--phases",
            "1000",
            "--timer",
            "abstime",
            "--platform-noise",
            &bg,
        ];
        let (traces, spec) = prepare(&PredictArgs::from_flags(&flags).unwrap()).unwrap();
        let des = predict(&traces, &spec, &ProgressBar::hidden())
            .unwrap()
            .des
            .unwrap();
        let row = &des.results[0];
        // The trace alone: d/P over (1 − d/P) ≈ 3.09 %.
        assert!((row.sd_qt_pct - 3.09).abs() < 0.3, "{row:?}");
        assert!(row.baseline_avg_max_qt_ns > q as f64, "{row:?}");
    }

    #[test]
    fn progress_counts_rank_phases_and_saturates() {
        let mut spec = PredictSpec::ideal_offloaded(
            vec![16, 32],
            vec![SyncMode::None, SyncMode::Phase],
            100,
            Engine::default(),
        );
        assert_eq!(rank_phases(3, &spec), 3 * 2 * 48 * 100);
        spec.ranks = vec![u64::MAX / 2];
        assert_eq!(rank_phases(3, &spec), u64::MAX);
        spec.model = Model::OrderStats;
        assert_eq!(rank_phases(3, &spec), 0);
    }

    #[test]
    fn the_analytic_report_goes_beside_the_simulated_one() {
        assert_eq!(
            order_stats_path(Path::new("/x/r.json")),
            PathBuf::from("/x/r.order-stats.json")
        );
    }
}
