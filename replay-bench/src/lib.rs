//! `replay-bench`: the MPI Parallel Benchmark with the JitterEmulator inside, and its predictor.
