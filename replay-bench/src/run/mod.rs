//! `replay-bench run`: calibrate, measure the platform, then the Parallel Benchmark with one
//! in-process JitterEmulator per rank — baseline and jitter in paired, interleaved blocks
//! (default) or one after the other (`--design sequential`) — and report every slowdown with
//! its 95 % confidence interval.
//!
//! Every rank calls [`run`] with the same options (`crate::flags::run::RunArgs`) and goes
//! through the steps in order: `rank_setup` (inputs checked and agreed, the rank's counter,
//! emulator cost, noise and work rate, the plan of its stream; `trace` loads it, `host` holds
//! what one rank per host measures), `measure` (the baseline and the run), `gather` (rank 0
//! collects the ranks' calibrations and totals) and `results` (rank 0's report). `state`
//! holds what a rank carries from one step to the next.

mod gather;
mod host;
mod measure;
mod rank_setup;
mod results;
mod state;
mod trace;

use crate::bench::mpi::Mpi;
use crate::bench::run_summary;
use crate::flags::run::RunArgs;

// `replay-bench app` names the duration parsers here.

/// Runs `replay-bench run` on this rank with `comm` (every rank calls it; only rank 0 prints
/// and writes).
pub fn run(comm: &Mpi, args: &RunArgs) -> anyhow::Result<()> {
    let prepared = rank_setup::prepare(comm, args)?;
    let measured = measure::measure(comm, args, &prepared)?;
    let Some(gathered) = gather::gather(comm, args, &prepared, &measured)? else {
        return Ok(());
    };
    let (report, base) = results::build_report(comm, args, &prepared, &measured, gathered)?;
    run_summary::print_run(&report, base.as_ref(), &measured.outcome);
    if let Some(p) = &args.output {
        report.save(p)?;
    }
    if let Some(p) = &args.phases_csv {
        results::write_csv(p, &measured.outcome)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
