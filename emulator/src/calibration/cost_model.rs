//! The calibration model (pure): what a calibration holds (O, L, M per timer, O by injection
//! rate), the rules that turn measurements into those values (matching injections to probe
//! detours, the M sweep, the O-by-rate curve) and how they compensate a replay (the
//! [`InjectionCost`] a plan is built with).

use serde::{Deserialize, Serialize};

use crate::cache::MachineKey;
use crate::injector::LoggedInjection;
use crate::plan::{OverheadByGap, TimerKind};
use crate::setup::{InjectionCost, Overrides};

pub use jitter_trace::summary::{quantile, Spread};

/// For each logged injection, the probe detour `(start, end)` (ticks) that contains its handler
/// entry, if any. Both inputs are in time order.
pub(crate) fn match_injections(
    log: &[LoggedInjection],
    detours: &[(u64, u64)],
) -> Vec<Option<(u64, u64)>> {
    let mut out = Vec::with_capacity(log.len());
    let mut k = 0;
    for inj in log {
        while k < detours.len() && detours[k].1 < inj.entry_ticks {
            k += 1;
        }
        out.push(match detours.get(k) {
            Some(&(a, b)) if a <= inj.entry_ticks && inj.entry_ticks <= b => Some((a, b)),
            _ => None,
        });
    }
    out
}

/// A measurement of O that matches fewer of its injections to probe detours is not a number.
pub(crate) const MIN_MATCHED_PERCENT: u64 = 90;

/// How logged injections map onto probe detours.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Matching {
    /// (injection index, detour) for injections alone in their detour.
    pub single: Vec<(usize, (u64, u64))>,
    /// Injections that shared a detour with others (handlers run back to back after a stall).
    pub stacked: u64,
    /// Injections inside no detour.
    pub unmatched: u64,
}

/// Matches injections to detours and separates those alone in their detour from stacked ones.
pub fn match_single(log: &[LoggedInjection], detours: &[(u64, u64)]) -> Matching {
    let m = match_injections(log, detours);
    let mut out = Matching::default();
    for (i, d) in m.iter().enumerate() {
        match d {
            None => out.unmatched += 1,
            Some(d) => {
                let shared = (i > 0 && m[i - 1] == Some(*d)) || m.get(i + 1) == Some(&Some(*d));
                if shared {
                    out.stacked += 1;
                } else {
                    out.single.push((i, *d));
                }
            }
        }
    }
    out
}

/// Lateness at one interval of the M sweep.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Interval asked for, ns.
    pub interval_ns: u64,
    /// Median lateness, ns.
    pub lateness_median_ns: f64,
    /// 90th percentile of lateness, ns.
    pub lateness_p90_ns: f64,
    /// Whether the median is at most the reference lateness plus the tolerance.
    pub honoured: bool,
}

/// Intervals of the M sweep, ns.
pub(crate) const SWEEP_NS: [u64; 11] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 2_000_000, 5_000_000,
];

/// M: the smallest sweep interval from which on every longer one up to `reference_ns` is
/// honoured (intervals above the reference say nothing about the minimum); the reference itself
/// if none below it is.
pub fn min_sleep(points: &[SweepPoint], reference_ns: u64) -> u64 {
    let mut m = reference_ns;
    for p in points
        .iter()
        .rev()
        .filter(|p| p.interval_ns <= reference_ns)
    {
        if !p.honoured {
            break;
        }
        m = p.interval_ns;
    }
    m
}

/// Rounds the M sweep is measured in. Each round visits every interval of `SWEEP_NS` (in an
/// order rotated per round) with its share of the samples, so that a stretch of machine noise
/// lasting part of the sweep (50–100 ms seen on a VM) falls on a few samples of each interval,
/// not on all of one interval's, which it would wrongly mark not honoured.
pub(crate) const SWEEP_ROUNDS: usize = 8;

/// The M sweep: lateness at each of `SWEEP_NS`, `samples` wake-ups each (`measure(interval,
/// n)` gives n of them, ns), in [`SWEEP_ROUNDS`] rounds, against the `reference` interval's
/// lateness. An interval is honoured when its median wake-up is no later than the
/// reference's, within the larger of 2 µs and the reference's own p10–p90 half-width (waking
/// less late is fine); returns the points and that tolerance, ns.
pub(crate) fn lateness_sweep<E>(
    reference: &Spread,
    samples: usize,
    mut measure: impl FnMut(u64, usize) -> Result<Vec<f64>, E>,
) -> Result<(Vec<SweepPoint>, f64), E> {
    let tolerance_ns = (0.5 * (reference.p90_ns - reference.p10_ns)).max(2_000.0);
    let per_round = samples.div_ceil(SWEEP_ROUNDS);
    let mut got: Vec<Vec<f64>> = vec![Vec::with_capacity(per_round * SWEEP_ROUNDS); SWEEP_NS.len()];
    for round in 0..SWEEP_ROUNDS {
        for k in 0..SWEEP_NS.len() {
            let i = (k + round) % SWEEP_NS.len();
            got[i].extend(measure(SWEEP_NS[i], per_round)?);
        }
    }
    let sweep = SWEEP_NS
        .iter()
        .zip(&got)
        .map(|(&interval_ns, v)| {
            let l = Spread::of(v);
            SweepPoint {
                interval_ns,
                lateness_median_ns: l.median_ns,
                lateness_p90_ns: l.p90_ns,
                honoured: l.median_ns - reference.median_ns <= tolerance_ns,
            }
        })
        .collect();
    Ok((sweep, tolerance_ns))
}

/// Injection rates of the O sweep, Hz (the main O run's rate joins them).
pub(crate) const OVERHEAD_RATES_HZ: [u64; 3] = [100, 300, 3_000];

/// O measured at one injection rate.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RatePoint {
    /// Injection rate, Hz.
    pub rate_hz: u64,
    /// O at this rate, ns: the main O run's median plus the sweep's difference to the main rate.
    pub overhead_median_ns: f64,
    /// Median O of the sweep's own injections at this rate, ns.
    #[serde(default)]
    pub sweep_median_ns: f64,
    /// 90th percentile of the sweep's O at this rate, ns.
    pub overhead_p90_ns: f64,
    /// Sweep injections alone in their detour.
    pub samples: u64,
}

/// The plan's O-after-a-gap curve from a rate sweep: a periodic injection at rate r follows
/// the previous one by about 1/r.
pub fn overhead_by_gap(points: &[RatePoint]) -> OverheadByGap {
    let mut g: Vec<(u64, u64)> = points
        .iter()
        .filter(|p| p.rate_hz > 0)
        .map(|p| {
            (
                1_000_000_000 / p.rate_hz,
                p.overhead_median_ns.max(0.0).round() as u64,
            )
        })
        .collect();
    g.sort_unstable();
    g.dedup_by_key(|p| p.0);
    g.truncate(crate::plan::OVERHEAD_POINTS);
    OverheadByGap::new(&g).unwrap_or_default()
}

/// Calibration of one timer kind.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TimerCalibration {
    /// The timer.
    pub timer: TimerKind,
    /// O: application-side detour of an injection with an empty busy loop.
    pub overhead: Spread,
    /// Injections seen by no probe detour during the O run.
    pub unmatched: u64,
    /// Injections stacked with others in one detour during the O run (left out of O).
    #[serde(default)]
    pub stacked: u64,
    /// Extra cost of a 100 µs busy spin beyond 100 µs + median O, ns.
    pub spin_extra_ns: f64,
    /// L: wake-up lateness of single-shot timers at the reference interval.
    pub lateness: Spread,
    /// M: shortest interval the timer honours within tolerance, ns.
    pub min_sleep_ns: u64,
    /// Tolerance used for M, ns.
    pub tolerance_ns: f64,
    /// The sweep behind M.
    pub sweep: Vec<SweepPoint>,
    /// O at several injection rates, sorted by rate (empty in calibrations from before it).
    #[serde(default)]
    pub overhead_by_rate: Vec<RatePoint>,
    /// Whether the sweep agreed with the main O run (see `measure_overhead_by_rate`).
    #[serde(default)]
    pub overhead_by_rate_consistent: bool,
    /// Whether replays take O after each gap from `overhead_by_rate`: asked for
    /// (`jitter-emulate calibrate --overhead-by-gap on`) and consistent.
    #[serde(default)]
    pub overhead_by_rate_used: bool,
}

impl TimerCalibration {
    /// The O-after-a-gap curve a replay uses: empty when the sweep was not consistent.
    pub fn overhead_by_gap(&self) -> OverheadByGap {
        if self.overhead_by_rate_used {
            overhead_by_gap(&self.overhead_by_rate)
        } else {
            OverheadByGap::default()
        }
    }
}

/// Everything measured about the injector on one host and kernel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Calibration {
    /// Host name.
    pub host: String,
    /// Kernel release.
    pub kernel: String,
    /// CPU model name (empty in calibrations cached before it was recorded: measured again).
    #[serde(default)]
    pub cpu_model: String,
    /// Counter frequency used, kHz.
    pub counter_khz: u64,
    /// When it was measured, s since the Unix epoch.
    pub measured_unix_s: u64,
    /// Reference interval of the L measurement, ns.
    pub interval_ns: u64,
    /// Injection rate of the O measurement, Hz.
    pub rate_hz: u64,
    /// `setitimer(ITIMER_REAL)`.
    pub itimer: TimerCalibration,
    /// `timer_create(CLOCK_MONOTONIC)` with absolute deadlines.
    pub abstime: TimerCalibration,
    /// The machine's load while it was measured (absent in calibrations cached before it was
    /// recorded, and where `/proc/stat` is not readable).
    #[serde(default)]
    pub load: Option<super::machine_load::MachineLoad>,
    /// The cost a simulated slow host added to every SIGALRM while this was measured, ns
    /// (`jitter_collect::slow_signals`, test builds; 0 on a real host).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub simulated_signal_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Calibration {
    /// Why this calibration includes other work's time (taken on a busy machine), or `None`.
    pub fn busy(&self) -> Option<String> {
        self.load
            .as_ref()
            .and_then(super::machine_load::MachineLoad::busy)
    }
}

/// The weighted least-squares non-increasing fit of `values` (pool adjacent violators).
fn non_increasing(values: &[f64], weights: &[f64]) -> Vec<f64> {
    // Blocks of (mean, weight, length); a block larger than its predecessor merges into it.
    let mut blocks: Vec<(f64, f64, usize)> = Vec::with_capacity(values.len());
    for (&v, &w) in values.iter().zip(weights) {
        blocks.push((v, w, 1));
        while blocks.len() > 1 && blocks[blocks.len() - 1].0 > blocks[blocks.len() - 2].0 {
            let (m2, w2, n2) = blocks.pop().unwrap_or_default();
            if let Some(b) = blocks.last_mut() {
                *b = ((b.0 * b.1 + m2 * w2) / (b.1 + w2), b.1 + w2, b.2 + n2);
            }
        }
    }
    blocks
        .iter()
        .flat_map(|&(m, _, n)| std::iter::repeat_n(m, n))
        .collect()
}

/// The O-by-rate points from the sweep's spreads at `rates` and the main O run (`main`, at
/// `main_rate_hz`): each rate's value is the main run's median plus the sweep's difference
/// between that rate and the main rate, made non-increasing in the rate (sparser injections
/// never cost less; pool-adjacent-violators weighted by samples). Also whether the sweep is
/// consistent with the main run: its own median at the main rate within the larger of 1 µs
/// and half the main run's p10–p90 width of the main median (else the machine's cost moved
/// during calibration and a replay keeps the single O).
pub(crate) fn rate_points(
    rates: &[u64],
    spreads: &[Spread],
    main: &Spread,
    main_rate_hz: u64,
) -> (Vec<RatePoint>, bool) {
    let at_main = rates
        .iter()
        .position(|&r| r == main_rate_hz)
        .map_or(main.median_ns, |i| spreads[i].median_ns);
    let tolerance = (0.5 * (main.p90_ns - main.p10_ns)).max(1_000.0);
    let consistent = (at_main - main.median_ns).abs() <= tolerance;
    let anchored: Vec<f64> = spreads
        .iter()
        .map(|sp| main.median_ns + (sp.median_ns - at_main))
        .collect();
    let weights: Vec<f64> = spreads.iter().map(|sp| sp.samples.max(1) as f64).collect();
    let monotone = non_increasing(&anchored, &weights);
    let points = rates
        .iter()
        .zip(spreads)
        .zip(monotone)
        .map(|((&rate_hz, sp), o)| RatePoint {
            rate_hz,
            overhead_median_ns: o,
            sweep_median_ns: sp.median_ns,
            overhead_p90_ns: sp.p90_ns,
            samples: sp.samples,
        })
        .collect();
    (points, consistent)
}

impl Calibration {
    /// The calibration of one timer kind.
    pub fn timer(&self, timer: TimerKind) -> &TimerCalibration {
        match timer {
            TimerKind::Itimer => &self.itimer,
            TimerKind::Abstime => &self.abstime,
        }
    }

    /// What one injection of `timer` costs, with command-line overrides: O = median overhead
    /// (and O after a gap from the rate sweep, when it agreed with the main run), L = median
    /// lateness (robust against the rare preemptions that dominate the mean; unused with
    /// absolute deadlines), M = min sleep; overrides win (a given O holds for every gap).
    pub fn cost(&self, timer: TimerKind, overrides: &Overrides) -> InjectionCost {
        let t = self.timer(timer);
        InjectionCost {
            timer,
            overhead_ns: t.overhead.median_ns.max(0.0).round() as u64,
            overhead_by_gap: t.overhead_by_gap(),
            min_sleep_ns: t.min_sleep_ns,
            lateness_ns: t.lateness.median_ns.max(0.0).round() as u64,
        }
        .overridden(overrides)
    }

    /// The machine this calibration was measured on (any CPU).
    pub fn key(&self) -> MachineKey {
        MachineKey {
            host: self.host.clone(),
            kernel: self.kernel.clone(),
            cpu_model: self.cpu_model.clone(),
            cpu: None,
            simulated_signal_ns: self.simulated_signal_ns,
        }
    }

    /// Lets replays take O after each gap from the rate sweep (`on`, when the sweep is
    /// consistent) or the single O (`off`).
    pub fn use_overhead_by_gap(&mut self, on: bool) {
        for t in [&mut self.itimer, &mut self.abstime] {
            t.overhead_by_rate_used = on && t.overhead_by_rate_consistent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::setup::ReplaySetup;

    #[test]
    fn a_stretch_of_noise_during_the_sweep_spoils_no_interval() {
        // Every wake-up 3 µs late, except during three consecutive measurements (a stretch of
        // machine noise): 500 µs. Spread over the rounds, they are a few samples of three
        // intervals; measured in one block per interval they would be all of three.
        let reference = Spread::of(&[3_000.0; 100]);
        let total = SWEEP_ROUNDS * SWEEP_NS.len();
        let stretch = total / 2..total / 2 + 3;
        let mut calls = 0usize;
        let mut per_interval = std::collections::BTreeMap::new();
        let (sweep, _) = lateness_sweep(&reference, 200, |interval, n| {
            calls += 1;
            *per_interval.entry(interval).or_insert(0) += n;
            let late = if stretch.contains(&calls) {
                500_000.0
            } else {
                3_000.0
            };
            Ok::<_, ()>(vec![late; n])
        })
        .unwrap();
        assert_eq!(calls, total);
        assert!(per_interval.values().all(|&n| n == 200), "{per_interval:?}");
        assert!(sweep.iter().all(|p| p.honoured), "{sweep:?}");
        assert_eq!(min_sleep(&sweep, 200_000), SWEEP_NS[0]);
    }

    #[test]
    fn injections_match_the_detour_that_contains_their_entry() {
        let log = |t: u64| LoggedInjection {
            entry_ticks: t,
            ..LoggedInjection::default()
        };
        let detours = [(10, 20), (30, 31), (50, 90)];
        let got = match_injections(
            &[log(5), log(15), log(31), log(40), log(60), log(95)],
            &detours,
        );
        assert_eq!(
            got,
            vec![
                None,
                Some((10, 20)),
                Some((30, 31)),
                None,
                Some((50, 90)),
                None
            ]
        );
    }

    #[test]
    fn stacked_injections_are_told_apart_from_single_ones() {
        let log = |t: u64| LoggedInjection {
            entry_ticks: t,
            ..LoggedInjection::default()
        };
        let detours = [(10, 20), (50, 90)];
        let m = match_single(&[log(15), log(55), log(60), log(70), log(95)], &detours);
        assert_eq!(m.single, vec![(0, (10, 20))]);
        assert_eq!((m.stacked, m.unmatched), (3, 1));
    }

    #[test]
    fn min_sleep_is_the_start_of_the_honoured_tail() {
        let p = |interval_ns, honoured| SweepPoint {
            interval_ns,
            honoured,
            ..SweepPoint::default()
        };
        assert_eq!(min_sleep(&[p(1, false), p(2, true), p(5, true)], 5), 2);
        // A dip below the tail does not count: honoured only if every longer interval is.
        assert_eq!(min_sleep(&[p(1, true), p(2, false), p(5, true)], 5), 5);
        assert_eq!(min_sleep(&[p(1, true), p(2, true)], 2), 1);
        assert_eq!(min_sleep(&[p(1, false), p(2, false)], 2), 2);
        // Intervals longer than the reference do not decide M.
        assert_eq!(min_sleep(&[p(1, true), p(2, true), p(9, false)], 2), 1);
    }

    fn point(rate_hz: u64, o_ns: f64) -> RatePoint {
        RatePoint {
            rate_hz,
            overhead_median_ns: o_ns,
            sweep_median_ns: o_ns,
            overhead_p90_ns: o_ns,
            samples: 100,
        }
    }

    #[test]
    fn the_rate_sweep_becomes_o_after_a_gap_when_it_agreed_with_the_main_run() {
        let mut c = Calibration::default();
        c.abstime.overhead.median_ns = 6_000.0;
        c.abstime.overhead_by_rate = vec![point(100, 10_000.0), point(1_000, 6_000.0)];
        c.abstime.overhead_by_rate_consistent = true;
        c.use_overhead_by_gap(true);
        assert!(c.abstime.overhead_by_rate_used && !c.itimer.overhead_by_rate_used);
        let o = ReplaySetup {
            cost: c.cost(TimerKind::Abstime, &Overrides::default()),
            ..ReplaySetup::default()
        }
        .plan_options();
        assert_eq!(o.overhead_ns, 6_000);
        assert_eq!(
            o.overhead_by_gap.points(),
            &[(1_000_000, 6_000), (10_000_000, 10_000)]
        );
        assert_eq!(o.overhead_after(Some(5_000_000)), {
            let t = (5e6f64.ln() - 1e6f64.ln()) / (1e7f64.ln() - 1e6f64.ln());
            (6_000.0 + t * 4_000.0 + 0.5) as u64
        });
        assert_eq!(o.overhead_after(None), 6_000);
        // A given O holds for every gap.
        let fixed = Overrides {
            overhead_ns: Some(7),
            ..Overrides::default()
        };
        let o = ReplaySetup {
            cost: c.cost(TimerKind::Abstime, &fixed),
            ..ReplaySetup::default()
        }
        .plan_options();
        assert_eq!((o.overhead_after(Some(50_000_000)), o.overhead_ns), (7, 7));
        // Not asked for, or a sweep that disagreed with the main run: the single O.
        c.use_overhead_by_gap(false);
        let o = ReplaySetup {
            cost: c.cost(TimerKind::Abstime, &Overrides::default()),
            ..ReplaySetup::default()
        }
        .plan_options();
        assert!(o.overhead_by_gap.points().is_empty());
        c.abstime.overhead_by_rate_consistent = false;
        c.use_overhead_by_gap(true);
        let o = ReplaySetup {
            cost: c.cost(TimerKind::Abstime, &Overrides::default()),
            ..ReplaySetup::default()
        }
        .plan_options();
        assert!(o.overhead_by_gap.points().is_empty());
        assert_eq!(o.overhead_after(Some(50_000_000)), 6_000);
    }

    #[test]
    fn calibrations_cached_before_the_rate_sweep_still_load() {
        let mut v = serde_json::to_value(Calibration::default()).unwrap();
        v["itimer"]
            .as_object_mut()
            .unwrap()
            .remove("overhead_by_rate");
        let c: Calibration = serde_json::from_value(v).unwrap();
        assert!(c.itimer.overhead_by_rate.is_empty());
    }

    #[test]
    fn the_rate_curve_is_made_non_increasing_by_weighted_pooling() {
        assert_eq!(non_increasing(&[], &[]), Vec::<f64>::new());
        assert_eq!(
            non_increasing(&[9.0, 7.0, 5.0], &[1.0; 3]),
            vec![9.0, 7.0, 5.0]
        );
        // 7.26 after 7.05 pools to their weighted mean; 6.44 after 5.24 likewise.
        let f = non_increasing(&[7.0, 8.0, 5.0, 6.0], &[1.0, 3.0, 1.0, 1.0]);
        assert_eq!(f, vec![7.75, 7.75, 5.5, 5.5]);
        let f = non_increasing(&[1.0, 2.0, 3.0], &[1.0; 3]);
        assert_eq!(f, vec![2.0, 2.0, 2.0]);
    }

    #[test]
    fn overrides_replace_measured_values_and_lateness_is_the_median() {
        let mut c = Calibration::default();
        c.itimer.overhead.median_ns = 20_400.0;
        c.itimer.lateness.mean_ns = 30_000.0;
        c.itimer.lateness.median_ns = 28_000.0;
        c.itimer.min_sleep_ns = 5_000;
        let o = c.cost(TimerKind::Itimer, &Overrides::default());
        assert_eq!(
            (o.overhead_ns, o.lateness_ns, o.min_sleep_ns, o.timer),
            (20_400, 28_000, 5_000, TimerKind::Itimer)
        );
        let o = c.cost(
            TimerKind::Itimer,
            &Overrides {
                overhead_ns: Some(1),
                lateness_ns: Some(2),
                min_sleep_ns: Some(3),
            },
        );
        assert_eq!((o.overhead_ns, o.lateness_ns, o.min_sleep_ns), (1, 2, 3));
    }
}
