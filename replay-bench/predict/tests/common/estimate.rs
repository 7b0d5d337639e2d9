//! What the estimate tests share (`predict_estimate`, `predict_estimate_app`): one process's
//! CPU time, the 60 s traces and the default loop's spec.

#![allow(dead_code)]

use jitter_emulator::{PlanOptions, SyncMode};
use jitter_predict::{
    Algorithm, BarrierModel, CommModel, DesConfig, Engine, LoopShape, Model, Platform, PredictSpec,
    TraceInput,
};

/// CPU time of this process so far, s.
pub fn cpu_seconds() -> f64 {
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
pub fn input(spec: &str, label: &str) -> TraceInput {
    let t = jitter_trace::synth::synthesize(&spec.parse().unwrap(), 1, 60_000_000_000, 3).unwrap();
    TraceInput::new(&t, &format!("{label}.jtr"), label, PlanOptions::ideal(), 1).unwrap()
}

/// The default loop (barrier, compute, barrier) of `ranks` × `phases`, sync none, with
/// `algorithm` at the default costs (a 1 µs stage; o = l = a third of it).
pub fn spec(algorithm: Algorithm, engine: Engine, ranks: u64, phases: u64) -> PredictSpec {
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
        precision: None,
    }
}

/// The sparse (`periodic:period=4ms,dur=120us`) and dense (that plus
/// `poisson:rate=20000/s,dur=exp:300ns`) 60 s traces.
pub fn sparse_and_dense() -> [TraceInput; 2] {
    [
        input("periodic:period=4ms,dur=120us", "sparse"),
        input(
            "periodic:period=4ms,dur=120us+poisson:rate=20000/s,dur=exp:300ns",
            "dense",
        ),
    ]
}

/// One worker thread: the estimate for one thread is set against its CPU time.
pub fn one_thread() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
}
