//! Benchmark (a): the probe loop's period against a minimal counter-read loop, side by side on
//! one pinned CPU. Usage: `loop_period [CPU] [ROUNDS]`. Prints one line per round and the median
//! ratio.

use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use jitter_collect::clock::{read_counter, Clock};
use jitter_collect::counter::{CounterProfile, DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};
use jitter_collect::{cpuset, probe};

/// Median per-read period of batches of back-to-back reads (batches hit by a detour fall out).
fn minimal_loop_ticks(batches: usize) -> f64 {
    const READS: u64 = 4096;
    let mut per: Vec<f64> = (0..batches)
        .map(|_| {
            let t0 = read_counter();
            let mut x = 0u64;
            for _ in 0..READS {
                x = x.wrapping_add(std::hint::black_box(read_counter()));
            }
            std::hint::black_box(x);
            (read_counter() - t0) as f64 / (READS + 1) as f64
        })
        .collect();
    per.sort_by(f64::total_cmp);
    per[per.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let cpu: u32 = args.get(1).map_or(Ok(0), |s| s.parse())?;
    let rounds: usize = args.get(2).map_or(Ok(5), |s| s.parse())?;
    cpuset::pin_current_thread(&[cpu])?;
    let clock = Clock::calibrate(Duration::from_millis(200))?;
    let profile = CounterProfile::measure(PROFILE_READS);
    let threshold = profile.threshold_ticks(DEFAULT_THRESHOLD_FACTOR);
    let ns = clock.ticks_to_ns_f64(1);
    println!(
        "cpu {cpu}, {} kHz, t_min {:.2} ns, threshold {:.1} ns",
        clock.khz(),
        profile.loop_ticks * ns,
        threshold as f64 * ns
    );
    let stop = AtomicBool::new(false);
    let mut ratios = Vec::new();
    for r in 0..rounds {
        let minimal = minimal_loop_ticks(50_000) * ns;
        let deadline = read_counter() + clock.ns_to_ticks(1_000_000_000);
        let stats = probe::run(threshold, deadline, &stop, |_, _| ControlFlow::Continue(()));
        let probe_ns = stats.loop_ticks() * ns;
        let ratio = probe_ns / minimal;
        ratios.push(ratio);
        println!(
            "round {r}: minimal loop {minimal:.2} ns/read, probe loop {probe_ns:.2} ns/iteration, \
             ratio {ratio:.3}"
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median ratio probe/minimal: {:.3}",
        ratios[ratios.len() / 2]
    );
    Ok(())
}
