//! The distribution of one compute interval: log-linear buckets of fixed layout (values below
//! 128 exact, then 64 buckets per power of two: a bucket spans at most 1/64 of its values, so a
//! quantile read from it is within 1.6 % of the true one), counted in place.
//!
//! Why not `hdrhistogram`: a rank's counts live in a file mapped into the program (`record`), so
//! that nothing recorded is lost when the rank dies; they must be a plain array of fixed size in
//! that mapping, which `hdrhistogram`'s heap-backed counts cannot be. The same bucket function
//! serves the tick counts of a rank and the ns counts of the job ([`LogHistogram`]).

use serde::{Deserialize, Serialize};

/// Sub-buckets per power of two.
const SUB: u64 = 64;
/// Largest power of two counted apart: values from 2^48 on share the last bucket.
const TOP_EXPONENT: u32 = 48;
/// Buckets of the layout.
pub const BUCKETS: usize = (2 * SUB + (TOP_EXPONENT as u64 - 7) * SUB) as usize;

/// The bucket of `v`.
#[inline]
pub fn bucket(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    if e >= TOP_EXPONENT {
        return BUCKETS - 1;
    }
    let shift = e - 6;
    (2 * SUB + u64::from(e - 7) * SUB + ((v >> shift) - SUB)) as usize
}

/// The values `[low, high)` of bucket `i`.
pub fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB {
        return (i, i + 1);
    }
    let k = i - 2 * SUB;
    let e = 7 + k / SUB;
    let m = SUB + k % SUB;
    let shift = e - 6;
    (m << shift, (m + 1) << shift)
}

/// Counts per bucket, on the heap (the job's distributions, in ns).
///
/// ```
/// use jitter_profile::histogram::LogHistogram;
///
/// let mut h = LogHistogram::default();
/// h.add(1_000, 99); // 99 calls of 1 µs
/// h.add(1_000_000, 1); // one of 1 ms
/// assert_eq!(h.count(), 100);
/// // each quantile is its bucket's middle: within a bucket's width of the value
/// let median = h.quantile(0.5).unwrap() as f64;
/// assert!((median - 1_000.0).abs() < 0.05 * 1_000.0);
/// assert!(h.quantile(1.0).unwrap() > 900_000);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LogHistogram {
    counts: Vec<u64>,
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram {
            counts: vec![0; BUCKETS],
        }
    }
}

impl LogHistogram {
    /// Adds `n` values of `v`.
    pub fn add(&mut self, v: u64, n: u64) {
        self.counts[bucket(v)] += n;
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q`-quantile (0 ≤ q ≤ 1), at its bucket's middle; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds(i);
                return Some(lo + (hi - lo) / 2);
            }
        }
        None
    }

    /// Mean and standard deviation at the buckets' middles.
    pub(crate) fn moments(&self) -> Option<(f64, f64)> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let mid = |i: usize| {
            let (lo, hi) = bounds(i);
            (lo + (hi - lo) / 2) as f64
        };
        let it = || self.counts.iter().enumerate().filter(|(_, c)| **c > 0);
        let mean = it().map(|(i, &c)| mid(i) * c as f64).sum::<f64>() / n as f64;
        let var = it()
            .map(|(i, &c)| (mid(i) - mean).powi(2) * c as f64)
            .sum::<f64>()
            / (n.max(2) - 1) as f64;
        Some((mean, var.sqrt()))
    }

    /// The non-empty buckets as `[low, high, count]`.
    pub fn sparse(&self) -> Vec<[u64; 3]> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, &c)| {
                let (lo, hi) = bounds(i);
                [lo, hi, c]
            })
            .collect()
    }
}

/// One compute interval's distribution as the profile file keeps it (ns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Intervals counted.
    pub count: u64,
    /// Exact mean (from the sum of the intervals), ns.
    pub mean_ns: f64,
    /// Standard deviation at the buckets' middles, ns.
    pub sd_ns: f64,
    /// Quantiles at their buckets' middles (within 1.6 %), ns.
    pub p01_ns: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// The largest bucket's middle, ns.
    pub max_ns: u64,
    /// Non-empty buckets: `[low ns, high ns (exclusive), count]`.
    pub buckets: Vec<[u64; 3]>,
}

impl Distribution {
    /// The distribution of `h` with the exact mean `mean_ns`; `None` when empty.
    pub fn of(h: &LogHistogram, mean_ns: f64) -> Option<Distribution> {
        let q = |x| h.quantile(x);
        Some(Distribution {
            count: h.count(),
            mean_ns,
            sd_ns: h.moments()?.1,
            p01_ns: q(0.01)?,
            p50_ns: q(0.5)?,
            p90_ns: q(0.9)?,
            p99_ns: q(0.99)?,
            max_ns: q(1.0)?,
            buckets: h.sparse(),
        })
    }

    /// Half-width of the mean's 95 % interval (normal approximation; the counts are large).
    pub(crate) fn mean_ci95_ns(&self) -> f64 {
        1.96 * self.sd_ns / (self.count.max(1) as f64).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_values_and_are_at_most_a_64th_wide() {
        let mut expect_low = 0;
        for i in 0..BUCKETS {
            let (lo, hi) = bounds(i);
            assert_eq!(lo, expect_low, "bucket {i}");
            assert!(hi > lo);
            if lo >= 128 {
                assert!(
                    (hi - lo) as f64 / lo as f64 <= 1.0 / 64.0 + 1e-12,
                    "bucket {i}"
                );
            }
            assert_eq!(bucket(lo), i);
            assert_eq!(bucket(hi - 1), i);
            expect_low = hi;
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_and_moments_of_a_uniform_sample_are_within_a_bucket() {
        let mut h = LogHistogram::default();
        for v in 1_000..=2_000u64 {
            h.add(v * 1000, 1);
        }
        let near = |got: u64, want: f64| (got as f64 / want - 1.0).abs() <= 1.0 / 64.0;
        assert!(near(h.quantile(0.5).unwrap(), 1_500_000.0));
        assert!(near(h.quantile(0.9).unwrap(), 1_900_000.0));
        assert!(near(h.quantile(1.0).unwrap(), 2_000_000.0));
        let (mean, sd) = h.moments().unwrap();
        assert!((mean / 1_500_000.0 - 1.0).abs() < 0.01, "{mean}");
        // Uniform on [1, 2] ms: sd = 1 ms / √12.
        assert!((sd / (1e6 / 12f64.sqrt()) - 1.0).abs() < 0.02, "{sd}");
        assert_eq!(LogHistogram::default().quantile(0.5), None);
    }
}
