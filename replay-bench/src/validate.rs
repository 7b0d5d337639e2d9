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

use crate::flags::predict::PredictArgs;
use crate::flags::shared::PlatformChoice;
use crate::flags::validate::ValidateArgs;
use jitter_emulator::{InjectionMode, SyncMode};
use jitter_predict::background;
use jitter_predict::request::PredictRequest;
use jitter_predict::window::predict_run;
use jitter_report::comparison::{self, Comparison};
use jitter_report::report::{Report, ResultRow};

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

/// Whether the prediction of `mode`'s runs can take the platform's recorded noise (S = 1, f = 1,
/// no itimer: see `predict --platform-noise`); why not, if not.
pub(crate) fn platform_noise_fits(a: &ValidateArgs, mode: InjectionMode) -> Result<(), String> {
    let setup = a
        .replay_for(mode)
        .setup_over(&jitter_emulator::ReplaySetup::default());
    let itimer = setup.cost.timer == jitter_emulator::TimerKind::Itimer;
    background::check_setup(&setup.plan_options(), itimer).map_err(|e| e.to_string())
}

/// Records the machine's own noise on CPUs `0..cpus` (those `mpirun` binds the runs' ranks
/// to) for `a.platform_probe` into `dir/platform.jtr`, with the collector's probe as the runs'
/// ranks would see it; `None` where no mode's prediction can take it (a probe of 0 s, S ≠ 1,
/// f < 1 or the itimer: see `predict --platform-noise`), with the reason printed.
pub(crate) fn probe_platform(
    a: &ValidateArgs,
    cpus: u64,
    dir: &Path,
) -> anyhow::Result<Option<PathBuf>> {
    if a.platform_probe == 0 {
        return Ok(None);
    }
    let probe = Duration::from_nanos(a.platform_probe);
    let fits: Vec<Result<(), String>> = (a.inject_modes().into_iter())
        .map(|m| platform_noise_fits(a, m))
        .collect();
    if let Some(Err(e)) = fits
        .iter()
        .find(|f| f.is_err())
        .filter(|_| fits.iter().all(Result::is_err))
    {
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
        // The line above says how long it takes; no bar (the collector's is its binary's).
        progress: None,
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

/// One real run of `validate`: its report, its result row and the most noise of its own the
/// platform showed on any rank (a ratio).
#[derive(Debug, Clone)]
pub struct MeasuredRun {
    /// How it injected.
    pub inject: InjectionMode,
    /// The run's report.
    pub report: PathBuf,
    /// Its result.
    pub row: ResultRow,
    /// The platform's own noise during it.
    pub noise: f64,
}

/// The real runs: `mpirun -np np replay-bench run` for each injection mode, process count and
/// sync mode, interleaved (mode innermost, so that both modes meet the same minutes of the
/// machine), their reports and logs in `dir`.
pub(crate) fn run_all(
    a: &ValidateArgs,
    ranks: &[u64],
    dir: &Path,
) -> anyhow::Result<Vec<MeasuredRun>> {
    // The paired design runs the period twice (baseline and jitter blocks), after the
    // calibration (cached, else about 20 s) and the 1 s noise probe.
    let limit = a.period * 3 + Duration::from_secs(120);
    let injects = a.inject_modes();
    let total = ranks.len() * a.sync.modes.len() * injects.len();
    let mut measured = Vec::with_capacity(total);
    let t0 = Instant::now();
    for &np in ranks {
        for &mode in &a.sync.modes {
            for &inject in &injects {
                let name = format!("run-{inject}-np{np}-{}", mode.to_string().replace(':', "-"));
                let report = dir.join(format!("{name}.json"));
                eprintln!(
                    "validate: [{}/{total}] mpirun -np {np} run --sync {mode} --inject {inject} \
                     ({:.0} s so far)",
                    measured.len() + 1,
                    t0.elapsed().as_secs_f64()
                );
                let args = run_flags(a, (mode, inject), &report);
                launch(a, np, &args, &dir.join(format!("{name}.log")), limit)?;
                let r = load_run(&report, np)?;
                let noise = (r.calibration.iter())
                    .map(|c| c.platform_noise_ratio)
                    .fold(0.0, f64::max);
                let row = (r.results.into_iter().next())
                    .with_context(|| format!("{} holds no result", report.display()))?;
                measured.push(MeasuredRun {
                    inject,
                    report,
                    row,
                    noise,
                });
            }
        }
    }
    Ok(measured)
}

/// The flags of one run (`replay-bench run`, in another process), from `validate`'s own.
fn run_flags(
    a: &ValidateArgs,
    (mode, inject): (SyncMode, InjectionMode),
    report: &Path,
) -> Vec<String> {
    let mut args: Vec<String> = vec!["--trace".into(), a.trace.display().to_string()];
    args.extend(a.quanta.to_flags());
    args.extend([
        "--period".into(),
        format!("{}ms", a.period.as_millis()),
        "--sync".into(),
        mode.to_string(),
        "--seed".into(),
        a.seed.value.to_string(),
        "--output".into(),
        report.display().to_string(),
    ]);
    args.extend(["--inject".into(), inject.to_string()]);
    args.extend(a.replay_for(inject).to_flags());
    args.extend(a.salvage.to_flags());
    args
}

/// The prediction's request for the runs of one injection mode (`measured`): the trace,
/// counts, modes and settings of the runs, the runs' own platform (the first run's calibration:
/// nothing paying at calls) and barrier (from a multi-process run when there is one), over the
/// platform's recorded noise (`background`), with `--draws` offset draws.
pub(crate) fn predict_request(
    a: &ValidateArgs,
    ranks: &[u64],
    measured: &[&MeasuredRun],
    background: Option<&Path>,
) -> anyhow::Result<PredictRequest> {
    let first = measured.first().context("no run to predict")?;
    let inject = first.inject;
    let trace = a.trace.display().to_string();
    let mut args = PredictArgs::from_flags(&["--trace", &trace])
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .request();
    args.ranks = ranks.to_vec();
    args.modes = a.sync.modes.clone();
    args.quanta_ns = a.quanta.ns;
    args.phases = a.phases.or_default();
    args.platform = PlatformChoice::File(first.report.clone());
    args.seed = a.seed.value;
    args.calibrate_from = (measured.iter())
        .find(|m| m.row.ranks >= 2)
        .map(|m| m.report.clone());
    args.platform_noise = background
        .filter(|_| platform_noise_fits(a, inject).is_ok())
        .map(Path::to_path_buf);
    args.draws = a.draws;
    args.replay = a.replay_for(inject).given();
    args.salvage = a.salvage.choice();
    Ok(args)
}

/// Each run against the prediction of the very windows of the trace it replayed (on its own
/// platform; the machine's noise is not modelled there, the verdict allows for it), the
/// whole-trace prediction (`whole`) over offset draws beside it.
pub(crate) fn compare_all(
    a: &ValidateArgs,
    args: &PredictRequest,
    measured: &[&MeasuredRun],
    whole: &[ResultRow],
) -> anyhow::Result<Vec<Comparison>> {
    let mut base = args.clone();
    base.platform_noise = None;
    base.draws = 1;
    let mut all = Vec::with_capacity(2 * measured.len());
    for m in measured {
        let predicted = (whole.iter()).find(|p| p.ranks == m.row.ranks && p.sync == m.row.sync);
        let same = predict_run(&m.report, &a.trace, &base)
            .with_context(|| format!("the prediction of the windows of {}", m.report.display()))?;
        all.extend(comparison::compare(comparison::Inputs {
            measured: &m.row,
            platform_pct: m.noise * 100.0,
            same_windows: (same.report.config.predict.as_ref())
                .and_then(|p| p.windows_of.as_ref())
                .map(|w| (&same.row, w)),
            blocks: (same.run.run.config.run.as_ref())
                .and_then(|d| d.paired.as_ref())
                .map_or(&[][..], |p| &p.blocks[..]),
            whole: predicted,
            inject: m.inject,
        }));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_report::report::ReportKind;

    #[test]
    fn a_run_without_phases_is_refused_with_its_stop_reason() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let mut r = Report::new(ReportKind::Run, jitter_report::report::Config::default());
        r.config.run = Some(jitter_report::report::RunDetails {
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
}
