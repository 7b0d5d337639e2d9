//! `jitter-collect`: the TraceCollector of jitterbench — the cycle counter and its calibration,
//! the probe loop, and per-CPU collection into `.jtr` traces.
//!
//! What it offers: [`collect`] (one collection as a [`Config`] describes it, its [`Summary`]),
//! the counter every other crate times with ([`clock`], [`counter`], [`probe`]), CPU sets
//! ([`cpuset`]), the machine's environment ([`environment`]), the `--check` and daemon modes
//! ([`check`], [`daemon`]), real-time safety ([`watchdog`]) and the attribution of detours to
//! kernel sources ([`tracefs`], [`attribute`]). A collection reports how far it is through
//! [`collection_progress::Progress`]. The parts of a session (configuration checks, threads,
//! guards, header, sidecar) are internal.
//!
//! Its public functions return [`CollectError`] (one type, `thiserror`, each cause chained
//! once). The command line, its progress bar and its `anyhow` errors are the binary's
//! (`src/bin/jitter-collect/`): nothing here parses arguments or draws, and with the default
//! feature `cli` off (what the emulator and the preload library take) nothing links clap or
//! indicatif; the feature only adds the command line's derive to [`daemon::DaemonArgs`].

pub mod attribute;
mod attribution_pass;
pub mod check;
pub mod clock;
mod collection_config;
pub mod collection_progress;
pub mod counter;
pub mod cpuset;
pub mod daemon;
pub mod end_table;
pub mod environment;
pub mod error;
pub mod ftq;
mod guard;
mod header;
pub mod probe;
pub mod ring;
pub mod rt_budget;
pub mod rt_refusal;
pub mod session;
pub mod slow_signals;
mod threads;
pub mod tracefs;
pub mod watchdog;
pub mod writer;

pub use error::CollectError;
pub use session::{collect, Config, Mode, SchedPolicy, StopReason, Summary, Threshold};
