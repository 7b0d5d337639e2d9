//! `jitter-collect`: the TraceCollector of jitterbench — the cycle counter and its calibration,
//! the probe loop, and per-CPU collection into `.jtr` traces.

pub mod attribute;
pub mod check;
pub mod cli;
pub mod clock;
pub mod counter;
pub mod cpuset;
pub mod daemon;
pub mod environment;
pub mod ftq;
pub mod probe;
pub mod ring;
pub mod session;
pub mod table;
pub mod tracefs;
pub mod watchdog;
pub mod writer;

pub use session::{
    collect, collect_with_stop, Config, Mode, SchedPolicy, StopReason, Summary, Threshold,
};
