//! `replay-bench profile`: what to do with an application profile (`JITTER_PROFILE=app.json`,
//! crate `jitter-profile`). `show` prints its summary: the main loop's calls with the compute
//! before each (mean with its 95 % interval, quantiles) and the ranks; given the `.ranks` folder
//! of a job whose rank 0 died, it merges the rank records first.
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
                jitter_profile::summary::render(&p, &profile.display().to_string())
            );
            Ok(())
        }
    }
}
