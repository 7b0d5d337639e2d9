//! How a calibration says how far it is (`Progress`): the steps of both timers' measurements.
//! The library has no progress bar of its own (what a preloaded MPI program or a C caller links
//! draws nothing): [`StartLine`] says once on standard error that it runs and how long it takes;
//! the command-line tools draw a bar through the same trait (`jitter-emulator-cli`).

use crate::plan::TimerKind;

/// What a running calibration reports.
pub trait Progress {
    /// The calibration starts: `steps` steps in all.
    fn start(&self, steps: u64);
    /// The steps that follow measure `timer`.
    fn timer(&self, timer: TimerKind);
    /// One step is done.
    fn step(&self);
    /// The calibration is done.
    fn finish(&self);
}

/// One line on standard error when a calibration starts, nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartLine;

impl Progress for StartLine {
    fn start(&self, _steps: u64) {
        eprintln!("calibrating the emulator on this machine (about 20 s)");
    }
    fn timer(&self, _timer: TimerKind) {}
    fn step(&self) {}
    fn finish(&self) {}
}
