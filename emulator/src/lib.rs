//! `jitter-emulator`: the JitterEmulator of jitterbench — the replay plan shared with the
//! predictor, calibration of the injector's own cost, and the timer-driven injectors.
//!
//! What it offers: the plan of one stream and its walk (`Plan`, `Cursor`, `PlanOptions`) and the
//! merge rule the predictor's compiled index shares (`plan::merge_group`); one replay's
//! checked setup (`ReplaySetup`: `Scale`, `Fraction`, `InjectionCost`) and the sync schedule
//! (`SyncMode`, `SyncSchedule`); the in-process injector (`Emulator`, `Handle`,
//! `EmulatorError`) and the separate-process one (`process`); calibrations of O, L and M
//! (`Calibration`, kept by `cache`, judged by `fidelity`); the one placement rule
//! (`placement::slot`); and the C ABI (`capi`). Calibrations print themselves (`calibration_text`,
//! `Display` impls only); `realtime` is SCHED_FIFO and pinning, restored on drop. The command
//! lines of every replaying tool and the binaries `jitter-emulate`, `jitter-inject` are
//! `jitter-emulator-cli`'s (emulator/cli/): the preload library links this crate into users'
//! MPI ranks, so nothing here parses a command line, draws a bar or starts a thread pool.

pub mod boundary;
pub mod cache;
pub mod calibration;
mod calibration_text;
pub mod capi;
pub mod fidelity;
pub mod injector;
pub mod ledger;
pub mod placement;
pub mod plan;
pub mod process;
pub mod realtime;
pub mod setup;
pub mod sync;

pub use boundary::Boundary;
pub use calibration::{Calibration, Spread};
pub use injector::{
    Emulator, EmulatorError, Handle, InjectorConfig, InjectorStats, LoggedInjection, ReplayPosition,
};
pub use ledger::{LedgerStats, PhaseShares};

pub use plan::{Cursor, OverheadByGap, Plan, PlanError, PlanOptions, PlanStats, TimerKind};
pub use setup::{
    Fraction, InjectionChoice, InjectionCost, InjectionMode, Overrides, ReplaySetup, Scale,
    SetupOverrides,
};
pub use sync::{SyncMode, SyncSchedule};
