//! A prediction's rows and reports: the configuration a report records (`config`), the
//! simulation's row (`des_row`), the analytic tier's (`Analytic`, `order_stats_row_mix`), the
//! plausibility check every printed prediction passes (`check_plausible`) and the rows of the
//! SD-vs-ranks table (`study_rows`).

use std::sync::Arc;

use jitter_emulator::{Plan, SyncMode};

use super::des::{DesConfig, DesOutcome};
use super::input::TraceInput;
use super::order_stats::{self, DelayDistribution, WindowStart};
use super::platform::Platform;
use super::spec::PredictSpec;
use crate::metrics::slowdown_pct;
use crate::report::{Config, PredictDetails, RankCost, Report, ResultRow};

pub(crate) fn config(traces: &[TraceInput], spec: &PredictSpec) -> Config {
    let o = &spec.platform.options();
    let c = &spec.des.comm;
    Config {
        trace: traces.first().map(|t| t.info.clone()),
        ranks_per_node: spec.des.ranks_per_node as usize,
        quanta_ns: spec.des.quanta_ns,
        period_ns: 0,
        phases: spec.des.phases,
        warmup_phases: 0,
        scale: o.scale,
        fraction: o.fraction,
        timer: o.timer,
        seed: spec.des.seed,
        baseline: "quanta".into(),
        platform: spec.platform.name.clone(),
        run: None,
        predict: Some(PredictDetails {
            barrier_model: "log2".into(),
            loop_shape: c.shape.name().into(),
            collective: c.algorithm.name().into(),
            logp_o_ns: c.o_ns,
            logp_l_ns: c.l_ns,
            communication_model: super::platform::model_line(
                c,
                spec.des.barrier.stage_ns,
                &spec.platform,
            ),
            barrier_stage_ns: spec.des.barrier.stage_ns,
            timer_error_sd_ns: spec.des.drift_sd_ns,
            traces: traces.iter().map(|t| t.label.clone()).collect(),
            platform_noise: (traces.iter())
                .find_map(|t| t.background.as_ref())
                .map(|b| b.label.clone()),
            trace_digests: (traces.iter())
                .map(|t| t.info.digest.clone().unwrap_or_default())
                .collect(),
            windows_of: None,
            drivers: Vec::new(),
        }),
    }
}

pub(crate) fn platform_calibration(p: &Platform) -> RankCost {
    RankCost {
        rank: -1,
        host: p.name.clone(),
        overhead_ns: p.options().overhead_ns,
        overhead_sd_ns: 0.0,
        lateness_ns: p.options().lateness_ns,
        lateness_sd_ns: p.lateness_sd_ns,
        min_sleep_ns: p.options().min_sleep_ns,
        tsc_khz: 0,
        platform_noise_ratio: 0.0,
        overhead_by_gap: p.options().overhead_by_gap.points().to_vec(),
    }
}

/// The reports of one prediction (one per model run).
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The simulation's report.
    pub des: Option<Report>,
    /// The analytic model's report.
    pub order_stats: Option<Report>,
}

/// One simulated point as a report row.
pub fn des_row(trace: &str, ranks: u64, mode: SyncMode, o: &DesOutcome) -> ResultRow {
    let (qt, qtbt) = (o.averages.avg_max_qt_ns(), o.averages.avg_max_qtbt_ns());
    ResultRow {
        trace: trace.to_string(),
        ranks,
        sync: mode.to_string(),
        phases: o.averages.phases,
        avg_max_qt_ns: qt,
        avg_max_qtbt_ns: qtbt,
        baseline_avg_max_qt_ns: o.baseline_qt_ns,
        baseline_avg_max_qtbt_ns: o.baseline_qtbt_ns,
        sd_qtbt_pct: slowdown_pct(qtbt, o.baseline_qtbt_ns),
        sd_qt_pct: slowdown_pct(qt, o.baseline_qt_ns),
        // A virtual-time prediction is deterministic given its seed: no sampling interval.
        sd_qtbt_ci95_pct: None,
        sd_qt_ci95_pct: None,
        lost_rel: o.averages.lost_rel(),
        emulator: o.emulator,
        period_ns: Some([o.mean_period_ns, o.baseline_period_ns]),
        draws: None,
        interval: None,
    }
}

/// The two delay distributions of one stream that the analytic rows need.
#[derive(Debug, Clone, PartialEq)]
pub struct Analytic {
    /// Windows starting anywhere (per-phase resync; the barrier-to-barrier period).
    pub anywhere: DelayDistribution,
    /// Windows starting outside detours (the compute window after a barrier).
    pub after_barrier: DelayDistribution,
}

impl Analytic {
    /// Both distributions of `plan` for quanta `quanta_ns` (unscaled).
    pub fn from_plan(plan: &Arc<Plan>, quanta_ns: u64) -> anyhow::Result<Self> {
        Ok(Analytic {
            anywhere: DelayDistribution::from_plan(plan, quanta_ns, WindowStart::Anywhere)?,
            after_barrier: DelayDistribution::from_plan(
                plan,
                quanta_ns,
                WindowStart::OutsideDetours,
            )?,
        })
    }
}

/// The analytic row for `ranks` ranks under `mode`, or `None` for modes it does not model.
///
/// `none`: independent ranks; AvgMaxQT = q + E[max of N compute delays (windows after a
/// barrier)], AvgMaxQTBT is taken as the mean phase period q + L + E[max of N delays of windows
/// starting anywhere]. `phase`: every rank sees the same window, started anywhere by the resync.
pub fn order_stats_row(
    trace: &str,
    a: &Analytic,
    ranks: u64,
    mode: SyncMode,
    des: &DesConfig,
    scale: f64,
) -> Option<ResultRow> {
    order_stats_row_mix(trace, &[(a, ranks)], ranks, mode, des, scale)
}

/// [`order_stats_row`] for ranks on several node traces (one stream each), `parts[t]` = (the
/// distributions of trace t, how many ranks replay it): `none` takes the maximum over all
/// ranks' independent delays ([`order_stats::expected_max_mix`]); `phase` the maximum over the
/// traces present of one window each (each trace resyncs to its own point); the mean compute
/// delay is the ranks' average. One part is [`order_stats_row`] exactly.
pub fn order_stats_row_mix(
    trace: &str,
    parts: &[(&Analytic, u64)],
    ranks: u64,
    mode: SyncMode,
    des: &DesConfig,
    scale: f64,
) -> Option<ResultRow> {
    let q = des.quanta_ns as f64;
    let lat = des.barrier.latency_ns(ranks);
    type Pick = fn(&Analytic) -> &DelayDistribution;
    let (after, anywhere): (Pick, Pick) = (|a| &a.after_barrier, |a| &a.anywhere);
    let mix = |pick: Pick, count: fn(u64) -> f64| {
        let v: Vec<(&DelayDistribution, f64)> =
            parts.iter().map(|&(a, n)| (pick(a), count(n))).collect();
        order_stats::expected_max_mix(&v)
    };
    let mean = |pick: Pick| {
        (parts.iter())
            .map(|&(a, n)| n as f64 / ranks as f64 * pick(a).mean_ns())
            .sum::<f64>()
    };
    let (max_qt, mean_qt, period) = match mode {
        SyncMode::None => (
            mix(after, |n| n as f64),
            mean(after),
            mix(anywhere, |n| n as f64),
        ),
        SyncMode::Phase => {
            let m = mix(anywhere, |n| f64::from(u8::from(n > 0)));
            (m, mean(anywhere), m)
        }
        SyncMode::Once | SyncMode::Every(_) => return None,
    };
    let (max_qt, mean_qt, period) = (max_qt / scale, mean_qt / scale, period / scale);
    Some(ResultRow {
        trace: trace.to_string(),
        ranks,
        sync: mode.to_string(),
        phases: 0,
        avg_max_qt_ns: q + max_qt,
        avg_max_qtbt_ns: q + lat + period,
        baseline_avg_max_qt_ns: q,
        baseline_avg_max_qtbt_ns: q + lat,
        sd_qtbt_pct: slowdown_pct(q + lat + period, q + lat),
        sd_qt_pct: slowdown_pct(q + max_qt, q),
        sd_qtbt_ci95_pct: None,
        sd_qt_ci95_pct: None,
        lost_rel: (max_qt - mean_qt) / (q + mean_qt),
        emulator: Default::default(),
        period_ns: None,
        draws: None,
        interval: None,
    })
}

/// Most negative slowdown a prediction may show, percent: noise only slows a run down, and the
/// virtual clock's own sampling noise stays well inside this.
pub const SD_FLOOR_PCT: f64 = -1.0;

/// Refuses to print a prediction with a non-finite slowdown or one below [`SD_FLOOR_PCT`].
pub fn check_plausible(p: &Prediction) -> anyhow::Result<()> {
    for row in [&p.des, &p.order_stats]
        .into_iter()
        .flatten()
        .flat_map(|r| &r.results)
    {
        for sd in [row.sd_qtbt_pct, row.sd_qt_pct] {
            anyhow::ensure!(
                sd.is_finite() && sd >= SD_FLOOR_PCT,
                "implausible prediction: slowdown {sd:.2} % for {} ranks ({}, sync {}), below \
                 {SD_FLOOR_PCT} % or not finite; the input is outside what the model handles \
                 (check --scale, --quanta and --barrier-stage-ns)",
                row.ranks,
                row.trace,
                row.sync
            );
        }
    }
    Ok(())
}

/// The prediction as rows of the SD-vs-ranks table and plot ([`crate::plot`]), sorted by trace,
/// sync, model and ranks.
pub fn study_rows(p: &Prediction) -> Vec<crate::plot::StudyRow> {
    crate::plot::rows([&p.des, &p.order_stats].into_iter().flatten())
}
