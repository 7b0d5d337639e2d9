//! `replay-bench`: run the Parallel Benchmark under MPI, or predict it in virtual time.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use replay_bench::run::{self, RunArgs};
use replay_bench::{plot, report::Report, table, OtherRankFailed};

/// The MPI Parallel Benchmark (paper 001, Algorithm 1) with the JitterEmulator inside.
/// `predict`'s options and the simulation engine.
#[derive(Debug, clap::Args)]
struct PredictCmd {
    #[command(flatten)]
    args: replay_bench::predict::PredictArgs,
    /// Simulation engine: indexed (search in the compiled plan; the walk where it is not exact)
    /// or walk (injection by injection).
    #[arg(long, value_enum, default_value_t = replay_bench::predict::Engine::Indexed)]
    engine: replay_bench::predict::Engine,
}

#[derive(Debug, Parser)]
#[command(name = "replay-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the benchmark under MPI (`mpirun -np N replay-bench run …` or `srun …`).
    Run(Box<RunArgs>),
    /// Time an unmodified MPI program with and without the trace, pair by pair, with an interval.
    App(Box<replay_bench::app::AppArgs>),
    /// Print the results of two reports side by side, matched by trace, ranks and sync; refused
    /// unless they replayed the same trace (by content) with the same quanta, scale and design.
    Compare(CompareArgs),
    /// Collect reports of a scaling study into one table and an SVG plot of SD vs ranks.
    PlotStudy(plot::PlotStudyArgs),
    /// Predict the slowdown in virtual time for many ranks (simulation or order statistics).
    Predict(Box<PredictCmd>),
    /// An application profile (`JITTER_PROFILE=app.json`): its summary, its LogGOPSim export.
    Profile(replay_bench::profile::ProfileArgs),
    /// Turn a demo folder (trace, calibration, runs, predictions) into report.md and headlines.
    Study(replay_bench::study::StudyArgs),
    /// Print the smallest scale factor that makes a share of a trace's detours injectable here.
    ChooseScale(replay_bench::study::ChooseScaleArgs),
    /// Real runs at 1 … cores processes and every sync mode beside the prediction: one table.
    Validate(Box<replay_bench::validate::ValidateArgs>),
    /// What each kernel source of an attributed trace costs at scale: predict's table for the
    /// trace without each source, with only it, and with every kernel source removed.
    Whatif(Box<replay_bench::predict::whatif::WhatIfArgs>),
}

#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// First report (e.g. a measurement).
    a: PathBuf,
    /// Second report (e.g. a prediction).
    b: PathBuf,
}

fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(a) => run::main(*a),
        Command::App(a) => replay_bench::app::main(&a),
        Command::Profile(a) => replay_bench::profile::main(&a),
        Command::Compare(a) => {
            let ra = Report::load(&a.a)?;
            let rb = Report::load(&a.b)?;
            let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
            for note in replay_bench::matching::check_compare(&ra, &rb, &na, &nb)? {
                eprintln!("warning: {note}");
            }
            print!(
                "{}",
                table::render_compare(
                    &ra,
                    &rb,
                    &a.a.display().to_string(),
                    &a.b.display().to_string()
                )
            );
            Ok(())
        }
        Command::PlotStudy(a) => plot::main(a),
        Command::Predict(a) => replay_bench::predict::main_with(a.args, a.engine),
        Command::Study(a) => replay_bench::study::study(&a),
        Command::ChooseScale(a) => replay_bench::study::choose_scale(&a),
        Command::Validate(a) => replay_bench::validate::main(&a),
        Command::Whatif(a) => replay_bench::predict::whatif::main(*a),
    }
}

fn main() {
    jitter_trace::cli::init();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // Under mpirun every rank parses the same arguments: let only rank 0 speak, and let
            // the others wait a moment, since the launcher kills the job at the first non-zero
            // exit (possibly before rank 0 has printed).
            let rank = replay_bench::launcher_rank().unwrap_or(0);
            if rank == 0 || !e.use_stderr() {
                std::process::exit(jitter_trace::cli::report_parse_error(&e));
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::process::exit(2);
        }
    };
    if let Err(e) = dispatch(cli) {
        if e.downcast_ref::<OtherRankFailed>().is_none() {
            eprintln!("error: {}", replay_bench::error_line(&e));
        }
        std::process::exit(1);
    }
}
