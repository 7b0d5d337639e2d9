//! The MPI Parallel Benchmark (Algorithm 1 of paper 001) as its commands use it: the phase loop
//! and its paired blocks (`phases`), the work of a compute phase (`kernel`), the collectives it
//! needs under MPI (`mpi`: `jitter_predict::comm::Collective` over MPI), one rank's emulator (`replay`), the platform's own
//! noise before a run (`noise`), the no-jitter reference (`baseline`), the stretches of the trace
//! a run replayed (`windows`) and the summary rank 0 prints (`run_summary`). Nothing here reads the
//! command line: `run` takes the parsed options and calls these.

pub mod baseline;
pub mod kernel;
pub(crate) mod mpi;
pub mod noise;
pub mod phases;
pub mod replay;
pub(crate) mod run_summary;
pub mod windows;
