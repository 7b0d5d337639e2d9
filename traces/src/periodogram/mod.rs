//! Periods of a point process (a source's occurrence times): the Schuster periodogram of the
//! binned impulse series, its significant peaks, and their grouping into harmonic families.
//!
//! Method: the occurrences of each CPU are binned into an impulse series of `N` bins of width
//! `dt` = [`MIN_BIN_NS`] (`N` a power of two ≤ [`MAX_BINS`]; longer windows are cut into equal
//! segments, at most [`MAX_SEGMENTS`] of them analysed), the mean is removed, a Hann window
//! applied, and the power spectra of all CPUs and segments are summed (CPUs are not phase-locked,
//! so powers, not amplitudes, add, and so do their Poisson levels). The power is normalised by its expectation for a Poisson
//! process of the same count, `n · Σw²`: the spectrum of any simple point process tends to its
//! rate at high frequencies, and for Poisson arrivals each normalised bin is Exp(1)-distributed.
//! A peak is significant when its normalised power exceeds `ln(M / p)` for `M` tested
//! frequencies and a false-alarm probability `p` = [`FALSE_ALARM`] per source (a sum over
//! several CPUs is Gamma-distributed with a lighter tail, so the bound stays conservative).
//! A strictly periodic train of `n` occurrences reaches `n · (Σw)² / (N Σw²)` ≈ `2n/3`.
//!
//! An impulse train of period `P` has lines at every `m / P`; they are grouped: significant peaks
//! are taken in ascending frequency, the lowest not yet explained is a fundamental, and every
//! peak within the tolerance of one of its multiples is its harmonic. So 10 ms reports as 10 ms,
//! not also as 5, 3.33 … ms. A family whose lowest peak is itself the m-th harmonic of a weaker
//! train (a few occurrences among many: its fundamental under the threshold, some harmonics
//! over it) moves down to that train's fundamental when the harmonics there that are not
//! harmonics of the peak carry lines (see `subharmonic`). A peak must be the largest within ±[`NEIGHBOURHOOD`] of its
//! frequency (and at least ±4 bins), which drops the window's side lobes, and a period must fit
//! at least [`MIN_CYCLES`] times into the window.

use serde::Serialize;

/// Narrowest bin of the impulse series, ns (periods below about 4 bins are not resolved).
pub const MIN_BIN_NS: u64 = 100_000;

/// Most bins of one impulse series: a window longer than `MAX_BINS · MIN_BIN_NS` (26.2 s) is
/// cut into equal segments whose powers add, as CPUs' do (Bartlett's method).
pub const MAX_BINS: usize = 1 << 18;

/// Most segments analysed per source (evenly chosen among all CPUs' segments): 16 segments
/// of 26 s hold thousands of cycles of any period resolved, and bound the cost of a long run.
pub const MAX_SEGMENTS: usize = 16;

/// Probability that a source without any period reports one.
pub const FALSE_ALARM: f64 = 1e-3;

/// Relative half-width in frequency within which a peak must be the largest.
pub const NEIGHBOURHOOD: f64 = 0.02;

/// A period must fit this many times into the observation window.
pub const MIN_CYCLES: f64 = 8.0;

/// Fewest occurrences analysed.
pub const MIN_OCCURRENCES: usize = 8;

/// Most periods reported per source.
pub const MAX_PERIODS: usize = 3;

/// One harmonic family of the periodogram.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Period {
    /// The fundamental period, ns (interpolated between frequency bins).
    pub period_ns: f64,
    /// Normalised power of the fundamental (1 = Poisson level).
    pub power: f64,
    /// Significant peaks in the family, the fundamental included.
    pub harmonics: u32,
}

/// The occurrence times of one CPU and its observation window, ns.
#[derive(Debug, Clone, Copy)]
pub struct Occurrences<'a> {
    /// Start of the window.
    pub begin_ns: u64,
    /// End of the window.
    pub end_ns: u64,
    /// Occurrence times (any order; those outside the window are ignored).
    pub times_ns: &'a [u64],
}

// The spectrum itself (rustfft): only with the `periodogram` feature, which the collector and
// the libraries loaded into MPI jobs leave out.
#[cfg(feature = "periodogram")]
mod spectrum;
#[cfg(feature = "periodogram")]
pub use spectrum::periods;
