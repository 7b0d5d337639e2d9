//! Validation of `replay-bench predict` against closed forms, against its own analytic tier,
//! and against the qualitative results of paper 001 and Ferreira et al. (SC08). Deterministic
//! (fixed seeds, virtual time): nothing here depends on the speed of the machine.
//!
//! Run with `--nocapture` to see the numbers quoted in docs/VALIDATION.md.

use std::sync::Arc;

use jitter_emulator::{Plan, PlanOptions, SyncMode};
use jitter_predict::*;
use jitter_trace::summary::{mean_variance, variance_of_mean};
use jitter_trace::{synth, Trace};
use rayon::prelude::*;

const MS: u64 = 1_000_000;

/// Two-sided 99 % quantile of Student's t with 3 degrees of freedom (a mean over 4 seeds).
const T3_99: f64 = 5.841;

fn trace(spec: &str, duration_ns: u64, seed: u64) -> Trace {
    synth::synthesize(&spec.parse().unwrap(), 1, duration_ns, seed).unwrap()
}

fn plans(t: &Trace) -> Vec<Arc<Plan>> {
    TraceInput::new(t, "synthetic", "synthetic", PlanOptions::ideal(), 1)
        .unwrap()
        .plans
}

fn cfg(quanta_ns: u64, phases: u64, stage_ns: f64, drift_sd_ns: f64, seed: u64) -> DesConfig {
    DesConfig {
        quanta_ns,
        phases,
        ranks_per_node: 1,
        barrier: BarrierModel { stage_ns },
        comm: CommModel::OFFLOADED,
        drift_sd_ns,
        seed,
        window: None,
    }
}

fn run(p: &[Arc<Plan>], n: u64, mode: SyncMode, c: &DesConfig) -> DesOutcome {
    let ix = des::indexes(p, c, Engine::default());
    simulate(&comm::Solo, p, ix.as_deref(), n, mode, c, &|_| {}).unwrap()
}

fn sd_qt(o: &DesOutcome) -> f64 {
    (o.averages.avg_max_qt_ns() - o.baseline_qt_ns) / o.baseline_qt_ns * 100.0
}

/// Mean and standard error of the mean.
fn mean_se(v: &[f64]) -> (f64, f64) {
    let (m, var) = mean_variance(v).expect("a non-empty sample");
    (m, variance_of_mean(var.sqrt(), v.len() as u64).sqrt())
}

/// Periodic noise (period P, duration d), window q, q + d ≤ P, per-phase resync at uniform
/// points: the window starts inside a detour with probability d/P (delay: its rest, uniform on
/// (0, d]) and holds the next detour's start with probability q/P (delay d), so
/// E[delay] = d·(q + d/2)/P and SD = d/P · (1 + d/(2q)) → d/P for d ≪ q.
#[test]
fn per_phase_sync_on_periodic_noise_costs_d_over_p() {
    let (p, d, q) = (4e6, 20e3, 1e6);
    let t = trace("periodic:period=4ms,dur=20us", 120_000 * MS, 1);
    let pl = plans(&t);
    let phases = 100_000;
    let one = run(&pl, 1, SyncMode::Phase, &cfg(MS, phases, 1000.0, 0.0, 7));
    let closed = d / p * (1.0 + d / (2.0 * q)) * 100.0;
    // Per-phase delay: d w.p. q/P, U(0, d) w.p. d/P: relative sd 1.72 per phase, so the mean of
    // 10^5 phases has a standard error of 0.54 %; 2 % is 3.7 standard errors.
    let got = sd_qt(&one);
    println!(
        "phase sync, periodic P=4ms d=20us q=1ms: SD_qt {got:.4}% closed {closed:.4}% (d/P = 0.5%)"
    );
    assert_eq!(one.averages.phases, phases);
    assert!((got / closed - 1.0).abs() < 0.02, "{got} vs {closed}");
    // Every rank replays the same window: the compute maximum does not grow with N.
    let few = cfg(MS, 2_000, 1000.0, 0.0, 7);
    let a = run(&pl, 1, SyncMode::Phase, &few);
    let b = run(&pl, 64, SyncMode::Phase, &few);
    assert_eq!(a.averages.sum_max_qt_ns, b.averages.sum_max_qt_ns);
}

/// Unsynchronised periodic noise, N ranks at independent uniform offsets (closed forms derived in
/// docs/VALIDATION.md, `## Predictor`):
/// - compute (eq. 3): a rank leaving a barrier is held by a detour in progress, so its window
///   starts outside detours and is delayed by d iff the next start falls within q:
///   E[MaxQT] − q = d · (1 − (1 − q/P)^N);
/// - phase period (bottom barrier to bottom barrier, less q and two barrier latencies): from the
///   common start at the top barrier, a rank's delay is its detour's rest (w.p. d/P, uniform on
///   (0, d]) or d (w.p. q/P): E[max] = d − P/(N+1) · [(1 − q/P)^(N+1) − (1 − (q+d)/P)^(N+1)];
///   to that adds the longest hold at the bottom barrier's exit, between 0 and d.
#[test]
fn unsynchronised_periodic_noise_matches_the_closed_forms() {
    // P is not a multiple of the phase length, so that the common time sweeps the period evenly
    // (with P = 4 q the offsets would be sampled at four points only: a resonance, real but not
    // what the closed form describes).
    let (p, d, q) = (3.7e6, 20e3, 1e6);
    // A whole number of periods, so that the replay wraps around without a short gap.
    let t = trace("periodic:period=3700us,dur=20us", 1081 * 3_700_000, 1);
    let pl = plans(&t);
    let stage = 1000.0;
    for (n, seeds) in [
        (1u64, 20u64),
        (2, 1200),
        (4, 1200),
        (8, 800),
        (16, 400),
        (64, 100),
    ] {
        let nf = n as f64;
        let lat = BarrierModel { stage_ns: stage }.latency_ns(n);
        let rows: Vec<(f64, f64)> = (0..seeds)
            .into_par_iter()
            .map(|seed| {
                let o = run(&pl, n, SyncMode::None, &cfg(MS, 400, stage, 0.0, seed));
                // A phase passes two barriers (Algorithm 1, lines 3 and 7): two latencies.
                (
                    o.averages.avg_max_qt_ns() - q,
                    o.mean_period_ns - q - 2.0 * lat,
                )
            })
            .collect();
        let (qt, qt_se) = mean_se(&rows.iter().map(|r| r.0).collect::<Vec<_>>());
        let (per, per_se) = mean_se(&rows.iter().map(|r| r.1).collect::<Vec<_>>());
        let closed_qt = d * (1.0 - (1.0 - q / p).powf(nf));
        // The phase period: the slowest rank's q of work from the common start (a start held
        // by a running detour included) — the closed form below — plus the longest hold at the
        // bottom barrier's exit, which lies in [0, d].
        let closed_per = d - p / (nf + 1.0)
            * ((1.0 - q / p).powf(nf + 1.0) - (1.0 - (q + d) / p).powf(nf + 1.0));
        println!(
            "none N={n:>3}: compute delay {qt:8.1} ns (se {qt_se:5.1}) closed {closed_qt:8.1} \
             ratio {:.4} | period delay {per:8.1} (se {per_se:5.1}) closed {closed_per:8.1} ratio {:.4}",
            qt / closed_qt,
            per / closed_per
        );
        // The offsets of one seed are one draw of the configuration the closed form averages
        // over; the standard error over seeds is kept below 0.67 %, so 2 % is ≥ 3 of them.
        assert!(
            3.0 * qt_se / closed_qt < 0.02 + 1e-9,
            "too few seeds: {qt_se}"
        );
        assert!(
            (qt / closed_qt - 1.0).abs() < 0.02,
            "N={n}: {qt} vs {closed_qt}"
        );
        assert!(
            per > closed_per * 0.98 - 3.0 * per_se && per < closed_per + d + 3.0 * per_se,
            "N={n}: period delay {per} outside [{closed_per}, {closed_per} + d]"
        );
    }
}

/// A trace with the character of a commodity Linux node: a 250 Hz tick, short frequent
/// interrupts with a log-normal tail, and rare long daemon detours.
const REALISTIC: &str = "periodic:period=4ms,dur=uniform:2us:4us,jitter=20us\
     +poisson:rate=300/s,dur=lognormal:5us:0.8+poisson:rate=2/s,dur=exp:200us";

#[test]
fn simulation_and_order_statistics_agree_on_a_realistic_trace() {
    let t = trace(REALISTIC, 60_000 * MS, 5);
    let pl = plans(&t);
    let a = Analytic::from_plan(&pl[0], MS).unwrap();
    let c = cfg(MS, 1_000, 1000.0, 0.0, 3);
    for n in [16u64, 64, 256, 1024, 4096] {
        let seeds = 4u64;
        let sds: Vec<f64> = (0..seeds)
            .map(|s| {
                sd_qt(&run(
                    &pl,
                    n,
                    SyncMode::None,
                    &DesConfig {
                        seed: s,
                        ..c.clone()
                    },
                ))
            })
            .collect();
        let (des, se) = mean_se(&sds);
        let os = order_stats_row("r", &a, n, SyncMode::None, &c, 1.0)
            .unwrap()
            .sd_qt_pct;
        println!("realistic none N={n:>5}: des SD_qt {des:7.3}% (se {se:.3}) order-stats {os:7.3}% ratio {:.4}", des / os);
        // The analytic tier is exact for independent uniform starts; the simulation samples
        // 4 seeds × 1 000 phases. The standard error from 4 seeds has 3 degrees of freedom:
        // agreement within the two-sided 99 % Student-t bound, 5.84 standard errors.
        assert!((des - os).abs() < T3_99 * se, "N={n}: {des} vs {os}");
    }
}

/// Ferreira et al. (SC08): the same 2.5 % noise ratio costs almost nothing or a factor, depending
/// on frequency and duration only.
#[test]
fn equal_noise_ratio_can_cost_nothing_or_a_factor() {
    let fine = trace("periodic:period=100us,dur=2500ns", 2_000 * MS, 1);
    let coarse = trace("periodic:period=100ms,dur=2500us", 20_000 * MS, 1);
    let c = cfg(MS, 100, 1000.0, 0.0, 11);
    let n = 10_000;
    let mut sd = Vec::new();
    for (name, t) in [("10kHz x 2.5us", &fine), ("10Hz x 2.5ms", &coarse)] {
        let pl = plans(t);
        let des = run(&pl, n, SyncMode::None, &c);
        let os = order_stats_row(
            name,
            &Analytic::from_plan(&pl[0], MS).unwrap(),
            n,
            SyncMode::None,
            &c,
            1.0,
        )
        .unwrap();
        println!(
            "Ferreira {name} at {n} ranks: des SD_qt {:.2}% SD_qtbt {:.2}% (phase period {:.3} ms) \
             | order-stats SD_qt {:.2}% SD_qtbt {:.2}%",
            sd_qt(&des),
            des_row(name, n, SyncMode::None, &des).sd_qtbt_pct,
            des.mean_period_ns / 1e6,
            os.sd_qt_pct,
            os.sd_qtbt_pct
        );
        sd.push((sd_qt(&des), des.mean_period_ns));
    }
    // Fine noise: ~10 detours of 2.5 µs in every window: 2.5 % plus at most one more detour.
    assert!(sd[0].0 > 2.4 && sd[0].0 < 2.8, "{:?}", sd[0]);
    // Coarse noise: some rank of 10 000 is hit in every phase (1 − 0.99^10000 ≈ 1): 250 %.
    assert!((sd[1].0 - 250.0).abs() < 1.0, "{:?}", sd[1]);
    let factor = sd[1].1 / sd[0].1;
    println!(
        "Ferreira: phase time ratio coarse/fine = {factor:.2}, SD ratio = {:.0}",
        sd[1].0 / sd[0].0
    );
    assert!(factor > 3.0);
}

/// Paper 001 §V: frequent-short noise (like the BG/L I/O node) vs rare-long noise (like
/// runlevel 1): unsync ≫ once ≫ phase for both; with per-phase sync the rare-long trace costs
/// less, and desynchronised it costs far more.
#[test]
fn paper_001_qualitative_results_come_out_of_the_simulation() {
    // 0.8 % in ~1 µs-spaced 8 µs detours (1 per phase) plus a few 20 µs ones.
    let fs = trace(
        "periodic:period=1ms,dur=8us,jitter=300us+poisson:rate=5/s,dur=exp:20us",
        30_000 * MS,
        2,
    );
    // 0.66 %: short interrupts plus rare detours of 600 µs on average.
    let rl = trace(
        "poisson:rate=600/s,dur=3us+poisson:rate=8/s,dur=exp:600us",
        30_000 * MS,
        2,
    );
    // Timer error sd 20 µs per re-arm (Blue Gene/L, paper 001 §V-C).
    // 2000 phases: with a 20 µs timer error per injection the sync-once drift grows to a spread
    // of about 0.7 ms (sd) over the ranks, about the phase length (the paper saw 3.8–5.3 ms).
    let c = cfg(MS, 2_000, 1000.0, 20_000.0, 5);
    let n = 1024;
    let mut got = Vec::new();
    for (name, t) in [("frequent-short", &fs), ("rare-long", &rl)] {
        let pl = plans(t);
        let sd: Vec<f64> = [SyncMode::None, SyncMode::Once, SyncMode::Phase]
            .iter()
            .map(|&m| des_row(name, n, m, &run(&pl, n, m, &c)).sd_qtbt_pct)
            .collect();
        println!(
            "paper 001 {name} at {n} ranks: SD none {:.2}% once {:.2}% phase {:.2}%",
            sd[0], sd[1], sd[2]
        );
        assert!(sd[0] > 2.0 * sd[1] && sd[1] > 2.0 * sd[2], "{name}: {sd:?}");
        got.push(sd);
    }
    assert!(
        got[1][2] < got[0][2],
        "phase: rare-long beats frequent-short"
    );
    assert!(
        got[1][0] > 10.0 * got[0][0],
        "desynchronised: rare-long loses"
    );
}

/// The full range of the issue, 16 … 65 536 ranks (minutes in a debug build: run with
/// `cargo test --release -p jitter-predict --test predict -- --ignored --nocapture`).
#[test]
#[ignore]
fn simulation_and_order_statistics_from_16_to_65536_ranks() {
    let t = trace(REALISTIC, 60_000 * MS, 5);
    let pl = plans(&t);
    let a = Analytic::from_plan(&pl[0], MS).unwrap();
    let c = cfg(MS, 1_000, 1000.0, 0.0, 3);
    let mut n = 16u64;
    while n <= 65_536 {
        let seeds = 4u64;
        let outs: Vec<DesOutcome> = (0..seeds)
            .map(|s| {
                run(
                    &pl,
                    n,
                    SyncMode::None,
                    &DesConfig {
                        seed: s,
                        ..c.clone()
                    },
                )
            })
            .collect();
        let (des, se) = mean_se(&outs.iter().map(sd_qt).collect::<Vec<_>>());
        let lat = c.barrier.latency_ns(n);
        let (per, per_se) = mean_se(
            &outs
                .iter()
                .map(|o| (o.mean_period_ns - MS as f64 - 2.0 * lat) / MS as f64 * 100.0)
                .collect::<Vec<_>>(),
        );
        let row = order_stats_row("r", &a, n, SyncMode::None, &c, 1.0).unwrap();
        let os_per = (row.avg_max_qtbt_ns - MS as f64 - lat) / MS as f64 * 100.0;
        let qtbt = mean_se(
            &outs
                .iter()
                .map(|o| des_row("r", n, SyncMode::None, o).sd_qtbt_pct)
                .collect::<Vec<_>>(),
        )
        .0;
        println!(
            "| {n} | {des:.2} ± {se:.2} | {:.2} | {:.3} | {per:.2} ± {per_se:.2} | {os_per:.2} | {qtbt:.2} |",
            row.sd_qt_pct,
            des / row.sd_qt_pct
        );
        // The tiers are not the same model: the simulation carries each rank's point on the
        // trace from phase to phase (the detour that held it at a barrier is behind it), the
        // analytic tier redraws it uniformly every phase. Their systematic difference measured
        // 1.8 % of SD at 16 384 ranks and 0.35 % at 65 536 (docs/VALIDATION.md); up to 2 % of
        // it is allowed on top of the statistical bound.
        assert!(
            (des - row.sd_qt_pct).abs() < T3_99 * se + 0.02 * row.sd_qt_pct,
            "N={n}: {des} vs {}",
            row.sd_qt_pct
        );
        n *= 4;
    }
}
