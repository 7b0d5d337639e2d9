//! `replay-bench run`: calibrate, measure the platform, then the Parallel Benchmark with one
//! in-process JitterEmulator per rank — baseline and jitter in paired, interleaved blocks
//! (default) or one after the other (`--design sequential`) — and report every slowdown with
//! its 95 % confidence interval.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use jitter_collect::clock::Clock;
use jitter_emulator::{Plan, SyncMode, SyncSchedule, TimerKind};
use jitter_trace::stats::Stats;
use jitter_trace::Trace;

use crate::baseline::{self, Baseline, Reference};
use crate::bench::{run_phases, Blocks, LoopOutcome, LoopSpec, NoJitter, Until};
use crate::comm::{agree, record, Collective, Mpi};
use crate::kernel::WorkRate;
use crate::metrics::{paired_slowdown, sequential_slowdown, Slowdown};
use crate::noise::{self, PlatformNoise};
use crate::replay::{self, EmulatorCost, Replay, ReplayTotals, VirtualReplay};
use crate::report::{
    Calibration, Config, EmulatorTotals, Report, ReportKind, ResultRow, TraceInfo,
};
use crate::table;

/// Options of `replay-bench run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Jitter trace (.jtr) to replay; without it the benchmark runs without jitter.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Label of the trace in tables and plots (default: the file stem).
    #[arg(long)]
    pub label: Option<String>,
    /// Ranks per emulated node k: rank r replays stream r mod k, node r / k shares one offset.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub ranks_per_node: u64,
    /// Work quanta q of one compute phase.
    #[arg(long, default_value = "1ms", value_parser = parse_positive_duration)]
    pub quanta: u64,
    /// Benchmark period: measured phases run until this much time elapsed (unscaled).
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub period: u64,
    /// Run exactly this many measured phases instead of a period.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub phases: Option<u64>,
    /// Warm-up phases, run first and excluded from the averages.
    #[arg(long, default_value_t = 20)]
    pub warmup: u64,
    /// Synchronisation of the replays: none, once, phase or every:K.
    #[arg(long, default_value = "none", value_parser = parse_sync)]
    pub sync: SyncMode,
    /// Scale factor S: quanta, period and trace times × S, reported times ÷ S.
    #[arg(long, default_value_t = 1.0, value_parser = parse_scale)]
    pub scale: f64,
    /// Stop as soon as any rank replayed this fraction of its stream (pitfall 3; paper: 1/3).
    #[arg(long, default_value_t = 1.0, value_parser = parse_fraction)]
    pub fraction: f64,
    /// Injector timer: itimer (setitimer, relative) or abstime (timer_create, absolute).
    #[arg(long, default_value = "abstime", value_parser = parse_timer)]
    pub timer: TimerKind,
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
    /// Time budget of `--precision` (unscaled; default 10min): stops and reports the precision
    /// reached.
    #[arg(long, value_parser = parse_positive_duration)]
    pub max_time: Option<u64>,
    /// No-jitter reference of the sequential design: `measured` (run it first), `quanta`
    /// (q itself) or a report file.
    #[arg(long, default_value = "measured", value_name = "measured|quanta|FILE")]
    pub baseline: Baseline,
    /// Period of the measured baseline of the sequential design (default: the period).
    #[arg(long, value_parser = parse_positive_duration)]
    pub baseline_period: Option<u64>,
    /// Probe the platform's own noise on every rank for this long before the run (0 skips).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub noise_probe: u64,
    /// Write the JSON report here (rank 0).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write per-phase MaxQT / MaxQTBT / mean qt (ns, unscaled) as CSV here (rank 0).
    #[arg(long, value_name = "FILE")]
    pub phases_csv: Option<PathBuf>,
    /// Emulator calibration file (default: the per-host cache, measured once when missing).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Measure the emulator calibration again (about 20 s per host) and refresh the cache.
    #[arg(long)]
    pub recalibrate: bool,
    /// Use this overhead O instead of the calibrated one (at every injection rate).
    #[arg(long, value_parser = parse_duration)]
    pub overhead: Option<u64>,
    /// Use this timer lateness L instead of the calibrated one.
    #[arg(long, value_parser = parse_duration)]
    pub lateness: Option<u64>,
    /// Use this minimum sleep M instead of the calibrated one.
    #[arg(long, value_parser = parse_duration)]
    pub min_sleep: Option<u64>,
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

/// The design a run uses, or why its options do not fit together.
fn design_of(args: &RunArgs) -> anyhow::Result<Design> {
    let default = if args.trace.is_some() && args.virtual_ranks == 1 {
        Design::Paired
    } else {
        Design::Sequential
    };
    let design = args.design.unwrap_or(default);
    if design == Design::Paired {
        if args.baseline != Baseline::Measured {
            bail!(
                "--baseline {} needs --design sequential: the paired design measures its                  baseline in blocks interleaved with the jitter",
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
    } else if args.precision.is_some() {
        bail!("--precision needs --design paired (the interval comes from block pairs)");
    }
    if args.max_time.is_some() && args.precision.is_none() {
        bail!("--max-time is the time budget of --precision: give both");
    }
    Ok(design)
}

/// Longest duration any option takes, ns (one day).
const MAX_DURATION_NS: f64 = 86_400e9;

fn parse_duration(s: &str) -> Result<u64, String> {
    let ns = jitter_trace::units::parse_duration_ns(s).map_err(|e| e.to_string())?;
    if ns > MAX_DURATION_NS {
        return Err(format!("`{s}` is longer than the limit of 1d"));
    }
    Ok(ns.round() as u64)
}

fn parse_positive_duration(s: &str) -> Result<u64, String> {
    match parse_duration(s)? {
        0 => Err(format!("`{s}` must be a duration > 0")),
        ns => Ok(ns),
    }
}

fn parse_sync(s: &str) -> Result<SyncMode, String> {
    s.parse()
        .map_err(|e: jitter_emulator::PlanError| e.to_string())
}

fn parse_timer(s: &str) -> Result<TimerKind, String> {
    s.parse()
        .map_err(|e: jitter_emulator::PlanError| e.to_string())
}

fn parse_scale(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    let top = jitter_emulator::plan::MAX_SCALE;
    if v.is_finite() && v > 0.0 && v <= top {
        Ok(v)
    } else {
        Err(format!(
            "scale must be a finite number in (0, {top}], got {s}"
        ))
    }
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("fraction must be in (0, 1], got {s}"))
    }
}

/// The trace, checked, with what the report says about it.
struct LoadedTrace {
    trace: Trace,
    info: TraceInfo,
    warnings: Vec<String>,
}

fn load_trace(path: &std::path::Path, label: Option<&str>, k: u64) -> anyhow::Result<LoadedTrace> {
    let loaded = jitter_trace::read_trace(path)
        .with_context(|| format!("cannot use trace {}", path.display()))?;
    let warnings = loaded.warnings();
    let trace = loaded.trace;
    trace
        .validate()
        .with_context(|| format!("trace {} is invalid", path.display()))?;
    if (trace.streams.len() as u64) < k {
        bail!(
            "trace {} has {} stream(s), fewer than --ranks-per-node {k}",
            path.display(),
            trace.streams.len()
        );
    }
    let stats = Stats::of_streams(&trace.streams[..k as usize]);
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
    };
    Ok(LoadedTrace {
        warnings,
        trace,
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

fn run(comm: &Mpi, args: &RunArgs) -> anyhow::Result<()> {
    let rank = comm.rank();
    let size = comm.size();
    let root = rank == 0;
    let scale = args.scale;
    let k = args.ranks_per_node;

    // 1. Inputs, checked on every rank; agreed before anything else is collective.
    let local = comm.ranks_on_this_host();
    let checked = (|| -> anyhow::Result<Option<LoadedTrace>> {
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
        if let Baseline::File(p) = &args.baseline {
            baseline::from_report(p, size as u64, args.quanta)?;
        }
        match &args.trace {
            None => {
                if args.sync != SyncMode::None {
                    bail!("--sync {} needs a --trace", args.sync);
                }
                Ok(None)
            }
            Some(path) => load_trace(path, args.label.as_deref(), k).map(Some),
        }
    })();
    let trace = agree(comm, checked)?;

    // 2. Per-rank calibration: counter, emulator cost, platform noise, work rate. The emulator
    // calibration is per host (one rank measures or reads the cache, its host's ranks share it).
    let clock = agree(
        comm,
        Clock::choose(None)
            .map(|(clock, _)| clock)
            .context("cannot calibrate the cycle counter"),
    )?;
    let cost = match &trace {
        None => EmulatorCost::default(),
        Some(_) => {
            let bytes = comm.from_host_root(|| {
                let r =
                    replay::load_calibration(&clock, args.calibration.as_deref(), args.recalibrate)
                        .map_err(|e| crate::error_line(&e));
                serde_json::to_vec(&r).unwrap_or_default()
            });
            let shared: anyhow::Result<EmulatorCost> = match serde_json::from_slice::<
                Result<jitter_emulator::Calibration, String>,
            >(&bytes)
            {
                Ok(Ok(c)) => {
                    let o = jitter_emulator::Overrides {
                        overhead_ns: args.overhead,
                        lateness_ns: args.lateness,
                        min_sleep_ns: args.min_sleep,
                    };
                    Ok(EmulatorCost::from_calibration(&c, args.timer, &o))
                }
                Ok(Err(e)) => Err(anyhow::anyhow!(e)),
                Err(e) => Err(anyhow::anyhow!("calibration lost between ranks: {e}")),
            };
            agree(comm, shared)?
        }
    };
    // All ranks probe at once, as they will run; then the work rate of each core.
    comm.barrier();
    let setup = RankSetup {
        clock,
        cost,
        noise: noise::measure(&clock, args.noise_probe),
        rate: WorkRate::measure(&clock, 200_000, 50),
    };

    // Iteration count: the slowest rank's cost per iteration (MPI max), so that without jitter
    // MaxQT ≈ q on the slowest core and `--baseline quanta` stays meaningful on a mixed machine.
    let mut per_iter = [setup.rate.ns_per_iteration];
    comm.all_max(&mut per_iter);
    let agreed = WorkRate {
        ns_per_iteration: per_iter[0],
    };
    let iterations = agreed.iterations_for(args.quanta as f64 * scale);

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

    // 3. The plan of this rank's stream (may fail: e.g. every detour shorter than O).
    let plan = agree(
        comm,
        trace.as_ref().map_or(Ok(None), |t| {
            let index = rank % k as usize;
            let opts = setup.cost.plan_options(scale, args.fraction, args.timer);
            Plan::from_trace(&t.trace, index, opts)
                .map(Some)
                .with_context(|| format!("cannot replay stream {index} of the trace"))
        }),
    )?;

    let design = design_of(args)?;
    let paired = design == Design::Paired;
    let blocks = paired.then_some(Blocks {
        phases: args.block_phases,
        seed,
    });
    let spec = |until: Until, keep: bool, fraction: f64, blocks: Option<Blocks>| LoopSpec {
        iterations,
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
    let until = |period_ns: u64| match (args.phases, args.precision) {
        (Some(n), _) => Until::Phases(n.saturating_mul(share)),
        (None, Some(hw)) => Until::Precision {
            half_width_pct: hw,
            max_ns: (args.max_time.unwrap_or(DEFAULT_MAX_TIME_NS) as f64 * scale).round() as u64,
        },
        (None, None) => Until::Elapsed((period_ns as f64 * scale).round() as u64 * share),
    };

    // 4. Baseline without jitter.
    let reference = match &args.baseline {
        Baseline::Quanta => Some(Reference {
            avg_max_qt_ns: args.quanta as f64,
            avg_max_qtbt_ns: args.quanta as f64,
        }),
        Baseline::File(p) => Some(baseline::from_report(p, size as u64, args.quanta)?),
        Baseline::Measured => None,
    };
    let measured_baseline = if reference.is_none() && !paired {
        let period = args.baseline_period.unwrap_or(args.period);
        Some(run_phases(
            comm,
            &setup.clock,
            &spec(until(period), false, 2.0, None),
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
    let keep = args.phases_csv.is_some() && root;
    let (outcome, totals) = match &plan {
        None => (
            run_phases(
                comm,
                &setup.clock,
                &spec(until(args.period), keep, 2.0, blocks),
                &mut NoJitter,
            ),
            ReplayTotals::default(),
        ),
        Some(plan) => {
            let spec = spec(until(args.period), keep, args.fraction, blocks);
            comm.barrier();
            if args.virtual_ranks > 1 {
                // Every virtual rank is its own node: its own offset under --sync none.
                let first = rank as u64 * args.virtual_ranks;
                let started =
                    VirtualReplay::start(plan, first, args.virtual_ranks, schedule, &setup.clock);
                let mut replay = agree(comm, started)?;
                let out = run_phases(comm, &setup.clock, &spec, &mut replay);
                let totals = agree(comm, replay.stop())?;
                (out, totals)
            } else {
                let node = rank as u64 / k;
                let started = Replay::start(plan, node, schedule, &setup.clock);
                let mut replay = agree(comm, started)?;
                let out = run_phases(comm, &setup.clock, &spec, &mut replay);
                let totals = agree(comm, replay.stop())?;
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
    if plan.is_some() {
        let reference_ns = slowdowns(&outcome, measured_baseline.as_ref(), reference)
            .0
            .avg_max_qtbt_ns;
        let mut window = [reference_ns.max(outcome.averages.avg_max_qtbt_ns()) * scale];
        comm.all_max(&mut window);
        bound = [
            plan.as_ref()
                .and_then(|p| max_excess_ns(p, window[0]))
                .map_or(f64::INFINITY, |x| x as f64),
            window[0],
        ];
        comm.all_max(&mut bound);
    }

    // 6. Gather calibrations, sum emulator totals, report on rank 0.
    let cal = Calibration {
        rank: rank as i64,
        host: host_name(),
        overhead_ns: setup.cost.overhead_ns,
        overhead_sd_ns: setup.cost.overhead_sd_ns,
        lateness_ns: setup.cost.lateness_ns,
        lateness_sd_ns: setup.cost.lateness_sd_ns,
        min_sleep_ns: setup.cost.min_sleep_ns,
        tsc_khz: setup.clock.khz(),
        platform_noise_ratio: setup.noise.noise_ratio,
        overhead_by_gap: setup.cost.overhead_by_gap.points().to_vec(),
    };
    let cal_json = serde_json::to_vec(&cal)?;
    let cals = comm.gather_records(&record(&cal_json));
    let mut sums = totals.to_sums();
    comm.sum_to_root(&mut sums);
    let mut maxes = [totals.progress, setup.noise.max_ns as f64];
    comm.all_max(&mut maxes);
    if !root {
        return Ok(());
    }
    let calibration: Vec<Calibration> = cals
        .iter()
        .map(|c| serde_json::from_slice(c))
        .collect::<Result<_, _>>()
        .context("a rank sent an unreadable calibration")?;
    let emulator = ReplayTotals::from_sums(&sums, maxes[0]).to_report();

    let mut config = Config {
        trace: trace.as_ref().map(|t| t.info.clone()),
        ranks_per_node: k as usize,
        quanta_ns: args.quanta,
        period_ns: if args.phases.is_some() {
            0
        } else {
            args.period
        },
        phases: args.phases.unwrap_or(0),
        warmup_phases: args.warmup,
        scale,
        fraction: args.fraction,
        timer: match args.timer {
            TimerKind::Itimer => "itimer".into(),
            TimerKind::Abstime => "abstime".into(),
        },
        seed,
        baseline: args.baseline.to_string(),
        model: "mpi".into(),
        platform: "mpi".into(),
        ..Config::default()
    };
    let extra = &mut config.extra;
    extra.insert("iterations".into(), iterations.to_string());
    extra.insert(
        "ns_per_iteration".into(),
        format!("{:.4}", agreed.ns_per_iteration),
    );
    extra.insert("elapsed_ns".into(), outcome.elapsed_ns.to_string());
    extra.insert("stopped_by".into(), outcome.stopped_by.to_string());
    extra.insert("sync".into(), args.sync.to_string());
    extra.insert("noise_probe_ns".into(), args.noise_probe.to_string());
    extra.insert("platform_noise_max_ns".into(), format!("{}", maxes[1]));
    extra.insert("checksum".into(), outcome.checksum.to_string());
    if let Ok(v) = mpi::environment::library_version() {
        extra.insert(
            "mpi_library".into(),
            v.lines().next().unwrap_or("").trim().to_string(),
        );
    }
    extra.insert(
        "sd_max_qt_ns".into(),
        format!("{:.1}", outcome.sd_max_qt_ns),
    );
    extra.insert(
        "sd_max_qtbt_ns".into(),
        format!("{:.1}", outcome.sd_max_qtbt_ns),
    );
    extra.insert("design".into(), design.to_string());
    // The baseline's phases, spread and loss: its own run (sequential) or its blocks (paired).
    let base = match (&outcome.paired, &measured_baseline) {
        (Some(p), _) => Some((
            p.baseline,
            p.baseline_sd_max_qt_ns,
            p.baseline_sd_max_qtbt_ns,
        )),
        (None, Some(b)) => Some((b.averages, b.sd_max_qt_ns, b.sd_max_qtbt_ns)),
        (None, None) => None,
    };
    if let Some((a, sd_qt, sd_qtbt)) = base {
        extra.insert("baseline_sd_max_qt_ns".into(), format!("{sd_qt:.1}"));
        extra.insert("baseline_sd_max_qtbt_ns".into(), format!("{sd_qtbt:.1}"));
        extra.insert("baseline_phases".into(), a.phases.to_string());
        extra.insert("baseline_lost_rel".into(), format!("{}", a.lost_rel()));
    }
    if let Some(p) = &outcome.paired {
        extra.insert("block_phases".into(), args.block_phases.to_string());
        extra.insert("pairs".into(), p.pairs.len().to_string());
        if let Some(hw) = args.precision {
            extra.insert("precision_target_pct".into(), format!("{hw}"));
            extra.insert(
                "max_time_ns".into(),
                args.max_time.unwrap_or(DEFAULT_MAX_TIME_NS).to_string(),
            );
        }
        extra.insert(
            "precision_reached_pct".into(),
            format!("{:.4}", p.half_width_pct()),
        );
    }

    let virtual_ranks = args.virtual_ranks > 1;
    if virtual_ranks {
        config.model = "virtual-ranks".into();
        config.extra.insert(
            "virtual_ranks_per_process".into(),
            args.virtual_ranks.to_string(),
        );
    }
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
    report.calibration = calibration;
    if let Some(t) = &trace {
        report.warnings.extend(t.warnings.iter().cloned());
        for c in &report.calibration {
            if let Some(w) =
                noise::warning(c.rank as usize, c.platform_noise_ratio, t.info.noise_ratio)
            {
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
    let (reference, slowdowns) = slowdowns(&outcome, measured_baseline.as_ref(), reference);
    if plan.is_some() {
        let noise = report
            .calibration
            .iter()
            .map(|c| c.platform_noise_ratio)
            .fold(0.0, f64::max);
        let refs = [reference.avg_max_qtbt_ns, reference.avg_max_qt_ns];
        for ((s, r), name) in slowdowns.iter().zip(refs).zip(["MaxQTBT", "MaxQT"]) {
            if let Some(why) = beyond_the_trace(name, *s, bound[0], r * scale, bound[1], noise) {
                bail!("{why}");
            }
        }
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
            report.warnings.push(format!(
                "--max-time ran out before the precision {} pp: reached ± {:.3} pp",
                args.precision.unwrap_or(f64::NAN),
                p.half_width_pct()
            ));
        }
    }
    report.results.push(result_row(
        trace.as_ref().map_or("", |t| t.info.label.as_str()),
        size as u64 * args.virtual_ranks,
        if trace.is_some() {
            args.sync.to_string()
        } else {
            "baseline".into()
        },
        &outcome,
        reference,
        slowdowns,
        emulator,
    ));

    let base_row = base.map(|b| b.0);
    table::print_run(&report, base_row.as_ref(), &outcome);
    if let Some(p) = &args.output {
        report.save(p)?;
    }
    if let Some(p) = &args.phases_csv {
        write_csv(p, &outcome)?;
    }
    Ok(())
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

/// Why slowdown `s` of metric `name` cannot come from the trace: even its optimistic end (the
/// 95 % interval's lower end) is above the most the trace's injections can add to a phase
/// (`excess_ns` to a phase of `window_ns`, over the reference `reference_ns`, all scaled) plus
/// the largest platform noise ratio any rank measured. `None` when it is plausible.
fn beyond_the_trace(
    name: &str,
    s: Slowdown,
    excess_ns: f64,
    reference_ns: f64,
    window_ns: f64,
    platform_noise: f64,
) -> Option<String> {
    if !excess_ns.is_finite() || reference_ns <= 0.0 {
        return None;
    }
    let most = 100.0 * excess_ns / reference_ns;
    let allowed = most + 100.0 * platform_noise;
    let low = if s.ci95_pct.is_finite() {
        s.pct - s.ci95_pct
    } else {
        s.pct
    };
    (low > allowed).then(|| {
        format!(
            "implausible result: SD({name}) = {:.1} % (95 % interval from {low:.1} %) is above \
             the most this trace can cause, {most:.2} % (its worst window of a {:.0} µs phase \
             holds {:.0} µs of injected detours), plus the platform noise the ranks measured, \
             {:.2} %: other work on these CPUs swamped the measurement; nothing printed or \
             saved — re-run on a quiet machine or on isolated CPUs",
            s.pct,
            window_ns / 1e3,
            excess_ns / 1e3,
            100.0 * platform_noise
        )
    })
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
    }
}

fn write_csv(path: &std::path::Path, out: &LoopOutcome) -> anyhow::Result<()> {
    let shown = path.display().to_string();
    jitter_trace::output::write_output(path, |w| -> anyhow::Result<()> {
        writeln!(w, "phase,max_qt_ns,max_qtbt_ns,mean_qt_ns,jitter")
            .with_context(|| format!("cannot write {shown}"))?;
        for (i, s) in out.samples.iter().enumerate() {
            // 1: a jitter phase; 0: a baseline block's phase of the paired design.
            let jitter = out
                .paired
                .as_ref()
                .and_then(|p| p.sample_jitter.get(i).copied())
                .unwrap_or(true);
            writeln!(
                w,
                "{i},{:.1},{:.1},{:.1},{}",
                s.max_qt_ns,
                s.max_qtbt_ns,
                s.mean_qt_ns,
                u8::from(jitter)
            )
            .with_context(|| format!("cannot write {shown}"))?;
        }
        Ok(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slowdown_is_checked_by_the_optimistic_end_of_its_interval() {
        let s = |pct, ci95_pct| Slowdown { pct, ci95_pct };
        // The trace adds at most 40 µs to a 1 ms phase: 4 %; platform noise 1 %: 5 % allowed.
        let check = |sd| beyond_the_trace("MaxQT", sd, 40_000.0, 1e6, 1.04e6, 0.01);
        assert!(check(s(4.9, f64::NAN)).is_none());
        assert!(check(s(8.0, 3.5)).is_none(), "interval reaches 4.5 %");
        let why = check(s(881.0, 100.0)).unwrap();
        assert!(why.contains("SD(MaxQT) = 881.0 %"), "{why}");
        assert!(
            why.contains("the most this trace can cause, 4.00 %"),
            "{why}"
        );
        assert!(why.contains("swamped the measurement"), "{why}");
        assert!(check(s(5.2, f64::NAN)).is_some());
        // No bound (a timeline full of injections): nothing is refused.
        assert!(beyond_the_trace("MaxQT", s(881.0, 1.0), f64::INFINITY, 1e6, 1e6, 0.0).is_none());
    }

    #[test]
    fn option_parsers_refuse_bad_values() {
        assert_eq!(parse_positive_duration("1ms"), Ok(1_000_000));
        assert!(parse_positive_duration("0ms").is_err());
        assert!(parse_positive_duration("-1ms").is_err());
        assert!(parse_positive_duration("1").is_err());
        assert_eq!(parse_duration("0s"), Ok(0));
        assert!(parse_sync("sometimes").is_err());
        assert_eq!(parse_sync("every:4"), Ok(SyncMode::Every(4)));
        assert!(parse_scale("0").is_err() && parse_scale("nan").is_err());
        assert!(parse_scale("1e300").is_err() && parse_scale("1001").is_err());
        assert_eq!(parse_scale("1000"), Ok(1000.0));
        assert_eq!(parse_duration("0"), Ok(0));
        assert!(parse_duration("2d").is_err());
        assert!(parse_fraction("1.5").is_err() && parse_fraction("0").is_err());
        assert_eq!(parse_fraction("0.33"), Ok(0.33));
        assert!(parse_timer("hpet").is_err());
    }
}
