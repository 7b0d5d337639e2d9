//! Statistics of synthetic traces against their closed forms.

use jitter_trace::stats::{injectability, Stats, TraceStats};
use jitter_trace::synth::{synthesize, Spec};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Periodic noise (period P, duration d, phase φ ≤ P − d) over k periods: k detours,
    /// rate 1/P, noise ratio d/P, every quantile d (within the histogram's 0.1 %), MAD 0.
    #[test]
    fn periodic_stats_equal_the_closed_form(
        period_us in 2u64..10_000,
        dur_frac in 0.001f64..0.999,
        phase_frac in 0.0f64..1.0,
        k in 1u64..2_000,
        streams in 1u32..3,
    ) {
        let p = period_us * 1_000;
        let d = ((p as f64 * dur_frac) as u64).clamp(1, p - 1);
        let phase = ((p - d) as f64 * phase_frac) as u64;
        let spec: Spec = format!("periodic:period={p}ns,dur={d}ns,phase={phase}ns").parse().unwrap();
        let t = synthesize(&spec, streams, k * p, 42).unwrap();
        let all = TraceStats::of_trace(&t);
        for s in all.streams.iter().chain(std::iter::once(&all.overall)) {
            let n = if s.cpu.is_some() { k } else { k * u64::from(streams) };
            prop_assert_eq!(s.count, n);
            let rate = 1e9 / p as f64;
            prop_assert!((s.detours_per_s - rate).abs() <= rate * 1e-12, "{} vs {rate}", s.detours_per_s);
            let ratio = d as f64 / p as f64;
            prop_assert!((s.noise_ratio - ratio).abs() <= ratio * 1e-12, "{} vs {ratio}", s.noise_ratio);
            prop_assert_eq!(s.min_ns, d);
            prop_assert_eq!(s.max_ns, d);
            prop_assert_eq!(s.mean_ns, d as f64);
            prop_assert_eq!(s.median_ns, d);
            prop_assert_eq!(s.p99_99_ns, d);
            prop_assert_eq!(s.mad_ns, 0);
            prop_assert_eq!(s.under_5us, if d < 5_000 { 1.0 } else { 0.0 });
        }
        // S·d > O exactly when injectable: all or nothing.
        let o = d as f64 * 2.0;
        prop_assert_eq!(injectability(&t.streams, o, 2.0).unwrap().detours, 0.0);
        prop_assert_eq!(injectability(&t.streams, o, 2.5).unwrap().detours, 1.0);
    }
}

/// Poisson noise with fixed run-time r at rate λ over T: a detour survives the union exactly when
/// its start is more than r after the previous start, so the count is ~ λT·e^(−λr) (5 σ bound).
#[test]
fn poisson_counts_are_within_five_sigma() {
    let spec: Spec = "poisson:rate=50000/s,dur=1us".parse().unwrap();
    let t = synthesize(&spec, 4, 2_000_000_000, 11).unwrap();
    for s in &t.streams {
        let st = Stats::of_stream(s);
        // Overlapping or touching detours are united; with r = 1 us and λ = 50 000/s the chance
        // a detour starts within 1 us of the previous start is 1 − e^(−0.05) ≈ 4.9 %.
        let expected = 100_000.0 * (-0.05f64).exp();
        let sigma = 100_000f64.sqrt();
        assert!(
            (st.count as f64 - expected).abs() < 5.0 * sigma,
            "{} vs {expected}",
            st.count
        );
        assert_eq!(st.noise_ns, s.records.iter().map(|r| r.run_ns).sum::<u64>());
        assert!(st.min_ns >= 1_000);
    }
}
