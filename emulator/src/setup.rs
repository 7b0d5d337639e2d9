//! One replay's setup, shared by every tool that replays a trace (`replay-bench run`,
//! `predict`, `validate`, `jitter-inject`, `jitter-emulate`): the checked scale factor S, the
//! fraction f, and what one injection costs on the target platform (O, M, L, the timer). The
//! command-line layer (`cli::ReplayArgs`) converts into it once; it is the only place outside
//! the plan that builds [`PlanOptions`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::plan::{check_fraction, check_scale, OverheadByGap, PlanError, PlanOptions, TimerKind};

/// The conversions of a checked `f64` newtype whose `new` says why a value is refused: from
/// and into `f64` (so serde checks what it reads), from a command-line string, and display.
macro_rules! checked_f64 {
    ($name:ident, $what:literal) => {
        impl TryFrom<f64> for $name {
            type Error = PlanError;
            fn try_from(v: f64) -> Result<$name, PlanError> {
                $name::new(v)
            }
        }

        impl From<$name> for f64 {
            fn from(v: $name) -> f64 {
                v.0
            }
        }

        impl FromStr for $name {
            type Err = PlanError;
            fn from_str(s: &str) -> Result<$name, PlanError> {
                let v: f64 = s.trim().parse().map_err(|_| {
                    PlanError::Option(format!(concat!($what, " `{}` is not a number"), s))
                })?;
                $name::new(v)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

/// A scale factor S: finite, in (0, [`crate::plan::MAX_SCALE`]].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Scale(f64);

impl Scale {
    /// S = 1: the trace as recorded.
    pub const ONE: Scale = Scale(1.0);

    /// `s` when it is a usable scale factor.
    pub fn new(s: f64) -> Result<Scale, PlanError> {
        check_scale(s).map(Scale)
    }

    /// The factor.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Default for Scale {
    fn default() -> Self {
        Scale::ONE
    }
}

checked_f64!(Scale, "scale");

/// A fraction f of a stream after which a replay stops (pitfall 3): in (0, 1].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Fraction(f64);

impl Fraction {
    /// The whole stream.
    pub const WHOLE: Fraction = Fraction(1.0);

    /// `f` when it is in (0, 1].
    pub fn new(f: f64) -> Result<Fraction, PlanError> {
        check_fraction(f).map(Fraction)
    }

    /// The share.
    pub fn get(self) -> f64 {
        self.0
    }

    /// Whether a replay that got `progress` through its stream has reached f (the benchmark's
    /// test after each phase: a phase in which any rank reached it is cut short and ends the
    /// run unrecorded, as the predictor's precomputed limit does).
    pub fn reached(self, progress: f64) -> bool {
        progress >= self.0
    }
}

impl Default for Fraction {
    fn default() -> Self {
        Fraction::WHOLE
    }
}

checked_f64!(Fraction, "fraction");

/// What one injection costs on the platform a replay targets: the timer, O (and O after a
/// gap), M and L, ns.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct InjectionCost {
    /// Timer the injector uses.
    pub timer: TimerKind,
    /// Overhead O per injection.
    pub overhead_ns: u64,
    /// O after a gap since the previous injection (empty: `overhead_ns` for every one).
    #[serde(default)]
    pub overhead_by_gap: OverheadByGap,
    /// Minimum sleep M.
    pub min_sleep_ns: u64,
    /// Timer lateness L.
    pub lateness_ns: u64,
}

impl InjectionCost {
    /// A platform that costs nothing: every detour exactly as recorded.
    pub fn ideal(timer: TimerKind) -> InjectionCost {
        InjectionCost {
            timer,
            ..InjectionCost::default()
        }
    }

    /// This cost with the values given on a command line in place of these (a given O holds
    /// after every gap).
    pub fn overridden(self, o: &Overrides) -> InjectionCost {
        InjectionCost {
            overhead_ns: o.overhead_ns.unwrap_or(self.overhead_ns),
            overhead_by_gap: if o.overhead_ns.is_some() {
                OverheadByGap::default()
            } else {
                self.overhead_by_gap
            },
            min_sleep_ns: o.min_sleep_ns.unwrap_or(self.min_sleep_ns),
            lateness_ns: o.lateness_ns.unwrap_or(self.lateness_ns),
            timer: self.timer,
        }
    }
}

/// How detours get into a rank: a timer signal at each due time, or payment at the rank's
/// MPI calls (module `boundary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InjectionMode {
    /// `SIGALRM` from a timer, the handler spins (paper 001): costs O per detour, so short
    /// detours need a scale factor S; works whatever the program does between its calls.
    #[default]
    Signal,
    /// Detours due while the rank computed are paid at its next MPI call, those due while it
    /// waits inside a call at their time: no O, L or M, every detour at S = 1; exact for
    /// single-threaded ranks that compute between MPI calls.
    Boundary,
}

impl InjectionMode {
    /// What one injection costs in this mode: `measured` (the signal injector's calibration)
    /// or, paying at calls, nothing (no timer, no handler).
    pub fn cost(self, measured: InjectionCost) -> InjectionCost {
        match self {
            InjectionMode::Signal => measured,
            InjectionMode::Boundary => InjectionCost::ideal(TimerKind::Abstime),
        }
    }
}

impl FromStr for InjectionMode {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, PlanError> {
        match s.trim() {
            "signal" => Ok(InjectionMode::Signal),
            "boundary" => Ok(InjectionMode::Boundary),
            other => Err(PlanError::Option(format!(
                "unknown injection mode '{other}' (use signal or boundary)"
            ))),
        }
    }
}

impl fmt::Display for InjectionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InjectionMode::Signal => "signal",
            InjectionMode::Boundary => "boundary",
        })
    }
}

/// Values given on the command line in place of the measured ones, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Overrides {
    /// O.
    pub overhead_ns: Option<u64>,
    /// L.
    pub lateness_ns: Option<u64>,
    /// M.
    pub min_sleep_ns: Option<u64>,
}

/// How to replay a trace: S, f and the platform's injection cost.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ReplaySetup {
    /// Scale factor S of run- and sleep-times.
    pub scale: Scale,
    /// The share of each stream replayed before the replay stops.
    pub fraction: Fraction,
    /// What one injection costs.
    pub cost: InjectionCost,
}

impl ReplaySetup {
    /// Every detour exactly as recorded (S = 1, f = 1, no cost) with `timer`.
    pub fn ideal(timer: TimerKind) -> ReplaySetup {
        ReplaySetup {
            scale: Scale::ONE,
            fraction: Fraction::WHOLE,
            cost: InjectionCost::ideal(timer),
        }
    }

    /// The plan's options for this setup.
    pub fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            scale: self.scale.get(),
            overhead_ns: self.cost.overhead_ns,
            min_sleep_ns: self.cost.min_sleep_ns,
            lateness_ns: self.cost.lateness_ns,
            fraction: self.fraction.get(),
            timer: self.cost.timer,
            overhead_by_gap: self.cost.overhead_by_gap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_and_fraction_refuse_what_a_plan_refuses() {
        for s in ["0", "-1", "nan", "inf", "1001", "x"] {
            assert!(s.parse::<Scale>().is_err(), "{s}");
        }
        assert_eq!("2.5".parse::<Scale>().unwrap().get(), 2.5);
        for f in ["0", "1.01", "-0.5", "nan", "x"] {
            assert!(f.parse::<Fraction>().is_err(), "{f}");
        }
        assert!(Fraction::new(0.5).unwrap().reached(0.5));
        assert!(!Fraction::new(0.5).unwrap().reached(0.49));
        assert!(Fraction::WHOLE.reached(1.0));
        assert!(!Fraction::WHOLE.reached(0.999));
    }

    #[test]
    fn a_setup_becomes_plan_options_field_by_field_and_validates() {
        let s = ReplaySetup {
            scale: Scale::new(3.0).unwrap(),
            fraction: Fraction::new(0.25).unwrap(),
            cost: InjectionCost {
                timer: TimerKind::Itimer,
                overhead_ns: 7_000,
                overhead_by_gap: OverheadByGap::new(&[(1_000, 9_000)]).unwrap(),
                min_sleep_ns: 20_000,
                lateness_ns: 3_000,
            },
        };
        let o = s.plan_options();
        o.validate().unwrap();
        assert_eq!(
            (o.scale, o.fraction, o.timer),
            (3.0, 0.25, TimerKind::Itimer)
        );
        assert_eq!(
            (o.overhead_ns, o.min_sleep_ns, o.lateness_ns),
            (7_000, 20_000, 3_000)
        );
        assert_eq!(o.overhead_by_gap, s.cost.overhead_by_gap);
        assert_eq!(
            ReplaySetup::ideal(TimerKind::Abstime).plan_options(),
            PlanOptions::ideal()
        );
    }

    #[test]
    fn paying_at_calls_costs_nothing_and_the_mode_reads_back() {
        let measured = InjectionCost {
            timer: TimerKind::Itimer,
            overhead_ns: 7_000,
            overhead_by_gap: OverheadByGap::default(),
            min_sleep_ns: 20_000,
            lateness_ns: 3_000,
        };
        assert_eq!(InjectionMode::Signal.cost(measured), measured);
        assert_eq!(
            InjectionMode::Boundary.cost(measured),
            InjectionCost::ideal(TimerKind::Abstime)
        );
        for m in [InjectionMode::Signal, InjectionMode::Boundary] {
            assert_eq!(m.to_string().parse::<InjectionMode>().unwrap(), m);
        }
        assert!("timer".parse::<InjectionMode>().is_err());
    }

    #[test]
    fn overrides_win_and_a_given_o_holds_after_every_gap() {
        let c = InjectionCost {
            timer: TimerKind::Abstime,
            overhead_ns: 7_000,
            overhead_by_gap: OverheadByGap::new(&[(1_000, 9_000)]).unwrap(),
            min_sleep_ns: 20_000,
            lateness_ns: 3_000,
        };
        assert_eq!(c.overridden(&Overrides::default()), c);
        let o = c.overridden(&Overrides {
            overhead_ns: Some(1),
            lateness_ns: None,
            min_sleep_ns: Some(2),
        });
        assert_eq!(
            (o.overhead_ns, o.min_sleep_ns, o.lateness_ns),
            (1, 2, 3_000)
        );
        assert!(o.overhead_by_gap.points().is_empty());
    }
}
