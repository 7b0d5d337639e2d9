//! What drives a prediction: the share of the predicted slowdown due to each size class of
//! detours. The same prediction (engine, offsets, seed, platform) runs again on the trace
//! without the detours of a class and longer (their time quiet, `transform::drop_at_least`);
//! the share is how much of the slowdown that removes. A share carried by a handful of detours
//! is said so: another stretch of trace would give another answer.

use jitter_emulator::SyncMode;
use jitter_trace::Trace;

use indicatif::ProgressBar;

use super::input::TraceInput;
use super::prediction::{Point, TraceIndexes};
use super::simulation::DesOutcome;
use super::spec::PredictSpec;
use crate::comm::Solo;
use jitter_report::metrics::slowdown_pct;
pub use jitter_report::report::{Drivers, SizeClass};

/// The size classes: detours of at least these lengths, ns.
pub(crate) const THRESHOLDS_NS: [u64; 4] = [10_000, 100_000, 1_000_000, 10_000_000];

/// The size classes of `trace`'s first `k` streams (those a prediction replays).
fn classes_of(trace: &Trace, k: usize) -> Vec<(u64, u64, f64, f64)> {
    let recs = || trace.streams.iter().take(k).flat_map(|s| s.records.iter());
    let (n, noise) = recs().fold((0u64, 0u64), |(n, t), r| (n + 1, t + r.run_ns));
    THRESHOLDS_NS
        .iter()
        .filter_map(|&x| {
            let (c, t) = recs()
                .filter(|r| r.run_ns >= x)
                .fold((0u64, 0u64), |(c, t), r| (c + 1, t + r.run_ns));
            // A class of every detour or of none says nothing.
            (c > 0 && c < n).then(|| {
                (
                    x,
                    c,
                    c as f64 / n.max(1) as f64,
                    t as f64 / noise.max(1) as f64,
                )
            })
        })
        .collect()
}

/// The drivers of `input` (prepared from `trace`) at `ranks` ranks under `mode`, with the
/// spec's engine, offsets and platform.
pub fn drivers(
    trace: &Trace,
    input: &TraceInput,
    spec: &PredictSpec,
    ranks: u64,
    mode: SyncMode,
) -> anyhow::Result<Drivers> {
    anyhow::ensure!(
        input.background.is_none(),
        "--drivers predicts the trace alone (not with --platform-noise)"
    );
    // One draw of the spec's seed, in this process, through the prediction's point.
    let quiet = ProgressBar::hidden();
    let run = |input: &TraceInput| {
        let point = Point {
            comm: &Solo,
            input,
            indexes: &TraceIndexes::of(input, spec),
            ranks,
            mode,
            progress: &quiet,
        };
        point.simulate(&spec.des, false)
    };
    let all = run(input)?;
    let sd = |o: &DesOutcome| slowdown_pct(o.averages.avg_max_qtbt_ns(), o.baseline_qtbt_ns);
    let sd_all = sd(&all);
    let k = spec.des.ranks_per_node as usize;
    let mut classes = Vec::new();
    for (threshold_ns, detours, detour_share, noise_share) in classes_of(trace, k) {
        let (filtered, _) = jitter_trace::transform::drop_at_least(trace, threshold_ns)?;
        let without = TraceInput::new(
            &filtered,
            &input.info.path,
            &input.label,
            spec.platform.options(),
            spec.des.ranks_per_node,
        )?;
        let sd_without = sd(&run(&without)?);
        classes.push(SizeClass {
            threshold_ns,
            detours,
            detour_share,
            noise_share,
            sd_share: if sd_all > 0.0 {
                ((sd_all - sd_without) / sd_all).clamp(0.0, 1.0)
            } else {
                0.0
            },
        });
    }
    Ok(Drivers {
        trace: input.label.clone(),
        ranks,
        sync: mode.to_string(),
        sd_qtbt_pct: sd_all,
        coverage: all.emulator.max_progress,
        classes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;
    use jitter_emulator::PlanOptions;
    use jitter_trace::{Detour, Stream};

    /// A trace of small periodic detours and three 5 ms stalls.
    fn stalls() -> Trace {
        let mut ds: Vec<Detour> = (0..10_000u64)
            .map(|i| Detour {
                start_ns: i * 1_000_000 + 500_000,
                run_ns: 2_000,
            })
            .collect();
        let stalls = [2_000_000_000u64, 5_000_000_000, 8_000_000_000].map(|at| Detour {
            start_ns: at + 700_000,
            run_ns: 5_000_000,
        });
        // The stalls replace the small detours they cover.
        ds.retain(|d| {
            (stalls.iter()).all(|s| d.start_ns + d.run_ns <= s.start_ns || d.start_ns >= s.end_ns())
        });
        ds.extend(stalls);
        ds.sort_by_key(|d| d.start_ns);
        let mut t = Trace {
            streams: vec![Stream::from_detours(0, 0, 10_000_000_000, &ds).unwrap()],
            ..Trace::default()
        };
        t.sync_header();
        t
    }

    #[test]
    fn a_few_long_stalls_are_named_as_what_drives_a_wide_prediction() {
        let trace = stalls();
        let input = TraceInput::new(&trace, "s.jtr", "s", PlanOptions::ideal(), 1).unwrap();
        let spec =
            PredictSpec::ideal_offloaded(vec![4096], vec![SyncMode::None], 300, Engine::Indexed);
        let d = drivers(&trace, &input, &spec, 4096, SyncMode::None).unwrap();
        // Classes: ≥ 10 µs, ≥ 100 µs and ≥ 1 ms hold the three stalls alone (≥ 10 ms: none).
        assert_eq!(
            d.classes.iter().map(|c| c.threshold_ns).collect::<Vec<_>>(),
            vec![10_000, 100_000, 1_000_000]
        );
        let c = d.classes[2];
        assert_eq!(c.detours, 3);
        assert!(
            (c.noise_share - 15e6 / (15e6 + 2e3 * (10_000.0 - 15.0))).abs() < 1e-9,
            "{c:?}"
        );
        // At 4096 independent ranks some rank meets a stall in most phases: the stalls carry
        // almost all of the slowdown; the 2 µs detours cost at most 0.2 % of a phase each.
        assert!(c.sd_share > 0.9, "{d:?}");
        let line = d.line();
        assert!(line.contains("of detours ≥ 1.00 ms (3 detours"), "{line}");
        assert!(line.contains("driven by a handful of events"), "{line}");
    }

    #[test]
    fn the_drivers_of_the_replayed_streams_read_alone_are_those_of_the_whole_trace() {
        // Three streams, two replayed: the third is read for the facts, never kept.
        let mut trace = stalls();
        let mut second = trace.streams[0].clone();
        second.cpu = 1;
        let third: jitter_trace::synth::Spec = "periodic:period=1ms,dur=20us".parse().unwrap();
        let third = jitter_trace::synth::synthesize(&third, 1, 10_000_000_000, 2).unwrap();
        let mut third = third.streams[0].clone();
        third.cpu = 2;
        trace.streams.extend([second, third]);
        trace.sync_header();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jtr");
        jitter_trace::write_trace(&path, &trace).unwrap();
        let read = jitter_trace::read_replayed(&path, |i, _| i < 2).unwrap();
        assert!(read.trace.streams[2].records.is_empty());
        let mut spec =
            PredictSpec::ideal_offloaded(vec![512], vec![SyncMode::None], 100, Engine::Indexed);
        spec.des.ranks_per_node = 2;
        let input = TraceInput::new(&trace, "s.jtr", "s", PlanOptions::ideal(), 2).unwrap();
        let whole = drivers(&trace, &input, &spec, 512, SyncMode::None).unwrap();
        let part = drivers(&read.trace, &input, &spec, 512, SyncMode::None).unwrap();
        assert_eq!(whole, part);
        assert_eq!(whole.classes.len(), 3, "{whole:?}");
    }
}
