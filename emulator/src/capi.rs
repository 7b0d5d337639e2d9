//! C ABI for applications in C, C++ or Fortran (link `libjitter_emulator.a` or `.so`):
//!
//! ```c
//! int    jb_emulator_start(const char *trace_path, unsigned stream, double scale, int timer);
//! int    jb_emulator_start_with(const char *trace_path, unsigned stream, double scale, int timer,
//!                               long long overhead_ns, long long lateness_ns,
//!                               long long min_sleep_ns);
//! double jb_emulator_progress(void);   /* share of the stream replayed; < 0: not running */
//! int    jb_emulator_resync(unsigned long long offset_ns);
//! int    jb_emulator_stop(void);
//! int    jb_emulator_last_error(char *buf, size_t len);
//! ```
//!
//! The header is `emulator/include/jitter_emulator.h` (`tests/capi_c.rs` keeps it in step and
//! runs a C program against it). `timer`: 0 = itimer (call from the main thread), 1 = abstime.
//! Return codes: 0 success, `JB_ERR_*` (negative) on failure, with the message available from
//! `jb_emulator_last_error`. No panic unwinds into C: every entry point catches it and returns
//! `JB_ERR_INTERNAL` (−1.0 from `jb_emulator_progress`).
//! `jb_emulator_start` takes O, L and M from the cached calibration (measured on first use);
//! `jb_emulator_start_with` uses given values where they are ≥ 0. Calls are meant for one
//! thread (the one that started the emulator).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};
use std::path::Path;

use crate::calibration::Calibration;
use crate::injector::{self, Emulator, EmulatorError, InjectorConfig};
use crate::plan::{Plan, TimerKind};
use crate::setup::{Fraction, InjectionCost, Overrides, ReplaySetup, Scale};
use jitter_collect::clock::Clock;
use jitter_trace::error::chain_line;

/// Success.
pub const JB_OK: c_int = 0;
/// Bad argument (null or non-UTF-8 path, bad scale, unknown timer).
pub const JB_ERR_ARGUMENT: c_int = -1;
/// The trace could not be read or has nothing to replay.
pub const JB_ERR_TRACE: c_int = -2;
/// An emulator already runs.
pub const JB_ERR_ALREADY_RUNNING: c_int = -3;
/// No emulator runs (never started or already stopped).
pub const JB_ERR_NOT_RUNNING: c_int = -4;
/// Calibration or a system call failed.
pub const JB_ERR_SYSTEM: c_int = -5;
/// A panic was caught at the boundary (a bug; the message says where).
pub const JB_ERR_INTERNAL: c_int = -6;
/// The application handles `SIGALRM` itself: the emulator would steal its signal.
pub const JB_ERR_SIGNAL_IN_USE: c_int = -7;
/// `timer` argument: `setitimer(ITIMER_REAL)`, relative (main thread only).
pub const JB_TIMER_ITIMER: c_int = 0;
/// `timer` argument: `timer_create(CLOCK_MONOTONIC)` at absolute deadlines, aimed at the caller.
pub const JB_TIMER_ABSTIME: c_int = 1;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn fail(code: c_int, msg: String) -> c_int {
    LAST_ERROR.with(|e| *e.borrow_mut() = msg);
    code
}

/// Runs `f` and turns a panic into `Err(message)` instead of unwinding: for `extern "C"` entry
/// points (this module's and the preload library's), where unwinding is undefined behaviour.
pub fn no_unwind<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without message".into());
        format!("internal error: {what}")
    })
}

/// `no_unwind` for the functions returning a code: a panic becomes `JB_ERR_INTERNAL`.
fn guarded(f: impl FnOnce() -> c_int) -> c_int {
    no_unwind(f).unwrap_or_else(|msg| fail(JB_ERR_INTERNAL, msg))
}

fn emulator_code(e: &EmulatorError) -> c_int {
    match e {
        EmulatorError::AlreadyRunning => JB_ERR_ALREADY_RUNNING,
        EmulatorError::NotRunning => JB_ERR_NOT_RUNNING,
        EmulatorError::Plan(_) | EmulatorError::NothingToInject => JB_ERR_TRACE,
        EmulatorError::TimerMismatch { .. } | EmulatorError::SimulatedHost(_) => JB_ERR_ARGUMENT,
        EmulatorError::SignalInUse => JB_ERR_SIGNAL_IN_USE,
        _ => JB_ERR_SYSTEM,
    }
}

fn opt(v: i64) -> Option<u64> {
    u64::try_from(v).ok()
}

/// # Safety
/// `trace_path` is null or a NUL-terminated string.
unsafe fn start(
    trace_path: *const c_char,
    stream: u32,
    scale: f64,
    timer: c_int,
    overrides: Overrides,
    calibrate: bool,
) -> c_int {
    if trace_path.is_null() {
        return fail(JB_ERR_ARGUMENT, "trace path is null".into());
    }
    // SAFETY: the caller passes a NUL-terminated string (checked non-null above).
    let path = match unsafe { CStr::from_ptr(trace_path) }.to_str() {
        Ok(p) => p,
        Err(_) => return fail(JB_ERR_ARGUMENT, "trace path is not UTF-8".into()),
    };
    let timer = match timer {
        JB_TIMER_ITIMER => TimerKind::Itimer,
        JB_TIMER_ABSTIME => TimerKind::Abstime,
        t => {
            return fail(
                JB_ERR_ARGUMENT,
                format!("unknown timer {t} (0 itimer, 1 abstime)"),
            )
        }
    };
    if Emulator::is_running() {
        return fail(
            JB_ERR_ALREADY_RUNNING,
            EmulatorError::AlreadyRunning.to_string(),
        );
    }
    // Before the calibration (which takes the signal for a while): refuse at once.
    if let Err(e) = injector::check_signal_free() {
        return fail(emulator_code(&e), e.to_string());
    }
    // No salvage through the C API: a trace that lacks detours is refused.
    let read = jitter_trace::read_trace(Path::new(path)).and_then(|l| {
        l.accept(path, jitter_trace::Salvage::Refuse)?;
        Ok(l)
    });
    let trace = match read {
        Ok(l) => l.trace,
        Err(jitter_trace::TraceError::Incomplete(why)) => return fail(JB_ERR_TRACE, why),
        Err(e) => {
            return fail(
                JB_ERR_TRACE,
                format!("cannot read {path}: {}", chain_line(&e)),
            )
        }
    };
    let clock = match Clock::for_tools() {
        Ok(c) => c,
        Err(e) => return fail(JB_ERR_SYSTEM, format!("counter clock: {e}")),
    };
    let scale = match Scale::new(scale) {
        Ok(s) => s,
        Err(e) => return fail(JB_ERR_ARGUMENT, e.to_string()),
    };
    let cost = if calibrate {
        match Calibration::load_or_measure(&clock, false, &crate::calibration::StartLine) {
            Ok(c) => c.cost(timer, &overrides),
            Err(e) => return fail(JB_ERR_SYSTEM, format!("calibration: {e:#}")),
        }
    } else {
        InjectionCost::ideal(timer).overridden(&overrides)
    };
    let opts = ReplaySetup {
        scale,
        fraction: Fraction::WHOLE,
        cost,
    }
    .plan_options();
    let plan = match Plan::from_trace(&trace, stream as usize, opts) {
        Ok(p) => p,
        Err(e) => return fail(JB_ERR_TRACE, e.to_string()),
    };
    match Emulator::start(plan.cursor(0), InjectorConfig { timer, clock }) {
        Ok(h) => {
            h.detach();
            JB_OK
        }
        Err(e) => fail(emulator_code(&e), chain_line(&e)),
    }
}

/// Starts replaying stream `stream` of the trace at `trace_path` with scale `scale` and timer
/// `timer` (0 itimer, 1 abstime), with O, L, M from the cached calibration.
///
/// # Safety
/// `trace_path` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn jb_emulator_start(
    trace_path: *const c_char,
    stream: u32,
    scale: f64,
    timer: c_int,
) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    guarded(|| unsafe { start(trace_path, stream, scale, timer, Overrides::default(), true) })
}

/// As `jb_emulator_start` with O, L, M given in ns (a negative value: take it from the
/// calibration, which is then consulted).
///
/// # Safety
/// `trace_path` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn jb_emulator_start_with(
    trace_path: *const c_char,
    stream: u32,
    scale: f64,
    timer: c_int,
    overhead_ns: i64,
    lateness_ns: i64,
    min_sleep_ns: i64,
) -> c_int {
    let o = Overrides {
        overhead_ns: opt(overhead_ns),
        lateness_ns: opt(lateness_ns),
        min_sleep_ns: opt(min_sleep_ns),
    };
    let need_calibration =
        o.overhead_ns.is_none() || o.lateness_ns.is_none() || o.min_sleep_ns.is_none();
    // SAFETY: forwarded from the caller's contract.
    guarded(|| unsafe { start(trace_path, stream, scale, timer, o, need_calibration) })
}

/// Share of the stream replayed so far; −1 when no emulator runs.
#[no_mangle]
pub extern "C" fn jb_emulator_progress() -> f64 {
    no_unwind(|| injector::progress_running().unwrap_or(-1.0)).unwrap_or_else(|msg| {
        fail(JB_ERR_INTERNAL, msg);
        -1.0
    })
}

/// 1 when the replay reached its end, 0 while it runs, `JB_ERR_NOT_RUNNING` without emulator.
#[no_mangle]
pub extern "C" fn jb_emulator_finished() -> c_int {
    guarded(|| {
        if !Emulator::is_running() {
            return JB_ERR_NOT_RUNNING;
        }
        c_int::from(injector::finished_running())
    })
}

/// Jumps to timeline point `offset_ns` now.
#[no_mangle]
pub extern "C" fn jb_emulator_resync(offset_ns: u64) -> c_int {
    guarded(|| {
        if injector::resync_running(offset_ns) {
            JB_OK
        } else {
            fail(JB_ERR_NOT_RUNNING, EmulatorError::NotRunning.to_string())
        }
    })
}

/// Stops the emulator and restores the old signal handler; `JB_ERR_NOT_RUNNING` if none runs.
#[no_mangle]
pub extern "C" fn jb_emulator_stop() -> c_int {
    guarded(|| match injector::stop_running() {
        Ok(_) => JB_OK,
        Err(e) => fail(emulator_code(&e), chain_line(&e)),
    })
}

/// Copies the last error message of this thread into `buf` (NUL-terminated, truncated to
/// `len`); returns the message length.
///
/// # Safety
/// `buf` is null or valid for writes of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn jb_emulator_last_error(buf: *mut c_char, len: usize) -> c_int {
    guarded(|| last_error_into(buf, len))
}

/// The body of `jb_emulator_last_error`.
fn last_error_into(buf: *mut c_char, len: usize) -> c_int {
    LAST_ERROR.with(|e| {
        let e = e.borrow();
        if !buf.is_null() && len > 0 {
            let n = e.len().min(len - 1);
            // SAFETY: the caller gives a buffer of `len` bytes; n + 1 ≤ len bytes are written.
            unsafe {
                std::ptr::copy_nonoverlapping(e.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        c_int::try_from(e.len()).unwrap_or(c_int::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    fn start_c(p: *const c_char, stream: u32, scale: f64, timer: c_int) -> c_int {
        // SAFETY: `p` is null or a CString's pointer.
        unsafe { jb_emulator_start(p, stream, scale, timer) }
    }

    fn start_c_with(
        p: *const c_char,
        stream: u32,
        scale: f64,
        timer: c_int,
        o: i64,
        l: i64,
        m: i64,
    ) -> c_int {
        // SAFETY: `p` is a CString's pointer.
        unsafe { jb_emulator_start_with(p, stream, scale, timer, o, l, m) }
    }

    fn last_error() -> String {
        let mut buf = vec![0 as c_char; 256];
        // SAFETY: `buf` has `len` bytes.
        let n = unsafe { jb_emulator_last_error(buf.as_mut_ptr(), buf.len()) };
        assert!(n >= 0);
        // SAFETY: the function NUL-terminated the buffer.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn the_c_abi_starts_reports_and_refuses_double_start_and_stop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jtr");
        // Sparse noise (20 µs every 10 ms) so that this thread barely notices.
        let s = crate::calibration::periodic_stream(10_000_000, 20_000, 100);
        let mut t = jitter_trace::Trace {
            streams: vec![s],
            ..jitter_trace::Trace::default()
        };
        t.sync_header();
        jitter_trace::write_trace(&path, &t).unwrap();
        let c = CString::new(path.to_str().unwrap()).unwrap();

        assert_eq!(start_c(std::ptr::null(), 0, 1.0, 1), JB_ERR_ARGUMENT);
        assert!(last_error().contains("null"));
        assert_eq!(
            start_c_with(c.as_ptr(), 0, 1.0, 7, 0, 0, 0),
            JB_ERR_ARGUMENT
        );
        assert_eq!(start_c_with(c.as_ptr(), 3, 1.0, 1, 0, 0, 0), JB_ERR_TRACE);
        assert!(last_error().contains("stream 3"), "{}", last_error());
        assert_eq!(
            start_c_with(c.as_ptr(), 0, -2.0, 1, 0, 0, 0),
            JB_ERR_ARGUMENT
        );
        assert!(last_error().contains("scale"), "{}", last_error());
        let missing = CString::new("/nonexistent/t.jtr").unwrap();
        assert_eq!(
            start_c_with(missing.as_ptr(), 0, 1.0, 1, 0, 0, 0),
            JB_ERR_TRACE
        );
        assert_eq!(jb_emulator_progress(), -1.0);
        assert_eq!(jb_emulator_stop(), JB_ERR_NOT_RUNNING);
        // A trace whose ring dropped detours: refused (no salvage through the C API).
        let mut lossy = t.clone();
        lossy.streams[0].counters.insert("lost_detours".into(), 50);
        lossy.streams[0]
            .counters
            .insert("lost_ns".into(), 1_000_000);
        let lossy_path = dir.path().join("l.jtr");
        jitter_trace::write_trace(&lossy_path, &lossy).unwrap();
        let l = CString::new(lossy_path.to_str().unwrap()).unwrap();
        assert_eq!(
            start_c_with(l.as_ptr(), 0, 1.0, 1, 5_000, 0, 0),
            JB_ERR_TRACE
        );
        assert!(
            last_error().contains("the collector's ring dropped 50 of 150 detours"),
            "{}",
            last_error()
        );

        assert_eq!(start_c_with(c.as_ptr(), 0, 1.0, 1, 5_000, 0, 0), JB_OK);
        assert_eq!(
            start_c_with(c.as_ptr(), 0, 1.0, 1, 5_000, 0, 0),
            JB_ERR_ALREADY_RUNNING
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
        let p = jb_emulator_progress();
        // 100 ms of a 1 s stream, give or take the sleep's own lateness.
        assert!((0.09..0.5).contains(&p), "progress {p}");
        assert_eq!(jb_emulator_finished(), 0);
        assert_eq!(jb_emulator_resync(500_000_000), JB_OK);
        assert_eq!(jb_emulator_stop(), JB_OK);
        assert_eq!(jb_emulator_stop(), JB_ERR_NOT_RUNNING);
        assert!(last_error().contains("no emulator is running"));
        assert_eq!(jb_emulator_resync(0), JB_ERR_NOT_RUNNING);
    }
}
