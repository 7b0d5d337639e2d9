//! A prediction's reports (`Prediction`): the configuration a report records (`config`), the
//! platform's calibration line, the simulation's row (`des_row`; the analytic tier's is
//! `order_stats`'), the plausibility check every printed prediction passes (`check_plausible`)
//! and the rows of the SD-vs-ranks table (`study_rows`); a row's interval over its draws
//! (`DrawSlowdowns`).

use jitter_emulator::SyncMode;

use super::input::TraceInput;
use super::platform::Platform;
use super::simulation::DesOutcome;
use super::spec::PredictSpec;
use jitter_report::metrics::slowdown_pct;
use jitter_report::report::{
    Config, DrawSpread, PredictDetails, PredictionInterval, RankCost, Report, ResultRow,
};
use jitter_trace::interval::{DrawSet, MeanInterval};

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

/// The prediction as rows of the SD-vs-ranks table and plot ([`jitter_report::plot`]), sorted by trace,
/// sync, model and ranks.
pub fn study_rows(p: &Prediction) -> Vec<jitter_report::plot::StudyRow> {
    jitter_report::plot::rows([&p.des, &p.order_stats].into_iter().flatten())
}

/// Each draw's two slowdowns (eq. 2 and eq. 3) with its phases: the draws' interval of a row.
#[derive(Debug, Clone, Default)]
pub(crate) struct DrawSlowdowns {
    pub(crate) qtbt: DrawSet,
    pub(crate) qt: DrawSet,
}

impl DrawSlowdowns {
    /// Adds one draw's row (`phases` recorded) and widens `spread`, the draws' range.
    pub(crate) fn add(&mut self, spread: &mut DrawSpread, row: &ResultRow, phases: u64) {
        let widen = |r: &mut [f64; 2], x: f64| *r = [r[0].min(x), r[1].max(x)];
        widen(&mut spread.sd_qtbt_range_pct, row.sd_qtbt_pct);
        widen(&mut spread.sd_qt_range_pct, row.sd_qt_pct);
        if phases > 0 {
            self.qtbt.add(row.sd_qtbt_pct, phases as f64);
            self.qt.add(row.sd_qt_pct, phases as f64);
        }
    }

    /// Both intervals ([`DrawSet::interval`]; with one draw, the batch means of its phases in
    /// `pooled`, mapped to slowdowns by its baselines).
    pub(crate) fn intervals(&self, pooled: &DesOutcome) -> [MeanInterval; 2] {
        if self.qtbt.len() >= 2 {
            return [self.qtbt.interval(), self.qt.interval()];
        }
        let a = &pooled.averages;
        let sd = |i: usize, base: f64| a.batches[i].interval().mapped(-100.0, 100.0 / base);
        [sd(1, pooled.baseline_qtbt_ns), sd(0, pooled.baseline_qt_ns)]
    }

    /// Sets `row`'s 95 % half-widths from `intervals` (eq. 2, eq. 3: [`Self::intervals`] of
    /// its draws, or a rule's) and their description: the draws (each ran `phases.0` phases,
    /// `phases.1` of them a warm-up left out), the precision they aimed at and why they
    /// stopped; NaN half-widths stay absent.
    pub(crate) fn interval_into(
        &self,
        row: &mut ResultRow,
        intervals: [MeanInterval; 2],
        phases: (u64, u64),
        precision: Option<String>,
        stopped_by: &str,
    ) {
        let (phases_per_draw, warmup) = phases;
        let [qtbt, qt] = intervals;
        let finite = |h: f64| h.is_finite().then_some(h);
        row.sd_qtbt_ci95_pct = finite(qtbt.half_width);
        row.sd_qt_ci95_pct = finite(qt.half_width);
        row.interval = Some(PredictionInterval {
            source: qtbt.source,
            df: qtbt.df,
            draws: self.qtbt.len().max(1) as u64,
            phases_per_draw,
            warmup_phases: warmup,
            precision,
            stopped_by: stopped_by.into(),
        });
    }
}
