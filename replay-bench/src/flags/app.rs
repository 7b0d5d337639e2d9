//! The options of `replay-bench app` (`AppArgs`): the program, the trace, the pairs, the
//! library's settings, how it injects and what is measured (`Measure`).

use std::path::PathBuf;

use clap::Args;
use jitter_emulator::{InjectionMode, Scale, SyncMode};
use jitter_emulator_cli::SalvageArgs;
use regex::Regex;

use super::duration::{duration_flag, positive_duration_flag};

/// Default time limit of one run.
pub(crate) const DEFAULT_TIMEOUT: &str = "10m";

/// Options of `replay-bench app`.
#[derive(Debug, Clone, Args)]
pub struct AppArgs {
    /// Trace to replay in the program (.jtr).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Processes: runs `<launcher> -np N <command…>`; without it the command runs as given
    /// (write the launcher into it, e.g. `-- mpirun -np 2 ./solver`).
    #[arg(long)]
    pub np: Option<u64>,
    /// The launcher `--np` puts in front of the command.
    #[arg(long, default_value = "mpirun")]
    pub launcher: String,
    /// Counted pairs K (one run with, one without the library each); at least 2.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..))]
    pub runs: u64,
    /// Warm-up pairs run first, checked and not counted (the first run with the library on a
    /// host also calibrates its injector, about 20 s).
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
    /// What to measure: `loop` (the program's main loop, found and timed by the library's
    /// profile in both arms: what `predict --app` predicts), `wall` (the whole program, spawn
    /// to exit: start-up, set-up and output included), or a regular expression with one capture
    /// group around a number the program prints (the last match in its standard output; smaller
    /// is faster, like a time).
    #[arg(long, value_name = "loop|wall|REGEX", default_value = "loop", value_parser = measure_flag)]
    pub metric: Measure,
    /// Time limit of one run (ended with SIGTERM, then SIGKILL to its process group).
    #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = positive_duration_flag)]
    pub timeout: u64,
    /// How the library injects (`JITTER_INJECT`): `signal`, `boundary` (paid at MPI calls, S =
    /// 1), or `auto`: the signal where S ≤ 3 reproduces 90 % of the trace's noise time with this
    /// host's signal cost (its calibration cache, measured when missing), payment at calls
    /// elsewhere; the report says which and why.
    #[arg(long, default_value = "auto", value_name = "auto|signal|boundary", value_parser = inject_flag)]
    pub inject: InjectFlag,
    /// Scale factor S (`JITTER_SCALE`).
    #[arg(long, default_value_t = Scale::ONE)]
    pub scale: Scale,
    /// Sync mode of the library (`JITTER_SYNC`): none, once, phase (every MPI_Barrier), every:K.
    #[arg(long, default_value = "phase")]
    pub sync: SyncMode,
    /// Ranks per node k (`JITTER_RANKS_PER_NODE`); default the launcher's layout.
    #[arg(long)]
    pub ranks_per_node: Option<u64>,
    /// Seed of the order of each pair and of each run's `JITTER_SEED`.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// `libjitter_preload.so` (default: beside this program, as `cargo build --release` leaves it).
    #[arg(long, value_name = "FILE")]
    pub library: Option<PathBuf>,
    /// Probe this machine's own noise on this CPU for this long before the runs (0s: none).
    #[arg(long, default_value = "1s", value_parser = duration_flag)]
    pub platform_probe: u64,
    /// Write the report as JSON here.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// `--salvage`: replay a trace that lacks detours (`JITTER_SALVAGE=1` in the runs).
    #[command(flatten)]
    pub salvage: SalvageArgs,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// What a study measures (`--metric`).
#[derive(Debug, Clone)]
pub enum Measure {
    /// The main loop's time, from the profile the library records in both arms.
    Loop,
    /// The whole program's wall time, from spawn to exit.
    Wall,
    /// A number the program prints: the capture group of the regex's last match.
    Printed(Regex),
}

impl Measure {
    /// What the report says was measured.
    pub fn label(&self) -> String {
        match self {
            Measure::Loop => "main loop time, ns (the profile's loop, longest rank)".into(),
            Measure::Wall => "wall time, ns".into(),
            Measure::Printed(re) => format!("--metric '{}'", re.as_str()),
        }
    }
}

/// A `--metric` flag: `loop`, `wall` or a regular expression with one capture group.
pub(crate) fn measure_flag(s: &str) -> Result<Measure, String> {
    match s {
        "loop" => Ok(Measure::Loop),
        "wall" => Ok(Measure::Wall),
        _ => metric_flag(s).map(Measure::Printed),
    }
}

/// `app --inject`: a mode, or `auto` (`None`: chosen by measuring).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectFlag(pub Option<InjectionMode>);

/// An `--inject` flag: `auto` or a mode.
fn inject_flag(s: &str) -> Result<InjectFlag, String> {
    match s.trim() {
        "auto" => Ok(InjectFlag(None)),
        other => other
            .parse()
            .map(|m| InjectFlag(Some(m)))
            .map_err(|e: jitter_emulator::PlanError| format!("{e} (or auto)")),
    }
}

/// A `--metric` flag: a regular expression with exactly one capture group.
pub(crate) fn metric_flag(s: &str) -> Result<Regex, String> {
    let re = Regex::new(s).map_err(|e| format!("not a regular expression: {e}"))?;
    if re.captures_len() != 2 {
        return Err(format!(
            "give exactly one capture group around the number, e.g. 'time: ([0-9.]+)' ({} given)",
            re.captures_len() - 1
        ));
    }
    Ok(re)
}
