//! The progress display of a collection on a terminal: a bar over the duration, or a spinner.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::config::Config;
use crate::writer::Writer;

/// The progress display, when asked for and stderr is a terminal: a bar over the duration, or
/// a spinner without one.
pub(crate) fn progress_bar(config: &Config) -> Option<ProgressBar> {
    (config.progress && std::io::stderr().is_terminal()).then(|| {
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
    })
}

/// The writer's progress display, if it shows one.
pub(crate) fn writer_progress(w: &Writer) -> Option<ProgressBar> {
    w.progress()
}
