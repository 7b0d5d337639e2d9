//! A slower host, made for tests: with the `simulate-slow-signals` feature (off by default, so
//! never in what users build) and `JB_SIMULATED_SIGNAL_US=<µs>` set, every `SIGALRM` handler of
//! jitterbench (the injector's, hence the calibration's O, and `--check`'s) first spins that
//! long on the counter. Each signal then really costs the application that much more CPU time,
//! as on a host whose signal delivery is slower; nothing reported is altered, the machine is.
//! The suite's tests read O and the signal cost from the calibration and `--check`, so a run
//! with the feature shows whether they adapt to a slow host (`scripts/test.sh --slow-signals US`).
//!
//! Without the feature, [`configure`] reads nothing and returns 0, and [`pay`] is empty. With
//! it, a process that arms the spin says so on standard error once, and the emulator's
//! calibration cache keys on the added cost (`jitter_emulator::cache::MachineKey`), so that a
//! calibration measured on the simulated host is never reused on the real one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::clock::{read_counter, spin_until, Clock};

/// The variable that sets the added cost, whole µs (0 to [`MAX_ADDED_US`]).
pub(crate) const VAR: &str = "JB_SIMULATED_SIGNAL_US";

/// The largest added cost, µs: a host whose SIGALRM costs milliseconds is not one to replay on.
pub(crate) const MAX_ADDED_US: u64 = 1_000;

/// Counter ticks each handler spins before its work (0: none).
static ADDED_TICKS: AtomicU64 = AtomicU64::new(0);
/// Whether this process said that it runs on a simulated host.
static SAID: AtomicBool = AtomicBool::new(false);

/// The added cost [`VAR`] asks for, ns: 0 without the feature (nothing is read) or when unset;
/// an error line naming the variable for a value that is not whole µs in 0..=[`MAX_ADDED_US`].
pub fn requested_ns() -> Result<u64, String> {
    if !cfg!(feature = "simulate-slow-signals") {
        return Ok(0);
    }
    let Some(v) = std::env::var_os(VAR) else {
        return Ok(0);
    };
    let v = v.to_string_lossy();
    match v.trim().parse::<u64>() {
        Ok(us) if us <= MAX_ADDED_US => Ok(us * 1_000),
        _ => Err(format!(
            "{VAR}={v:?}: give whole microseconds from 0 to {MAX_ADDED_US} added to every SIGALRM"
        )),
    }
}

/// Arms the spin for `clock` from [`VAR`] (at set-up, never in a handler); returns the added
/// cost, ns. The first process-wide arming of a non-zero cost prints one warning line.
pub fn configure(clock: &Clock) -> Result<u64, String> {
    let ns = requested_ns()?;
    ADDED_TICKS.store(clock.ns_to_ticks(ns), Ordering::Relaxed);
    if ns > 0 && !SAID.swap(true, Ordering::Relaxed) {
        eprintln!(
            "warning: simulated slow host: every SIGALRM handler spins {} µs first ({VAR}, a \
             test build with the simulate-slow-signals feature)",
            ns / 1_000
        );
    }
    Ok(ns)
}

/// The spin itself, at a handler's entry. Async-signal-safe: one atomic load and counter reads.
#[inline(always)]
pub fn pay() {
    if cfg!(feature = "simulate-slow-signals") {
        let ticks = ADDED_TICKS.load(Ordering::Relaxed);
        if ticks > 0 {
            spin_until(read_counter() + ticks);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_feature_nothing_is_read_or_spun() {
        if cfg!(feature = "simulate-slow-signals") {
            return;
        }
        std::env::set_var(VAR, "not a number");
        assert_eq!(requested_ns(), Ok(0));
        std::env::remove_var(VAR);
    }

    #[test]
    #[cfg(feature = "simulate-slow-signals")]
    fn the_variable_is_whole_microseconds_within_the_bound() {
        let clock = Clock::for_tools().unwrap();
        std::env::set_var(VAR, "25");
        assert_eq!(configure(&clock), Ok(25_000));
        let t0 = read_counter();
        pay();
        assert!(clock.ticks_to_ns_f64(read_counter() - t0) >= 25_000.0);
        for bad in ["-1", "1001", "2.5", "x"] {
            std::env::set_var(VAR, bad);
            let e = requested_ns().unwrap_err();
            assert!(e.starts_with(VAR), "{e}");
        }
        std::env::set_var(VAR, "0");
        assert_eq!(configure(&clock), Ok(0));
        std::env::remove_var(VAR);
    }
}
