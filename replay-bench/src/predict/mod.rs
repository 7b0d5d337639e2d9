//! `replay-bench predict`: the Parallel Benchmark in virtual time for any number of ranks,
//! executing the same replay plan as the emulator (one plan, two clocks), and the analytic
//! order-statistics model beside it.
//!
//! The flags are `crate::flags::predict`; `prepare` resolves them into traces (`input`: one
//! `TraceInput` of plans per trace; a node-trace set is one more row, `TraceInput::node_set`)
//! and a `spec`; `points` runs every trace, rank count and sync mode through the model(s) into
//! a `Prediction`, whose reports and rows `rows` builds; `progress` says how far a long one
//! is in a log. The command itself (threads, budget, MPI, output) is
//! `crate::commands::predict`.

pub mod app;
pub mod background;
pub mod budget;
pub mod collective;
pub mod des;
pub mod drivers;
pub mod input;
pub mod order_stats;
pub(crate) mod phase_loop;
pub mod placement;
pub mod platform;
pub mod points;
pub mod precision;
pub mod prepare;
pub mod progress;
pub(crate) mod ranks;
pub mod rows;
pub(crate) mod simulation;
pub mod spec;
pub mod whatif;
pub mod whatif_chart;
pub mod window;

pub use collective::{Algorithm, CommModel, LoopShape};
pub use des::{
    simulate, simulate_engine, simulate_on, BarrierModel, DesConfig, DesOutcome, Engine,
};
pub use input::{BackgroundPlans, TraceInput};
pub use order_stats::{DelayDistribution, WindowStart};
pub use placement::{NodeTraceArgs, Placement, Timelines};
pub use platform::{barrier_stage_from_report, Platform, PlatformFile};
pub use points::{predict, predict_on};
pub use prepare::prepare;
pub use progress::{progress_line, TEXT_PROGRESS_EVERY};
pub use rows::{
    check_plausible, des_row, order_stats_row, order_stats_row_mix, study_rows, Analytic,
    Prediction, SD_FLOOR_PCT,
};
pub use spec::{rank_phases, PredictSpec};
// The flags of `predict`, where the predictor's modules and its users have always named them.
pub use crate::flags::predict::{order_stats_path, BarrierKind, Model, PredictArgs};
pub use crate::flags::shared::{check_sync_modes, parse_ranks, PlatformChoice, RankCounts};

#[cfg(test)]
mod tests;
