//! `replay-bench`: the MPI Parallel Benchmark (Algorithm 1 of paper 001) with one
//! JitterEmulator per rank, and its virtual-time predictor. Both write the same report schema.
//!
//! What it offers beyond its binary (the API its tests, benchmarks and the `tests` crate use):
//! - `flags` — every command's options, parsed into types (`Cli`, `PredictArgs`, …), and
//!   `commands` — the entry point of each subcommand;
//! - `predict` — the predictor as a library: traces prepared (`TraceInput`, `prepare`), the
//!   simulation and the analytic tier (`predict`, `simulate`, `order_stats`), what drives a
//!   prediction (`drivers`) and what-if variants (`whatif`);
//! - `report` — the one report schema of runs and predictions; `comparison` and `verdict` —
//!   a measurement beside a prediction and the one rule it is judged by; `study` — a demo
//!   folder's headlines; `app` — an unmodified MPI program timed with and without the trace;
//! - `launcher_rank`, `error_line` and `OtherRankFailed`: what every command does about MPI
//!   ranks and errors.
//!
//! Everything else is internal (`pub(crate)`): the benchmark's phase loop (`bench`, `kernel`,
//! `comm`, `replay`, `noise`, `baseline`, `metrics`, `windows`), `run` and `validate` behind
//! their commands, and the tables and charts (`table`, `plot`, `matching`).

pub mod app;
pub(crate) mod bench;
pub mod commands;
pub mod flags;
pub mod predict;
pub mod profile;
pub(crate) mod run;
pub(crate) mod validate;

pub use jitter_trace::cli::error_line;

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
