//! Per-phase metrics of the Parallel Benchmark: MaxQT, MaxQTBT, their averages, slowdown by
//! equations (2) and (3) of paper 001, and the thesis's relative loss `lost_rel`.

use serde::{Deserialize, Serialize};

use jitter_trace::interval::BatchMeans;
use jitter_trace::summary::{difference_ci95, mean, mean_ci95, mean_of_sum};

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

/// Running averages over phases (constant memory), with what one series of phases needs for
/// its interval: the batch means of MaxQT and MaxQTBT in order, and the first phase (what a
/// warm-up of one phase leaves out, [`PhaseAverages::without_first`]).
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
    /// The first phase added: (MaxQT, MaxQTBT, its relative loss).
    #[serde(skip)]
    pub first: [f64; 3],
    /// Batch means of MaxQT and MaxQTBT over the phases of one series, in order (empty once
    /// series are merged: a pooled accumulator's interval comes from its draws).
    #[serde(skip)]
    pub batches: [BatchMeans; 2],
}

impl PhaseAverages {
    /// Adds one phase.
    pub fn add(&mut self, s: PhaseSample) {
        let lost = if s.mean_qt_ns > 0.0 {
            (s.max_qt_ns - s.mean_qt_ns) / s.mean_qt_ns
        } else {
            0.0
        };
        if self.phases == 0 {
            self.first = [s.max_qt_ns, s.max_qtbt_ns, lost];
        }
        self.phases += 1;
        self.sum_max_qt_ns += s.max_qt_ns;
        self.sum_max_qtbt_ns += s.max_qtbt_ns;
        self.sum_lost_rel += lost;
        self.batches[0].add(s.max_qt_ns);
        self.batches[1].add(s.max_qtbt_ns);
    }

    /// Adds another accumulator (e.g. another draw's): sums and counts add up; the batch
    /// means describe one series, so two non-empty ones leave none.
    pub fn merge(&mut self, o: &PhaseAverages) {
        if o.phases == 0 {
            return;
        }
        if self.phases == 0 {
            *self = *o;
            return;
        }
        self.phases += o.phases;
        self.sum_max_qt_ns += o.sum_max_qt_ns;
        self.sum_max_qtbt_ns += o.sum_max_qtbt_ns;
        self.sum_lost_rel += o.sum_lost_rel;
        self.batches = Default::default();
    }

    /// These averages without the first phase (a warm-up of one phase: the start of a run,
    /// where every rank starts at once, not out of a barrier); the batch means are left empty.
    /// Nothing for one phase or none.
    pub fn without_first(&self) -> PhaseAverages {
        if self.phases < 2 {
            return PhaseAverages::default();
        }
        PhaseAverages {
            phases: self.phases - 1,
            sum_max_qt_ns: self.sum_max_qt_ns - self.first[0],
            sum_max_qtbt_ns: self.sum_max_qtbt_ns - self.first[1],
            sum_lost_rel: self.sum_lost_rel - self.first[2],
            first: [f64::NAN; 3],
            batches: Default::default(),
        }
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
        mean_of_sum(sum, self.phases)
    }
}

/// Percentage slowdown SD = (with − without) / without × 100 (eq. 2 with AvgMaxQTBT, eq. 3 with AvgMaxQT).
pub fn slowdown_pct(with_jitter: f64, without_jitter: f64) -> f64 {
    (with_jitter - without_jitter) / without_jitter * 100.0
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
///
/// A reference ā of zero or below (a metric that is not a time) gives NaN for both: a
/// slowdown relative to it has no sign to read, and its interval would come out negative.
pub fn paired_slowdown(pairs: &[(f64, f64)]) -> Slowdown {
    let a = mean(&pairs.iter().map(|p| p.0).collect::<Vec<_>>()).unwrap_or(f64::NAN);
    let a = if a > 0.0 { a } else { f64::NAN };
    let diffs: Vec<f64> = pairs.iter().map(|p| p.1 - p.0).collect();
    let (d, half) = mean_ci95(&diffs);
    Slowdown {
        pct: 100.0 * d / a,
        ci95_pct: 100.0 * half / a,
    }
}

/// The difference predicted − measured of a paired run, window by window: `pairs` holds the
/// run's (baseline block mean, jitter block mean) and `predicted_pct` the prediction of each jitter
/// block's window (percent, same order). With ā the mean baseline, each block measured
/// sᵢ = 100 · (bᵢ − aᵢ) / ā (their mean is [`paired_slowdown`]'s SD) and dᵢ = pᵢ − sᵢ; the result
/// is d̄ with its paired t-interval (pp). The stretch of trace each block replayed is common to
/// both and cancels; what remains is the platform's noise and the emulation's error. `None`
/// for fewer than two pairs or lengths that differ.
pub(crate) fn paired_difference(pairs: &[(f64, f64)], predicted_pct: &[f64]) -> Option<Slowdown> {
    if pairs.len() < 2 || pairs.len() != predicted_pct.len() {
        return None;
    }
    let a = mean(&pairs.iter().map(|p| p.0).collect::<Vec<_>>())?;
    let diffs: Vec<f64> = (pairs.iter().zip(predicted_pct))
        .map(|(&(base, jit), &p)| p - 100.0 * (jit - base) / a)
        .collect();
    let (d, half) = mean_ci95(&diffs);
    (d.is_finite() && half.is_finite()).then_some(Slowdown {
        pct: d,
        ci95_pct: half,
    })
}

/// SD of two separate runs (the sequential design) with a normal 95 % interval from their
/// per-phase spreads: 100 · 1.96 · √(s²/n + s_b²/n_b) / mean_b. It assumes independent phases
/// and says nothing about a drift of the platform between the two runs. `baseline` is
/// (mean, sd, phases); sd 0 for a reference taken as exact (q itself, a report file).
pub fn sequential_slowdown(run: (f64, f64, u64), baseline: (f64, f64, u64)) -> Slowdown {
    let (m, s, n) = run;
    let (mb, sb, nb) = baseline;
    Slowdown {
        pct: slowdown_pct(m, mb),
        ci95_pct: if n < 2 {
            f64::NAN
        } else {
            100.0 * difference_ci95((s, n), (sb, nb)) / mb
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
        assert_eq!(b, a);
        b.merge(&a);
        assert_eq!(b.phases, 4);
        assert_eq!(b.avg_max_qt_ns(), 1200.0);
        assert!(PhaseAverages::default().avg_max_qt_ns().is_nan());
        // Two series merged keep no batch means; one series keeps its own.
        assert_eq!(a.batches[0].count(), 2);
        assert_eq!(b.batches[0].count(), 0);
        // Without the first phase: the second alone (its loss 0.3).
        let w = a.without_first();
        assert_eq!(
            (w.phases, w.avg_max_qt_ns(), w.avg_max_qtbt_ns()),
            (1, 1300.0, 1400.0)
        );
        assert!((w.lost_rel() - 0.3).abs() < 1e-12);
        assert_eq!(w.batches[1].count(), 0);
        assert_eq!(b.without_first().phases, 3);
        assert_eq!(PhaseAverages::default().without_first().phases, 0);
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
        // Sequential: 100 · 1.96 · √(4/100 + 9/100) / 1000.
        let s = sequential_slowdown((1030.0, 2.0, 100), (1000.0, 3.0, 100));
        assert!((s.pct - 3.0).abs() < 1e-9);
        assert!(
            (s.ci95_pct - 0.1959964 * 0.13f64.sqrt()).abs() < 1e-9,
            "{s:?}"
        );
    }
}

/// Injections of a timeline that repeats every `lap` ns, for the most detour time any window
/// can hold (the bound of what a replay can do to one phase).
#[derive(Debug, Clone)]
pub struct InjectionWindows {
    /// Starts of two laps of injections, sorted.
    starts: Vec<u64>,
    /// Their ends.
    ends: Vec<u64>,
    /// `prefix[i]`: total length of the first `i` injections.
    prefix: Vec<u64>,
    lap: u64,
    total: u64,
}

impl InjectionWindows {
    /// `spans`: (start, length) of one lap's injections, sorted by start and not overlapping
    /// (overlaps are counted twice: a looser bound), all starts below `lap`.
    pub fn new(spans: &[(u64, u64)], lap: u64) -> Self {
        let lap = lap.max(1);
        let mut starts = Vec::with_capacity(2 * spans.len());
        let mut ends = Vec::with_capacity(2 * spans.len());
        let mut prefix = Vec::with_capacity(2 * spans.len() + 1);
        prefix.push(0u64);
        for copy in 0..2u64 {
            for &(a, len) in spans {
                let a = a + copy * lap;
                starts.push(a);
                ends.push(a + len);
                prefix.push(prefix.last().copied().unwrap_or(0) + len);
            }
        }
        let total = spans.iter().map(|s| s.1).sum();
        InjectionWindows {
            starts,
            ends,
            prefix,
            lap,
            total,
        }
    }

    /// The most injected time inside any window of `w` ns: whole laps, then the worst window
    /// of the rest, which starts at an injection's start or ends at an injection's end.
    pub fn worst_window_ns(&self, w: u64) -> u64 {
        let n = self.starts.len() / 2;
        let (laps, r) = (w / self.lap, w % self.lap);
        let mut best = 0u64;
        if n > 0 && r > 0 {
            let (s, e, p) = (&self.starts, &self.ends, &self.prefix);
            for i in 0..n {
                // Window [s_i, s_i + r): injections i..j start in it; only j − 1 may overrun.
                let t_end = s[i] + r;
                let j = s.partition_point(|&a| a < t_end);
                let last = j - 1;
                let inside = p[last] - p[i] + (e[last] - s[last]).min(t_end - s[last]);
                best = best.max(inside);
                // Window (e_k − r, e_k] for the second lap's copy k = n + i: injections that end
                // after its start, up to k; only the first of them may start before it.
                let k = n + i;
                let t0 = e[k] - r;
                let f = e.partition_point(|&b| b <= t0);
                let inside = p[k + 1] - p[f + 1] + (e[f] - s[f]).min(e[f] - t0);
                best = best.max(inside);
            }
        }
        laps * self.total + best.min(r)
    }

    /// The largest excess a phase of `work_ns` can take: the least fixed point of
    /// X = worst_window(work + X) (a phase lengthened by X is exposed to X more), by iteration
    /// from X = worst_window(work); `None` when it does not settle within 50 steps (the
    /// injections fill nearly all the timeline: no useful bound).
    pub fn max_excess_ns(&self, work_ns: u64) -> Option<u64> {
        let mut x = self.worst_window_ns(work_ns);
        for _ in 0..50 {
            let next = self.worst_window_ns(work_ns.saturating_add(x));
            if next == x {
                return Some(x);
            }
            x = next;
        }
        None
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;

    #[test]
    fn the_worst_window_of_periodic_injections_is_the_closed_form() {
        // 20 µs every 1 ms: a window of w holds ⌊w/P⌋·d plus min(d, w mod P).
        let spans: Vec<(u64, u64)> = (0..10).map(|i| (i * 1_000_000 + 300, 20_000)).collect();
        let win = InjectionWindows::new(&spans, 10_000_000);
        for w in [1, 5_000, 20_000, 999_999, 1_000_000, 2_500_000, 25_000_000] {
            let want = (w / 1_000_000) * 20_000 + (w % 1_000_000).min(20_000);
            assert_eq!(win.worst_window_ns(w), want, "w = {w}");
        }
        // q = 1 ms: X = 20 µs + min(20 µs, X) = 40 µs (a phase of 1.04 ms meets two detours).
        assert_eq!(win.max_excess_ns(1_000_000), Some(40_000));
        // Across the lap boundary: one injection at the end of the lap, one at its start.
        let win = InjectionWindows::new(&[(0, 100), (9_900, 100)], 10_000);
        assert_eq!(win.worst_window_ns(200), 200);
        assert_eq!(win.worst_window_ns(150), 150);
        // A timeline that is all injection has no useful bound.
        let full = InjectionWindows::new(&[(0, 1_000)], 1_000);
        assert_eq!(full.max_excess_ns(10), None);
        assert_eq!(InjectionWindows::new(&[], 1_000).max_excess_ns(10), Some(0));
    }
}
