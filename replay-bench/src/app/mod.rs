//! `replay-bench app`: hyperfine for MPI programs under noise. The unmodified program runs K
//! pairs of times, once with `libjitter_preload.so` replaying the trace and once without, in an
//! order drawn per pair from a seed, after W warm-up pairs; the slowdown of its main loop's time
//! (what `predict --app` predicts; or its wall time, or a number it prints: `--metric`) comes
//! with its paired 95 % interval, and no verdict is given where the interval is wider than the
//! effect (the report says how many pairs would do). The library's start-up and the whole
//! program's wall time are reported beside the loop's.
//! Every run has a time limit; a failed run is recorded and ends the study with its status.

mod launch;
pub mod layout;
mod report;
mod study;
mod verdict;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use regex::Regex;

use jitter_collect::clock::Clock;
use jitter_emulator::cli::SalvageArgs;
use jitter_emulator::{InjectionChoice, InjectionMode, Scale, SyncMode};
use jitter_trace::Stats;

pub use launch::RunStatus;
pub use report::{pairs_of, result_of, verdict_line, AppReport, AppResult};
pub use study::{read_metric, schedule, Arm, LibrarySummary, Measure, Pair, RunRecord};
pub use verdict::{judge, ArmSummary, Effect, Verdict};

use study::StudySetup;

/// Default time limit of one run.
pub const DEFAULT_TIMEOUT: &str = "10m";

/// Options of `replay-bench app`.
#[derive(Debug, Clone, Args)]
pub struct AppArgs {
    /// Trace to replay in the program (.jtr).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Processes: runs `<launcher> -np N <command…>`; without it the command runs as given
    /// (write the launcher into it, e.g. `-- mpirun -np 2 ./solver`).
    #[arg(long)]
    pub np: Option<u64>,
    /// The launcher `--np` puts in front of the command.
    #[arg(long, default_value = "mpirun")]
    pub launcher: String,
    /// Counted pairs K (one run with, one without the library each); at least 2.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..))]
    pub runs: u64,
    /// Warm-up pairs run first, checked and not counted (the first run with the library on a
    /// host also calibrates its injector, about 20 s).
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
    /// What to measure: `loop` (the program's main loop, found and timed by the library's
    /// profile in both arms: what `predict --app` predicts), `wall` (the whole program, spawn
    /// to exit: start-up, set-up and output included), or a regular expression with one capture
    /// group around a number the program prints (the last match in its standard output; smaller
    /// is faster, like a time).
    #[arg(long, value_name = "loop|wall|REGEX", default_value = "loop", value_parser = measure_flag)]
    pub metric: Measure,
    /// Time limit of one run (ended with SIGTERM, then SIGKILL to its process group).
    #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = crate::run::positive_duration_flag)]
    pub timeout: u64,
    /// How the library injects (`JITTER_INJECT`): `signal`, `boundary` (paid at MPI calls, S =
    /// 1), or `auto`: the signal where S ≤ 3 reproduces 90 % of the trace's noise time with this
    /// host's signal cost (its calibration cache, measured when missing), payment at calls
    /// elsewhere; the report says which and why.
    #[arg(long, default_value = "auto", value_name = "auto|signal|boundary", value_parser = inject_flag)]
    pub inject: InjectFlag,
    /// Scale factor S (`JITTER_SCALE`).
    #[arg(long, default_value_t = Scale::ONE)]
    pub scale: Scale,
    /// Sync mode of the library (`JITTER_SYNC`): none, once, phase (every MPI_Barrier), every:K.
    #[arg(long, default_value = "phase")]
    pub sync: SyncMode,
    /// Ranks per node k (`JITTER_RANKS_PER_NODE`); default the launcher's layout.
    #[arg(long)]
    pub ranks_per_node: Option<u64>,
    /// Seed of the order of each pair and of each run's `JITTER_SEED`.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// `libjitter_preload.so` (default: beside this program, as `cargo build --release` leaves it).
    #[arg(long, value_name = "FILE")]
    pub library: Option<PathBuf>,
    /// Probe this machine's own noise on this CPU for this long before the runs (0s: none).
    #[arg(long, default_value = "1s", value_parser = crate::run::duration_flag)]
    pub platform_probe: u64,
    /// Write the report as JSON here.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// `--salvage`: replay a trace that lacks detours (`JITTER_SALVAGE=1` in the runs).
    #[command(flatten)]
    pub salvage: SalvageArgs,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A `--metric` flag: `loop`, `wall` or a regular expression with one capture group.
pub fn measure_flag(s: &str) -> Result<Measure, String> {
    match s {
        "loop" => Ok(Measure::Loop),
        "wall" => Ok(Measure::Wall),
        _ => metric_flag(s).map(Measure::Printed),
    }
}

/// `app --inject`: a mode, or `auto` (`None`: chosen by measuring).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectFlag(pub Option<InjectionMode>);

/// An `--inject` flag: `auto` or a mode.
fn inject_flag(s: &str) -> Result<InjectFlag, String> {
    match s.trim() {
        "auto" => Ok(InjectFlag(None)),
        other => other
            .parse()
            .map(|m| InjectFlag(Some(m)))
            .map_err(|e: jitter_emulator::PlanError| format!("{e} (or auto)")),
    }
}

/// How the runs inject, and why: as given, or by the rule of [`InjectionChoice`] with this
/// host's signal cost (abstime, the library's default timer).
fn injection(a: &AppArgs, trace: &Path, clock: &Clock) -> anyhow::Result<(InjectionMode, String)> {
    if let Some(m) = a.inject.0 {
        return Ok((m, format!("{m}: as given (--inject {m})")));
    }
    let loaded = jitter_trace::read_trace(trace)
        .with_context(|| format!("cannot use trace {}", trace.display()))?;
    let cal = jitter_emulator::Calibration::load_or_measure(clock, false)
        .context("cannot calibrate the signal injector to choose how to inject (--inject)")?;
    let o = cal.abstime.overhead.median_ns.max(0.0);
    let choice = InjectionChoice::for_streams(&loaded.trace.streams, o)?;
    Ok((choice.mode, choice.reason()))
}

/// A `--metric` flag: a regular expression with exactly one capture group.
pub fn metric_flag(s: &str) -> Result<Regex, String> {
    let re = Regex::new(s).map_err(|e| format!("not a regular expression: {e}"))?;
    if re.captures_len() != 2 {
        return Err(format!(
            "give exactly one capture group around the number, e.g. 'time: ([0-9.]+)' ({} given)",
            re.captures_len() - 1
        ));
    }
    Ok(re)
}

/// The library: `given`, else `libjitter_preload.so` beside this executable.
fn find_library(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .context("cannot find this program's path")?
            .with_file_name("libjitter_preload.so"),
    };
    if !path.is_file() {
        bail!(
            "{} is not a file: build the library (cargo build --release -p jitter-preload) or give \
             --library",
            path.display()
        );
    }
    path.canonicalize()
        .with_context(|| format!("cannot resolve {}", path.display()))
}

/// The trace's absolute path and its noise ratio; an unreadable or invalid trace is an error,
/// and so is one that lacks detours unless `salvage` (the policy of every reader, applied here
/// before the first run rather than by the library in every run).
fn check_trace(path: &Path, salvage: SalvageArgs) -> anyhow::Result<(PathBuf, f64)> {
    let loaded = jitter_trace::read_trace(path)
        .with_context(|| format!("cannot use trace {}", path.display()))?;
    let name = path.display().to_string();
    let integrity = loaded.accept(&name, salvage.choice())?;
    if let Some(w) = integrity.warning() {
        eprintln!("warning: {name}: {w}");
    }
    let trace = loaded.trace;
    trace
        .validate()
        .with_context(|| format!("trace {} is invalid", path.display()))?;
    if trace.streams.is_empty() {
        bail!("trace {} has no streams", path.display());
    }
    // The library refuses a stream without detours in every run: said once, before any.
    if let Some(s) = trace.streams.iter().find(|s| s.records.is_empty()) {
        bail!(
            "trace {}: stream of CPU {} has no detours: the library would refuse it in every \
             run (nothing to replay); give a trace with detours on every stream (jitter-trace \
             slice --cpus keeps some)",
            path.display(),
            s.cpu
        );
    }
    let abs = path
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", path.display()))?;
    Ok((abs, Stats::of_streams(&trace.streams).noise_ratio))
}

/// The command each run runs.
fn command_line(a: &AppArgs) -> Vec<String> {
    match a.np {
        Some(n) => [a.launcher.clone(), "-np".into(), n.to_string()]
            .into_iter()
            .chain(a.command.iter().cloned())
            .collect(),
        None => a.command.clone(),
    }
}

/// Runs the study; the report is printed (and written with `-o`) also when a run stops it.
pub fn main(a: &AppArgs) -> anyhow::Result<()> {
    if a.np == Some(0) {
        bail!("--np must be at least 1");
    }
    if let Some(out) = &a.output {
        jitter_trace::output::check_output(out, "-o", "a JSON report", &["json"])?;
    }
    let library = find_library(a.library.as_deref())?;
    let (trace, trace_noise_ratio) = check_trace(&a.trace, a.salvage)?;
    let clock = Clock::for_tools()?;
    let (inject, inject_reason) = injection(a, &trace, &clock)?;
    eprintln!("app: {inject_reason}");
    let platform_noise = crate::noise::measure(&clock, a.platform_probe);
    let stats_dir = std::env::temp_dir().join(format!("replay-bench-app-{}", std::process::id()));
    let setup = StudySetup {
        argv: command_line(a),
        library,
        trace,
        scale: a.scale,
        sync: a.sync,
        ranks_per_node: a.ranks_per_node,
        measure: a.metric.clone(),
        limit: Duration::from_nanos(a.timeout),
        stats_dir: stats_dir.clone(),
        salvage: a.salvage.salvage,
        inject,
    };
    let mut report = AppReport {
        command: setup.argv.clone(),
        trace: setup.trace.display().to_string(),
        trace_noise_ratio,
        scale: a.scale.get(),
        inject,
        inject_reason,
        sync: a.sync.to_string(),
        ranks_per_node: a.ranks_per_node,
        host: Some(jitter_emulator::calibration::host_and_kernel().0),
        seed: a.seed,
        metric: a.metric.label(),
        timeout_ns: a.timeout,
        platform_noise,
        runs: Vec::new(),
        result: None,
        stopped: None,
        warnings: Vec::new(),
    };
    let ran = run_pairs(&setup, &clock, a, &mut report);
    let _ = std::fs::remove_dir_all(&stats_dir);
    ran?;
    report.warnings = crate::noise::warning(0, platform_noise.noise_ratio, trace_noise_ratio)
        .map(|w| w.replacen("rank 0: ", "", 1))
        .into_iter()
        .chain(report::library_warnings(&report.runs, trace_noise_ratio))
        .collect();
    if report.stopped.is_none() {
        report.result = Some(result_of(&report.runs));
    }
    if let Some(out) = &a.output {
        jitter_trace::output::write_output(out, |w| -> anyhow::Result<()> {
            serde_json::to_writer_pretty(&mut *w, &report)?;
            writeln!(w)?;
            Ok(())
        })
        .with_context(|| format!("cannot write {}", out.display()))?;
    }
    print!("{}", report.render());
    match &report.stopped {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

/// Runs every pair into `report.runs`; a failed run is recorded and sets `report.stopped`.
fn run_pairs(
    setup: &StudySetup,
    clock: &Clock,
    a: &AppArgs,
    report: &mut AppReport,
) -> anyhow::Result<()> {
    let total = a.warmup + a.runs;
    for pair in schedule(a.seed, a.warmup, a.runs) {
        for arm in pair.order {
            match study::run_arm(setup, clock, &pair, arm)? {
                Ok(r) => report.runs.push(r),
                Err(stop) => {
                    report.runs.push(stop.record);
                    report.stopped = Some(stop.reason);
                    return Ok(());
                }
            }
        }
        let n = report.runs.len();
        let [x, y] = [&report.runs[n - 2], &report.runs[n - 1]];
        eprintln!(
            "pair {}/{total}{}: {} {:.3} s, {} {:.3} s",
            pair.index + 1,
            if pair.warmup { " (warm-up)" } else { "" },
            short(x.arm),
            x.wall_ns as f64 / 1e9,
            short(y.arm),
            y.wall_ns as f64 / 1e9
        );
    }
    Ok(())
}

fn short(arm: Arm) -> &'static str {
    match arm {
        Arm::Without => "without",
        Arm::With => "with",
    }
}
