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
}
