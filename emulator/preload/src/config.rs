//! The environment of the preload library: the `JITTER_*` variables (the table in
//! `docs/USAGE.md`) and the rank layout the MPI launcher exports.

use std::path::PathBuf;

use jitter_emulator::placement::{self, Slot};
use jitter_emulator::{InjectionMode, Scale, SyncMode, TimerKind};
use jitter_trace::Salvage;

/// Every variable the library reads, in the order of the table in `docs/USAGE.md`.
pub const VARIABLES: [&str; 10] = [
    "JITTER_TRACE",
    "JITTER_INJECT",
    "JITTER_SCALE",
    "JITTER_SYNC",
    "JITTER_RANKS_PER_NODE",
    "JITTER_SEED",
    "JITTER_TIMER",
    "JITTER_STATS_DIR",
    "JITTER_SALVAGE",
    "JITTER_PROFILE",
];

/// Statistics directory when `JITTER_STATS_DIR` is unset (relative to the working directory).
pub(crate) const DEFAULT_STATS_DIR: &str = "jitter-stats";

/// Seed when `JITTER_SEED` is unset: fixed, so that runs repeat; set the variable to vary them.
pub(crate) const DEFAULT_SEED: u64 = 0;

/// What the user asked for through `JITTER_*`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `JITTER_TRACE`: the `.jtr` file to replay.
    pub trace: PathBuf,
    /// `JITTER_INJECT`: signal (default: a timer signal per detour) or boundary (detours paid
    /// at the rank's MPI calls).
    pub inject: InjectionMode,
    /// `JITTER_SCALE`: the scale factor S (default 1).
    pub scale: Scale,
    /// `JITTER_SYNC`: none, once, phase (resync at every `MPI_Barrier`) or every:K (default phase).
    pub sync: SyncMode,
    /// `JITTER_RANKS_PER_NODE`: k, rank r replays stream r mod k on node r / k (default: the
    /// launcher's layout).
    pub ranks_per_node: Option<u64>,
    /// `JITTER_SEED`: the seed of offsets and resync points, shared by all ranks.
    pub seed: u64,
    /// `JITTER_TIMER`: abstime (default) or itimer.
    pub timer: TimerKind,
    /// `JITTER_STATS_DIR`: where the per-rank files and the summary go.
    pub stats_dir: PathBuf,
    /// `JITTER_SALVAGE`: `1` goes on with a trace that lacks detours (ring loss, damage,
    /// truncation), `0` or unset refuses it (`--salvage` of the other tools).
    pub salvage: Salvage,
}

fn bad(var: &str, value: &str, want: &str) -> String {
    format!("{var}='{value}' is not valid: {want}")
}

impl Config {
    /// Reads the variables through `get`; `Ok(None)` when `JITTER_TRACE` is unset (the library
    /// is then a transparent no-op), `Err` naming the variable for a bad value or an empty
    /// `JITTER_TRACE`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, String> {
        let Some(trace) = get("JITTER_TRACE") else {
            return Ok(None);
        };
        if trace.trim().is_empty() {
            // Set but empty is a script's unset variable, not a wish for no emulation.
            return Err(
                "JITTER_TRACE is set but empty: give the .jtr file to replay, or unset \
                        it to run without the emulator"
                    .to_string(),
            );
        }
        let set = |var: &str| get(var).filter(|v| !v.trim().is_empty());
        let scale = match set("JITTER_SCALE") {
            None => Scale::ONE,
            Some(v) => v
                .parse::<Scale>()
                .map_err(|e| format!("JITTER_SCALE='{v}': {e}"))?,
        };
        let sync = match set("JITTER_SYNC") {
            None => SyncMode::Phase,
            Some(v) => v
                .trim()
                .parse::<SyncMode>()
                .map_err(|e| format!("JITTER_SYNC='{v}': {e}"))?,
        };
        let ranks_per_node = match set("JITTER_RANKS_PER_NODE") {
            None => None,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(k) if k >= 1 => Some(k),
                _ => return Err(bad("JITTER_RANKS_PER_NODE", &v, "give a whole number ≥ 1")),
            },
        };
        let seed = match set("JITTER_SEED") {
            None => DEFAULT_SEED,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map_err(|_| bad("JITTER_SEED", &v, "give a whole number ≥ 0"))?,
        };
        let inject = match set("JITTER_INJECT") {
            None => InjectionMode::Signal,
            Some(v) => v
                .parse::<InjectionMode>()
                .map_err(|e| format!("JITTER_INJECT='{v}': {e}"))?,
        };
        let timer = match set("JITTER_TIMER") {
            None => TimerKind::Abstime,
            Some(v) => v
                .trim()
                .parse::<TimerKind>()
                .map_err(|e| format!("JITTER_TIMER='{v}': {e}"))?,
        };
        let salvage = match set("JITTER_SALVAGE").as_deref().map(str::trim) {
            None | Some("0") => Salvage::Refuse,
            Some("1") => Salvage::Keep,
            Some(v) => return Err(bad("JITTER_SALVAGE", v, "give 1 (go on) or 0 (refuse)")),
        };
        let stats_dir =
            set("JITTER_STATS_DIR").map_or_else(|| DEFAULT_STATS_DIR.into(), PathBuf::from);
        Ok(Some(Config {
            trace: PathBuf::from(trace),
            inject,
            scale,
            sync,
            ranks_per_node,
            seed,
            timer,
            stats_dir,
            salvage,
        }))
    }
}

/// `JITTER_PROFILE`: the profile file to write (`Ok(None)`: unset, no profile), an error when
/// it is set but empty. Independent of `JITTER_TRACE`: a profile needs no trace.
pub fn profile_path(get: impl Fn(&str) -> Option<String>) -> Result<Option<PathBuf>, String> {
    match get("JITTER_PROFILE") {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Err(
            "JITTER_PROFILE is set but empty: give the file to write the profile to (app.json), \
             or unset it"
                .to_string(),
        ),
        Some(v) => Ok(Some(PathBuf::from(v))),
    }
}

/// Where this rank sits, from the variables the launcher exports (OpenMPI, MPICH/Hydra, PMIx,
/// Slurm, MVAPICH), so that no MPI handle is needed before `MPI_Init` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Rank in `MPI_COMM_WORLD` (0 for a singleton run).
    pub rank: u64,
    /// Ranks in `MPI_COMM_WORLD` (1 for a singleton run).
    pub size: u64,
    /// Rank among the ranks of this host, if the launcher says.
    pub local_rank: Option<u64>,
    /// This host's name.
    pub host: String,
    /// The launcher's job id, tagging the statistics files of one run.
    pub job: String,
}

const RANK_VARS: [&str; 5] = [
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "MV2_COMM_WORLD_RANK",
];
const SIZE_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "SLURM_NTASKS",
    "MV2_COMM_WORLD_SIZE",
];
const LOCAL_RANK_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "SLURM_LOCALID",
    "MV2_COMM_WORLD_LOCAL_RANK",
];
const JOB_VARS: [&str; 4] = [
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "PMI_ID",
    "SLURM_JOB_ID",
];

fn first_number(
    get: &impl Fn(&str) -> Option<String>,
    vars: &[&str],
) -> Result<Option<u64>, String> {
    for var in vars {
        if let Some(v) = get(var) {
            return v
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| bad(var, &v, "the launcher set a rank that is not a number"));
        }
    }
    Ok(None)
}

impl Layout {
    /// Reads the launcher's variables through `get`; `host` is this host's name.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>, host: &str) -> Result<Layout, String> {
        let rank = first_number(&get, &RANK_VARS)?.unwrap_or(0);
        let size = first_number(&get, &SIZE_VARS)?
            .unwrap_or(rank + 1)
            .max(rank + 1);
        let local_rank = first_number(&get, &LOCAL_RANK_VARS)?;
        let job = JOB_VARS.iter().find_map(|v| get(v)).unwrap_or_default();
        Ok(Layout {
            rank,
            size,
            local_rank,
            host: host.to_string(),
            job,
        })
    }

    /// The rank's rank only, for error messages before the layout could be read.
    pub(crate) fn rank_hint(get: impl Fn(&str) -> Option<String>) -> Option<u64> {
        first_number(&get, &RANK_VARS).ok().flatten()
    }

    /// Where this rank replays (`jitter_emulator::placement::slot`, the rule of `run` and
    /// `predict`). With k = `ranks_per_node`: node r / k, local rank r mod k. Without it, the
    /// launcher's layout: the host is the node and the local rank is the launcher's. Local rank
    /// j replays stream j mod s; ranks beyond the trace's s streams on a node replay copies on
    /// timelines of their own.
    pub fn assignment(&self, ranks_per_node: Option<u64>, streams: usize) -> Result<Slot, String> {
        let streams = streams as u64;
        if streams == 0 {
            return Err("the trace has no streams".into());
        }
        let (node, local) = match ranks_per_node {
            Some(k) => (self.rank / k, self.rank % k),
            None => (host_node_id(&self.host), self.local_rank.unwrap_or(0)),
        };
        Ok(placement::slot(node, local, streams))
    }
}

/// A node number for `host` (`jitter_emulator::placement::host_node_id`, shared with the
/// predictions of a run of this library).
pub use jitter_emulator::placement::host_node_id;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn jitter_profile_is_a_path_or_unset_and_empty_is_an_error() {
        assert_eq!(profile_path(env(&[])).unwrap(), None);
        assert_eq!(
            profile_path(env(&[("JITTER_PROFILE", "app.json")])).unwrap(),
            Some(PathBuf::from("app.json"))
        );
        assert!(profile_path(env(&[("JITTER_PROFILE", " ")]))
            .unwrap_err()
            .starts_with("JITTER_PROFILE is set but empty"));
    }

    #[test]
    fn an_unset_trace_is_a_no_op_an_empty_one_an_error_and_defaults_fill_the_rest() {
        assert_eq!(Config::from_vars(env(&[])).unwrap(), None);
        for empty in ["", "  "] {
            assert_eq!(
                Config::from_vars(env(&[("JITTER_TRACE", empty), ("JITTER_SCALE", "2")]))
                    .unwrap_err(),
                "JITTER_TRACE is set but empty: give the .jtr file to replay, or unset it to \
                 run without the emulator"
            );
        }
        let c = Config::from_vars(env(&[("JITTER_TRACE", "t.jtr")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.trace, PathBuf::from("t.jtr"));
        assert_eq!(c.inject, InjectionMode::Signal);
        assert_eq!(
            (c.scale, c.sync, c.ranks_per_node, c.seed),
            (Scale::ONE, SyncMode::Phase, None, DEFAULT_SEED)
        );
        assert_eq!(
            (c.timer, c.stats_dir, c.salvage),
            (
                TimerKind::Abstime,
                PathBuf::from(DEFAULT_STATS_DIR),
                Salvage::Refuse
            )
        );
        let c = Config::from_vars(env(&[
            ("JITTER_TRACE", "t.jtr"),
            ("JITTER_SCALE", "2.5"),
            ("JITTER_SYNC", "every:4"),
            ("JITTER_RANKS_PER_NODE", "8"),
            ("JITTER_SEED", "17"),
            ("JITTER_TIMER", "itimer"),
            ("JITTER_STATS_DIR", "/tmp/s"),
            ("JITTER_SALVAGE", "1"),
            ("JITTER_INJECT", "boundary"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.salvage, Salvage::Keep);
        assert_eq!(c.inject, InjectionMode::Boundary);
        assert_eq!(
            (c.scale, c.sync, c.ranks_per_node, c.seed),
            (Scale::new(2.5).unwrap(), SyncMode::Every(4), Some(8), 17)
        );
        assert_eq!(
            (c.timer, c.stats_dir),
            (TimerKind::Itimer, PathBuf::from("/tmp/s"))
        );
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        for (var, value) in [
            ("JITTER_SCALE", "fast"),
            ("JITTER_SCALE", "0"),
            ("JITTER_SCALE", "-1"),
            ("JITTER_SCALE", "inf"),
            ("JITTER_SYNC", "always"),
            ("JITTER_SYNC", "every:0"),
            ("JITTER_RANKS_PER_NODE", "0"),
            ("JITTER_RANKS_PER_NODE", "two"),
            ("JITTER_SEED", "-3"),
            ("JITTER_TIMER", "hpet"),
            ("JITTER_SALVAGE", "yes"),
            ("JITTER_INJECT", "timer"),
        ] {
            let e = Config::from_vars(env(&[("JITTER_TRACE", "t.jtr"), (var, value)])).unwrap_err();
            assert!(e.contains(var) && e.contains(value), "{var}={value}: {e}");
        }
    }

    #[test]
    fn the_layout_comes_from_whichever_launcher_ran_the_program() {
        let l = Layout::from_vars(
            env(&[
                ("OMPI_COMM_WORLD_RANK", "5"),
                ("OMPI_COMM_WORLD_SIZE", "8"),
                ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
                ("OMPI_MCA_ess_base_jobid", "42"),
            ]),
            "n1",
        )
        .unwrap();
        assert_eq!(
            (l.rank, l.size, l.local_rank, l.job.as_str()),
            (5, 8, Some(1), "42")
        );
        let l = Layout::from_vars(
            env(&[
                ("SLURM_PROCID", "3"),
                ("SLURM_NTASKS", "4"),
                ("SLURM_LOCALID", "3"),
            ]),
            "n",
        )
        .unwrap();
        assert_eq!((l.rank, l.size, l.local_rank), (3, 4, Some(3)));
        let l = Layout::from_vars(env(&[]), "n").unwrap();
        assert_eq!((l.rank, l.size, l.local_rank), (0, 1, None));
        assert!(Layout::from_vars(env(&[("PMI_RANK", "x")]), "n").is_err());
        assert_eq!(Layout::rank_hint(env(&[("PMI_RANK", "7")])), Some(7));
    }

    #[test]
    fn streams_and_nodes_follow_the_placement_rule_with_k_or_the_host() {
        let at = |rank, local| Layout {
            rank,
            size: 8,
            local_rank: local,
            host: "h".into(),
            job: String::new(),
        };
        // k given: node r / k, local rank r mod k, the shared rule.
        assert_eq!(
            at(5, Some(1)).assignment(Some(4), 4).unwrap(),
            placement::slot(1, 1, 4)
        );
        let s = at(5, Some(1)).assignment(Some(4), 4).unwrap();
        assert_eq!((s.timeline, s.stream, s.copy), (1, 1, 0));
        // k above the streams: ranks 0 and 1 of node 0 both replay stream 0 of a one-stream
        // trace, on different timelines (no longer an error).
        let (a, b) = (
            at(0, None).assignment(Some(2), 1).unwrap(),
            at(1, None).assignment(Some(2), 1).unwrap(),
        );
        assert_eq!((a.stream, b.stream, a.timeline), (0, 0, 0));
        assert_ne!(a.timeline, b.timeline);
        // Not given: the host is the node, the local rank picks the stream and the copy.
        let l0 = at(4, Some(0)).assignment(None, 2).unwrap();
        let l3 = at(7, Some(3)).assignment(None, 2).unwrap();
        let l1 = at(5, Some(1)).assignment(None, 2).unwrap();
        assert_eq!((l0.stream, l1.stream, l3.stream), (0, 1, 1));
        assert_eq!(
            (l0.timeline, l1.timeline),
            (host_node_id("h"), host_node_id("h"))
        );
        assert_eq!(l3, placement::slot(host_node_id("h"), 3, 2));
        assert_ne!(l3.timeline, l1.timeline);
        assert_ne!(host_node_id("a"), host_node_id("b"));
        assert!(host_node_id("a") >= 1 << 63);
        assert!(at(0, None).assignment(None, 0).is_err());
    }
}
