//! `replay-bench app`: hyperfine for MPI programs under noise. The unmodified program runs K
//! pairs of times, once with `libjitter_preload.so` replaying the trace and once without, in an
//! order drawn per pair from a seed, after W warm-up pairs; the slowdown of its main loop's time
//! (what `predict --app` predicts; or its wall time, or a number it prints: `--metric`) comes
//! with its paired 95 % interval, and no verdict is given where the interval is wider than the
//! effect (the report says how many pairs would do). The library's start-up and the whole
//! program's wall time are reported beside the loop's.
//! Every run has a time limit; a failed run is recorded and ends the study with its status.

mod app_report;
mod launch;
mod pair_verdict;
mod pairs;
mod runs_of;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use jitter_collect::clock::Clock;
use jitter_emulator::{InjectionChoice, InjectionMode};
use jitter_emulator_cli::SalvageArgs;
use jitter_trace::Stats;

pub(crate) use app_report::result_of;
pub use app_report::{pairs_of, verdict_line, AppReport};
pub use launch::RunStatus;
pub use pairs::{schedule, Arm, LibrarySummary};
pub use runs_of::runs_of;

pub use pair_verdict::{judge, Verdict};

use pairs::StudySetup;

use crate::flags::app::AppArgs;

/// How the runs inject, and why: as given, or by the rule of [`InjectionChoice`] with this
/// host's signal cost (abstime, the library's default timer).
fn injection(a: &AppArgs, trace: &Path, clock: &Clock) -> anyhow::Result<(InjectionMode, String)> {
    if let Some(m) = a.inject.0 {
        return Ok((m, format!("{m}: as given (--inject {m})")));
    }
    let loaded = jitter_trace::read_trace(trace)
        .with_context(|| format!("cannot use trace {}", trace.display()))?;
    let bar = jitter_emulator_cli::calibration_bar::CalibrationBar::new();
    let cal = jitter_emulator::Calibration::load_or_measure(clock, false, &bar)
        .context("cannot calibrate the signal injector to choose how to inject (--inject)")?;
    let o = cal.abstime.overhead.median_ns.max(0.0);
    let choice = InjectionChoice::for_streams(&loaded.trace.streams, o)?;
    Ok((choice.mode, choice.reason()))
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
    let platform_noise = crate::bench::noise::measure(&clock, a.platform_probe);
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
    report.warnings =
        crate::bench::noise::warning(0, platform_noise.noise_ratio, trace_noise_ratio)
            .map(|w| w.replacen("rank 0: ", "", 1))
            .into_iter()
            .chain(app_report::library_warnings(
                &report.runs,
                trace_noise_ratio,
            ))
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
            match pairs::run_arm(setup, clock, &pair, arm)? {
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
