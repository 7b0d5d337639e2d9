//! `replay-bench predict`'s entry point: MPI when under a launcher (the simulated ranks split
//! over the processes, in the precision mode the offset draws; rank 0 reports), the outputs and `--threads` checked and agreed, the
//! worker pool, the budget, the progress, then the table, the reports and the plot.
//!
//! The main thread is worker 0 of rayon's pool (`use_current_thread`, built before the traces
//! are read), so parallel passes start on a worker and MPI calls stay on the main thread;
//! without `--threads` the pool has no more workers than the largest rank count's chunks where
//! it makes several, nor than the process's share of the host's CPUs (`cores_of_process`).

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::bench::mpi::Mpi;
use crate::flags::predict::{order_stats_path, PredictArgs, PredictCmd};
use jitter_predict::budget::{self, Estimate};
use jitter_predict::comm::{agree, Collective, Solo};
use jitter_predict::des;
use jitter_predict::input::TraceInput;
use jitter_predict::precision_mode;
use jitter_predict::prediction::predict;
use jitter_predict::prediction_report::{check_plausible, study_rows, Prediction};
use jitter_predict::prepare::{prepare, walk_note};
use jitter_predict::progress::{TextProgress, TEXT_PROGRESS_EVERY};
use jitter_predict::request::PredictRequest;
use jitter_predict::size_classes;
use jitter_predict::spec::{rank_phases, PredictSpec};
use jitter_predict::window;

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

/// `replay-bench predict`: prints the SD table, writes the report(s) and the plot. The flags'
/// request (`PredictCmd::request`: the engine and the precision plan in it) becomes a complete
/// spec in `prepare`, which [`predict`] runs in either mode; nothing here edits it.
pub fn main(cmd: PredictCmd) -> anyhow::Result<()> {
    let (args, request) = (&cmd.args, cmd.request());
    // Under an MPI launcher the simulated ranks are split over the processes (rank 0 reports).
    let universe = match crate::launcher_rank() {
        Some(_) => Some(mpi::initialize().context("MPI is not available or already initialised")?),
        None => None,
    };
    let mpi_comm = universe.as_ref().map(|u| Mpi::new(u.world()));
    let comm: &dyn Collective = match &mpi_comm {
        Some(c) => c,
        None => &Solo,
    };
    let root = comm.rank() == 0;
    check_agreed(comm, args)?;
    let on_host = mpi_comm.as_ref().map_or(1, Mpi::ranks_on_this_host);
    start_pool(args, comm, on_host)?;
    if args.windows_of.is_some() {
        anyhow::ensure!(
            mpi_comm.is_none(),
            "--windows-of predicts the few ranks of one run: run it without an MPI launcher"
        );
        return windows_of(args, &request);
    }
    if let Some(path) = &args.app {
        anyhow::ensure!(
            mpi_comm.is_none(),
            "--app simulates in one process: run it without an MPI launcher"
        );
        return app(args, path, &request);
    }
    let (traces, spec) = prepare(&request)?;
    let plan = spec.precision;
    let estimate = admitted(comm, args, &traces, &spec, on_host)?;
    if root && (estimate.seconds > budget::ANNOUNCE_S || plan.is_some()) {
        match &plan {
            Some(p) => eprintln!("{}", precision_mode::announce(p, &estimate)),
            None => eprintln!("{estimate}"),
        }
        if let Some(note) = walk_note(&spec) {
            eprintln!("note: {note}");
        }
    }
    let total = rank_phases(traces.len(), &spec);
    let terminal = std::io::stderr().is_terminal();
    let bar = progress_bar(root && terminal, total, plan.is_some())?;
    // The precision mode runs at least its pilot; how long beyond it, only its draws will say.
    let long = estimate.seconds > budget::TEXT_PROGRESS_S || plan.is_some();
    let lines = (root && !terminal && total > 0 && long)
        .then(|| TextProgress::start(bar.clone(), estimate.seconds, TEXT_PROGRESS_EVERY));
    let started = std::time::Instant::now();
    // The precision mode's measured estimates, above the bar where one is drawn.
    let say = |line: &str| {
        if root {
            bar.suspend(|| eprintln!("{line}"));
        }
    };
    let p = predict(comm, &traces, &spec, &bar, &say);
    if let Some(l) = lines {
        l.stop();
    }
    let p = p?;
    if !root {
        return Ok(());
    }
    bar.finish_and_clear();
    check_plausible(&p)?;
    if let Some(plan) = &plan {
        eprintln!("{}", precision_mode::summary(&p, plan, started.elapsed()));
    }
    let model = jitter_predict::platform::model_line(
        &spec.des.comm,
        spec.des.barrier.stage_ns,
        &spec.platform,
    );
    report(args, &traces, &spec, p, &model)
}

/// `replay-bench predict --windows-of RUN.json --trace T`: the prediction of the run's windows
/// beside its measurement, the verdict ([`jitter_report::verdict`]) and the check of the injections;
/// the report (`-o`) holds the row and [`WindowsOf`].
fn windows_of(args: &PredictArgs, request: &PredictRequest) -> anyhow::Result<()> {
    let path = args
        .windows_of
        .as_ref()
        .context("--windows-of names no run")?;
    let [trace] = args.traces.as_slice() else {
        anyhow::bail!(
            "--windows-of predicts one --trace, the run's (given: {})",
            args.traces.len()
        );
    };
    let p = window::predict_run(path, trace, request)?;
    let of = (p.report.config.predict.as_ref())
        .and_then(|d| d.windows_of.as_ref())
        .context("the prediction of the windows recorded no windows")?;
    print!("{}", window::render(&p.run, &p.row, of, p.scale));
    if let Some(o) = &args.output {
        p.report.save(o)?;
    }
    Ok(())
}

/// `predict --app`: the profile's main loop in place of the benchmark's (one process).
fn app(args: &PredictArgs, path: &std::path::Path, request: &PredictRequest) -> anyhow::Result<()> {
    let (traces, spec) = prepare(request)?;
    // The measured runs first: a bad report is named before the profile is read.
    let runs = (args.runs_of.as_deref())
        .map(|report| crate::app::runs_of(report, args.barriers_before))
        .transpose()?;
    let mut app = jitter_predict::app::App::read(path)?;
    app.runs = runs;
    jitter_predict::app::check(&spec, &traces)?;
    let estimate = jitter_predict::app::estimate(&app, &traces, &spec)?;
    budget::admit(&estimate, &budget::Limits::here(1), args.force)?;
    if estimate.seconds > budget::ANNOUNCE_S {
        eprintln!("{estimate}");
    }
    let p = jitter_predict::app::predict(&app, &traces, &spec)?;
    check_plausible(&p)?;
    report(args, &traces, &spec, p, &app.model_line(&spec))
}

/// Rank 0 checks its outputs and every process `--threads`; every process learns the outcome
/// before anything collective (the others leave quietly after rank 0 has spoken).
fn check_agreed(comm: &dyn Collective, args: &PredictArgs) -> anyhow::Result<()> {
    let online = jitter_collect::cpuset::online_cpus().map_or_else(
        |_| std::thread::available_parallelism().map_or(1, |n| n.get()),
        |c| c.len(),
    );
    let outputs = if comm.rank() == 0 {
        args.check_outputs()
    } else {
        Ok(())
    };
    let checked = outputs.and_then(|()| args.threads.map_or(Ok(()), |t| check_threads(t, online)));
    agreed_or_quiet(comm, checked)
}

/// `result` agreed by every process: rank 0 returns the error, the others wait a moment (the
/// launcher stops the job at the first non-zero exit) and leave with [`crate::OtherRankFailed`].
fn agreed_or_quiet<T>(comm: &dyn Collective, result: anyhow::Result<T>) -> anyhow::Result<T> {
    match agree(comm, result) {
        Ok(v) => Ok(v),
        Err(e) if comm.rank() == 0 => Err(e),
        Err(_) => {
            std::thread::sleep(Duration::from_millis(300));
            Err(crate::OtherRankFailed.into())
        }
    }
}

/// The global pool (the communicator cannot move into another pool's threads), with this
/// thread as its worker 0: the phase loop's parallel passes then start on a worker, so the
/// other workers steal from it instead of this thread handing each pass to the pool and
/// sleeping until it is done (a context switch per pass, 2 per phase), and MPI calls stay on
/// this thread. Built before the traces are read, which uses it too. Fails harmlessly when the
/// pool already exists (a second call).
fn start_pool(args: &PredictArgs, comm: &dyn Collective, on_host: usize) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(|| {
        let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
        let online = jitter_collect::cpuset::online_cpus().map_or(allowed, |c| c.len());
        default_threads(
            args.ranks.0.iter().max().copied().unwrap_or(1),
            comm.size() as u64,
            cores_of_process(allowed, online, on_host),
        )
    });
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .use_current_thread()
        .build_global();
    anyhow::ensure!(
        args.threads.is_none() || rayon::current_num_threads() == threads,
        "cannot set {threads} worker threads: the pool already has {}",
        rayon::current_num_threads()
    );
    Ok(())
}

/// The estimate, before anything large is allocated; every process checks its own share and
/// all agree, so that none is left waiting in a collective.
fn admitted(
    comm: &dyn Collective,
    args: &PredictArgs,
    traces: &[TraceInput],
    spec: &PredictSpec,
    on_host: usize,
) -> anyhow::Result<Estimate> {
    let (procs, me) = (comm.size() as u64, comm.rank() as u64);
    let threads = rayon::current_num_threads();
    let estimate = match &spec.precision {
        Some(plan) => precision_mode::pilot_estimate(traces, spec, plan, procs, threads),
        None => budget::estimate(traces, spec, procs, me, threads),
    };
    let admitted = budget::admit(&estimate, &budget::Limits::here(on_host), args.force);
    agreed_or_quiet(comm, admitted)?;
    Ok(estimate)
}

/// The progress bar of `total` rank-phases: drawn on a terminal, hidden otherwise. The
/// precision mode's length and time left are its own estimates (its message), re-made as its
/// draws run.
fn progress_bar(drawn: bool, total: u64, precise: bool) -> anyhow::Result<ProgressBar> {
    if drawn && total > 0 {
        let b = ProgressBar::new(total);
        let template = if precise {
            "{elapsed_precise} [{bar:40}] {percent:>3} % of {human_len} rank-phases ({msg})"
        } else {
            "{elapsed_precise} [{bar:40}] {percent:>3} % of {human_len} rank-phases ({eta} left)"
        };
        b.set_style(ProgressStyle::with_template(template)?.progress_chars("=> "));
        Ok(b)
    } else {
        Ok(ProgressBar::with_draw_target(
            Some(total),
            ProgressDrawTarget::hidden(),
        ))
    }
}

/// Rank 0: the drivers (`--drivers`), the model line, the table, what each trace kept, the
/// warnings, the report(s) and the plot.
fn report(
    args: &PredictArgs,
    traces: &[TraceInput],
    spec: &PredictSpec,
    mut p: Prediction,
    model: &str,
) -> anyhow::Result<()> {
    if args.drivers {
        let found = drivers_of(args, traces, spec)?;
        for d in &found {
            println!("drivers: {}", d.line());
        }
        if let Some(det) = p.des.as_mut().and_then(|r| r.config.predict.as_mut()) {
            det.drivers = found;
        }
    }
    println!("{model}");
    let rows = study_rows(&p);
    print!("{}", jitter_report::plot::render_table(&rows));
    for t in traces {
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
        let work = match spec.precision {
            Some(plan) => format!("precision {}", plan.precision),
            None => format!("{} phases", spec.des.phases),
        };
        jitter_report::plot::draw(
            &rows,
            jitter_report::plot::Metric::Qtbt,
            &format!("Predicted slowdown (95 % bands), q = {q}, {work}"),
            path,
        )?;
    }
    Ok(())
}

/// [`size_classes::drivers`] of every trace and mode at the largest rank count.
fn drivers_of(
    args: &PredictArgs,
    traces: &[TraceInput],
    spec: &PredictSpec,
) -> anyhow::Result<Vec<size_classes::Drivers>> {
    let n = spec.ranks.iter().copied().max().unwrap_or(1);
    let mut out = Vec::new();
    // The streams the prediction replays, as `load_traces` read them (the classes and the
    // variants without them are of those streams only).
    let k = args.ranks_per_node.k;
    for (path, input) in args.traces.iter().zip(traces) {
        let read = jitter_trace::read_replayed(path, |i, _| (i as u64) < k)
            .with_context(|| format!("cannot read trace {}", path.display()))?;
        (read.facts).accept(&path.display().to_string(), args.salvage.choice())?;
        for &mode in &spec.modes {
            out.push(size_classes::drivers(&read.trace, input, spec, n, mode)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
