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

mod period;
mod segments;

#[cfg(all(test, feature = "periodogram"))]
pub(crate) use period::Occurrences;
pub use period::Period;
pub(crate) use segments::BinnedSegment;
pub use segments::Segments;

/// A way to find the periods of binned occurrences: `periods_binned` (the FFT, feature
/// `periodogram`), passed where periods are wanted (`attribution::Scope::periods`,
/// `tally::Plan::periods`), so that code that wants none never reaches the FFT.
pub(crate) type FindPeriods = fn(&[BinnedSegment]) -> Vec<Period>;

// The spectrum itself (rustfft): only with the `periodogram` feature, which the collector and
// the libraries loaded into MPI jobs leave out.
#[cfg(feature = "periodogram")]
mod spectrum;
#[cfg(feature = "periodogram")]
pub use spectrum::{periods, periods_binned};
