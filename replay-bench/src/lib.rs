//! `replay-bench`: the binary over the libraries `jitter-predict` (the predictor) and
//! `jitter-report` (the reports), with the two products that run real programs: the MPI
//! Parallel Benchmark (Algorithm 1 of paper 001) with one JitterEmulator per rank, and the
//! harness that times an unmodified MPI program with and without the trace.
//!
//! - `flags` — every command's options, parsed into types (`Cli`, `PredictArgs`, …); below
//!   everything here but the libraries; `commands` — the entry point of each subcommand;
//! - `bench` — the benchmark's parts (phase loop, kernel, MPI collectives, one rank's emulator,
//!   platform noise, baseline, windows, the run's summary), which read no flags; `run` — one
//!   rank's steps of `replay-bench run`; `validate` — real runs beside the prediction;
//! - `app` — the harness (`replay-bench app`); `profile_command` — `replay-bench profile`;
//! - `launcher_rank`, `error_line` and `OtherRankFailed`: what every command does about MPI
//!   ranks and errors.

pub mod app;
pub(crate) mod bench;
pub mod commands;
pub mod flags;
pub mod profile_command;
pub(crate) mod run;
pub(crate) mod validate;

pub use jitter_cli::error_line;

/// A failure already reported (by rank 0, before the ranks left): exit non-zero silently.
#[derive(Debug, thiserror::Error)]
#[error("failed; rank 0 reported the error")]
pub struct OtherRankFailed;

/// This process's rank as the launcher (mpirun, mpiexec, srun) announced it, before MPI starts.
pub fn launcher_rank() -> Option<u64> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "MV2_COMM_WORLD_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}
