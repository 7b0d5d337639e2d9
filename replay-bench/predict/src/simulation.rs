//! What one simulation takes besides the plans, the rank count and the sync mode
//! ([`DesConfig`], with its barrier latency model [`BarrierModel`]), and what it measured
//! ([`DesOutcome`]); shared by both engines and both phase loops. Also which engine walks the
//! plans ([`Engine`]) and where it may answer from their index (`index_allowed`): a rule of the
//! configuration, which the budget and `prepare` read without asking `des`.

use std::sync::Arc;

use jitter_emulator::PlanStats;

use super::collective::CommModel;
#[cfg(doc)]
use super::plan_index::PlanIndex;
use super::rank_layout::RunWindow;
use super::ranks::ceil_log2;
use jitter_report::metrics::PhaseAverages;
use jitter_report::report::EmulatorTotals;

/// Barrier latency: `ceil(log2 N) · stage` (a dissemination or tree barrier of N ranks).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BarrierModel {
    /// Latency of one stage, ns (unscaled, the units of a report).
    pub stage_ns: f64,
}

impl BarrierModel {
    /// Barrier latency for `ranks` ranks, ns (unscaled); 0 for one rank.
    pub fn latency_ns(&self, ranks: u64) -> f64 {
        f64::from(ceil_log2(ranks)) * self.stage_ns
    }
}

/// Everything a simulation needs besides the plans, the rank count and the sync mode.
#[derive(Debug, Clone, PartialEq)]
pub struct DesConfig {
    /// Work quanta q per phase, ns (unscaled).
    pub quanta_ns: u64,
    /// Phases to simulate (fewer when the fraction stop rule ends the replay first).
    pub phases: u64,
    /// Ranks per node k: rank r belongs to node group `r / k` and replays stream `r mod k` of
    /// node trace `(r / k) mod n` (the plans hold k per node trace: [`Placement`](super::rank_layout::Placement)).
    pub ranks_per_node: u64,
    /// Barrier latency model (of [`Algorithm::Offloaded`]).
    pub barrier: BarrierModel,
    /// The loop and its collective: offloaded (the fixed latency above) or an algorithm whose
    /// messages run on the ranks' replay clocks ([`collective`](super::collective)).
    pub comm: CommModel,
    /// Standard deviation of one timer error, ns; each injection adds one to the rank's drift
    /// (a random walk, reset at every resync). 0 disables drift (`--timer abstime`).
    pub drift_sd_ns: f64,
    /// Seed of the sync schedule and of the timer errors.
    pub seed: u64,
    /// A real run's window to start from instead of the schedule's offsets (`None`: the
    /// schedule's): a prediction of the stretches the run replayed (`predict --windows-of`).
    pub window: Option<Arc<RunWindow>>,
}

/// How the simulation advances each rank through its replay plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Engine {
    /// The plan's cursor, injection by injection (cost grows with the detours walked).
    Walk,
    /// The plan compiled once per stream ([`PlanIndex`]), each question answered by search;
    /// the walk where the index is not exact (timer errors, an O-after-a-gap curve).
    #[default]
    Indexed,
}

/// Whether `engine` with `cfg` may answer from the index: the indexed engine without timer
/// errors (drawn per injection, which no index holds); the plans must also have one.
pub(crate) fn index_allowed(engine: Engine, cfg: &DesConfig) -> bool {
    engine == Engine::Indexed && cfg.drift_sd_ns == 0.0
}

/// What one simulation measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DesOutcome {
    /// Per-phase maxima, averaged (unscaled ns).
    pub averages: PhaseAverages,
    /// Phases requested.
    pub requested_phases: u64,
    /// True when the fraction stop rule ended the run before `requested_phases`.
    pub stopped_by_fraction: bool,
    /// Mean time from one barrier completion to the next (the phase period), ns (unscaled).
    pub mean_period_ns: f64,
    /// Baseline AvgMaxQT: the same model without noise, ns (unscaled).
    pub baseline_qt_ns: f64,
    /// Baseline AvgMaxQTBT, ns (unscaled).
    pub baseline_qtbt_ns: f64,
    /// The phase period without noise, ns (unscaled): what `mean_period_ns` would be.
    pub baseline_period_ns: f64,
    /// What the plans injected, summed over ranks.
    pub emulator: EmulatorTotals,
}

impl DesOutcome {
    /// This outcome (the trace united with a platform's noise) against `base` (the platform's
    /// noise alone, same ranks, mode and offsets, over the same stretch of timeline) as its
    /// baseline: the baselines become
    /// `base`'s measured values, and the emulator counts what the trace added over the
    /// platform's own, with the injected share of `lap` (the trace plans' counts over a lap).
    pub(crate) fn over_background(&mut self, base: &DesOutcome, lap: &PlanStats) {
        self.baseline_qt_ns = base.averages.avg_max_qt_ns();
        self.baseline_qtbt_ns = base.averages.avg_max_qtbt_ns();
        self.baseline_period_ns = base.mean_period_ns;
        // The baseline may have run more phases (the same stretch of timeline): per phase.
        let per = self.averages.phases as f64 / base.averages.phases.max(1) as f64;
        let (e, b) = (&mut self.emulator, &base.emulator);
        e.injected = e
            .injected
            .saturating_sub((b.injected as f64 * per).round() as u64);
        e.injected_ns = e
            .injected_ns
            .saturating_sub((b.injected_ns as f64 * per).round() as u64);
        e.injected_share = lap.injected_share();
    }
}

/// Adds `o`'s phases to `into` (one outcome of all their phases): averages pooled, emulator
/// counts summed, the phase period weighted by phases.
pub fn pool(into: &mut Option<DesOutcome>, o: DesOutcome) {
    let Some(a) = into.as_mut() else {
        *into = Some(o);
        return;
    };
    let (na, nb) = (a.averages.phases as f64, o.averages.phases as f64);
    if na + nb > 0.0 {
        a.mean_period_ns = (a.mean_period_ns * na + o.mean_period_ns * nb) / (na + nb);
    }
    a.averages.merge(&o.averages);
    a.requested_phases += o.requested_phases;
    a.stopped_by_fraction |= o.stopped_by_fraction;
    let (e, f) = (&mut a.emulator, &o.emulator);
    e.injected += f.injected;
    e.dropped += f.dropped;
    e.merged += f.merged;
    e.injected_ns += f.injected_ns;
    e.dropped_ns += f.dropped_ns;
    e.injected_share = jitter_emulator::plan::injected_share(e.injected_ns, e.dropped_ns);
    e.max_progress = e.max_progress.max(f.max_progress);
}
