//! What a study of pairs can say: the paired slowdown of the program's metric with its 95 %
//! t-interval (`metrics::paired_slowdown`), a verdict only where the interval excludes zero,
//! and otherwise how many pairs would: n ≈ (t₀.₉₇₅ · s_d / d̄)², the count at which the
//! half-width t · s_d / √n falls below the observed mean difference d̄.

use serde::{Deserialize, Serialize};

use jitter_trace::summary::{mean_variance, quantile, t975};

use jitter_report::metrics::paired_slowdown;

/// What the interval allows one to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The program is slower with the trace: the whole interval lies above zero.
    Slower,
    /// The program is faster with the trace: the whole interval lies below zero.
    Faster,
    /// The interval is wider than the effect (or could not be estimated): no verdict.
    Inconclusive,
}

/// A sample of one arm's metric.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ArmSummary {
    /// Runs.
    pub runs: u64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation (n − 1).
    pub sd: f64,
    /// Smallest value.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// Largest value.
    pub max: f64,
}

impl ArmSummary {
    /// Summarises `values`; all zero for an empty sample.
    pub fn of(values: &[f64]) -> ArmSummary {
        let Some((mean, var)) = mean_variance(values) else {
            return ArmSummary::default();
        };
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        ArmSummary {
            runs: v.len() as u64,
            mean,
            sd: var.sqrt(),
            min: v[0],
            median: quantile(&v, 0.5),
            max: v[v.len() - 1],
        }
    }
}

/// The effect of the trace on the program, from (without, with) pairs of one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// Pairs.
    pub pairs: u64,
    /// Slowdown 100 · d̄ / ā, percent.
    pub slowdown_pct: f64,
    /// Half-width of its 95 % interval, percentage points (NaN below two pairs).
    pub slowdown_ci95_pct: f64,
    /// The verdict.
    pub verdict: Verdict,
    /// For an inconclusive study with a non-zero mean difference: about how many pairs would
    /// make the interval narrower than the effect seen, (t · s_d / d̄)² rounded up.
    pub pairs_needed: Option<u64>,
}

/// Judges (without, with) pairs of the program's metric.
pub fn judge(pairs: &[(f64, f64)]) -> Effect {
    let sd = paired_slowdown(pairs);
    let n = pairs.len() as u64;
    // An interval that is NaN (fewer than two pairs, a reference that is not a time), not a
    // width (below zero) or as wide as the effect: no verdict.
    let narrow = sd.ci95_pct.is_finite() && sd.ci95_pct >= 0.0 && sd.ci95_pct < sd.pct.abs();
    let verdict = if !narrow {
        Verdict::Inconclusive
    } else if sd.pct > 0.0 {
        Verdict::Slower
    } else {
        Verdict::Faster
    };
    let pairs_needed = (verdict == Verdict::Inconclusive && sd.pct.is_finite())
        .then(|| pairs_needed(pairs))
        .flatten();
    Effect {
        pairs: n,
        slowdown_pct: sd.pct,
        slowdown_ci95_pct: sd.ci95_pct,
        verdict,
        pairs_needed,
    }
}

/// (t₀.₉₇₅,ₙ₋₁ · s_d / d̄)² rounded up, at least one more than the pairs there are; `None`
/// without a spread to go by (fewer than two pairs) or without a difference (d̄ = 0).
fn pairs_needed(pairs: &[(f64, f64)]) -> Option<u64> {
    let diffs: Vec<f64> = pairs.iter().map(|p| p.1 - p.0).collect();
    let (d, var) = mean_variance(&diffs)?;
    if diffs.len() < 2 || d == 0.0 || !d.is_finite() {
        return None;
    }
    let t = t975(diffs.len() as u64 - 1);
    let n = (t * var.sqrt() / d).powi(2).ceil();
    n.is_finite()
        .then(|| (n as u64).max(diffs.len() as u64 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clear_effect_gets_a_verdict_and_a_wide_interval_gets_none() {
        // d = 3, 3, 3, 4 on ā = 100: 3.25 % ± 0.7955 pp (metrics' closed form): slower.
        let pairs = [
            (100.0, 103.0),
            (102.0, 105.0),
            (98.0, 101.0),
            (100.0, 104.0),
        ];
        let e = judge(&pairs);
        assert_eq!(e.verdict, Verdict::Slower);
        assert_eq!(e.pairs_needed, None);
        assert!((e.slowdown_pct - 3.25).abs() < 1e-12);
        let faster: Vec<(f64, f64)> = pairs.iter().map(|&(a, b)| (b, a)).collect();
        assert_eq!(judge(&faster).verdict, Verdict::Faster);
        // d = +1, −1, +3, −1 on ā = 100: d̄ = 0.5, s_d² = (0.25 + 2.25 + 6.25 + 2.25) / 3 =
        // 11/3, half-width = 3.182 · √(11/12) = 3.046 pp > 0.5 %: inconclusive, and
        // n = (3.182 · √(11/3) / 0.5)² = 148.5 → 149 pairs.
        let wide = [(100.0, 101.0), (100.0, 99.0), (100.0, 103.0), (100.0, 99.0)];
        let e = judge(&wide);
        assert_eq!(e.verdict, Verdict::Inconclusive);
        assert!((e.slowdown_ci95_pct - 3.182 * (11.0f64 / 12.0).sqrt()).abs() < 1e-9);
        assert_eq!(e.pairs_needed, Some(149));
        // One pair: no interval, no verdict, no count to go by.
        let one = judge(&pairs[..1]);
        assert_eq!(
            (one.verdict, one.pairs_needed),
            (Verdict::Inconclusive, None)
        );
        // A metric below zero (not a time): no sign to read, no verdict, no count (the runs
        // refuse such a value; this is the rule's own guard).
        let negative: Vec<(f64, f64)> = pairs.iter().map(|&(a, b)| (-a, -b)).collect();
        let e = judge(&negative);
        assert_eq!((e.verdict, e.pairs_needed), (Verdict::Inconclusive, None));
        assert!(
            e.slowdown_pct.is_nan() && e.slowdown_ci95_pct.is_nan(),
            "{e:?}"
        );
        // No difference at all: no verdict and no count would ever give one.
        let same = judge(&[(100.0, 100.0), (101.0, 101.0)]);
        assert_eq!(
            (same.verdict, same.pairs_needed),
            (Verdict::Inconclusive, None)
        );
    }

    #[test]
    fn two_pairs_ask_for_the_closed_form_count_and_arms_are_summarised() {
        // d = 1, 3: d̄ = 2, s_d = √2, half-width 12.706 · √2 / √2 = 12.706 > 2 pp on ā = 100;
        // n = (12.706 · √2 / 2)² = 80.7 → 81.
        let e = judge(&[(100.0, 101.0), (100.0, 103.0)]);
        assert_eq!(e.pairs_needed, Some(81));
        let s = ArmSummary::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!(
            (s.runs, s.min, s.median, s.max, s.mean),
            (4, 1.0, 2.5, 10.0, 4.0)
        );
        assert_eq!(ArmSummary::of(&[]), ArmSummary::default());
    }
}
