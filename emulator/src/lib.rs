//! `jitter-emulator`: the JitterEmulator of jitterbench — the replay plan shared with the
//! predictor, calibration of the injector's own cost, and the timer-driven injectors.

pub mod plan;
pub mod sync;

pub use plan::{Cursor, Injection, Plan, PlanError, PlanOptions, PlanStats, TimerKind};
pub use sync::{SyncMode, SyncSchedule};
