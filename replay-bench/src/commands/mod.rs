//! The commands of `replay-bench`: one entry point per subcommand, from its parsed options
//! (`crate::flags`) to what it prints and writes. This layer starts MPI, sets up threads and
//! progress, and turns errors into exit codes through `main.rs`; the work itself is the
//! library's (`run`, `predict`, `validate`, `study`, `plot`, `formats`, `app`).
//!
//! - `run` — `replay-bench run` under MPI; `predict` — `replay-bench predict` (threads,
//!   budget, progress, the table, reports and plot); `validate` — real runs beside the
//!   prediction; `whatif` — the what-if table, JSON, CSV and chart; `reports` — `compare` and
//!   `plot-study`; `study` — `study` and `choose-scale`.

pub mod predict;
pub mod reports;
pub mod run;
pub mod study;
pub mod validate;
pub mod whatif;

use crate::flags::{Cli, Command};

/// Runs the command `cli` names.
pub fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(a) => run::main(*a),
        Command::App(a) => crate::app::main(&a),
        Command::Profile(a) => crate::profile_command::main(&a),
        Command::Compare(a) => reports::compare(&a),
        Command::PlotStudy(a) => reports::plot_study(a),
        Command::Predict(a) => predict::main(*a),
        Command::Study(a) => study::study(&a),
        Command::ChooseScale(a) => study::choose_scale(&a),
        Command::ChooseInject(a) => study::choose_inject(&a),
        Command::Validate(a) => validate::main(&a),
        Command::Whatif(a) => whatif::main(*a),
    }
}
