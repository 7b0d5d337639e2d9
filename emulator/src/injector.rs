//! The in-process injector: a timer signal whose handler executes the replay plan against the
//! wall clock (paper 001 §III-C). `SIGALRM` from `setitimer(ITIMER_REAL)` (relative intervals,
//! armed L early) or from a `timer_create(CLOCK_MONOTONIC)` timer with absolute deadlines
//! (drift-free). The handler spins on the cycle counter for the busy time, arms the next timer and
//! advances the cursor; it allocates nothing, takes no lock and preserves `errno`.
//!
//! # Shared state and its safety argument
//!
//! Everything the handler touches lives in the static [`SLOT`], guarded by the one-byte state
//! machine [`STATE`] (`OFF` → `IDLE` ⇄ `HANDLER` | `CONTROL`):
//!
//! * `start` fills the slot while the state is `OFF` (the handler does nothing in `OFF`), then
//!   publishes it with a `Release` store of `IDLE` before arming the first timer.
//! * The handler enters with `compare_exchange(IDLE → HANDLER, Acquire)` and leaves with a
//!   `Release` store of `IDLE`: exactly one party holds `&mut` to the slot at any time, and every
//!   write made under the state is visible to the next holder.
//! * The control side (`resync`, `progress`, `stop`) takes the slot with the same CAS
//!   (`IDLE → CONTROL`). A handler that finds `CONTROL` does not wait (it cannot: on the same
//!   thread the holder is the code it interrupted); it sets [`MISSED`] and returns, and the
//!   control side re-fires the timer at once when it releases. This replaces blocking the signal:
//!   blocking would make Linux hand a process-directed `SIGALRM` to another thread.
//! * `stop` disarms the timer, sets `OFF`, drains a pending `SIGALRM` (blocked, `sigtimedwait`)
//!   and only then restores the old disposition, so a late expiry never reaches `SIG_DFL`.
//!
//! `start` takes `SIGALRM` only from `SIG_DFL` or `SIG_IGN` ([`check_signal_free`]): a handler
//! the application installed is refused, never replaced.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

use nix::errno::Errno;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use jitter_collect::clock::{read_counter, spin_until, Clock};

use crate::plan::{Cursor, Injection, PlanError, PlanStats, TimerKind, MAX_DETOUR_NS};

/// The signal both timers deliver.
pub(crate) const SIGNAL: Signal = Signal::SIGALRM;

/// How the injector runs: which timer, and the counter frequency for the busy spin.
#[derive(Debug, Clone, Copy)]
pub struct InjectorConfig {
    /// Timer kind; must match the plan's (it decides how lateness is compensated).
    pub timer: TimerKind,
    /// Cycle-counter clock used to turn busy ns into ticks.
    pub clock: Clock,
}

/// Why the emulator could not start or stop.
#[derive(Debug, Error)]
pub enum EmulatorError {
    /// `start` while another emulator runs in this process.
    #[error("an emulator is already running in this process: stop it first")]
    AlreadyRunning,
    /// `stop` (or a query) with no emulator running.
    #[error("no emulator is running (it was never started, or was already stopped)")]
    NotRunning,
    /// The cursor yields nothing (its fraction is already used up).
    #[error("the replay cursor has nothing left to inject")]
    NothingToInject,
    /// The plan was made for another timer kind than the injector's.
    #[error("the plan was made for the {plan} timer but the injector is configured for {config}")]
    TimerMismatch {
        /// Timer of the plan options.
        plan: TimerKind,
        /// Timer of the injector config.
        config: TimerKind,
    },
    /// `ITIMER_REAL` signals the process, and Linux gives it to the main thread.
    #[error(
        "the itimer injector must be started from the process's main thread (ITIMER_REAL \
         signals the process); use the abstime timer from other threads"
    )]
    NotMainThread,
    /// The calling thread blocks the timer signal: nothing would be injected.
    #[error("SIGALRM is blocked in the calling thread: nothing would be injected")]
    SignalBlocked,
    /// The application installed its own `SIGALRM` handler: the emulator would take it over.
    #[error(
        "the application handles SIGALRM itself (a handler is installed): the in-process \
         emulator would steal its signal; replay the trace with the separate-process injector \
         `jitter-inject` instead"
    )]
    SignalInUse,
    /// A system call failed (its errno is the source).
    #[error("{what}")]
    Sys {
        /// The call.
        what: &'static str,
        /// Its errno.
        #[source]
        source: Errno,
    },
    /// The plan could not be built.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A calibration could not stand behind its number.
    #[error("calibration failed: {0}")]
    Calibration(String),
    /// The simulated slow host of a test build was asked for with a bad value
    /// (`jitter_collect::slow_signals`).
    #[error("{0}")]
    SimulatedHost(String),
}

/// What an injector run did.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct InjectorStats {
    /// Timer used.
    pub timer: TimerKind,
    /// Injections executed by the handler.
    pub injected: u64,
    /// Trace detours the plan dropped (S·run ≤ O).
    pub dropped: u64,
    /// Trace detours the plan merged into their predecessor (S·sleep < M).
    pub merged: u64,
    /// Σ intended span of the executed injections, ns.
    pub injected_ns: u64,
    /// Σ busy time of the executed injections, ns.
    pub busy_ns: u64,
    /// Mean handler-entry lateness against the plan's due time, ns (negative: early).
    pub lateness_mean_ns: f64,
    /// Largest lateness, ns (0 if none was late).
    pub lateness_max_ns: u64,
    /// Lateness of the last injection, ns: the drift accumulated over the run.
    pub drift_ns: i64,
    /// Timer expiries that found the control side busy and were re-fired.
    pub missed: u64,
    /// Wake-ups before the armed deadline (re-armed without injecting).
    pub early: u64,
    /// Replay time from start to stop, ns.
    pub elapsed_ns: u64,
    /// The plan's own counts, for the injections executed (see [`PlanStats`]).
    pub plan: PlanStats,
}

/// One executed injection, as logged by the handler (for calibration and fidelity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LoggedInjection {
    /// Cycle counter at handler entry.
    pub entry_ticks: u64,
    /// Intended detour length (S·run), ns.
    pub span_ns: u64,
    /// Busy spin, ns.
    pub busy_ns: u64,
    /// Handler-entry lateness against the due time, ns.
    pub lateness_ns: i64,
}

const OFF: u8 = 0;
const IDLE: u8 = 1;
const HANDLER: u8 = 2;
const CONTROL: u8 = 3;

/// A wake-up this much before the armed deadline is treated as early and re-armed.
const EARLY_SLACK_NS: u64 = 1_000;

/// Lifecycle: true from a successful `start` claim to the end of `stop`.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Who holds the slot (see the module docs).
static STATE: AtomicU8 = AtomicU8::new(OFF);
/// A timer expiry arrived while the control side held the slot.
static MISSED: AtomicBool = AtomicBool::new(false);
/// The cursor has no more injections.
static FINISHED: AtomicBool = AtomicBool::new(false);
/// Expiries re-fired by the control side.
static MISSED_COUNT: AtomicU64 = AtomicU64::new(0);
/// Σ span of the injections executed since the start, ns: read without the slot, so a caller
/// can tell the time its own call spent in injections from the call's cost.
static INJECTED_SPAN_NS: AtomicU64 = AtomicU64::new(0);
/// The POSIX timer of the abstime injector (null for itimer), for re-arming outside the slot.
static TIMER_ID: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());

struct Slot(UnsafeCell<Option<Inner>>);

// SAFETY: access to the cell is serialised by `STATE` (module docs): only the holder of `HANDLER`
// or `CONTROL`, or `start`/`stop` while the state is `OFF`, touch it.
unsafe impl Sync for Slot {}

static SLOT: Slot = Slot(UnsafeCell::new(None));

/// Handler-side state: the cursor, the pending injection, the timer and the counters.
struct Inner {
    cursor: Cursor,
    pending: Option<Injection>,
    timer: TimerKind,
    timer_id: libc::timer_t,
    clock: Clock,
    origin_ns: u64,
    lateness_ns: u64,
    armed_deadline_ns: u64,
    injected: u64,
    injected_ns: u64,
    busy_ns: u64,
    lateness_sum: i128,
    lateness_max: i64,
    last_lateness: i64,
    early: u64,
    log: Vec<LoggedInjection>,
    log_len: usize,
    old_action: SigAction,
}

/// CLOCK_MONOTONIC in ns (vDSO; async-signal-safe).
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid writable timespec; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// What `arm_itimer(ns)` really asks for: `ns` rounded to the nearest µs, at least 1 µs.
#[inline]
pub(crate) fn itimer_resolution(ns: u64) -> u64 {
    (ns + 500) / 1_000 * 1_000
}

/// Arms `ITIMER_REAL` once, `ns` from now (rounded to its µs resolution, at least 1 µs).
#[inline]
pub(crate) fn arm_itimer(ns: u64) {
    let us = (itimer_resolution(ns) / 1_000).max(1);
    let v = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: (us / 1_000_000) as libc::time_t,
            tv_usec: (us % 1_000_000) as libc::suseconds_t,
        },
    };
    // SAFETY: `v` is a valid itimerval; setitimer is async-signal-safe.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &v, std::ptr::null_mut()) };
}

/// Disarms `ITIMER_REAL`.
pub(crate) fn disarm_itimer() {
    // SAFETY: an all-zero itimerval disarms the timer.
    let v: libc::itimerval = unsafe { std::mem::zeroed() };
    // SAFETY: `v` is valid; the old value is not requested.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &v, std::ptr::null_mut()) };
}

/// Arms a POSIX timer for the absolute CLOCK_MONOTONIC time `deadline_ns`.
#[inline]
pub(crate) fn arm_abstime(id: libc::timer_t, deadline_ns: u64) {
    let v = libc::itimerspec {
        it_interval: timespec(0),
        it_value: timespec(deadline_ns.max(1)),
    };
    // SAFETY: `id` is a live timer created by `create_thread_timer`; timer_settime is
    // async-signal-safe.
    unsafe { libc::timer_settime(id, libc::TIMER_ABSTIME, &v, std::ptr::null_mut()) };
}

/// Disarms a POSIX timer made by `create_thread_timer`.
pub(crate) fn disarm_abstime(id: libc::timer_t) {
    let v = libc::itimerspec {
        it_interval: timespec(0),
        it_value: timespec(0),
    };
    // SAFETY: `id` is a live timer; a zero it_value disarms it.
    unsafe { libc::timer_settime(id, 0, &v, std::ptr::null_mut()) };
}

/// Creates a CLOCK_MONOTONIC timer that sends `SIGALRM` to the calling thread.
pub(crate) fn create_thread_timer() -> Result<libc::timer_t, EmulatorError> {
    // SAFETY: an all-zero sigevent is a valid starting point; the used fields are set below.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = libc::SIGALRM;
    // SAFETY: gettid has no preconditions.
    sev.sigev_notify_thread_id = unsafe { libc::gettid() };
    let mut id: libc::timer_t = std::ptr::null_mut();
    // SAFETY: `sev` and `id` are valid for the call.
    let rc = unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) };
    if rc != 0 {
        return Err(EmulatorError::Sys {
            what: "timer_create(CLOCK_MONOTONIC)",
            source: Errno::last(),
        });
    }
    Ok(id)
}

/// Deletes a timer made by `create_thread_timer`.
pub(crate) fn delete_timer(id: libc::timer_t) {
    // SAFETY: `id` is live and deleted once.
    unsafe { libc::timer_delete(id) };
}

impl Inner {
    /// Arms the timer so that the pending injection fires at its due time.
    #[inline]
    fn arm_pending(&mut self, now_ns: u64) {
        let Some(p) = self.pending else {
            self.armed_deadline_ns = u64::MAX;
            return;
        };
        let due = self.origin_ns + p.due_ns;
        match self.timer {
            TimerKind::Itimer => {
                let rel = due.saturating_sub(now_ns).saturating_sub(self.lateness_ns);
                arm_itimer(rel);
                self.armed_deadline_ns = now_ns + itimer_resolution(rel).max(1_000);
            }
            TimerKind::Abstime => {
                arm_abstime(self.timer_id, due);
                self.armed_deadline_ns = due;
            }
        }
    }

    /// The handler's work for one expiry; `entry` is the counter at handler entry.
    #[inline]
    fn service(&mut self, entry: u64) {
        let now = mono_ns();
        if now + EARLY_SLACK_NS < self.armed_deadline_ns {
            if self.armed_deadline_ns != u64::MAX {
                self.early += 1;
                match self.timer {
                    TimerKind::Itimer => arm_itimer(self.armed_deadline_ns - now),
                    TimerKind::Abstime => arm_abstime(self.timer_id, self.armed_deadline_ns),
                }
            }
            return;
        }
        let Some(inj) = self.pending else {
            return;
        };
        // `now` is this handler's entry on the monotonic clock.
        let lateness = now as i64 - (self.origin_ns + inj.due_ns) as i64;
        if inj.busy_ns > 0 {
            // Bounded by a deadline whatever the plan says: never more than MAX_DETOUR_NS.
            spin_until(entry + self.clock.ns_to_ticks(inj.busy_ns.min(MAX_DETOUR_NS)));
        }
        self.injected += 1;
        self.injected_ns += inj.span_ns;
        INJECTED_SPAN_NS.fetch_add(inj.span_ns, Ordering::Relaxed);
        self.busy_ns += inj.busy_ns;
        self.lateness_sum += i128::from(lateness);
        self.lateness_max = self.lateness_max.max(lateness);
        self.last_lateness = lateness;
        if self.log_len < self.log.len() {
            self.log[self.log_len] = LoggedInjection {
                entry_ticks: entry,
                span_ns: inj.span_ns,
                busy_ns: inj.busy_ns,
                lateness_ns: lateness,
            };
            self.log_len += 1;
        }
        self.pending = self.cursor.next();
        match (self.pending, self.timer) {
            (None, _) => {
                self.armed_deadline_ns = u64::MAX;
                FINISHED.store(true, Ordering::Release);
            }
            (Some(n), TimerKind::Itimer) => {
                // The paper's scheme: the sleep after this detour, relative, less L. The plan's
                // `arm_after_ns` counts from the detour's end as the application sees it (due +
                // span); the handler is here O earlier than that (it entered at ≈ due and spun
                // span − O), so it adds O back: next entry ≈ this entry + (next due − due).
                // Counted from this handler's entry (`now`), so the handler's own run time
                // does not add to the interval; entry errors still carry over (relative timer).
                let t = mono_ns();
                let target = now + n.due_ns.saturating_sub(inj.due_ns);
                let rel = target
                    .saturating_sub(t)
                    .saturating_sub(self.lateness_ns)
                    .max(1);
                arm_itimer(rel);
                self.armed_deadline_ns = t + itimer_resolution(rel).max(1_000);
            }
            (Some(n), TimerKind::Abstime) => {
                let due = self.origin_ns + n.due_ns;
                arm_abstime(self.timer_id, due);
                self.armed_deadline_ns = due;
            }
        }
    }
}

/// The signal handler. Async-signal-safe: atomics, counter reads, clock_gettime, setitimer /
/// timer_settime, and plain arithmetic on the slot; errno is restored on exit.
extern "C" fn on_signal(_sig: libc::c_int) {
    // A simulated slow host's added cost (test builds only; empty otherwise).
    jitter_collect::slow_signals::pay();
    let mut entry = read_counter();
    // SAFETY: __errno_location returns this thread's errno slot, valid for the thread's life.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: `errno` points to this thread's errno.
    let saved = unsafe { *errno };
    loop {
        match STATE.compare_exchange(IDLE, HANDLER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => {}
            Err(CONTROL) => {
                MISSED.store(true, Ordering::Release);
                // The control side may have released between the CAS and the store: retry then.
                if STATE.load(Ordering::Acquire) == IDLE && MISSED.swap(false, Ordering::AcqRel) {
                    entry = read_counter();
                    continue;
                }
                break;
            }
            Err(_) => break,
        }
        // SAFETY: the CAS gave this handler exclusive access to the slot (module docs).
        if let Some(inner) = unsafe { (*SLOT.0.get()).as_mut() } {
            inner.service(entry);
        }
        STATE.store(IDLE, Ordering::Release);
        // Another thread got the expiry while this one held the slot: serve it now.
        if !MISSED.swap(false, Ordering::AcqRel) {
            break;
        }
        entry = read_counter();
    }
    // SAFETY: restores this thread's errno.
    unsafe { *errno = saved };
}

/// Takes the slot for the control side (waits out a handler running on another thread).
fn acquire_control() {
    while STATE
        .compare_exchange_weak(IDLE, CONTROL, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
}

/// Gives the slot back; re-fires the timer at once if an expiry was missed meanwhile. The re-arm
/// happens after the release (a signal arriving on the re-arming system call's return must find
/// the slot free), and is always safe: a wake-up before the armed deadline is recognised by the
/// handler and re-armed.
fn release_control() {
    STATE.store(IDLE, Ordering::Release);
    if MISSED.swap(false, Ordering::AcqRel) {
        MISSED_COUNT.fetch_add(1, Ordering::Relaxed);
        let id = TIMER_ID.load(Ordering::Acquire);
        if id.is_null() {
            arm_itimer(1);
        } else {
            arm_abstime(id, mono_ns());
        }
    }
}

/// Runs `f` on the slot under the control state.
fn with_control<R>(f: impl FnOnce(&mut Inner) -> R) -> R {
    acquire_control();
    // SAFETY: the control state gives exclusive access to the slot.
    let inner = unsafe { (*SLOT.0.get()).as_mut() }.expect("running emulator has a slot");
    let r = f(inner);
    release_control();
    r
}

/// The process-wide in-process emulator (one at a time).
#[derive(Debug)]
pub struct Emulator;

/// A running emulator; stop it to get its statistics (dropping it stops it too).
#[derive(Debug)]
pub struct Handle {
    stopped: bool,
    /// The handler targets the starting thread: keep the handle there.
    _not_send: PhantomData<*mut ()>,
}

/// Exclusive use of the timer signal without running the emulator (for calibration).
#[derive(Debug)]
pub(crate) struct Claim(());

impl Claim {
    /// Claims the signal; `AlreadyRunning` while an emulator (or another claim) holds it.
    pub(crate) fn take() -> Result<Claim, EmulatorError> {
        RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Claim(()))
            .map_err(|_| EmulatorError::AlreadyRunning)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::Release);
    }
}

/// Checks that nobody else handles the timer signal: its disposition must be the default, ignored
/// or this emulator's own handler; anything else is the application's and is refused
/// ([`EmulatorError::SignalInUse`]). Changes nothing.
pub fn check_signal_free() -> Result<(), EmulatorError> {
    // SAFETY: an all-zero sigaction is a valid buffer for the old disposition.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only queries the disposition into `old`.
    if unsafe { libc::sigaction(SIGNAL as libc::c_int, std::ptr::null(), &mut old) } != 0 {
        return Err(EmulatorError::Sys {
            what: "sigaction(SIGALRM) query",
            source: Errno::last(),
        });
    }
    let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    match old.sa_sigaction {
        libc::SIG_DFL | libc::SIG_IGN => Ok(()),
        h if h == ours => Ok(()),
        _ => Err(EmulatorError::SignalInUse),
    }
}

/// True on the process's main thread (where `ITIMER_REAL`'s signal goes).
pub(crate) fn is_main_thread() -> bool {
    // SAFETY: gettid and getpid have no preconditions.
    unsafe { libc::gettid() == libc::getpid() }
}

impl Emulator {
    /// Starts replaying `cursor` now (replay origin = now) with the given timer.
    pub fn start(cursor: Cursor, config: InjectorConfig) -> Result<Handle, EmulatorError> {
        Emulator::start_logged(cursor, config, 0)
    }

    /// As `start`, and logs up to `capacity` injections (entry time, span) for later matching.
    pub fn start_logged(
        cursor: Cursor,
        config: InjectorConfig,
        capacity: usize,
    ) -> Result<Handle, EmulatorError> {
        if RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(EmulatorError::AlreadyRunning);
        }
        match start_claimed(cursor, config, capacity) {
            Ok(h) => Ok(h),
            Err(e) => {
                RUNNING.store(false, Ordering::Release);
                Err(e)
            }
        }
    }

    /// True while an emulator runs in this process.
    pub fn is_running() -> bool {
        RUNNING.load(Ordering::Acquire)
    }
}

fn start_claimed(
    mut cursor: Cursor,
    config: InjectorConfig,
    capacity: usize,
) -> Result<Handle, EmulatorError> {
    let opts = *cursor.plan().options();
    if opts.timer != config.timer {
        return Err(EmulatorError::TimerMismatch {
            plan: opts.timer,
            config: config.timer,
        });
    }
    if config.timer == TimerKind::Itimer && !is_main_thread() {
        return Err(EmulatorError::NotMainThread);
    }
    let mask = SigSet::thread_get_mask().map_err(|source| EmulatorError::Sys {
        what: "pthread_sigmask",
        source,
    })?;
    if mask.contains(SIGNAL) {
        return Err(EmulatorError::SignalBlocked);
    }
    check_signal_free()?;
    jitter_collect::slow_signals::configure(&config.clock).map_err(EmulatorError::SimulatedHost)?;
    let log = vec![LoggedInjection::default(); capacity];
    let origin_ns = mono_ns();
    let first = cursor.next().ok_or(EmulatorError::NothingToInject)?;
    let timer_id = match config.timer {
        TimerKind::Abstime => create_thread_timer()?,
        TimerKind::Itimer => std::ptr::null_mut(),
    };
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: `on_signal` is async-signal-safe (see its docs); the state is OFF, so it does
    // nothing until the slot is published below.
    let old_action = match unsafe { sigaction(SIGNAL, &action) } {
        Ok(a) => a,
        Err(source) => {
            if config.timer == TimerKind::Abstime {
                delete_timer(timer_id);
            }
            return Err(EmulatorError::Sys {
                what: "sigaction(SIGALRM)",
                source,
            });
        }
    };
    let inner = Inner {
        cursor,
        pending: Some(first),
        timer: config.timer,
        timer_id,
        clock: config.clock,
        origin_ns,
        lateness_ns: opts.lateness_ns,
        armed_deadline_ns: u64::MAX,
        injected: 0,
        injected_ns: 0,
        busy_ns: 0,
        lateness_sum: 0,
        lateness_max: 0,
        last_lateness: 0,
        early: 0,
        log,
        log_len: 0,
        old_action,
    };
    FINISHED.store(false, Ordering::Relaxed);
    MISSED.store(false, Ordering::Relaxed);
    MISSED_COUNT.store(0, Ordering::Relaxed);
    INJECTED_SPAN_NS.store(0, Ordering::Relaxed);
    TIMER_ID.store(timer_id, Ordering::Release);
    // SAFETY: the state is OFF: the handler does not touch the slot.
    unsafe { *SLOT.0.get() = Some(inner) };
    STATE.store(IDLE, Ordering::Release);
    with_control(|inner| inner.arm_pending(mono_ns()));
    Ok(Handle {
        stopped: false,
        _not_send: PhantomData,
    })
}

impl Handle {
    /// Jumps to timeline point `offset_ns` (trace ns from the window start) now.
    pub fn resync(&self, offset_ns: u64) {
        resync_running(offset_ns);
    }

    /// Pauses injecting now: the timer is disarmed and the pending injection discarded unmet;
    /// the trace's timeline runs on (see [`Handle::resume`]).
    pub fn pause(&self) {
        pause_running();
    }

    /// Resumes after [`Handle::pause`] at the timeline point the replay would have reached had
    /// it never paused (the offsets between ranks and nodes are kept).
    pub fn resume(&self) {
        resume_running();
    }

    /// Where the replay stands now (see [`ReplayPosition`]); read under the control state, so
    /// never from a signal handler.
    pub fn position(&self) -> ReplayPosition {
        position_running().unwrap_or_default()
    }

    /// Σ span of the injections executed since the start, ns (an atomic read: no lock, no
    /// system call).
    pub fn injected_span_ns(&self) -> u64 {
        INJECTED_SPAN_NS.load(Ordering::Relaxed)
    }

    /// Share of the stream replayed so far.
    pub fn progress(&self) -> f64 {
        progress_running().unwrap_or(0.0)
    }

    /// True once the fraction limit was reached (no more injections will come).
    pub fn finished(&self) -> bool {
        FINISHED.load(Ordering::Acquire)
    }

    /// Disarms the timer, restores the old handler and returns the statistics.
    pub fn stop(mut self) -> Result<InjectorStats, EmulatorError> {
        self.stopped = true;
        stop_running().map(|(s, _)| s)
    }

    /// As `stop`, and returns the logged injections (see `Emulator::start_logged`).
    pub fn stop_logged(mut self) -> Result<(InjectorStats, Vec<LoggedInjection>), EmulatorError> {
        self.stopped = true;
        stop_running()
    }
}

impl Handle {
    /// Lets the emulator run on without this handle (the C ABI stops it with `stop_running`).
    pub(crate) fn detach(mut self) {
        self.stopped = true;
    }
}

/// `Handle::resync` for whoever runs the emulator; false if none runs.
pub(crate) fn resync_running(offset_ns: u64) -> bool {
    if STATE.load(Ordering::Acquire) == OFF {
        return false;
    }
    with_control(|inner| {
        let now = mono_ns();
        inner.cursor.resync(offset_ns, now - inner.origin_ns);
        inner.pending = inner.cursor.next();
        FINISHED.store(inner.pending.is_none(), Ordering::Release);
        inner.arm_pending(now);
    });
    true
}

/// Where a running replay stands: the stretch of its timeline it replays and what it injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayPosition {
    /// Timeline point (trace ns from the window start) reached now, had the replay run on from
    /// its last start or resync (a paused injector's resume point).
    pub point_now_ns: u64,
    /// Timeline point of the last start, resync or resume.
    pub segment_point_ns: u64,
    /// Injections executed so far.
    pub injected: u64,
    /// Their planned spans, ns (scaled).
    pub injected_ns: u64,
}

/// `Handle::position` for whoever runs the emulator; `None` if none runs.
pub(crate) fn position_running() -> Option<ReplayPosition> {
    if STATE.load(Ordering::Acquire) == OFF {
        return None;
    }
    Some(with_control(|inner| {
        let now = mono_ns() - inner.origin_ns;
        ReplayPosition {
            point_now_ns: inner.cursor.point_at(now),
            segment_point_ns: inner.cursor.segment_point(),
            injected: inner.injected,
            injected_ns: inner.injected_ns,
        }
    }))
}

/// `Handle::pause` for whoever runs the emulator; false if none runs.
pub(crate) fn pause_running() -> bool {
    if STATE.load(Ordering::Acquire) == OFF {
        return false;
    }
    with_control(|inner| {
        inner.pending = None;
        inner.armed_deadline_ns = u64::MAX;
        match inner.timer {
            TimerKind::Itimer => disarm_itimer(),
            TimerKind::Abstime => disarm_abstime(inner.timer_id),
        }
    });
    true
}

/// `Handle::resume` for whoever runs the emulator; false if none runs.
pub(crate) fn resume_running() -> bool {
    if STATE.load(Ordering::Acquire) == OFF {
        return false;
    }
    with_control(|inner| {
        let now = mono_ns();
        let rel = now - inner.origin_ns;
        let point = inner.cursor.point_at(rel);
        inner.cursor.resync(point, rel);
        inner.pending = inner.cursor.next();
        FINISHED.store(inner.pending.is_none(), Ordering::Release);
        inner.arm_pending(now);
    });
    true
}

/// `Handle::progress` for whoever runs the emulator; `None` if none runs.
pub(crate) fn progress_running() -> Option<f64> {
    if STATE.load(Ordering::Acquire) == OFF {
        return None;
    }
    Some(with_control(|inner| {
        let now = mono_ns() - inner.origin_ns;
        inner.cursor.progress_at(now)
    }))
}

/// True once the running emulator's cursor is exhausted.
pub(crate) fn finished_running() -> bool {
    FINISHED.load(Ordering::Acquire)
}

impl Drop for Handle {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = stop_running();
        }
    }
}

/// Stops the running emulator (the body of `Handle::stop`; `NotRunning` if there is none).
pub(crate) fn stop_running() -> Result<(InjectorStats, Vec<LoggedInjection>), EmulatorError> {
    if !RUNNING.load(Ordering::Acquire) || STATE.load(Ordering::Acquire) == OFF {
        return Err(EmulatorError::NotRunning);
    }
    acquire_control();
    // SAFETY: the control state gives exclusive access; the slot is taken out and the state set
    // to OFF before release, so the handler never sees it again.
    let inner = unsafe { (*SLOT.0.get()).take() };
    match inner.as_ref().map(|i| (i.timer, i.timer_id)) {
        Some((TimerKind::Itimer, _)) => disarm_itimer(),
        Some((TimerKind::Abstime, id)) => delete_timer(id),
        None => {}
    }
    STATE.store(OFF, Ordering::Release);
    TIMER_ID.store(std::ptr::null_mut(), Ordering::Release);
    let Some(mut inner) = inner else {
        RUNNING.store(false, Ordering::Release);
        return Err(EmulatorError::NotRunning);
    };
    let elapsed_ns = mono_ns() - inner.origin_ns;
    // Drain an expiry already pending before the old disposition (maybe SIG_DFL) returns.
    let mut only = SigSet::empty();
    only.add(SIGNAL);
    let mut old_mask = SigSet::empty();
    let blocked =
        nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&only), Some(&mut old_mask))
            .is_ok();
    let was_blocked = old_mask.contains(SIGNAL);
    if blocked {
        let zero = timespec(0);
        // SAFETY: `only` is a valid sigset; a zero timeout only polls.
        while unsafe { libc::sigtimedwait(only.as_ref(), std::ptr::null_mut(), &zero) } > 0 {}
    }
    // SAFETY: restoring the disposition that was in force before `start`.
    let restored = unsafe { sigaction(SIGNAL, &inner.old_action) };
    if blocked && !was_blocked {
        let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&only), None);
    }
    MISSED.store(false, Ordering::Relaxed);
    FINISHED.store(false, Ordering::Relaxed);
    RUNNING.store(false, Ordering::Release);
    restored.map_err(|source| EmulatorError::Sys {
        what: "sigaction(SIGALRM) restore",
        source,
    })?;
    let plan = inner.cursor.stats();
    let stats = InjectorStats {
        timer: inner.timer,
        injected: inner.injected,
        dropped: plan.dropped,
        merged: plan.merged,
        injected_ns: inner.injected_ns,
        busy_ns: inner.busy_ns,
        lateness_mean_ns: if inner.injected == 0 {
            0.0
        } else {
            inner.lateness_sum as f64 / inner.injected as f64
        },
        lateness_max_ns: inner.lateness_max.max(0) as u64,
        drift_ns: inner.last_lateness,
        missed: MISSED_COUNT.load(Ordering::Relaxed),
        early: inner.early,
        elapsed_ns,
        plan,
    };
    inner.log.truncate(inner.log_len);
    Ok((stats, std::mem::take(&mut inner.log)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_call_is_named_once_and_its_errno_chained_once() {
        let e = EmulatorError::Sys {
            what: "sigaction(SIGALRM)",
            source: Errno::EINVAL,
        };
        assert_eq!(e.to_string(), "sigaction(SIGALRM)");
        assert_eq!(
            jitter_trace::error::chain_line(&e),
            format!("sigaction(SIGALRM): {}", Errno::EINVAL)
        );
    }
}
