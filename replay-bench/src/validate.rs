//! `replay-bench validate`: the prediction checked against measurement in one command. Real
//! replays (`mpirun -np k replay-bench run`, the paired design) at each process count this
//! machine holds and each sync mode, then the predictor on the same trace and settings with the
//! runs' own platform (their calibration) and barrier (`--calibrate-from`), and one table
//! (`comparison`): measured SD ± its 95 % interval beside the prediction of the very windows of
//! the trace that run replayed (`predict::window`), the verdict (`verdict`: inside the interval,
//! or within 1 pp plus the platform's noise; none where the interval is wider than the effect),
//! whether both injected the same detours, and the whole-trace prediction with its range over
//! offset draws (on the platform's recorded noise, `--platform-probe`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;

use jitter_trace::units::parse_positive_duration;

use crate::comparison;
use crate::plot::{self, StudyRow};
use crate::predict::{self, PredictArgs, RankCounts};
use crate::report::{Report, ReportKind, ResultRow};
use jitter_emulator::cli::{ReplayArgs, SalvageArgs};
use jitter_emulator::SyncMode;

/// Options of `replay-bench validate`.
#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// Trace to replay and predict (.jtr).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Process counts, e.g. `1,2` (default: 1 … this machine's CPUs).
    #[arg(long)]
    pub ranks: Option<RankCounts>,
    /// Sync modes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "none,once,phase")]
    pub sync: Vec<SyncMode>,
    /// Work quanta q of one phase.
    #[arg(long, default_value = "1ms", value_parser = crate::run::positive_duration_flag)]
    pub quanta: u64,
    /// S, f, the timer and O/L/M, the same for the runs and the prediction.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Whether the runs and the prediction go on with a trace that lacks detours.
    #[command(flatten)]
    pub salvage: SalvageArgs,
    /// Period of each real run (the paired design runs baseline and jitter blocks for it).
    #[arg(long, default_value = "5s", value_parser = parse_positive_duration)]
    pub period: Duration,
    /// Phases of each prediction.
    #[arg(long, default_value_t = 2000)]
    pub phases: u64,
    /// Seed of the runs and the prediction.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Folder for the run reports and logs (default: `validate-<trace stem>`).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Write the table as JSON here.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw SD eq. (3) against processes here (SVG): measured points with their 95 % bars
    /// beside the predicted curves.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Record the machine's own noise on the runs' CPUs for this long before the runs
    /// (`platform.jtr`), and predict the trace on top of it (`predict --platform-noise`); 0s
    /// predicts on a noise-free machine.
    #[arg(long, default_value = "10s", value_parser = crate::run::duration_flag)]
    pub platform_probe: u64,
    /// Offset draws of the whole-trace prediction shown beside each run (its range).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub draws: u64,
    /// MPI launcher (`mpirun`, `mpiexec`).
    #[arg(long, default_value = "mpirun")]
    pub mpirun: String,
}

/// The process counts: `text` (`1,2` or `1..4`) or 1 … the CPUs this process may use.
fn rank_counts(given: Option<&RankCounts>) -> Vec<u64> {
    match given {
        Some(r) => r.0.clone(),
        None => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
            (1..=n).collect()
        }
    }
}

/// Runs `mpirun -np np <this binary> run ARGS`, its output into `log`, killed after `limit`.
fn launch(
    a: &ValidateArgs,
    np: u64,
    args: &[String],
    log: &Path,
    limit: Duration,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let out =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let err = out.try_clone()?;
    let mut child = Command::new(&a.mpirun)
        .args(["-np", &np.to_string()])
        .arg(&exe)
        .arg("run")
        .args(args)
        // OpenMPI refuses root without these; MPICH ignores them.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("cannot start {} (is MPI installed?)", a.mpirun))?;
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if t0.elapsed() > limit {
            // SIGTERM first: mpirun forwards it to its ranks (SIGKILL would orphan them).
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(3));
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "mpirun -np {np} run did not finish within {} s (log {})",
                limit.as_secs(),
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let last = text
            .lines()
            .rev()
            .find(|l| l.starts_with("error"))
            .or_else(|| text.lines().last())
            .unwrap_or("");
        bail!(
            "mpirun -np {np} run failed ({status}): {last} (log {})",
            log.display()
        );
    }
    Ok(())
}

/// Records the machine's own noise on CPUs `0..cpus` (those `mpirun` binds the runs' ranks
/// to) for `a.platform_probe` into `dir/platform.jtr`, with the collector's probe as the runs'
/// ranks would see it; `None` where the prediction cannot take it (a probe of 0 s, S ≠ 1, f < 1
/// or the itimer: see `predict --platform-noise`), with the reason printed.
fn probe_platform(a: &ValidateArgs, cpus: u64, dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    if a.platform_probe == 0 {
        return Ok(None);
    }
    let probe = Duration::from_nanos(a.platform_probe);
    let setup = a
        .replay
        .setup_over(&jitter_emulator::ReplaySetup::default());
    let itimer = setup.cost.timer == jitter_emulator::TimerKind::Itimer;
    if let Err(e) = predict::background::check_setup(&setup.plan_options(), itimer) {
        eprintln!("validate: the platform's noise is not modelled: {e}");
        return Ok(None);
    }
    let online = jitter_collect::cpuset::online_cpus()?;
    let ids: Vec<u32> = (online.ids().iter().copied())
        .take(cpus.max(1) as usize)
        .collect();
    let output = dir.join("platform.jtr");
    eprintln!(
        "validate: recording the platform's own noise on CPUs {ids:?} for {} s ({})",
        probe.as_secs_f64(),
        output.display()
    );
    let config = jitter_collect::session::Config {
        cpus: Some(jitter_collect::cpuset::CpuList::from_ids(ids)),
        duration: Some(probe),
        output: output.clone(),
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        verbose: true,
        ..jitter_collect::session::Config::default()
    };
    jitter_collect::session::collect(&config).context("cannot record the platform's noise")?;
    Ok(Some(output))
}

/// Loads a run's report; a run that measured no phase (its SDs are then not numbers) is refused
/// with its stop reason.
fn load_run(path: &Path, np: u64) -> anyhow::Result<Report> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("the np {np} run wrote no report {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    if v["results"][0]["phases"].as_u64() == Some(0) {
        bail!(
            "the np {np} run measured no phase (stopped by {}): its trace ran out first; use a \
             shorter --period or a longer trace ({})",
            v["config"]["run"]["stopped_by"].as_str().unwrap_or("?"),
            path.display()
        );
    }
    Report::load(path)
}

/// The table, the plot and the folder of the runs, checked before the first run (which may
/// be an hour before the table is written).
fn check_outputs(a: &ValidateArgs) -> anyhow::Result<()> {
    use jitter_trace::output::check_output;
    if let Some(p) = &a.output {
        check_output(p, "-o", "a JSON table", &["json"])?;
    }
    if let Some(p) = &a.plot {
        check_output(p, "--plot", "an SVG image", &["svg"])?;
    }
    if let Some(d) = &a.dir {
        if d.exists() && !d.is_dir() {
            anyhow::bail!("--dir {} is not a folder", d.display());
        }
    }
    Ok(())
}

/// `replay-bench validate`.
pub fn main(a: &ValidateArgs) -> anyhow::Result<()> {
    let ranks = rank_counts(a.ranks.as_ref());
    let modes = a.sync.clone();
    crate::predict::check_sync_modes(&modes)?;
    check_outputs(a)?;
    // Refused before the runs, as the runs and the prediction would refuse it.
    jitter_trace::read_trace(&a.trace)
        .with_context(|| format!("cannot read trace {}", a.trace.display()))?
        .accept(&a.trace.display().to_string(), a.salvage.choice())?;
    let stem = a
        .trace
        .file_stem()
        .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
    let dir = a
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("validate-{stem}")));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // The paired design runs the period twice (baseline and jitter blocks), after the
    // calibration (cached, else about 20 s) and the 1 s noise probe.
    let background = probe_platform(a, ranks.iter().copied().max().unwrap_or(1), &dir)?;
    let limit = a.period * 3 + Duration::from_secs(120);
    let total = ranks.len() * modes.len();
    let mut measured: Vec<(PathBuf, ResultRow, f64)> = Vec::with_capacity(total);
    let t0 = Instant::now();
    for &np in &ranks {
        for mode in &modes {
            let name = format!("run-np{np}-{}", mode.to_string().replace(':', "-"));
            let report = dir.join(format!("{name}.json"));
            eprintln!(
                "validate: [{}/{total}] mpirun -np {np} run --sync {mode} ({:.0} s so far)",
                measured.len() + 1,
                t0.elapsed().as_secs_f64()
            );
            let mut args: Vec<String> = vec![
                "--trace".into(),
                a.trace.display().to_string(),
                "--quanta".into(),
                format!("{}ns", a.quanta),
                "--period".into(),
                format!("{}ms", a.period.as_millis()),
                "--sync".into(),
                mode.to_string(),
                "--seed".into(),
                a.seed.to_string(),
                "--output".into(),
                report.display().to_string(),
            ];
            args.extend(a.replay.to_flags());
            args.extend(a.salvage.to_flags());
            launch(a, np, &args, &dir.join(format!("{name}.log")), limit)?;
            let r = load_run(&report, np)?;
            let noise = r
                .calibration
                .iter()
                .map(|c| c.platform_noise_ratio)
                .fold(0.0, f64::max);
            let row = r
                .results
                .into_iter()
                .next()
                .with_context(|| format!("{} holds no result", report.display()))?;
            measured.push((report, row, noise));
        }
    }
    // The platform and barrier of the prediction: the runs' own (the first run's calibration;
    // the barrier stage from a multi-process run when there is one).
    let platform = measured[0].0.display().to_string();
    let calibrate_from = measured
        .iter()
        .find(|(_, r, _)| r.ranks >= 2)
        .map(|(p, _, _)| p.clone());
    let ranks_list = ranks
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let sync_list = modes
        .iter()
        .map(SyncMode::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut flags: Vec<String> = [
        "--trace",
        &a.trace.display().to_string(),
        "--ranks",
        &ranks_list,
        "--sync",
        &sync_list,
        "--quanta",
        &format!("{}ns", a.quanta),
        "--phases",
        &a.phases.to_string(),
        "--platform",
        &platform,
        "--seed",
        &a.seed.to_string(),
    ]
    .map(String::from)
    .to_vec();
    if let Some(p) = &calibrate_from {
        flags.extend(["--calibrate-from".into(), p.display().to_string()]);
    }
    if let Some(p) = &background {
        flags.extend(["--platform-noise".into(), p.display().to_string()]);
    }
    flags.extend(["--draws".into(), a.draws.to_string()]);
    flags.extend(a.replay.to_flags());
    flags.extend(a.salvage.to_flags());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let args = PredictArgs::from_flags(&flags).map_err(|e| anyhow::anyhow!("{e}"))?;
    eprintln!("validate: predicting {} points", total);
    let (traces, spec) = predict::prepare(&args)?;
    let prediction = predict::predict(&traces, &spec, &indicatif::ProgressBar::hidden())?;
    let des = prediction
        .des
        .context("the prediction produced no simulation report")?;
    // Each run against the prediction of the very windows of the trace it replayed (on its
    // own platform; the machine's noise is not modelled there, the verdict allows for it), the
    // whole-trace prediction over offset draws beside it.
    let mut base = args.clone();
    base.platform_noise = None;
    base.draws = 1;
    let mut all = Vec::with_capacity(2 * total);
    for (path, m, noise) in &measured {
        let whole = (des.results.iter()).find(|p| p.ranks == m.ranks && p.sync == m.sync);
        let same = predict::window::predict_run(path, &a.trace, &base, predict::Engine::default())
            .with_context(|| format!("the prediction of the windows of {}", path.display()))?;
        all.extend(comparison::compare(comparison::Inputs {
            measured: m,
            platform_pct: noise * 100.0,
            same_windows: (same.report.config.predict.as_ref())
                .and_then(|p| p.windows_of.as_ref())
                .map(|w| (&same.row, w)),
            blocks: (same.run.run.config.run.as_ref())
                .and_then(|d| d.paired.as_ref())
                .map_or(&[][..], |p| &p.blocks[..]),
            whole,
        }));
    }
    let file = a
        .trace
        .file_name()
        .map_or_else(|| stem.clone(), |f| f.to_string_lossy().into_owned());
    println!(
        "replay-bench validate: {file} (q = {}, period {} s per run, seed {}); runs in {}",
        crate::table::fmt_ns(a.quanta as f64),
        a.period.as_secs_f64(),
        a.seed,
        dir.display()
    );
    let bg_name = (background.as_ref())
        .and_then(|p| p.file_name())
        .map(|f| f.to_string_lossy().into_owned());
    print!("{}", comparison::render(&all, false));
    println!(
        "platform: the machine's own noise during each run; {}",
        match &bg_name {
            Some(f) => format!(
                "in the whole-trace prediction as {f}, recorded before the runs; not in the \
                 prediction of the same windows"
            ),
            None => "in no prediction".into(),
        }
    );
    if let Some(svg) = &a.plot {
        let rows: Vec<StudyRow> = measured
            .iter()
            .map(|(_, row, _)| StudyRow {
                kind: ReportKind::Run,
                row: row.clone(),
            })
            .chain(des.results.iter().map(|row| StudyRow {
                kind: ReportKind::PredictDes,
                row: row.clone(),
            }))
            .collect();
        let title = format!("Slowdown eq. (3) vs processes, {file}: measured and predicted");
        plot::draw(&rows, plot::Metric::Qt, &title, svg)
            .with_context(|| format!("plot {}", svg.display()))?;
    }
    if let Some(o) = &a.output {
        let json = serde_json::to_string_pretty(&all)?;
        jitter_trace::output::write_output_bytes(o, json.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_phases_is_refused_with_its_stop_reason() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let mut r = Report::new(ReportKind::Run, crate::report::Config::default());
        r.config.run = Some(crate::report::RunDetails {
            stopped_by: "fraction".into(),
            ..Default::default()
        });
        r.results.push(ResultRow {
            phases: 0,
            ..ResultRow::default()
        });
        r.save(&p).unwrap();
        let e = load_run(&p, 2).unwrap_err().to_string();
        assert!(
            e.starts_with("the np 2 run measured no phase (stopped by fraction)"),
            "{e}"
        );
        r.results[0].phases = 10;
        r.save(&p).unwrap();
        assert_eq!(load_run(&p, 2).unwrap().results[0].phases, 10);
        let e = load_run(&dir.path().join("none.json"), 1).unwrap_err();
        assert!(e.to_string().starts_with("the np 1 run wrote no report"));
    }

    #[test]
    fn process_counts_are_given_or_this_machines() {
        assert_eq!(rank_counts(Some(&"1,2".parse().unwrap())), vec![1, 2]);
        assert_eq!(rank_counts(None)[0], 1);
    }
}
