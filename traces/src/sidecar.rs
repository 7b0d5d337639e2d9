//! The sidecar `<trace>.attr.json` that `jitter-collect --attribute` writes beside a trace:
//! each detour with its kernel sources and their net times, per CPU, with the steal time the
//! kernel accounted. The analyses of it are [`crate::attribution`] (per-source tables),
//! [`crate::changes`] (two runs side by side) and [`crate::steal`].
//!
//! The sidecar leaves the `.jtr` format untouched, so every reader of format version 1 still
//! accepts the trace; it names the trace's collection start so that a sidecar of another
//! collection is refused. [`crate::sidecar_reader`] reads it detour by detour, in the memory
//! of one detour, for every analysis that passes over it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::TraceError;

/// The sidecar's own format version.
pub const ATTRIBUTION_VERSION: u32 = 1;

/// Label of detour time that no kernel event covers (entry/exit paths, hypervisor time).
pub const UNATTRIBUTED: &str = "unattributed";

/// One source's net share of one detour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Source label, e.g. `timer`, `softirq:TIMER`, `task:kworker/0:1`, `irq:virtio0`.
    pub source: String,
    /// Where the source first covers the detour, ns on the trace's time base.
    pub start_ns: u64,
    /// Net time inside the detour (nested sources subtracted), ns.
    pub ns: u64,
}

/// One detour with its sources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributedDetour {
    /// Start of the detour, ns (as in the trace).
    pub start_ns: u64,
    /// Run-time of the detour, ns (as in the trace).
    pub run_ns: u64,
    /// The dominant source: the one with the most net time, or `unattributed`.
    pub source: String,
    /// Every source in order of first appearance, joined by `+`; `unattributed` when none.
    pub combination: String,
    /// Time explained by kernel events, ns (run − unattributed).
    pub explained_ns: u64,
    /// Net time per source.
    pub parts: Vec<Part>,
}

impl AttributedDetour {
    /// Time no event explains, ns.
    pub fn unattributed_ns(&self) -> u64 {
        self.run_ns.saturating_sub(self.explained_ns)
    }
}

/// The attribution of one stream (CPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CpuAttribution {
    /// The CPU.
    pub cpu: u32,
    /// Observation window of the stream, ns.
    pub begin_ns: u64,
    /// End of the observation window, ns.
    pub end_ns: u64,
    /// Kernel events read for this CPU.
    pub events: u64,
    /// Events the kernel lost (ring buffer overrun and dropped), from `per_cpu/cpuN/stats`.
    pub events_lost: u64,
    /// Handler entries while the probe ran (checks of the shared time base).
    #[serde(default)]
    pub entries_checked: u64,
    /// Of those, entries outside every detour (±1 µs): non-zero means the time bases disagree
    /// or the probe missed the interruption.
    #[serde(default)]
    pub entries_outside: u64,
    /// Steal time the kernel accounted to this CPU over the collection (`None`: not recorded,
    /// e.g. a sidecar written before it was).
    #[serde(default)]
    pub steal: Option<Steal>,
    /// The detours in trace order.
    pub detours: Vec<AttributedDetour>,
}

/// What `jitter-collect --attribute` writes beside the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Attribution {
    /// Sidecar format version.
    pub version: u32,
    /// The trace's `collection_start_unix_ns`: ties the sidecar to its trace.
    pub collection_start_unix_ns: u64,
    /// The tracefs clock the events were stamped with (`x86-tsc`).
    pub trace_clock: String,
    /// Events enabled in the tracefs instance.
    pub events: Vec<String>,
    /// Per CPU.
    pub cpus: Vec<CpuAttribution>,
    /// Free-form notes (e.g. `hypervisor`).
    pub notes: BTreeMap<String, String>,
}

/// The sidecar path of a trace: `<trace>.attr.json`.
pub fn sidecar_path(trace: &Path) -> PathBuf {
    let mut s = trace.as_os_str().to_owned();
    s.push(".attr.json");
    PathBuf::from(s)
}

impl Attribution {
    /// Writes the sidecar with the safe writer (`output::write_output`).
    pub fn write(&self, path: &Path) -> Result<(), TraceError> {
        let bytes = serde_json::to_vec(self)
            .map_err(|e| TraceError::Argument(format!("cannot encode the attribution: {e}")))?;
        crate::output::write_output_bytes(path, &bytes).map(|_| ())
    }

    /// Reads a sidecar and checks its version.
    pub fn read(path: &Path) -> Result<Self, TraceError> {
        let bytes = std::fs::read(path)
            .map_err(|e| TraceError::io(format!("cannot read {}", path.display()), e))?;
        let a: Attribution = serde_json::from_slice(&bytes).map_err(|e| {
            TraceError::Argument(format!("{} is not an attribution: {e}", path.display()))
        })?;
        if a.version != ATTRIBUTION_VERSION {
            return Err(TraceError::Argument(format!(
                "{}: attribution version {} (this build reads {ATTRIBUTION_VERSION})",
                path.display(),
                a.version
            )));
        }
        Ok(a)
    }
}

/// Steal time the kernel accounted to one CPU over a collection (`/proc/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steal {
    /// Steal ticks between a snapshot taken just before the probes start and one just after
    /// they end.
    pub ticks: u64,
    /// Length of one tick, ns (1 s / USER_HZ: 10 ms at USER_HZ 100).
    pub tick_ns: u64,
    /// Time between the two snapshots, ns.
    pub window_ns: u64,
}

impl Steal {
    /// The steal time, ns.
    pub fn ns(&self) -> u64 {
        self.ticks.saturating_mul(self.tick_ns)
    }
}
