//! What one collection is asked to do: the configuration (`Config`: CPUs, duration or detour
//! count, threshold rule, real-time policy, mode, outputs) and the checks that refuse one no
//! collection can run with, before anything starts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::collection_progress::Progress;
use crate::counter::{DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};
use crate::cpuset::{self, CpuList};
use crate::error::{refuse, Result};
use crate::ftq::Quantum;
use crate::rt_budget;
use crate::tracefs::TraceClock;

/// How the detour threshold is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    /// `k × t_min` (the paper's rule, k = 10 by default).
    Factor(u64),
    /// An absolute threshold in ns (osjitter's `-d`).
    Nanos(u64),
}

/// Real-time scheduling policy for the probe threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SchedPolicy {
    /// SCHED_FIFO.
    Fifo,
    /// SCHED_RR.
    Rr,
}

impl SchedPolicy {
    pub(crate) fn raw(self) -> libc::c_int {
        match self {
            SchedPolicy::Fifo => libc::SCHED_FIFO,
            SchedPolicy::Rr => libc::SCHED_RR,
        }
    }

    /// Name for messages (`SCHED_FIFO`).
    pub fn name(self) -> &'static str {
        match self {
            SchedPolicy::Fifo => "SCHED_FIFO",
            SchedPolicy::Rr => "SCHED_RR",
        }
    }
}

/// What the probes measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Algorithm 2: record every gap between counter reads above the threshold.
    Detours,
    /// Fixed time quantum: count work per quantum; detours are derived from missing work.
    Ftq(Quantum),
}

/// Everything a collection needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// CPUs to probe (`None`: every online CPU in the affinity mask).
    pub cpus: Option<CpuList>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many detours in all.
    pub max_detours: Option<u64>,
    /// Detour threshold rule.
    pub threshold: Threshold,
    /// Counter frequency override, kHz.
    pub khz: Option<u64>,
    /// Back-to-back reads used to profile the counter (its resolution and t_min).
    pub t_min_reads: usize,
    /// Real-time policy and priority for the probes.
    pub sched: Option<(SchedPolicy, i32)>,
    /// Allow a real-time policy on every CPU of the machine.
    pub force: bool,
    /// Trace file to write.
    pub output: PathBuf,
    /// `key=value` labels for the header.
    pub labels: BTreeMap<String, String>,
    /// How often the writer drains the rings (`None`: only at the end).
    pub drain_period: Option<Duration>,
    /// Ring capacity per CPU, entries.
    pub ring_capacity: usize,
    /// Detour or FTQ mode.
    pub mode: Mode,
    /// Where FTQ mode writes its series (CSV); `None` next to the trace.
    pub ftq_csv: Option<PathBuf>,
    /// Where the collection reports how far it is (`jitter-collect` draws a bar on a
    /// terminal); `None`: nowhere.
    pub progress: Option<Arc<dyn Progress>>,
    /// Print warnings to stderr.
    pub verbose: bool,
    /// Lock memory with mlockall when permitted.
    pub lock_memory: bool,
    /// Stop on SIGINT/SIGTERM (installs handlers for the duration of the call).
    pub handle_signals: bool,
    /// Trace kernel events in a private tracefs instance and attribute every detour
    /// (`<trace>.attr.json`).
    pub attribute: bool,
    /// The trace clock for `attribute` (`None`: `x86-tsc` where possible, else `mono`).
    pub trace_clock: Option<TraceClock>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cpus: None,
            duration: Some(Duration::from_secs(10)),
            max_detours: None,
            threshold: Threshold::Factor(DEFAULT_THRESHOLD_FACTOR),
            khz: None,
            t_min_reads: PROFILE_READS,
            sched: None,
            force: false,
            output: PathBuf::from("trace.jtr"),
            labels: BTreeMap::new(),
            drain_period: Some(Duration::from_millis(100)),
            ring_capacity: 1 << 16,
            mode: Mode::Detours,
            ftq_csv: None,
            progress: None,
            verbose: false,
            lock_memory: true,
            handle_signals: false,
            attribute: false,
            trace_clock: None,
        }
    }
}

/// The largest ring per CPU, entries: 1 GiB of 16-byte entries, all touched before the
/// probes start (the default 2^16 holds over 6 s of a 10 kHz noise source between drains).
pub(crate) const MAX_RING: usize = 1 << 26;

/// The most back-to-back reads that profile the counter: 2^28, seconds at tens of ns each.
pub(crate) const MAX_PROFILE_READS: usize = 1 << 28;

/// The longest drain period: a day, the limit of every duration option (a longer one
/// overflowed the writer's clock arithmetic).
pub(crate) const MAX_DRAIN_PERIOD: Duration = Duration::from_secs(86_400);

/// Refuses a configuration no collection can run with.
pub(crate) fn check(config: &Config) -> Result<()> {
    if config.duration.is_some_and(|d| d.is_zero()) {
        refuse!("the duration must be positive");
    }
    if config.max_detours == Some(0) {
        refuse!("--detours must be positive");
    }
    if config.duration.is_none() && config.max_detours.is_none() && !config.handle_signals {
        refuse!("nothing would stop the collection: give a duration or a detour count");
    }
    if config.sched.is_some() && config.duration.is_none() {
        refuse!(
            "a real-time collection (--sched) needs --duration: its probes never sleep, and the \
             watchdog that ends a runaway one is set from the duration"
        );
    }
    if config.max_detours.is_some() && config.drain_period.is_none() {
        refuse!("a detour count needs a periodic drain (the writer counts the detours)");
    }
    if let Threshold::Factor(0) = config.threshold {
        refuse!("the threshold factor must be at least 1");
    }
    if !(2..=MAX_RING).contains(&config.ring_capacity) {
        refuse!(
            "--ring {}: give 2 to {MAX_RING} entries per CPU (16 bytes each, touched before \
             the probes start; the largest is 1 GiB per CPU)",
            config.ring_capacity
        );
    }
    if let Some(p) = config.drain_period.filter(|p| *p > MAX_DRAIN_PERIOD) {
        refuse!(
            "--drain-ms {}: give at most {} (a day; 0 drains only at the end)",
            p.as_millis(),
            MAX_DRAIN_PERIOD.as_millis()
        );
    }
    if !(1..=MAX_PROFILE_READS).contains(&config.t_min_reads) {
        refuse!(
            "--t-min-reads {}: give 1 to {MAX_PROFILE_READS} (the largest takes seconds; the \
             default {} already fills the profile's histogram)",
            config.t_min_reads,
            crate::counter::PROFILE_READS
        );
    }
    Ok(())
}

/// Refuses a real-time priority out of the policy's range, or without `force` a real-time policy
/// on every CPU of the machine or under a real-time budget below [`rt_budget::SPIN_SHARE`];
/// returns the warning a limited budget deserves (the probes spin: the throttle is recorded as
/// `idle` detours).
pub(crate) fn check_sched(
    policy: SchedPolicy,
    prio: i32,
    cpus: &CpuList,
    force: bool,
) -> Result<Option<String>> {
    // SAFETY: these calls only read constants of the policy.
    let (lo, hi) = unsafe {
        (
            libc::sched_get_priority_min(policy.raw()),
            libc::sched_get_priority_max(policy.raw()),
        )
    };
    if prio < lo || prio > hi {
        refuse!(
            "{} priority must be in {lo}..={hi}, got {prio}",
            policy.name()
        );
    }
    let online = cpuset::online_cpus()?;
    if !force && online.ids().iter().all(|&c| cpus.contains(c)) {
        refuse!(
            "refusing {} on every CPU of the machine ({}): the probes would starve the \
             kernel's own threads; leave a CPU out or pass --force",
            policy.name(),
            online
        );
    }
    budget_check(rt_budget::limit(), policy, force)
}

/// [`check_sched`]'s verdict on the real-time budget `limit`: a refusal below
/// [`rt_budget::SPIN_SHARE`] without `force`, else a warning where anything limits it.
fn budget_check(
    limit: Option<rt_budget::Limit>,
    policy: SchedPolicy,
    force: bool,
) -> Result<Option<String>> {
    let Some(l) = limit else {
        return Ok(None);
    };
    if l.stops_spinning() && !force {
        refuse!(
            "refusing {}: {}, and the probes would record mostly that (as `idle` detours); \
             raise it, collect without --sched, or pass --force",
            policy.name(),
            l.line()
        );
    }
    Ok(Some(format!(
        "{}; a {} probe's throttled time shows as `idle` detours",
        l.line(),
        policy.name()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(share: f64) -> rt_budget::Limit {
        rt_budget::Limit {
            share,
            period_us: 1_000_000,
            set_by: PathBuf::from("/sys/fs/cgroup/cpu/jobs/cpu.rt_runtime_us"),
        }
    }

    #[test]
    fn a_budget_that_leaves_spinning_probes_mostly_throttled_is_refused_without_force() {
        let e = budget_check(Some(limit(0.05)), SchedPolicy::Fifo, false).unwrap_err();
        let line = e.to_string();
        assert!(
            line.contains("50 ms of every 1000 ms") && line.contains("--force"),
            "{line}"
        );
        let w = budget_check(Some(limit(0.05)), SchedPolicy::Fifo, true).unwrap();
        assert!(w.unwrap().contains("`idle` detours"));
        // At the kernel's default the probes run, with a warning that names the throttle.
        let w = budget_check(Some(limit(0.95)), SchedPolicy::Rr, false).unwrap();
        assert!(w.unwrap().contains("up to 50 ms of each"));
        assert!(budget_check(None, SchedPolicy::Fifo, false)
            .unwrap()
            .is_none());
    }
}
