//! What the preload library writes at `MPI_Finalize`: one `rank-<r>.json` per rank, and rank 0's
//! `summary.json` (the run's settings and the per-rank counts added up) next to them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use jitter_emulator::plan::TimerKind;
use jitter_emulator::{InjectionMode, InjectorStats, LedgerStats};

pub(crate) use crate::paying::CallCounts;

/// What a rank paying at its calls (`JITTER_INJECT=boundary`) did besides the injector's counts.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct BoundaryStats {
    /// What it paid, by class, what it missed, and the plan's counts.
    pub ledger: LedgerStats,
    /// What its calls did.
    pub calls: CallCounts,
}
use jitter_trace::summary::mean;

/// One rank's replay, as written to `rank-<r>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankStats {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: u64,
    /// The launcher's job id (the summary adds up only files of its own job).
    pub job: String,
    /// Host name.
    pub host: String,
    /// Timeline of the sync schedule (`jitter_emulator::placement::slot`): the node's number for
    /// the first s ranks of a node (they share its start offset), one of its own for a copy.
    pub node: u64,
    /// Stream of the trace replayed.
    pub stream: usize,
    /// Copy of the trace on its node (`jitter_emulator::placement`): 0 for the first s ranks
    /// of a node, c ≥ 1 for ranks beyond the trace's s streams (their own timeline).
    #[serde(default)]
    pub copy: u64,
    /// Start offset on the trace's timeline, trace ns.
    pub offset_ns: u64,
    /// O and M this rank's plan used, ns: its host's calibration as this rank read it (the
    /// ranks of a host measure it again when the cached one was taken on a busy machine).
    #[serde(default)]
    pub overhead_ns: u64,
    /// See `overhead_ns`.
    #[serde(default)]
    pub min_sleep_ns: u64,
    /// `MPI_Barrier` calls seen (phases ended).
    pub barriers: u64,
    /// Resyncs performed (at barriers, per `JITTER_SYNC`).
    pub resyncs: u64,
    /// Share of the stream replayed by `MPI_Finalize` (1: the trace ran out before the program).
    pub progress: f64,
    /// The injector's counts: injected, dropped, merged, injected_ns, busy_ns, lateness, …
    #[serde(flatten)]
    pub injector: InjectorStats,
    /// How detours got into the rank (`JITTER_INJECT`).
    #[serde(default)]
    pub inject: InjectionMode,
    /// Paying at calls: the account and the calls' counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<BoundaryStats>,
}

/// Rank 0's `summary.json`: the settings of the run and the ranks' counts added up.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// `JITTER_TRACE`.
    pub trace: String,
    /// S.
    pub scale: f64,
    /// `JITTER_SYNC`.
    pub sync: String,
    /// `JITTER_SEED`.
    pub seed: u64,
    /// `JITTER_TIMER`.
    pub timer: TimerKind,
    /// `JITTER_RANKS_PER_NODE`, if given.
    pub ranks_per_node: Option<u64>,
    /// O, L, M used by rank 0's plan, ns.
    pub overhead_ns: u64,
    /// L, ns.
    pub lateness_ns: u64,
    /// M, ns.
    pub min_sleep_ns: u64,
    /// Ranks of the run.
    pub ranks: u64,
    /// Ranks whose file was found (and belongs to this job).
    pub reported: u64,
    /// Ranks whose file is missing.
    pub missing: Vec<u64>,
    /// Σ injections executed.
    pub injected: u64,
    /// Σ detours dropped (S·run ≤ O).
    pub dropped: u64,
    /// Σ detours merged (S·sleep < M).
    pub merged: u64,
    /// Σ intended span of the injections, ns.
    pub injected_ns: u64,
    /// Σ busy time of the injections, ns.
    pub busy_ns: u64,
    /// Longest replay (start to stop), ns.
    pub max_elapsed_ns: u64,
    /// Mean over ranks of injected_ns / elapsed_ns: the share of its time each rank lost.
    pub noise_share: f64,
    /// Ranks whose replay reached the end of the trace before `MPI_Finalize`.
    pub exhausted: Vec<u64>,
    /// What the trace lacks (ring loss, damage, truncation) where it lacks anything: the share
    /// of it the replay was built from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<jitter_trace::Integrity>,
    /// Ranks that replay a copy of the trace's streams on a timeline of their own (more ranks
    /// on a node than the trace has streams: the placement rule).
    #[serde(default)]
    pub copies: u64,
    /// `JITTER_INJECT`.
    #[serde(default)]
    pub inject: InjectionMode,
    /// Paying at calls: the ranks' accounts and counts added up, and the least faithful rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<BoundarySummary>,
}

/// The ranks' [`BoundaryStats`] added up.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct BoundarySummary {
    /// Σ of the ranks' accounts.
    pub ledger: LedgerStats,
    /// Σ of the ranks' call counts (the worst phase share: the least over ranks).
    pub calls: CallCounts,
    /// The smallest share of a rank's met detours it paid.
    pub min_rank_detour_share: f64,
    /// The smallest share of a rank's met noise time it paid.
    pub min_rank_time_share: f64,
}

impl BoundarySummary {
    fn add(&mut self, b: &BoundaryStats) {
        self.ledger.merge(&b.ledger);
        let (c, d) = (&mut self.calls, &b.calls);
        c.calls += d.calls;
        c.polled += d.polled;
        c.blocking += d.blocking;
        c.without_twin += d.without_twin;
        c.phases.merge(&d.phases);
        self.min_rank_detour_share = self.min_rank_detour_share.min(b.ledger.detour_share());
        self.min_rank_time_share = self.min_rank_time_share.min(b.ledger.time_share());
    }

    /// The summary line's part: shares paid, where, and how late.
    pub fn line(&self) -> String {
        let (l, p) = (&self.ledger, self.ledger.paid());
        format!(
            "paid at MPI calls: {:.3} % of the detours met and {:.3} % of their time (least \
             rank {:.3} %, {:.3} %); at the next call {}, inside a polled call {}, after a \
             blocking call {}; lateness p50 ≤ {} ns, p99 ≤ {} ns; {} calls, {} polled",
            l.detour_share() * 100.0,
            l.time_share() * 100.0,
            self.min_rank_detour_share * 100.0,
            self.min_rank_time_share * 100.0,
            l.at_boundary.injections,
            l.in_call.injections,
            l.on_return.injections,
            p.lateness_quantile_bound_ns(0.5),
            p.lateness_quantile_bound_ns(0.99),
            self.calls.calls,
            self.calls.polled,
        )
    }
}

/// `dir/rank-<rank>.json`.
pub fn rank_path(dir: &Path, rank: u64) -> PathBuf {
    dir.join(format!("rank-{rank}.json"))
}

/// `dir/summary.json`.
pub fn summary_path(dir: &Path) -> PathBuf {
    dir.join("summary.json")
}

/// Writes `stats` to its rank file in `dir` (created if missing).
pub(crate) fn write_rank(dir: &Path, stats: &RankStats) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = rank_path(dir, stats.rank);
    write_json(&path, stats)?;
    Ok(path)
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let json = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    jitter_trace::output::write_output_bytes(path, json.as_bytes())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The rank files of `job` for ranks `0..size` in `dir`, waiting up to `wait` for late ones;
/// returns those found and the ranks missing.
pub fn collect(dir: &Path, size: u64, job: &str, wait: Duration) -> (Vec<RankStats>, Vec<u64>) {
    let deadline = Instant::now() + wait;
    let mut found: Vec<Option<RankStats>> = vec![None; size as usize];
    loop {
        for (r, slot) in found.iter_mut().enumerate().filter(|(_, s)| s.is_none()) {
            let read = std::fs::read_to_string(rank_path(dir, r as u64)).ok();
            *slot = read
                .and_then(|s| serde_json::from_str::<RankStats>(&s).ok())
                .filter(|s| s.job == job && s.rank == r as u64);
        }
        if found.iter().all(Option::is_some) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let missing = (0..size).filter(|&r| found[r as usize].is_none()).collect();
    (found.into_iter().flatten().collect(), missing)
}

impl Summary {
    /// Adds up `ranks` into `self` (whose settings are filled), with `missing` ranks noted.
    pub(crate) fn add_up(mut self, ranks: &[RankStats], missing: Vec<u64>) -> Summary {
        self.reported = ranks.len() as u64;
        self.missing = missing;
        for r in ranks {
            self.injected += r.injector.injected;
            self.dropped += r.injector.dropped;
            self.merged += r.injector.merged;
            self.injected_ns += r.injector.injected_ns;
            self.busy_ns += r.injector.busy_ns;
            self.max_elapsed_ns = self.max_elapsed_ns.max(r.injector.elapsed_ns);
            if r.progress >= 1.0 {
                self.exhausted.push(r.rank);
            }
            self.copies += u64::from(r.copy > 0);
            if let Some(b) = &r.boundary {
                self.boundary
                    .get_or_insert(BoundarySummary {
                        min_rank_detour_share: 1.0,
                        min_rank_time_share: 1.0,
                        ..BoundarySummary::default()
                    })
                    .add(b);
            }
        }
        let shares: Vec<f64> = ranks
            .iter()
            .filter(|r| r.injector.elapsed_ns > 0)
            .map(|r| r.injector.injected_ns as f64 / r.injector.elapsed_ns as f64)
            .collect();
        self.noise_share = mean(&shares).unwrap_or(0.0);
        self
    }

    /// Writes `dir/summary.json`.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, String> {
        let path = summary_path(dir);
        write_json(&path, self)?;
        Ok(path)
    }

    /// The one line rank 0 prints on stderr.
    pub fn line(&self, dir: &Path) -> String {
        let mut s = format!(
            "{} of {} ranks ({} injection): injected {} detours ({:.1} ms, {:.1} % of the \
             replay), dropped {}, merged {}; statistics in {}",
            self.reported,
            self.ranks,
            self.inject,
            self.injected,
            self.injected_ns as f64 / 1e6,
            self.noise_share * 100.0,
            self.dropped,
            self.merged,
            dir.display()
        );
        if let Some(b) = &self.boundary {
            s += &format!("; {}", b.line());
        }
        if let Some(kept) = self.integrity.as_ref().and_then(|i| i.kept_line()) {
            s += &format!("; trace {kept}");
        }
        if !self.missing.is_empty() {
            s += &format!("; no file from ranks {:?}", self.missing);
        }
        if self.copies > 0 {
            s += &format!(
                "; {} ranks replay copies of the trace's streams on offsets of their own (more \
                 ranks on a node than streams: docs/METHOD.md, placement)",
                self.copies
            );
        }
        if !self.exhausted.is_empty() {
            s += &format!(
                "; the trace ran out before MPI_Finalize on ranks {:?} (no noise after that: use a \
                 longer trace or a smaller JITTER_SCALE)",
                self.exhausted
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(r: u64, job: &str, injected: u64, injected_ns: u64, elapsed_ns: u64) -> RankStats {
        RankStats {
            rank: r,
            job: job.into(),
            host: "h".into(),
            node: 0,
            copy: 0,
            stream: 0,
            offset_ns: 0,
            overhead_ns: 0,
            min_sleep_ns: 0,
            barriers: 3,
            resyncs: 2,
            progress: 0.5,
            injector: InjectorStats {
                injected,
                injected_ns,
                elapsed_ns,
                dropped: 1,
                merged: 2,
                ..InjectorStats::default()
            },
            inject: InjectionMode::Signal,
            boundary: None,
        }
    }

    fn empty() -> Summary {
        Summary {
            trace: "t".into(),
            scale: 1.0,
            sync: "phase".into(),
            seed: 0,
            timer: TimerKind::Abstime,
            ranks_per_node: None,
            overhead_ns: 0,
            lateness_ns: 0,
            min_sleep_ns: 0,
            ranks: 3,
            ..Summary::default()
        }
    }

    #[test]
    fn rank_files_round_trip_and_only_this_jobs_files_add_up() {
        let dir = tempfile::tempdir().unwrap();
        write_rank(dir.path(), &rank(0, "j", 10, 1_000, 10_000)).unwrap();
        write_rank(dir.path(), &rank(1, "j", 30, 3_000, 10_000)).unwrap();
        // A stale file of another job is not counted.
        write_rank(dir.path(), &rank(2, "old", 99, 99, 99)).unwrap();
        let (got, missing) = collect(dir.path(), 3, "j", Duration::from_millis(50));
        assert_eq!(
            got,
            vec![
                rank(0, "j", 10, 1_000, 10_000),
                rank(1, "j", 30, 3_000, 10_000)
            ]
        );
        assert_eq!(missing, vec![2]);
        let s = empty().add_up(&got, missing);
        assert_eq!(
            (s.reported, s.injected, s.dropped, s.merged, s.injected_ns),
            (2, 40, 2, 4, 4_000)
        );
        assert!((s.noise_share - 0.2).abs() < 1e-12);
        assert!(s.line(dir.path()).contains("no file from ranks [2]"));
        let p = s.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        // The timer as the `JITTER_TIMER` value, as written before it was typed.
        assert!(text.contains("\"timer\": \"abstime\""), "{text}");
        let back: Summary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }

    /// Ranks paying at calls: their accounts add up, the least faithful rank is kept, and the
    /// line names the mode and the shares.
    #[test]
    fn accounts_of_ranks_paying_at_calls_add_up_and_the_least_faithful_rank_shows() {
        use jitter_emulator::ledger::{Missed, PaidClass};
        use jitter_emulator::PhaseShares;
        let paying = |r: u64, missed_ns: u64| {
            let ledger = LedgerStats {
                at_boundary: PaidClass {
                    injections: 9,
                    detours: 9,
                    span_ns: 900,
                    spun_ns: 900,
                    ..PaidClass::default()
                },
                missed: Missed {
                    injections: u64::from(missed_ns > 0),
                    detours: u64::from(missed_ns > 0),
                    span_ns: missed_ns,
                },
                ..LedgerStats::default()
            };
            let mut phases = PhaseShares::default();
            let mut account = LedgerStats::default();
            for k in 0..4 {
                // A phase of 450 ns paid; in rank 1's first phase, 450 ns missed beside them.
                account.at_boundary.span_ns += 450;
                if k == 0 && missed_ns > 0 {
                    account.missed.span_ns += 450;
                }
                phases.end_phase(&account);
            }
            let calls = CallCounts {
                calls: 20,
                polled: 5,
                phases,
                ..CallCounts::default()
            };
            RankStats {
                inject: InjectionMode::Boundary,
                boundary: Some(BoundaryStats { ledger, calls }),
                ..rank(r, "j", 9, 900, 10_000)
            }
        };
        let s = Summary {
            inject: InjectionMode::Boundary,
            ..empty()
        }
        .add_up(&[paying(0, 0), paying(1, 100)], vec![2]);
        let b = s.boundary.unwrap();
        assert_eq!(b.ledger.paid().injections, 18);
        assert_eq!(b.ledger.missed.span_ns, 100);
        assert_eq!((b.calls.calls, b.calls.polled), (40, 10));
        assert_eq!(
            (b.calls.phases.phases, b.calls.phases.phases_missing),
            (8, 1)
        );
        assert_eq!(b.calls.phases.worst_time_share, 0.5);
        assert_eq!(b.min_rank_detour_share, 0.9);
        assert_eq!(b.min_rank_time_share, 0.9);
        let line = s.line(Path::new("d"));
        assert!(line.contains("(boundary injection)"), "{line}");
        assert!(
            line.contains("94.737 % of their time (least rank 90.000 %"),
            "{line}"
        );
        // A signal run's summary has no such account.
        assert!(empty()
            .add_up(&[rank(0, "j", 1, 1, 1)], vec![])
            .boundary
            .is_none());
    }
}
