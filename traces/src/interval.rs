//! The 95 % interval of a mean that a simulation estimates from independent *draws*, each a run
//! of autocorrelated *phases* ([`DrawSet`]), and the batch means of one run ([`BatchMeans`]).
//!
//! **The nested model.** Draw d (its own offsets: the stretch of trace each rank replays, its
//! resync points) runs n_d phases with values x_d,1 … x_d,n_d. Its mean is
//! x̄_d = μ + a_d + ē_d: a_d (variance σ_a²) is what the draw's offsets add — the stretch of
//! trace replayed, and under `sync none` how the ranks' noise lines up, which no number of
//! phases averages away — and ē_d is the error of its phases, autocorrelated within the draw
//! (variance ≈ τ²/n_d, τ² the phases' long-run variance). Draws are independent (their own
//! seeds). The estimate is the phase-weighted mean x̄ = Σ w_d x̄_d, w_d = n_d / Σ n (what pooling
//! every draw's phases gives). Its variance Σ w_d² (σ_a² + τ²/n_d) is estimated from the draws'
//! own dispersion (the cluster-sampling estimator of a ratio mean)
//!
//! ```text
//!   V̂ = D / (D − 1) · Σ w_d² (x̄_d − x̄)²        (= s² / D for equal weights)
//! ```
//!
//! and the interval is x̄ ± t₀.₉₇₅,D−1 · √V̂. Each draw mean carries both sources of error, so
//! V̂ is unbiased (equal weights) whatever the phases' correlation within a draw and however
//! large the draw effect: nothing is assumed of either, which is why it is the one honest
//! estimator here. Degrees of freedom: D − 1, the independent draws (exact for normal draw
//! means; a draw mean averages many phases and ranks, which makes it close to normal unless a
//! handful of detours drive it, see `docs/VALIDATION.md` for the coverage measured).
//!
//! Estimators that use the phases within a draw as if they were the units of sampling are not
//! honest here: the per-phase variance ignores the autocorrelation (a periodic trace makes
//! phases far from independent), and batch means within draws, pooled over draws, ignore σ_a²
//! (two ranks at fixed offsets on a periodic trace keep their alignment for the whole draw).
//! `jitter-predict`'s coverage test shows both failing where this one covers.
//!
//! **One draw** cannot show σ_a²: its interval comes from the batch means of its phases
//! ([`BatchMeans`]: between [`MIN_BATCHES`] and 2 × [`MIN_BATCHES`] − 1 batches of equal size,
//! the size doubling as the run grows, constant memory; df = batches − 1) and covers the phases
//! only — [`Source::Batches`] says so wherever it is shown.

use serde::{Deserialize, Serialize};

use crate::summary::t975;

/// Fewest complete batches the batch means keep once the run has that many values: the count
/// lies in [`MIN_BATCHES`, 2 · `MIN_BATCHES`) (Schmeiser 1982: 10 to 30 batches), their size
/// doubling as the run grows.
pub const MIN_BATCHES: usize = 16;

/// Where an interval's variance came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The dispersion of independent draws: the phases and the stretch of trace.
    Draws,
    /// The batch means of one draw's phases: the phases only, not the stretch of trace.
    Batches,
}

impl Source {
    /// A short name for tables (`draws`, `phases only`).
    pub fn label(self) -> &'static str {
        match self {
            Source::Draws => "draws",
            Source::Batches => "phases only",
        }
    }
}

/// A mean with the half-width of its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanInterval {
    /// The estimate.
    pub mean: f64,
    /// Half-width of the 95 % interval (same units); NaN when it cannot be estimated.
    pub half_width: f64,
    /// Degrees of freedom of the t quantile (0 when none).
    pub df: u64,
    /// Where the variance came from.
    pub source: Source,
}

impl MeanInterval {
    /// The interval's ends, `[mean − h, mean + h]`.
    pub fn bounds(&self) -> [f64; 2] {
        [self.mean - self.half_width, self.mean + self.half_width]
    }

    /// True when `x` lies in the interval (false when its half-width is NaN).
    pub fn covers(&self, x: f64) -> bool {
        (x - self.mean).abs() <= self.half_width
    }

    /// The same interval under the affine map `x ↦ a + b·x` (b ≠ 0; e.g. a mean time into a
    /// slowdown in percent).
    pub fn mapped(&self, a: f64, b: f64) -> MeanInterval {
        MeanInterval {
            mean: a + b * self.mean,
            half_width: b.abs() * self.half_width,
            ..*self
        }
    }
}

/// Batch means of one series in constant memory: complete batches of `size` values (between
/// [`MIN_BATCHES`] and 2 · [`MIN_BATCHES`] − 1 of them once the series is that long; when the
/// last slot fills, neighbours merge and the size doubles), and the open batch. Adding a value
/// allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchMeans {
    sums: [f64; 2 * MIN_BATCHES],
    full: usize,
    size: u64,
    open_sum: f64,
    open_n: u64,
    n: u64,
    total: f64,
    squares: f64,
}

impl Default for BatchMeans {
    fn default() -> Self {
        BatchMeans {
            sums: [0.0; 2 * MIN_BATCHES],
            full: 0,
            size: 1,
            open_sum: 0.0,
            open_n: 0,
            n: 0,
            total: 0.0,
            squares: 0.0,
        }
    }
}

impl BatchMeans {
    /// Adds the next value of the series.
    #[inline]
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        self.total += x;
        self.squares += x * x;
        self.open_sum += x;
        self.open_n += 1;
        if self.open_n == self.size {
            self.sums[self.full] = self.open_sum;
            self.full += 1;
            self.open_sum = 0.0;
            self.open_n = 0;
            if self.full == self.sums.len() {
                for i in 0..MIN_BATCHES {
                    self.sums[i] = self.sums[2 * i] + self.sums[2 * i + 1];
                }
                self.full = MIN_BATCHES;
                self.size *= 2;
            }
        }
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean of every value added; NaN when empty.
    pub fn mean(&self) -> f64 {
        crate::summary::mean_of_sum(self.total, self.n)
    }

    /// Values per complete batch.
    #[cfg(test)]
    pub(crate) fn batch_size(&self) -> u64 {
        self.size
    }

    /// The complete batches' means, in order.
    pub(crate) fn batch_means(&self) -> impl Iterator<Item = f64> + '_ {
        let m = self.size as f64;
        self.sums[..self.full].iter().map(move |s| s / m)
    }

    /// The mean of every value with its 95 % interval from the complete batches: with b batches
    /// of m values and s_b² their sample variance, Var(mean) ≈ s_b² · m / n and the half-width
    /// is t₀.₉₇₅,b−1 · √(s_b² · m / n) (the open batch counts in the mean, not the variance).
    /// NaN half-width under two complete batches.
    pub fn interval(&self) -> MeanInterval {
        let mean = self.mean();
        let b = self.full;
        if b < 2 {
            return MeanInterval {
                mean,
                half_width: f64::NAN,
                df: 0,
                source: Source::Batches,
            };
        }
        let means: Vec<f64> = self.batch_means().collect();
        let (_, var) = crate::summary::mean_variance(&means).unwrap_or((0.0, 0.0));
        let v = var * self.size as f64 / self.n as f64;
        MeanInterval {
            mean,
            half_width: t975(b as u64 - 1) * v.sqrt(),
            df: b as u64 - 1,
            source: Source::Batches,
        }
    }
}

impl BatchMeans {
    /// Sample variance of the values themselves (n − 1); NaN under two values.
    pub fn variance(&self) -> f64 {
        if self.n < 2 {
            return f64::NAN;
        }
        let (n, mean) = (self.n as f64, self.mean());
        ((self.squares - n * mean * mean) / (n - 1.0)).max(0.0)
    }

    /// The interval the values would have if they were independent, t₀.₉₇₅,n−1 · s/√n with s
    /// the values' own standard deviation: what the batch means correct for. Not an interval
    /// of a simulated mean (phases are autocorrelated); kept to show by how much it errs.
    #[cfg(test)]
    pub(crate) fn naive_interval(&self) -> MeanInterval {
        let mean = self.mean();
        let (n, var) = (self.n as f64, self.variance());
        MeanInterval {
            mean,
            half_width: t975(self.n.saturating_sub(1)) * (var / n).sqrt(),
            df: self.n.saturating_sub(1),
            source: Source::Batches,
        }
    }
}

/// The draws of one estimate: each draw's value (its own mean) and weight (its phases).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DrawSet {
    draws: Vec<(f64, f64)>,
}

impl DrawSet {
    /// No draws yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one draw: its value and its weight (its phases; > 0).
    pub fn add(&mut self, value: f64, weight: f64) {
        self.draws.push((value, weight));
    }

    /// Draws added.
    pub fn len(&self) -> usize {
        self.draws.len()
    }

    /// True without draws.
    pub fn is_empty(&self) -> bool {
        self.draws.is_empty()
    }

    /// The values, in the order added.
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.draws.iter().map(|d| d.0)
    }

    /// The weighted mean with its 95 % interval over the draws (module documentation):
    /// x̄ = Σ w_d x_d / Σ w_d, V̂ = D/(D − 1) · Σ (w_d/W)² (x_d − x̄)², half-width
    /// t₀.₉₇₅,D−1 · √V̂, df D − 1. One draw: NaN half-width (see [`BatchMeans`]); none: NaN.
    pub fn interval(&self) -> MeanInterval {
        let d = self.draws.len();
        let w: f64 = self.draws.iter().map(|x| x.1).sum();
        let mean = if d == 0 || w <= 0.0 {
            f64::NAN
        } else {
            self.draws.iter().map(|x| x.0 * x.1).sum::<f64>() / w
        };
        if d < 2 || !mean.is_finite() {
            return MeanInterval {
                mean,
                half_width: f64::NAN,
                df: 0,
                source: Source::Draws,
            };
        }
        let sum: f64 = (self.draws.iter())
            .map(|&(x, wd)| (wd / w) * (wd / w) * (x - mean) * (x - mean))
            .sum();
        let v = d as f64 / (d - 1) as f64 * sum;
        MeanInterval {
            mean,
            half_width: t975(d as u64 - 1) * v.sqrt(),
            df: d as u64 - 1,
            source: Source::Draws,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_weights_give_the_t_interval_of_the_draws() {
        // 3, 3, 3, 4: mean 3.25, s² = 0.25, t₀.₉₇₅,₃ = 3.182: 3.182 · √(0.25 / 4) = 0.7955.
        let mut s = DrawSet::new();
        for x in [3.0, 3.0, 3.0, 4.0] {
            s.add(x, 100.0);
        }
        let i = s.interval();
        assert_eq!((i.mean, i.df, i.source), (3.25, 3, Source::Draws));
        assert!((i.half_width - 0.7955).abs() < 1e-12, "{i:?}");
        assert!(i.covers(4.0) && !i.covers(4.1));
        assert_eq!(i.bounds(), [3.25 - i.half_width, 3.25 + i.half_width]);
        let one = {
            let mut s = DrawSet::new();
            s.add(2.0, 5.0);
            s.interval()
        };
        assert!(one.mean == 2.0 && one.half_width.is_nan() && !one.covers(2.0));
        assert!(DrawSet::new().interval().mean.is_nan());
    }

    #[test]
    fn unequal_weights_pool_the_phases() {
        // Values 1 and 4 over 100 and 200 phases: pooled mean (100 + 800) / 300 = 3;
        // V̂ = 2 · [(1/3)² · 4 + (2/3)² · 1] = 2 · 8/9 = 16/9; half-width 12.706 · 4/3.
        let mut s = DrawSet::new();
        s.add(1.0, 100.0);
        s.add(4.0, 200.0);
        let i = s.interval();
        assert!((i.mean - 3.0).abs() < 1e-12);
        assert!((i.half_width - 12.706 * 4.0 / 3.0).abs() < 1e-9, "{i:?}");
        // An affine map: SD = 100 · (x − 2) / 2.
        let m = i.mapped(-100.0, 50.0);
        assert!((m.mean - 50.0).abs() < 1e-9 && (m.half_width - 50.0 * i.half_width).abs() < 1e-9);
    }

    #[test]
    fn batch_means_keep_between_16_and_31_batches_of_a_doubling_size() {
        let mut b = BatchMeans::default();
        assert!(b.interval().half_width.is_nan() && b.mean().is_nan());
        for i in 0..32u64 {
            b.add(i as f64);
        }
        // The 32nd value fills the last slot: 16 batches of 2.
        assert_eq!((b.batch_size(), b.batch_means().count()), (2, 16));
        let first: Vec<f64> = b.batch_means().take(2).collect();
        assert_eq!(first, vec![0.5, 2.5]);
        for i in 32..1000u64 {
            b.add(i as f64);
        }
        let k = b.batch_means().count();
        assert!((MIN_BATCHES..2 * MIN_BATCHES).contains(&k), "{k}");
        assert_eq!(b.batch_size(), 32);
        assert_eq!(b.count(), 1000);
        assert!((b.mean() - 499.5).abs() < 1e-9);
        // 31 complete batches of 32 (992 values), 8 open.
        assert_eq!(k, 31);
        // As independent values: 0 … 999 have s² = 1000 · 1001 / 12, so s/√n = √(1001/12).
        let naive = b.naive_interval();
        assert_eq!(naive.df, 999);
        assert!((naive.half_width - t975(999) * (1001.0f64 / 12.0).sqrt()).abs() < 1e-6);
    }

    #[test]
    fn batch_means_follow_their_closed_form() {
        // Alternating 0, 2 in batches of 1 until 31 values: batches 0, 2, 0, 2, … (31 of
        // them: 16 zeros, 15 twos). Mean over the 31 values 30/31; s_b² of the 31 batch
        // means = 31 · (16·15/31²) · 4 / 30; half-width t₃₀ · √(s_b² · 1 / 31).
        let mut b = BatchMeans::default();
        for i in 0..31 {
            b.add(if i % 2 == 0 { 0.0 } else { 2.0 });
        }
        let i = b.interval();
        let var: f64 = 4.0 * 16.0 * 15.0 / 31.0 / 30.0;
        assert_eq!(i.df, 30);
        assert!((i.mean - 30.0 / 31.0).abs() < 1e-12);
        assert!(
            (i.half_width - 2.042 * (var / 31.0).sqrt()).abs() < 1e-12,
            "{i:?}"
        );
        // Once batched by two, the alternation cancels inside every batch: no variance left
        // (the series is periodic; its mean is known to within 1/n, not 1/√n).
        b.add(2.0);
        let j = b.interval();
        assert_eq!((j.df, j.half_width), (15, 0.0));
        assert_eq!(i.source, Source::Batches);
    }
}
