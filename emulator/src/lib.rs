//! `jitter-emulator`: the JitterEmulator of jitterbench — the replay plan shared with the
//! predictor, calibration of the injector's own cost, and the timer-driven injectors.

pub mod cache;
pub mod calibration;
pub mod capi;
pub mod cli;
pub mod fidelity;
pub mod indexed_replay;
pub mod injector;
pub mod placement;
pub mod plan;
pub mod plan_index;
pub mod process;
pub mod realtime;
pub mod report;
pub mod setup;
pub mod sync;

pub use calibration::{Calibration, Spread};
pub use indexed_replay::{IndexedReplay, SegmentStart};
pub use injector::{
    Emulator, EmulatorError, Handle, InjectorConfig, InjectorStats, LoggedInjection, ReplayPosition,
};
pub use plan::{
    Cursor, Injection, OverheadByGap, Plan, PlanError, PlanOptions, PlanStats, TimerKind,
};
pub use plan_index::{PlanIndex, PrefetchTicket};
pub use setup::{Fraction, InjectionCost, Overrides, ReplaySetup, Scale};
pub use sync::{SyncMode, SyncSchedule};
