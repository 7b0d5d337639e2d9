//! `libjitter_preload.so`: replays a jitter trace inside an unmodified, dynamically linked MPI
//! program.
//!
//! ```sh
//! LD_PRELOAD=libjitter_preload.so JITTER_TRACE=node.jtr mpirun -np 64 ./app
//! ```
//!
//! The library defines `MPI_Init`, `MPI_Init_thread`, `MPI_Finalize`, `MPI_Barrier` and the
//! calls it profiles, each under its `MPI_` and its `PMPI_` name (a Fortran binding, ROMIO or
//! another PMPI tool calls the latter; the thread's outermost wrapper acts, [`nesting`]), and
//! forwards each to the next `PMPI_` function (the MPI profiling interface), found with
//! `dlsym(RTLD_NEXT, …)` in the application's MPI library at run time: nothing of MPI is linked
//! or included here, and with `JITTER_TRACE` and `JITTER_PROFILE` unset every call is forwarded
//! untouched.
//!
//! * `MPI_Init`: reads the `JITTER_*` variables ([`config::Config`]) and the launcher's rank
//!   layout ([`config::Layout`]), the trace, the host's cached calibration (O, L, M; measured
//!   once per host under a file lock so that the ranks of a node do not measure at once), builds
//!   the rank's [`Plan`] — all before `PMPI_Init`, so that a bad value ends every rank at once
//!   with a message and exit status 1; so does a `SIGALRM` handler the application installed
//!   before `MPI_Init` (the emulator would steal its signal). Then `PMPI_Init` with `SIGALRM` blocked (the threads the
//!   MPI library starts inherit the mask), then the emulator starts on the calling thread at the
//!   start offset of the rank's node, drawn from the shared seed ([`SyncSchedule`]).
//! * `MPI_Barrier(comm)`: forwards, then counts a phase and resyncs where the schedule says
//!   (`JITTER_SYNC=phase`: at every barrier). The handle is forwarded as an opaque
//!   pointer-sized value, never read.
//! * `MPI_Finalize`: pays at its entry what the stretch before it owes (`JITTER_INJECT=boundary`),
//!   records itself in the profile, stops the emulator, writes `rank-<r>.json`, calls
//!   `PMPI_Finalize`; rank 0 then adds up the rank files into `summary.json` ([`stats`]).
//!
//! * The collectives, point-to-point calls, `Wait*` and `MPI_Cart_create` ([`calls`]) and the
//!   three above: forwarded; under `JITTER_PROFILE` (with or without a trace) each call is
//!   recorded into the rank's mapped record and rank 0 merges the job's profile after
//!   `PMPI_Finalize` (`profiling`).
//!
//! **The timer signal and MPI's threads.** The default timer (`JITTER_TIMER=abstime`) is a
//! `timer_create` timer with `SIGEV_THREAD_ID` aimed at the thread that called `MPI_Init`: the
//! kernel delivers its `SIGALRM` to that thread only, whatever other threads exist or mask, so
//! MPI's progress threads never run the handler and the detours land where the application
//! computes. `JITTER_TIMER=itimer` (`setitimer`, process-directed) relies on the mask: threads
//! created inside `PMPI_Init` inherit `SIGALRM` blocked, and Linux prefers the main thread for a
//! process-directed signal; threads the application starts after `MPI_Init` do not block it.
//!
//! **`MPI_Comm`.** OpenMPI's handle is a pointer, MPICH's an `int`; both travel in one integer
//! register on x86-64 and aarch64, so forwarding the register's value unchanged as a pointer-sized
//! integer gives MPICH's `PMPI_Barrier` its `int` (the upper half is not read). Other ABIs are not
//! supported.

mod boot_frequency;
mod calls;
pub mod config;
mod nesting;
mod paying;
mod profiling;
pub mod rank_files;
mod waits;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal};

use jitter_collect::clock::Clock;
use jitter_emulator::calibration::Calibration;
use jitter_emulator::capi::{jb_emulator_resync, jb_emulator_stop, no_unwind, JB_OK};
use jitter_emulator::{
    Emulator, Handle, InjectionMode, InjectorConfig, InjectorStats, Overrides, Plan, PlanOptions,
    ReplaySetup, SyncSchedule,
};
use jitter_trace::error::chain_line;
use jitter_trace::Integrity;

use config::{Config, Layout};
use rank_files::{BoundaryStats, RankStats, Summary};

/// How long rank 0 waits after `PMPI_Finalize` for rank files that are not there yet.
pub(crate) const SUMMARY_WAIT: Duration = Duration::from_secs(10);

/// `MPI_Comm` as it is passed: one pointer-sized integer (see the module docs).
pub(crate) type Comm = *mut c_void;

type InitFn = unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char) -> c_int;
type InitThreadFn =
    unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char, c_int, *mut c_int) -> c_int;
type FinalizeFn = unsafe extern "C" fn() -> c_int;
type BarrierFn = unsafe extern "C" fn(Comm) -> c_int;

/// What [`Next::find`] keeps for a function the MPI library does not have.
const MISSING: *mut c_void = std::ptr::without_provenance_mut(1);

/// A `PMPI_` function of the application's MPI library, looked up once.
pub(crate) struct Next {
    name: &'static CStr,
    address: AtomicPtr<c_void>,
}

impl Next {
    pub(crate) const fn new(name: &'static CStr) -> Next {
        Next {
            name,
            address: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The function's address, if the MPI library has it (a twin an older library lacks).
    pub(crate) fn find(&self) -> Option<*mut c_void> {
        let cached = self.address.load(Ordering::Acquire);
        if cached == MISSING {
            return None;
        }
        if !cached.is_null() {
            return Some(cached);
        }
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT searches the objects loaded after this one.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        let kept = if found.is_null() { MISSING } else { found };
        self.address.store(kept, Ordering::Release);
        (!found.is_null()).then_some(found)
    }

    /// The function's address; ends the process with a message when there is none.
    pub(crate) fn address(&self) -> *mut c_void {
        let cached = self.address.load(Ordering::Acquire);
        if !cached.is_null() && cached != MISSING {
            return cached;
        }
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT searches the objects loaded after this one.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        if found.is_null() {
            die(&format!(
                "{} was not found: the program is not linked with a shared MPI library (a \
                 statically linked MPI cannot be intercepted)",
                self.name.to_string_lossy()
            ));
        }
        self.address.store(found, Ordering::Release);
        found
    }
}

static PMPI_INIT: Next = Next::new(c"PMPI_Init");
static PMPI_INIT_THREAD: Next = Next::new(c"PMPI_Init_thread");
static PMPI_FINALIZE: Next = Next::new(c"PMPI_Finalize");
static PMPI_BARRIER: Next = Next::new(c"PMPI_Barrier");

fn env(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

fn prefix() -> String {
    match RUN.get() {
        Some(run) => format!("jitter-preload: rank {}", run.layout.rank),
        None => match Layout::rank_hint(env) {
            Some(r) => format!("jitter-preload: rank {r}"),
            None => "jitter-preload".into(),
        },
    }
}

/// Writes one line to stderr in one `write` (mpirun forwards the ranks' stderr in the chunks
/// it reads, so a line written in pieces could interleave with another rank's), after the
/// program's own buffered output (`fflush(NULL)`: a table the program printed comes out whole
/// before the library's line, never with the line run into its last one).
fn say(line: String) {
    use std::io::Write;
    // SAFETY: fflush(NULL) flushes every open C output stream; no pointer is dereferenced.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Prints `error: msg` with the rank and ends the process with status 1.
fn die(msg: &str) -> ! {
    say(format!("{}: error: {msg}", prefix()));
    std::process::exit(1)
}

fn warn(msg: &str) {
    say(format!("{}: warning: {msg}", prefix()));
}

/// The replay of this process, set once the emulator runs.
struct Run {
    config: Config,
    layout: Layout,
    node: u64,
    stream: usize,
    copy: u64,
    offset_ns: u64,
    period_ns: u64,
    schedule: SyncSchedule,
    opts: PlanOptions,
    barriers: AtomicU64,
    resyncs: AtomicU64,
    /// What the trace lacks, where it lacks anything (tolerated or salvaged).
    integrity: Option<Integrity>,
}

static RUN: OnceLock<Run> = OnceLock::new();

thread_local! {
    /// The running emulator, on the thread that called `MPI_Init` (it stops it at finalize).
    static HANDLE: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

/// Everything decided before `PMPI_Init`.
struct Prepared {
    run: Run,
    plan: Arc<Plan>,
    clock: Clock,
}

/// The host's cached calibration, measured by one process of the host at a time.
fn calibration(clock: &Clock) -> Result<Calibration, String> {
    let path = Calibration::cache_path();
    let lock_path = path.with_extension("lock");
    let _lock = lock_path
        .parent()
        .and_then(|d| std::fs::create_dir_all(d).ok())
        .and_then(|()| std::fs::File::create(&lock_path).ok())
        .and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).ok());
    Calibration::load_or_measure(clock, false, &jitter_emulator::calibration::StartLine)
        .map_err(|e| format!("calibration: {e:#}"))
}

/// Reads the configuration, trace and calibration and builds the plan; `None`: no-op.
fn prepare() -> Result<Option<Prepared>, String> {
    let Some(config) = Config::from_vars(env)? else {
        return Ok(None);
    };
    // An application that handles SIGALRM itself is refused before MPI starts (every rank),
    // where the emulator would take the signal.
    if config.inject == InjectionMode::Signal {
        jitter_emulator::injector::check_signal_free().map_err(|e| e.to_string())?;
    }
    let (host, _) = jitter_emulator::calibration::host_and_kernel();
    let layout = Layout::from_vars(env, &host)?;
    let shown = config.trace.display();
    let loaded = jitter_trace::read_trace(&config.trace).map_err(|e| {
        format!(
            "JITTER_TRACE={shown}: cannot read the trace: {}",
            chain_line(&e)
        )
    })?;
    // Every rank refuses alike (each reads the same file), before MPI starts.
    let integrity = loaded
        .accept(&format!("JITTER_TRACE={shown}"), config.salvage)
        .map_err(|e| chain_line(&e).replace("--salvage goes on", "JITTER_SALVAGE=1 goes on"))?;
    if layout.rank == 0 {
        for w in loaded.warnings() {
            warn(&format!("{shown}: {w}"));
        }
    }
    let trace = loaded.trace;
    let slot = layout.assignment(config.ranks_per_node, trace.streams.len())?;
    let (node, stream) = (slot.timeline, slot.stream);
    let clock = crate::boot_frequency::clock()?;
    // Paying at calls costs no O, L or M: no calibration to measure.
    let cost = match config.inject {
        InjectionMode::Signal => calibration(&clock)?.cost(config.timer, &Overrides::default()),
        InjectionMode::Boundary => InjectionMode::Boundary.cost(Default::default()),
    };
    let opts = ReplaySetup {
        scale: config.scale,
        cost,
        ..ReplaySetup::default()
    }
    .plan_options();
    let plan = Plan::from_trace(&trace, stream, opts)
        .map_err(|e| format!("JITTER_TRACE={shown}: cannot replay stream {stream}: {e}"))?;
    // Created once everything else holds (still before MPI starts): a refused setting leaves
    // no empty folder behind.
    std::fs::create_dir_all(&config.stats_dir).map_err(|e| {
        format!(
            "JITTER_STATS_DIR={}: cannot create it: {e}",
            config.stats_dir.display()
        )
    })?;
    // The rank's file must be writable there at the end (a folder of a full or read-only file
    // system would lose the statistics after the whole run).
    jitter_trace::output::check_writable(
        &rank_files::rank_path(&config.stats_dir, layout.rank),
        "JITTER_STATS_DIR",
    )
    .map_err(|e| chain_line(&e))?;
    let schedule = SyncSchedule {
        mode: config.sync,
        seed: config.seed,
    };
    let period_ns = plan.period_ns();
    let run = Run {
        offset_ns: schedule.start_offset(node, period_ns),
        config,
        layout,
        node,
        stream,
        copy: slot.copy,
        period_ns,
        schedule,
        opts,
        barriers: AtomicU64::new(0),
        resyncs: AtomicU64::new(0),
        integrity: (!integrity.is_whole()).then_some(integrity),
    };
    Ok(Some(Prepared { run, plan, clock }))
}

/// Runs `f` with `SIGALRM` blocked in this thread (threads it starts inherit the mask).
fn with_alarm_blocked<T>(f: impl FnOnce() -> T) -> T {
    let mut only = SigSet::empty();
    only.add(Signal::SIGALRM);
    let mut old = SigSet::empty();
    let blocked = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&only), Some(&mut old)).is_ok();
    let r = f();
    if blocked {
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
    r
}

/// Starts the emulator (or the payment at calls) on this thread once `PMPI_Init` succeeded.
fn start(p: Prepared) -> Result<(), String> {
    let cursor = p.plan.cursor(p.run.offset_ns);
    if p.run.config.inject == InjectionMode::Boundary {
        paying::start(jitter_emulator::Boundary::start(cursor, p.clock));
        return RUN
            .set(p.run)
            .map_err(|_| "MPI_Init was called twice".to_string());
    }
    let config = InjectorConfig {
        timer: p.run.opts.timer,
        clock: p.clock,
    };
    let handle = Emulator::start(cursor, config)
        .map_err(|e| format!("cannot start the emulator: {}", chain_line(&e)))?;
    HANDLE.with(|h| *h.borrow_mut() = Some(handle));
    RUN.set(p.run)
        .map_err(|_| "MPI_Init was called twice".to_string())
}

/// The common body of `MPI_Init` and `MPI_Init_thread`; `call` is the `PMPI_` function.
fn init_around(call: impl FnOnce() -> c_int) -> c_int {
    let enter = jitter_collect::clock::read_counter();
    let prepared = match no_unwind(prepare) {
        Ok(Ok(p)) => p,
        Ok(Err(msg)) | Err(msg) => die(&msg),
    };
    let profile = match no_unwind(|| profiling::prepare(env)) {
        Ok(Ok(p)) => p,
        Ok(Err(msg)) | Err(msg) => die(&msg),
    };
    if prepared.is_none() && profile.is_none() {
        return call();
    }
    let pmpi_enter = jitter_collect::clock::read_counter();
    let signal = prepared
        .as_ref()
        .is_some_and(|p| p.run.config.inject == InjectionMode::Signal);
    let rc = if signal {
        with_alarm_blocked(call)
    } else {
        call()
    };
    let pmpi_exit = jitter_collect::clock::read_counter();
    if rc != 0 {
        return rc;
    }
    if let Some(p) = profile {
        if let Ok(Err(msg)) | Err(msg) = no_unwind(|| profiling::start(p)) {
            die(&msg)
        }
    }
    if let Some(prepared) = prepared {
        if let Ok(Err(msg)) | Err(msg) = no_unwind(|| start(prepared)) {
            die(&msg)
        }
    }
    // What MPI_Init cost, the library's part apart (the profile's start-up figure).
    profiling::set_init(
        enter,
        (pmpi_enter, pmpi_exit),
        jitter_collect::clock::read_counter(),
    );
    rc
}

impl Run {
    /// After a barrier: one phase more, and a resync where the schedule says.
    fn after_barrier(&self) {
        let phase = self.barriers.fetch_add(1, Ordering::Relaxed) + 1;
        let offset = self.schedule.resync_offset(phase, self.period_ns);
        let resynced = match self.config.inject {
            InjectionMode::Boundary => paying::end_phase(offset),
            InjectionMode::Signal => offset.is_some_and(|o| jb_emulator_resync(o) == JB_OK),
        };
        if resynced {
            self.resyncs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Ends the payment at calls (on the thread that called `MPI_Init`): the rank's file.
    fn finish_boundary(&self) -> Result<(), String> {
        let Some(end) = paying::stop() else {
            return Err(
                "MPI_Finalize was called from another thread than MPI_Init: the replay \
                        was stopped without statistics"
                    .into(),
            );
        };
        let (ledger, paid) = (end.ledger, end.ledger.paid());
        let injector = InjectorStats {
            timer: self.opts.timer,
            injected: paid.injections,
            dropped: ledger.plan.dropped,
            merged: ledger.plan.merged,
            injected_ns: paid.span_ns,
            busy_ns: paid.spun_ns,
            lateness_mean_ns: paid.lateness_mean_ns(),
            lateness_max_ns: paid.lateness_max_ns,
            elapsed_ns: end.elapsed_ns,
            plan: ledger.plan,
            ..InjectorStats::default()
        };
        let stats = RankStats {
            boundary: Some(BoundaryStats {
                ledger,
                calls: end.calls,
            }),
            ..self.rank_stats(end.progress, injector)
        };
        rank_files::write_rank(&self.config.stats_dir, &stats).map(|_| ())
    }

    /// This rank's file, for a replay that did `injector`.
    fn rank_stats(&self, progress: f64, injector: InjectorStats) -> RankStats {
        RankStats {
            rank: self.layout.rank,
            job: self.layout.job.clone(),
            host: self.layout.host.clone(),
            node: self.node,
            stream: self.stream,
            copy: self.copy,
            offset_ns: self.offset_ns,
            overhead_ns: self.opts.overhead_ns,
            min_sleep_ns: self.opts.min_sleep_ns,
            barriers: self.barriers.load(Ordering::Relaxed),
            resyncs: self.resyncs.load(Ordering::Relaxed),
            progress,
            injector,
            inject: self.config.inject,
            boundary: None,
        }
    }

    /// Stops the emulator and writes this rank's file.
    fn finish(&self) -> Result<(), String> {
        if self.config.inject == InjectionMode::Boundary {
            return self.finish_boundary();
        }
        let Some(handle) = HANDLE.with(|h| h.borrow_mut().take()) else {
            jb_emulator_stop();
            return Err(
                "MPI_Finalize was called from another thread than MPI_Init: the replay \
                        was stopped without statistics"
                    .into(),
            );
        };
        let progress = handle.progress();
        let injector = handle
            .stop()
            .map_err(|e| format!("cannot stop the emulator: {}", chain_line(&e)))?;
        let stats = self.rank_stats(progress, injector);
        rank_files::write_rank(&self.config.stats_dir, &stats).map(|_| ())
    }

    /// Rank 0, after `PMPI_Finalize`: adds up the rank files into the summary.
    fn summarise(&self) -> Result<String, String> {
        let dir: &Path = &self.config.stats_dir;
        let (ranks, missing) =
            rank_files::collect(dir, self.layout.size, &self.layout.job, SUMMARY_WAIT);
        let c = &self.config;
        let summary = Summary {
            trace: c.trace.display().to_string(),
            scale: c.scale.get(),
            sync: c.sync.to_string(),
            seed: c.seed,
            timer: c.timer,
            ranks_per_node: c.ranks_per_node,
            overhead_ns: self.opts.overhead_ns,
            lateness_ns: self.opts.lateness_ns,
            min_sleep_ns: self.opts.min_sleep_ns,
            ranks: self.layout.size,
            integrity: self.integrity.clone(),
            inject: c.inject,
            ..Summary::default()
        }
        .add_up(&ranks, missing);
        summary.write(dir)?;
        Ok(summary.line(dir))
    }
}

/// `MPI_Init`: prepares and starts the replay around `PMPI_Init` (a no-op without
/// `JITTER_TRACE`).
///
/// # Safety
/// As `MPI_Init`: `argc` and `argv` are null or the program's.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    // SAFETY: the address is the MPI library's `PMPI_Init`, which has this C signature.
    let real = unsafe { std::mem::transmute::<*mut c_void, InitFn>(PMPI_INIT.address()) };
    // SAFETY: the caller's arguments are forwarded unchanged.
    let call = || unsafe { real(argc, argv) };
    nesting::outermost(call, || init_around(call))
}
calls::also_pmpi!(MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char));

/// `MPI_Init_thread`: as `MPI_Init`, around `PMPI_Init_thread`.
///
/// # Safety
/// As `MPI_Init_thread`: `argc` and `argv` are null or the program's, `provided` is writable.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    // SAFETY: the address is the MPI library's `PMPI_Init_thread`, which has this C signature.
    let real =
        unsafe { std::mem::transmute::<*mut c_void, InitThreadFn>(PMPI_INIT_THREAD.address()) };
    // SAFETY: the caller's arguments are forwarded unchanged.
    let call = || unsafe { real(argc, argv, required, provided) };
    let Some(_outer) = nesting::Outermost::enter() else {
        return call();
    };
    let rc = init_around(call);
    let level = if rc == 0 && !provided.is_null() {
        // SAFETY: `provided` is writable and was set by a successful `PMPI_Init_thread`.
        unsafe { *provided }
    } else {
        0
    };
    if let Some(run) = RUN.get() {
        // MPI_THREAD_SERIALIZED and MPI_THREAD_MULTIPLE (2 and 3 in OpenMPI and MPICH): other
        // threads may call MPI, and paying at calls disturbs only this one.
        if run.config.inject == InjectionMode::Boundary && level >= 2 && run.layout.rank == 0 {
            warn(
                "JITTER_INJECT=boundary: the program may call MPI from several threads; only \
                 the thread that called MPI_Init pays detours, the other threads' calls are \
                 forwarded untouched and their time is not disturbed (docs/METHOD.md)",
            );
        }
    }
    rc
}
calls::also_pmpi!(MPI_Init_thread(argc: *mut c_int, argv: *mut *mut *mut c_char, required: c_int,
    provided: *mut c_int));

/// `MPI_Barrier`: `PMPI_Barrier`, then a resync where `JITTER_SYNC` says.
///
/// # Safety
/// As `MPI_Barrier`: `comm` is a communicator handle.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Barrier(comm: Comm) -> c_int {
    // SAFETY: the address is the MPI library's `PMPI_Barrier`; `comm` is forwarded unchanged in
    // the register it came in (module docs).
    let real = unsafe { std::mem::transmute::<*mut c_void, BarrierFn>(PMPI_BARRIER.address()) };
    let Some(_outer) = nesting::Outermost::enter() else {
        // SAFETY: as above.
        return unsafe { real(comm) };
    };
    let site = || jitter_profile::Site {
        comm_size: calls::comm_size(comm).max(0) as u32,
        ..jitter_profile::Site::of(jitter_profile::Call::Barrier)
    };
    static IBARRIER: Next = Next::new(c"PMPI_Ibarrier");
    // SAFETY: as above.
    let call = || profiling::around(site, || unsafe { real(comm) });
    // `PMPI_Ibarrier(comm, request)`.
    let ibarrier = calls::twin!(
        IBARRIER,
        unsafe extern "C" fn(Comm, *mut paying::Request) -> c_int
    );
    let mut run = ibarrier.map(|f| {
        move |pay: &mut dyn FnMut()| -> c_int {
            profiling::around(site, || {
                let mut request: paying::Request = 0;
                // SAFETY: the caller's communicator and a request of ours.
                let rc = unsafe { f(comm, &mut request) };
                if rc != 0 {
                    return rc;
                }
                let mut status = [0u64; calls::STATUS_WORDS];
                calls::wait_request(pay, &mut request, status.as_mut_ptr().cast())
            })
        }
    });
    let rc = paying::blocking(
        paying::Choice::Collective,
        call,
        run.as_mut().map(|r| -> paying::Polled<'_> { r }),
    );
    if let Some(run) = RUN.get() {
        if let Err(msg) = no_unwind(|| run.after_barrier()) {
            warn(&msg);
        }
    }
    rc
}
calls::also_pmpi!(MPI_Barrier(comm: Comm));

/// `MPI_Finalize`: stops the replay and writes the statistics around `PMPI_Finalize`.
///
/// # Safety
/// As `MPI_Finalize`.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    // SAFETY: the address is the MPI library's `PMPI_Finalize`, which has this C signature.
    let real = unsafe { std::mem::transmute::<*mut c_void, FinalizeFn>(PMPI_FINALIZE.address()) };
    let Some(_outer) = nesting::Outermost::enter() else {
        // SAFETY: forwards the call.
        return unsafe { real() };
    };
    // MPI_Finalize is a boundary like any call: what the stretch before it owes is paid at its
    // entry, before the profile records it, so that a loop ending here holds that stretch's
    // noise as the predictor's last compute window does (a code with no MPI in its time steps
    // at one rank pays them all here).
    paying::boundary();
    if let Err(msg) = no_unwind(profiling::finish) {
        warn(&msg);
    }
    let run = RUN.get();
    if let Some(run) = run {
        match no_unwind(|| run.finish()) {
            Ok(Ok(())) => {}
            Ok(Err(msg)) | Err(msg) => warn(&msg),
        }
    }
    // SAFETY: forwards the call.
    let rc = unsafe { real() };
    if let Some(run) = run.filter(|r| r.layout.rank == 0) {
        match no_unwind(|| run.summarise()) {
            Ok(Ok(line)) => say(format!("{}: {line}", prefix())),
            Ok(Err(msg)) | Err(msg) => warn(&msg),
        }
    }
    match no_unwind(profiling::merge) {
        Ok(None) => {}
        Ok(Some(Ok(line))) => say(format!("{}: {line}", prefix())),
        Ok(Some(Err(msg))) | Err(msg) => warn(&msg),
    }
    rc
}
calls::also_pmpi!(MPI_Finalize());
