//! The report schema shared by `replay-bench run` and `replay-bench predict`, so that
//! `replay-bench compare` can set a prediction beside a measurement.

use std::path::Path;

use jitter_emulator::TimerKind;
use serde::{Deserialize, Serialize};

/// Identifies the schema and its version in every report.
pub const SCHEMA: &str = "jitterbench.report/2";

/// Earlier schemas [`Report::load`] still reads (their free-form `config.extra` map is left
/// out: such reports carry no [`RunDetails`] or [`PredictDetails`]).
pub const OLDER_SCHEMAS: [&str; 1] = ["jitterbench.report/1"];

/// What produced a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportKind {
    /// A real MPI run.
    Run,
    /// A virtual-time simulation.
    PredictDes,
    /// The analytic order-statistics model.
    PredictOrderStats,
    /// Barrier-free virtual ranks on real injection.
    VirtualRanks,
}

impl std::fmt::Display for ReportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReportKind::Run => "run",
            ReportKind::PredictDes => "predict-des",
            ReportKind::PredictOrderStats => "predict-order-stats",
            ReportKind::VirtualRanks => "virtual-ranks",
        })
    }
}

/// The trace a report is about.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TraceInfo {
    /// Path as given.
    pub path: String,
    /// Label for plots (file stem unless given).
    pub label: String,
    /// Host the trace was collected on.
    pub host: String,
    /// Kernel release of that host.
    pub kernel: String,
    /// Streams in the trace.
    pub streams: usize,
    /// Noise ratio of the trace (Σ run / duration), over all streams.
    pub noise_ratio: f64,
    /// Detours per second, per stream on average.
    pub detours_per_s: f64,
    /// The node traces of a set (`--node-traces`) in order: node group g of ranks replays the
    /// (g mod n)-th; empty for a single trace (and in reports written before the field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<TraceInfo>,
}

impl TraceInfo {
    /// The description of a node-trace set labelled `label`: its paths joined by commas, the
    /// fewest streams of any, noise ratio and detours/s averaged over the nodes, and the nodes.
    pub fn node_set(label: &str, nodes: Vec<TraceInfo>) -> TraceInfo {
        let n = nodes.len().max(1) as f64;
        let mean = |f: fn(&TraceInfo) -> f64| nodes.iter().map(f).sum::<f64>() / n;
        TraceInfo {
            path: (nodes.iter().map(|t| t.path.as_str()))
                .collect::<Vec<_>>()
                .join(","),
            label: label.to_string(),
            host: format!("{} nodes", nodes.len()),
            kernel: String::new(),
            streams: nodes.iter().map(|t| t.streams).min().unwrap_or(0),
            noise_ratio: mean(|t| t.noise_ratio),
            detours_per_s: mean(|t| t.detours_per_s),
            nodes,
        }
    }
}

/// The configuration of a run or prediction.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Config {
    /// The trace (absent for a run without jitter).
    pub trace: Option<TraceInfo>,
    /// Ranks per node k (rank r replays stream r mod k).
    pub ranks_per_node: usize,
    /// Work quanta q per phase (unscaled), ns.
    pub quanta_ns: u64,
    /// Benchmark period (unscaled), ns; 0 when a phase count was given.
    pub period_ns: u64,
    /// Requested phase count; 0 when a period was given.
    pub phases: u64,
    /// Warm-up phases excluded from the averages.
    pub warmup_phases: u64,
    /// Scale factor S.
    pub scale: f64,
    /// Fraction f of the stream after which the replay stops.
    pub fraction: f64,
    /// Timer of the injector.
    pub timer: TimerKind,
    /// Shared seed.
    pub seed: u64,
    /// Baseline used: `measured`, `quanta` or a file path.
    pub baseline: String,
    /// Platform the plan was built for (`ideal`, `this`, a calibration file, or `mpi`).
    pub platform: String,
    /// What a real run measured beside its results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunDetails>,
    /// The model a prediction ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predict: Option<PredictDetails>,
}

/// What a real run measured beside its results (rank 0's view; times unscaled unless said).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunDetails {
    /// LCG iterations of one phase.
    pub iterations: u64,
    /// ns per LCG iteration on the slowest rank.
    pub ns_per_iteration: f64,
    /// Wall time of the measured phases, ns (scaled: as it elapsed).
    pub elapsed_ns: u64,
    /// Why the phase loop ended: period, phases, fraction, precision or max-time.
    pub stopped_by: String,
    /// Length of the platform-noise probe before the run, ns.
    pub noise_probe_ns: u64,
    /// Largest detour any rank's probe saw, ns.
    pub platform_noise_max_ns: f64,
    /// Checksum of the work (keeps the compiler from removing it).
    pub checksum: u64,
    /// The MPI library's version line.
    #[serde(default)]
    pub mpi_library: String,
    /// Standard deviation of MaxQT over measured phases, ns.
    pub sd_max_qt_ns: f64,
    /// Standard deviation of MaxQTBT over measured phases, ns.
    pub sd_max_qtbt_ns: f64,
    /// `paired` or `sequential`.
    pub design: String,
    /// The measured baseline's phases, spread and loss (its own run or its blocks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineDetails>,
    /// The paired design's blocks and precision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<PairedDetails>,
    /// Barrier-free virtual ranks per process (absent: the plain benchmark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_ranks_per_process: Option<u64>,
}

/// The measured baseline of a run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct BaselineDetails {
    /// Phases measured.
    pub phases: u64,
    /// Standard deviation of MaxQT, ns.
    pub sd_max_qt_ns: f64,
    /// Standard deviation of MaxQTBT, ns.
    pub sd_max_qtbt_ns: f64,
    /// Mean relative loss (max qt − mean qt) / mean qt.
    pub lost_rel: f64,
}

/// The paired design of a run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PairedDetails {
    /// Phases per block.
    pub block_phases: u64,
    /// Complete block pairs.
    pub pairs: u64,
    /// `--precision` asked for, percentage points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision_target_pct: Option<f64>,
    /// Its time budget, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time_ns: Option<u64>,
    /// The larger 95 % half-width of the two slowdowns reached, percentage points.
    pub precision_reached_pct: f64,
}

/// The model a prediction ran.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PredictDetails {
    /// How the barrier latency grows with the rank count (`log2`).
    pub barrier_model: String,
    /// The loop of one phase.
    pub loop_shape: String,
    /// The collective's algorithm.
    pub collective: String,
    /// LogP overhead o, ns.
    pub logp_o_ns: f64,
    /// LogP latency l, ns.
    pub logp_l_ns: f64,
    /// The communication model in words.
    pub communication_model: String,
    /// Latency of one barrier stage, ns.
    pub barrier_stage_ns: f64,
    /// Standard deviation of one timer error, ns.
    pub timer_error_sd_ns: f64,
    /// Labels of the traces predicted.
    pub traces: Vec<String>,
}

/// The emulator's own cost on one rank or the platform assumed by a prediction.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RankCost {
    /// Rank (or -1 for a platform file / ideal).
    pub rank: i64,
    /// Host name.
    pub host: String,
    /// Overhead O per injection, ns.
    pub overhead_ns: u64,
    /// Spread of O (sd), ns.
    pub overhead_sd_ns: f64,
    /// Timer lateness L (median), ns.
    pub lateness_ns: u64,
    /// Spread of L (sd), ns.
    pub lateness_sd_ns: f64,
    /// Minimum sleep M, ns.
    pub min_sleep_ns: u64,
    /// Counter frequency, kHz.
    pub tsc_khz: u64,
    /// Platform noise ratio measured with the probe before the run (Σ run / duration).
    pub platform_noise_ratio: f64,
    /// O after a gap since the previous injection, as (gap ns, O ns) points (empty: O alone).
    #[serde(default)]
    pub overhead_by_gap: Vec<(u64, u64)>,
}

/// What the emulators injected and could not, summed over ranks.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct EmulatorTotals {
    /// Injections performed.
    pub injected: u64,
    /// Detours dropped because S·run ≤ O.
    pub dropped: u64,
    /// Detours merged because S·sleep < M.
    pub merged: u64,
    /// Injected detour time, ns (scaled).
    pub injected_ns: u64,
    /// Dropped detour time, ns (scaled).
    pub dropped_ns: u64,
    /// Share of the met trace noise that was injected.
    pub injected_share: f64,
    /// Largest fraction of its stream any rank replayed.
    pub max_progress: f64,
}

/// One measured or predicted point: a rank count and a sync mode.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResultRow {
    /// Trace label (empty for a run without jitter).
    pub trace: String,
    /// Ranks (processes, virtual ranks or simulated ranks).
    pub ranks: u64,
    /// Sync mode (`none`, `once`, `phase`, `every:K`, or `baseline`).
    pub sync: String,
    /// Phases averaged (warm-up excluded).
    pub phases: u64,
    /// AvgMaxQT, ns (unscaled).
    pub avg_max_qt_ns: f64,
    /// AvgMaxQTBT, ns (unscaled).
    pub avg_max_qtbt_ns: f64,
    /// Baseline AvgMaxQT, ns.
    pub baseline_avg_max_qt_ns: f64,
    /// Baseline AvgMaxQTBT, ns.
    pub baseline_avg_max_qtbt_ns: f64,
    /// SD by eq. (2) (AvgMaxQTBT), percent.
    pub sd_qtbt_pct: f64,
    /// SD by eq. (3) (AvgMaxQT), percent.
    pub sd_qt_pct: f64,
    /// Half-width of SD eq. (2)'s 95 % confidence interval, percentage points (absent for
    /// predictions and for reports older than the paired design).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd_qtbt_ci95_pct: Option<f64>,
    /// Half-width of SD eq. (3)'s 95 % confidence interval, percentage points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd_qt_ci95_pct: Option<f64>,
    /// Mean relative loss (max qt − mean qt) / mean qt.
    pub lost_rel: f64,
    /// Emulator totals for this point (zero for the analytic model).
    pub emulator: EmulatorTotals,
    /// Mean period of a phase and its noise-free period, ns (simulations only: what a
    /// whole-run time such as LogGOPSim's measures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<[f64; 2]>,
}

/// A whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// What produced it.
    pub kind: ReportKind,
    /// Tool name and version.
    pub tool_version: String,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// The configuration.
    pub config: Config,
    /// Calibration per rank (runs) or the platform assumed (predictions).
    pub calibration: Vec<RankCost>,
    /// The measured or predicted points.
    pub results: Vec<ResultRow>,
    /// What was not emulated, and other warnings, one line each.
    pub warnings: Vec<String>,
}

impl Report {
    /// An empty report of `kind` stamped with the tool version and the current time.
    pub fn new(kind: ReportKind, config: Config) -> Self {
        let created_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Report {
            schema: SCHEMA.to_string(),
            kind,
            tool_version: jitter_trace::TOOL_VERSION.to_string(),
            created_unix_s,
            config,
            calibration: Vec::new(),
            results: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Writes the report as pretty JSON.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        jitter_trace::output::write_output_bytes(path, (text + "\n").as_bytes())?;
        Ok(())
    }

    /// Reads a report, checking its schema.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let r: Report = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not a replay-bench report: {e}", path.display()))?;
        if r.schema != SCHEMA && !OLDER_SCHEMAS.contains(&r.schema.as_str()) {
            anyhow::bail!(
                "{} has schema '{}', expected '{SCHEMA}'",
                path.display(),
                r.schema
            );
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_set_names_its_traces_and_a_single_trace_keeps_the_old_shape() {
        let node = |path: &str, ratio: f64, streams: usize| TraceInfo {
            path: path.into(),
            label: path.into(),
            streams,
            noise_ratio: ratio,
            ..TraceInfo::default()
        };
        let set = TraceInfo::node_set(
            "nodes(2)",
            vec![node("a.jtr", 0.02, 4), node("b.jtr", 0.0, 2)],
        );
        assert_eq!(set.path, "a.jtr,b.jtr");
        assert_eq!(set.streams, 2);
        assert!((set.noise_ratio - 0.01).abs() < 1e-15);
        let back: TraceInfo = serde_json::from_str(&serde_json::to_string(&set).unwrap()).unwrap();
        assert_eq!(back, set);
        // A single trace is written without the field, and one written before it reads back.
        let one = node("a.jtr", 0.02, 4);
        let text = serde_json::to_string(&one).unwrap();
        assert!(!text.contains("nodes"));
        assert_eq!(serde_json::from_str::<TraceInfo>(&text).unwrap(), one);
    }

    #[test]
    fn round_trips_and_checks_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let mut r = Report::new(
            ReportKind::PredictDes,
            Config {
                quanta_ns: 1_000_000,
                ..Config::default()
            },
        );
        r.results.push(ResultRow {
            ranks: 16,
            sync: "none".into(),
            sd_qtbt_pct: 12.5,
            ..ResultRow::default()
        });
        r.save(&p).unwrap();
        assert_eq!(Report::load(&p).unwrap(), r);
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["schema"] = "other/9".into();
        std::fs::write(&p, v.to_string()).unwrap();
        assert!(Report::load(&p)
            .unwrap_err()
            .to_string()
            .contains("expected"));
        std::fs::write(&p, "garbage").unwrap();
        assert!(Report::load(&p).is_err());
    }
}
