//! Every flag of `replay-bench`, in one place (as ripgrep's `flags/`): the command line
//! (`Cli`, `Command`), each command's options and the flags several commands share, each
//! defined once and flattened where it is taken. Parsing turns every value into its type (a
//! duration in ns, `RankCounts`, `PlatformChoice`, `SyncMode`, `Design`, `Model`; S, f, the
//! timer and O/L/M through `jitter_emulator_cli::ReplayArgs`): the library receives typed
//! options and never a string, and a command that starts another says its options back as
//! flags (`to_flags`).
//!
//! - `shared` — `--quanta` (`Quanta`), `--ranks-per-node` (`RanksPerNode`), `--sync` as a list
//!   (`SyncModes`), a prediction's `--phases` (`SimulatedPhases`) and `--seed` (`Seed`), rank
//!   counts and the platform choice; `duration` — the duration flags' parsers.
//! - `run`, `predict`, `validate`, `whatif`, `study` (and `choose-scale`), `reports`
//!   (`compare`, `plot-study`) — each command's options and the rules by which they fit
//!   together; `app` — `replay-bench app`'s (`AppArgs`). `--node-traces` is `shared`'s
//!   `NodeTraceArgs`. Every value parses into its type, most of them the libraries'
//!   (`jitter_predict::PredictRequest` is what `PredictArgs` asks).

pub mod app;
pub mod duration;
pub mod predict;
pub mod reports;
pub mod run;
pub mod shared;
pub mod study;
pub mod validate;
pub mod whatif;

use clap::{Parser, Subcommand};

pub use predict::{BarrierKind, PredictArgs, PredictCmd};
pub use reports::CompareArgs;
pub(crate) use reports::PlotStudyArgs;
pub(crate) use run::RunArgs;
pub use shared::{
    check_sync_modes, PlatformChoice, Quanta, RankCounts, RanksPerNode, Seed, SimulatedPhases,
    SyncModes,
};
pub(crate) use study::{ChooseInjectArgs, ChooseScaleArgs, StudyArgs};
pub(crate) use validate::ValidateArgs;
pub(crate) use whatif::WhatIfArgs;

// The command line of `replay-bench` (no doc comment: `about` is the package description).
#[derive(Debug, Parser)]
#[command(name = "replay-bench", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// The subcommands of `replay-bench`, each with its options.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the benchmark under MPI (`mpirun -np N replay-bench run …` or `srun …`).
    Run(Box<RunArgs>),
    /// Time an unmodified MPI program with and without the trace, pair by pair, with an interval.
    App(Box<app::AppArgs>),
    /// An application profile (`JITTER_PROFILE=app.json`): its summary, its LogGOPSim export.
    Profile(crate::profile_command::ProfileArgs),
    /// Print the results of two reports side by side, matched by trace, ranks and sync; refused
    /// unless they replayed the same trace (by content) with the same quanta, scale and design.
    Compare(CompareArgs),
    /// Collect reports of a scaling study into one table and an SVG plot of SD vs ranks.
    PlotStudy(PlotStudyArgs),
    /// Predict the slowdown in virtual time for many ranks (simulation or order statistics).
    Predict(Box<PredictCmd>),
    /// Turn a demo folder (trace, calibration, runs, predictions) into report.md and headlines.
    Study(StudyArgs),
    /// Print the smallest scale factor that makes a share of a trace's detours injectable here.
    ChooseScale(ChooseScaleArgs),
    /// Print how to inject a trace here (`signal` or `boundary`), and why on stderr: the
    /// signal where S ≤ 3 reproduces 90 % of the noise time, payment at MPI calls elsewhere.
    ChooseInject(ChooseInjectArgs),
    /// Real runs at 1 … cores processes and every sync mode beside the prediction: one table.
    Validate(Box<ValidateArgs>),
    /// What each kernel source of an attributed trace costs at scale: predict's table for the
    /// trace without each source, with only it, and with every kernel source removed.
    Whatif(Box<WhatIfArgs>),
}

#[cfg(test)]
mod tests;
