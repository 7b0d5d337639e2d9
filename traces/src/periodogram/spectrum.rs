//! The periodogram of occurrence times and its harmonic families (see the module above).

use rustfft::{num_complex::Complex, FftPlanner};

use super::period::*;
use super::segments::{BinnedSegment, Segments};

/// The significant periods of a source seen on one or more CPUs, strongest family first (by
/// the summed power of its peaks); empty when no period is significant.
pub fn periods(cpus: &[Occurrences]) -> Vec<Period> {
    let windows: Vec<(u64, u64)> = cpus.iter().map(|c| (c.begin_ns, c.end_ns)).collect();
    let mut segments = Segments::new(&windows);
    for (i, c) in cpus.iter().enumerate() {
        for &t in c.times_ns {
            segments.add(i, t);
        }
    }
    periods_binned(&segments.binned().collect::<Vec<_>>())
}

/// [`periods`] of the kept segments of [`Segments`], binned (the same periods, to the bit, as
/// the occurrence times binned into them give).
pub fn periods_binned(cpus: &[BinnedSegment]) -> Vec<Period> {
    let span = cpus
        .iter()
        .map(|c| c.end_ns.saturating_sub(c.begin_ns))
        .max()
        .unwrap_or(0);
    let n: usize = cpus.iter().map(|c| c.count).sum();
    if n < MIN_OCCURRENCES || span == 0 {
        return Vec::new();
    }
    let bins = ((span / MIN_BIN_NS) as usize + 1)
        .next_power_of_two()
        .clamp(64, MAX_BINS);
    let dt = MIN_BIN_NS as f64;
    let fft = FftPlanner::<f64>::new().plan_fft_forward(bins);
    let half = bins / 2;
    let mut power = vec![0.0f64; half + 1];
    let mut buf = vec![Complex::new(0.0, 0.0); bins];
    let mut norm = 0.0;
    // The Hann window of the last length used (segments of one CPU share it) and its Σw².
    let mut window: Vec<f64> = Vec::new();
    let mut sum_w2 = 0.0;
    for c in cpus {
        // The Hann window spans this CPU's data; the rest of the series is zero padding.
        let used =
            (((c.end_ns.saturating_sub(c.begin_ns)) as f64 / dt).ceil() as usize).clamp(1, bins);
        let count = c.count;
        if count == 0 {
            continue;
        }
        buf.iter_mut().for_each(|x| *x = Complex::new(0.0, 0.0));
        for (x, &k) in buf.iter_mut().zip(&c.counts) {
            x.re = f64::from(k);
        }
        if window.len() != used {
            window = (0..used)
                .map(|i| {
                    let s = (std::f64::consts::PI * (i as f64 + 0.5) / used as f64).sin();
                    s * s
                })
                .collect();
            sum_w2 = window.iter().map(|w| w * w).sum();
        }
        let mean = count as f64 / used as f64;
        for (x, w) in buf[..used].iter_mut().zip(&window) {
            x.re = (x.re - mean) * w;
        }
        // Poisson expectation of |X_k|²: rate per bin times Σw².
        norm += count as f64 / used as f64 * sum_w2;
        fft.process(&mut buf);
        for (p, x) in power.iter_mut().zip(&buf) {
            *p += x.norm_sqr();
        }
    }
    power.iter_mut().for_each(|p| *p /= norm);
    let length_ns = bins as f64 * dt;
    let k_min = (MIN_CYCLES * length_ns / span as f64).ceil() as usize;
    let k_min = k_min.max(2);
    if k_min >= half {
        return Vec::new();
    }
    let tested = (half - k_min) as f64;
    let threshold = (tested / FALSE_ALARM).ln();
    let peaks = significant_peaks(&power, k_min..half, threshold);
    // Harmonic families, fundamentals in ascending frequency.
    let mut families: Vec<(f64, f64, f64, u32)> = Vec::new(); // (bin, power, summed, count)
    'peak: for &(k, p) in &peaks {
        for f in families.iter_mut() {
            if is_harmonic(k, f.0) {
                f.2 += p;
                f.3 += 1;
                continue 'peak;
            }
        }
        families.push((k, p, p, 1));
    }
    // A family found at a harmonic of a weaker fundamental moves down to it; families that then
    // share a fundamental merge.
    let mut merged: Vec<(f64, f64, f64, u32)> = Vec::new();
    for (k, p, sum, count) in families {
        let (k, p) = match subharmonic(&power, k, p, k_min) {
            Some(g) => (g, power[g.round() as usize]),
            None => (k, p),
        };
        match merged
            .iter_mut()
            .find(|f| (f.0 - k).abs() <= harmonic_tolerance(1.0, f.0.min(k)))
        {
            Some(f) => {
                f.1 = f.1.max(p);
                f.2 += sum;
                f.3 += count;
            }
            None => merged.push((k, p, sum, count)),
        }
    }
    let mut families = merged;
    families.sort_by(|a, b| b.2.total_cmp(&a.2));
    families.truncate(MAX_PERIODS);
    families
        .into_iter()
        .map(|(k, p, _, h)| Period {
            period_ns: length_ns / k,
            power: p,
            harmonics: h,
        })
        .collect()
}

/// The significant peaks among the bins `bins` of `power` (normalised): above `threshold` and
/// the largest within ±[`NEIGHBOURHOOD`] (at least ±4 bins), as (interpolated bin, power).
fn significant_peaks(
    power: &[f64],
    bins: std::ops::Range<usize>,
    threshold: f64,
) -> Vec<(f64, f64)> {
    let half = bins.end;
    let mut peaks = Vec::new();
    for k in bins {
        let p = power[k];
        if p <= threshold {
            continue;
        }
        let reach = ((k as f64 * NEIGHBOURHOOD).ceil() as usize).max(4);
        let lo = k.saturating_sub(reach).max(1);
        let hi = (k + reach).min(half);
        if (lo..=hi).any(|j| power[j] > p || (power[j] == p && j < k)) {
            continue;
        }
        peaks.push((interpolate(power, k), p));
    }
    peaks
}

/// Whether bin `k` is within the tolerance of a multiple (≥ 2) of the fundamental at `f`.
fn is_harmonic(k: f64, f: f64) -> bool {
    let m = (k / f).round();
    m >= 2.0 && (k - m * f).abs() <= harmonic_tolerance(m, f)
}

/// Harmonics of a candidate fundamental examined by [`subharmonic`].
const SUBHARMONIC_TERMS: usize = 8;

/// Fewest harmonics of a candidate fundamental that must lie in the spectrum.
const SUBHARMONIC_MIN_TERMS: usize = 6;

/// Normalised power above which a harmonic bin counts as a line (Exp(1) noise, the largest of
/// three bins: exceeded with probability 5.4 %).
const LINE_POWER: f64 = 4.0;

/// The lowest fundamental `g = k/m` (m ≥ 2, `g` ≥ `k_min`) of which the peak at `k` is the
/// m-th harmonic and whose own harmonics that are not harmonics of `k` (j = 1..8, j not a
/// multiple of m) carry lines: at least 3/4 of them, and at least [`SUBHARMONIC_MIN_TERMS`]
/// examined. Such lines exist only if the train's period is 1/g; a pure train of period 1/k
/// has none there, and noise puts 6 of 8 over [`LINE_POWER`] with probability under 10⁻⁶.
/// Another family's lines fall on a regular subset (every 2nd, 3rd … harmonic), under 3/4.
/// Their median power must also reach a quarter of the peak's (half its amplitude): a train
/// that skips every fifth occurrence repeats every 5 periods, but its weak lines there do not
/// make 5 periods its dominant period.
fn subharmonic(power: &[f64], k: f64, peak: f64, k_min: usize) -> Option<f64> {
    let half = power.len() - 1;
    let near = |x: f64| {
        let b = x.round() as usize;
        (b.saturating_sub(1)..=(b + 1).min(half))
            .map(|i| power[i])
            .fold(0.0, f64::max)
    };
    let m_max = (k / k_min as f64).floor() as usize;
    (2..=m_max).rev().find_map(|m| {
        let g = k / m as f64;
        let mut terms: Vec<f64> = (1..=SUBHARMONIC_TERMS)
            .filter(|j| j % m != 0)
            .map(|j| j as f64 * g)
            .filter(|&x| x + 1.0 < half as f64)
            .map(near)
            .collect();
        if terms.len() < SUBHARMONIC_MIN_TERMS {
            return None;
        }
        let lines = terms.iter().filter(|&&p| p > LINE_POWER).count();
        terms.sort_by(f64::total_cmp);
        let median = terms[terms.len() / 2];
        (4 * lines >= 3 * terms.len() && 4.0 * median >= peak).then_some(g)
    })
}

/// How far (in bins) the `m`-th harmonic of a fundamental at bin `k` may lie from `m·k`: the
/// fundamental's own interpolation error (½ bin) times `m`, plus one bin, and the relative
/// neighbourhood.
fn harmonic_tolerance(m: f64, k: f64) -> f64 {
    0.5 * m + 1.0 + NEIGHBOURHOOD * m * k
}

/// The peak's position between bins: the vertex of the parabola through the log powers of the
/// bin and its neighbours (exact for a Gaussian line shape, close for the Hann window's).
fn interpolate(power: &[f64], k: usize) -> f64 {
    if k == 0 || k + 1 >= power.len() {
        return k as f64;
    }
    let ln = |p: f64| p.max(1e-300).ln();
    let (a, b, c) = (ln(power[k - 1]), ln(power[k]), ln(power[k + 1]));
    let den = a - 2.0 * b + c;
    if den >= 0.0 {
        return k as f64;
    }
    k as f64 + (0.5 * (a - c) / den).clamp(-0.5, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, Exp, Normal};

    const S: u64 = 1_000_000_000;

    /// Occurrences every `period` ns with Gaussian jitter of `sd` ns around each nominal time.
    fn periodic(period: f64, sd: f64, span: u64, seed: u64) -> Vec<u64> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let noise = Normal::new(0.0, sd).unwrap();
        let phase = rng.random_range(0.0..period);
        let mut out = Vec::new();
        let mut k = 0.0;
        loop {
            let t = phase + k * period + noise.sample(&mut rng);
            if t >= span as f64 {
                break;
            }
            if t >= 0.0 {
                out.push(t as u64);
            }
            k += 1.0;
        }
        out
    }

    fn poisson(rate_per_s: f64, span: u64, seed: u64) -> Vec<u64> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let gap = Exp::new(rate_per_s / 1e9).unwrap();
        let mut t = 0.0;
        let mut out = Vec::new();
        loop {
            t += gap.sample(&mut rng);
            if t >= span as f64 {
                return out;
            }
            out.push(t as u64);
        }
    }

    fn one(times: &[u64], span: u64) -> Vec<Period> {
        periods(&[Occurrences {
            begin_ns: 0,
            end_ns: span,
            times_ns: times,
        }])
    }

    #[test]
    fn a_jittered_10ms_train_reports_10ms_once_with_its_harmonics_grouped() {
        for seed in 0..10 {
            // ±0.5 ms (5 %) of jitter around each nominal time, 2 s of it.
            let t = periodic(10e6, 0.5e6, 2 * S, seed);
            let p = one(&t, 2 * S);
            assert_eq!(p.len(), 1, "seed {seed}: {p:?}");
            assert!(
                (p[0].period_ns - 10e6).abs() <= 0.05 * 10e6,
                "seed {seed}: {p:?}"
            );
            assert!(p[0].harmonics >= 2, "seed {seed}: {p:?}");
        }
    }

    #[test]
    fn a_drifting_train_reports_its_mean_gap() {
        // Each gap 10 ms + 60 µs wake-up latency ± 20 µs: the period is the mean gap, 10.06 ms.
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let lat = Normal::new(60e3, 20e3).unwrap();
        let mut t = 1e6;
        let mut times = Vec::new();
        while t < 5e9 {
            times.push(t as u64);
            t += 10e6 + lat.sample(&mut rng);
        }
        let p = one(&times, 5 * S);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!((p[0].period_ns - 10.06e6).abs() < 0.005 * 10.06e6, "{p:?}");
    }

    #[test]
    fn two_sources_10ms_and_10_5ms_are_two_periods() {
        let mut t = periodic(10e6, 50e3, 4 * S, 1);
        t.extend(periodic(10.5e6, 50e3, 4 * S, 2));
        let p = one(&t, 4 * S);
        let mut got: Vec<f64> = p.iter().take(2).map(|p| p.period_ns).collect();
        got.sort_by(f64::total_cmp);
        assert_eq!(got.len(), 2, "{p:?}");
        assert!((got[0] - 10e6).abs() < 0.01 * 10e6, "{p:?}");
        assert!((got[1] - 10.5e6).abs() < 0.01 * 10.5e6, "{p:?}");
    }

    #[test]
    fn a_weak_train_seen_at_a_high_harmonic_reports_its_fundamental() {
        // Unattributed residuals: a strong 4 ms train, a weak 10 ms one (its fundamental under
        // the threshold, some of its harmonics over it) and Poisson arrivals.
        for seed in 0..10 {
            let mut t = periodic(4e6, 30e3, 2 * S, seed);
            t.extend(periodic(10e6, 30e3, 2 * S, seed + 100));
            t.extend(poisson(1000.0, 2 * S, seed + 200));
            let p = one(&t, 2 * S);
            let near = |q: &Period, x: f64| (q.period_ns - x).abs() < 0.01 * x;
            assert!(p.iter().any(|q| near(q, 4e6)), "seed {seed}: {p:?}");
            assert!(
                p.iter().all(|q| near(q, 4e6) || near(q, 10e6)),
                "seed {seed}: {p:?}"
            );
        }
    }

    #[test]
    fn a_train_skipping_every_fifth_occurrence_keeps_its_period() {
        let t: Vec<u64> = periodic(10e6, 10e3, 2 * S, 4)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % 5 != 0)
            .map(|(_, t)| t)
            .collect();
        let p = one(&t, 2 * S);
        assert!((p[0].period_ns - 10e6).abs() < 0.01 * 10e6, "{p:?}");
    }

    #[test]
    fn poisson_arrivals_have_no_period() {
        // p = 1e-3 per series: 50 fixed seeds expect 0.05 false alarms.
        for seed in 0..50 {
            let t = poisson(100.0, 5 * S, seed);
            assert_eq!(one(&t, 5 * S), [], "seed {seed}");
        }
    }

    #[test]
    fn cpus_add_their_powers_and_too_few_occurrences_give_nothing() {
        let a = periodic(4e6, 20e3, S, 5);
        let b: Vec<u64> = periodic(4e6, 20e3, S, 6)
            .iter()
            .map(|t| t + 7 * S)
            .collect();
        let p = periods(&[
            Occurrences {
                begin_ns: 0,
                end_ns: S,
                times_ns: &a,
            },
            Occurrences {
                begin_ns: 7 * S,
                end_ns: 8 * S,
                times_ns: &b,
            },
        ]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!((p[0].period_ns - 4e6).abs() < 0.01 * 4e6, "{p:?}");
        // A strict train's normalised power is about 2n/3 on one CPU; over CPUs with n each
        // the powers add and so does their Poisson level: still about 2n/3.
        let single = one(&a, S);
        let expect = 2.0 * a.len() as f64 / 3.0;
        assert!((single[0].power / expect - 1.0).abs() < 0.2, "{single:?}");
        assert!((p[0].power / expect - 1.0).abs() < 0.2, "{p:?}");
        assert_eq!(one(&a[..7], S), []);
        assert_eq!(one(&[], S), []);
    }

    #[test]
    fn a_long_window_is_cut_into_segments_whose_powers_add() {
        // 60 s: three segments of 20 s; a 4 ms train is found, Poisson arrivals give nothing.
        let t = periodic(4e6, 20e3, 60 * S, 8);
        let p = one(&t, 60 * S);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!((p[0].period_ns - 4e6).abs() < 0.001 * 4e6, "{p:?}");
        assert_eq!(one(&poisson(250.0, 60 * S, 9), 60 * S), []);
    }

    #[test]
    fn a_period_longer_than_an_eighth_of_the_window_is_not_reported() {
        let t = periodic(200e6, 1e3, S, 1);
        assert_eq!(one(&t, S), []);
    }
}
