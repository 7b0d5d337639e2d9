//! `jitter-collect`: the TraceCollector of jitterbench — the cycle counter and its calibration,
//! the probe loop, and per-CPU collection into `.jtr` traces.

pub mod clock;
pub mod probe;
