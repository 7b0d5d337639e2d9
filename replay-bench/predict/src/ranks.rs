//! How the simulated ranks are split: over the processes of an MPI run (each simulates a
//! contiguous share, [`share`]) and over the worker threads of one process (chunks of at least
//! [`MIN_CHUNK`] states, [`chunk_of`]); and the stage count ⌈log₂ N⌉ of N ranks
//! ([`ceil_log2`]), which the barrier latency and the collectives' rounds share.

/// The contiguous share `[lo, hi)` of `ranks` simulated ranks that process `me` of `procs`
/// simulates (no overflow for any rank count).
pub fn share(ranks: u64, procs: u64, me: u64) -> (u64, u64) {
    let at = |i: u64| (u128::from(ranks) * u128::from(i) / u128::from(procs.max(1))) as u64;
    (at(me), at(me + 1))
}

/// The fewest states a parallel pass hands one worker at a time: fewer cost more in hand-over
/// than they save.
pub const MIN_CHUNK: usize = 1024;

/// States per chunk of a parallel pass over `states` states: several chunks per worker, so that
/// a worker slowed by other work on the machine does not hold the pass, and at least
/// [`MIN_CHUNK`].
pub(crate) fn chunk_of(states: usize) -> usize {
    (states / (rayon::current_num_threads().max(1) * 8)).max(MIN_CHUNK)
}

/// `ceil(log2 n)`, 0 for n ≤ 1.
pub(crate) fn ceil_log2(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}
