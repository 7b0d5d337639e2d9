//! Calibration of the injector on the machine at hand: its overhead O (the detour one injection
//! with an empty busy loop causes, as a probe loop in the same thread sees it), the timer's
//! wake-up lateness L, the shortest interval M the timer honours, and the busy spin's own cost.
//! Measured, never assumed; cached per host and kernel (`crate::cache`); overridable; shown by
//! `crate::calibration_text`.
//!
//! - `cost_model`: what a calibration holds and how it compensates a replay (pure);
//! - `cost_measurement`: how it is measured (signals, timers, the probe loop);
//! - [`machine_load`]: the machine's load while it was measured (a busy machine's calibration is
//!   flagged and not reused);
//! - `calibration_progress`: how a calibration says how far it is (the library prints one
//!   line; the command-line tools draw a bar).

pub mod cached;
pub(crate) mod calibration_progress;
pub(crate) mod cost_measurement;
pub(crate) mod cost_model;
pub mod machine_load;

pub use crate::cache::host_and_kernel;
pub use calibration_progress::{Progress, StartLine};
pub use cost_measurement::*;
pub use cost_model::*;
