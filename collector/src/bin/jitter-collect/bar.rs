//! The progress of a collection on a terminal: a bar over the duration, or a spinner without
//! one, drawn from what the writer reports (`jitter_collect::collection_progress::Progress`).

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use jitter_collect::collection_progress::Progress;

/// A collection's bar (or spinner).
#[derive(Debug)]
struct Bar(ProgressBar);

impl Progress for Bar {
    fn observed(&self, observed_ns: u64, detours: u64, noise_pct: f64) {
        self.0.set_position(observed_ns / 1_000_000);
        self.0
            .set_message(format!("{detours} detours, noise {noise_pct:.3} %"));
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// The progress display of a collection of `duration` (`None`: until stopped), when stderr is a
/// terminal: a bar over the duration, or a spinner without one.
pub(crate) fn for_collection(duration: Option<Duration>) -> Option<Arc<dyn Progress>> {
    std::io::stderr().is_terminal().then(|| {
        let pb = match duration {
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
        Arc::new(Bar(pb)) as Arc<dyn Progress>
    })
}
