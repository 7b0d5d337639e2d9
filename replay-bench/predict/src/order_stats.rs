//! The analytic tier: the exact distribution F of one rank's per-phase delay when its compute
//! window starts at a uniform random point of the replayed timeline, and the expected maximum
//! over N independent ranks, `E[max] = ∫ (1 − F(x)^N) dx`.
//!
//! The delay X(t) of a window starting at t (the extra time beyond q, with detours that start
//! in the growing window extending it) is piecewise simple on the event grid of the plan's
//! injections over one lap:
//! - t inside an injection [a, e): X = (e − t) + Y(e), uniform on [Y(e), Y(e) + (e − a)];
//! - t in a gap: X is a step function that rises each time the window's right end reaches the
//!   start of a further injection.
//!
//! So F is piecewise linear with jumps, built exactly once; each E[max over N] is then one pass
//! over its knots with a closed-form integral per segment.
//!
//! Where a window may start depends on what starts it ([`WindowStart`]): a resync at a uniform
//! point starts it anywhere, the rest of a detour in progress included; a rank leaving a barrier
//! is held by a detour running then (its rest is barrier time), so its compute window starts at
//! that detour's end.

use std::sync::Arc;

use jitter_emulator::{Plan, SyncMode};
use jitter_report::metrics::slowdown_pct;
use jitter_report::report::ResultRow;

use super::des::DesConfig;

/// Where a compute window starts relative to the noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowStart {
    /// At a uniform point; a detour in progress there delays the window by its rest (per-phase
    /// resync; also the time from one barrier completion to the next).
    Anywhere,
    /// At a uniform point outside detours: a start inside a detour moves to its end (the compute
    /// window after a barrier, eq. 3).
    OutsideDetours,
}

/// The delay distribution of one rank's compute window (replay ns, scaled by the plan's S).
#[derive(Debug, Clone, PartialEq)]
pub struct DelayDistribution {
    /// Knots x_k (ascending), ns.
    xs: Vec<f64>,
    /// F at x_k (after the jump there).
    f_at: Vec<f64>,
    /// F just before x_{k+1} (F is linear in between).
    f_before_next: Vec<f64>,
    /// Replay period of the timeline, ns.
    period_ns: f64,
}

/// Injections over one lap as (due, span), ascending and non-overlapping.
fn one_lap(plan: &Arc<Plan>) -> anyhow::Result<(Vec<(f64, f64)>, f64)> {
    let opts = *plan.options();
    let period = plan.period_ns();
    // The fraction rule limits a replay, not the timeline: F is taken over the whole lap.
    let full = plan.unlimited()?;
    let lap = opts.scaled(period) as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut busy_until = 0f64;
    for inj in full.cursor(0) {
        if inj.trace_ns >= period {
            break;
        }
        let due = (inj.due_ns as f64).max(busy_until);
        let span = inj.span_ns as f64;
        busy_until = due + span;
        out.push((due, span));
    }
    let noise: f64 = out.iter().map(|&(_, s)| s).sum();
    anyhow::ensure!(
        noise < lap,
        "the plan's detours cover its whole timeline: no compute window ever ends"
    );
    Ok((out, lap))
}

impl DelayDistribution {
    /// The exact distribution of the delay of a window of `quanta_ns` (unscaled) that starts at
    /// a uniform random point of `plan`'s timeline.
    pub fn from_plan(plan: &Arc<Plan>, quanta_ns: u64, start: WindowStart) -> anyhow::Result<Self> {
        let q = plan.options().scaled(quanta_ns) as f64;
        anyhow::ensure!(q > 0.0, "the quanta must be at least 1 ns");
        let (inj, lap) = one_lap(plan)?;
        Ok(Self::from_injections(&inj, lap, q, start))
    }

    /// The distribution for injections `(due, span)` repeating with period `lap`, window `q`.
    pub(crate) fn from_injections(
        inj: &[(f64, f64)],
        lap: f64,
        q: f64,
        start: WindowStart,
    ) -> Self {
        let n = inj.len();
        if n == 0 {
            return DelayDistribution {
                xs: vec![0.0],
                f_at: vec![1.0],
                f_before_next: vec![1.0],
                period_ns: lap,
            };
        }
        let at = |k: usize| -> (f64, f64) {
            let (a, r) = inj[k % n];
            (a + (k / n) as f64 * lap, r)
        };
        // Delay of a window starting at t, with injection j the first that starts at or after t.
        let delay_from = |t: f64, mut j: usize| -> (f64, usize) {
            let mut end = t + q;
            loop {
                let (a, r) = at(j);
                if a >= end {
                    return (end - t - q, j);
                }
                end += r;
                j += 1;
            }
        };
        // Atoms (value, mass) and uniform pieces (lo, hi, mass).
        let mut atoms: Vec<(f64, f64)> = Vec::with_capacity(2 * n);
        let mut uniform: Vec<(f64, f64, f64)> = Vec::with_capacity(n);
        for i in 0..n {
            let (a, r) = at(i);
            let e = a + r;
            let (y, mut k) = delay_from(e, i + 1);
            if r > 0.0 {
                match start {
                    WindowStart::Anywhere => uniform.push((y, y + r, r)),
                    WindowStart::OutsideDetours => atoms.push((y, r)),
                }
            }
            // The gap [e, next start).
            let (gap_end, _) = at(i + 1);
            let mut t = e;
            let mut x = y;
            while t < gap_end {
                let (ak, rk) = at(k);
                let change = ak - q - x;
                if change >= gap_end {
                    atoms.push((x, gap_end - t));
                    break;
                }
                if change > t {
                    atoms.push((x, change - t));
                    t = change;
                }
                // Injection k joins the window, and any it pulls in after it.
                x += rk;
                k += 1;
                loop {
                    let (a2, r2) = at(k);
                    if a2 >= t + q + x {
                        break;
                    }
                    x += r2;
                    k += 1;
                }
            }
        }
        Self::from_pieces(&atoms, &uniform, lap)
    }

    fn from_pieces(atoms: &[(f64, f64)], uniform: &[(f64, f64, f64)], lap: f64) -> Self {
        // Events: (x, jump, density change).
        let mut ev: Vec<(f64, f64, f64)> = Vec::with_capacity(atoms.len() + 2 * uniform.len());
        ev.extend(atoms.iter().map(|&(x, m)| (x, m, 0.0)));
        for &(lo, hi, m) in uniform {
            let dens = m / (hi - lo);
            ev.push((lo, 0.0, dens));
            ev.push((hi, 0.0, -dens));
        }
        ev.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: f64 =
            atoms.iter().map(|a| a.1).sum::<f64>() + uniform.iter().map(|u| u.2).sum::<f64>();
        let mut xs = Vec::new();
        let mut f_at = Vec::new();
        let mut f_before_next = Vec::new();
        let (mut f, mut dens, mut last_x) = (0f64, 0f64, f64::NAN);
        for &(x, jump, dd) in &ev {
            if x != last_x {
                if !xs.is_empty() {
                    f += dens * (x - last_x);
                    f_before_next.push((f / total).min(1.0));
                }
                xs.push(x);
                f_at.push(0.0);
                last_x = x;
            }
            f += jump;
            dens += dd;
            *f_at.last_mut().expect("pushed above") = (f / total).min(1.0);
        }
        f_before_next.push(1.0);
        if let Some(l) = f_at.last_mut() {
            *l = 1.0;
        }
        DelayDistribution {
            xs,
            f_at,
            f_before_next,
            period_ns: lap,
        }
    }

    /// F(x): the probability that one window is delayed by at most `x` ns.
    pub fn cdf(&self, x: f64) -> f64 {
        let k = self.xs.partition_point(|&v| v <= x);
        if k == 0 {
            return 0.0;
        }
        let k = k - 1;
        match self.xs.get(k + 1) {
            None => 1.0,
            Some(&next) => {
                let u = (x - self.xs[k]) / (next - self.xs[k]);
                self.f_at[k] + u * (self.f_before_next[k] - self.f_at[k])
            }
        }
    }

    /// The largest delay any window can have, ns.
    pub fn max_ns(&self) -> f64 {
        *self.xs.last().unwrap_or(&0.0)
    }

    /// Mean delay of one window (E[max over 1]), ns.
    pub fn mean_ns(&self) -> f64 {
        self.expected_max(1.0)
    }

    /// Replay period of the timeline the distribution was taken over, ns.
    pub fn period_ns(&self) -> f64 {
        self.period_ns
    }

    /// E[max of n independent delays] = ∫ (1 − F(x)^n) dx, ns; `n` may be any real ≥ 1.
    pub fn expected_max(&self, n: f64) -> f64 {
        let m = self.xs.len();
        if m == 0 {
            return 0.0;
        }
        // Segments whose F^n is below 1e-30 contribute their whole length (relative error
        // ≤ 1e-30): skip them by binary search, which is what makes huge n instant.
        let tiny = (1e-30f64).ln() / n;
        let first = self
            .f_before_next
            .partition_point(|&f| f <= 0.0 || f.ln() < tiny);
        let mut sum = self.xs[first.min(m - 1)];
        for k in first..m.saturating_sub(1) {
            let dx = self.xs[k + 1] - self.xs[k];
            let (f0, f1) = (self.f_at[k], self.f_before_next[k]);
            sum += segment_integral(f0, f1, dx, n);
        }
        sum
    }
}

impl DelayDistribution {
    /// F on its piece `k` (between knots k and k+1, where F is linear) at `x`, continued to the
    /// piece's ends (so the left limit at knot k+1); 1 past the last knot.
    fn on_piece(&self, k: usize, x: f64) -> f64 {
        match self.xs.get(k + 1) {
            None => 1.0,
            Some(&next) => {
                let u = ((x - self.xs[k]) / (next - self.xs[k])).clamp(0.0, 1.0);
                self.f_at[k] + u * (self.f_before_next[k] - self.f_at[k])
            }
        }
    }
}

/// Relative accuracy of [`expected_max_mix`] on each interval between knots.
const MIX_TOLERANCE: f64 = 1e-10;

/// E[max of independent delays], `count` of them from each distribution:
/// ∫ (1 − Π F_t(x)^count_t) dx, ns (counts may be any real ≥ 0). One distribution with a
/// positive count is [`DelayDistribution::expected_max`] (exact); with several, every F_t is
/// linear between the union of their knots, and each such interval is integrated by adaptive
/// Simpson to [`MIX_TOLERANCE`] of its length.
pub(crate) fn expected_max_mix(parts: &[(&DelayDistribution, f64)]) -> f64 {
    let parts: Vec<(&DelayDistribution, f64)> = (parts.iter().copied())
        .filter(|&(d, n)| n > 0.0 && !d.xs.is_empty())
        .collect();
    match parts.as_slice() {
        [] => return 0.0,
        [(d, n)] => return d.expected_max(*n),
        _ => {}
    }
    // Below the largest first knot some F_t is 0: the integrand is 1.
    let start = parts.iter().map(|(d, _)| d.xs[0]).fold(0.0, f64::max);
    let mut knots: Vec<f64> = parts
        .iter()
        .flat_map(|(d, _)| d.xs.iter().copied())
        .filter(|&x| x > start)
        .collect();
    knots.push(start);
    knots.sort_by(f64::total_cmp);
    knots.dedup();
    let mut sum = start;
    // Each distribution's piece holding the current interval (a, b), advanced with a.
    let mut pieces = vec![0usize; parts.len()];
    for w in knots.windows(2) {
        let (a, b) = (w[0], w[1]);
        for ((d, _), k) in parts.iter().zip(pieces.iter_mut()) {
            while *k + 1 < d.xs.len() && d.xs[*k + 1] <= a {
                *k += 1;
            }
        }
        let h = |x: f64| {
            1.0 - parts
                .iter()
                .zip(&pieces)
                .map(|((d, n), &k)| d.on_piece(k, x).powf(*n))
                .product::<f64>()
        };
        sum += adaptive_simpson(&h, a, b, MIX_TOLERANCE * (b - a), 40);
    }
    sum
}

/// ∫ f over [a, b] by adaptive Simpson to absolute error `eps` (at most `depth` halvings).
fn adaptive_simpson(f: &dyn Fn(f64) -> f64, a: f64, b: f64, eps: f64, depth: u32) -> f64 {
    fn step(
        f: &dyn Fn(f64) -> f64,
        (a, fa): (f64, f64),
        (m, fm): (f64, f64),
        (b, fb): (f64, f64),
        whole: f64,
        eps: f64,
        depth: u32,
    ) -> f64 {
        let (lm, rm) = (0.5 * (a + m), 0.5 * (m + b));
        let (flm, frm) = (f(lm), f(rm));
        let left = (m - a) / 6.0 * (fa + 4.0 * flm + fm);
        let right = (b - m) / 6.0 * (fm + 4.0 * frm + fb);
        let delta = left + right - whole;
        if depth == 0 || delta.abs() <= 15.0 * eps {
            return left + right + delta / 15.0;
        }
        step(f, (a, fa), (lm, flm), (m, fm), left, eps / 2.0, depth - 1)
            + step(f, (m, fm), (rm, frm), (b, fb), right, eps / 2.0, depth - 1)
    }
    if b <= a {
        return 0.0;
    }
    let m = 0.5 * (a + b);
    let (fa, fm, fb) = (f(a), f(m), f(b));
    let whole = (b - a) / 6.0 * (fa + 4.0 * fm + fb);
    step(f, (a, fa), (m, fm), (b, fb), whole, eps, depth)
}

/// ∫ over a segment of length `dx` of 1 − F^n, F linear from f0 to f1.
fn segment_integral(f0: f64, f1: f64, dx: f64, n: f64) -> f64 {
    if dx <= 0.0 {
        return 0.0;
    }
    let (f0, f1) = (f0.clamp(0.0, 1.0), f1.clamp(0.0, 1.0));
    let z = if f0 > 0.0 {
        (n + 1.0) * (f1 / f0).ln()
    } else {
        f64::INFINITY
    };
    if z.abs() < 1e-4 {
        // Nearly constant F: midpoint rule, relative error below z²/24.
        let fm = 0.5 * (f0 + f1);
        dx * (1.0 - fm.powf(n))
    } else {
        // ∫ (f0 + s u)^n du over [0, dx] = (f1^(n+1) − f0^(n+1)) / ((n+1) s), s = (f1−f0)/dx.
        dx - dx * (f1.powf(n + 1.0) - f0.powf(n + 1.0)) / ((n + 1.0) * (f1 - f0))
    }
}

/// The two delay distributions of one stream that the analytic rows need.
#[derive(Debug, Clone, PartialEq)]
pub struct Analytic {
    /// Windows starting anywhere (per-phase resync; the barrier-to-barrier period).
    pub anywhere: DelayDistribution,
    /// Windows starting outside detours (the compute window after a barrier).
    pub after_barrier: DelayDistribution,
}

impl Analytic {
    /// Both distributions of `plan` for quanta `quanta_ns` (unscaled).
    pub fn from_plan(plan: &Arc<Plan>, quanta_ns: u64) -> anyhow::Result<Self> {
        Ok(Analytic {
            anywhere: DelayDistribution::from_plan(plan, quanta_ns, WindowStart::Anywhere)?,
            after_barrier: DelayDistribution::from_plan(
                plan,
                quanta_ns,
                WindowStart::OutsideDetours,
            )?,
        })
    }
}

/// The analytic row for `ranks` ranks under `mode`, or `None` for modes it does not model.
///
/// `none`: independent ranks; AvgMaxQT = q + E[max of N compute delays (windows after a
/// barrier)], AvgMaxQTBT is taken as the mean phase period q + L + E[max of N delays of windows
/// starting anywhere]. `phase`: every rank sees the same window, started anywhere by the resync.
pub fn order_stats_row(
    trace: &str,
    a: &Analytic,
    ranks: u64,
    mode: SyncMode,
    des: &DesConfig,
    scale: f64,
) -> Option<ResultRow> {
    order_stats_row_mix(trace, &[(a, ranks)], ranks, mode, des, scale)
}

/// [`order_stats_row`] for ranks on several node traces (one stream each), `parts[t]` = (the
/// distributions of trace t, how many ranks replay it): `none` takes the maximum over all
/// ranks' independent delays ([`expected_max_mix`]); `phase` the maximum over the
/// traces present of one window each (each trace resyncs to its own point); the mean compute
/// delay is the ranks' average. One part is [`order_stats_row`] exactly.
pub(crate) fn order_stats_row_mix(
    trace: &str,
    parts: &[(&Analytic, u64)],
    ranks: u64,
    mode: SyncMode,
    des: &DesConfig,
    scale: f64,
) -> Option<ResultRow> {
    let q = des.quanta_ns as f64;
    let lat = des.barrier.latency_ns(ranks);
    type Pick = fn(&Analytic) -> &DelayDistribution;
    let (after, anywhere): (Pick, Pick) = (|a| &a.after_barrier, |a| &a.anywhere);
    let mix = |pick: Pick, count: fn(u64) -> f64| {
        let v: Vec<(&DelayDistribution, f64)> =
            parts.iter().map(|&(a, n)| (pick(a), count(n))).collect();
        expected_max_mix(&v)
    };
    let mean = |pick: Pick| {
        (parts.iter())
            .map(|&(a, n)| n as f64 / ranks as f64 * pick(a).mean_ns())
            .sum::<f64>()
    };
    let (max_qt, mean_qt, period) = match mode {
        SyncMode::None => (
            mix(after, |n| n as f64),
            mean(after),
            mix(anywhere, |n| n as f64),
        ),
        SyncMode::Phase => {
            let m = mix(anywhere, |n| f64::from(u8::from(n > 0)));
            (m, mean(anywhere), m)
        }
        SyncMode::Once | SyncMode::Every(_) => return None,
    };
    let (max_qt, mean_qt, period) = (max_qt / scale, mean_qt / scale, period / scale);
    Some(ResultRow {
        trace: trace.to_string(),
        ranks,
        sync: mode.to_string(),
        phases: 0,
        avg_max_qt_ns: q + max_qt,
        avg_max_qtbt_ns: q + lat + period,
        baseline_avg_max_qt_ns: q,
        baseline_avg_max_qtbt_ns: q + lat,
        sd_qtbt_pct: slowdown_pct(q + lat + period, q + lat),
        sd_qt_pct: slowdown_pct(q + max_qt, q),
        sd_qtbt_ci95_pct: None,
        sd_qt_ci95_pct: None,
        lost_rel: (max_qt - mean_qt) / (q + mean_qt),
        emulator: Default::default(),
        period_ns: None,
        draws: None,
        interval: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Periodic noise: period P, duration d, window q with q + d < P (closed form in
    /// docs/VALIDATION.md): E[max_N] = d − P/(N+1) · [(1 − q/P)^(N+1) − (1 − (q+d)/P)^(N+1)].
    fn closed(p: f64, d: f64, q: f64, n: f64) -> f64 {
        d - p / (n + 1.0) * ((1.0 - q / p).powf(n + 1.0) - (1.0 - (q + d) / p).powf(n + 1.0))
    }

    #[test]
    fn periodic_noise_matches_the_closed_form_for_any_n() {
        let (p, d, q) = (20_000.0, 300.0, 1_000.0);
        let inj: Vec<(f64, f64)> = (0..50).map(|i| (i as f64 * p + 77.0, d)).collect();
        let f = DelayDistribution::from_injections(&inj, 50.0 * p, q, WindowStart::Anywhere);
        for n in [1.0, 2.0, 16.0, 1000.0, 1e6, 1e9] {
            let want = closed(p, d, q, n);
            let got = f.expected_max(n);
            assert!((got - want).abs() <= 1e-6 * want, "n={n}: {got} vs {want}");
        }
        assert!((f.mean_ns() - d * (q + d / 2.0) / p).abs() < 1e-6);
        assert_eq!(f.max_ns(), d);
        assert!((f.cdf(0.0) - (p - q - d) / p).abs() < 1e-12);
        assert!((f.cdf(d / 2.0) - (p - q - d / 2.0) / p).abs() < 1e-12);
        // Starting outside detours: X = d with probability q/P, else 0.
        let g = DelayDistribution::from_injections(&inj, 50.0 * p, q, WindowStart::OutsideDetours);
        for n in [1.0, 16.0, 1e4] {
            let want = d * (1.0 - (1.0 - q / p).powf(n));
            assert!((g.expected_max(n) - want).abs() <= 1e-6 * want, "n={n}");
        }
    }

    #[test]
    fn detours_pulled_in_by_a_growing_window_are_counted() {
        // Two detours 1000 apart, window 1000: a window starting just before the first one
        // grows past the second. Lap 100 000, detours at 10 000 and 11 050, 100 each.
        let inj = [(10_000.0, 100.0), (11_050.0, 100.0)];
        let f = DelayDistribution::from_injections(&inj, 100_000.0, 1_000.0, WindowStart::Anywhere);
        // X = 200 for windows that contain the first start and grow over the second:
        // t ∈ (11_050 − 1_100, 10_000) = (9_950, 10_000): length 50; plus t ∈ (10_000 − 1_000,
        // 9_950]: the second start is beyond t + 1 100 → X = 100.
        let p200 = 1.0 - f.cdf(199.999);
        assert!((p200 - 50.0 / 100_000.0).abs() < 1e-7, "{p200}");
        // Uniform on (100, 200] from inside the first detour, X = 100 on 950 + 950 ns of gaps.
        assert!((f.cdf(100.0) - f.cdf(99.999) - 1_900.0 / 100_000.0).abs() < 1e-7);
        assert_eq!(f.max_ns(), 200.0);
    }

    #[test]
    fn a_mixture_matches_the_closed_form_and_one_part_is_the_exact_maximum() {
        let (p, q) = (20_000.0, 1_000.0);
        let periodic = |d: f64| {
            let inj: Vec<(f64, f64)> = (0..50).map(|i| (i as f64 * p + 77.0, d)).collect();
            inj
        };
        let (ia, ib) = (periodic(300.0), periodic(60.0));
        for start in [WindowStart::Anywhere, WindowStart::OutsideDetours] {
            let a = DelayDistribution::from_injections(&ia, 50.0 * p, q, start);
            let b = DelayDistribution::from_injections(&ib, 50.0 * p, q, start);
            for n in [1.0, 16.0, 1e3, 1e6] {
                // One part (or a second with count 0) is the exact single maximum.
                assert_eq!(expected_max_mix(&[(&a, n)]), a.expected_max(n));
                assert_eq!(expected_max_mix(&[(&a, n), (&b, 0.0)]), a.expected_max(n));
                // The same distribution split in two parts: the maximum of all of them.
                let split = expected_max_mix(&[(&a, n / 2.0), (&a.clone(), n / 2.0)]);
                let want = a.expected_max(n);
                assert!(
                    (split - want).abs() <= 1e-8 * want,
                    "{start:?} n={n}: {split} vs {want}"
                );
            }
        }
        // Windows after a barrier (X = d w.p. q/P, else 0): with i on A and j on B,
        // E[max] = d_A (1 − (1−p)^i) + d_B (1−p)^i (1 − (1−p)^j).
        let a = DelayDistribution::from_injections(&ia, 50.0 * p, q, WindowStart::OutsideDetours);
        let b = DelayDistribution::from_injections(&ib, 50.0 * p, q, WindowStart::OutsideDetours);
        let miss: f64 = 1.0 - q / p;
        for (i, j) in [(8.0, 8.0), (1.0, 15.0), (500.0, 500.0)] {
            let want = 300.0 * (1.0 - miss.powf(i)) + 60.0 * miss.powf(i) * (1.0 - miss.powf(j));
            let got = expected_max_mix(&[(&a, i), (&b, j)]);
            assert!(
                (got - want).abs() <= 1e-8 * want,
                "{i}+{j}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn no_noise_means_no_delay() {
        let f = DelayDistribution::from_injections(&[], 1000.0, 10.0, WindowStart::Anywhere);
        assert_eq!(f.expected_max(1e9), 0.0);
    }
}
