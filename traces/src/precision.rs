//! How precise an estimate must be ([`Precision`]: `0.5pp`, `2%`, or both) and the two-stage
//! rule that plans the draws that make its interval that narrow ([`TwoStage`]).
//!
//! **The stopping rule.** A rule that looks at an *estimated* half-width again and again and
//! stops as soon as it is small enough stops early more often where the variance came out low,
//! so the intervals it stops on cover less than their nominal 95 % (measured: 91.5 % for two
//! ranks on a periodic trace, where ten fixed draws gave 94.2 %). Stein's two-stage procedure
//! (Stein 1945) looks once: a pilot of D₀ = [`MIN_DRAWS`] draws gives the half-width h₀ =
//! t₀.₉₇₅,D₀−1 · √V̂₀; the estimate needs D = max(D₀, ⌈D₀ · (h₀ / allowed)²⌉) draws; after
//! them the interval is the final mean ± h₀ · √(D₀ / D), the pilot's variance and its D₀ − 1
//! degrees of freedom scaled to D draws. The final mean is independent of the pilot's variance
//! for normal draws, which makes the coverage exactly 95 % there; for others it is measured
//! under this very rule (`jitter-predict`'s coverage test, `docs/VALIDATION.md`). Where a budget
//! stops the draws before D, the same interval at the draws done is still the pilot's, scaled.

use std::fmt;
use std::str::FromStr;

use crate::interval::MeanInterval;

/// Draws of the pilot (t₀.₉₇₅,₁₅ = 2.131): with ten, draws far from normal (two ranks on a
/// periodic trace) were covered 92.7 % of the time, with 16 and 20, 93.0–95.3 % in every case
/// measured (`docs/VALIDATION.md`).
pub const MIN_DRAWS: u64 = 16;

/// How narrow an interval must be: its half-width at most an absolute amount (in the estimate's
/// units, percentage points for a slowdown in percent), a share of the estimate, or either.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Precision {
    /// Half-width ≤ this (`0.5pp`).
    Absolute(f64),
    /// Half-width ≤ this share of |estimate| (`2%` is 0.02).
    Relative(f64),
    /// Met when either is (`2%,0.1pp`): the wider of the two.
    Either {
        /// Share of |estimate|.
        relative: f64,
        /// Absolute amount.
        absolute: f64,
    },
}

impl Precision {
    /// The half-width that meets the target for an estimate `mean` (0 for a relative target at
    /// a zero estimate; NaN when the estimate is not finite).
    pub fn allowed(&self, mean: f64) -> f64 {
        if !mean.is_finite() {
            return f64::NAN;
        }
        match *self {
            Precision::Absolute(a) => a,
            Precision::Relative(r) => r * mean.abs(),
            Precision::Either { relative, absolute } => (relative * mean.abs()).max(absolute),
        }
    }

    /// True when `i`'s half-width meets the target (never for a NaN half-width).
    pub fn met_by(&self, i: &MeanInterval) -> bool {
        i.half_width <= self.allowed(i.mean)
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Precision::Absolute(a) => write!(f, "{a}pp"),
            Precision::Relative(r) => write!(f, "{}%", r * 100.0),
            Precision::Either { relative, absolute } => {
                write!(f, "{}%,{absolute}pp", relative * 100.0)
            }
        }
    }
}

/// One part of a precision: `2%` (a share) or `0.5pp` (absolute).
fn part(s: &str) -> Result<Precision, String> {
    let t = s.trim();
    let (num, relative) = if let Some(n) = t.strip_suffix('%') {
        (n, true)
    } else if let Some(n) = t.strip_suffix("pp") {
        (n, false)
    } else {
        return Err(format!(
            "`{s}`: give a precision with its unit, relative (`2%`) or absolute (`0.5pp`)"
        ));
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number with % or pp"))?;
    match relative {
        true if v.is_finite() && v > 0.0 && v < 100.0 => Ok(Precision::Relative(v / 100.0)),
        true => Err(format!(
            "a relative precision must be in (0, 100) %, got {s}"
        )),
        false if v.is_finite() && v > 0.0 && v <= 1e6 => Ok(Precision::Absolute(v)),
        false => Err(format!(
            "an absolute precision must be in (0, 1e6] pp, got {s}"
        )),
    }
}

impl FromStr for Precision {
    type Err = String;

    /// `2%`, `0.5pp`, or one of each joined by a comma (`2%,0.1pp`: met when either is).
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(',') {
            None => part(s),
            Some((a, b)) => match (part(a)?, part(b)?) {
                (Precision::Relative(relative), Precision::Absolute(absolute))
                | (Precision::Absolute(absolute), Precision::Relative(relative)) => {
                    Ok(Precision::Either { relative, absolute })
                }
                _ => Err(format!(
                    "`{s}`: two precisions must be one relative (%) and one absolute (pp)"
                )),
            },
        }
    }
}

/// Stein's two-stage rule (module documentation): a pilot of `pilot` draws, then the draws it
/// says are needed, within `max_draws`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TwoStage {
    /// What every interval must meet.
    pub precision: Precision,
    /// Draws of the pilot (at least 2).
    pub pilot: u64,
    /// Most draws of one estimate.
    pub max_draws: u64,
}

impl TwoStage {
    /// The rule with `precision`, a pilot of [`MIN_DRAWS`] and at most `max_draws` (raised to
    /// the pilot).
    pub fn new(precision: Precision, max_draws: u64) -> Self {
        TwoStage {
            precision,
            pilot: MIN_DRAWS,
            max_draws: max_draws.max(MIN_DRAWS),
        }
    }

    /// Draws the estimate needs, from its pilot's intervals (all must meet the precision):
    /// max(D₀, ⌈D₀ · (h₀ / allowed)²⌉) for the widest, within `max_draws`; `max_draws` where an
    /// interval cannot be estimated or its target is 0.
    pub fn draws_needed(&self, pilot: &[MeanInterval]) -> u64 {
        let d0 = self.pilot.max(2);
        let worst = (pilot.iter())
            .map(|i| i.half_width / self.precision.allowed(i.mean))
            .fold(
                0.0f64,
                |a, r| if r.is_nan() { f64::INFINITY } else { a.max(r) },
            );
        let needed = (d0 as f64 * worst * worst).ceil();
        if needed.is_finite() && needed < self.max_draws as f64 {
            (needed as u64).max(d0)
        } else {
            self.max_draws
        }
        .min(self.max_draws)
    }

    /// The interval after `draws` draws: `now`'s mean (every draw) with the pilot's half-width
    /// scaled to them, h₀ · √(D₀ / D), and the pilot's degrees of freedom. The pilot's own
    /// interval while `draws` ≤ D₀.
    pub fn interval(&self, pilot: &MeanInterval, now: &MeanInterval, draws: u64) -> MeanInterval {
        let d0 = self.pilot.max(2);
        if draws <= d0 {
            return *now;
        }
        MeanInterval {
            mean: now.mean,
            half_width: pilot.half_width * (d0 as f64 / draws as f64).sqrt(),
            df: pilot.df,
            source: pilot.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interval::Source;

    fn iv(mean: f64, half_width: f64) -> MeanInterval {
        MeanInterval {
            mean,
            half_width,
            df: 9,
            source: Source::Draws,
        }
    }

    #[test]
    fn precisions_parse_and_say_themselves() {
        assert_eq!("0.5pp".parse(), Ok(Precision::Absolute(0.5)));
        assert_eq!("2%".parse(), Ok(Precision::Relative(0.02)));
        let both: Precision = "2%,0.1pp".parse().unwrap();
        assert_eq!(
            both,
            Precision::Either {
                relative: 0.02,
                absolute: 0.1
            }
        );
        assert_eq!("0.1pp, 2%".parse(), Ok(both));
        for p in [Precision::Absolute(0.5), Precision::Relative(0.02), both] {
            assert_eq!(p.to_string().parse(), Ok(p));
        }
        for bad in [
            "", "2", "x%", "0%", "100%", "-1pp", "nanpp", "1%,2%", "1pp,2pp", "1%,2",
        ] {
            assert!(bad.parse::<Precision>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_allowed_half_width_follows_the_target() {
        assert_eq!(Precision::Absolute(0.5).allowed(-3.0), 0.5);
        assert_eq!(Precision::Relative(0.02).allowed(-50.0), 1.0);
        let both = Precision::Either {
            relative: 0.02,
            absolute: 0.1,
        };
        assert_eq!(both.allowed(2.0), 0.1);
        assert_eq!(both.allowed(20.0), 0.4);
        assert!(both.allowed(f64::NAN).is_nan());
        assert!(both.met_by(&iv(20.0, 0.4)) && !both.met_by(&iv(20.0, 0.41)));
        assert!(!both.met_by(&iv(20.0, f64::NAN)));
    }

    #[test]
    fn the_pilot_plans_the_draws_and_its_variance_scales_to_them() {
        let rule = TwoStage {
            pilot: 10,
            ..TwoStage::new(Precision::Absolute(1.0), 1000)
        };
        // Met by the pilot: the pilot alone.
        assert_eq!(rule.draws_needed(&[iv(5.0, 1.0), iv(5.0, 0.2)]), 10);
        // h₀ = 2 × allowed: 10 · 4 = 40 draws; 1.2 ×: ⌈14.4⌉ = 15.
        assert_eq!(rule.draws_needed(&[iv(5.0, 2.0), iv(5.0, 0.2)]), 40);
        assert_eq!(rule.draws_needed(&[iv(5.0, 1.2)]), 15);
        // Beyond the budget, or not estimable: the budget.
        assert_eq!(rule.draws_needed(&[iv(5.0, 20.0)]), 1000);
        assert_eq!(rule.draws_needed(&[iv(5.0, f64::NAN)]), 1000);
        let rel = TwoStage::new(Precision::Relative(0.02), 1000);
        assert_eq!(rel.draws_needed(&[iv(0.0, 0.1)]), 1000);
        assert_eq!(
            TwoStage::new(Precision::Absolute(1.0), 3).max_draws,
            MIN_DRAWS
        );
        assert_eq!(TwoStage::new(Precision::Absolute(1.0), 3).pilot, 16);
        // After 40 draws the pilot's half-width 2 scales by √(10/40): 1, around the new mean.
        let now = iv(5.3, 0.7);
        let i = rule.interval(&iv(5.0, 2.0), &now, 40);
        assert_eq!((i.mean, i.half_width, i.df), (5.3, 1.0, 9));
        assert_eq!(rule.interval(&iv(5.0, 2.0), &now, 10), now);
    }
}
