//! Summaries of a sample of numbers, shared by every crate that summarises: quantiles (linear
//! interpolation between order statistics), mean and standard deviation (two-pass, or running
//! with [`Moments`]), the [`Spread`] of a sample, 95 % confidence intervals (Student's t and
//! normal), and the bounded-memory [`DetourHistogram`] of run-times (an [`hdrhistogram`] with 3
//! significant digits: every quantile within 0.1 % of the exact order statistic).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Two-sided 95 % quantile of the standard normal distribution (z₀.₉₇₅).
pub(crate) const Z975: f64 = 1.959_964;

/// Quantile `q` (0..=1) of sorted `v` by linear interpolation between order statistics
/// (Hyndman–Fan type 7); 0 for an empty sample.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Median of `v` (sorted in place): the middle value, or the mean of the two middle values;
/// 0 for an empty sample.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_unstable_by(f64::total_cmp);
    quantile(v, 0.5)
}

/// Mean of `v`; `None` for an empty sample.
pub fn mean(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        None
    } else {
        Some(v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// Mean from a running sum of `n` values; NaN for n = 0.
pub fn mean_of_sum(sum: f64, n: u64) -> f64 {
    if n == 0 {
        f64::NAN
    } else {
        sum / n as f64
    }
}

/// Mean and sample variance (n − 1; 0 for one value) of `v`, two-pass; `None` when empty.
pub fn mean_variance(v: &[f64]) -> Option<(f64, f64)> {
    let m = mean(v)?;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
    } else {
        0.0
    };
    Some((m, var))
}

/// Two-sided 95 % quantile of Student's t with `df` degrees of freedom (t₀.₉₇₅,df): the
/// table for df ≤ 30, the Cornish–Fisher expansion (error < 10⁻⁴) above, NaN for df = 0.
pub fn t975(df: u64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => TABLE[df as usize - 1],
        _ => {
            let z = Z975;
            let v = df as f64;
            z + (z.powi(3) + z) / (4.0 * v)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * v * v)
                + (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z)
                    / (384.0 * v.powi(3))
        }
    }
}

/// Mean of `v` with the half-width of its 95 % t-interval, t₀.₉₇₅,ₙ₋₁ · √(s²/n); the mean is
/// NaN for an empty sample, the half-width NaN for fewer than two values.
pub fn mean_ci95(v: &[f64]) -> (f64, f64) {
    match mean_variance(v) {
        None => (f64::NAN, f64::NAN),
        Some((m, _)) if v.len() < 2 => (m, f64::NAN),
        Some((m, var)) => {
            let n = v.len() as f64;
            (m, t975(v.len() as u64 - 1) * (var / n).sqrt())
        }
    }
}

/// Variance of the mean of `n` values of standard deviation `sd`, s²/n (0 for n = 0: a
/// reference taken as exact).
pub fn variance_of_mean(sd: f64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        sd * sd / n as f64
    }
}

/// Half-width of the normal 95 % interval of a difference of two independent means,
/// z₀.₉₇₅ · √(s_a²/n_a + s_b²/n_b); each argument is (sd, n).
pub fn difference_ci95(a: (f64, u64), b: (f64, u64)) -> f64 {
    Z975 * (variance_of_mean(a.0, a.1) + variance_of_mean(b.0, b.1)).sqrt()
}

/// Running count, mean and variance (Welford), constant memory.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    /// Adds one value.
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean; NaN when nothing was added.
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.mean
        }
    }

    /// Sample standard deviation (n − 1); 0 for fewer than two values.
    pub fn sd(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

/// Summary of a sample of durations, ns.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Spread {
    /// Sample size.
    pub samples: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Standard deviation (n − 1).
    pub sd_ns: f64,
    /// 10th percentile.
    pub p10_ns: f64,
    /// Median.
    pub median_ns: f64,
    /// 90th percentile.
    pub p90_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Largest value.
    pub max_ns: f64,
}

impl Spread {
    /// Summarises `values` (any order); all zero for an empty sample.
    pub fn of(values: &[f64]) -> Spread {
        let Some((mean, var)) = mean_variance(values) else {
            return Spread::default();
        };
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Spread {
            samples: v.len() as u64,
            mean_ns: mean,
            sd_ns: var.sqrt(),
            p10_ns: quantile(&v, 0.10),
            median_ns: quantile(&v, 0.50),
            p90_ns: quantile(&v, 0.90),
            p99_ns: quantile(&v, 0.99),
            max_ns: v[v.len() - 1],
        }
    }
}

/// Largest run-time the histogram buckets (one hour, ns); longer ones count in its last bucket
/// (`min_ns`, `max_ns`, `sum_ns` and the quantiles' clamp stay exact).
const HIST_MAX_NS: u64 = 3_600_000_000_000;
/// Significant digits of the histogram.
const SIGFIG: u8 = 3;
/// Run-time limits of the `under` counts, ns: 1, 5 and 14 µs.
pub(crate) const UNDER_LIMITS_NS: [u64; 3] = [1_000, 5_000, 14_000];

/// Running statistics of detour run-times in bounded memory: exact count, sum, min, max and
/// shares under 1/5/14 µs; quantiles and the MAD from the histogram (within 0.1 %). Recording
/// allocates nothing.
#[derive(Debug, Clone)]
pub struct DetourHistogram {
    hist: Histogram<u64>,
    /// Run-times recorded.
    pub count: u64,
    /// Sum of recorded run-times, ns (saturating).
    pub sum_ns: u64,
    /// Shortest recorded run-time, ns (exact; 0 when empty).
    pub min_ns: u64,
    /// Longest recorded run-time, ns (exact).
    pub max_ns: u64,
    /// Run-times shorter than 1 µs, 5 µs and 14 µs ([`UNDER_LIMITS_NS`]).
    pub under: [u64; 3],
}

impl Default for DetourHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl DetourHistogram {
    /// Empty statistics.
    pub fn new() -> Self {
        DetourHistogram {
            hist: Histogram::new_with_bounds(1, HIST_MAX_NS, SIGFIG)
                .expect("valid histogram bounds"),
            count: 0,
            sum_ns: 0,
            min_ns: 0,
            max_ns: 0,
            under: [0; 3],
        }
    }

    /// Statistics of every run-time of `runs`.
    pub fn of(runs: impl IntoIterator<Item = u64>) -> Self {
        let mut h = Self::new();
        for r in runs {
            h.record(r);
        }
        h
    }

    /// Adds one run-time, ns.
    #[inline]
    pub fn record(&mut self, run_ns: u64) {
        self.hist.saturating_record(run_ns.min(HIST_MAX_NS));
        self.min_ns = if self.count == 0 {
            run_ns
        } else {
            self.min_ns.min(run_ns)
        };
        self.count += 1;
        self.sum_ns = self.sum_ns.saturating_add(run_ns);
        self.max_ns = self.max_ns.max(run_ns);
        for (slot, limit) in self.under.iter_mut().zip(UNDER_LIMITS_NS) {
            if run_ns < limit {
                *slot += 1;
            }
        }
    }

    /// Adds every run-time `other` recorded: the same statistics as recording them here one by
    /// one (histogram counts, count, sum, min, max and the shares under the limits add up).
    pub fn merge(&mut self, other: &DetourHistogram) {
        if other.count == 0 {
            return;
        }
        // Both histograms have the bounds of `new`, so every value of `other` fits.
        self.hist
            .add(&other.hist)
            .expect("histograms of one set of bounds add up");
        self.min_ns = if self.count == 0 {
            other.min_ns
        } else {
            self.min_ns.min(other.min_ns)
        };
        self.count += other.count;
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        for (slot, n) in self.under.iter_mut().zip(other.under) {
            *slot += n;
        }
    }

    /// Share of recorded run-times under each of [`UNDER_LIMITS_NS`]; 0 when empty.
    pub fn under_shares(&self) -> [f64; 3] {
        self.under.map(|n| {
            if self.count == 0 {
                0.0
            } else {
                n as f64 / self.count as f64
            }
        })
    }

    /// Mean run-time, ns; 0 when empty.
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// Run-time at quantile `q` (0..=1), ns (within 0.1 %, never outside [min, max]); 0 when
    /// empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            0
        } else {
            // The histogram reports a bucket's upper edge.
            self.hist
                .value_at_quantile(q)
                .clamp(self.min_ns, self.max_ns)
        }
    }

    /// The run-time at each of `ranks` (0-based, ascending: the rank-th shortest), ns: the
    /// upper edge of the histogram bucket that holds it, within 0.1 % of the exact order
    /// statistic and never outside [min, max]; a rank past the last is the longest.
    pub fn at_ranks(&self, ranks: &[u64]) -> Vec<u64> {
        let mut out = Vec::with_capacity(ranks.len());
        let mut buckets = self.hist.iter_recorded();
        let mut below = 0u64;
        let mut edge = self.max_ns;
        for &r in ranks {
            while below <= r {
                match buckets.next() {
                    Some(v) => {
                        below += v.count_since_last_iteration();
                        edge = v.value_iterated_to();
                    }
                    None => {
                        edge = self.max_ns;
                        break;
                    }
                }
            }
            out.push(edge.clamp(self.min_ns, self.max_ns));
        }
        out
    }

    /// Median absolute deviation of the run-times from their median, ns (within 0.1 % of the
    /// run-times; never above max − min); 0 when empty.
    pub fn mad(&self) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let med = self.quantile(0.5);
        let mut dev: Vec<(u64, u64)> = self
            .hist
            .iter_recorded()
            .map(|v| {
                let at = v.value_iterated_to().clamp(self.min_ns, self.max_ns);
                (at.abs_diff(med), v.count_at_value())
            })
            .collect();
        dev.sort_unstable();
        let half = self.count.div_ceil(2);
        let mut seen = 0;
        for (d, n) in dev {
            seen += n;
            if seen >= half {
                return d.min(self.max_ns - self.min_ns);
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every order statistic from the histogram lies within 0.1 % of the exact one (its
    /// bucket's upper edge, 3 significant digits), inside [min, max]; past the last rank, the
    /// longest.
    #[test]
    fn order_statistics_from_the_histogram_are_within_a_thousandth() {
        let runs: Vec<u64> = (0..20_000u64)
            .map(|i| 50 + (i * 7919 % 20_000) * (1 + i % 7) * 13)
            .collect();
        let h = DetourHistogram::of(runs.iter().copied());
        let mut sorted = runs.clone();
        sorted.sort_unstable();
        let ranks: Vec<u64> = (0..sorted.len() as u64)
            .step_by(37)
            .chain([19_999])
            .collect();
        let got = h.at_ranks(&ranks);
        for (&r, &v) in ranks.iter().zip(&got) {
            let exact = sorted[r as usize];
            assert!(
                v >= exact && (v - exact) as f64 <= 1e-3 * exact as f64,
                "rank {r}: {v} for {exact}"
            );
        }
        assert_eq!(got[0], sorted[0].max(h.min_ns));
        assert_eq!(*got.last().unwrap(), h.max_ns);
        assert_eq!(h.at_ranks(&[20_000, 30_000]), vec![h.max_ns, h.max_ns]);
        assert_eq!(DetourHistogram::new().at_ranks(&[0]), vec![0]);
    }

    #[test]
    fn quantiles_interpolate_between_order_statistics() {
        let v: Vec<f64> = (0..=100).map(f64::from).collect();
        for q in [0.0, 0.1, 0.25, 0.5, 0.9, 0.99, 1.0] {
            assert!((quantile(&v, q) - 100.0 * q).abs() < 1e-9);
        }
        // 1, 2, 3, 4: position 0.5 · 3 = 1.5 → 2.5; 0.9 · 3 = 2.7 → 3.7.
        let w = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&w, 0.5), 2.5);
        assert!((quantile(&w, 0.9) - 3.7).abs() < 1e-12);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn mean_variance_and_moments_agree_with_the_closed_form() {
        // 1..=5: mean 3, s² = 10 / 4 = 2.5.
        let v = [4.0, 1.0, 3.0, 2.0, 5.0];
        assert_eq!(mean(&v), Some(3.0));
        assert_eq!(mean(&[]), None);
        assert_eq!(mean_of_sum(15.0, 5), 3.0);
        assert!(mean_of_sum(0.0, 0).is_nan());
        assert_eq!(mean_variance(&v), Some((3.0, 2.5)));
        assert_eq!(mean_variance(&[7.0]), Some((7.0, 0.0)));
        let mut m = Moments::default();
        assert!(m.mean().is_nan());
        v.iter().for_each(|&x| m.add(x));
        assert_eq!(m.count(), 5);
        assert!((m.mean() - 3.0).abs() < 1e-12);
        assert!((m.sd() - 2.5f64.sqrt()).abs() < 1e-12);
        let mut one = Moments::default();
        one.add(9.0);
        assert_eq!(one.sd(), 0.0);
    }

    #[test]
    fn spread_summarises_a_known_sample() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!(
            (s.samples, s.mean_ns, s.median_ns, s.max_ns),
            (5, 3.0, 3.0, 5.0)
        );
        assert!((s.sd_ns - 2.5f64.sqrt()).abs() < 1e-12);
        // p10: position 0.4 → 1.4; p90: position 3.6 → 4.6.
        assert!((s.p10_ns - 1.4).abs() < 1e-12 && (s.p90_ns - 4.6).abs() < 1e-12);
        assert_eq!(Spread::of(&[]), Spread::default());
        assert_eq!(Spread::of(&[7.0]).sd_ns, 0.0);
    }

    #[test]
    fn t_quantiles_meet_the_table_and_tend_to_z() {
        assert_eq!(t975(1), 12.706);
        assert!(t975(0).is_nan());
        assert!((t975(31) - 2.0395).abs() < 2e-4, "{}", t975(31));
        assert!((t975(120) - 1.9799).abs() < 2e-4, "{}", t975(120));
        assert!((t975(1_000_000) - 1.96).abs() < 1e-3);
    }

    #[test]
    fn intervals_follow_their_closed_forms() {
        // 3, 3, 3, 4: mean 3.25, s² = 0.25, t₀.₉₇₅,₃ = 3.182: 3.182 · √(0.25 / 4) = 0.7955.
        let (m, h) = mean_ci95(&[3.0, 3.0, 3.0, 4.0]);
        assert_eq!(m, 3.25);
        assert!((h - 0.7955).abs() < 1e-12, "{h}");
        let (m, h) = mean_ci95(&[2.0]);
        assert!(m == 2.0 && h.is_nan());
        assert!(mean_ci95(&[]).0.is_nan());
        // 1.96 · √(4/100 + 9/100); n = 0 takes its side as exact.
        assert!((difference_ci95((2.0, 100), (3.0, 100)) - Z975 * 0.13f64.sqrt()).abs() < 1e-12);
        assert!((difference_ci95((2.0, 100), (3.0, 0)) - Z975 * 0.2).abs() < 1e-12);
    }

    #[test]
    fn the_detour_histogram_matches_exact_values() {
        // 1..=1000 µs in ns: median 500 µs, p99 990 µs, MAD 250 µs (within 0.1 %).
        let s = DetourHistogram::of((1..=1000u64).map(|i| i * 1000));
        let near = |a: u64, b: u64| (a as f64 - b as f64).abs() <= b as f64 * 0.001 + 1.0;
        assert!(near(s.quantile(0.5), 500_000), "{}", s.quantile(0.5));
        assert!(near(s.quantile(0.99), 990_000), "{}", s.quantile(0.99));
        assert!(near(s.mad(), 250_000), "{}", s.mad());
        assert_eq!((s.min_ns, s.max_ns, s.count), (1_000, 1_000_000, 1000));
        assert_eq!(s.sum_ns, 500_500_000);
        assert_eq!(s.mean_ns(), 500_500.0);
        assert_eq!(s.under, [0, 4, 13]);
        assert_eq!(s.under_shares(), [0.0, 0.004, 0.013]);
        // A constant sample: every quantile is the value, the MAD is 0 (bucket edges clamped).
        let c = DetourHistogram::of([123_457u64; 10]);
        assert_eq!(
            (c.quantile(0.0), c.quantile(0.9999), c.mad()),
            (123_457, 123_457, 0)
        );
        // Zero run-times are recorded as zero; beyond one hour the max and sum stay exact.
        let z = DetourHistogram::of([0, 0, 0, 7_200_000_000_000]);
        assert_eq!(
            (z.quantile(0.5), z.min_ns, z.max_ns),
            (0, 0, 7_200_000_000_000)
        );
        assert_eq!(z.sum_ns, 7_200_000_000_000);
        let empty = DetourHistogram::new();
        assert_eq!(
            (empty.quantile(0.5), empty.mad(), empty.mean_ns()),
            (0, 0, 0.0)
        );
    }
}
