//! Everything a prediction needs besides the traces (`PredictSpec`: the engine and the precision
//! mode's plan included, so that nothing edits it after `prepare`), and the work it sets the
//! simulation in rank-phases (`rank_phases`, what the progress counts).

use std::time::Duration;

use jitter_emulator::SyncMode;
use jitter_trace::precision::{Precision, TwoStage};

#[cfg(test)]
use super::collective::CommModel;
#[cfg(test)]
use super::des::BarrierModel;
use super::des::{DesConfig, Engine};
use super::platform::Platform;

/// Which model predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Model {
    /// Virtual-time simulation of every rank and phase.
    Des,
    /// Analytic expected maximum of independent per-rank delays.
    OrderStats,
    /// Both, side by side.
    Both,
}

/// Everything a prediction needs besides the traces.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictSpec {
    /// Rank counts, increasing.
    pub ranks: Vec<u64>,
    /// Sync modes.
    pub modes: Vec<SyncMode>,
    /// Model(s) to run.
    pub model: Model,
    /// Simulation parameters (quanta, phases, k, barrier, drift, seed).
    pub des: DesConfig,
    /// The platform the plans were built for.
    pub platform: Platform,
    /// How the simulation walks the plans.
    pub engine: Engine,
    /// Offset draws per point (seeds `des.seed`, `des.seed + 1`, …), pooled.
    pub draws: u64,
    /// The precision mode's target and budgets (`precision_mode`; its phases and draws then
    /// replace `des.phases` and `draws`), `None` for the work fixed by them.
    pub precision: Option<PrecisionPlan>,
}

/// The precision mode's target and budgets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrecisionPlan {
    /// What every interval must meet.
    pub precision: Precision,
    /// The prediction's time budget (every point gets two draws first).
    pub max_time: Duration,
    /// Most phases of one point, warm-ups included.
    pub max_phases: u64,
    /// Draws of each point's pilot ([`jitter_trace::precision::MIN_DRAWS`]).
    pub pilot: u64,
}

impl PrecisionPlan {
    /// The two-stage rule of a point with at most `max_draws` draws (raised to the pilot).
    pub fn rule(&self, max_draws: u64) -> TwoStage {
        let pilot = self.pilot.max(2);
        TwoStage {
            precision: self.precision,
            pilot,
            max_draws: max_draws.max(pilot),
        }
    }

    /// Default `--max-time`, ns (10 min).
    pub const DEFAULT_MAX_TIME_NS: u64 = 600_000_000_000;
    /// Default `--max-phases`.
    pub const DEFAULT_MAX_PHASES: u64 = 1_000_000;
}

#[cfg(test)]
impl PredictSpec {
    /// The tests' common spec: the offloaded barrier without latency on the ideal platform,
    /// q = 1 ms, no timer errors, seed 1, one draw.
    pub(crate) fn ideal_offloaded(
        ranks: Vec<u64>,
        modes: Vec<SyncMode>,
        phases: u64,
        engine: Engine,
    ) -> Self {
        PredictSpec {
            ranks,
            modes,
            model: Model::Des,
            des: DesConfig {
                quanta_ns: 1_000_000,
                phases,
                ranks_per_node: 1,
                barrier: BarrierModel { stage_ns: 0.0 },
                comm: CommModel::OFFLOADED,
                drift_sd_ns: 0.0,
                seed: 1,
                window: None,
            },
            platform: Platform::ideal(),
            engine,
            draws: 1,
            precision: None,
        }
    }
}

/// The simulation's work in rank-phases (what the progress counts; 0 for the analytic tier).
pub fn rank_phases(traces: usize, spec: &PredictSpec) -> u64 {
    if matches!(spec.model, Model::OrderStats) {
        return 0;
    }
    let per_mode = spec.ranks.iter().fold(0u64, |a, &n| {
        a.saturating_add(n.saturating_mul(spec.des.phases))
    });
    per_mode.saturating_mul(traces as u64 * spec.modes.len() as u64 * spec.draws.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_rank_phases_and_saturates() {
        let mut spec = PredictSpec::ideal_offloaded(
            vec![16, 32],
            vec![SyncMode::None, SyncMode::Phase],
            100,
            Engine::default(),
        );
        assert_eq!(rank_phases(3, &spec), 3 * 2 * 48 * 100);
        spec.ranks = vec![u64::MAX / 2];
        assert_eq!(rank_phases(3, &spec), u64::MAX);
        spec.model = Model::OrderStats;
        assert_eq!(rank_phases(3, &spec), 0);
    }
}
