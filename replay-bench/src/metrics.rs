//! Per-phase metrics of the Parallel Benchmark: MaxQT, MaxQTBT, their averages, slowdown by
//! equations (2) and (3) of paper 001, and the thesis's relative loss `lost_rel`.

use serde::{Deserialize, Serialize};

/// One phase as seen over all ranks (already reduced: maxima and the mean compute time).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PhaseSample {
    /// Maximum compute time over ranks, ns.
    pub max_qt_ns: f64,
    /// Maximum compute + barrier time over ranks, ns.
    pub max_qtbt_ns: f64,
    /// Mean compute time over ranks, ns.
    pub mean_qt_ns: f64,
}

/// Running averages over phases (constant memory).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PhaseAverages {
    /// Phases accumulated.
    pub phases: u64,
    /// Σ MaxQT, ns.
    pub sum_max_qt_ns: f64,
    /// Σ MaxQTBT, ns.
    pub sum_max_qtbt_ns: f64,
    /// Σ (MaxQT − mean qt) / mean qt.
    pub sum_lost_rel: f64,
}

impl PhaseAverages {
    /// Adds one phase.
    pub fn add(&mut self, s: PhaseSample) {
        self.phases += 1;
        self.sum_max_qt_ns += s.max_qt_ns;
        self.sum_max_qtbt_ns += s.max_qtbt_ns;
        if s.mean_qt_ns > 0.0 {
            self.sum_lost_rel += (s.max_qt_ns - s.mean_qt_ns) / s.mean_qt_ns;
        }
    }

    /// Adds another accumulator (e.g. from another process).
    pub fn merge(&mut self, o: &PhaseAverages) {
        self.phases += o.phases;
        self.sum_max_qt_ns += o.sum_max_qt_ns;
        self.sum_max_qtbt_ns += o.sum_max_qtbt_ns;
        self.sum_lost_rel += o.sum_lost_rel;
    }

    /// AvgMaxQT, ns.
    pub fn avg_max_qt_ns(&self) -> f64 {
        self.mean(self.sum_max_qt_ns)
    }

    /// AvgMaxQTBT, ns.
    pub fn avg_max_qtbt_ns(&self) -> f64 {
        self.mean(self.sum_max_qtbt_ns)
    }

    /// Mean relative loss (thesis 004).
    pub fn lost_rel(&self) -> f64 {
        self.mean(self.sum_lost_rel)
    }

    fn mean(&self, sum: f64) -> f64 {
        if self.phases == 0 {
            f64::NAN
        } else {
            sum / self.phases as f64
        }
    }
}

/// Percentage slowdown SD = (with − without) / without × 100 (eq. 2 with AvgMaxQTBT, eq. 3 with AvgMaxQT).
pub fn slowdown_pct(with_jitter: f64, without_jitter: f64) -> f64 {
    (with_jitter - without_jitter) / without_jitter * 100.0
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
            let z: f64 = 1.959_964;
            let v = df as f64;
            z + (z.powi(3) + z) / (4.0 * v)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * v * v)
                + (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z)
                    / (384.0 * v.powi(3))
        }
    }
}

/// A slowdown in percent with the half-width of its 95 % confidence interval (percentage
/// points; NaN when it cannot be estimated, e.g. from fewer than two pairs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slowdown {
    /// SD, percent.
    pub pct: f64,
    /// Half-width of the 95 % interval, percentage points.
    pub ci95_pct: f64,
}

/// SD from paired blocks: `pairs` holds (baseline block mean, jitter block mean) of the same
/// metric. SD = 100 · d̄ / ā with dᵢ = bᵢ − aᵢ; the interval is the paired t-interval
/// 100 · t₀.₉₇₅,ₙ₋₁ · s_d / (√n · ā) (ā taken as exact: its own relative error is the
/// platform's noise over n blocks, second order against d̄'s).
pub fn paired_slowdown(pairs: &[(f64, f64)]) -> Slowdown {
    let n = pairs.len();
    if n == 0 {
        return Slowdown {
            pct: f64::NAN,
            ci95_pct: f64::NAN,
        };
    }
    let nf = n as f64;
    let a = pairs.iter().map(|p| p.0).sum::<f64>() / nf;
    let d = pairs.iter().map(|p| p.1 - p.0).sum::<f64>() / nf;
    let ci95_pct = if n < 2 {
        f64::NAN
    } else {
        let var = pairs.iter().map(|p| (p.1 - p.0 - d).powi(2)).sum::<f64>() / (nf - 1.0);
        100.0 * t975(n as u64 - 1) * (var / nf).sqrt() / a
    };
    Slowdown {
        pct: 100.0 * d / a,
        ci95_pct,
    }
}

/// SD of two separate runs (the sequential design) with a normal 95 % interval from their
/// per-phase spreads: 100 · 1.96 · √(s²/n + s_b²/n_b) / mean_b. It assumes independent phases
/// and says nothing about a drift of the platform between the two runs. `baseline` is
/// (mean, sd, phases); sd 0 for a reference taken as exact (q itself, a report file).
pub fn sequential_slowdown(run: (f64, f64, u64), baseline: (f64, f64, u64)) -> Slowdown {
    let (m, s, n) = run;
    let (mb, sb, nb) = baseline;
    let var = |sd: f64, n: u64| if n == 0 { 0.0 } else { sd * sd / n as f64 };
    Slowdown {
        pct: slowdown_pct(m, mb),
        ci95_pct: if n < 2 {
            f64::NAN
        } else {
            100.0 * 1.959_964 * (var(s, n) + var(sb, nb)).sqrt() / mb
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_and_slowdown_follow_the_equations() {
        let mut a = PhaseAverages::default();
        a.add(PhaseSample {
            max_qt_ns: 1100.0,
            max_qtbt_ns: 1200.0,
            mean_qt_ns: 1000.0,
        });
        a.add(PhaseSample {
            max_qt_ns: 1300.0,
            max_qtbt_ns: 1400.0,
            mean_qt_ns: 1000.0,
        });
        assert_eq!(a.avg_max_qt_ns(), 1200.0);
        assert_eq!(a.avg_max_qtbt_ns(), 1300.0);
        assert!((a.lost_rel() - 0.2).abs() < 1e-12);
        assert!((slowdown_pct(a.avg_max_qtbt_ns(), 1000.0) - 30.0).abs() < 1e-9);
        let mut b = PhaseAverages::default();
        b.merge(&a);
        b.merge(&a);
        assert_eq!(b.phases, 4);
        assert_eq!(b.avg_max_qt_ns(), 1200.0);
        assert!(PhaseAverages::default().avg_max_qt_ns().is_nan());
    }

    #[test]
    fn the_paired_interval_is_the_t_interval_of_the_block_differences() {
        // a = 100, 102, 98, 100; b = 103, 105, 101, 104: d = 3, 3, 3, 4, d̄ = 3.25, ā = 100,
        // s_d² = (3·0.0625 + 0.5625) / 3 = 0.25, s_d = 0.5; t₀.₉₇₅,₃ = 3.182;
        // half-width = 100 · 3.182 · 0.5 / (2 · 100) = 0.7955 pp.
        let pairs = [
            (100.0, 103.0),
            (102.0, 105.0),
            (98.0, 101.0),
            (100.0, 104.0),
        ];
        let sd = paired_slowdown(&pairs);
        assert!((sd.pct - 3.25).abs() < 1e-12, "{sd:?}");
        assert!((sd.ci95_pct - 0.7955).abs() < 1e-12, "{sd:?}");
        // The baseline's drift cancels: the same differences on a drifting platform.
        let drifted: Vec<(f64, f64)> = pairs
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| (a + 10.0 * i as f64, b + 10.0 * i as f64))
            .collect();
        let sd2 = paired_slowdown(&drifted);
        assert!(
            (sd2.ci95_pct * 115.0 / 100.0 - 0.7955).abs() < 1e-12,
            "{sd2:?}"
        );
        assert!(paired_slowdown(&pairs[..1]).ci95_pct.is_nan());
        assert!(paired_slowdown(&[]).pct.is_nan());
        assert_eq!(t975(1), 12.706);
        assert!(t975(0).is_nan());
        // The expansion meets the table at df = 30 and tends to z.
        assert!((t975(31) - 2.0395).abs() < 2e-4, "{}", t975(31));
        assert!((t975(120) - 1.9799).abs() < 2e-4, "{}", t975(120));
        assert!((t975(1_000_000) - 1.96).abs() < 1e-3);
        // Sequential: 100 · 1.96 · √(4/100 + 9/100) / 1000.
        let s = sequential_slowdown((1030.0, 2.0, 100), (1000.0, 3.0, 100));
        assert!((s.pct - 3.0).abs() < 1e-9);
        assert!(
            (s.ci95_pct - 0.1959964 * 0.13f64.sqrt()).abs() < 1e-9,
            "{s:?}"
        );
    }
}
