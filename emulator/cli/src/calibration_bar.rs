//! The calibration's progress on a terminal (`CalibrationBar`): an indicatif bar through the
//! library's `calibration::Progress`; on anything else the library's one line.

use indicatif::{ProgressBar, ProgressStyle};
use jitter_emulator::calibration::{Progress, StartLine};
use jitter_emulator::TimerKind;

/// A bar of the calibration's steps where standard error is a terminal (indicatif hides it
/// elsewhere), else the library's start line ([`StartLine`]).
#[derive(Debug)]
pub struct CalibrationBar {
    bar: ProgressBar,
}

impl CalibrationBar {
    /// A bar not yet started.
    pub fn new() -> CalibrationBar {
        CalibrationBar {
            bar: ProgressBar::new(0),
        }
    }
}

impl Default for CalibrationBar {
    fn default() -> Self {
        CalibrationBar::new()
    }
}

impl Progress for CalibrationBar {
    fn start(&self, steps: u64) {
        self.bar.set_length(steps);
        if self.bar.is_hidden() {
            StartLine.start(steps);
        } else {
            self.bar.set_style(
                ProgressStyle::with_template(
                    "calibrating {msg:8} [{bar:30}] {pos}/{len} steps, eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
        }
    }
    fn timer(&self, timer: TimerKind) {
        self.bar.set_message(timer.to_string());
    }
    fn step(&self) {
        self.bar.inc(1);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
