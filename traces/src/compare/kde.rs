//! The density of log run-times on a grid, shared by [`super::compare`], its constant-memory
//! form ([`super::streamed`]) and the density chart: the grid, Silverman's bandwidth, linear
//! binning and the Gaussian smoothing (definitions in [`super`]'s module doc).

use serde::{Deserialize, Serialize};

use crate::model::Stream;
use crate::summary::{mean_variance, quantile};

/// Points of the log-spaced density grid.
pub const GRID_POINTS: usize = 512;
/// Smallest kernel bandwidth, in units of ln(ns).
pub const MIN_BANDWIDTH: f64 = 0.01;

/// What a trace's log run-times give the density: their count, range and bandwidth.
#[derive(Debug, Clone, Copy)]
pub struct LogSummary {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub bandwidth: f64,
}

/// A grid of points equally spaced in ln(run-time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grid {
    /// ln(ns) of the first point.
    pub lo: f64,
    /// ln(ns) of the last point.
    pub hi: f64,
    /// Number of points.
    pub points: usize,
}

impl Grid {
    /// Spacing between points, in ln(ns).
    pub fn step(&self) -> f64 {
        if self.points < 2 {
            1.0
        } else {
            (self.hi - self.lo) / (self.points - 1) as f64
        }
    }

    /// ln(ns) of point `j`.
    pub fn x(&self, j: usize) -> f64 {
        self.lo + j as f64 * self.step()
    }

    /// Run-time at point `j`, ns.
    pub fn run_ns(&self, j: usize) -> f64 {
        self.x(j).exp()
    }

    /// [`Grid::covering`] from each sample's summary (count, range, bandwidth).
    pub fn spanning(samples: &[LogSummary], points: usize) -> Grid {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for s in samples.iter().filter(|s| s.n > 0) {
            lo = lo.min(s.min - 4.0 * s.bandwidth);
            hi = hi.max(s.max + 4.0 * s.bandwidth);
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        Grid {
            lo,
            hi: hi.max(lo + MIN_BANDWIDTH),
            points: points.max(2),
        }
    }

    /// A grid covering the log run-times of all `samples` with room for their kernels.
    pub fn covering(samples: &[&[f64]], points: usize) -> Grid {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for s in samples {
            let h = bandwidth(s);
            for &x in s.iter() {
                lo = lo.min(x - 4.0 * h);
                hi = hi.max(x + 4.0 * h);
            }
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        Grid {
            lo,
            hi: hi.max(lo + MIN_BANDWIDTH),
            points: points.max(2),
        }
    }
}

/// A density estimate of ln(run-time) on a grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Density {
    /// Where it is evaluated.
    pub grid: Grid,
    /// Kernel bandwidth, ln(ns).
    pub bandwidth: f64,
    /// Density of ln(run) at each grid point (integrates to ~1 over ln(ns)).
    pub values: Vec<f64>,
}

/// Natural logs of the positive run-times of `streams`.
pub(crate) fn log_runs(streams: &[Stream]) -> Vec<f64> {
    streams
        .iter()
        .flat_map(|s| &s.records)
        .filter(|r| r.run_ns > 0)
        .map(|r| (r.run_ns as f64).ln())
        .collect()
}

/// Silverman's rule-of-thumb bandwidth of a sample (at least [`MIN_BANDWIDTH`]).
pub fn bandwidth(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 2 {
        return MIN_BANDWIDTH;
    }
    let sd = mean_variance(x).map_or(0.0, |(_, var)| var.sqrt());
    let mut sorted = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    let q = |p: f64| quantile(&sorted, p);
    bandwidth_of(Spread {
        sd,
        iqr: q(0.75) - q(0.25),
        n,
    })
}

/// What the bandwidth of a sample of at least two values is made of.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub sd: f64,
    pub iqr: f64,
    pub n: usize,
}

/// Silverman's rule on a sample's spread.
pub fn bandwidth_of(s: Spread) -> f64 {
    let spread = if s.iqr > 0.0 {
        s.sd.min(s.iqr / 1.34)
    } else {
        s.sd
    };
    (0.9 * spread * (s.n as f64).powf(-0.2)).max(MIN_BANDWIDTH)
}

/// Parzen-window (Gaussian, Silverman) density of the log run-times `x` on `grid`.
pub fn density(x: &[f64], grid: &Grid) -> Density {
    let h = bandwidth(x);
    let mut counts = vec![0.0f64; grid.points];
    let step = grid.step();
    for &v in x {
        binned(&mut counts, v, grid.lo, step);
    }
    smoothed(counts, x.len(), h, grid)
}

/// Adds `v` to the grid counts by linear binning (nothing outside the grid).
pub fn binned(counts: &mut [f64], v: f64, lo: f64, step: f64) {
    let m = counts.len();
    let pos = (v - lo) / step;
    if !(0.0..=(m - 1) as f64).contains(&pos) {
        return;
    }
    let i = pos.floor() as usize;
    let f = pos - i as f64;
    counts[i] += 1.0 - f;
    if i + 1 < m {
        counts[i + 1] += f;
    }
}

/// The density of `n` values binned into `counts`, smoothed with bandwidth `h`.
pub fn smoothed(counts: Vec<f64>, n: usize, h: f64, grid: &Grid) -> Density {
    let m = grid.points;
    let step = grid.step();
    let n = n.max(1) as f64;
    let reach = ((6.0 * h / step).ceil() as usize).min(m);
    let kernel: Vec<f64> = (0..=reach)
        .map(|k| {
            let z = k as f64 * step / h;
            (-0.5 * z * z).exp() / (h * (2.0 * std::f64::consts::PI).sqrt())
        })
        .collect();
    let mut values = vec![0.0f64; m];
    for (i, &c) in counts.iter().enumerate() {
        if c == 0.0 {
            continue;
        }
        let from = i.saturating_sub(reach);
        let to = (i + reach).min(m - 1);
        for (j, v) in values.iter_mut().enumerate().take(to + 1).skip(from) {
            *v += c * kernel[i.abs_diff(j)];
        }
    }
    for v in &mut values {
        *v /= n;
    }
    Density {
        grid: grid.clone(),
        bandwidth: h,
        values,
    }
}
