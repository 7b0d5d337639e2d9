//! Write and read throughput of the `.jtr` format on realistic traces.
//!
//! Run: `cargo bench -p jitter-trace --bench format`. Besides criterion's timings (records/s as
//! "elem/s"), it prints the encoded size in bytes per record for each trace.

use std::hint::black_box;
use std::io::Cursor;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jitter_trace::format::write_to;
use jitter_trace::load::read_from;
use jitter_trace::synth::{synthesize, Spec};
use jitter_trace::Trace;

/// The traces measured: a name and how to make it.
fn traces() -> Vec<(&'static str, Trace)> {
    // 1 M detours on one CPU: Poisson gaps of ~100 us, log-normal run-times around 2 us.
    let simple: Spec = "poisson:rate=10000/s,dur=lognormal:2us:0.3"
        .parse()
        .unwrap();
    // A mixture like a commodity node: 250 Hz timer ticks (~20 us, jittered), frequent short
    // detours, rare long ones (daemons), on 4 CPUs, ~1 M detours in all.
    let mixture: Spec = "periodic:period=4ms,dur=20us,jitter=5us,dur_jitter=8us\
                         +poisson:rate=2500/s,dur=lognormal:1500ns:0.5\
                         +poisson:rate=20/s,dur=exp:300us"
        .parse()
        .unwrap();
    vec![
        (
            "poisson-1M",
            synthesize(&simple, 1, 100_000_000_000, 1).unwrap(),
        ),
        (
            "mixture-4cpu",
            synthesize(&mixture, 4, 90_000_000_000, 2).unwrap(),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("jtr");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for (name, trace) in traces() {
        let n = trace.record_count() as u64;
        let bytes = write_to(Vec::new(), &trace).unwrap();
        eprintln!(
            "{name}: {n} records, {} bytes, {:.3} bytes/record",
            bytes.len(),
            bytes.len() as f64 / n as f64
        );
        g.throughput(Throughput::Elements(n));
        g.bench_function(format!("write/{name}"), |b| {
            b.iter(|| write_to(Vec::with_capacity(bytes.len()), black_box(&trace)).unwrap())
        });
        g.bench_function(format!("read/{name}"), |b| {
            b.iter(|| read_from(Cursor::new(black_box(&bytes))).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
