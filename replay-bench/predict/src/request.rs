//! What a prediction is asked (`PredictRequest`): the traces, rank counts, sync modes, model,
//! platform and costs, typed; `replay-bench predict`'s flags parse into it, `validate` and
//! `--windows-of` build it, and `prepare` resolves it into traces and a complete spec.

use std::path::PathBuf;

use jitter_emulator::{SetupOverrides, SyncMode};
use jitter_trace::Salvage;

use crate::collective::{Algorithm, LoopShape};
use crate::platform::PlatformChoice;
use crate::simulation::Engine;
use crate::spec::{Model, PrecisionPlan};

/// What a prediction is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictRequest {
    /// Traces to replay, one row group each.
    pub traces: Vec<PathBuf>,
    /// A node-trace set (one more row group), empty for none.
    pub node_traces: Vec<PathBuf>,
    /// Rank counts, strictly increasing.
    pub ranks: Vec<u64>,
    /// Sync modes of the rows, each once.
    pub modes: Vec<SyncMode>,
    /// Work quanta q of one phase, ns.
    pub quanta_ns: u64,
    /// Phases to simulate.
    pub phases: u64,
    /// Simulate as many phases as one rank takes to replay its whole trace once instead.
    pub whole_trace: bool,
    /// The model(s).
    pub model: Model,
    /// Ranks per node k.
    pub ranks_per_node: u64,
    /// Latency of one barrier stage, ns (default: from `calibrate_from`, else 1000).
    pub barrier_stage_ns: Option<f64>,
    /// The loop of one phase.
    pub loop_shape: LoopShape,
    /// The collective's algorithm.
    pub collective: Algorithm,
    /// LogP overhead o, ns (default: a third of the barrier stage).
    pub logp_o_ns: Option<f64>,
    /// LogP latency l, ns (default: a third of the barrier stage).
    pub logp_l_ns: Option<f64>,
    /// Report of a real run to calibrate the barrier stage from.
    pub calibrate_from: Option<PathBuf>,
    /// The platform.
    pub platform: PlatformChoice,
    /// S, f, the timer and O/L/M in place of the platform's.
    pub replay: SetupOverrides,
    /// A trace of the replay machine's own noise.
    pub platform_noise: Option<PathBuf>,
    /// Standard deviation of one timer error for itimer, ns (default: the platform's).
    pub lateness_sd_ns: Option<u64>,
    /// Seed of offsets, resync points and timer errors.
    pub seed: u64,
    /// Offset draws per point, pooled.
    pub draws: u64,
    /// Predict a trace whose CPUs were busy with other work anyway.
    pub force: bool,
    /// Whether to go on with a trace that lacks detours.
    pub salvage: Salvage,
    /// How the simulation walks the plans.
    pub engine: Engine,
    /// The precision mode's target and budgets; `None`: the work `phases` and `draws` fix.
    pub precision: Option<PrecisionPlan>,
}

impl PredictRequest {
    /// A prediction of `traces` with `replay-bench predict`'s defaults (its flags' tests check
    /// that both agree): ranks 16 … 2048 in powers of two, sync none, once and phase, q = 1 ms,
    /// 2000 phases, the simulation on the ideal platform, one rank per node, the offloaded
    /// barrier's default stage, the benchmark's loop, seed 1, one draw, the default engine (the
    /// work fixed: `predict` without --phases asks the precision mode, `precision`).
    pub fn new(traces: Vec<PathBuf>) -> PredictRequest {
        PredictRequest {
            traces,
            node_traces: Vec::new(),
            ranks: (4..=11).map(|e| 1u64 << e).collect(),
            modes: vec![SyncMode::None, SyncMode::Once, SyncMode::Phase],
            quanta_ns: 1_000_000,
            phases: 2000,
            whole_trace: false,
            model: Model::Des,
            ranks_per_node: 1,
            barrier_stage_ns: None,
            loop_shape: LoopShape::BarrierComputeBarrier,
            collective: Algorithm::Auto,
            logp_o_ns: None,
            logp_l_ns: None,
            calibrate_from: None,
            platform: PlatformChoice::Ideal,
            replay: SetupOverrides::default(),
            platform_noise: None,
            lateness_sd_ns: None,
            seed: 1,
            draws: 1,
            force: false,
            salvage: Salvage::from_flag(false),
            engine: Engine::default(),
            precision: None,
        }
    }
}

/// A list of sync modes (`--sync` of `predict` and `validate`): at least one, each once (a
/// mode listed twice would be two identical rows of every table).
pub fn check_sync_modes(modes: &[SyncMode]) -> anyhow::Result<()> {
    anyhow::ensure!(!modes.is_empty(), "--sync needs at least one mode");
    let twice = (1..modes.len()).find_map(|i| modes[..i].contains(&modes[i]).then_some(modes[i]));
    if let Some(m) = twice {
        anyhow::bail!("--sync lists {m} twice: list every mode once");
    }
    Ok(())
}
