//! `replay-bench profile`: what to do with an application profile (`JITTER_PROFILE=app.json`,
//! crate `jitter-profile`). `show` prints its summary: the main loop's calls with the compute
//! before each (mean with its 95 % interval, quantiles) and the ranks; given the `.ranks` folder
//! of a job whose rank 0 died, it merges the rank records first. `goal` writes the main loop as
//! LogGOPSim GOAL text at any number of ranks (`jitter_profile::goal`, whose rules the file's
//! first line repeats).
//!
//! Here rather than in `jitter-trace`: a profile is not a trace, `jitter-trace` sits below every
//! crate that could read one, and `replay-bench` is where a profile is used (`app`, and the
//! skeleton's export and prediction).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use jitter_profile::Profile;

/// `replay-bench profile …`.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    command: ProfileCommand,
}

#[derive(Debug, Subcommand)]
enum ProfileCommand {
    /// Print a profile's summary: the main loop, the compute before each of its calls, the ranks.
    Show {
        /// The profile (`app.json`), or the folder of rank records of a job that did not finish
        /// (`app.json.ranks`).
        profile: PathBuf,
    },
    /// Write the main loop as a LogGOPSim GOAL schedule (text, for `txt2bin`) at N ranks.
    Goal(GoalArgs),
}

/// `replay-bench profile goal`.
#[derive(Debug, Args)]
pub(crate) struct GoalArgs {
    /// The profile (`app.json`) or a folder of rank records.
    profile: PathBuf,
    /// Ranks of the schedule.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    ranks: u64,
    /// Iterations of the loop [default: the profile's].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    iterations: Option<u64>,
    /// The GOAL file to write (`.goal`).
    #[arg(short, long)]
    output: PathBuf,
}

fn goal(a: &GoalArgs) -> anyhow::Result<()> {
    use std::io::Write;
    jitter_trace::output::check_output(
        &a.output,
        "--output",
        "a LogGOPSim GOAL schedule (text)",
        &["goal", "txt"],
    )?;
    let p = load(&a.profile)?;
    let Some(l) = p.main_loop.as_ref() else {
        anyhow::bail!(
            "{}: the profile has no main loop (no sequence of calls repeats three times): \
             nothing to export",
            a.profile.display()
        );
    };
    let spec = jitter_profile::goal::GoalSpec {
        ranks: a.ranks,
        iterations: a.iterations.unwrap_or(l.iterations).max(1),
        profiled_ranks: p.ranks,
        cartesian: p.cartesian.clone(),
    };
    jitter_trace::output::write_output(&a.output, |w| {
        let mut b = std::io::BufWriter::new(w);
        jitter_profile::goal::write_goal(l, &spec, &mut b)?;
        b.flush()
            .map_err(|e| jitter_profile::ProfileError::io(&a.output.display().to_string(), e))
    })?;
    eprintln!(
        "{}: {} iterations of {} calls at {} ranks",
        a.output.display(),
        spec.iterations,
        l.slots.len(),
        spec.ranks
    );
    Ok(())
}

/// Reads the profile at `path` (a file or a folder of rank records).
pub fn load(path: &std::path::Path) -> anyhow::Result<Profile> {
    Profile::read(path).with_context(|| format!("cannot read the profile {}", path.display()))
}

/// Runs `replay-bench profile`.
pub fn main(args: &ProfileArgs) -> anyhow::Result<()> {
    match &args.command {
        ProfileCommand::Show { profile } => {
            let p = load(profile)?;
            print!(
                "{}",
                jitter_profile::show::render(&p, &profile.display().to_string())
            );
            Ok(())
        }
        ProfileCommand::Goal(a) => goal(a),
    }
}
