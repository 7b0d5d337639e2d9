//! The one rule by which a prediction is judged against a measurement: agreement inside the
//! measured 95 % interval, or within [`AGREE_PP`] plus the platform's own noise (what the machine
//! adds to the measurement and the prediction does not model); and no verdict at all where the
//! measured interval is wider than the effect it measures. `validate`, `study` (the main job's
//! report) and `predict --windows-of` all judge by it.

use serde::{Deserialize, Serialize};

/// A prediction this close to the measurement agrees even outside a narrow interval, pp (on top
/// of the platform's own noise).
pub const AGREE_PP: f64 = 1.0;

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
    /// Judges `predicted_pct` against `measured_pct` ± `ci95_pp`, with the platform's own noise
    /// `platform_pct` (0 where the prediction models it).
    pub fn judge(
        measured_pct: f64,
        ci95_pp: Option<f64>,
        predicted_pct: f64,
        platform_pct: f64,
    ) -> Self {
        let diff = (predicted_pct - measured_pct).abs();
        match ci95_pp {
            Some(h) if h.is_finite() && h < measured_pct.abs() => {
                if diff <= h {
                    Verdict::Inside
                } else if diff <= AGREE_PP + platform_pct.max(0.0) {
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

    /// The verdict in words for a table; `ci95_pp` and the effect name what made it undecided.
    pub fn words(self, ci95_pp: Option<f64>, measured_pct: f64) -> String {
        match self {
            Verdict::Inside => "yes (inside)".into(),
            Verdict::Near => format!("yes (≤ {AGREE_PP} pp + platform)"),
            Verdict::Disagrees => "NO".into(),
            Verdict::NoVerdict => match ci95_pp {
                Some(h) if h.is_finite() => format!(
                    "no verdict: ± {h:.2} pp is wider than the effect ({measured_pct:.2} %)"
                ),
                _ => "no verdict: no interval".into(),
            },
        }
    }
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
        "{agree} of {} agree (inside the measured 95 % interval or within {AGREE_PP} pp plus the \
         platform's noise), {none} without a verdict (interval wider than the effect), {no} \
         disagree",
        verdicts.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_near_far_and_undecided() {
        assert_eq!(Verdict::judge(10.0, Some(2.0), 11.5, 0.0), Verdict::Inside);
        assert_eq!(Verdict::judge(10.0, Some(0.2), 10.9, 0.0), Verdict::Near);
        // The platform's noise widens the allowance, never the interval.
        assert_eq!(Verdict::judge(10.0, Some(0.2), 11.4, 0.5), Verdict::Near);
        assert_eq!(
            Verdict::judge(10.0, Some(0.2), 11.6, 0.5),
            Verdict::Disagrees
        );
        // An interval as wide as the effect decides nothing, whatever the prediction.
        assert_eq!(Verdict::judge(5.0, Some(5.0), 5.0, 0.0), Verdict::NoVerdict);
        assert_eq!(
            Verdict::judge(21.26, Some(32.7), 1.96, 0.0),
            Verdict::NoVerdict
        );
        assert_eq!(Verdict::judge(5.0, None, 5.0, 0.0), Verdict::NoVerdict);
        assert_eq!(
            Verdict::judge(5.0, Some(f64::NAN), 5.0, 0.0),
            Verdict::NoVerdict
        );
        assert!(Verdict::Inside.agrees() && Verdict::Near.agrees());
        assert!(!Verdict::NoVerdict.agrees() && !Verdict::Disagrees.agrees());
        assert!(Verdict::NoVerdict
            .words(Some(32.7), 21.26)
            .contains("± 32.70 pp is wider than the effect (21.26 %)"));
        assert_eq!(
            summary(&[Verdict::Inside, Verdict::NoVerdict, Verdict::Disagrees]),
            "1 of 3 agree (inside the measured 95 % interval or within 1 pp plus the platform's \
             noise), 1 without a verdict (interval wider than the effect), 1 disagree"
        );
    }
}
