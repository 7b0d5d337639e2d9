//! `replay-bench`: the MPI Parallel Benchmark with the JitterEmulator inside, and its
//! virtual-time predictor. Both write the same report schema.

pub mod baseline;
pub mod bench;
pub mod comm;
pub mod kernel;
pub mod metrics;
pub mod noise;
pub mod plot;
pub mod predict;
pub mod replay;
pub mod report;
pub mod run;
pub mod study;
pub mod table;

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

/// An error and its causes as one line joined by ": ", leaving out a cause whose text the
/// message before it already contains.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}
