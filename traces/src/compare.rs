//! Comparison of two traces: distance between run-time distributions, noise ratio and rate.
//!
//! # Definitions
//!
//! - **Density** ([`Density`]): a Parzen-window estimate with a Gaussian kernel of the density of
//!   `x = ln(run_ns)` (detours with run 0 are left out). The bandwidth follows Silverman's rule,
//!   `h = 0.9 · min(σ, IQR / 1.34) · n^(-1/5)` (σ when the IQR is 0, and at least
//!   [`MIN_BANDWIDTH`] so that a trace of identical run-times still has a density). The estimate is
//!   evaluated on a grid of [`GRID_POINTS`] points equally spaced in `ln(run)` (log-spaced in
//!   run-time) from `min(x) − 4h` to `max(x) + 4h` over both traces. The sum over detours is
//!   computed by linear binning of the `x` onto the grid followed by a discrete convolution with
//!   the kernel (the standard binned KDE: exact up to O(Δ²) for grid spacing Δ).
//! - **KL divergence** `D(A‖B) = Σ_j P_j ln(P_j / Q_j)` in nats, where `P_j` and `Q_j` are the
//!   densities of A and B at grid point j, each normalised to sum to 1 over the grid. Zero (or
//!   underflowed) densities are handled by adding [`KL_EPSILON`] to every `P_j` and `Q_j` and
//!   renormalising, so the divergence is always finite; with that floor a region where A has mass
//!   and B has none costs about `P ln(P / ε)`. The reverse `D(B‖A)` is reported too.
//! - **KS statistic**: the two-sample Kolmogorov–Smirnov distance `sup_x |F_A(x) − F_B(x)|` of the
//!   empirical distribution functions of the run-times (exact, no grid).
//! - **Noise ratio** and **detour rate**: as in [`crate::stats::Stats`] over all streams; the
//!   differences are B − A.

pub mod kde;
mod streamed;

pub(crate) use kde::log_runs;
pub use kde::{bandwidth, density, Density, Grid, GRID_POINTS, MIN_BANDWIDTH};
pub use streamed::densities;

use serde::{Deserialize, Serialize};

use crate::error::TraceError;
use crate::model::{Stream, Trace};
use crate::stats::Stats;
use crate::stream_order::StreamSource;

/// Probability floor added to every grid point before taking the KL divergence.
pub(crate) const KL_EPSILON: f64 = 1e-10;

/// KL divergence `D(P‖Q)` in nats of two densities on one grid, with the [`KL_EPSILON`] floor.
pub fn kl_divergence(p: &[f64], q: &[f64]) -> f64 {
    let norm = |v: &[f64]| {
        let floored: Vec<f64> = v.iter().map(|x| x.max(0.0) + KL_EPSILON).collect();
        let s: f64 = floored.iter().sum();
        floored.into_iter().map(|x| x / s).collect::<Vec<f64>>()
    };
    let (p, q) = (norm(p), norm(q));
    p.iter()
        .zip(&q)
        .map(|(a, b)| a * (a / b).ln())
        .sum::<f64>()
        .max(0.0)
}

/// Two-sample Kolmogorov–Smirnov statistic of two sets of run-times.
pub fn ks_statistic(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return if a.is_empty() && b.is_empty() {
            0.0
        } else {
            1.0
        };
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0.0f64);
    while i < a.len() && j < b.len() {
        let v = a[i].min(b[j]);
        while i < a.len() && a[i] == v {
            i += 1;
        }
        while j < b.len() && b[j] == v {
            j += 1;
        }
        d = d.max((i as f64 / na - j as f64 / nb).abs());
    }
    d
}

/// The result of comparing trace A with trace B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// KL divergence D(A‖B) of the log run-time densities, nats.
    pub kl_divergence: f64,
    /// KL divergence D(B‖A), nats.
    pub kl_divergence_reverse: f64,
    /// Kolmogorov–Smirnov statistic of the run-times.
    pub ks_statistic: f64,
    /// Noise ratio of A.
    pub noise_ratio_a: f64,
    /// Noise ratio of B.
    pub noise_ratio_b: f64,
    /// Noise ratio of B minus that of A.
    pub noise_ratio_diff: f64,
    /// Detours per second (per CPU) of A.
    pub detour_rate_a: f64,
    /// Detours per second (per CPU) of B.
    pub detour_rate_b: f64,
    /// Detour rate of B minus that of A.
    pub detour_rate_diff: f64,
    /// Detours in A.
    pub count_a: u64,
    /// Detours in B.
    pub count_b: u64,
    /// Kernel bandwidth for A, ln(ns).
    pub bandwidth_a: f64,
    /// Kernel bandwidth for B, ln(ns).
    pub bandwidth_b: f64,
    /// The grid the densities were compared on.
    pub grid: Grid,
}

/// Compares trace `a` with trace `b` (all streams of each pooled).
pub fn compare(a: &Trace, b: &Trace) -> Comparison {
    compare_streams(&a.streams, &b.streams)
}

/// Compares two sets of streams (all streams of each pooled).
pub fn compare_streams(a: &[Stream], b: &[Stream]) -> Comparison {
    let (xa, xb) = (log_runs(a), log_runs(b));
    let grid = Grid::covering(&[&xa, &xb], GRID_POINTS);
    let (da, db) = (density(&xa, &grid), density(&xb, &grid));
    let runs = |s: &[Stream]| -> Vec<u64> {
        s.iter()
            .flat_map(|s| s.records.iter().map(|r| r.run_ns))
            .collect()
    };
    let (sa, sb) = (Stats::of_streams(a), Stats::of_streams(b));
    let ks = ks_statistic(&runs(a), &runs(b));
    Comparison::of_parts(&da, &db, ks, &sa, &sb, grid)
}

/// Compares trace `a` with trace `b` read stream by stream (all streams of each pooled), in
/// constant memory in their lengths: equal to [`compare`] of the two traces read whole.
pub fn compare_sources(
    a: &dyn StreamSource,
    b: &dyn StreamSource,
) -> Result<Comparison, TraceError> {
    let (mut d, grid) = densities(&[a, b])?;
    let (db, da) = (d.pop().expect("two"), d.pop().expect("two"));
    let (sa, sb) = (streamed::stats(a)?, streamed::stats(b)?);
    let ks = streamed::ks_sources(a, b, sa.count, sb.count, sa.max_ns.max(sb.max_ns))?;
    Ok(Comparison::of_parts(&da, &db, ks, &sa, &sb, grid))
}

impl Comparison {
    /// The comparison of two densities on one grid, their KS statistic and statistics.
    fn of_parts(
        da: &Density,
        db: &Density,
        ks: f64,
        sa: &Stats,
        sb: &Stats,
        grid: Grid,
    ) -> Comparison {
        Comparison {
            kl_divergence: kl_divergence(&da.values, &db.values),
            kl_divergence_reverse: kl_divergence(&db.values, &da.values),
            ks_statistic: ks,
            noise_ratio_a: sa.noise_ratio,
            noise_ratio_b: sb.noise_ratio,
            noise_ratio_diff: sb.noise_ratio - sa.noise_ratio,
            detour_rate_a: sa.detours_per_s,
            detour_rate_b: sb.detours_per_s,
            detour_rate_diff: sb.detours_per_s - sa.detours_per_s,
            count_a: sa.count,
            count_b: sb.count,
            bandwidth_a: da.bandwidth,
            bandwidth_b: db.bandwidth,
            grid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synthesize, Spec};

    fn trace(spec: &str, seed: u64) -> Trace {
        let s: Spec = spec.parse().unwrap();
        synthesize(&s, 1, 1_000_000_000, seed).unwrap()
    }

    #[test]
    fn density_integrates_to_one_and_peaks_at_the_mode() {
        let x: Vec<f64> = (0..1000).map(|i| (1000.0 + i as f64).ln()).collect();
        let grid = Grid::covering(&[&x], GRID_POINTS);
        let d = density(&x, &grid);
        let integral: f64 = d.values.iter().sum::<f64>() * grid.step();
        assert!((integral - 1.0).abs() < 1e-3, "{integral}");
        let x1 = vec![(5000.0f64).ln(); 100];
        let g1 = Grid::covering(&[&x1], GRID_POINTS);
        let d1 = density(&x1, &g1);
        let peak = (0..g1.points)
            .max_by(|&i, &j| d1.values[i].total_cmp(&d1.values[j]))
            .unwrap();
        assert!((g1.run_ns(peak) / 5000.0 - 1.0).abs() < 0.01);
    }

    #[test]
    fn identical_traces_are_at_distance_zero() {
        let a = trace("poisson:rate=5000/s,dur=exp:4us", 1);
        let c = compare(&a, &a);
        assert!(c.kl_divergence.abs() < 1e-12);
        assert_eq!(c.ks_statistic, 0.0);
        assert_eq!(c.noise_ratio_diff, 0.0);
    }

    #[test]
    fn same_law_is_closer_than_another_law() {
        let a = trace("poisson:rate=5000/s,dur=exp:4us", 1);
        let b = trace("poisson:rate=5000/s,dur=exp:4us", 2);
        let c = trace("poisson:rate=5000/s,dur=exp:8us", 3);
        let same = compare(&a, &b);
        let other = compare(&a, &c);
        assert!(
            same.kl_divergence < other.kl_divergence / 10.0,
            "{same:?} {other:?}"
        );
        // KS of two samples of 5000 from one law: 1.63·sqrt(2/5000) ≈ 0.033 at the 1 % level.
        assert!(same.ks_statistic < 0.033, "{}", same.ks_statistic);
        assert!(other.ks_statistic > 0.1, "{}", other.ks_statistic);
        assert!((other.noise_ratio_diff - (0.04 - 0.02)).abs() < 0.004);
    }

    #[test]
    fn ks_of_disjoint_samples_is_one() {
        assert_eq!(ks_statistic(&[1, 2, 3], &[10, 11]), 1.0);
        assert_eq!(ks_statistic(&[1, 2, 3, 4], &[3, 4, 5, 6]), 0.5);
    }
}
