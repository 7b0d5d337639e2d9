//! Progress of a long prediction for logs: a line every `TEXT_PROGRESS_EVERY` on a stderr
//! that is not a terminal, where the progress bar is hidden (with the bar's message in place
//! of the eta where there is one: the precision mode's own estimate).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

/// How often a non-terminal stderr gets a line of progress.
pub const TEXT_PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// One line of progress: `predict: 40 % (800/2000 rank-phases), eta 12 s`; before the first
/// phase the eta is what the estimate leaves.
pub(crate) fn progress_line(done: u64, total: u64, elapsed: Duration, estimate_s: f64) -> String {
    let pct = if total == 0 {
        100.0
    } else {
        100.0 * done as f64 / total as f64
    };
    let eta = if done == 0 {
        (estimate_s - elapsed.as_secs_f64()).max(0.0)
    } else {
        elapsed.as_secs_f64() * total.saturating_sub(done) as f64 / done as f64
    };
    format!("predict: {pct:.0} % ({done}/{total} rank-phases), eta {eta:.0} s")
}

/// Prints [`progress_line`] to stderr every `every` while a prediction runs (for logs, where
/// the progress bar is hidden).
#[derive(Debug)]
pub struct TextProgress {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl TextProgress {
    pub fn start(bar: ProgressBar, estimate_s: f64, every: Duration) -> Self {
        let (stop, rx) = mpsc::channel::<()>();
        let t0 = Instant::now();
        let thread = std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                let total = bar.length().unwrap_or(0);
                let line = progress_line(bar.position(), total, t0.elapsed(), estimate_s);
                // The precision mode says its own time left (from its draws' pace).
                match bar.message() {
                    m if m.is_empty() => eprintln!("{line}"),
                    m => eprintln!("{}, {m}", line.split(", eta").next().unwrap_or(&line)),
                }
            }
        });
        TextProgress { stop, thread }
    }

    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_progress_line_gives_share_and_eta() {
        assert_eq!(
            progress_line(800, 2000, Duration::from_secs(8), 30.0),
            "predict: 40 % (800/2000 rank-phases), eta 12 s"
        );
        assert_eq!(
            progress_line(0, 2000, Duration::from_secs(8), 30.0),
            "predict: 0 % (0/2000 rank-phases), eta 22 s"
        );
    }
}
