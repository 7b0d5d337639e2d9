//! A collection session: one pinned probe per CPU started together, a writer streaming their
//! detours to one `.jtr` trace on a common time base, and the summary table at the end.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use jitter_trace::attribution::{self, Attribution, CpuAttribution};
use jitter_trace::output::StreamingOutput;
use jitter_trace::sanity::Observation;
use jitter_trace::{Epilogue, Header, StreamSummary};
use serde::Serialize;

use crate::attribute;
use crate::clock::{kernel_tsc_khz, read_counter, tsc_flags, Clock, CounterSource};
use crate::counter::{CounterProfile, DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};
use crate::cpuset::{self, CpuList};
use crate::environment::{self, IrqSnapshot};
use crate::ftq::{self, FtqConverter, Quantum};
use crate::probe::{self, LoopStats};
use crate::ring::{ring, RingProducer};
use crate::table::{CpuRow, RowFacts};
use crate::tracefs::{self, Instance, TraceClock};
use crate::watchdog::Watchdog;
use crate::writer::{Decoder, Writer, WriterSetup};

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
    fn raw(self) -> libc::c_int {
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
    /// Show a progress bar when stderr is a terminal.
    pub progress: bool,
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
            progress: false,
            verbose: false,
            lock_memory: true,
            handle_signals: false,
            attribute: false,
            trace_clock: None,
        }
    }
}

/// Why a collection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The duration elapsed.
    Duration,
    /// The detour count was reached.
    Detours,
    /// SIGINT, SIGTERM or the caller's stop flag.
    Signal,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Duration => "duration",
            StopReason::Detours => "detours",
            StopReason::Signal => "signal",
        })
    }
}

/// What a finished collection produced.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The trace written.
    pub trace: PathBuf,
    /// The FTQ series written (FTQ mode).
    pub ftq_csv: Option<PathBuf>,
    /// The header as written.
    #[serde(skip)]
    pub header: Header,
    /// One row per CPU.
    pub rows: Vec<CpuRow>,
    /// t_min: the counter's undisturbed loop period, ns.
    pub t_min_ns: f64,
    /// The counter's resolution, ns.
    pub resolution_ns: f64,
    /// Threshold used, ns.
    pub threshold_ns: f64,
    /// Counter frequency used, kHz.
    pub tsc_khz: u64,
    /// How it ended.
    pub stopped_by: StopReason,
    /// Writer activity windows recorded.
    pub self_windows: usize,
    /// Total time the writer was active, ns.
    pub self_ns: u64,
    /// CPU the writer was pinned to (`None`: it shared the probed CPUs).
    pub writer_cpu: Option<u32>,
    /// CPU time the writer thread used (CLOCK_THREAD_CPUTIME_ID), ns: its direct self-noise.
    pub writer_cpu_ns: u64,
    /// Warnings given.
    pub warnings: Vec<String>,
    /// Why the numbers cannot be right, one line per CPU that failed the plausibility check.
    pub implausible: Vec<String>,
    /// The attribution sidecar written (`--attribute`).
    pub attribution_file: Option<PathBuf>,
    /// The per-source table (`--attribute`).
    pub attribution: Option<jitter_trace::attribution::Report>,
}

struct Shared {
    barrier: Barrier,
    abort: AtomicBool,
    threshold: AtomicU64,
    deadline: AtomicU64,
    origin: AtomicU64,
    quantum: AtomicU64,
    stop: Arc<AtomicBool>,
    profiles: Mutex<Vec<Option<CounterProfile>>>,
    full: Vec<AtomicU64>,
    errors: Mutex<Vec<String>>,
}

struct ProbeOutcome {
    stats: LoopStats,
    lost: u64,
    lost_ticks: u64,
    invol_ctx: u64,
    ran: bool,
}

fn invol_switches() -> u64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
        .map(|u| u.involuntary_context_switches() as u64)
        .unwrap_or(0)
}

/// CPU time of the calling thread so far, ns.
fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

fn set_policy(policy: SchedPolicy, prio: i32) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 names the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy.raw(), &param) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot set {} priority {prio}", policy.name()));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn probe_thread(
    index: usize,
    cpu: u32,
    mut producer: RingProducer,
    shared: Arc<Shared>,
    sched: Option<(SchedPolicy, i32)>,
    t_min_reads: usize,
    mode: Mode,
    quantum_hint: u64,
) -> ProbeOutcome {
    let mut outcome = ProbeOutcome {
        stats: LoopStats::default(),
        lost: 0,
        lost_ticks: 0,
        invol_ctx: 0,
        ran: false,
    };
    let setup = (|| -> Result<()> {
        cpuset::pin_current_thread(&[cpu])?;
        if let Some((p, prio)) = sched {
            set_policy(p, prio).with_context(|| format!("CPU {cpu}"))?;
        }
        let profile = CounterProfile::measure(t_min_reads);
        shared.profiles.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(profile);
        if matches!(mode, Mode::Ftq(_)) {
            shared.full[index].store(ftq::full_count(quantum_hint, 32), Ordering::Relaxed);
        }
        Ok(())
    })();
    if let Err(e) = setup {
        let msg = format!("{e:#}");
        shared
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(msg);
        shared.abort.store(true, Ordering::Release);
    }
    shared.barrier.wait(); // A: set up, t_min known
    shared.barrier.wait(); // B: threshold and origin published, go
    if shared.abort.load(Ordering::Acquire) {
        return outcome;
    }
    let threshold = shared.threshold.load(Ordering::Acquire);
    let deadline = shared.deadline.load(Ordering::Acquire);
    let origin = shared.origin.load(Ordering::Acquire);
    let ctx0 = invol_switches();
    outcome.stats = match mode {
        Mode::Detours => probe::run(threshold, deadline, &shared.stop, |a, b| {
            producer.push([a, b], b - a);
            std::ops::ControlFlow::Continue(())
        }),
        Mode::Ftq(_) => {
            let quantum = shared.quantum.load(Ordering::Acquire);
            ftq::run(quantum, origin, deadline, u64::MAX, &shared.stop, |s, c| {
                producer.push([s, c], 0)
            })
        }
    };
    outcome.invol_ctx = invol_switches().saturating_sub(ctx0);
    outcome.lost = producer.lost();
    outcome.lost_ticks = producer.lost_ticks();
    outcome.ran = true;
    outcome
}

/// Signal handlers that set the stop flag, removed on drop.
#[derive(Debug, Default)]
struct SignalGuard {
    ids: Vec<signal_hook::SigId>,
}

impl SignalGuard {
    fn install(stop: &Arc<AtomicBool>, attribute: bool) -> Result<Self> {
        let mut guard = SignalGuard::default();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            if attribute {
                // Registered first, so it runs before the exit below: on the second signal
                // (the stop flag already set) the tracefs instance is removed before exiting.
                let flag = stop.clone();
                // SAFETY: the action only loads atomics and calls rmdir(2), which is
                // async-signal-safe (`tracefs::remove_in_signal_handler`).
                let id = unsafe {
                    signal_hook::low_level::register(sig, move || {
                        if flag.load(Ordering::SeqCst) {
                            tracefs::remove_in_signal_handler();
                        }
                    })
                }
                .context("cannot install the signal handler")?;
                guard.ids.push(id);
            }
            // A second signal while stopping ends the process at once (exit status 130).
            let id = signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
                .context("cannot install the signal handler")?;
            guard.ids.push(id);
            let id = signal_hook::flag::register(sig, stop.clone())
                .context("cannot install the signal handler")?;
            guard.ids.push(id);
        }
        Ok(guard)
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Linux's MCL_ONFAULT: lock pages as they are faulted in, not all at once.
const MCL_ONFAULT: libc::c_int = 4;

/// Memory locked with mlockall for the duration of a collection; unlocked on drop.
#[derive(Debug)]
struct MemoryLock;

impl MemoryLock {
    fn acquire() -> Result<Self> {
        // SAFETY: mlockall has no memory-safety preconditions.
        let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | MCL_ONFAULT) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("mlockall");
        }
        Ok(MemoryLock)
    }
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        // SAFETY: munlockall has no memory-safety preconditions.
        unsafe {
            libc::munlockall();
        }
    }
}

fn ignore_sigxfsz() {
    // SAFETY: installing SIG_IGN for SIGXFSZ replaces no Rust handler and is async-signal-safe;
    // it makes writes past RLIMIT_FSIZE fail with EFBIG instead of killing the process.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGXFSZ,
            nix::sys::signal::SigHandler::SigIgn,
        );
    }
}

/// The counter frequency by `Clock::choose`, its warning (if any) added to `warnings`.
pub fn choose_clock(khz: Option<u64>, warnings: &mut Vec<String>) -> Result<Clock> {
    let (clock, warning) = Clock::choose(khz).context(if khz.is_some() {
        "--khz"
    } else {
        "calibrating the counter"
    })?;
    warnings.extend(warning);
    Ok(clock)
}

/// Real-time CPU time a probe at SCHED_FIFO/RR may take past `--duration` before the watchdog
/// ends the process.
pub const WATCHDOG_MARGIN: Duration = Duration::from_secs(2);

/// Runs one collection as configured: probes every selected CPU, streams the detours to
/// `config.output`, writes the end chunk, and returns the per-CPU table.
pub fn collect(config: &Config) -> Result<Summary> {
    collect_with_stop(config, Arc::new(AtomicBool::new(false)))
}

/// `collect`, with a flag the caller may set (from any thread) to stop early.
pub fn collect_with_stop(config: &Config, stop: Arc<AtomicBool>) -> Result<Summary> {
    if config.duration.is_some_and(|d| d.is_zero()) {
        bail!("the duration must be positive");
    }
    if config.max_detours == Some(0) {
        bail!("--detours must be positive");
    }
    if config.duration.is_none() && config.max_detours.is_none() && !config.handle_signals {
        bail!("nothing would stop the collection: give a duration or a detour count");
    }
    if config.max_detours.is_some() && config.drain_period.is_none() {
        bail!("a detour count needs a periodic drain (the writer counts the detours)");
    }
    if let Threshold::Factor(0) = config.threshold {
        bail!("the threshold factor must be at least 1");
    }
    if config.ring_capacity < 2 {
        bail!("the ring must hold at least 2 entries");
    }
    if config.t_min_reads == 0 {
        bail!("t_min needs at least one read");
    }
    let cpus = cpuset::select(config.cpus.as_ref())?;
    // From here on SIGINT/SIGTERM stop the collection (a signal during setup gives a short
    // trace); the handlers are removed when this function returns.
    let signals = if config.handle_signals {
        SignalGuard::install(&stop, config.attribute)?
    } else {
        SignalGuard::default()
    };
    if let Some((policy, prio)) = config.sched {
        // SAFETY: these calls only read constants of the policy.
        let (lo, hi) = unsafe {
            (
                libc::sched_get_priority_min(policy.raw()),
                libc::sched_get_priority_max(policy.raw()),
            )
        };
        if prio < lo || prio > hi {
            bail!(
                "{} priority must be in {lo}..={hi}, got {prio}",
                policy.name()
            );
        }
        let online = cpuset::online_cpus()?;
        if !config.force && online.ids().iter().all(|&c| cpus.contains(c)) {
            bail!(
                "refusing {} on every CPU of the machine ({}): the probes would starve the \
                 kernel's own threads; leave a CPU out or pass --force",
                policy.name(),
                online
            );
        }
    }
    let mut stale_warnings = Vec::new();
    // The tracefs instance is removed when this function returns, on every path (its guard);
    // it traces from here, so the probes' start-up is in the buffer too.
    let mut instance = if config.attribute {
        if !matches!(config.mode, Mode::Detours) {
            bail!("--attribute needs --mode detours");
        }
        let mut inst = Instance::create(
            &cpus,
            tracefs::buffer_kb(config.duration, cpus.len()),
            config.trace_clock,
        )?;
        for s in &inst.removed_stale {
            stale_warnings.push(format!(
                "removed the tracefs instance {s} left by a process that is gone"
            ));
        }
        inst.start()?;
        Some(inst)
    } else {
        None
    };
    let output = &config.output;
    // Nothing at an existing path is changed before the collection is complete, and a setup
    // error removes only what this run created (`StreamingOutput`, dropped before `keep`).
    let mut out_file = StreamingOutput::open(output)
        .with_context(|| format!("cannot create the output {}", output.display()))?;
    let file = out_file.file()?;
    let ftq_csv = match config.mode {
        Mode::Ftq(_) => Some(
            config
                .ftq_csv
                .clone()
                .unwrap_or_else(|| output.with_extension("ftq.csv")),
        ),
        Mode::Detours => None,
    };
    let mut csv_out = ftq_csv
        .as_deref()
        .map(|p| {
            StreamingOutput::open(p)
                .with_context(|| format!("cannot create the FTQ series {}", p.display()))
        })
        .transpose()?;
    let csv_file = csv_out.as_ref().map(StreamingOutput::file).transpose()?;
    ignore_sigxfsz();

    let mut warnings = stale_warnings;
    match tsc_flags() {
        Some(f) if !f.constant || !f.nonstop => warnings.push(format!(
            "the TSC lacks {}: detour lengths may be wrong when the CPU changes frequency or \
             sleeps",
            [
                (!f.constant).then_some("constant_tsc"),
                (!f.nonstop).then_some("nonstop_tsc")
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" and ")
        )),
        _ => {}
    }
    let clock = choose_clock(config.khz, &mut warnings)?;
    let machine = environment::machine();
    let irq_before = IrqSnapshot::take();

    let n = cpus.len();
    let mut producers = Vec::with_capacity(n);
    let mut consumers = Vec::with_capacity(n);
    for _ in 0..n {
        let (p, c) = ring(config.ring_capacity);
        producers.push(p);
        consumers.push(c);
    }
    let _memory_lock = if config.lock_memory {
        match MemoryLock::acquire() {
            Ok(lock) => Some(lock),
            Err(e) => {
                warnings.push(format!(
                    "memory not locked ({e:#}); page faults may show as detours"
                ));
                None
            }
        }
    } else {
        None
    };
    let quantum_hint = match config.mode {
        Mode::Ftq(q) => q.ticks(&clock),
        Mode::Detours => 0,
    };

    let shared = Arc::new(Shared {
        barrier: Barrier::new(n + 1),
        abort: AtomicBool::new(false),
        threshold: AtomicU64::new(0),
        deadline: AtomicU64::new(u64::MAX),
        origin: AtomicU64::new(0),
        quantum: AtomicU64::new(quantum_hint),
        stop: stop.clone(),
        profiles: Mutex::new(vec![None; n]),
        full: (0..n).map(|_| AtomicU64::new(0)).collect(),
        errors: Mutex::new(Vec::new()),
    });
    // A probe at a real-time policy never sleeps while it measures: the watchdog ends the
    // process (one `error:` line, the trace keeps its chunks) if one runs 2 s past the
    // duration. Without a duration nothing bounds a probe's run, and no watchdog is armed.
    let _watchdog = match (config.sched, config.duration) {
        (Some(_), Some(d)) => Some(
            Watchdog::arm(d + WATCHDOG_MARGIN)
                .context("cannot arm the real-time watchdog (RLIMIT_RTTIME)")?,
        ),
        _ => None,
    };
    let mut handles = Vec::with_capacity(n);
    for (i, (&cpu, producer)) in cpus.ids().iter().zip(producers).enumerate() {
        let sh = shared.clone();
        let (sched, reads, mode) = (config.sched, config.t_min_reads, config.mode);
        let h = thread::Builder::new()
            .name(format!("probe-{cpu}"))
            .stack_size(256 << 10)
            .spawn(move || probe_thread(i, cpu, producer, sh, sched, reads, mode, quantum_hint))
            .context("cannot start a probe thread")?;
        handles.push(h);
    }
    shared.barrier.wait(); // A

    // Everything between the barriers must not return early: the probes wait on barrier B.
    let prepared = (|| -> Result<_> {
        if shared.abort.load(Ordering::Acquire) {
            let errs = shared.errors.lock().unwrap_or_else(|p| p.into_inner());
            bail!("{}", errs.join("; "));
        }
        let profiles: Vec<CounterProfile> = shared
            .profiles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|p| p.ok_or_else(|| anyhow!("a probe did not profile the counter")))
            .collect::<Result<_>>()?;
        let profile = CounterProfile::combine(&profiles)
            .ok_or_else(|| anyhow!("no CPU to profile the counter on"))?;
        let threshold = match config.threshold {
            Threshold::Factor(k) => profile.threshold_ticks(k),
            Threshold::Nanos(ns) => {
                let t = clock.ns_to_ticks(ns);
                if let Some(why) = profile.refuse_threshold(t, &clock) {
                    bail!("{why}");
                }
                t
            }
        };
        let mut environment = machine.environment.clone();
        environment.insert("frequency_source".into(), clock.source.to_string());
        environment.insert(
            "counter_source".into(),
            CounterSource::current().name().into(),
        );
        environment.insert(
            "counter_resolution_ticks".into(),
            profile.resolution_ticks.to_string(),
        );
        environment.insert(
            "counter_loop_ticks".into(),
            format!("{:.3}", profile.loop_ticks),
        );
        if let Some(k) = kernel_tsc_khz() {
            environment.insert("kernel_tsc_khz".into(), k.to_string());
        }
        let writer_cpu = cpuset::affinity()
            .ok()
            .and_then(|m| m.ids().iter().copied().find(|&c| !cpus.contains(c)));
        environment.insert(
            "writer_cpu".into(),
            writer_cpu.map_or_else(
                || "shared with the probes (every allowed CPU is probed)".into(),
                |c| c.to_string(),
            ),
        );
        environment.insert(
            "drain_period_ms".into(),
            config
                .drain_period
                .map_or("end only".into(), |d| d.as_millis().to_string()),
        );
        environment.insert("ring_capacity".into(), config.ring_capacity.to_string());
        environment.insert(
            "sched".into(),
            config.sched.map_or("SCHED_OTHER".into(), |(p, prio)| {
                format!("{} {prio}", p.name())
            }),
        );
        match config.mode {
            Mode::Detours => {
                environment.insert("mode".into(), "detours".into());
            }
            Mode::Ftq(_) => {
                environment.insert("mode".into(), "ftq".into());
                environment.insert("ftq_quantum_ticks".into(), quantum_hint.to_string());
            }
        }
        if let Threshold::Factor(k) = config.threshold {
            environment.insert("threshold_factor".into(), k.to_string());
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let origin = read_counter();
        let header = Header {
            tool_version: format!("jitter-collect {}", env!("CARGO_PKG_VERSION")),
            host: machine.host.clone(),
            kernel_release: machine.kernel_release.clone(),
            kernel_cmdline: machine.kernel_cmdline.clone(),
            cpu_model: machine.cpu_model.clone(),
            tsc_khz: clock.khz(),
            t_min_ns: clock.ticks_to_ns_f64(1) * profile.loop_ticks,
            threshold_ns: clock.ticks_to_ns_f64(threshold),
            collection_start_unix_ns: now.as_nanos() as u64,
            duration_ns: config.duration.map_or(0, |d| d.as_nanos() as u64),
            stream_cpus: cpus.ids().to_vec(),
            labels: config.labels.clone(),
            environment,
            ..Header::default()
        };
        let trace = Writer::open(file, &header)
            .with_context(|| format!("cannot write {}", output.display()))?;
        out_file.publish()?;
        if let Some(c) = csv_out.as_mut() {
            c.publish()?;
        }
        let progress = (config.progress && std::io::stderr().is_terminal()).then(|| {
            let pb = match config.duration {
                Some(d) => {
                    let pb = ProgressBar::new(d.as_millis() as u64);
                    pb.set_style(
                        ProgressStyle::with_template(
                            "{elapsed_precise} [{bar:30}] {percent:>3}% of {len}ms  {msg}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    pb
                }
                None => ProgressBar::new_spinner(),
            };
            pb.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
            pb
        });
        let streams = cpus
            .ids()
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let dec = match config.mode {
                    Mode::Detours => Decoder::Detours,
                    Mode::Ftq(_) => Decoder::Ftq(FtqConverter::new(
                        quantum_hint,
                        origin,
                        shared.full[i].load(Ordering::Relaxed),
                        threshold,
                    )),
                };
                (cpu, dec)
            })
            .collect();
        let writer = Writer::new(WriterSetup {
            trace,
            rings: consumers,
            streams,
            clock,
            origin,
            csv: csv_file,
            max_detours: config.max_detours,
            stop: stop.clone(),
            progress,
        })?;
        Ok((
            writer, header, profiles, profile, threshold, origin, writer_cpu,
        ))
    })();
    let (writer, header, profiles, profile, threshold, origin, writer_cpu) = match prepared {
        Ok(p) => p,
        Err(e) => {
            shared.abort.store(true, Ordering::Release);
            shared.barrier.wait(); // B
            for h in handles {
                let _ = h.join();
            }
            return Err(e);
        }
    };
    for w in &warnings {
        if config.verbose {
            eprintln!("warning: {w}");
        }
    }

    let deadline = match config.duration {
        Some(d) => origin.saturating_add(clock.ns_to_ticks(d.as_nanos() as u64)),
        None => u64::MAX,
    };
    shared.threshold.store(threshold, Ordering::Release);
    shared.deadline.store(deadline, Ordering::Release);
    shared.origin.store(origin, Ordering::Release);
    let done = Arc::new(AtomicBool::new(false));
    let writer_done = done.clone();
    let period = config.drain_period;
    let writer_handle = thread::Builder::new()
        .name("jtr-writer".into())
        .spawn(move || {
            if let Some(c) = writer_cpu {
                let _ = cpuset::pin_current_thread(&[c]);
            }
            let mut writer = writer;
            let r = writer.run(period, &writer_done);
            (writer, r, thread_cpu_ns())
        })
        .context("cannot start the writer thread");
    let writer_handle = match writer_handle {
        Ok(h) => h,
        Err(e) => {
            shared.abort.store(true, Ordering::Release);
            shared.barrier.wait(); // B
            for h in handles {
                let _ = h.join();
            }
            return Err(e);
        }
    };
    shared.barrier.wait(); // B: go
                           // From here on the outputs hold collected data: kept whatever happens.
    out_file.keep();
    if let Some(c) = csv_out.as_mut() {
        c.keep();
    }
    if out_file.replaces() && config.verbose {
        eprintln!(
            "writing {}; it replaces {} when the collection is complete",
            out_file.data_path().display(),
            output.display()
        );
    }

    let outcomes: Vec<ProbeOutcome> = handles
        .into_iter()
        .map(|h| h.join().map_err(|_| anyhow!("a probe thread panicked")))
        .collect::<Result<_>>()?;
    if let Some(inst) = &mut instance {
        inst.stop()?;
    }
    done.store(true, Ordering::Release);
    writer_handle.thread().unpark();
    let (mut writer, result, writer_cpu_ns) = writer_handle
        .join()
        .map_err(|_| anyhow!("the writer thread panicked"))?;
    drop(signals);
    let irq_after = IrqSnapshot::take();
    if let Some(pb) = &writer_progress(&writer) {
        pb.finish_and_clear();
    }
    let kept_in = out_file.data_path().to_path_buf();
    let kept = |e: anyhow::Error| {
        e.context(if kept_in == *output {
            format!(
                "collection stopped; {} keeps the chunks written before",
                output.display()
            )
        } else {
            format!(
                "collection stopped; {} keeps the chunks written before ({} was left as it was)",
                kept_in.display(),
                output.display()
            )
        })
    };
    result.map_err(kept)?;
    writer.finish_streams().map_err(kept)?;

    let stopped_by = if config.max_detours.is_some_and(|m| writer.total >= m) {
        StopReason::Detours
    } else if stop.load(Ordering::Relaxed) {
        StopReason::Signal
    } else {
        StopReason::Duration
    };
    let to_ns = |t: u64| clock.ticks_to_ns(t.saturating_sub(origin));
    let mut rows = Vec::with_capacity(n);
    let mut summaries = Vec::with_capacity(n);
    for (i, o) in outcomes.iter().enumerate() {
        let cpu = cpus.ids()[i];
        let (begin, end) = if o.ran {
            (
                to_ns(o.stats.first),
                to_ns(o.stats.last).max(writer.last_end_ns(i)),
            )
        } else {
            (0, writer.last_end_ns(i))
        };
        let (irqs, softirqs) = irq_before.total_delta(&irq_after, cpu);
        let st = &writer.streams[i];
        let loop_ns = match config.mode {
            Mode::Detours => clock.ticks_to_ns_f64(1) * o.stats.loop_ticks(),
            Mode::Ftq(_) => {
                let busy = (end - begin).saturating_sub(st.stats.sum_ns);
                busy as f64 / o.stats.iterations.max(1) as f64
            }
        };
        let lost_ns = clock.ticks_to_ns(o.lost_ticks);
        let mut counters = BTreeMap::new();
        counters.insert("lost_detours".to_string(), o.lost);
        counters.insert("lost_ns".to_string(), lost_ns);
        counters.insert("invol_ctx".to_string(), o.invol_ctx);
        counters.insert("iterations".to_string(), o.stats.iterations);
        counters.insert(
            "loop_milliticks".to_string(),
            (profiles[i].loop_ticks * 1000.0).round() as u64,
        );
        counters.insert("resolution_ticks".to_string(), profiles[i].resolution_ticks);
        counters.insert("interrupts".to_string(), irqs);
        counters.insert("softirqs".to_string(), softirqs);
        counters.insert("dropped_overlaps".to_string(), st.merged);
        counters.insert("self_overlap_ns".to_string(), st.self_overlap_ns);
        if let Some(full) = st.ftq_full() {
            let calibrated = shared.full[i].load(Ordering::Relaxed);
            counters.insert("ftq_calibrated_count".to_string(), calibrated);
            counters.insert("ftq_full_count".to_string(), full);
        }
        summaries.push(StreamSummary {
            begin_ns: begin,
            end_ns: end,
            records: 0,
            counters,
        });
        rows.push(CpuRow::new(
            &st.stats,
            RowFacts {
                cpu,
                tsc_khz: clock.khz(),
                lost: o.lost,
                lost_ns,
                invol_ctx: o.invol_ctx,
                rt_ns: end - begin,
                loop_ns,
                irqs,
                softirqs,
                self_overlap_ns: st.self_overlap_ns,
            },
        ));
    }
    let observations: Vec<Observation> = rows
        .iter()
        .zip(&outcomes)
        .map(|(row, o)| Observation {
            cpu: row.cpu,
            detours: row.intr,
            iterations: (o.ran && matches!(config.mode, Mode::Detours))
                .then_some(o.stats.iterations),
            duration_ns: (row.rt_s * 1e9) as u64,
            noise_ns: row.sum_intr_ns,
            median_ns: row.median_ns,
            threshold_ns: clock.ticks_to_ns_f64(threshold),
            resolution_ns: Some(clock.ticks_to_ns_f64(profile.resolution_ticks)),
            loop_ns: Some(row.loop_ns),
        })
        .collect();
    let implausible: Vec<String> = observations
        .iter()
        .filter_map(Observation::implausibility)
        .collect();
    for busy in observations
        .iter()
        .flat_map(|o| [o.short_stalls(), o.busy()])
        .flatten()
    {
        if config.verbose {
            eprintln!("warning: {busy}");
        }
        warnings.push(busy);
    }
    let mut notes = irq_before.delta_notes(&irq_after, cpus.ids());
    if !implausible.is_empty() {
        notes.insert("implausible".into(), serde_json::to_string(&implausible)?);
    }
    if writer.windows_dropped > 0 {
        notes.insert(
            "self_windows_dropped".into(),
            writer.windows_dropped.to_string(),
        );
    }
    notes.insert("stopped_by".into(), stopped_by.to_string());
    if !warnings.is_empty() {
        notes.insert("warnings".into(), serde_json::to_string(&warnings)?);
    }
    let duration_ns = summaries
        .iter()
        .map(|s| s.end_ns)
        .max()
        .unwrap_or(0)
        .saturating_sub(summaries.iter().map(|s| s.begin_ns).min().unwrap_or(0));
    let self_windows = writer.windows.clone();
    let epilogue = Epilogue {
        duration_ns,
        streams: summaries,
        self_windows: self_windows.clone(),
        notes,
    };
    writer.finish(epilogue).map_err(kept)?;
    out_file.commit().map_err(|e| kept(e.into()))?;
    if let Some(c) = csv_out {
        c.commit()?;
    }
    let (attribution_file, attribution) = match instance {
        Some(inst) => {
            let (path, report) =
                attribute_trace(inst, output, &clock, origin, &header, &mut warnings).map_err(
                    |e| {
                        e.context(format!(
                            "attribution failed; the trace {} is complete",
                            output.display()
                        ))
                    },
                )?;
            (Some(path), Some(report))
        }
        None => (None, None),
    };
    Ok(Summary {
        trace: output.clone(),
        ftq_csv,
        header,
        rows,
        t_min_ns: clock.ticks_to_ns_f64(1) * profile.loop_ticks,
        resolution_ns: clock.ticks_to_ns_f64(profile.resolution_ticks),
        threshold_ns: clock.ticks_to_ns_f64(threshold),
        tsc_khz: clock.khz(),
        stopped_by,
        self_windows: self_windows.len(),
        self_ns: self_windows.iter().map(|w| w.end_ns - w.start_ns).sum(),
        writer_cpu,
        writer_cpu_ns,
        warnings,
        implausible,
        attribution_file,
        attribution,
    })
}

/// Reads the instance's buffers (then removes it), attributes the detours of the finished
/// trace, writes `<trace>.attr.json` and returns its per-source report.
fn attribute_trace(
    inst: Instance,
    output: &Path,
    clock: &Clock,
    origin: u64,
    header: &Header,
    warnings: &mut Vec<String>,
) -> Result<(PathBuf, attribution::Report)> {
    let cpus: Vec<u32> = header.stream_cpus.clone();
    let mut per_cpu = Vec::with_capacity(cpus.len());
    for &cpu in &cpus {
        per_cpu.push(inst.read_cpu(cpu)?);
    }
    let events = inst.events.clone();
    let to_ticks = inst.to_ticks()?;
    let trace_clock = inst.clock;
    drop(inst);
    let trace = jitter_trace::read_trace(output)
        .with_context(|| format!("cannot read back {}", output.display()))?
        .trace;
    let mut result = Attribution {
        version: attribution::ATTRIBUTION_VERSION,
        collection_start_unix_ns: header.collection_start_unix_ns,
        trace_clock: trace_clock.name().into(),
        events,
        ..Attribution::default()
    };
    let to_ns = |t: u64| clock.ticks_to_ns(to_ticks.ticks(t).saturating_sub(origin));
    // The mono clock is printed to the µs (truncated): one more µs of slack.
    let slack_ns = match trace_clock {
        TraceClock::X86Tsc => 1_000,
        TraceClock::Mono => 2_000,
    };
    for (stream, (raw, lost)) in trace.streams.iter().zip(per_cpu) {
        let probe_name = format!("probe-{}", stream.cpu);
        let first_comm = raw.first().map_or(probe_name.clone(), |e| e.comm.clone());
        let timeline = attribute::to_timeline(&raw, to_ns);
        let tl = attribute::segments(&timeline, &first_comm, |c| c == probe_name);
        if lost > 0 {
            warnings.push(format!(
                "CPU {}: the kernel lost {lost} trace events (buffer overrun); those detours \
                 are partly unattributed",
                stream.cpu
            ));
        }
        let (checked, outside) = attribute::misaligned(
            &stream.records,
            &tl,
            stream.begin_ns,
            stream.end_ns,
            slack_ns,
        );
        if outside * 100 > checked && outside > 10 {
            warnings.push(format!(
                "CPU {}: {outside} of {checked} interrupt entries while the probe ran lie outside \
                 every detour: the trace clock and the counter may disagree",
                stream.cpu
            ));
        }
        result.cpus.push(CpuAttribution {
            cpu: stream.cpu,
            begin_ns: stream.begin_ns,
            end_ns: stream.end_ns,
            events: raw.len() as u64,
            events_lost: lost,
            entries_checked: checked,
            entries_outside: outside,
            detours: attribute::attribute(&stream.records, &tl),
        });
    }
    let hypervisor = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| {
            c.lines()
                .find(|l| l.starts_with("flags"))
                .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"))
        })
        .unwrap_or(false);
    if hypervisor {
        result.notes.insert(
            "hypervisor".into(),
            "this machine is a virtual machine: VM exits, the host's own interrupts and \
             preemption of the vCPU take time the guest kernel never traces; most unattributed \
             time is the hypervisor's"
                .into(),
        );
    }
    let path = attribution::sidecar_path(output);
    result
        .write(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok((path, attribution::report(&result)))
}

fn writer_progress(w: &Writer) -> Option<ProgressBar> {
    w.progress()
}
