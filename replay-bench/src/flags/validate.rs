//! The options of `replay-bench validate` (`ValidateArgs`) and the outputs they name, checked
//! before the first run.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use jitter_emulator::InjectionMode;
use jitter_emulator_cli::{ReplayArgs, SalvageArgs};
use jitter_trace::units::parse_positive_duration;

use super::duration::duration_flag;
use super::shared::{Quanta, RankCounts, Seed, SimulatedPhases, SyncModes};

/// Options of `replay-bench validate`.
#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// Trace to replay and predict (.jtr).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Process counts, e.g. `1,2` (default: 1 … this machine's CPUs).
    #[arg(long)]
    pub ranks: Option<RankCounts>,
    /// The sync modes of the runs and the prediction.
    #[command(flatten)]
    pub sync: SyncModes,
    /// Work quanta q of one phase.
    #[command(flatten)]
    pub quanta: Quanta,
    /// How the runs inject, comma separated: `signal` (the timer signal, with S, the timer and
    /// O/L/M below), `boundary` (paid at MPI calls, at S = 1); both run side by side, each
    /// against its own prediction.
    #[arg(
        long,
        value_name = "signal,boundary",
        value_delimiter = ',',
        default_value = "signal,boundary"
    )]
    pub inject: Vec<InjectionMode>,
    /// S, f, the timer and O/L/M, the same for the runs and the prediction (the signal
    /// injector's; paying at calls takes f alone).
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Whether the runs and the prediction go on with a trace that lacks detours.
    #[command(flatten)]
    pub salvage: SalvageArgs,
    /// Period of each real run (the paired design runs baseline and jitter blocks for it).
    #[arg(long, default_value = "5s", value_parser = parse_positive_duration)]
    pub period: Duration,
    /// Phases of each prediction.
    #[command(flatten)]
    pub phases: SimulatedPhases,
    /// Seed of the runs and the prediction.
    #[command(flatten)]
    pub seed: Seed,
    /// Folder for the run reports and logs (default: `validate-<trace stem>`).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Write the table as JSON here.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw SD eq. (3) against processes here (SVG): measured points with their 95 % bars
    /// beside the predicted curves.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Record the machine's own noise on the runs' CPUs for this long before the runs
    /// (`platform.jtr`), and predict the trace on top of it (`predict --platform-noise`); 0s
    /// predicts on a noise-free machine.
    #[arg(long, default_value = "10s", value_parser = duration_flag)]
    pub platform_probe: u64,
    /// Offset draws of the whole-trace prediction shown beside each run (its range).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub draws: u64,
    /// MPI launcher (`mpirun`, `mpiexec`).
    #[arg(long, default_value = "mpirun")]
    pub mpirun: String,
}

impl ValidateArgs {
    /// The table, the plot and the folder of the runs, checked before the first run (which may
    /// be an hour before the table is written).
    pub(crate) fn check_outputs(&self) -> anyhow::Result<()> {
        use jitter_trace::output::check_output;
        if let Some(p) = &self.output {
            check_output(p, "-o", "a JSON table", &["json"])?;
        }
        if let Some(p) = &self.plot {
            check_output(p, "--plot", "an SVG image", &["svg"])?;
        }
        if let Some(d) = &self.dir {
            if d.exists() && !d.is_dir() {
                anyhow::bail!("--dir {} is not a folder", d.display());
            }
        }
        Ok(())
    }

    /// The replay flags of the runs and the prediction of one injection mode: as given for the
    /// signal injector; f alone paying at calls (S = 1, no timer, no O, L or M).
    pub(crate) fn replay_for(&self, mode: InjectionMode) -> ReplayArgs {
        match mode {
            InjectionMode::Signal => self.replay,
            InjectionMode::Boundary => ReplayArgs {
                fraction: self.replay.fraction,
                ..ReplayArgs::default()
            },
        }
    }

    /// The injection modes, each once, in the order given.
    pub(crate) fn inject_modes(&self) -> Vec<InjectionMode> {
        let mut v = self.inject.clone();
        v.dedup();
        if v.len() == 2 && v[0] == v[1] {
            v.pop();
        }
        v
    }

    /// The process counts: `--ranks` or 1 … the CPUs this process may use.
    pub(crate) fn rank_counts(&self) -> Vec<u64> {
        match &self.ranks {
            Some(r) => r.0.clone(),
            None => {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
                (1..=n).collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_counts_are_given_or_this_machines() {
        let args = |extra: &[&str]| {
            #[derive(clap::Parser)]
            struct Cmd {
                #[command(flatten)]
                validate: ValidateArgs,
            }
            let argv = ["validate", "--trace", "t.jtr"]
                .iter()
                .chain(extra)
                .copied();
            <Cmd as clap::Parser>::try_parse_from(argv)
                .unwrap()
                .validate
        };
        assert_eq!(args(&["--ranks", "1,2"]).rank_counts(), vec![1, 2]);
        assert_eq!(args(&[]).rank_counts()[0], 1);
    }
}
