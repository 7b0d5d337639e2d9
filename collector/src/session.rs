//! A collection session: one pinned probe per CPU started together, a writer streaming their
//! detours to one `.jtr` trace on a common time base, and the summary table at the end.
//!
//! `collect_with_stop` runs in four steps, each a type: `Prepared` (outputs opened, guards and
//! rings set up), `Running` (probes released, header written), `Drained` (probes and writer
//! ended) and `Summary` (table, end chunk, commit, attribution). What a full ring dropped is
//! counted and located (`ring::LostSpans`).
//!
//! Its parts live beside it: the configuration and its checks (`collection_config`), the probe
//! and writer threads (`threads`), the signal and memory guards (`guard`), the progress reported
//! (`collection_progress`), the header's record of how it measured (`header`) and the
//! attribution sidecar (`attribution_pass`).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jitter_trace::output::StreamingOutput;
use jitter_trace::sanity::Observation;
use jitter_trace::{Epilogue, Header, StreamSummary};
use serde::Serialize;

use crate::clock::{read_counter, Clock};
use crate::counter::CounterProfile;
use crate::cpuset::{self, CpuList};
use crate::end_table::{CpuRow, RowFacts};
use crate::environment::{self, IrqSnapshot, Machine};
use crate::error::{refuse, CollectError, Context, Result};
use crate::ftq::FtqConverter;
use crate::ring::{ring, LostSpans, RingConsumer, RingProducer};
use crate::tracefs::{self, Instance};
use crate::watchdog::Watchdog;
use crate::writer::{Decoder, Writer, WriterSetup};

use crate::collection_config::{check, check_sched};
pub use crate::collection_config::{Config, Mode, SchedPolicy, Threshold};

use crate::attribution_pass::{attribute_trace, Collected};
use crate::guard::{ignore_sigxfsz, MemoryLock, SignalGuard};
use crate::header::{header_environment, tsc_warning};
use crate::threads::{
    release_to_abort, spawn_probes, spawn_writer, ProbeOutcome, Shared, WriterThread,
};

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
///
/// ```
/// use std::time::Duration;
/// use jitter_collect::cpuset::CpuList;
/// use jitter_collect::{collect, Config};
///
/// let dir = tempfile::tempdir()?;
/// let config = Config {
///     cpus: Some(CpuList::parse("0")?),
///     duration: Some(Duration::from_millis(20)),
///     output: dir.path().join("node.jtr"),
///     handle_signals: false,
///     ..Config::default()
/// };
/// let summary = collect(&config)?;
/// assert_eq!(summary.rows.len(), 1);
/// let trace = jitter_trace::load::read_trace(&summary.trace)?.trace;
/// assert_eq!(trace.streams.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn collect(config: &Config) -> Result<Summary> {
    collect_with_stop(config, Arc::new(AtomicBool::new(false)))
}

/// `collect`, with a flag the caller may set (from any thread) to stop early.
///
/// The steps: [`check`] the configuration, [`Prepared::prepare`] what the probes need,
/// [`Prepared::start`] the probes and the writer, [`Running::drain`] them, and
/// [`Drained::finish`] the trace and its summary.
pub(crate) fn collect_with_stop(config: &Config, stop: Arc<AtomicBool>) -> Result<Summary> {
    check(config)?;
    Prepared::prepare(config, stop)?.start()?.drain()?.finish()
}

/// The private tracefs instance of `--attribute`, tracing from now on; a stale instance it
/// removed is a warning.
fn start_instance(config: &Config, cpus: &CpuList, warnings: &mut Vec<String>) -> Result<Instance> {
    if !matches!(config.mode, Mode::Detours) {
        refuse!("--attribute needs --mode detours");
    }
    let mut inst = Instance::create(
        cpus,
        tracefs::buffer_kb(config.duration, cpus.len()),
        config.trace_clock,
    )?;
    for s in &inst.removed_stale {
        warnings.push(format!(
            "removed the tracefs instance {s} left by a process that is gone"
        ));
    }
    inst.start()?;
    Ok(inst)
}

/// What a collection holds from its preparation to its end: the configuration, the outputs
/// and the guards that undo what it changed (signal handlers, locked memory, the tracefs
/// instance), each released when the session is dropped.
struct Session<'c> {
    /// The configuration.
    config: &'c Config,
    /// The stop flag (the caller's, set by the signal handlers too).
    stop: Arc<AtomicBool>,
    /// The probed CPUs.
    cpus: CpuList,
    /// The counter frequency.
    clock: Clock,
    /// Warnings so far.
    warnings: Vec<String>,
    /// The trace; what this run created is removed on drop until it is kept.
    out_file: StreamingOutput,
    /// Where FTQ mode writes its series.
    ftq_csv: Option<PathBuf>,
    /// The FTQ series' output (FTQ mode).
    csv_out: Option<StreamingOutput>,
    /// The tracefs instance of `--attribute`; removed on drop.
    instance: Option<Instance>,
    /// Interrupt counts and steal time just before the probes are released.
    irq_before: IrqSnapshot,
    /// SIGINT/SIGTERM handlers setting `stop`; removed on drop.
    signals: SignalGuard,
    /// mlockall for the duration of the collection; unlocked on drop.
    _memory_lock: Option<MemoryLock>,
}

/// Step 1 done: outputs open, counter chosen, one ring per CPU; no probe runs yet.
struct Prepared<'c> {
    /// What lives to the end.
    session: Session<'c>,
    /// A handle on the trace's file.
    file: File,
    /// A handle on the FTQ series' file (FTQ mode).
    csv_file: Option<File>,
    /// The machine's identity for the header.
    machine: Machine,
    /// The probes' ends of the rings.
    producers: Vec<RingProducer>,
    /// The writer's ends of the rings.
    consumers: Vec<RingConsumer>,
    /// FTQ mode's quantum, ticks (0 in detour mode).
    quantum_hint: u64,
}

impl<'c> Prepared<'c> {
    /// Checks the CPUs and the policy, installs the signal handlers, starts the tracefs
    /// instance, opens the outputs, chooses the counter frequency and makes the rings.
    fn prepare(config: &'c Config, stop: Arc<AtomicBool>) -> Result<Self> {
        let cpus = cpuset::select(config.cpus.as_ref())?;
        // From here on SIGINT/SIGTERM stop the collection (a signal during setup gives a short
        // trace); the handlers are removed when the session ends.
        let signals = if config.handle_signals {
            SignalGuard::install(&stop, config.attribute)?
        } else {
            SignalGuard::default()
        };
        let mut warnings = Vec::new();
        if let Some((policy, prio)) = config.sched {
            warnings.extend(check_sched(policy, prio, &cpus, config.force)?);
        }
        // The tracefs instance is removed when the session ends, on every path (its guard);
        // it traces from here, so the probes' start-up is in the buffer too.
        let instance = if config.attribute {
            Some(start_instance(config, &cpus, &mut warnings)?)
        } else {
            None
        };
        let output = &config.output;
        // Nothing at an existing path is changed before the collection is complete, and a setup
        // error removes only what this run created (`StreamingOutput`, dropped before `keep`).
        let out_file = StreamingOutput::open(output)
            .with_context(|| format!("cannot create the output {}", output.display()))?;
        if config.attribute {
            // The sidecar is written after the collection: a path it cannot take is refused
            // now, not after the run.
            let sidecar = jitter_trace::attribution::sidecar_path(&config.output);
            jitter_trace::output::check_output(
                &sidecar,
                "--attribute writes",
                "the attribution (JSON)",
                &["json"],
            )?;
        }
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
        let csv_out = ftq_csv
            .as_deref()
            .map(|p| {
                StreamingOutput::open(p)
                    .with_context(|| format!("cannot create the FTQ series {}", p.display()))
            })
            .transpose()?;
        let csv_file = csv_out.as_ref().map(StreamingOutput::file).transpose()?;
        ignore_sigxfsz();

        warnings.extend(tsc_warning());
        let clock = choose_clock(config.khz, &mut warnings)?;
        let machine = environment::machine();

        let (producers, consumers) = (0..cpus.len()).map(|_| ring(config.ring_capacity)).unzip();
        let memory_lock = if config.lock_memory {
            match MemoryLock::acquire() {
                Ok(lock) => Some(lock),
                Err(e) => {
                    warnings.push(format!(
                        "memory not locked ({}); page faults may show as detours",
                        e.line()
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
        Ok(Prepared {
            session: Session {
                config,
                stop,
                cpus,
                clock,
                warnings,
                out_file,
                ftq_csv,
                csv_out,
                instance,
                irq_before: IrqSnapshot::default(),
                signals,
                _memory_lock: memory_lock,
            },
            file,
            csv_file,
            machine,
            producers,
            consumers,
            quantum_hint,
        })
    }

    /// Starts one probe per CPU, and once they have profiled the counter writes the header,
    /// starts the writer and releases the probes.
    fn start(self) -> Result<Running<'c>> {
        let Prepared {
            mut session,
            file,
            csv_file,
            machine,
            producers,
            consumers,
            quantum_hint,
        } = self;
        let config = session.config;
        let n = session.cpus.len();
        let shared = Arc::new(Shared {
            barrier: Barrier::new(n + 1),
            abort: AtomicBool::new(false),
            threshold: AtomicU64::new(0),
            deadline: AtomicU64::new(u64::MAX),
            origin: AtomicU64::new(0),
            quantum: AtomicU64::new(quantum_hint),
            stop: session.stop.clone(),
            profiles: Mutex::new(vec![None; n]),
            full: (0..n).map(|_| AtomicU64::new(0)).collect(),
            errors: Mutex::new(Vec::new()),
        });
        // A probe at a real-time policy never sleeps while it measures: the watchdog ends the
        // process (one `error:` line, the trace keeps its chunks) if one runs 2 s past the
        // duration. Without a duration nothing bounds a probe's run, and no watchdog is armed.
        let watchdog = match (config.sched, config.duration) {
            (Some(_), Some(d)) => Some(
                Watchdog::arm(d + WATCHDOG_MARGIN)
                    .context("cannot arm the real-time watchdog (RLIMIT_RTTIME)")?,
            ),
            _ => None,
        };
        let probes = spawn_probes(config, &session.cpus, &shared, producers, quantum_hint)?;
        shared.barrier.wait(); // A

        // Everything between the barriers must not return early: the probes wait on barrier B.
        let opened = WriterInputs {
            file,
            csv_file,
            consumers,
            quantum_hint,
        }
        .open(&mut session, &shared, &machine);
        let (writer, started) = match opened {
            Ok(o) => o,
            Err(e) => return Err(release_to_abort(&shared, probes, e)),
        };
        if config.verbose {
            for w in &session.warnings {
                eprintln!("warning: {w}");
            }
        }

        let deadline = match config.duration {
            Some(d) => started
                .origin
                .saturating_add(session.clock.ns_to_ticks(d.as_nanos() as u64)),
            None => u64::MAX,
        };
        shared.threshold.store(started.threshold, Ordering::Release);
        shared.deadline.store(deadline, Ordering::Release);
        shared.origin.store(started.origin, Ordering::Release);
        let done = Arc::new(AtomicBool::new(false));
        let writer_thread = spawn_writer(
            writer,
            config.drain_period,
            started.writer_cpu,
            done.clone(),
        );
        let writer_thread = match writer_thread {
            Ok(h) => h,
            Err(e) => return Err(release_to_abort(&shared, probes, e)),
        };
        // Read just before the release: the deltas (interrupts, steal) cover the probes'
        // window, not the counter's profiling.
        session.irq_before = IrqSnapshot::take();
        shared.barrier.wait(); // B: go
                               // From here on the outputs hold collected data: kept whatever happens.
        session.out_file.keep();
        if let Some(c) = session.csv_out.as_mut() {
            c.keep();
        }
        if session.out_file.replaces() && config.verbose {
            eprintln!(
                "writing {}; it replaces {} when the collection is complete",
                session.out_file.data_path().display(),
                config.output.display()
            );
        }
        Ok(Running {
            session,
            started,
            shared,
            probes,
            writer: writer_thread,
            done,
            _watchdog: watchdog,
        })
    }
}

/// What the writer is made of, from step 1.
struct WriterInputs {
    /// A handle on the trace's file.
    file: File,
    /// A handle on the FTQ series' file (FTQ mode).
    csv_file: Option<File>,
    /// The writer's ends of the rings.
    consumers: Vec<RingConsumer>,
    /// FTQ mode's quantum, ticks.
    quantum_hint: u64,
}

/// What was decided while the probes wait between their barriers: the counter's profile, the
/// threshold, the time origin and the header written with them.
struct Started {
    /// The header as written.
    header: Header,
    /// Each probe's profile of the counter, in CPU order.
    profiles: Vec<CounterProfile>,
    /// The profiles combined.
    profile: CounterProfile,
    /// The detour threshold, ticks.
    threshold: u64,
    /// Counter value of time 0.
    origin: u64,
    /// CPU the writer is pinned to (`None`: it shares the probed CPUs).
    writer_cpu: Option<u32>,
}

impl WriterInputs {
    /// Combines the probes' profiles, chooses the threshold, writes the header, publishes the
    /// outputs and makes the writer. Called between barriers A and B.
    fn open(
        self,
        session: &mut Session,
        shared: &Shared,
        machine: &Machine,
    ) -> Result<(Writer, Started)> {
        let (config, clock, cpus) = (session.config, session.clock, &session.cpus);
        let (profiles, profile) = probes_profiles(shared)?;
        let threshold = match config.threshold {
            Threshold::Factor(k) => profile.threshold_ticks(k),
            Threshold::Nanos(ns) => {
                let t = clock.ns_to_ticks(ns);
                if let Some(why) = profile.refuse_threshold(t, &clock) {
                    return Err(CollectError::Refused(why));
                }
                t
            }
        };
        let writer_cpu = cpuset::affinity()
            .ok()
            .and_then(|m| m.ids().iter().copied().find(|&c| !cpus.contains(c)));
        let environment = header_environment(
            config,
            machine,
            &clock,
            &profile,
            writer_cpu,
            self.quantum_hint,
        );
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
        let trace = Writer::open(self.file, &header)
            .with_context(|| format!("cannot write {}", config.output.display()))?;
        session.out_file.publish()?;
        if let Some(c) = session.csv_out.as_mut() {
            c.publish()?;
        }
        let streams = cpus
            .ids()
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let dec = match config.mode {
                    Mode::Detours => Decoder::Detours,
                    Mode::Ftq(_) => Decoder::Ftq(FtqConverter::new(
                        self.quantum_hint,
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
            rings: self.consumers,
            streams,
            clock,
            origin,
            csv: self.csv_file,
            max_detours: config.max_detours,
            stop: session.stop.clone(),
            progress: config.progress.clone(),
        })?;
        let started = Started {
            header,
            profiles,
            profile,
            threshold,
            origin,
            writer_cpu,
        };
        Ok((writer, started))
    }
}

/// The probes' profiles of the counter, in CPU order, and their combination; the probes'
/// set-up errors if one failed.
fn probes_profiles(shared: &Shared) -> Result<(Vec<CounterProfile>, CounterProfile)> {
    if shared.abort.load(Ordering::Acquire) {
        let errs = shared.errors.lock().unwrap_or_else(|p| p.into_inner());
        return Err(CollectError::Failed(errs.join("; ")));
    }
    let profiles: Vec<CounterProfile> = shared
        .profiles
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|p| {
            p.ok_or_else(|| CollectError::Failed("a probe did not profile the counter".into()))
        })
        .collect::<Result<_>>()?;
    let profile = CounterProfile::combine(&profiles)
        .ok_or_else(|| CollectError::Failed("no CPU to profile the counter on".into()))?;
    Ok((profiles, profile))
}

/// Step 2 done: the probes measure and the writer drains their rings.
struct Running<'c> {
    /// What lives to the end.
    session: Session<'c>,
    /// What the probes were started with.
    started: Started,
    /// What the probes share with this thread.
    shared: Arc<Shared>,
    /// The probe threads, in CPU order.
    probes: Vec<thread::JoinHandle<ProbeOutcome>>,
    /// The writer thread.
    writer: WriterThread,
    /// Set to end the writer's run.
    done: Arc<AtomicBool>,
    /// RLIMIT_RTTIME for real-time probes; restored on drop.
    _watchdog: Option<Watchdog>,
}

impl<'c> Running<'c> {
    /// Waits for the probes to end, stops the tracefs instance, ends the writer's run and
    /// writes what is left in the rings.
    fn drain(self) -> Result<Drained<'c>> {
        let Running {
            mut session,
            started,
            shared,
            probes,
            writer,
            done,
            _watchdog,
        } = self;
        let outcomes: Vec<ProbeOutcome> = probes
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| CollectError::Failed("a probe thread panicked".into()))
            })
            .collect::<Result<_>>()?;
        if let Some(inst) = &mut session.instance {
            inst.stop()?;
        }
        done.store(true, Ordering::Release);
        writer.thread().unpark();
        let (mut writer, result, writer_cpu_ns) = writer
            .join()
            .map_err(|_| CollectError::Failed("the writer thread panicked".into()))?;
        session.signals = SignalGuard::default(); // the handlers removed
        let irq_after = IrqSnapshot::take();
        if let Some(p) = &writer.progress() {
            p.finish();
        }
        let kept_in = session.out_file.data_path().to_path_buf();
        let kept = |e| stopped(e, &kept_in, &session.config.output);
        result.map_err(kept)?;
        writer.finish_streams().map_err(kept)?;
        Ok(Drained {
            session,
            started,
            shared,
            outcomes,
            writer,
            writer_cpu_ns,
            irq_after,
            kept_in,
            _watchdog,
        })
    }
}

/// An error that stopped a collection after its outputs were kept, with where the chunks
/// written before are.
fn stopped(e: CollectError, kept_in: &Path, output: &Path) -> CollectError {
    let context = if kept_in == output {
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
    };
    CollectError::Stopped {
        context,
        source: Box::new(e),
    }
}

/// Step 3 done: probes and writer ended, every detour in the trace.
struct Drained<'c> {
    /// What lives to the end.
    session: Session<'c>,
    /// What the probes were started with.
    started: Started,
    /// What the probes shared (their FTQ full counts).
    shared: Arc<Shared>,
    /// Each probe's outcome, in CPU order.
    outcomes: Vec<ProbeOutcome>,
    /// The writer, its streams finished.
    writer: Writer,
    /// CPU time the writer thread used, ns.
    writer_cpu_ns: u64,
    /// Interrupt counts after the probes ended.
    irq_after: IrqSnapshot,
    /// Where the chunks written so far are.
    kept_in: PathBuf,
    /// RLIMIT_RTTIME for real-time probes; restored on drop.
    _watchdog: Option<Watchdog>,
}

impl Drained<'_> {
    /// Makes the per-CPU table, judges its plausibility, writes the end chunk, commits the
    /// outputs and attributes the detours (`--attribute`).
    fn finish(mut self) -> Result<Summary> {
        let config = self.session.config;
        let output = &config.output;
        let stopped_by = if config.max_detours.is_some_and(|m| self.writer.total >= m) {
            StopReason::Detours
        } else if self.session.stop.load(Ordering::Relaxed) {
            StopReason::Signal
        } else {
            StopReason::Duration
        };
        let (rows, summaries) = self.rows();
        // What the probes had to observe: the duration asked for when it ran out, else (a
        // signal, a detour count) the longest any probe observed.
        let collection_ns = match (stopped_by, config.duration) {
            (StopReason::Duration, Some(d)) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            _ => rows
                .iter()
                .map(|r| (r.rt_s * 1e9) as u64)
                .max()
                .unwrap_or(0),
        };
        let implausible = self.judge(&rows, collection_ns);
        let notes = self.notes(&implausible, stopped_by)?;
        let steal = self
            .session
            .irq_before
            .steal_of(&self.irq_after, self.session.cpus.ids());
        let Drained {
            session,
            started,
            writer,
            writer_cpu_ns,
            kept_in,
            outcomes,
            ..
        } = self;
        let Session {
            clock,
            mut warnings,
            out_file,
            ftq_csv,
            csv_out,
            instance,
            ..
        } = session;
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
        let kept = |e| stopped(e, &kept_in, output);
        writer.finish(epilogue).map_err(kept)?;
        out_file.commit().map_err(|e| kept(e.into()))?;
        if let Some(c) = csv_out {
            c.commit()?;
        }
        let (attribution_file, attribution) = match instance {
            Some(inst) => {
                let lost: Vec<LostSpans> = outcomes.into_iter().map(|o| o.lost_spans).collect();
                let collected = Collected {
                    output,
                    clock: &clock,
                    origin: started.origin,
                    header: &started.header,
                    steal: &steal,
                    lost_spans: &lost,
                };
                let (path, report) = attribute_trace(inst, &collected, &mut warnings)
                    .with_context(|| {
                        format!(
                            "attribution failed; the trace {} is complete",
                            output.display()
                        )
                    })?;
                (Some(path), Some(report))
            }
            None => (None, None),
        };
        Ok(Summary {
            trace: output.clone(),
            ftq_csv,
            header: started.header,
            rows,
            t_min_ns: clock.ticks_to_ns_f64(1) * started.profile.loop_ticks,
            resolution_ns: clock.ticks_to_ns_f64(started.profile.resolution_ticks),
            threshold_ns: clock.ticks_to_ns_f64(started.threshold),
            tsc_khz: clock.khz(),
            stopped_by,
            self_windows: self_windows.len(),
            self_ns: self_windows.iter().map(|w| w.end_ns - w.start_ns).sum(),
            writer_cpu: started.writer_cpu,
            writer_cpu_ns,
            warnings,
            implausible,
            attribution_file,
            attribution,
        })
    }

    /// The end chunk's notes: interrupt counts, why the numbers are implausible, dropped
    /// self-noise windows, why the collection stopped, and the warnings.
    fn notes(
        &self,
        implausible: &[String],
        stopped_by: StopReason,
    ) -> Result<BTreeMap<String, String>> {
        let mut notes = self
            .session
            .irq_before
            .delta_notes(&self.irq_after, self.session.cpus.ids());
        if !implausible.is_empty() {
            notes.insert("implausible".into(), serde_json::to_string(implausible)?);
        }
        if self.writer.windows_dropped > 0 {
            notes.insert(
                "self_windows_dropped".into(),
                self.writer.windows_dropped.to_string(),
            );
        }
        notes.insert("stopped_by".into(), stopped_by.to_string());
        if !self.session.warnings.is_empty() {
            let warnings = serde_json::to_string(&self.session.warnings)?;
            notes.insert("warnings".into(), warnings);
        }
        Ok(notes)
    }

    /// One table row and one end-chunk summary per CPU.
    fn rows(&self) -> (Vec<CpuRow>, Vec<StreamSummary>) {
        let (config, clock) = (self.session.config, &self.session.clock);
        let origin = self.started.origin;
        let to_ns = |t: u64| clock.ticks_to_ns(t.saturating_sub(origin));
        let n = self.outcomes.len();
        let mut rows = Vec::with_capacity(n);
        let mut summaries = Vec::with_capacity(n);
        for (i, o) in self.outcomes.iter().enumerate() {
            let cpu = self.session.cpus.ids()[i];
            let (begin, end) = if o.ran {
                (
                    to_ns(o.stats.first),
                    to_ns(o.stats.last).max(self.writer.last_end_ns(i)),
                )
            } else {
                (0, self.writer.last_end_ns(i))
            };
            let (irqs, softirqs) = self.session.irq_before.total_delta(&self.irq_after, cpu);
            let st = &self.writer.streams[i];
            let loop_ns = match config.mode {
                Mode::Detours => clock.ticks_to_ns_f64(1) * o.stats.loop_ticks(),
                Mode::Ftq(_) => {
                    let busy = (end - begin).saturating_sub(st.stats.sum_ns);
                    busy as f64 / o.stats.iterations.max(1) as f64
                }
            };
            let lost_ns = clock.ticks_to_ns(o.lost_ticks);
            let profile = &self.started.profiles[i];
            let mut counters = BTreeMap::new();
            counters.insert("lost_detours".to_string(), o.lost);
            counters.insert("lost_ns".to_string(), lost_ns);
            counters.insert("invol_ctx".to_string(), o.invol_ctx);
            counters.insert("iterations".to_string(), o.stats.iterations);
            counters.insert(
                "loop_milliticks".to_string(),
                (profile.loop_ticks * 1000.0).round() as u64,
            );
            counters.insert("resolution_ticks".to_string(), profile.resolution_ticks);
            counters.insert("interrupts".to_string(), irqs);
            counters.insert("softirqs".to_string(), softirqs);
            counters.insert("dropped_overlaps".to_string(), st.merged);
            counters.insert("self_overlap_ns".to_string(), st.self_overlap_ns);
            if let Some(full) = st.ftq_full() {
                let calibrated = self.shared.full[i].load(Ordering::Relaxed);
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
        (rows, summaries)
    }

    /// Why the rows cannot be right, one line per implausible CPU; short stalls and a busy
    /// machine become warnings.
    fn judge(&mut self, rows: &[CpuRow], collection_ns: u64) -> Vec<String> {
        let (config, clock) = (self.session.config, &self.session.clock);
        let (threshold, profile) = (self.started.threshold, &self.started.profile);
        let observations: Vec<Observation> = rows
            .iter()
            .zip(&self.outcomes)
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
                collection_ns: Some(collection_ns),
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
            self.session.warnings.push(busy);
        }
        implausible
    }
}

#[cfg(test)]
mod tests;
