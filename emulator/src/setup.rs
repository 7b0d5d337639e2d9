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
    pub(crate) const WHOLE: Fraction = Fraction(1.0);

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
    pub(crate) fn overridden(self, o: &Overrides) -> InjectionCost {
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

/// The largest S at which the signal injector is still the main job's choice: beyond it every
/// replayed phase lasts S× longer and a run of the same length has S× fewer phases.
pub(crate) const FAITHFUL_SCALE: u64 = 3;

/// The share of the trace's noise time the signal injector must reproduce at an S no larger
/// than [`FAITHFUL_SCALE`] to be chosen.
pub(crate) const FAITHFUL_NOISE_SHARE: f64 = 0.9;

/// How the main job (`scripts/demo.sh`, `study`) and `replay-bench app` inject on a machine, and
/// why: the signal injector where a small S reproduces most of the noise time, payment at
/// calls where the signal's cost would force a large S.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InjectionChoice {
    /// The mode chosen.
    pub mode: InjectionMode,
    /// The signal's cost O it was chosen on, ns.
    pub overhead_ns: f64,
    /// The smallest S (at most [`crate::plan::MAX_SCALE`]) at which the signal injector
    /// reproduces [`FAITHFUL_NOISE_SHARE`] of the noise time; `None`: none does.
    pub scale_for_share: Option<u64>,
    /// The share of the noise time the signal injector reproduces at [`FAITHFUL_SCALE`].
    pub share_at_faithful_scale: f64,
}

impl InjectionChoice {
    /// The rule for `streams` and a signal that costs `overhead_ns`: signal if
    /// [`FAITHFUL_NOISE_SHARE`] of the noise time is injectable at S ≤ [`FAITHFUL_SCALE`], else
    /// boundary.
    pub fn for_streams(
        streams: &[jitter_trace::Stream],
        overhead_ns: f64,
    ) -> Result<InjectionChoice, PlanError> {
        let noise_at = |s: u64| {
            jitter_trace::stats::injectability(streams, overhead_ns, s as f64)
                .map(|i| i.noise)
                .map_err(|e| PlanError::Option(e.to_string()))
        };
        // The share injectable grows with S: the smallest S reaching it, by bisection.
        let top = crate::plan::MAX_SCALE as u64;
        let scale_for_share = if noise_at(top)? < FAITHFUL_NOISE_SHARE {
            None
        } else {
            let (mut lo, mut hi) = (0u64, top);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if noise_at(mid)? >= FAITHFUL_NOISE_SHARE {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            Some(hi)
        };
        let faithful = scale_for_share.is_some_and(|s| s <= FAITHFUL_SCALE);
        Ok(InjectionChoice {
            mode: if faithful {
                InjectionMode::Signal
            } else {
                InjectionMode::Boundary
            },
            overhead_ns,
            scale_for_share,
            share_at_faithful_scale: noise_at(FAITHFUL_SCALE)?,
        })
    }

    /// Why, in one sentence.
    pub fn reason(&self) -> String {
        let needs = match self.scale_for_share {
            Some(s) => format!("S = {s}"),
            None => format!("no S up to {}", crate::plan::MAX_SCALE),
        };
        let o = self.overhead_ns / 1e3;
        match self.mode {
            InjectionMode::Signal => format!(
                "signal injection: a signal costs O = {o:.1} µs here, and {needs} reproduces {:.0} \
                 % of the trace's noise time (at most S = {FAITHFUL_SCALE} is needed)",
                FAITHFUL_NOISE_SHARE * 100.0
            ),
            InjectionMode::Boundary => format!(
                "paid at MPI calls: a signal costs O = {o:.1} µs here, so the signal injector \
                 reproduces {:.1} % of the trace's noise time at S = {FAITHFUL_SCALE} and needs \
                 {needs} for {:.0} %; paying at calls injects every detour at S = 1",
                self.share_at_faithful_scale * 100.0,
                FAITHFUL_NOISE_SHARE * 100.0
            ),
        }
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

/// S, f, the timer and O/L/M as a user gave them (each `None` where not given), to lay over a
/// platform's setup ([`SetupOverrides::setup_over`]): what `cli::ReplayArgs` parses into.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SetupOverrides {
    /// S.
    pub scale: Option<Scale>,
    /// f.
    pub fraction: Option<Fraction>,
    /// The timer.
    pub timer: Option<TimerKind>,
    /// O, L and M.
    pub costs: Overrides,
}

impl SetupOverrides {
    /// The setup on a platform that costs `base` (its timer taken unless one was given), with
    /// `base`'s S and f where none were given.
    pub fn setup_over(&self, base: &ReplaySetup) -> ReplaySetup {
        let cost = InjectionCost {
            timer: self.timer.unwrap_or(base.cost.timer),
            ..base.cost
        };
        ReplaySetup {
            scale: self.scale.unwrap_or(base.scale),
            fraction: self.fraction.unwrap_or(base.fraction),
            cost: cost.overridden(&self.costs),
        }
    }
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
    fn the_signal_is_chosen_where_a_small_scale_reproduces_most_of_the_noise() {
        use jitter_trace::{Detour, Stream};
        // 100 detours of 10 µs.
        let d: Vec<Detour> = (0..100)
            .map(|k| Detour {
                start_ns: k * 1_000_000,
                run_ns: 10_000,
            })
            .collect();
        let s = Stream::from_detours(0, 0, 100_000_000, &d).unwrap();
        // O = 20 µs: S = 3 makes them 30 µs, all injectable.
        let c = InjectionChoice::for_streams(std::slice::from_ref(&s), 20_000.0).unwrap();
        assert_eq!(
            (c.mode, c.scale_for_share),
            (InjectionMode::Signal, Some(3))
        );
        assert_eq!(c.share_at_faithful_scale, 1.0);
        assert!(c.reason().starts_with("signal injection"), "{}", c.reason());
        // O = 50 µs: S = 6 is needed (S·run > O), beyond S = 3.
        let c = InjectionChoice::for_streams(std::slice::from_ref(&s), 50_000.0).unwrap();
        assert_eq!(
            (c.mode, c.scale_for_share),
            (InjectionMode::Boundary, Some(6))
        );
        assert_eq!(c.share_at_faithful_scale, 0.0);
        assert!(c.reason().contains("needs S = 6"), "{}", c.reason());
        // An O no S up to the bound beats.
        let c = InjectionChoice::for_streams(std::slice::from_ref(&s), 1e8).unwrap();
        assert_eq!((c.mode, c.scale_for_share), (InjectionMode::Boundary, None));
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
