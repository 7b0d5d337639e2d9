//! Honest intervals: over many deterministic seeds, the 95 % interval of a prediction made in
//! the precision mode (`predict` with a `PrecisionPlan`: a pilot of draws plans the rest, Stein's two-stage
//! rule) covers the value it estimates in a band around 95 % whose width comes from the binomial
//! distribution (`PLANS`, `band_probability`: 93–97 % over 1000 seeds), on traces whose value is
//! known: periodic noise under its closed forms, and, where no closed form is exact, a long
//! reference run committed below with how it was computed. On the same draws, the intervals
//! that ignore the phases' autocorrelation or the draws' own variance fail.
//!
//! Virtual time, fixed seeds: nothing here depends on the machine. `--nocapture` prints the
//! figures quoted in docs/VALIDATION.md; `cargo test --release -p jitter-predict --test coverage
//! -- --ignored --nocapture` recomputes the references.

use std::sync::Arc;

use indicatif::ProgressBar;
use jitter_emulator::{Plan, PlanOptions, SyncMode};
use jitter_predict::comm::Solo;
use jitter_predict::precision_mode::{phases_in_trace, phases_per_draw, WARMUP_PHASES};
use jitter_predict::*;
use jitter_trace::interval::{DrawSet, MeanInterval, Source};
use jitter_trace::precision::MIN_DRAWS;
use jitter_trace::summary::t975;
use jitter_trace::{synth, Trace};
use rayon::prelude::*;

const MS: u64 = 1_000_000;

/// One configuration with a known value of SD eq. (3) (and, for a reference, eq. (2)).
struct Case {
    name: &'static str,
    /// The trace (`jitter-trace synth` grammar), its length and seed.
    trace: &'static str,
    duration_ns: u64,
    ranks: u64,
    mode: SyncMode,
    /// What the precision mode aims at.
    precision: &'static str,
    /// SD eq. (3) and eq. (2) it estimates, percent (eq. 2 `None` where only eq. 3 is known).
    truth: (f64, Option<f64>),
}

fn trace(c: &Case) -> Trace {
    synth::synthesize(&c.trace.parse().unwrap(), 1, c.duration_ns, 1).unwrap()
}

fn input(c: &Case) -> TraceInput {
    TraceInput::new(&trace(c), "synthetic", c.name, PlanOptions::ideal(), 1).unwrap()
}

/// The offloaded barrier of 1 µs stages, q = 1 ms, on the ideal platform (the closed forms'
/// loop), seed `seed`.
fn spec(c: &Case, seed: u64) -> PredictSpec {
    PredictSpec {
        ranks: vec![c.ranks],
        modes: vec![c.mode],
        model: Model::Des,
        des: DesConfig {
            quanta_ns: MS,
            phases: 1,
            ranks_per_node: 1,
            barrier: BarrierModel { stage_ns: 1000.0 },
            comm: CommModel::OFFLOADED,
            drift_sd_ns: 0.0,
            seed,
            window: None,
        },
        platform: Platform::ideal(),
        engine: Engine::Indexed,
        draws: 1,
        precision: None,
    }
}

/// Seeds of replicate r: each draws from its own range (seed + d, d < 10⁶).
fn seed_of(r: u64) -> u64 {
    1 + r * 1_000_000
}

/// The pilot's draws: `JB_PILOT` (to measure its effect), else the default.
fn pilot() -> u64 {
    std::env::var("JB_PILOT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MIN_DRAWS)
}

/// The precision mode's row of replicate r.
fn precise(c: &Case, input: &TraceInput, r: u64) -> jitter_report::report::ResultRow {
    let plan = PrecisionPlan {
        precision: c.precision.parse().unwrap(),
        max_time: std::time::Duration::from_secs(3600),
        max_phases: PrecisionPlan::DEFAULT_MAX_PHASES,
        pilot: pilot(),
    };
    let p = predict(
        &Solo,
        std::slice::from_ref(input),
        &PredictSpec {
            precision: Some(plan),
            ..spec(c, seed_of(r))
        },
        &ProgressBar::hidden(),
        &|_| {},
    )
    .unwrap();
    p.des.unwrap().results.remove(0)
}

/// Share of `hits` with its Wilson 95 % interval, in percent.
fn share(hits: usize, n: usize) -> (f64, f64, f64) {
    let (p, n) = (hits as f64 / n as f64, n as f64);
    let z = 1.959_964;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    (100.0 * p, 100.0 * (centre - half), 100.0 * (centre + half))
}

/// Coverage of the precision mode's eq. (3) (and eq. (2) where known) intervals over
/// `replicates` seeds, with the mean number of draws.
fn coverage(c: &Case, replicates: u64) -> (usize, Option<usize>, f64) {
    let input = input(c);
    let rows: Vec<_> = (0..replicates)
        .into_par_iter()
        .map(|r| precise(c, &input, r))
        .collect();
    let hit = |sd: f64, h: Option<f64>, truth: f64| h.is_some_and(|h| (sd - truth).abs() <= h);
    let qt = rows
        .iter()
        .filter(|r| hit(r.sd_qt_pct, r.sd_qt_ci95_pct, c.truth.0))
        .count();
    let qtbt = c.truth.1.map(|t| {
        rows.iter()
            .filter(|r| hit(r.sd_qtbt_pct, r.sd_qtbt_ci95_pct, t))
            .count()
    });
    let draws = rows
        .iter()
        .map(|r| r.interval.as_ref().unwrap().draws as f64)
        .sum::<f64>()
        / rows.len() as f64;
    (qt, qtbt, draws)
}

/// Per-phase MaxQT series of each of `draws` draws of replicate r (after the warm-up phase
/// the precision mode leaves out, as it runs them): (phases, mean, variance, batch-means
/// interval) of each, in ns.
fn draw_series(c: &Case, plans: &[Arc<Plan>], r: u64, draws: u64) -> Vec<(f64, MeanInterval, f64)> {
    let fits = phases_in_trace(&[input(c)], MS);
    let n = phases_per_draw(c.ranks, fits) + WARMUP_PHASES;
    let base = spec(c, seed_of(r)).des;
    let ix = des::indexes(plans, &base, Engine::Indexed);
    (0..draws)
        .map(|d| {
            let cfg = DesConfig {
                phases: n,
                seed: base.seed + d,
                ..base.clone()
            };
            let out = simulate(
                &comm::Solo,
                plans,
                ix.as_deref(),
                c.ranks,
                c.mode,
                &cfg,
                &|_| {},
            )
            .unwrap();
            let b = &out.averages.batches[0];
            (b.count() as f64, b.interval(), b.variance())
        })
        .collect()
}

/// The three intervals of SD eq. (3) over the same draws: the draws' own (this crate's), batch
/// means within the draws pooled over them (the draws' variance ignored), and every phase as an
/// independent value (the autocorrelation ignored).
fn three_intervals(series: &[(f64, MeanInterval, f64)]) -> [MeanInterval; 3] {
    let to_sd = |i: MeanInterval| i.mapped(-100.0, 100.0 / MS as f64);
    let mut draws = DrawSet::new();
    for (n, b, _) in series {
        draws.add(b.mean, *n);
    }
    let ours = draws.interval();
    let w: f64 = series.iter().map(|s| s.0).sum();
    // Batch means pooled: Σ w_d² · (h_d / t_d)², df Σ (b_d − 1).
    let (mut v, mut df) = (0.0, 0u64);
    for (n, b, _) in series {
        let se = b.half_width / t975(b.df);
        v += (n / w) * (n / w) * se * se;
        df += b.df;
    }
    let pooled = MeanInterval {
        mean: ours.mean,
        half_width: t975(df) * v.sqrt(),
        df,
        source: Source::Batches,
    };
    // Every phase independent: the variance of all phases about the grand mean over all of them.
    let ss: f64 = (series.iter())
        .map(|(n, b, var)| (n - 1.0) * var + n * (b.mean - ours.mean) * (b.mean - ours.mean))
        .sum();
    let naive = MeanInterval {
        mean: ours.mean,
        half_width: t975(w as u64 - 1) * (ss / (w - 1.0) / w).sqrt(),
        df: w as u64 - 1,
        source: Source::Batches,
    };
    [to_sd(ours), to_sd(pooled), to_sd(naive)]
}

/// Per-phase resync on periodic noise: SD eq. (3) = d/P · (1 + d/(2q)) exactly (see
/// `predict.rs`), phases independent. A hundred periods, draws of 256 phases: on a trace only a
/// few draws long the engine's value falls below the closed form (five periods, draws of 14
/// phases: 0.4688 % over 2·10⁵ draws), which the closed form cannot describe.
const PHASE_SYNC: Case = Case {
    name: "phase sync, periodic",
    trace: "periodic:period=4ms,dur=20us",
    duration_ns: 400 * MS,
    ranks: 4,
    mode: SyncMode::Phase,
    precision: "30%",
    truth: (0.5 * (1.0 + 0.01), None),
};

/// Two ranks without resyncs on the same noise: how their detours line up is fixed for a
/// whole draw (its offsets), so the draws differ by far more than their phases say; the
/// closed form of independent ranks is off by 1.7 % here (the inspection paradox,
/// docs/VALIDATION.md), so the value is a long run's: `references` (2·10⁵ draws).
const TWO_RANKS: Case = Case {
    name: "two ranks, sync none, periodic",
    trace: "periodic:period=3700us,dur=20us",
    duration_ns: 27 * 3_700_000,
    ranks: 2,
    mode: SyncMode::None,
    precision: "10%",
    truth: (0.929436, Some(0.937057)),
};

/// The same two ranks on the same noise with detours of 10–30 µs (`dur_jitter`): the draws'
/// slowdowns no longer sit on the lattice of whole detours a draw's span holds, which a strictly
/// periodic trace puts them on (`references`, 2·10⁵ draws).
const TWO_RANKS_VARIED: Case = Case {
    name: "two ranks, sync none, periodic of varied length",
    trace: "periodic:period=3700us,dur=20us,dur_jitter=10us",
    duration_ns: 27 * 3_700_000,
    ranks: 2,
    mode: SyncMode::None,
    precision: "10%",
    truth: (0.942731, Some(0.947633)),
};

/// Heavy-tailed noise, 8 ranks without resyncs: frequent short detours and rare log-normal
/// ones (σ = 1.3: one in a hundred over 20 times the median), 0.1 s of it (draws of 74 phases),
/// whose few longest detours make the slowdown, against a long run (`references`, 2·10⁵
/// draws).
const HEAVY: Case = Case {
    name: "8 ranks, sync none, heavy-tailed",
    trace: "poisson:rate=3000/s,dur=exp:2us+poisson:rate=40/s,dur=lognormal:40us:1.3",
    duration_ns: 100 * MS,
    ranks: 8,
    mode: SyncMode::None,
    precision: "10%",
    truth: (21.937891, Some(24.312331)),
};

/// A long run of `c`: the precision mode with `draws` draws (seeds from 10⁹, apart from every
/// replicate's), its SD eq. (3) and eq. (2) with their half-widths.
fn reference(c: &Case, draws: u64) -> jitter_report::report::ResultRow {
    let input = input(c);
    let fits = phases_in_trace(std::slice::from_ref(&input), MS);
    let phases = phases_per_draw(c.ranks, fits) + WARMUP_PHASES;
    let plan = PrecisionPlan {
        precision: "0.001%".parse().unwrap(),
        max_time: std::time::Duration::from_secs(36_000),
        max_phases: draws * phases,
        pilot: MIN_DRAWS,
    };
    let p = predict(
        &Solo,
        std::slice::from_ref(&input),
        &PredictSpec {
            precision: Some(plan),
            ..spec(c, 1_000_000_000)
        },
        &ProgressBar::hidden(),
        &|_| {},
    )
    .unwrap();
    p.des.unwrap().results.remove(0)
}

#[test]
#[ignore = "the long runs behind the committed references (release build: minutes)"]
fn references() {
    // Committed: two ranks 0.929436 % ± 0.000842 (eq. 3), 0.937057 % ± 0.000800 (eq. 2);
    // of varied length 0.942731 % ± 0.000749, 0.947633 % ± 0.000753; heavy-tailed
    // 21.937891 % ± 0.017298, 24.312331 % ± 0.014374 (2·10⁵ draws each, 2026-12-07).
    for c in [&TWO_RANKS, &TWO_RANKS_VARIED, &HEAVY] {
        if std::env::var("JB_REFERENCE").is_ok_and(|v| !c.name.contains(&v)) {
            continue;
        }
        let r = reference(c, 200_000);
        println!(
            "{}: SD eq.3 {:.6} % ± {:.6}, eq.2 {:.6} % ± {:.6} over {} draws",
            c.name,
            r.sd_qt_pct,
            r.sd_qt_ci95_pct.unwrap_or(f64::NAN),
            r.sd_qtbt_pct,
            r.sd_qtbt_ci95_pct.unwrap_or(f64::NAN),
            r.interval.unwrap().draws
        );
    }
}

/// Replicates of a case and the band its coverage must fall in: 1000 in 93–97 %, or, for a
/// case whose draws are long (a debug build's seconds), 500 in 92.4–97.6 %.
/// [`band_probability`] gives the chance a true 95 % lands inside (asserted ≥ 0.99) and the
/// chance an interval that covers only 90 % does (printed: it must be small for the test to
/// catch a broken interval).
const PLANS: [(u64, f64, f64); 2] = [(1000, 93.0, 97.0), (500, 92.4, 97.6)];

/// P(lo ≤ 100 · X / n ≤ hi) for X ~ Binomial(n, p): the closed form of the test's band.
fn band_probability(n: u64, p: f64, lo: f64, hi: f64) -> f64 {
    // log C(n, k) p^k (1 − p)^(n − k) by the log-gamma-free recurrence over k.
    let mut log_pmf = n as f64 * (1.0 - p).ln();
    let mut total = 0.0;
    for k in 0..=n {
        if k > 0 {
            log_pmf += ((n - k + 1) as f64 / k as f64).ln() + (p / (1.0 - p)).ln();
        }
        let share = 100.0 * k as f64 / n as f64;
        if (lo..=hi).contains(&share) {
            total += log_pmf.exp();
        }
    }
    total
}

/// Each case's coverage of eq. (3), and of eq. (2) where known, asserted within its band
/// (`plan`, one of [`PLANS`]).
fn assert_covers(cases: &[&Case], plan: (u64, f64, f64)) {
    let (replicates, lo, hi) = plan;
    let inside = band_probability(replicates, 0.95, lo, hi);
    let broken = band_probability(replicates, 0.90, lo, hi);
    println!(
        "{replicates} replicates, band {lo}–{hi} %: a true 95 % lands inside with probability \
         {inside:.4}, a true 90 % with {broken:.2e}"
    );
    assert!(inside >= 0.99 && broken < 0.05, "{inside} {broken}");
    for c in cases {
        if std::env::var("JB_CASE").is_ok_and(|v| !c.name.contains(&v)) {
            continue;
        }
        let (qt, qtbt, draws) = coverage(c, replicates);
        let n = replicates as usize;
        for (eq, hits, truth) in [("3", Some(qt), Some(c.truth.0)), ("2", qtbt, c.truth.1)] {
            let (Some(hits), Some(truth)) = (hits, truth) else {
                continue;
            };
            let (p, wlo, whi) = share(hits, n);
            println!(
                "{}, SD eq.{eq}: {hits} of {n} intervals cover {truth:.6} %: {p:.1} % (Wilson \
                 95 %: {wlo:.1} – {whi:.1}), {draws:.1} draws on average",
                c.name
            );
            assert!((lo..=hi).contains(&p), "{}, eq. {eq}: {p} %", c.name);
        }
    }
}

#[test]
fn the_precision_mode_covers_what_it_estimates() {
    assert_covers(&[&TWO_RANKS, &HEAVY], PLANS[0]);
    assert_covers(&[&PHASE_SYNC], PLANS[1]);
}

#[test]
#[ignore = "one more case for docs/VALIDATION.md (about as long as the three above)"]
fn the_precision_mode_covers_detours_of_varied_length() {
    assert_covers(&[&TWO_RANKS_VARIED], PLANS[0]);
}

/// On the same sixteen draws of each of `n` replicates of `c` (a pilot's), the three intervals'
/// coverage of eq. (3): the draws', batch means pooled, every phase independent.
fn three_coverages(c: &Case, n: u64) -> Vec<f64> {
    let plans = input(c).plans;
    let all: Vec<[MeanInterval; 3]> = (0..n)
        .into_par_iter()
        .map(|r| three_intervals(&draw_series(c, &plans, r, MIN_DRAWS)))
        .collect();
    (0..3)
        .map(|k| {
            let hits = all.iter().filter(|i| i[k].covers(c.truth.0)).count();
            let (p, lo, hi) = share(hits, n as usize);
            let name = ["draws", "batch means pooled", "phases independent"][k];
            println!("{}: {name}: {p:.1} % ({lo:.1} – {hi:.1})", c.name);
            p
        })
        .collect()
}

/// With two ranks on a periodic trace, the draws' interval covers; batch means within the
/// draws, pooled (the draws' own variance ignored), and every phase taken as independent (the
/// autocorrelation ignored; the draws' spread counted as phases') are far too narrow.
#[test]
fn intervals_that_ignore_a_source_fail() {
    // 400 replicates: a true 95 % lies in 92–98 % with probability 0.995.
    let cover = three_coverages(&TWO_RANKS, 400);
    assert!((92.0..=98.0).contains(&cover[0]), "{cover:?}");
    assert!(cover[1] < 60.0 && cover[2] < 88.0, "{cover:?}");
}

/// On heavy tails the same two are far too wide (large detours make neighbouring phases of a
/// draw anti-correlated).
#[test]
#[ignore = "for docs/VALIDATION.md: the other way the alternatives fail (tens of seconds)"]
fn on_heavy_tails_the_alternatives_are_too_wide() {
    let cover = three_coverages(&HEAVY, 400);
    assert!((92.0..=98.0).contains(&cover[0]), "{cover:?}");
    assert!(cover[1] > 98.5 && cover[2] > 98.5, "{cover:?}");
}
