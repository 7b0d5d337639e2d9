//! `jitter-collect`: the TraceCollector of jitterbench — the cycle counter and its calibration,
//! the probe loop, and per-CPU collection into `.jtr` traces.
//!
//! Its public functions return [`CollectError`] (one type, `thiserror`, each cause chained
//! once); only the command line ([`cli`], `main.rs`) uses `anyhow`.

pub mod attribute;
pub mod check;
pub mod cli;
pub mod clock;
pub mod counter;
pub mod cpuset;
pub mod daemon;
pub mod environment;
pub mod error;
pub mod ftq;
pub mod probe;
pub mod ring;
pub mod session;
pub mod table;
pub mod tracefs;
pub mod watchdog;
pub mod writer;

pub use error::CollectError;
pub use session::{
    collect, collect_with_stop, Config, Mode, SchedPolicy, StopReason, Summary, Threshold,
};
