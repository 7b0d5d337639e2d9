//! `predict`'s estimate (`budget::estimate`) is within ×2 of what the prediction costs, for
//! every collective, on a sparse and a dense trace, in either engine: each prediction is run in
//! this process on one worker thread and its CPU time (not its wall time: the machine may be
//! shared) set against the estimate for one thread. Its own test binary, one test, so that
//! nothing else runs beside the measurement; it runs in a release build only (`cargo test
//! --release -p jitter-predict --test predict_estimate`), where it is calibrated.

use indicatif::ProgressBar;

#[path = "common/estimate.rs"]
mod estimate;

use estimate::{cpu_seconds, one_thread, sparse_and_dense, spec};
use jitter_predict::{budget, Algorithm, Engine};

// The estimate is calibrated on the release build (what users run); a test build runs the
// simulation's dependencies unoptimised, several times slower.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "times the release build: cargo test --release -p jitter-predict --test predict_estimate"
)]
fn the_estimate_is_within_twice_the_cost_for_every_collective_density_and_engine() {
    let [sparse, dense] = sparse_and_dense();
    let pool = one_thread();
    let mut report = Vec::new();
    let mut off = Vec::new();
    for (engine, ranks, phases) in [(Engine::Indexed, 16384, 100), (Engine::Walk, 2048, 100)] {
        for trace in [&sparse, &dense] {
            for alg in [
                Algorithm::Offloaded,
                Algorithm::Dissemination,
                Algorithm::RecursiveDoubling,
                Algorithm::BinomialTree,
            ] {
                let s = spec(alg, engine, ranks, phases);
                let inputs = std::slice::from_ref(trace);
                let est = budget::estimate(inputs, &s, 1, 0, 1).seconds;
                let t0 = cpu_seconds();
                let p = pool.install(|| {
                    jitter_predict::predict(
                        &jitter_predict::comm::Solo,
                        inputs,
                        &s,
                        &ProgressBar::hidden(),
                        &|_| {},
                    )
                });
                let took = cpu_seconds() - t0;
                p.unwrap();
                let ratio = est / took;
                let line = format!(
                    "{engine:?} {} {}: estimate {est:.3} s, CPU {took:.3} s, ratio {ratio:.2}",
                    trace.label,
                    alg.name()
                );
                if !(0.5..=2.0).contains(&ratio) {
                    off.push(line.clone());
                }
                report.push(line);
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(off.is_empty(), "off by more than 2x:\n{}", off.join("\n"));
}
