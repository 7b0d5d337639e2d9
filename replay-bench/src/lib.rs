//! `replay-bench`: the MPI Parallel Benchmark with the JitterEmulator inside, and its
//! virtual-time predictor. Both write the same report schema.

pub mod baseline;
pub mod bench;
pub mod comm;
pub mod kernel;
pub mod metrics;
pub mod predict;
pub mod noise;
pub mod report;
