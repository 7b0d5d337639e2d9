//! The report schema shared by `replay-bench run` and `replay-bench predict`, so that
//! `replay-bench compare` can set a prediction beside a measurement.

use std::path::Path;

use jitter_emulator::{InjectionMode, TimerKind};

use crate::metrics::Slowdown;
use serde::{Deserialize, Serialize};

/// Identifies the schema and its version in every report.
pub(crate) const SCHEMA: &str = "jitterbench.report/2";

/// Earlier schemas [`Report::load`] still reads (their free-form `config.extra` map is left
/// out: such reports carry no [`RunDetails`] or [`PredictDetails`]).
pub(crate) const OLDER_SCHEMAS: [&str; 1] = ["jitterbench.report/1"];

/// A number that JSON holds as `null` when it was not finite (serde_json writes NaN, say the
/// average of no phases, as `null`): read back as NaN, so that such a report still loads.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

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
    #[serde(deserialize_with = "nan_if_null")]
    pub noise_ratio: f64,
    /// Detours per second, per stream on average.
    #[serde(deserialize_with = "nan_if_null")]
    pub detours_per_s: f64,
    /// The node traces of a set (`--node-traces`) in order: node group g of ranks replays the
    /// (g mod n)-th; empty for a single trace (and in reports written before the field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<TraceInfo>,
    /// What the trace lacks (its ring dropped detours, a chunk is damaged, the file is
    /// truncated) where it lacks anything: the share kept that every number here comes from
    /// (`--salvage`, or a loss within the tolerance). Absent for a whole trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<jitter_trace::Integrity>,
    /// The trace's content digest (`jitter_trace::digest::content_digest`; for a set, of its
    /// nodes' digests in order): reports match on it, not on the file name. Absent in reports
    /// written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl TraceInfo {
    /// `<label>: share kept: …`, for this trace and each node trace of a set that lacks
    /// detours: printed beside every table of numbers computed from them.
    pub fn kept_lines(&self) -> Vec<String> {
        std::iter::once(self)
            .chain(&self.nodes)
            .filter_map(|t| {
                let kept = t.integrity.as_ref()?.kept_line()?;
                Some(format!("{}: {kept}", t.label))
            })
            .collect()
    }

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
            digest: set_digest(&nodes),
            nodes,
            integrity: None,
        }
    }
}

/// The digest of a node-trace set: its nodes' digests in order, joined by `+` (absent when a
/// node's is).
fn set_digest(nodes: &[TraceInfo]) -> Option<String> {
    let parts: Option<Vec<&str>> = nodes.iter().map(|t| t.digest.as_deref()).collect();
    parts.map(|p| p.join("+"))
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
    #[serde(deserialize_with = "nan_if_null")]
    pub scale: f64,
    /// Fraction f of the stream after which the replay stops.
    #[serde(deserialize_with = "nan_if_null")]
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
    #[serde(deserialize_with = "nan_if_null")]
    pub ns_per_iteration: f64,
    /// Wall time of the measured phases, ns (scaled: as it elapsed).
    pub elapsed_ns: u64,
    /// Why the phase loop ended: period, phases, fraction, precision or max-time.
    pub stopped_by: String,
    /// Length of the platform-noise probe before the run, ns.
    pub noise_probe_ns: u64,
    /// Largest detour any rank's probe saw, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub platform_noise_max_ns: f64,
    /// Checksum of the work (keeps the compiler from removing it).
    pub checksum: u64,
    /// The MPI library's version line.
    #[serde(default)]
    pub mpi_library: String,
    /// Standard deviation of MaxQT over measured phases, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub sd_max_qt_ns: f64,
    /// Standard deviation of MaxQTBT over measured phases, ns.
    #[serde(deserialize_with = "nan_if_null")]
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
    /// The most the trace can slow one phase down (absent without a trace or a bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_bound: Option<TraceBound>,
    /// The stretches of the trace the measured jitter phases replayed (absent without a trace,
    /// with virtual ranks, or from older reports): `predict --windows-of` replays the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<ReplayedWindows>,
    /// How detours got into the ranks (`signal` in reports written before it was recorded).
    #[serde(default)]
    pub inject: InjectionMode,
    /// Paying at calls: what the ranks paid, where and how late, and what they missed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payments: Option<CallPayments>,
}

/// What the ranks of a run paying at calls (`--inject boundary`) paid and missed: the fidelity
/// of the mode, from the counters each rank's ledger keeps (`jitter_emulator::ledger`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CallPayments {
    /// Share of the detours the ranks met that they paid (paid ÷ (paid + missed)), all ranks.
    #[serde(deserialize_with = "nan_if_null")]
    pub detour_share: f64,
    /// Share of the noise time they met that they paid.
    #[serde(deserialize_with = "nan_if_null")]
    pub time_share: f64,
    /// Each rank's [detour, time] shares, by rank.
    pub rank_shares: Vec<[f64; 2]>,
    /// Phases, summed over ranks (warm-up and both blocks of the paired design included).
    pub phases: u64,
    /// Of those, the ones in which a rank missed a detour.
    pub phases_missing: u64,
    /// The smallest share of one rank's phase's noise time that was paid.
    #[serde(deserialize_with = "nan_if_null")]
    pub worst_phase_time_share: f64,
    /// Paid at a call's entry, for the computing before it.
    pub at_entry: PaymentClass,
    /// Paid at its time inside a call polled through its nonblocking twin.
    pub in_call: PaymentClass,
    /// Paid after a blocking call returned (none in the benchmark: its calls are all polled).
    pub on_return: PaymentClass,
    /// Missed detours and their time, ns, all ranks.
    pub missed: u64,
    /// See `missed`.
    pub missed_ns: u64,
    /// The loop's MPI calls, all ranks (each a boundary, each through its nonblocking twin).
    pub calls: u64,
    /// Polls of those calls' requests.
    pub polls: u64,
}

/// The payments of one class, all ranks.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PaymentClass {
    /// Injections paid.
    pub payments: u64,
    /// Trace detours in them.
    pub detours: u64,
    /// Their planned span, ns (scaled).
    pub span_ns: u64,
    /// Mean lateness (paid at − due), ns: for payments at a call's entry, the computing between
    /// the detour and the call.
    #[serde(deserialize_with = "nan_if_null")]
    pub lateness_mean_ns: f64,
    /// Upper bounds of the lateness's median and 99th percentile (log₂ buckets), ns.
    pub lateness_p50_at_most_ns: u64,
    /// See `lateness_p50_at_most_ns`.
    pub lateness_p99_at_most_ns: u64,
    /// Largest lateness, ns.
    pub lateness_max_ns: u64,
}

/// The stretches of its trace a run's measured jitter phases replayed: one window per jitter
/// block of a complete pair (paired design) or one for all measured phases (sequential).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReplayedWindows {
    /// Measured phases in each window.
    pub phases_per_window: u64,
    /// The windows, in order.
    pub windows: Vec<ReplayedWindow>,
}

/// One window of [`ReplayedWindows`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReplayedWindow {
    /// Phase index of its first phase, warm-up included (the sync schedule's phase).
    pub phase: u64,
    /// Timeline point (trace ns from the window start of the trace) each rank's replay started
    /// at, by rank.
    pub points_ns: Vec<u64>,
    /// Injections executed in the window, summed over ranks.
    pub injected: u64,
    /// Their span, ns (scaled, as replayed), summed over ranks.
    pub injected_ns: u64,
    /// The window's length on each rank, summed over ranks, ns (scaled: S × the trace time the
    /// ranks covered).
    #[serde(default)]
    pub span_ns: u64,
}

/// The most the trace can add to one phase of a run (scaled ns, the largest over ranks).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct TraceBound {
    /// Injected detour time in the worst window of the trace's plan.
    #[serde(deserialize_with = "nan_if_null")]
    pub excess_ns: f64,
    /// The window: the longer of the reference phase and the measured one.
    #[serde(deserialize_with = "nan_if_null")]
    pub window_ns: f64,
}

/// The measured baseline of a run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct BaselineDetails {
    /// Phases measured.
    pub phases: u64,
    /// Standard deviation of MaxQT, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub sd_max_qt_ns: f64,
    /// Standard deviation of MaxQTBT, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub sd_max_qtbt_ns: f64,
    /// Mean relative loss (max qt − mean qt) / mean qt.
    #[serde(deserialize_with = "nan_if_null")]
    pub lost_rel: f64,
}

/// The paired design of a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
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
    #[serde(deserialize_with = "nan_if_null")]
    pub precision_reached_pct: f64,
    /// `--until-verdict`: the pairs ran until both intervals were narrower than half their
    /// slowdowns (or the time budget ran out).
    #[serde(default)]
    pub until_verdict: bool,
    /// The block means of every complete pair, in order (the n-th pair's jitter block replayed
    /// the n-th of `RunDetails::windows`): what a prediction of the same windows is paired with
    /// (`crate::comparison`). Empty in reports written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<BlockMeans>,
}

/// The means of one pair of blocks of the paired design (rank 0, unscaled ns).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct BlockMeans {
    /// Mean MaxQT of the baseline block.
    pub base_qt_ns: f64,
    /// Mean MaxQTBT of the baseline block.
    pub base_qtbt_ns: f64,
    /// Mean MaxQT of the jitter block.
    pub jit_qt_ns: f64,
    /// Mean MaxQTBT of the jitter block.
    pub jit_qtbt_ns: f64,
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
    #[serde(deserialize_with = "nan_if_null")]
    pub logp_o_ns: f64,
    /// LogP latency l, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub logp_l_ns: f64,
    /// The communication model in words.
    pub communication_model: String,
    /// Latency of one barrier stage, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub barrier_stage_ns: f64,
    /// Standard deviation of one timer error, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub timer_error_sd_ns: f64,
    /// Labels of the traces predicted.
    pub traces: Vec<String>,
    /// The platform-noise trace the traces were replayed on top of (`--platform-noise`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_noise: Option<String>,
    /// The content digest of each trace of `traces`, in the same order (see
    /// [`TraceInfo::digest`]); empty in reports written before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace_digests: Vec<String>,
    /// The run whose windows were predicted (`--windows-of`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows_of: Option<WindowsOf>,
    /// What drives the predictions at the largest rank count (`--drivers`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drivers: Vec<Drivers>,
}

/// One size class of detours of one prediction (`predict --drivers`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SizeClass {
    /// Detours of at least this length, ns.
    pub threshold_ns: u64,
    /// How many the replayed streams hold.
    pub detours: u64,
    /// Their share of all detours.
    pub detour_share: f64,
    /// Their share of the noise time.
    pub noise_share: f64,
    /// Share of the predicted SD eq. (2) they cause: 1 − SD without them / SD.
    pub sd_share: f64,
}

/// The drivers of one predicted point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drivers {
    /// Trace label.
    pub trace: String,
    /// Ranks.
    pub ranks: u64,
    /// Sync mode.
    pub sync: String,
    /// The predicted SD eq. (2), percent.
    pub sd_qtbt_pct: f64,
    /// Largest share of its stream a rank replayed.
    pub coverage: f64,
    /// The classes present in the trace, shortest threshold first.
    pub classes: Vec<SizeClass>,
}

/// Fewer detours than this in a class that carries most of a prediction: a handful.
pub(crate) const HANDFUL: u64 = 10;

impl Drivers {
    /// One sentence: the class of the longest detours that still carries at least half of the
    /// prediction, how few they are, and how much of the trace the prediction replayed.
    pub fn line(&self) -> String {
        let head = format!(
            "{} at {} ranks, sync {} (SD {:.2} %, {:.1} % of the trace replayed per rank)",
            self.trace,
            self.ranks,
            self.sync,
            self.sd_qtbt_pct,
            self.coverage * 100.0
        );
        let Some(c) = self.classes.iter().rev().find(|c| c.sd_share >= 0.5) else {
            return format!("{head}: no size class of detours carries half of it alone");
        };
        let mut s = format!(
            "{head}: {:.0} % of it from the {} % of detours ≥ {} ({} detours, {:.1} % of the \
             noise time)",
            (c.sd_share * 100.0).min(100.0),
            share_text(c.detour_share),
            jitter_trace::units::format_ns(c.threshold_ns as f64),
            c.detours,
            c.noise_share * 100.0
        );
        if c.detours < HANDFUL {
            s.push_str(
                "; driven by a handful of events: another stretch of trace, or a longer \
                 collection, may give another answer",
            );
        }
        s
    }
}

fn share_text(x: f64) -> String {
    let pct = x * 100.0;
    if pct >= 1.0 {
        format!("{pct:.1}")
    } else {
        format!("{pct:.2e}")
            .parse::<f64>()
            .map_or_else(|_| format!("{pct}"), |v| format!("{v}"))
    }
}

/// A prediction of the stretches of a trace one real run replayed (`predict --windows-of`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowsOf {
    /// The run's report.
    pub run: String,
    /// Its windows.
    pub windows: u64,
    /// Phases per window.
    pub phases_per_window: u64,
    /// The injections of both.
    pub injection: InjectionCheck,
    /// The predicted SD of each window, percent, as [eq. 2, eq. 3], in the run's order (their
    /// mean is the row's SD). Empty in reports written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window_sd_pct: Vec<[f64; 2]>,
}

/// The injections of a run's windows against those of their prediction, with the tolerance
/// that says how far apart they may be (`predict::window::injection_check`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InjectionCheck {
    /// Injections the run executed in its windows (all ranks).
    pub run_injected: u64,
    /// Injections the prediction executed in them.
    pub predicted_injected: u64,
    /// Largest difference of counts that agrees.
    pub tolerance: f64,
    /// The run's injected time, ns (scaled).
    pub run_injected_ns: u64,
    /// The prediction's, ns (scaled).
    pub predicted_injected_ns: u64,
    /// Largest difference of time that agrees, ns (scaled).
    pub tolerance_ns: f64,
    /// Trace time the run's windows covered, summed over ranks, ns.
    pub run_covered_ns: f64,
    /// Trace time the prediction's covered, summed over ranks, ns.
    pub predicted_covered_ns: f64,
    /// Both within their tolerance.
    pub agrees: bool,
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
    #[serde(deserialize_with = "nan_if_null")]
    pub overhead_sd_ns: f64,
    /// Timer lateness L (median), ns.
    pub lateness_ns: u64,
    /// Spread of L (sd), ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub lateness_sd_ns: f64,
    /// Minimum sleep M, ns.
    pub min_sleep_ns: u64,
    /// Counter frequency, kHz.
    pub tsc_khz: u64,
    /// Platform noise ratio measured with the probe before the run (Σ run / duration).
    #[serde(deserialize_with = "nan_if_null")]
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
    #[serde(deserialize_with = "nan_if_null")]
    pub injected_share: f64,
    /// Largest fraction of its stream any rank replayed.
    #[serde(deserialize_with = "nan_if_null")]
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
    #[serde(deserialize_with = "nan_if_null")]
    pub avg_max_qt_ns: f64,
    /// AvgMaxQTBT, ns (unscaled).
    #[serde(deserialize_with = "nan_if_null")]
    pub avg_max_qtbt_ns: f64,
    /// Baseline AvgMaxQT, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub baseline_avg_max_qt_ns: f64,
    /// Baseline AvgMaxQTBT, ns.
    #[serde(deserialize_with = "nan_if_null")]
    pub baseline_avg_max_qtbt_ns: f64,
    /// SD by eq. (2) (AvgMaxQTBT), percent.
    #[serde(deserialize_with = "nan_if_null")]
    pub sd_qtbt_pct: f64,
    /// SD by eq. (3) (AvgMaxQT), percent.
    #[serde(deserialize_with = "nan_if_null")]
    pub sd_qt_pct: f64,
    /// Half-width of SD eq. (2)'s 95 % confidence interval, percentage points (absent for
    /// predictions and for reports older than the paired design).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd_qtbt_ci95_pct: Option<f64>,
    /// Half-width of SD eq. (3)'s 95 % confidence interval, percentage points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd_qt_ci95_pct: Option<f64>,
    /// Mean relative loss (max qt − mean qt) / mean qt.
    #[serde(deserialize_with = "nan_if_null")]
    pub lost_rel: f64,
    /// Emulator totals for this point (zero for the analytic model).
    pub emulator: EmulatorTotals,
    /// Mean period of a phase and its noise-free period, ns (simulations only: what a
    /// whole-run time such as LogGOPSim's measures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<[f64; 2]>,
    /// A prediction over several offset draws: the range of the draws' slowdowns (the row's
    /// own slowdowns pool every draw's phases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draws: Option<DrawSpread>,
    /// A simulated prediction: how its 95 % intervals (`sd_*_ci95_pct`) were made and, in the
    /// precision mode, what they aimed at and why the draws stopped (absent for measurements,
    /// the analytic model, the prediction of a run's own windows and older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<PredictionInterval>,
}

/// How a prediction's 95 % intervals were made ([`jitter_trace::interval`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictionInterval {
    /// `draws`: the dispersion of independent offset draws (the phases and the stretch of
    /// trace); `batches`: the batch means of one draw's phases (the phases only).
    pub source: jitter_trace::interval::Source,
    /// Degrees of freedom of the t quantile.
    pub df: u64,
    /// Offset draws (seeds `seed`, `seed + 1`, …).
    pub draws: u64,
    /// Phases each draw ran, its warm-up included (fewer where the fraction rule stopped it).
    pub phases_per_draw: u64,
    /// Phases each draw ran first and left out: the start of a draw, where every rank starts
    /// at once rather than out of a barrier (precision mode: 1; fixed phases: 0).
    pub warmup_phases: u64,
    /// The precision asked for (`2%,0.1pp`); absent with fixed phases and draws.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// Why the draws stopped: `precision` (both intervals met it), `draws` or `phases` (the
    /// point's budget), `time` (the prediction's `--max-time`), or `fixed` (`--phases`,
    /// `--draws`).
    pub stopped_by: String,
}

/// The slowdowns of one prediction over independent draws of the offsets and resync points
/// (seeds `seed`, `seed + 1`, …): how much the stretch of trace replayed moves the answer.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct DrawSpread {
    /// Draws.
    pub draws: u64,
    /// Lowest and highest SD eq. (2) of one draw, percent.
    pub sd_qtbt_range_pct: [f64; 2],
    /// Lowest and highest SD eq. (3) of one draw, percent.
    pub sd_qt_range_pct: [f64; 2],
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
    /// `predict --app --runs-of`: the prediction of each measured run on its own (pooled into
    /// the rows as offset draws are).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured_runs: Vec<RunPredicted>,
}

/// The prediction of one measured run of `replay-bench app` (its seed, its library's points).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPredicted {
    /// Trace label of its row.
    pub trace: String,
    /// Ranks.
    pub ranks: u64,
    /// Sync mode.
    pub sync: String,
    /// The app report's pair.
    pub pair: u64,
    /// Its `JITTER_SEED`.
    pub seed: u64,
    /// SD eq. (2), percent: the slowdown of the iteration period.
    pub sd_qtbt_pct: f64,
    /// SD eq. (3), percent.
    pub sd_qt_pct: f64,
    /// Mean over ranks of the injected share of the simulated run's time, as the library's
    /// `noise_share` counts it (injected span ÷ elapsed).
    pub noise_share: f64,
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
            measured_runs: Vec::new(),
        }
    }

    /// Writes the report as pretty JSON.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        jitter_trace::output::write_output_bytes(path, (text + "\n").as_bytes())?;
        Ok(())
    }

    /// Why this run's slowdown cannot come from its trace (see [`beyond_the_trace`]), checked
    /// on the first result row with the run's bound and the largest platform noise any rank
    /// measured; `None` when it is plausible or the report carries no bound.
    pub fn implausible(&self) -> Option<String> {
        let bound = self.config.run.as_ref()?.trace_bound?;
        let row = self.results.first()?;
        let noise = self
            .calibration
            .iter()
            .map(|c| c.platform_noise_ratio)
            .fold(0.0, f64::max);
        let s = |pct: f64, ci: Option<f64>| Slowdown {
            pct,
            ci95_pct: ci.unwrap_or(f64::NAN),
        };
        [
            (
                "MaxQTBT",
                s(row.sd_qtbt_pct, row.sd_qtbt_ci95_pct),
                row.baseline_avg_max_qtbt_ns,
            ),
            (
                "MaxQT",
                s(row.sd_qt_pct, row.sd_qt_ci95_pct),
                row.baseline_avg_max_qt_ns,
            ),
        ]
        .into_iter()
        .find_map(|(name, sd, reference)| {
            beyond_the_trace(
                name,
                sd,
                bound.excess_ns,
                reference * self.config.scale,
                bound.window_ns,
                noise,
            )
        })
    }

    /// Reads a report, checking its schema.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        use jitter_trace::sniff::{expect_json, JsonKind};
        expect_json(
            "",
            path,
            &[
                JsonKind::RunReport,
                JsonKind::PredictionReport,
                JsonKind::VirtualRanksReport,
            ],
            "a replay-bench report",
        )?;
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

/// Why slowdown `s` of metric `name` cannot come from the trace: even its optimistic end (the
/// 95 % interval's lower end) is above the most the trace's injections can add to a phase
/// (`excess_ns` to a phase of `window_ns`, over the reference `reference_ns`, all scaled) plus
/// the largest platform noise ratio any rank measured. `None` when it is plausible.
pub(crate) fn beyond_the_trace(
    name: &str,
    s: Slowdown,
    excess_ns: f64,
    reference_ns: f64,
    window_ns: f64,
    platform_noise: f64,
) -> Option<String> {
    if !excess_ns.is_finite() || reference_ns <= 0.0 {
        return None;
    }
    let most = 100.0 * excess_ns / reference_ns;
    let allowed = most + 100.0 * platform_noise;
    let low = if s.ci95_pct.is_finite() {
        s.pct - s.ci95_pct
    } else {
        s.pct
    };
    (low > allowed).then(|| {
        format!(
            "SD({name}) = {:.1} % (95 % interval from {low:.1} %) is above the most this trace \
             can cause, {most:.2} % (its worst window of a {:.0} µs phase holds {:.0} µs of \
             injected detours), plus the platform noise the ranks measured, {:.2} %: other work \
             on these CPUs swamped the measurement",
            s.pct,
            window_ns / 1e3,
            excess_ns / 1e3,
            100.0 * platform_noise
        )
    })
}

/// The platform's own noise during the run, percent (the largest ratio over its ranks).
pub fn platform_noise_pct(run: &Report) -> f64 {
    100.0
        * (run.calibration.iter())
            .map(|c| c.platform_noise_ratio)
            .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slowdown_is_checked_by_the_optimistic_end_of_its_interval() {
        let s = |pct, ci95_pct| Slowdown { pct, ci95_pct };
        // The trace adds at most 40 µs to a 1 ms phase: 4 %; platform noise 1 %: 5 % allowed.
        let check = |sd| beyond_the_trace("MaxQT", sd, 40_000.0, 1e6, 1.04e6, 0.01);
        assert!(check(s(4.9, f64::NAN)).is_none());
        assert!(check(s(8.0, 3.5)).is_none(), "interval reaches 4.5 %");
        let why = check(s(881.0, 100.0)).unwrap();
        assert!(why.contains("SD(MaxQT) = 881.0 %"), "{why}");
        assert!(
            why.contains("the most this trace can cause, 4.00 %"),
            "{why}"
        );
        assert!(why.contains("swamped the measurement"), "{why}");
        assert!(check(s(5.2, f64::NAN)).is_some());
        // No bound (a timeline full of injections): nothing is refused.
        assert!(beyond_the_trace("MaxQT", s(881.0, 1.0), f64::INFINITY, 1e6, 1e6, 0.0).is_none());
    }

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
        // A saved run whose slowdown its trace cannot cause is found again when read.
        let mut run = Report::new(ReportKind::Run, Config::default());
        run.config.scale = 1.0;
        run.config.run = Some(RunDetails {
            trace_bound: Some(TraceBound {
                excess_ns: 40_000.0,
                window_ns: 1.04e6,
            }),
            ..RunDetails::default()
        });
        run.results.push(ResultRow {
            sd_qt_pct: 881.0,
            sd_qt_ci95_pct: Some(100.0),
            baseline_avg_max_qt_ns: 1e6,
            baseline_avg_max_qtbt_ns: 1e6,
            ..ResultRow::default()
        });
        let why = run.implausible().unwrap();
        assert!(why.starts_with("SD(MaxQT) = 881.0 %"), "{why}");
        run.results[0].sd_qt_pct = 4.0;
        assert!(run.implausible().is_none());
        run.config.run = None;
        run.results[0].sd_qt_pct = 881.0;
        assert!(run.implausible().is_none(), "no bound, no verdict");
        // A run that measured no phase averages nothing: NaN is written as null, read as NaN.
        r.results[0].avg_max_qt_ns = f64::NAN;
        r.save(&p).unwrap();
        assert!(Report::load(&p).unwrap().results[0].avg_max_qt_ns.is_nan());
    }
}
