//! The flags `run`, `predict` and `validate` share, each defined once and flattened into the
//! commands that take it (`#[command(flatten)]`), with the typed values they parse into. Each
//! says itself back as flags (`to_flags`) for a command that starts another (`validate`).

use std::path::PathBuf;

use clap::Args;
use jitter_emulator::{InjectionMode, SyncMode};
pub use jitter_predict::platform::PlatformChoice;
pub use jitter_predict::request::check_sync_modes;

use super::duration::positive_duration_flag;

/// `--quanta`: the work quanta q of one phase (`run`, `predict`, `validate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct Quanta {
    /// Work quanta q of one compute phase.
    #[arg(
        long = "quanta",
        id = "quanta",
        value_name = "QUANTA",
        default_value = "1ms",
        value_parser = positive_duration_flag
    )]
    pub ns: u64,
}

impl Quanta {
    /// The flag as `run` parses it back.
    pub fn to_flags(&self) -> Vec<String> {
        vec!["--quanta".into(), format!("{}ns", self.ns)]
    }
}

/// `--inject`: how detours get into a rank of a real run (`run`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct Inject {
    /// How detours get into a rank: `signal` (a timer signal at each due time; the calibrated
    /// O, L, M apply and S makes short detours injectable) or `boundary` (paid at the rank's MPI
    /// calls, inside them at their time: no O, L or M, every detour at S = 1; docs/METHOD.md).
    #[arg(
        long = "inject",
        id = "inject",
        value_name = "signal|boundary",
        default_value = "signal"
    )]
    pub mode: InjectionMode,
}

impl Inject {
    /// The flag as `run` parses it back.
    pub fn to_flags(&self) -> Vec<String> {
        vec!["--inject".into(), self.mode.to_string()]
    }
}

/// `--ranks-per-node`: k ranks of a node, rank r replaying stream r mod k (`run`, `predict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct RanksPerNode {
    /// Ranks per emulated node k: rank r replays stream r mod k, node r / k shares one offset.
    #[arg(
        long = "ranks-per-node",
        id = "ranks_per_node",
        value_name = "RANKS_PER_NODE",
        default_value_t = 1,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub k: u64,
}

/// `--sync` as a list: the sync modes of a table's rows (`predict`, `validate`).
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct SyncModes {
    /// Sync modes, comma separated: none, once, phase, every:K.
    #[arg(
        long = "sync",
        id = "sync",
        value_name = "SYNC",
        value_delimiter = ',',
        default_value = "none,once,phase"
    )]
    pub modes: Vec<SyncMode>,
}

impl SyncModes {
    /// At least one mode, each once (a mode listed twice would be two identical rows of every
    /// table).
    pub fn check(&self) -> anyhow::Result<()> {
        check_sync_modes(&self.modes)
    }

    /// The modes as one comma-separated value.
    pub fn list(&self) -> String {
        let names: Vec<String> = self.modes.iter().map(SyncMode::to_string).collect();
        names.join(",")
    }
}

/// `--phases` of a prediction: how many phases each point simulates (`predict`, `validate`).
/// Not given, `predict` runs its precision mode and `validate` [`SimulatedPhases::DEFAULT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct SimulatedPhases {
    /// Phases to simulate in each prediction (fixes the work: no precision mode)
    /// [default with --draws or in validate: 2000].
    #[arg(long = "phases", id = "phases", value_name = "PHASES")]
    pub count: Option<u64>,
}

impl SimulatedPhases {
    /// Phases where a fixed count is needed and none was given.
    pub(crate) const DEFAULT: u64 = 2000;

    /// The count given, else [`SimulatedPhases::DEFAULT`].
    pub fn or_default(&self) -> u64 {
        self.count.unwrap_or(Self::DEFAULT)
    }
}

/// `--seed` of a prediction: offsets, resync points and timer errors (`predict`, `validate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct Seed {
    /// Seed of offsets, resync points and timer errors.
    #[arg(long = "seed", id = "seed", value_name = "SEED", default_value_t = 1)]
    pub value: u64,
}

/// Rank counts to predict, strictly increasing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankCounts(pub Vec<u64>);

impl std::str::FromStr for RankCounts {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<RankCounts> {
        parse_ranks(s).map(RankCounts)
    }
}

impl std::fmt::Display for RankCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&names.join(","))
    }
}

/// Parses `16..65536` (powers of two from the first to at most the second) or `16,100,1000`
/// (strictly increasing); every count must be at least 1.
pub(crate) fn parse_ranks(text: &str) -> anyhow::Result<Vec<u64>> {
    let num = |s: &str| -> anyhow::Result<u64> {
        s.trim()
            .replace('_', "")
            .parse::<u64>()
            .map_err(|_| anyhow::anyhow!("`{s}` in --ranks `{text}` is not a rank count"))
    };
    let v = if let Some((a, b)) = text.split_once("..") {
        let (a, b) = (num(a)?, num(b)?);
        anyhow::ensure!(
            a >= 1,
            "--ranks `{text}`: the rank count must be at least 1"
        );
        anyhow::ensure!(b >= a, "--ranks `{text}`: the range must be increasing");
        let mut v = vec![a];
        while let Some(n) = v.last().and_then(|n| n.checked_mul(2)).filter(|&n| n <= b) {
            v.push(n);
        }
        v
    } else {
        let v = text
            .split(',')
            .map(num)
            .collect::<anyhow::Result<Vec<u64>>>()?;
        anyhow::ensure!(
            v.iter().all(|&n| n >= 1),
            "--ranks `{text}`: the rank count must be at least 1"
        );
        anyhow::ensure!(
            v.windows(2).all(|w| w[0] < w[1]),
            "--ranks `{text}`: the rank counts must be strictly increasing"
        );
        v
    };
    Ok(v)
}

/// `--node-traces`, the same in `run` and `predict`.
#[derive(Debug, Clone, Default, Args)]
pub struct NodeTraceArgs {
    /// Node traces of a cluster-wide collection (.jtr, one per node; comma separated or several
    /// after the flag, e.g. `nodes/*.jtr`): node group g of ranks (ranks g·k … g·k+k−1, k =
    /// --ranks-per-node) replays trace g mod n, rank r stream r mod k of it; every trace needs
    /// at least k streams.
    #[arg(long = "node-traces", value_name = "FILE", value_delimiter = ',', num_args = 1..)]
    pub node_traces: Vec<PathBuf>,
}
