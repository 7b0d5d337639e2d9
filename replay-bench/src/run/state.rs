//! What a rank carries from one step of a run to the next: its own measurements, the agreed
//! inputs (`Prepared`), what the phase loops measured (`Measured`) and what rank 0 gathered.

use std::sync::Arc;

use jitter_collect::clock::Clock;
use jitter_emulator::{Plan, ReplaySetup, SyncSchedule};

use super::trace::LoadedTrace;
use crate::bench::baseline::Reference;
use crate::bench::kernel::WorkRate;
use crate::bench::noise::PlatformNoise;
use crate::bench::phases::LoopOutcome;
use crate::bench::replay::{EmulatorCost, ReplayTotals};
use crate::flags::run::Design;
use jitter_report::report::{CallPayments, EmulatorTotals, RankCost, ReplayedWindows};

/// Everything a rank measured about itself before the run.
#[derive(Debug, Clone)]
pub(crate) struct RankSetup {
    pub(crate) clock: Clock,
    pub(crate) cost: EmulatorCost,
    pub(crate) noise: PlatformNoise,
    pub(crate) rate: WorkRate,
}

/// What every rank holds once the inputs are checked and agreed and the rank is calibrated
/// (steps 1–3 of a run).
pub(crate) struct Prepared {
    pub(crate) trace: Option<LoadedTrace>,
    pub(crate) setup: RankSetup,
    /// S, f and this host's injection cost, as the plan was built with.
    pub(crate) replay: ReplaySetup,
    /// LCG iterations of one phase (agreed: the slowest rank's).
    pub(crate) iterations: u64,
    /// ns per LCG iteration of the slowest rank.
    pub(crate) ns_per_iteration: f64,
    pub(crate) seed: u64,
    pub(crate) schedule: SyncSchedule,
    pub(crate) plan: Option<Arc<Plan>>,
    pub(crate) design: Design,
}

/// What the phase loops measured (steps 4–5b).
pub(crate) struct Measured {
    pub(crate) reference: Reference,
    pub(crate) measured_baseline: Option<LoopOutcome>,
    pub(crate) outcome: LoopOutcome,
    pub(crate) totals: ReplayTotals,
    /// This rank's measured stretches of jitter.
    pub(crate) windows: Vec<crate::bench::windows::RankWindow>,
    /// The largest excess the trace can add to one phase and the window it was taken over
    /// (scaled ns, max over ranks).
    pub(crate) bound: [f64; 2],
}

/// What rank 0 gathered from all ranks (step 6).
pub(crate) struct Gathered {
    pub(crate) calibration: Vec<RankCost>,
    pub(crate) emulator: EmulatorTotals,
    pub(crate) platform_noise_max_ns: f64,
    pub(crate) windows: Option<ReplayedWindows>,
    pub(crate) payments: Option<CallPayments>,
}
