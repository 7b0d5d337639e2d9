//! What a periodogram is given and what it finds: the occurrence times of one CPU
//! ([`Occurrences`]), a harmonic family ([`Period`]), and the constants of the method (see the
//! parent module's doc). The spectrum's own constants and input exist with the `periodogram`
//! feature only, as the spectrum does.

use serde::Serialize;

/// Narrowest bin of the impulse series, ns (periods below about 4 bins are not resolved).
pub(crate) const MIN_BIN_NS: u64 = 100_000;

/// Most bins of one impulse series: a window longer than `MAX_BINS · MIN_BIN_NS` (26.2 s) is
/// cut into equal segments whose powers add, as CPUs' do (Bartlett's method).
pub(crate) const MAX_BINS: usize = 1 << 18;

/// Most segments analysed per source (evenly chosen among all CPUs' segments): 16 segments
/// of 26 s hold thousands of cycles of any period resolved, and bound the cost of a long run.
pub(crate) const MAX_SEGMENTS: usize = 16;

/// Probability that a source without any period reports one.
#[cfg(feature = "periodogram")]
pub(crate) const FALSE_ALARM: f64 = 1e-3;

/// Relative half-width in frequency within which a peak must be the largest.
#[cfg(feature = "periodogram")]
pub(crate) const NEIGHBOURHOOD: f64 = 0.02;

/// A period must fit this many times into the observation window.
#[cfg(feature = "periodogram")]
pub(crate) const MIN_CYCLES: f64 = 8.0;

/// Fewest occurrences analysed.
#[cfg(feature = "periodogram")]
pub(crate) const MIN_OCCURRENCES: usize = 8;

/// Most periods reported per source.
#[cfg(feature = "periodogram")]
pub(crate) const MAX_PERIODS: usize = 3;

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
#[cfg(feature = "periodogram")]
#[derive(Debug, Clone, Copy)]
pub struct Occurrences<'a> {
    /// Start of the window.
    pub begin_ns: u64,
    /// End of the window.
    pub end_ns: u64,
    /// Occurrence times (any order; those outside the window are ignored).
    pub times_ns: &'a [u64],
}
