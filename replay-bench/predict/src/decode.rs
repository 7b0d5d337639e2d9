//! A trace's chunks decoded side by side on the predictor's thread pool: the rayon way of
//! `jitter_trace::scan::SideBySide` (the trace library starts no threads and links no pool),
//! registered by `prepare` before any trace is read. Only a worker of the pool the caller set up
//! decodes side by side (`replay-bench predict`'s main thread is its worker 0), a few chunks per
//! worker; anywhere else, one by one.

use jitter_trace::scan::{Job, SideBySide};
use rayon::prelude::*;

/// Decoding on the rayon pool of the calling thread.
#[derive(Debug)]
struct OnThePool;

impl SideBySide for OnThePool {
    fn batch(&self) -> usize {
        if rayon::current_thread_index().is_some() {
            2 * rayon::current_num_threads()
        } else {
            1
        }
    }
    fn run(&self, jobs: Vec<Job<'_>>) {
        jobs.into_par_iter().for_each(|job| job());
    }
}

static ON_THE_POOL: OnThePool = OnThePool;

/// Lets this process's trace reads decode side by side on the pool (the first registration
/// holds; calling it again does nothing).
pub fn register() {
    jitter_trace::scan::decode_side_by_side(&ON_THE_POOL);
}
