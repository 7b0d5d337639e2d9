//! The pairs of a study: their order and seeds drawn from one seed, each run launched with the
//! environment of its arm (the library and the `JITTER_*` variables, or neither), its metric
//! read, and what the library said it injected.
//!
//! The default metric is the program's main loop time ([`Measure::Loop`]): both arms run with
//! the library recording a profile (`JITTER_PROFILE`, the same cost in both), whose merge finds
//! the loop in each rank's calls and times it from the end of the call before its first
//! iteration to the end of its last (`jitter_profile::structure`); the run's value is the
//! longest rank's loop time, and the library's start-up (its part of `MPI_Init`) and each rank's
//! point at the loop's start are kept beside it. Wall time and a printed number are the others.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use regex::Regex;
use serde::{Deserialize, Serialize};

use jitter_collect::clock::Clock;
use jitter_emulator::{Scale, SyncMode};
use jitter_profile::structure::RankTiming;
use jitter_profile::Profile;

use super::launch::{self, Launch, Outcome, RunStatus};
use crate::flags::app::Measure;

/// With or without the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// The program as it is.
    Without,
    /// The program with `libjitter_preload.so` replaying the trace.
    With,
}

impl std::fmt::Display for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arm::Without => "without the library",
            Arm::With => "with the library",
        })
    }
}

/// One pair of runs in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// Index, warm-up pairs first.
    pub index: u64,
    /// A warm-up pair: run, checked, not counted.
    pub warmup: bool,
    /// The two arms in their drawn order.
    pub order: [Arm; 2],
    /// `JITTER_SEED` of its run with the library (its start offset and resync points).
    pub jitter_seed: u64,
}

/// `warmup` then `runs` pairs; each pair's order (a fair coin) and library seed from `seed`.
pub fn schedule(seed: u64, warmup: u64, runs: u64) -> Vec<Pair> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..warmup + runs)
        .map(|index| {
            let order = if rng.random_bool(0.5) {
                [Arm::With, Arm::Without]
            } else {
                [Arm::Without, Arm::With]
            };
            Pair {
                index,
                warmup: index < warmup,
                order,
                jitter_seed: rng.random_range(0..1u64 << 53),
            }
        })
        .collect()
}

/// One run as the report keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Its pair.
    pub pair: u64,
    /// Part of a warm-up pair.
    pub warmup: bool,
    /// Its arm.
    pub arm: Arm,
    /// How it ended.
    pub status: RunStatus,
    /// Wall time from start to exit, ns.
    pub wall_ns: u64,
    /// The number `--metric` read from its output, if asked.
    pub metric: Option<f64>,
    /// `JITTER_SEED` of a run with the library.
    pub jitter_seed: Option<u64>,
    /// What the library's `summary.json` says (runs with the library; None when it wrote none).
    pub library: Option<LibrarySummary>,
    /// The main loop's time, ns (`--metric loop`): the longest rank's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_ns: Option<u64>,
    /// Iterations of the loop timed (rank 0's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_iterations: Option<u64>,
    /// The library's part of `MPI_Init` (trace, calibration, plan, record), ns: the longest
    /// rank's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_ns: Option<u64>,
    /// Each rank's loop timing, by rank (`--metric loop`): where its replay stood when the
    /// loop began (`predict --app --runs-of`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankTiming>,
}

impl RunRecord {
    /// The measured value: the printed metric if asked, else the loop's time if timed, else the
    /// wall time.
    pub fn value(&self) -> Option<f64> {
        (self.metric)
            .or(self.loop_ns.map(|ns| ns as f64))
            .or(Some(self.wall_ns as f64))
    }
}

/// The fields of the preload library's `summary.json` a study reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LibrarySummary {
    /// Ranks of the run.
    pub ranks: u64,
    /// Ranks whose statistics were found.
    pub reported: u64,
    /// Σ injections.
    pub injected: u64,
    /// Mean over ranks of the share of their time spent in injected detours.
    pub noise_share: f64,
    /// Ranks whose replay reached the end of the trace before `MPI_Finalize`.
    pub exhausted: Vec<u64>,
    /// Longest replay of a rank (`MPI_Init` to `MPI_Finalize`), ns: the span `noise_share`
    /// divides by (absent in reports older than it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_elapsed_ns: Option<u64>,
}

/// What every run of a study shares.
#[derive(Debug, Clone)]
pub(crate) struct StudySetup {
    /// The whole command line (launcher included).
    pub argv: Vec<String>,
    /// `libjitter_preload.so`.
    pub library: PathBuf,
    /// The trace, absolute.
    pub trace: PathBuf,
    /// `JITTER_SCALE`.
    pub scale: Scale,
    /// `JITTER_SYNC`.
    pub sync: SyncMode,
    /// `JITTER_RANKS_PER_NODE`.
    pub ranks_per_node: Option<u64>,
    /// `--metric`.
    pub measure: Measure,
    /// Time limit of one run.
    pub limit: Duration,
    /// Folder of the library's statistics, one sub-folder per pair.
    pub stats_dir: PathBuf,
    /// `JITTER_SALVAGE=1` (`--salvage`).
    pub salvage: bool,
    /// `JITTER_INJECT`.
    pub inject: jitter_emulator::InjectionMode,
}

/// The number in the first capture group of the last match of `re` in `text`: a finite
/// number above zero. The metric is a time (smaller is faster) whose slowdown is 100 · d̄ / ā:
/// a value of zero or below has no slowdown whose sign or interval means anything
/// (`metrics::paired_slowdown`), so it stops the study at the run that printed it.
pub(crate) fn read_metric(re: &Regex, text: &str) -> Result<f64, String> {
    let caps = re
        .captures_iter(text)
        .last()
        .ok_or_else(|| format!("its output has no match of --metric '{}'", re.as_str()))?;
    let s = caps.get(1).map_or("", |m| m.as_str());
    let v = s
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("--metric captured '{s}', which is not a finite number"))?;
    if v <= 0.0 {
        return Err(format!(
            "--metric captured '{s}': a metric is a time, above zero (smaller is faster), and \
             a slowdown relative to {s} has no sign to read; capture a time the program prints"
        ));
    }
    Ok(v)
}

/// A run that ended the study: its record and why.
#[derive(Debug)]
pub(crate) struct Stop {
    /// The run as recorded.
    pub record: RunRecord,
    /// Why it stops the study.
    pub reason: String,
}

/// The environment of one arm: the library's variables from the caller's environment are
/// removed in both arms (a stray `JITTER_TRACE` must not turn the baseline into a replay).
fn environment(
    s: &StudySetup,
    arm: Arm,
    pair: &Pair,
) -> (Vec<(&'static str, OsString)>, Vec<String>) {
    let remove: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("JITTER_"))
        .collect();
    let mut set = Vec::new();
    if matches!(s.measure, Measure::Loop) {
        // Both arms record the profile the loop is timed from.
        set.push(("LD_PRELOAD", preload(&s.library)));
        set.push((
            "JITTER_PROFILE",
            profile_path(&s.stats_dir, pair, arm).into_os_string(),
        ));
    }
    if arm == Arm::With {
        if !matches!(s.measure, Measure::Loop) {
            set.push(("LD_PRELOAD", preload(&s.library)));
        }
        set.push(("JITTER_TRACE", s.trace.clone().into_os_string()));
        set.push(("JITTER_INJECT", s.inject.to_string().into()));
        set.push(("JITTER_SCALE", s.scale.to_string().into()));
        set.push(("JITTER_SYNC", s.sync.to_string().into()));
        set.push(("JITTER_SEED", pair.jitter_seed.to_string().into()));
        set.push((
            "JITTER_STATS_DIR",
            pair_dir(&s.stats_dir, pair).into_os_string(),
        ));
        if let Some(k) = s.ranks_per_node {
            set.push(("JITTER_RANKS_PER_NODE", k.to_string().into()));
        }
        if s.salvage {
            set.push(("JITTER_SALVAGE", "1".into()));
        }
    }
    (set, remove)
}

/// `LD_PRELOAD` with the library first (the caller's own preloads after it).
fn preload(library: &Path) -> OsString {
    let mut preload = library.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    preload
}

fn pair_dir(root: &Path, pair: &Pair) -> PathBuf {
    root.join(format!("pair-{}", pair.index))
}

/// The profile a run of `arm` records (`--metric loop`).
fn profile_path(root: &Path, pair: &Pair, arm: Arm) -> PathBuf {
    let name = match arm {
        Arm::Without => "without.json",
        Arm::With => "with.json",
    };
    pair_dir(root, pair).join(name)
}

/// The loop's time of a run from the profile it recorded; `Err`: why there is none.
fn loop_timing(path: &Path) -> Result<(u64, u64, u64, Vec<RankTiming>), String> {
    let p = Profile::read(path).map_err(|e| {
        format!(
            "the library wrote no profile to time the loop from ({}): a program the library \
             does not intercept (static MPI, no MPI_Init) cannot be timed by its loop; give \
             --metric wall",
            jitter_trace::error::chain_line(&e)
        )
    })?;
    if p.main_loop.is_none() {
        return Err(format!(
            "no main loop in its profile (no sequence of calls repeats three times; \
             `replay-bench profile show {}` says what was recorded): give --metric wall",
            path.display()
        ));
    }
    let timings: Vec<RankTiming> = p.reported.iter().filter_map(|r| r.timing).collect();
    let loop_ns = timings.iter().filter_map(RankTiming::loop_ns).max();
    let Some(loop_ns) = loop_ns.filter(|&ns| ns > 0) else {
        return Err("its profile times no loop on any rank: give --metric wall".into());
    };
    let startup = timings.iter().map(|t| t.startup_ns).max().unwrap_or(0);
    let iterations = timings.first().map_or(0, |t| t.iterations);
    Ok((loop_ns, iterations, startup, timings))
}

fn library_summary(dir: &Path) -> Option<LibrarySummary> {
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Runs one arm of `pair`; `Err(Stop)` for a run that failed (status, time limit, metric).
pub(crate) fn run_arm(
    s: &StudySetup,
    clock: &Clock,
    pair: &Pair,
    arm: Arm,
) -> anyhow::Result<Result<RunRecord, Stop>> {
    let (set, remove) = environment(s, arm, pair);
    // The library writes the profile and the statistics into the pair's folder, and refuses
    // an output whose folder does not exist: it exists before either arm runs.
    let dir = pair_dir(&s.stats_dir, pair);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let l = Launch {
        argv: &s.argv,
        set,
        remove,
        limit: s.limit,
    };
    let out: Outcome = launch::run(clock, &l)
        .with_context(|| format!("cannot start {}", s.argv.first().map_or("", |p| p)))?;
    let mut record = RunRecord {
        pair: pair.index,
        warmup: pair.warmup,
        arm,
        status: out.status,
        wall_ns: out.wall_ns,
        metric: None,
        jitter_seed: (arm == Arm::With).then_some(pair.jitter_seed),
        library: (arm == Arm::With)
            .then(|| library_summary(&pair_dir(&s.stats_dir, pair)))
            .flatten(),
        loop_ns: None,
        loop_iterations: None,
        startup_ns: None,
        ranks: Vec::new(),
    };
    let what = format!("pair {} {arm}", pair.index);
    if !out.status.success() {
        // The reason: the last `error:` line (the library's, a rank's), else the last line
        // that is not a launcher's banner rule.
        let lines: Vec<&str> = (out.stderr_tail.lines())
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("---"))
            .collect();
        let last = (lines.iter().rev().find(|l| l.contains("error:")))
            .or(lines.last())
            .copied();
        let reason = match out.status {
            RunStatus::TimedOut => format!(
                "{what} did not finish within --timeout {} s and was ended",
                s.limit.as_secs_f64()
            ),
            st => format!(
                "{what} failed ({st}){}",
                last.map_or(String::new(), |l| format!(": {l}"))
            ),
        };
        return Ok(Err(Stop { record, reason }));
    }
    match &s.measure {
        Measure::Printed(re) => match read_metric(re, &out.stdout) {
            Ok(v) => record.metric = Some(v),
            Err(e) => {
                return Ok(Err(Stop {
                    record,
                    reason: format!("{what}: {e}"),
                }))
            }
        },
        Measure::Loop => match loop_timing(&profile_path(&s.stats_dir, pair, arm)) {
            Ok((ns, iterations, startup, ranks)) => {
                record.loop_ns = Some(ns);
                record.loop_iterations = Some(iterations);
                record.startup_ns = Some(startup);
                record.ranks = ranks;
            }
            Err(e) => {
                return Ok(Err(Stop {
                    record,
                    reason: format!("{what}: {e}"),
                }))
            }
        },
        Measure::Wall => {}
    }
    Ok(Ok(record))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_a_pure_function_of_the_seed_and_balances_the_order() {
        let a = schedule(7, 2, 400);
        assert_eq!(a, schedule(7, 2, 400));
        assert_ne!(a, schedule(8, 2, 400));
        assert_eq!(a.len(), 402);
        assert!(a[..2].iter().all(|p| p.warmup) && a[2..].iter().all(|p| !p.warmup));
        for p in &a {
            assert_ne!(p.order[0], p.order[1]);
        }
        // A fair coin over 400 pairs: with-first within 200 ± 4σ (σ = 10).
        let first = a[2..].iter().filter(|p| p.order[0] == Arm::With).count();
        assert!((160..=240).contains(&first), "{first}");
        let seeds: std::collections::HashSet<u64> = a.iter().map(|p| p.jitter_seed).collect();
        assert_eq!(seeds.len(), a.len());
    }

    #[test]
    fn the_metric_is_the_last_match_s_group_and_anything_else_is_an_error() {
        let re = Regex::new(r"time=(\S+) s").unwrap();
        assert_eq!(read_metric(&re, "time=1.5 s\ntime=2.25 s\n"), Ok(2.25));
        assert!(read_metric(&re, "nothing")
            .unwrap_err()
            .contains("no match"));
        assert!(read_metric(&re, "time=abc s")
            .unwrap_err()
            .contains("'abc'"));
        assert!(read_metric(&re, "time=inf s").is_err());
        let e = read_metric(&re, "time=-6.25 s").unwrap_err();
        assert!(
            e.starts_with("--metric captured '-6.25': a metric is a time"),
            "{e}"
        );
        assert!(read_metric(&re, "time=0 s").is_err());
    }
}
