//! Application profiles: what an unmodified MPI program does between and in its MPI calls,
//! recorded by `libjitter_preload.so` under `JITTER_PROFILE=app.json`.
//!
//! * `site` — a call site ([`Site`]: the call, bytes, communicator size, relative peer, root).
//! * `histogram` — the fixed-layout log-linear buckets of a compute interval's distribution.
//! * `record` — one rank's raw record, a file mapped into the rank ([`Recorder`]: the hot path).
//! * `sequence` — the main loop of a sequence of call shapes (set-up, variants, output).
//! * `structure` — a rank's loop: shapes, the compute per position, its time and `MPI_Init`'s.
//! * `profile` — the job's profile, merged from the rank records ([`Profile`]), and its file.
//! * `show` — the text summary (`profile show`).
//! * `peers` — how recorded peer offsets grow to any number of ranks (ring, Cartesian, P/2).
//! * `goal` — the main loop as LogGOPSim GOAL text at any number of ranks.
//! * `error` — [`ProfileError`].
//!
//! It links no MPI: the preload library calls the `PMPI_` functions and hands [`Site`]s in.

pub mod error;
pub mod goal;
pub mod histogram;
pub mod peers;
pub mod profile;
pub mod record;
pub mod sequence;
pub mod show;
pub mod site;
pub mod structure;

pub use error::ProfileError;
pub use profile::{Kind, MainLoop, Profile, Slot};
pub use record::{Identity, RankRecord, Recorder};
pub use site::{Call, Site};
