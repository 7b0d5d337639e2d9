//! The options of `replay-bench predict` (`PredictArgs`, and `PredictCmd` with the engine),
//! the models they choose between, and the outputs they name, checked before any work.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use jitter_emulator_cli::{ReplayArgs, SalvageArgs};
use jitter_trace::precision::Precision;

use super::duration::{duration_flag, positive_duration_flag};
use super::shared::NodeTraceArgs;
use super::shared::{
    PlatformChoice, Quanta, RankCounts, RanksPerNode, Seed, SimulatedPhases, SyncModes,
};
use jitter_predict::collective::{Algorithm, LoopShape};
use jitter_predict::des::Engine;
use jitter_predict::precision_mode::DEFAULT_PRECISION;
use jitter_predict::request::PredictRequest;
use jitter_predict::spec::{Model, PrecisionPlan};

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
    /// The sync modes of the rows.
    #[command(flatten)]
    pub sync: SyncModes,
    /// Work quanta q of one phase.
    #[command(flatten)]
    pub quanta: Quanta,
    /// Phases to simulate.
    #[command(flatten)]
    pub phases: SimulatedPhases,
    /// Model: des (virtual-time simulation), order-stats (analytic) or both.
    #[arg(long, value_enum, default_value_t = Model::Des)]
    pub model: Model,
    /// k ranks per node.
    #[command(flatten)]
    pub ranks_per_node: RanksPerNode,
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
    #[arg(long, value_name = "DURATION", value_parser = duration_flag)]
    pub lateness_sd: Option<u64>,
    /// Seed of offsets, resync points and timer errors.
    #[command(flatten)]
    pub seed: Seed,
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
    /// replayed moves the answer) and their 95 % interval; fixes the work (no precision mode)
    /// [default with --phases: 1].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub draws: Option<u64>,
    /// Add offset draws to every point until both its slowdowns' 95 % intervals are this
    /// narrow: relative (`2%` of the slowdown), absolute (`0.5pp`) or either (`2%,0.1pp`), or
    /// until --max-time or --max-phases runs out; the report says the precision reached and
    /// why each point stopped. The default mode, at 2%,0.1pp, unless --phases, --draws or
    /// --whole-trace fixes the work.
    #[arg(long, value_name = "PRECISION", conflicts_with_all = ["phases", "draws", "whole_trace", "windows_of", "app"])]
    pub precision: Option<Precision>,
    /// Time budget of the precision mode (every point gets two draws first) [default: 10min].
    #[arg(long, value_name = "DURATION", value_parser = positive_duration_flag, conflicts_with_all = ["phases", "draws", "whole_trace", "windows_of", "app"])]
    pub max_time: Option<u64>,
    /// Most phases one point of the precision mode simulates, its draws' warm-up phases
    /// included [default: 10⁶].
    #[arg(long, value_name = "PHASES", value_parser = clap::value_parser!(u64).range(1..), conflicts_with_all = ["phases", "draws", "whole_trace", "windows_of", "app"])]
    pub max_phases: Option<u64>,
    /// An application profile (`JITTER_PROFILE=app.json`): predict its main loop instead of the
    /// benchmark's, --phases of its iterations at each --ranks with the trace's noise (compute =
    /// each call's mean interval; collectives by their algorithms; messages to the profiled
    /// peers, grown to N as ring offsets or Cartesian strides); LogP o and l as for the loop.
    #[arg(
        long,
        value_name = "APP_JSON",
        conflicts_with_all = ["windows_of", "platform_noise", "drivers", "quanta", "whole_trace", "loop_shape", "collective", "model"]
    )]
    pub app: Option<PathBuf>,
    /// With --app: predict the very runs of a `replay-bench app` report (its counted runs with
    /// the library): each from its own JITTER_SEED and the points the preload library started
    /// its ranks at (its host, ranks and sync mode; give the same --ranks and --sync), pooled
    /// like --draws; the report lists each run's prediction (`measured_runs`).
    #[arg(
        long,
        value_name = "APP_REPORT",
        requires = "app",
        conflicts_with_all = ["draws", "seed", "node_traces"]
    )]
    pub runs_of: Option<PathBuf>,
    /// With --runs-of: how many MPI_Barrier calls the program makes before its main loop (the
    /// library counts each as a phase and may resync there).
    #[arg(long, default_value_t = 0, requires = "runs_of")]
    pub barriers_before: u64,
}

impl PredictArgs {
    /// The report(s) and the plot this prediction writes, checked (by `jitter_trace::output`'s
    /// rules) before anything is read or simulated.
    pub(crate) fn check_outputs(&self) -> anyhow::Result<()> {
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

    /// The precision mode's target and budgets, or `None` where --phases, --draws,
    /// --whole-trace, --windows-of or --app fixes the work.
    pub(crate) fn precision_plan(&self) -> Option<PrecisionPlan> {
        let fixed = self.phases.count.is_some()
            || self.draws.is_some()
            || self.whole_trace
            || self.windows_of.is_some()
            || self.app.is_some();
        (self.precision.is_some() || !fixed).then(|| PrecisionPlan {
            precision: self.precision.unwrap_or(DEFAULT_PRECISION),
            max_time: std::time::Duration::from_nanos(
                self.max_time.unwrap_or(PrecisionPlan::DEFAULT_MAX_TIME_NS),
            ),
            max_phases: self.max_phases.unwrap_or(PrecisionPlan::DEFAULT_MAX_PHASES),
            pilot: jitter_trace::precision::MIN_DRAWS,
        })
    }

    /// What these flags ask the predictor with the default engine and the work fixed by
    /// `--phases` and `--draws` (what `whatif` and `validate` ask; `predict`'s own request is
    /// [`PredictCmd::request`]): everything but the outputs, the threads and the modes
    /// `--windows-of`, `--drivers`, `--app` that choose what the command does with it.
    pub fn request(&self) -> PredictRequest {
        PredictRequest {
            traces: self.traces.clone(),
            node_traces: self.nodes.node_traces.clone(),
            ranks: self.ranks.0.clone(),
            modes: self.sync.modes.clone(),
            quanta_ns: self.quanta.ns,
            phases: self.phases.or_default(),
            whole_trace: self.whole_trace,
            model: self.model,
            ranks_per_node: self.ranks_per_node.k,
            barrier_stage_ns: self.barrier_stage_ns,
            loop_shape: self.loop_shape,
            collective: self.collective,
            logp_o_ns: self.logp_o_ns,
            logp_l_ns: self.logp_l_ns,
            calibrate_from: self.calibrate_from.clone(),
            platform: self.platform.clone(),
            replay: self.replay.given(),
            platform_noise: self.platform_noise.clone(),
            lateness_sd_ns: self.lateness_sd,
            seed: self.seed.value,
            draws: self.draws.unwrap_or(1),
            force: self.force,
            salvage: self.salvage.choice(),
            engine: Engine::default(),
            precision: None,
        }
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

/// `predict`'s options and the simulation engine.
#[derive(Debug, clap::Args)]
pub struct PredictCmd {
    #[command(flatten)]
    pub args: PredictArgs,
    /// Simulation engine: indexed (search in the compiled plan; the walk where it is not exact)
    /// or walk (injection by injection).
    #[arg(long, value_enum, default_value_t = Engine::Indexed)]
    pub engine: Engine,
}

impl PredictCmd {
    /// What `replay-bench predict` asks: the flags' request with the engine and, unless
    /// --phases, --draws, --whole-trace, --windows-of or --app fixes the work, the precision
    /// mode's plan (`PredictArgs::precision_plan`). `prepare` makes it a complete spec.
    pub fn request(&self) -> PredictRequest {
        PredictRequest {
            engine: self.engine,
            precision: self.args.precision_plan(),
            ..self.args.request()
        }
    }
}

/// Where the analytic report goes when both models run: `<stem>.order-stats.json`.
pub(crate) fn order_stats_path(output: &Path) -> PathBuf {
    let stem = output
        .file_stem()
        .map_or_else(|| "report".into(), |s| s.to_string_lossy().into_owned());
    output.with_file_name(format!("{stem}.order-stats.json"))
}
