//! Speed of `replay-bench predict`: the virtual-time simulation in rank-phases per second and
//! the analytic tier per rank count.
//!
//! `cargo bench -p jitter-predict --bench predict` runs the criterion groups. With
//! `PREDICT_ONCE=des:RANKS:PHASES` (or `order-stats:RANKS`) the binary instead times one run
//! and prints one line, so that `scripts/bench-predict.sh` can read its peak RSS as well.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use jitter_emulator::{Plan, PlanOptions, SyncMode};
use jitter_predict::{
    comm, des, simulate, Analytic, BarrierModel, CommModel, DelayDistribution, DesConfig,
    DesOutcome, Engine, TraceInput, WindowStart,
};

/// A commodity-Linux-like trace: 250 Hz tick, frequent short interrupts, rare long detours.
const REALISTIC: &str = "periodic:period=4ms,dur=uniform:2us:4us,jitter=20us\
     +poisson:rate=300/s,dur=lognormal:5us:0.8+poisson:rate=2/s,dur=exp:200us";

fn plans(duration_s: u64) -> Vec<Arc<Plan>> {
    let t = jitter_trace::synth::synthesize(
        &REALISTIC.parse().expect("valid spec"),
        1,
        duration_s * 1_000_000_000,
        1,
    )
    .expect("synthesised");
    TraceInput::new(&t, "bench", "bench", PlanOptions::ideal(), 1)
        .expect("plans")
        .plans
}

/// The simulation as a prediction runs it: the default engine, its indexes built first.
fn run(pl: &[Arc<Plan>], ranks: u64, mode: SyncMode, c: &DesConfig) -> anyhow::Result<DesOutcome> {
    let ix = des::indexes(pl, c, Engine::default());
    simulate(&comm::Solo, pl, ix.as_deref(), ranks, mode, c, &|_| {})
}

fn cfg(phases: u64) -> DesConfig {
    DesConfig {
        quanta_ns: 1_000_000,
        phases,
        ranks_per_node: 1,
        barrier: BarrierModel { stage_ns: 1_000.0 },
        comm: CommModel::OFFLOADED,
        drift_sd_ns: 20_000.0,
        seed: 1,
        window: None,
    }
}

fn des(c: &mut Criterion) {
    let pl = plans(60);
    let mut g = c.benchmark_group("des");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    for (ranks, phases) in [(2048u64, 10_000u64), (65_536, 1_000)] {
        g.throughput(Throughput::Elements(ranks * phases));
        for mode in [SyncMode::None, SyncMode::Phase] {
            g.bench_with_input(
                BenchmarkId::new(format!("{mode}"), format!("{ranks}x{phases}")),
                &(ranks, phases),
                |b, &(r, p)| b.iter(|| run(&pl, r, mode, &cfg(p)).expect("runs")),
            );
        }
    }
    g.finish();
}

fn order_stats(c: &mut Criterion) {
    let pl = plans(60);
    let mut g = c.benchmark_group("order-stats");
    g.bench_function("build 60 s trace", |b| {
        b.iter(|| Analytic::from_plan(&pl[0], 1_000_000).expect("builds"))
    });
    let d = DelayDistribution::from_plan(&pl[0], 1_000_000, WindowStart::OutsideDetours)
        .expect("builds");
    for n in [16.0, 1e6, 1e9] {
        g.bench_with_input(BenchmarkId::new("expected_max", n), &n, |b, &n| {
            b.iter(|| d.expected_max(n))
        });
    }
    g.finish();
}

criterion_group!(benches, des, order_stats);

/// One timed run for the script: `des:RANKS:PHASES` or `order-stats:RANKS`.
fn once(spec: &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    let num = |i: usize| -> u64 {
        parts
            .get(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("PREDICT_ONCE={spec}: expected des:RANKS:PHASES"))
    };
    match parts[0] {
        "des" => {
            let (ranks, phases) = (num(1), num(2));
            let mode: SyncMode = parts.get(3).unwrap_or(&"none").parse().expect("sync mode");
            let pl = plans(60);
            let t = Instant::now();
            let out = run(&pl, ranks, mode, &cfg(phases)).expect("runs");
            let s = t.elapsed().as_secs_f64();
            let rp = (ranks * out.averages.phases) as f64;
            println!(
                "des ranks={ranks} phases={} sync={mode} threads={} time_s={s:.3} \
                 rank_phases_per_s={:.3e} sd_qt_pct={:.3}",
                out.averages.phases,
                rayon::current_num_threads(),
                rp / s,
                (out.averages.avg_max_qt_ns() / out.baseline_qt_ns - 1.0) * 100.0
            );
        }
        "order-stats" => {
            let ranks = num(1);
            let pl = plans(60);
            let t = Instant::now();
            let a = Analytic::from_plan(&pl[0], 1_000_000).expect("builds");
            let build = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let m = a.after_barrier.expected_max(ranks as f64);
            let eval = t.elapsed().as_secs_f64();
            println!(
                "order-stats ranks={ranks} build_s={build:.4} eval_s={eval:.6} \
                 expected_max_ns={m:.1}"
            );
        }
        other => panic!("PREDICT_ONCE: unknown mode {other}"),
    }
}

fn main() {
    if let Ok(spec) = std::env::var("PREDICT_ONCE") {
        once(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
