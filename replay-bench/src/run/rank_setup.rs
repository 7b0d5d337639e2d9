//! Steps 1–3 of a run: the inputs checked on every rank and agreed before anything else is
//! collective; the rank's counter, emulator cost, platform noise and work rate; the shared
//! seed; the plan of this rank's stream.

use anyhow::{bail, Context};
use jitter_collect::clock::Clock;
use jitter_emulator::{InjectionMode, Plan, ReplaySetup, SyncMode, SyncSchedule, TimerKind};

use super::host::{host_cost, host_name, online_cpus};
use super::state::{Prepared, RankSetup};
use super::trace::{load_rank_trace, LoadedTrace};
use crate::bench::baseline::{self, Baseline};
use crate::bench::kernel::WorkRate;
use crate::bench::mpi::Mpi;
use crate::bench::noise;
use crate::bench::replay::EmulatorCost;
use crate::flags::run::RunArgs;
use jitter_predict::comm::{agree, Collective};

/// How long each rank times its work loop (ns): longer than the slow stretches of a noisy vCPU.
pub(crate) const WORK_CALIBRATION_SPAN_NS: u64 = 400_000_000;

/// Steps 1–3: inputs checked on every rank and agreed before anything else is collective; the
/// rank's counter, emulator cost, platform noise and work rate; the shared seed; the plan of
/// this rank's stream.
pub(crate) fn prepare(comm: &Mpi, args: &RunArgs) -> anyhow::Result<Prepared> {
    let rank = comm.rank();
    let k = args.ranks_per_node.k;
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
        args.resolved_design()?;
        args.check_length()?;
        args.check_inject()?;
        if let Baseline::File(p) = &args.baseline {
            baseline::from_report(p, comm.size() as u64, args.quanta.ns)?;
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
    // S, f and the timer as given; the cost is this host's calibration (with the overrides), or
    // nothing when paying at calls (no timer, no handler: no calibration to measure).
    let given = args
        .replay
        .setup_over(&ReplaySetup::ideal(TimerKind::Abstime));
    let cost = match (&trace, args.inject.mode) {
        (None, _) | (Some(_), InjectionMode::Boundary) => EmulatorCost::default(),
        (Some(_), InjectionMode::Signal) => host_cost(comm, args, &clock, given.cost.timer)?,
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
    let iterations = agreed.iterations_for(args.quanta.ns as f64 * replay.scale.get());
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
        design: args.resolved_design()?,
    })
}

/// The files rank 0 writes at the end, checked (by `jitter_trace::output`'s rules) before
/// anything is measured: a run never ends in an output it cannot save.
pub(crate) fn check_outputs(args: &RunArgs) -> anyhow::Result<()> {
    use jitter_trace::output::check_output;
    if let Some(p) = &args.output {
        check_output(p, "-o", "a JSON report", &["json"])?;
    }
    if let Some(p) = &args.phases_csv {
        check_output(p, "--phases-csv", "a CSV table", &["csv"])?;
    }
    Ok(())
}
