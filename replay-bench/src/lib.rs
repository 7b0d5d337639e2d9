//! `replay-bench`: the MPI Parallel Benchmark with the JitterEmulator inside, and its
//! virtual-time predictor. Both write the same report schema.

pub mod metrics;
pub mod report;
