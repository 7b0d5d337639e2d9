//! `jitter-predict`: the Parallel Benchmark (and an application profile's main loop) in
//! virtual time for any number of ranks, executing the same replay plan as the emulator (one
//! plan, two clocks), and the analytic order-statistics model beside it.
//!
//! A prediction is asked as a [`PredictRequest`] (`replay-bench predict`'s flags parse into
//! one); [`prepare`] resolves it into traces (`input`: one [`TraceInput`] of plans per trace; a
//! node-trace set is one more, `TraceInput::node_set`) and a [`PredictSpec`]; [`predict`]
//! (`prediction`) runs every trace, rank count and sync mode through the model(s) — the
//! simulation [`simulate`] (`des`) and the analytic tier (`order_stats`) — into a
//! [`Prediction`], whose reports `prediction_report` builds, for the work the spec fixes or in
//! the precision mode (`precision_mode` plans the draws); `progress` says how far a long one is
//! in a log. The spec reaches the models through `prediction` alone. The plans'
//! compiled index is `plan_index` (one rank's replay in it: `indexed_replay`). Split over MPI
//! processes, the ranks reduce through `comm::Collective`, which the benchmark implements over
//! MPI: nothing here links MPI.
//!
//! The feature `clap` derives `clap::ValueEnum` for the values a command line names (`Model`,
//! `Engine`, `Algorithm`, `LoopShape`, `Removal`); only the binary enables it.

pub mod app;
pub mod background;
pub mod budget;
pub mod collective;
pub mod comm;
pub(crate) mod decode;
pub mod des;
pub mod indexed_replay;
pub mod input;
pub mod order_stats;
pub(crate) mod phase_loop;
pub mod plan_index;
pub mod platform;
pub mod precision_mode;
pub mod prediction;
pub mod prediction_report;
pub mod prepare;
pub mod progress;
pub mod rank_layout;
pub(crate) mod ranks;
pub mod request;
pub(crate) mod simulation;
pub mod size_classes;
pub mod spec;
pub mod whatif;
pub mod whatif_chart;
pub mod window;

pub use collective::{Algorithm, CommModel, LoopShape};
pub use des::{simulate, BarrierModel, DesConfig, DesOutcome, Engine};
pub use input::{BackgroundPlans, TraceInput};
pub use order_stats::{order_stats_row, Analytic, DelayDistribution, WindowStart};
pub use platform::{Platform, PlatformChoice};
pub use prediction::predict;
pub use prediction_report::{check_plausible, des_row, study_rows, Prediction, SD_FLOOR_PCT};
pub use prepare::prepare;
pub use progress::TEXT_PROGRESS_EVERY;
pub use rank_layout::Placement;
pub use request::{check_sync_modes, PredictRequest};
pub use spec::{rank_phases, Model, PrecisionPlan, PredictSpec};
