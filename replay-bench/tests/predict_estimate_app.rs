//! `predict --app`'s estimate (`predict::app::estimate`) is within ×2 of what the prediction
//! costs, on a sparse and a dense trace, without resyncs: each prediction run in this
//! process on one worker thread, its CPU time set against the estimate for one thread. Its own
//! test binary, one test (nothing else runs beside the measurement), in a release build only.

use jitter_emulator::{PlanOptions, SyncMode};
use jitter_profile::histogram::{Distribution, LogHistogram};
use jitter_profile::profile::{FORMAT, VERSION};
use jitter_profile::{Call, MainLoop, Profile, Site, Slot};
use replay_bench::predict::app::{self, App};
use replay_bench::predict::{
    Algorithm, BarrierModel, CommModel, DesConfig, Engine, LoopShape, Model, Platform, PredictSpec,
    TraceInput,
};

/// CPU time of this process so far, s.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_PROCESS_CPUTIME_ID exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// A 60 s trace of `spec`, seed 3, as `jitter-trace synth` writes it (the dense one's index,
/// ≈ 170 MB, does not fit in a cache, as at scale).
fn input(spec: &str, label: &str) -> TraceInput {
    let t = jitter_trace::synth::synthesize(&spec.parse().unwrap(), 1, 60_000_000_000, 3).unwrap();
    TraceInput::new(&t, &format!("{label}.jtr"), label, PlanOptions::ideal(), 1).unwrap()
}

/// The default loop (barrier, compute, barrier) of `ranks` × `phases`, sync none, with
/// `algorithm` at the default costs (a 1 µs stage; o = l = a third of it).
fn spec(algorithm: Algorithm, engine: Engine, ranks: u64, phases: u64) -> PredictSpec {
    PredictSpec {
        ranks: vec![ranks],
        modes: vec![SyncMode::None],
        model: Model::Des,
        des: DesConfig {
            quanta_ns: 1_000_000,
            phases,
            ranks_per_node: 1,
            barrier: BarrierModel { stage_ns: 1000.0 },
            comm: CommModel {
                algorithm,
                shape: LoopShape::BarrierComputeBarrier,
                o_ns: 1000.0 / 3.0,
                l_ns: 1000.0 / 3.0,
            },
            drift_sd_ns: 0.0,
            seed: 1,
            window: None,
        },
        platform: Platform::ideal(),
        engine,
        draws: 1,
    }
}

fn slot(site: Site, mean_ns: f64) -> Slot {
    let mut h = LogHistogram::default();
    h.add(mean_ns as u64, 10);
    Slot {
        site,
        compute: Distribution::of(&h, mean_ns).unwrap(),
        call_mean_ns: 0.0,
        shared: false,
    }
}

/// A solver's step profiled at 2 ranks: a halo (Sendrecv both ways) and two allreduces.
fn profile() -> Profile {
    let on = |call| Site {
        comm_size: 2,
        bytes: 8,
        ..Site::of(call)
    };
    let sr = Site {
        peer: 1,
        root: 1,
        ..on(Call::Sendrecv)
    };
    Profile {
        format: FORMAT.into(),
        version: VERSION,
        program: "./solver".into(),
        job: "j".into(),
        ranks: 2,
        reported: Vec::new(),
        missing: Vec::new(),
        cartesian: None,
        main_loop: Some(MainLoop {
            iterations: 100,
            ranks: vec![0, 1],
            compute_share: 1.0,
            slots: vec![
                slot(sr, 500_000.0),
                slot(sr, 0.0),
                slot(on(Call::Allreduce), 300_000.0),
                slot(on(Call::Allreduce), 200_000.0),
            ],
        }),
    }
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "times the release build: cargo test --release -p replay-bench --test predict_estimate_app"
)]
fn the_app_estimate_is_within_twice_the_cost_on_sparse_and_dense_traces() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.json");
    profile().write(&path).unwrap();
    let app = App::read(&path).unwrap();
    let sparse = input("periodic:period=4ms,dur=120us", "sparse");
    let dense = input(
        "periodic:period=4ms,dur=120us+poisson:rate=20000/s,dur=exp:300ns",
        "dense",
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let (mut report, mut off) = (Vec::new(), Vec::new());
    for trace in [&sparse, &dense] {
        // Sync none (`spec`): with resyncs the symmetric ranks are one state and the job is its
        // fixed costs (the index: 0.001-0.1 s here, estimated within 3x), not a simulation.
        let s = spec(Algorithm::Auto, Engine::Indexed, 16384, 100);
        let inputs = std::slice::from_ref(trace);
        let est = pool
            .install(|| app::estimate(&app, inputs, &s))
            .unwrap()
            .seconds;
        let t0 = cpu_seconds();
        let p = pool.install(|| app::predict(&app, inputs, &s));
        let took = cpu_seconds() - t0;
        p.unwrap();
        let ratio = est / took;
        let line = format!(
            "{} none: estimate {est:.3} s, CPU {took:.3} s, ratio {ratio:.2}",
            trace.label
        );
        if !(0.5..=2.0).contains(&ratio) {
            off.push(line.clone());
        }
        report.push(line);
    }
    eprintln!("{}", report.join("\n"));
    assert!(off.is_empty(), "off by more than 2x:\n{}", off.join("\n"));
}
