//! `jitter-emulator`: the JitterEmulator of jitterbench — the replay plan shared with the
//! predictor, calibration of the injector's own cost, and the timer-driven injectors.

pub mod cache;
pub mod calibration;
pub mod capi;
pub mod cli;
pub mod fidelity;
pub mod injector;
pub mod placement;
pub mod plan;
pub mod process;
pub mod realtime;
pub mod report;
pub mod setup;
pub mod sync;

pub use calibration::{Calibration, Spread};
pub use injector::{
    Emulator, EmulatorError, Handle, InjectorConfig, InjectorStats, LoggedInjection, ReplayPosition,
};
pub use plan::{
    Cursor, IndexedReplay, Injection, OverheadByGap, Plan, PlanError, PlanIndex, PlanOptions,
    PlanStats, PrefetchTicket, SegmentStart, TimerKind,
};
pub use setup::{Fraction, InjectionCost, Overrides, ReplaySetup, Scale};
pub use sync::{SyncMode, SyncSchedule};
