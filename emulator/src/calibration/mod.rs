//! Calibration of the injector on the machine at hand: its overhead O (the detour one injection
//! with an empty busy loop causes, as a probe loop in the same thread sees it), the timer's
//! wake-up lateness L, the shortest interval M the timer honours, and the busy spin's own cost.
//! Measured, never assumed; cached per host and kernel (`crate::cache`); overridable; shown by
//! `crate::report`.
//!
//! - [`model`]: what a calibration holds and how it compensates a replay (pure);
//! - [`measure`]: how it is measured (signals, timers, the probe loop);
//! - [`load`]: the machine's load while it was measured (a busy machine's calibration is
//!   flagged and not reused);
//! - [`progress`]: how a calibration says how far it is (the library prints one line; the
//!   command-line tools draw a bar).

pub mod cached;
pub mod load;
pub mod measure;
pub mod model;
pub mod progress;

pub use crate::cache::host_and_kernel;
pub use measure::*;
pub use model::*;
pub use progress::{Progress, StartLine};
