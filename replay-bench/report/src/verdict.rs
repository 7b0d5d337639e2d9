//! The one rule by which a prediction is judged against a measurement, on their difference
//! d = predicted − measured and the 95 % interval ± h of that difference: where the run recorded
//! its blocks and the prediction its windows, h is the paired t-interval of the per-window
//! differences (the stretch of trace each block replayed then cancels: both saw the same
//! detours); otherwise h combines the measurement's interval h_m with the prediction's h_p as
//! independent errors, h = √(h_m² + h_p²) (a prediction of the run's own windows has none: it
//! replays those very stretches; one over offset draws has its draws' interval).
//!
//! - **inside**: |d| ≤ h (no difference the data can see);
//! - **near**: |d| ≤ [`AGREE_PP`] + the platform's own noise (what the machine adds to the
//!   measurement and the prediction does not model);
//! - **disagrees**: farther;
//! - **no verdict** unless the data decide: h narrower than the measured effect (a prediction of
//!   no slowdown would be told apart), or the whole interval d ± h within the allowance of
//!   *near* (equivalence: whatever the true difference inside it, the prediction agrees).
//!
//! `validate`, `study` (the main job's report) and `predict --windows-of` all judge by it.

use serde::{Deserialize, Serialize};

/// A prediction this close to the measurement agrees even outside a narrow interval, pp (on top
/// of the platform's own noise).
pub(crate) const AGREE_PP: f64 = 1.0;

/// The outcome of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The prediction lies inside the measured 95 % interval.
    Inside,
    /// Outside the interval, but within [`AGREE_PP`] plus the platform's noise.
    Near,
    /// They disagree.
    Disagrees,
    /// No verdict: the measured interval is missing or wider than the effect it measures, so
    /// the measurement cannot tell a right prediction from a wrong one.
    NoVerdict,
}

impl Verdict {
    /// Judges `predicted_pct` ± `predicted_ci95_pp` (`None`: exact) against `measured_pct` ±
    /// `ci95_pp` on their combined interval ([`combined_ci95`]), with the platform's own noise
    /// `platform_pct` (0 where the prediction models it).
    ///
    /// ```
    /// use jitter_report::verdict::Verdict;
    ///
    /// // Measured 11.9 ± 0.8 %, predicted 11.2 % (exact), the platform's own noise 1.2 %.
    /// assert_eq!(Verdict::judge(11.9, Some(0.8), 11.2, None, 1.2), Verdict::Inside);
    /// // Measured 11.9 ± 0.5 %, predicted 12.5 %: outside, but within 1 pp + the platform.
    /// assert_eq!(Verdict::judge(11.9, Some(0.5), 12.5, None, 1.2), Verdict::Near);
    /// assert_eq!(Verdict::judge(11.9, Some(0.5), 16.0, None, 1.2), Verdict::Disagrees);
    /// // ± 15 pp cannot tell a 5 % effect from none.
    /// assert_eq!(Verdict::judge(5.0, Some(15.0), 5.3, None, 1.2), Verdict::NoVerdict);
    /// ```
    pub fn judge(
        measured_pct: f64,
        ci95_pp: Option<f64>,
        predicted_pct: f64,
        predicted_ci95_pp: Option<f64>,
        platform_pct: f64,
    ) -> Self {
        Self::judge_difference(
            measured_pct,
            predicted_pct - measured_pct,
            combined_ci95(ci95_pp, predicted_ci95_pp),
            platform_pct,
        )
    }

    /// Judges a difference `diff_pp` = predicted − measured with the 95 % half-width
    /// `diff_ci95_pp` of that difference, for a measured effect `measured_pct` (module doc).
    pub fn judge_difference(
        measured_pct: f64,
        diff_pp: f64,
        diff_ci95_pp: Option<f64>,
        platform_pct: f64,
    ) -> Self {
        let allowance = AGREE_PP + platform_pct.max(0.0);
        let d = diff_pp.abs();
        match diff_ci95_pp {
            Some(h) if h.is_finite() && d.is_finite() => {
                let decisive = h < measured_pct.abs() || d + h <= allowance;
                if !decisive {
                    Verdict::NoVerdict
                } else if d <= h {
                    Verdict::Inside
                } else if d <= allowance {
                    Verdict::Near
                } else {
                    Verdict::Disagrees
                }
            }
            _ => Verdict::NoVerdict,
        }
    }

    /// True for [`Verdict::Inside`] and [`Verdict::Near`].
    pub fn agrees(self) -> bool {
        matches!(self, Verdict::Inside | Verdict::Near)
    }

    /// The verdict in words for a table; `ci95_pp` (the interval the verdict rested on) and
    /// the effect name what left it undecided.
    pub fn words(self, ci95_pp: Option<f64>, measured_pct: f64) -> String {
        match self {
            Verdict::Inside => "yes (inside)".into(),
            Verdict::Near => format!("yes (≤ {AGREE_PP} pp + platform)"),
            Verdict::Disagrees => "NO".into(),
            Verdict::NoVerdict => match ci95_pp {
                Some(h) if h.is_finite() => format!(
                    "no verdict: ± {h:.2} pp is wider than the effect ({measured_pct:.2} %) \
                     and than {AGREE_PP} pp + platform"
                ),
                _ => "no verdict: no interval".into(),
            },
        }
    }
}

/// The 95 % half-width of predicted − measured from the two half-widths, as independent
/// errors: √(h_m² + h_p²); a prediction without one (`None`) is exact, a measurement without
/// one leaves none (no verdict).
pub(crate) fn combined_ci95(measured: Option<f64>, predicted: Option<f64>) -> Option<f64> {
    let p = predicted.filter(|h| h.is_finite()).unwrap_or(0.0);
    measured.map(|m| (m * m + p * p).sqrt())
}

/// One line counting verdicts: `8 of 12 agree, 3 without a verdict (interval wider than the
/// effect), 1 disagrees`.
pub fn summary(verdicts: &[Verdict]) -> String {
    let agree = verdicts.iter().filter(|v| v.agrees()).count();
    let none = verdicts
        .iter()
        .filter(|v| **v == Verdict::NoVerdict)
        .count();
    let no = verdicts
        .iter()
        .filter(|v| **v == Verdict::Disagrees)
        .count();
    format!(
        "{agree} of {} agree (inside the 95 % interval of the difference or within {AGREE_PP} pp \
         plus the platform's noise), {none} without a verdict (interval wider than the effect \
         and the allowance), {no} disagree",
        verdicts.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_near_far_and_undecided() {
        assert_eq!(
            Verdict::judge(10.0, Some(2.0), 11.5, None, 0.0),
            Verdict::Inside
        );
        // A prediction's own interval widens the difference's: √(1.2² + 1.6²) = 2.0.
        assert_eq!(combined_ci95(Some(1.2), Some(1.6)), Some(2.0));
        assert_eq!(combined_ci95(Some(1.2), None), Some(1.2));
        assert_eq!(combined_ci95(Some(1.2), Some(f64::NAN)), Some(1.2));
        assert_eq!(combined_ci95(None, Some(1.6)), None);
        assert_eq!(
            Verdict::judge(10.0, Some(1.2), 11.9, None, 0.0),
            Verdict::Disagrees
        );
        assert_eq!(
            Verdict::judge(10.0, Some(1.2), 11.9, Some(1.6), 0.0),
            Verdict::Inside
        );
        assert_eq!(
            Verdict::judge(10.0, Some(1.2), 12.1, Some(1.6), 0.0),
            Verdict::Disagrees
        );
        assert_eq!(
            Verdict::judge(10.0, Some(0.2), 10.9, None, 0.0),
            Verdict::Near
        );
        // The platform's noise widens the allowance, never the interval.
        assert_eq!(
            Verdict::judge(10.0, Some(0.2), 11.4, None, 0.5),
            Verdict::Near
        );
        assert_eq!(
            Verdict::judge(10.0, Some(0.2), 11.6, None, 0.5),
            Verdict::Disagrees
        );
        // An interval as wide as the effect decides nothing, whatever the prediction.
        assert_eq!(
            Verdict::judge(5.0, Some(5.0), 5.0, None, 0.0),
            Verdict::NoVerdict
        );
        assert_eq!(
            Verdict::judge(21.26, Some(32.7), 1.96, None, 0.0),
            Verdict::NoVerdict
        );
        assert_eq!(
            Verdict::judge(5.0, None, 5.0, None, 0.0),
            Verdict::NoVerdict
        );
        assert_eq!(
            Verdict::judge(5.0, Some(f64::NAN), 5.0, None, 0.0),
            Verdict::NoVerdict
        );
        assert!(Verdict::Inside.agrees() && Verdict::Near.agrees());
        assert!(!Verdict::NoVerdict.agrees() && !Verdict::Disagrees.agrees());
        assert!(Verdict::NoVerdict
            .words(Some(32.7), 21.26)
            .contains("± 32.70 pp is wider than the effect (21.26 %)"));
        assert_eq!(
            summary(&[Verdict::Inside, Verdict::NoVerdict, Verdict::Disagrees]),
            "1 of 3 agree (inside the 95 % interval of the difference or within 1 pp plus the \
             platform's noise), 1 without a verdict (interval wider than the effect and the \
             allowance), 1 disagree"
        );
    }

    #[test]
    fn a_small_effect_is_decided_when_its_whole_interval_lies_within_the_allowance() {
        // validate's np 2 `once` row: 0.49 ± 0.91 % measured, 0.94 % predicted, platform 2.18 %:
        // every value of the interval lies within 1 pp + platform of the prediction.
        assert_eq!(
            Verdict::judge(0.49, Some(0.91), 0.94, None, 2.18),
            Verdict::Inside
        );
        // The same interval, a prediction 2 pp away and no platform noise: undecided (the
        // interval reaches past the allowance), not a disagreement.
        assert_eq!(
            Verdict::judge(0.49, Some(0.91), 2.5, None, 0.0),
            Verdict::NoVerdict
        );
        // Just inside and just outside the equivalence bound |d| + h ≤ 1 pp + platform.
        assert_eq!(
            Verdict::judge(0.5, Some(0.6), 0.89, None, 0.0),
            Verdict::Inside
        );
        assert_eq!(
            Verdict::judge(0.5, Some(0.6), 0.91, None, 0.0),
            Verdict::NoVerdict
        );
    }

    #[test]
    fn a_paired_interval_of_the_difference_decides_where_the_measured_one_cannot() {
        // The demo's np 2 `none` row: 5.65 ± 7.26 % measured decides nothing against the
        // prediction alone; the per-window differences' interval (± 0.8 pp) does.
        assert_eq!(
            Verdict::judge(5.65, Some(7.26), 5.10, None, 1.64),
            Verdict::NoVerdict
        );
        assert_eq!(
            Verdict::judge_difference(5.65, -0.55, Some(0.8), 1.64),
            Verdict::Inside
        );
        assert_eq!(
            Verdict::judge_difference(5.65, -2.0, Some(0.8), 1.64),
            Verdict::Near
        );
        assert_eq!(
            Verdict::judge_difference(5.65, -3.0, Some(0.8), 1.64),
            Verdict::Disagrees
        );
        // A paired interval wider than the effect and the allowance still decides nothing.
        assert_eq!(
            Verdict::judge_difference(5.65, -0.5, Some(6.0), 1.64),
            Verdict::NoVerdict
        );
        assert_eq!(
            Verdict::judge_difference(5.0, f64::NAN, Some(1.0), 0.0),
            Verdict::NoVerdict
        );
    }
}
