//! `replay-bench`: the MPI Parallel Benchmark with the JitterEmulator inside, and its
//! virtual-time predictor. Both write the same report schema.

pub mod app;
pub mod baseline;
pub mod bench;
pub mod comm;
pub mod comparison;
pub mod kernel;
pub mod matching;
pub mod metrics;
pub mod noise;
pub mod plot;
pub mod predict;
pub mod profile;
pub mod replay;
pub mod report;
pub mod run;
pub mod study;
pub mod table;
pub mod validate;
pub mod verdict;
pub mod windows;

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
