//! `replay-bench run`: calibrate, measure the platform, then the Parallel Benchmark with one
//! in-process JitterEmulator per rank — baseline and jitter in paired, interleaved blocks
//! (default) or one after the other (`--design sequential`) — and report every slowdown with
//! its 95 % confidence interval.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use jitter_collect::clock::Clock;
use jitter_emulator::cli::{CalibrationArgs, ReplayArgs, SalvageArgs};
use jitter_emulator::{Fraction, Plan, ReplaySetup, SyncMode, SyncSchedule, TimerKind};
use jitter_trace::stats::Stats;
use jitter_trace::{Salvage, Trace};

use crate::baseline::{self, Baseline, Reference};
use crate::bench::{run_phases, Blocks, LoopOutcome, LoopSpec, NoJitter, Until};
use crate::comm::{agree, record, Collective, Mpi};
use crate::kernel::WorkRate;
use crate::metrics::PhaseAverages;
use crate::metrics::{paired_slowdown, sequential_slowdown, Slowdown};
use crate::noise::{self, PlatformNoise};
use crate::predict::placement::{self, NodeTraceArgs, Placement};
use crate::replay::{EmulatorCost, Replay, ReplayTotals, VirtualReplay};
use crate::report::{
    BaselineDetails, Config, EmulatorTotals, PairedDetails, RankCost, ReplayedWindows, Report,
    ReportKind, ResultRow, RunDetails, TraceBound, TraceInfo,
};
use crate::table;

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
    /// Ranks per emulated node k: rank r replays stream r mod k, node r / k shares one offset.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub ranks_per_node: u64,
    /// Work quanta q of one compute phase.
    #[arg(long, default_value = "1ms", value_parser = positive_duration_flag)]
    pub quanta: u64,
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

/// How baseline and jitter phases are laid out in one `replay-bench run`.
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
const DEFAULT_MAX_TIME_NS: u64 = 600_000_000_000;
/// How long each rank times its work loop (ns): longer than the slow stretches of a noisy vCPU.
const WORK_CALIBRATION_SPAN_NS: u64 = 400_000_000;

impl RunArgs {
    /// True when the run replays jitter (`--trace` or `--node-traces`).
    pub fn has_trace(&self) -> bool {
        self.trace.is_some() || !self.nodes.node_traces.is_empty()
    }
}

/// Refuses a phase count whose run would outlast the one-day limit of every duration option
/// (a `--period` cannot exceed it; `--phases` and `--warmup` are counts): (warm-up + phases) ×
/// q × S is the least time the run takes, every phase lasting at least its scaled quanta.
fn check_length(args: &RunArgs) -> anyhow::Result<()> {
    let scale = args
        .replay
        .setup_over(&ReplaySetup::ideal(TimerKind::Abstime))
        .scale
        .get();
    let phases = args.warmup.saturating_add(args.phases.unwrap_or(0));
    let least_ns = phases as f64 * args.quanta as f64 * scale;
    if least_ns > MAX_DURATION_NS {
        bail!(
            "{} warm-up and {} measured phases of q = {} at S = {scale} last at least {}, \
             over the limit of 1d: fewer phases or a shorter --quanta",
            args.warmup,
            args.phases.unwrap_or(0),
            jitter_trace::units::format_ns(args.quanta as f64),
            jitter_trace::units::format_ns(least_ns)
        );
    }
    Ok(())
}

/// The design a run uses, or why its options do not fit together.
fn design_of(args: &RunArgs) -> anyhow::Result<Design> {
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
            bail!("--baseline-period needs --design sequential (paired blocks share the period)");
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

/// Longest duration any option takes, ns (one day).
const MAX_DURATION_NS: f64 = 86_400e9;

/// A duration flag of the benchmark, ns: `jitter_trace::units`' rule, at most a day.
pub fn duration_flag(s: &str) -> Result<u64, String> {
    let ns = jitter_trace::units::parse_duration_ns(s).map_err(|e| e.to_string())?;
    within_a_day(s, ns)
}

/// A positive duration flag, ns: `jitter_trace::units::parse_positive_duration`, at most a day.
pub fn positive_duration_flag(s: &str) -> Result<u64, String> {
    let d = jitter_trace::units::parse_positive_duration(s).map_err(|e| e.to_string())?;
    within_a_day(s, d.as_nanos() as f64)
}

fn within_a_day(s: &str, ns: f64) -> Result<u64, String> {
    if ns > MAX_DURATION_NS {
        return Err(format!("`{s}` is longer than the limit of 1d"));
    }
    Ok(ns.round() as u64)
}

/// The trace, checked, with what the report says about it.
struct LoadedTrace {
    trace: Trace,
    /// The stream of it this rank replays.
    stream: usize,
    /// Its timeline in the sync schedule (`jitter_emulator::placement::slot`).
    timeline: u64,
    /// Its file, for errors.
    file: String,
    info: TraceInfo,
    warnings: Vec<String>,
}

/// This rank's trace: `--trace` (`is_set` false, one path) or its node group's of the
/// `--node-traces` set, by [`Placement`]. With a set, rank 0 also checks every other trace (so
/// that a bad one anywhere stops every rank before the run, by [`agree`]) and holds the set's
/// description (`nodes(n)` unless labelled) and the warnings of all, each named by its file.
fn load_rank_trace(
    set: &[PathBuf],
    is_set: bool,
    label: Option<&str>,
    rank: usize,
    (k, salvage): (u64, Salvage),
) -> anyhow::Result<LoadedTrace> {
    let place = Placement::new(k, set.len() * k as usize)?;
    let rank = rank as u64;
    let mine = place.trace(rank);
    if let ([path], false) = (set, is_set) {
        let t = load_trace(path, label, k, salvage)?;
        let slot = jitter_emulator::placement::slot(rank / k, rank % k, t.info.streams as u64);
        return Ok(LoadedTrace {
            stream: slot.stream,
            timeline: slot.timeline,
            ..t
        });
    }
    let mut own: Option<LoadedTrace> = None;
    let (mut infos, mut warnings) = (Vec::new(), Vec::new());
    for (i, path) in set.iter().enumerate() {
        if rank != 0 && i != mine {
            continue;
        }
        let t = load_trace(path, None, k, salvage)?;
        if (t.info.streams as u64) < k {
            bail!(
                "node trace {} has {} streams, fewer than --ranks-per-node {k}: every trace of \
                 a set needs k",
                path.display(),
                t.info.streams
            );
        }
        infos.push(t.info.clone());
        warnings.extend(
            t.warnings
                .iter()
                .map(|w| format!("{}: {w}", path.display())),
        );
        if i == mine {
            own = Some(t);
        }
    }
    let own = own.ok_or_else(|| anyhow::anyhow!("no node trace for rank {rank}"))?;
    let label = label.map_or_else(|| placement::set_label(set.len()), str::to_string);
    Ok(LoadedTrace {
        trace: own.trace,
        file: own.file,
        stream: place.stream(rank),
        timeline: place.timeline(rank),
        info: TraceInfo::node_set(&label, infos),
        warnings,
    })
}

/// Reads one trace under the one policy on what it lacks ([`jitter_trace::integrity`]): refused
/// unless `salvage`; what was kept goes into the warnings and the report's trace description.
fn load_trace(
    path: &std::path::Path,
    label: Option<&str>,
    k: u64,
    salvage: Salvage,
) -> anyhow::Result<LoadedTrace> {
    let loaded = jitter_trace::read_trace(path)
        .with_context(|| format!("cannot use trace {}", path.display()))?;
    let integrity = loaded.accept(&path.display().to_string(), salvage)?;
    let warnings = loaded.warnings();
    let trace = loaded.trace;
    trace
        .validate()
        .with_context(|| format!("trace {} is invalid", path.display()))?;
    if trace.streams.is_empty() {
        bail!("trace {} has no streams", path.display());
    }
    // The streams the ranks of a node replay (all of them when k exceeds them: copies).
    let stats = Stats::of_streams(&trace.streams[..trace.streams.len().min(k as usize)]);
    let info = TraceInfo {
        path: path.display().to_string(),
        label: label.map(str::to_string).unwrap_or_else(|| {
            path.file_stem()
                .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned())
        }),
        host: trace.header.host.clone(),
        kernel: trace.header.kernel_release.clone(),
        streams: trace.streams.len(),
        noise_ratio: stats.noise_ratio,
        detours_per_s: stats.detours_per_s,
        nodes: Vec::new(),
        integrity: (!integrity.is_whole()).then_some(integrity),
        digest: Some(jitter_trace::digest::content_digest(&trace)),
    };
    Ok(LoadedTrace {
        warnings,
        trace,
        stream: 0,
        timeline: 0,
        file: path.display().to_string(),
        info,
    })
}

fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

fn host_name() -> String {
    mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into())
}

/// Runs `replay-bench run` on this rank (every rank calls it; only rank 0 prints and writes).
pub fn main(args: RunArgs) -> anyhow::Result<()> {
    let universe = mpi::initialize().context("MPI is not available or already initialised")?;
    let comm = Mpi::new(universe.world());
    let result = run(&comm, &args);
    let rank = comm.rank();
    let agreed = result
        .as_ref()
        .err()
        .is_some_and(|e| e.downcast_ref::<crate::comm::Agreed>().is_some());
    if agreed {
        // Every rank holds this error at the same point. The launcher kills the job when the
        // first rank exits non-zero, so rank 0 speaks first and the others leave after it.
        if let Err(e) = &result {
            if rank == 0 {
                eprintln!("error: {}", crate::error_line(e));
            }
        }
        comm.barrier();
        if rank != 0 {
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    // Every rank reaches this point (errors were agreed on), so finalising cannot hang.
    drop(comm);
    drop(universe);
    match result {
        Err(_) if agreed || rank != 0 => Err(crate::OtherRankFailed.into()),
        r => r,
    }
}

/// Everything a rank measured about itself before the run.
#[derive(Debug, Clone)]
struct RankSetup {
    clock: Clock,
    cost: EmulatorCost,
    noise: PlatformNoise,
    rate: WorkRate,
}

/// What every rank holds once the inputs are checked and agreed and the rank is calibrated
/// (steps 1–3 of a run).
struct Prepared {
    trace: Option<LoadedTrace>,
    setup: RankSetup,
    /// S, f and this host's injection cost, as the plan was built with.
    replay: ReplaySetup,
    /// LCG iterations of one phase (agreed: the slowest rank's).
    iterations: u64,
    /// ns per LCG iteration of the slowest rank.
    ns_per_iteration: f64,
    seed: u64,
    schedule: SyncSchedule,
    plan: Option<Arc<Plan>>,
    design: Design,
}

/// What the phase loops measured (steps 4–5b).
struct Measured {
    reference: Reference,
    measured_baseline: Option<LoopOutcome>,
    outcome: LoopOutcome,
    totals: ReplayTotals,
    /// This rank's measured stretches of jitter.
    windows: Vec<crate::windows::RankWindow>,
    /// The largest excess the trace can add to one phase and the window it was taken over
    /// (scaled ns, max over ranks).
    bound: [f64; 2],
}

/// What rank 0 gathered from all ranks (step 6).
struct Gathered {
    calibration: Vec<RankCost>,
    emulator: EmulatorTotals,
    platform_noise_max_ns: f64,
    windows: Option<ReplayedWindows>,
}

fn run(comm: &Mpi, args: &RunArgs) -> anyhow::Result<()> {
    let prepared = prepare(comm, args)?;
    let measured = measure(comm, args, &prepared)?;
    let Some(gathered) = gather(comm, args, &prepared, &measured)? else {
        return Ok(());
    };
    let (report, base) = build_report(comm, args, &prepared, &measured, gathered)?;
    table::print_run(&report, base.as_ref(), &measured.outcome);
    if let Some(p) = &args.output {
        report.save(p)?;
    }
    if let Some(p) = &args.phases_csv {
        write_csv(p, &measured.outcome)?;
    }
    Ok(())
}

/// Steps 1–3: inputs checked on every rank and agreed before anything else is collective; the
/// rank's counter, emulator cost, platform noise and work rate; the shared seed; the plan of
/// this rank's stream.
fn prepare(comm: &Mpi, args: &RunArgs) -> anyhow::Result<Prepared> {
    let rank = comm.rank();
    let k = args.ranks_per_node;
    let salvage = args.salvage.choice();
    let local = comm.ranks_on_this_host();
    let checked = (|| -> anyhow::Result<Option<LoadedTrace>> {
        if rank == 0 {
            check_outputs(args)?;
        }
        let cpus = online_cpus();
        if local > cpus && !args.allow_oversubscribe {
            bail!(
                "{local} ranks on host {} with {cpus} online CPUs: ranks would share cores and \
                 their timings would measure the scheduler, not the jitter \
                 (--allow-oversubscribe to run anyway)",
                host_name()
            );
        }
        design_of(args)?;
        check_length(args)?;
        if let Baseline::File(p) = &args.baseline {
            baseline::from_report(p, comm.size() as u64, args.quanta)?;
        }
        match (&args.trace, args.nodes.node_traces.as_slice()) {
            (Some(path), _) => {
                let one = std::slice::from_ref(path);
                load_rank_trace(one, false, args.label.as_deref(), rank, (k, salvage)).map(Some)
            }
            (None, []) => {
                if args.sync != SyncMode::None {
                    bail!("--sync {} needs a --trace", args.sync);
                }
                Ok(None)
            }
            (None, set) => {
                load_rank_trace(set, true, args.label.as_deref(), rank, (k, salvage)).map(Some)
            }
        }
    })();
    let trace = agree(comm, checked)?;
    let clock = agree(
        comm,
        Clock::for_tools().context("cannot calibrate the cycle counter"),
    )?;
    // S, f and the timer as given; the cost is this host's calibration (with the overrides).
    let given = args
        .replay
        .setup_over(&ReplaySetup::ideal(TimerKind::Abstime));
    let cost = match &trace {
        None => EmulatorCost::default(),
        Some(_) => host_cost(comm, args, &clock, given.cost.timer)?,
    };
    let replay = ReplaySetup {
        cost: cost.cost,
        ..given
    };
    // All ranks probe at once, as they will run; then the work rate of each core.
    comm.barrier();
    let setup = RankSetup {
        clock,
        cost,
        noise: noise::measure(&clock, args.noise_probe),
        rate: WorkRate::measure(&clock, 200_000, WORK_CALIBRATION_SPAN_NS),
    };
    // Iteration count: the slowest rank's cost per iteration (MPI max), so that without jitter
    // MaxQT ≈ q on the slowest core and `--baseline quanta` stays meaningful on a mixed machine.
    let mut per_iter = [setup.rate.ns_per_iteration];
    comm.all_max(&mut per_iter);
    let agreed = WorkRate {
        ns_per_iteration: per_iter[0],
    };
    let iterations = agreed.iterations_for(args.quanta as f64 * replay.scale.get());
    let mut seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    comm.broadcast_u64(&mut seed);
    let schedule = SyncSchedule {
        mode: args.sync,
        seed,
    };
    // The plan of this rank's stream (may fail: e.g. every detour shorter than O).
    let plan = agree(
        comm,
        trace.as_ref().map_or(Ok(None), |t| {
            let index = t.stream;
            Plan::from_trace(&t.trace, index, replay.plan_options())
                .map(Some)
                .with_context(|| format!("cannot replay stream {index} of trace {}", t.file))
        }),
    )?;
    Ok(Prepared {
        trace,
        setup,
        replay,
        iterations,
        ns_per_iteration: agreed.ns_per_iteration,
        seed,
        schedule,
        plan,
        design: design_of(args)?,
    })
}

/// The files rank 0 writes at the end, checked (by `jitter_trace::output`'s rules) before
/// anything is measured: a run never ends in an output it cannot save.
fn check_outputs(args: &RunArgs) -> anyhow::Result<()> {
    use jitter_trace::output::check_output;
    if let Some(p) = &args.output {
        check_output(p, "-o", "a JSON report", &["json"])?;
    }
    if let Some(p) = &args.phases_csv {
        check_output(p, "--phases-csv", "a CSV table", &["csv"])?;
    }
    Ok(())
}

/// This host's emulator cost for `timer`: one rank per host reads the calibration (file or
/// per-host cache, measured when missing) and its host's ranks share it.
fn host_cost(
    comm: &Mpi,
    args: &RunArgs,
    clock: &Clock,
    timer: TimerKind,
) -> anyhow::Result<EmulatorCost> {
    let bytes = comm.from_host_root(|| {
        let r = args
            .calibration
            .load(clock)
            .map_err(|e| crate::error_line(&e));
        serde_json::to_vec(&r).unwrap_or_default()
    });
    let shared: anyhow::Result<EmulatorCost> =
        match serde_json::from_slice::<Result<jitter_emulator::Calibration, String>>(&bytes) {
            Ok(Ok(c)) => Ok(EmulatorCost::from_calibration(
                &c,
                timer,
                &args.replay.overrides.into(),
            )),
            Ok(Err(e)) => Err(anyhow::anyhow!(e)),
            Err(e) => Err(anyhow::anyhow!("calibration lost between ranks: {e}")),
        };
    agree(comm, shared)
}

/// Steps 4–5b: the baseline without jitter (sequential design), the run (with the emulator
/// when there is a trace), and the most the trace can slow one phase down.
fn measure(comm: &Mpi, args: &RunArgs, p: &Prepared) -> anyhow::Result<Measured> {
    let rank = comm.rank();
    let scale = p.replay.scale.get();
    let paired = p.design == Design::Paired;
    let blocks = paired.then_some(Blocks {
        phases: args.block_phases,
        seed: p.seed,
    });
    let spec =
        |until: Until, keep: bool, fraction: Option<Fraction>, blocks: Option<Blocks>| LoopSpec {
            iterations: p.iterations,
            warmup_phases: args.warmup,
            until,
            fraction,
            scale,
            keep_samples: keep,
            virtual_ranks: args.virtual_ranks,
            blocks,
        };
    // The paired design gives its baseline blocks as much as its jitter blocks: `--phases N`
    // and `--period T` are the jitter's share, as the sequential design's run is.
    let share = if paired { 2 } else { 1 };
    let max_ns = (args.max_time.unwrap_or(DEFAULT_MAX_TIME_NS) as f64 * scale).round() as u64;
    let until = |period_ns: u64| match (args.phases, args.precision) {
        (Some(n), _) => Until::Phases(n.saturating_mul(share)),
        (None, Some(hw)) => Until::Precision {
            half_width_pct: hw,
            max_ns,
        },
        (None, None) if args.until_verdict && paired => Until::Verdict { max_ns },
        (None, None) => Until::Elapsed((period_ns as f64 * scale).round() as u64 * share),
    };
    let clock = &p.setup.clock;

    // 4. Baseline without jitter.
    let reference = match &args.baseline {
        Baseline::Quanta => Some(Reference {
            avg_max_qt_ns: args.quanta as f64,
            avg_max_qtbt_ns: args.quanta as f64,
        }),
        Baseline::File(f) => Some(baseline::from_report(f, comm.size() as u64, args.quanta)?),
        Baseline::Measured => None,
    };
    let measured_baseline = if reference.is_none() && !paired {
        let period = args.baseline_period.unwrap_or(args.period);
        Some(run_phases(
            comm,
            clock,
            &spec(until(period), false, None, None),
            &mut NoJitter,
        ))
    } else {
        None
    };
    let reference = reference.unwrap_or_else(|| {
        let b = measured_baseline
            .as_ref()
            .map(|o| o.averages)
            .unwrap_or_default();
        Reference {
            avg_max_qt_ns: b.avg_max_qt_ns(),
            avg_max_qtbt_ns: b.avg_max_qtbt_ns(),
        }
    });

    // 5. The run, with the emulator when there is a trace.
    let keep = args.phases_csv.is_some() && rank == 0;
    let mut windows = Vec::new();
    let (outcome, totals) = match &p.plan {
        None => (
            run_phases(
                comm,
                clock,
                &spec(until(args.period), keep, None, blocks),
                &mut NoJitter,
            ),
            ReplayTotals::default(),
        ),
        Some(plan) => {
            let spec = spec(until(args.period), keep, Some(p.replay.fraction), blocks);
            comm.barrier();
            if args.virtual_ranks > 1 {
                // Every virtual rank is its own node: its own offset under --sync none.
                let first = rank as u64 * args.virtual_ranks;
                let started =
                    VirtualReplay::start(plan, first, args.virtual_ranks, p.schedule, clock);
                let mut replay = agree(comm, started)?;
                let out = run_phases(comm, clock, &spec, &mut replay);
                let totals = agree(comm, replay.stop())?;
                (out, totals)
            } else {
                let node = p.trace.as_ref().map_or(0, |t| t.timeline);
                let started = Replay::start(plan, node, p.schedule, clock);
                let mut replay = agree(comm, started)?;
                let out = run_phases(comm, clock, &spec, &mut replay);
                let marks = replay.windows().to_vec();
                let end_ns = jitter_emulator::injector::mono_ns();
                let totals = agree(comm, replay.stop())?;
                windows = crate::windows::with_injections(
                    &marks,
                    (totals.injected, totals.injected_ns),
                    end_ns,
                );
                (out, totals)
            }
        }
    };

    // 5b. The most the trace can slow one phase down: each rank's worst window of its plan,
    // the largest over ranks; a measured slowdown far above it is the platform's, not the
    // trace's (checked on rank 0 below).
    // The window is the longer of the reference phase and the measured one (rank 0 holds the
    // averages), scaled: a phase exposed longer can meet more detours.
    let mut bound = [0.0, 0.0];
    if let Some(plan) = &p.plan {
        let reference_ns = slowdowns(&outcome, measured_baseline.as_ref(), reference)
            .0
            .avg_max_qtbt_ns;
        let mut window = [reference_ns.max(outcome.averages.avg_max_qtbt_ns()) * scale];
        comm.all_max(&mut window);
        bound = [
            max_excess_ns(plan, window[0]).map_or(f64::INFINITY, |x| x as f64),
            window[0],
        ];
        comm.all_max(&mut bound);
    }
    Ok(Measured {
        reference,
        measured_baseline,
        outcome,
        totals,
        windows,
        bound,
    })
}

/// Step 6: gathers calibrations and sums emulator totals on rank 0 (`None` on other ranks).
fn gather(
    comm: &Mpi,
    args: &RunArgs,
    p: &Prepared,
    m: &Measured,
) -> anyhow::Result<Option<Gathered>> {
    let setup = &p.setup;
    let cal = RankCost {
        rank: comm.rank() as i64,
        host: host_name(),
        overhead_ns: setup.cost.cost.overhead_ns,
        overhead_sd_ns: setup.cost.overhead_sd_ns,
        lateness_ns: setup.cost.cost.lateness_ns,
        lateness_sd_ns: setup.cost.lateness_sd_ns,
        min_sleep_ns: setup.cost.cost.min_sleep_ns,
        tsc_khz: setup.clock.khz(),
        platform_noise_ratio: setup.noise.noise_ratio,
        overhead_by_gap: setup.cost.cost.overhead_by_gap.points().to_vec(),
    };
    let cal_json = serde_json::to_vec(&cal)?;
    let cals = comm.gather_records(&record(&cal_json));
    let mut sums = m.totals.to_sums();
    comm.sum_to_root(&mut sums);
    let mut maxes = [m.totals.progress, setup.noise.max_ns as f64];
    comm.all_max(&mut maxes);
    // The windows whose phases were measured (rank 0 holds the outcome): one per complete
    // pair's jitter block, or one for the sequential design's measured phases.
    let (kept, per_window) = match &m.outcome.paired {
        Some(pr) => (pr.pairs.len(), args.block_phases),
        None => (
            usize::from(m.outcome.averages.phases > 0),
            m.outcome.averages.phases,
        ),
    };
    let windows = if p.plan.is_some() && args.virtual_ranks == 1 {
        crate::windows::gather(comm, &m.windows, kept, per_window)
    } else {
        None
    };
    if comm.rank() != 0 {
        return Ok(None);
    }
    let calibration: Vec<RankCost> = cals
        .iter()
        .map(|c| serde_json::from_slice(c))
        .collect::<Result<_, _>>()
        .context("a rank sent an unreadable calibration")?;
    Ok(Some(Gathered {
        calibration,
        emulator: ReplayTotals::from_sums(&sums, maxes[0]).to_report(),
        platform_noise_max_ns: maxes[1],
        windows,
    }))
}
/// The configuration of a run with what it measured beside its results, and the baseline's
/// averages (its own run, sequential, or its blocks, paired).
fn run_config(
    args: &RunArgs,
    p: &Prepared,
    m: &Measured,
    g: &Gathered,
) -> (Config, Option<PhaseAverages>) {
    let outcome = &m.outcome;
    let base = match (&outcome.paired, &m.measured_baseline) {
        (Some(pr), _) => Some((
            pr.baseline,
            pr.baseline_sd_max_qt_ns,
            pr.baseline_sd_max_qtbt_ns,
        )),
        (None, Some(b)) => Some((b.averages, b.sd_max_qt_ns, b.sd_max_qtbt_ns)),
        (None, None) => None,
    };
    let details = RunDetails {
        iterations: p.iterations,
        ns_per_iteration: p.ns_per_iteration,
        elapsed_ns: outcome.elapsed_ns,
        stopped_by: outcome.stopped_by.to_string(),
        noise_probe_ns: args.noise_probe,
        platform_noise_max_ns: g.platform_noise_max_ns,
        checksum: outcome.checksum,
        mpi_library: mpi::environment::library_version()
            .map(|v| v.lines().next().unwrap_or("").trim().to_string())
            .unwrap_or_default(),
        sd_max_qt_ns: outcome.sd_max_qt_ns,
        sd_max_qtbt_ns: outcome.sd_max_qtbt_ns,
        design: p.design.to_string(),
        baseline: base.map(|(a, sd_qt, sd_qtbt)| BaselineDetails {
            phases: a.phases,
            sd_max_qt_ns: sd_qt,
            sd_max_qtbt_ns: sd_qtbt,
            lost_rel: a.lost_rel(),
        }),
        paired: outcome.paired.as_ref().map(|pr| PairedDetails {
            block_phases: args.block_phases,
            pairs: pr.pairs.len() as u64,
            precision_target_pct: args.precision,
            max_time_ns: (args.precision.is_some() || args.until_verdict)
                .then(|| args.max_time.unwrap_or(DEFAULT_MAX_TIME_NS)),
            until_verdict: args.until_verdict,
            precision_reached_pct: pr.half_width_pct(),
            blocks: pr.pairs.clone(),
        }),
        virtual_ranks_per_process: (args.virtual_ranks > 1).then_some(args.virtual_ranks),
        trace_bound: (p.plan.is_some() && m.bound[0].is_finite()).then_some(TraceBound {
            excess_ns: m.bound[0],
            window_ns: m.bound[1],
        }),
        windows: g.windows.clone(),
    };
    let config = Config {
        trace: p.trace.as_ref().map(|t| t.info.clone()),
        ranks_per_node: args.ranks_per_node as usize,
        quanta_ns: args.quanta,
        period_ns: if args.phases.is_some() {
            0
        } else {
            args.period
        },
        phases: args.phases.unwrap_or(0),
        warmup_phases: args.warmup,
        scale: p.replay.scale.get(),
        fraction: p.replay.fraction.get(),
        timer: p.replay.cost.timer,
        seed: p.seed,
        baseline: args.baseline.to_string(),
        platform: "mpi".into(),
        run: Some(details),
        predict: None,
    };
    (config, base.map(|b| b.0))
}

/// Rank 0: the report of the run (configuration, calibrations, warnings, the result row) and
/// the baseline's averages; an error when the slowdown fails its plausibility check.
fn build_report(
    comm: &Mpi,
    args: &RunArgs,
    p: &Prepared,
    m: &Measured,
    g: Gathered,
) -> anyhow::Result<(Report, Option<PhaseAverages>)> {
    let (trace, outcome, measured_baseline) = (&p.trace, &m.outcome, &m.measured_baseline);
    let emulator = g.emulator;
    let (config, base) = run_config(args, p, m, &g);
    let virtual_ranks = args.virtual_ranks > 1;
    let kind = if virtual_ranks {
        ReportKind::VirtualRanks
    } else {
        ReportKind::Run
    };
    let mut report = Report::new(kind, config);
    if virtual_ranks {
        report.warnings.push(format!(
            "{} barrier-free virtual ranks per process: qt only (MaxQTBT is MaxQT)",
            args.virtual_ranks
        ));
    }
    report.calibration = g.calibration;
    if let Some(t) = &trace {
        report.warnings.extend(t.warnings.iter().cloned());
        report.warnings.extend(jitter_emulator::placement::note(
            args.ranks_per_node,
            t.info.streams as u64,
        ));
        for c in &report.calibration {
            // Each rank against the trace it replays (its node group's of a set).
            let replayed = match t.info.nodes.as_slice() {
                [] => t.info.noise_ratio,
                nodes => Placement::new(
                    args.ranks_per_node,
                    nodes.len() * args.ranks_per_node as usize,
                )
                .map_or(t.info.noise_ratio, |p| {
                    nodes[p.trace(c.rank.max(0) as u64)].noise_ratio
                }),
            };
            if let Some(w) = noise::warning(c.rank as usize, c.platform_noise_ratio, replayed) {
                report.warnings.push(w);
            }
        }
        if emulator.dropped > 0 {
            report.warnings.push(format!(
                "{} detour(s) ({} ns scaled) shorter than the overhead O were not injected",
                emulator.dropped, emulator.dropped_ns
            ));
        }
        if emulator.merged > 0 {
            report.warnings.push(format!(
                "{} detour(s) followed a sleep shorter than M and were merged into their predecessor",
                emulator.merged
            ));
        }
    }
    if outcome.averages.phases < 10 {
        report.warnings.push(format!(
            "only {} measured phases: the averages are not reliable",
            outcome.averages.phases
        ));
    }
    let (reference, slowdowns) = slowdowns(outcome, measured_baseline.as_ref(), m.reference);
    if let Some(w) = faster_than_calibrated(args, &reference) {
        report.warnings.push(w);
    }
    if let Some(p) = &outcome.paired {
        if p.pairs.len() < 2 {
            report.warnings.push(format!(
                "only {} complete block pair(s): no confidence interval (lengthen --period or \
                 shorten --block-phases)",
                p.pairs.len()
            ));
        }
        if outcome.stopped_by == crate::bench::StopReason::MaxTime {
            report.warnings.push(match args.precision {
                Some(hw) => format!(
                    "--max-time ran out before the precision {hw} pp: reached ± {:.3} pp",
                    p.half_width_pct()
                ),
                None => format!(
                    "--max-time ran out before the intervals were narrower than half their \
                     slowdowns (reached ± {:.3} pp): a comparison with a prediction may get no \
                     verdict; a longer --max-time, or a machine with less noise of its own, \
                     narrows them",
                    p.half_width_pct()
                ),
            });
        }
    }
    report.results.push(result_row(
        trace.as_ref().map_or("", |t| t.info.label.as_str()),
        comm.size() as u64 * args.virtual_ranks,
        if trace.is_some() {
            args.sync.to_string()
        } else {
            "baseline".into()
        },
        outcome,
        reference,
        slowdowns,
        emulator,
    ));
    if let Some(why) = report.implausible() {
        bail!(
            "implausible result: {why}; nothing printed or saved — re-run on a quiet machine or \
             on isolated CPUs"
        );
    }
    Ok((report, base))
}

/// A warning when the measured no-jitter phases lasted under 0.9 q: the cores ran faster than
/// when the work loop was timed (a vCPU whose speed changed), so times are not q-based, while
/// the slowdowns, which compare like with like, stand.
fn faster_than_calibrated(args: &RunArgs, reference: &Reference) -> Option<String> {
    let ratio = reference.avg_max_qt_ns / args.quanta as f64;
    (matches!(args.baseline, Baseline::Measured) && ratio < 0.9).then(|| {
        format!(
            "no-jitter phases lasted {ratio:.2} × q: the cores ran faster than when the work loop \
             was timed (a vCPU whose speed changed); times are not in units of q, slowdowns stand"
        )
    })
}

/// The reference and the slowdowns (eq. 2, eq. 3) with their intervals: from the block pairs
/// (paired), or from the two runs' per-phase spreads (sequential).
fn slowdowns(
    out: &LoopOutcome,
    measured: Option<&LoopOutcome>,
    reference: Reference,
) -> (Reference, [Slowdown; 2]) {
    if let Some(p) = &out.paired {
        let reference = Reference {
            avg_max_qt_ns: p.baseline.avg_max_qt_ns(),
            avg_max_qtbt_ns: p.baseline.avg_max_qtbt_ns(),
        };
        return (
            reference,
            [
                paired_slowdown(&p.qtbt_pairs()),
                paired_slowdown(&p.qt_pairs()),
            ],
        );
    }
    let a = &out.averages;
    let (bn, b_qt, b_qtbt) = measured.map_or((0, 0.0, 0.0), |b| {
        (b.averages.phases, b.sd_max_qt_ns, b.sd_max_qtbt_ns)
    });
    (
        reference,
        [
            sequential_slowdown(
                (a.avg_max_qtbt_ns(), out.sd_max_qtbt_ns, a.phases),
                (reference.avg_max_qtbt_ns, b_qtbt, bn),
            ),
            sequential_slowdown(
                (a.avg_max_qt_ns(), out.sd_max_qt_ns, a.phases),
                (reference.avg_max_qt_ns, b_qt, bn),
            ),
        ],
    )
}

/// The largest excess (scaled ns) a phase of `phase_ns` (scaled) can take from `plan`'s
/// injections over one lap; `None` when the lap has too many injections to index (over 4 M) or
/// the injections leave no useful bound.
fn max_excess_ns(plan: &std::sync::Arc<Plan>, phase_ns: f64) -> Option<u64> {
    let opts = plan.options();
    let lap = (plan.period_ns() as f64 * opts.fraction * opts.scale).round() as u64;
    let mut spans = Vec::new();
    for inj in plan.cursor(0) {
        if inj.due_ns >= lap {
            break;
        }
        if spans.len() >= 4 << 20 {
            return None;
        }
        spans.push((inj.due_ns, inj.span_ns));
    }
    crate::metrics::InjectionWindows::new(&spans, lap).max_excess_ns(phase_ns.round() as u64)
}

/// A finite half-width, or `None` (it is not written then).
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

#[allow(clippy::too_many_arguments)]
fn result_row(
    label: &str,
    ranks: u64,
    sync: String,
    out: &LoopOutcome,
    reference: Reference,
    sd: [Slowdown; 2],
    emulator: EmulatorTotals,
) -> ResultRow {
    let a = &out.averages;
    ResultRow {
        trace: label.to_string(),
        ranks,
        sync,
        phases: a.phases,
        avg_max_qt_ns: a.avg_max_qt_ns(),
        avg_max_qtbt_ns: a.avg_max_qtbt_ns(),
        baseline_avg_max_qt_ns: reference.avg_max_qt_ns,
        baseline_avg_max_qtbt_ns: reference.avg_max_qtbt_ns,
        sd_qtbt_pct: sd[0].pct,
        sd_qt_pct: sd[1].pct,
        sd_qtbt_ci95_pct: finite(sd[0].ci95_pct),
        sd_qt_ci95_pct: finite(sd[1].ci95_pct),
        lost_rel: a.lost_rel(),
        emulator,
        period_ns: None,
        draws: None,
    }
}

fn write_csv(path: &std::path::Path, out: &LoopOutcome) -> anyhow::Result<()> {
    let shown = path.display().to_string();
    jitter_trace::output::write_output(path, |w| {
        out.write_phases_csv(w)
            .with_context(|| format!("cannot write {shown}"))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_flags_follow_the_one_rule_and_stop_at_a_day() {
        assert_eq!(positive_duration_flag("1ms"), Ok(1_000_000));
        assert!(positive_duration_flag("0ms").is_err());
        assert!(positive_duration_flag("-1ms").is_err());
        // A plain number is seconds, as everywhere (`jitter_trace::units`).
        assert_eq!(positive_duration_flag("1"), Ok(1_000_000_000));
        assert!(positive_duration_flag("2d").is_err());
        assert_eq!(duration_flag("0s"), Ok(0));
        assert_eq!(duration_flag("0"), Ok(0));
        assert!(duration_flag("2d").is_err());
    }

    #[test]
    fn a_phase_count_that_would_run_beyond_a_day_is_refused() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cmd {
            #[command(flatten)]
            run: RunArgs,
        }
        let args = |extra: &[&str]| {
            let argv = ["run"].iter().chain(extra).copied();
            Cmd::try_parse_from(argv).unwrap().run
        };
        check_length(&args(&["--phases", "86000000"])).unwrap();
        let e = check_length(&args(&["--phases", "86400000"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "20 warm-up and 86400000 measured phases of q = 1.00 ms at S = 1 last at least \
             86400.020 s, over the limit of 1d: fewer phases or a shorter --quanta"
        );
        // The scale counts: 1 000 000 phases of 1 ms at S = 100 last 27.8 h.
        assert!(check_length(&args(&["--phases", "1000000", "--scale", "100"])).is_err());
        assert!(check_length(&args(&["--phases", "1000000"])).is_ok());
    }

    #[test]
    fn phases_under_0_9_q_without_jitter_are_reported() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cmd {
            #[command(flatten)]
            run: RunArgs,
        }
        let args = |extra: &[&str]| {
            let argv = ["run", "--quanta", "1ms"].iter().chain(extra).copied();
            Cmd::try_parse_from(argv).unwrap().run
        };
        let at = |q: f64| Reference {
            avg_max_qt_ns: q * 1e6,
            avg_max_qtbt_ns: q * 1e6,
        };
        let w = faster_than_calibrated(&args(&[]), &at(0.26)).unwrap();
        assert!(w.contains("0.26 × q"), "{w}");
        assert_eq!(faster_than_calibrated(&args(&[]), &at(0.95)), None);
        assert_eq!(faster_than_calibrated(&args(&[]), &at(1.3)), None);
        // `--baseline quanta` is q by definition: nothing measured to judge.
        let given = args(&["--baseline", "quanta"]);
        assert_eq!(faster_than_calibrated(&given, &at(0.26)), None);
    }

    #[test]
    fn the_replay_flags_are_typed_by_the_parser() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cmd {
            #[command(flatten)]
            run: RunArgs,
        }
        let c = Cmd::try_parse_from([
            "run",
            "--sync",
            "every:4",
            "--scale",
            "1000",
            "--fraction",
            "0.33",
            "--timer",
            "itimer",
            "--min-sleep",
            "50us",
        ])
        .unwrap();
        assert_eq!(c.run.sync, SyncMode::Every(4));
        let r = c.run.replay;
        assert_eq!(r.scale.map(|s| s.get()), Some(1000.0));
        assert_eq!(r.fraction.map(|f| f.get()), Some(0.33));
        assert_eq!(r.timer, Some(TimerKind::Itimer));
        assert_eq!(r.overrides.min_sleep, Some(50_000));
        for bad in [
            ["--sync", "sometimes"],
            ["--scale", "0"],
            ["--scale", "nan"],
            ["--scale", "1e300"],
            ["--scale", "1001"],
            ["--fraction", "1.5"],
            ["--fraction", "0"],
            ["--timer", "hpet"],
            ["--overhead", "11s"],
        ] {
            let argv = std::iter::once("run").chain(bad);
            assert!(Cmd::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }
}
