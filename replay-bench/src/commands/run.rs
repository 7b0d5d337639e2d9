//! `replay-bench run`'s entry point: MPI started and finalised around the library's
//! [`crate::run::run`], and an error agreed by every rank said once, by rank 0.

use std::time::Duration;

use anyhow::Context;

use crate::bench::mpi::Mpi;
use crate::flags::run::RunArgs;
use crate::run::run;
use jitter_predict::comm::Collective;

/// Runs `replay-bench run` on this rank (every rank calls it; only rank 0 prints and writes).
pub fn main(args: RunArgs) -> anyhow::Result<()> {
    let universe = mpi::initialize().context("MPI is not available or already initialised")?;
    let comm = Mpi::new(universe.world());
    let result = run(&comm, &args);
    let rank = comm.rank();
    let agreed = result
        .as_ref()
        .err()
        .is_some_and(|e| e.downcast_ref::<jitter_predict::comm::Agreed>().is_some());
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
