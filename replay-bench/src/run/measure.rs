//! Steps 4–5b of a run: the baseline without jitter (sequential design), the run (with the
//! emulator when there is a trace), and the most the trace can slow one phase down.

use std::sync::Arc;

use jitter_emulator::{Fraction, Plan};

use super::results::slowdowns;
use super::state::{Measured, Prepared};
use crate::bench::baseline::{self, Baseline, Reference};
use crate::bench::mpi::Mpi;
use crate::bench::phases::{run_phases, Blocks, LoopOutcome, LoopSpec, NoJitter, Until};
use crate::bench::replay::{Replay, ReplayTotals, VirtualReplay};
use crate::bench::windows::RankWindow;
use crate::flags::run::{Design, RunArgs};
use jitter_predict::comm::{agree, Collective};

/// Steps 4–5b: the baseline without jitter (sequential design), the run (with the emulator
/// when there is a trace), and the most the trace can slow one phase down.
pub(crate) fn measure(comm: &Mpi, args: &RunArgs, p: &Prepared) -> anyhow::Result<Measured> {
    let rank = comm.rank();
    let scale = p.replay.scale.get();
    let paired = p.design == Design::Paired;
    let blocks = paired.then_some(Blocks {
        phases: args.block_phases,
        seed: p.seed,
    });
    let spec =
        |until: Until, keep: bool, fraction: Option<Fraction>, blocks: Option<Blocks>| LoopSpec {
            iterations: p.iterations,
            warmup_phases: args.warmup,
            until,
            fraction,
            scale,
            keep_samples: keep,
            virtual_ranks: args.virtual_ranks,
            blocks,
        };
    // The paired design gives its baseline blocks as much as its jitter blocks: `--phases N`
    // and `--period T` are the jitter's share, as the sequential design's run is.
    let share = if paired { 2 } else { 1 };
    let max_ns = (args.max_time_ns() as f64 * scale).round() as u64;
    let until = |period_ns: u64| match (args.phases, args.precision) {
        (Some(n), _) => Until::Phases(n.saturating_mul(share)),
        (None, Some(hw)) => Until::Precision {
            half_width_pct: hw,
            max_ns,
        },
        (None, None) if args.until_verdict && paired => Until::Verdict { max_ns },
        (None, None) => Until::Elapsed((period_ns as f64 * scale).round() as u64 * share),
    };
    let clock = &p.setup.clock;

    // 4. Baseline without jitter.
    let reference = match &args.baseline {
        Baseline::Quanta => Some(Reference {
            avg_max_qt_ns: args.quanta.ns as f64,
            avg_max_qtbt_ns: args.quanta.ns as f64,
        }),
        Baseline::File(f) => Some(baseline::from_report(
            f,
            comm.size() as u64,
            args.quanta.ns,
        )?),
        Baseline::Measured => None,
    };
    let measured_baseline = if reference.is_none() && !paired {
        let period = args.baseline_period.unwrap_or(args.period);
        Some(run_phases(
            comm,
            clock,
            &spec(until(period), false, None, None),
            &mut NoJitter,
        ))
    } else {
        None
    };
    let reference = reference.unwrap_or_else(|| {
        let b = measured_baseline
            .as_ref()
            .map(|o| o.averages)
            .unwrap_or_default();
        Reference {
            avg_max_qt_ns: b.avg_max_qt_ns(),
            avg_max_qtbt_ns: b.avg_max_qtbt_ns(),
        }
    });

    // 5. The run, with the emulator when there is a trace.
    let keep = args.phases_csv.is_some() && rank == 0;
    let mut windows = Vec::new();
    let (outcome, totals) = match &p.plan {
        None => (
            run_phases(
                comm,
                clock,
                &spec(until(args.period), keep, None, blocks),
                &mut NoJitter,
            ),
            ReplayTotals::default(),
        ),
        Some(plan) => {
            let spec = spec(until(args.period), keep, Some(p.replay.fraction), blocks);
            let (out, totals, w) = replay_run(comm, args, p, plan, &spec)?;
            windows = w;
            (out, totals)
        }
    };

    // 5b. The most the trace can slow one phase down.
    let bound = match &p.plan {
        Some(plan) => trace_bound(
            comm,
            plan,
            &outcome,
            measured_baseline.as_ref(),
            reference,
            scale,
        ),
        None => [0.0, 0.0],
    };
    Ok(Measured {
        reference,
        measured_baseline,
        outcome,
        totals,
        windows,
        bound,
    })
}

/// Step 5 with a trace: the phases under this rank's emulator (or its virtual ranks'), its
/// totals, and the windows of jitter it measured (none for virtual ranks).
fn replay_run(
    comm: &Mpi,
    args: &RunArgs,
    p: &Prepared,
    plan: &Arc<Plan>,
    spec: &LoopSpec,
) -> anyhow::Result<(LoopOutcome, ReplayTotals, Vec<RankWindow>)> {
    let (rank, clock) = (comm.rank(), &p.setup.clock);
    comm.barrier();
    if args.virtual_ranks > 1 {
        // Every virtual rank is its own node: its own offset under --sync none.
        let first = rank as u64 * args.virtual_ranks;
        let started = VirtualReplay::start(plan, first, args.virtual_ranks, p.schedule, clock);
        let mut replay = agree(comm, started)?;
        let out = run_phases(comm, clock, spec, &mut replay);
        let totals = agree(comm, replay.stop())?;
        return Ok((out, totals, Vec::new()));
    }
    let node = p.trace.as_ref().map_or(0, |t| t.timeline);
    let started = Replay::start(plan, node, p.schedule, (clock, args.inject.mode));
    let mut replay = agree(comm, started)?;
    let out = run_phases(comm, clock, spec, &mut replay);
    let marks = replay.windows().to_vec();
    let end_ns = jitter_emulator::injector::mono_ns();
    let totals = agree(comm, replay.stop())?;
    let windows = crate::bench::windows::with_injections(
        &marks,
        (totals.injected, totals.injected_ns),
        end_ns,
    );
    Ok((out, totals, windows))
}

/// 5b. The most the trace can slow one phase down: each rank's worst window of its plan, the
/// largest over ranks; a measured slowdown far above it is the platform's, not the trace's
/// (checked on rank 0). The window is the longer of the reference phase and the measured one
/// (rank 0 holds the averages), scaled: a phase exposed longer can meet more detours.
/// Returns [excess, window] (scaled ns, max over ranks).
fn trace_bound(
    comm: &Mpi,
    plan: &Arc<Plan>,
    outcome: &LoopOutcome,
    measured_baseline: Option<&LoopOutcome>,
    reference: Reference,
    scale: f64,
) -> [f64; 2] {
    let reference_ns = slowdowns(outcome, measured_baseline, reference)
        .0
        .avg_max_qtbt_ns;
    let mut window = [reference_ns.max(outcome.averages.avg_max_qtbt_ns()) * scale];
    comm.all_max(&mut window);
    let mut bound = [
        max_excess_ns(plan, window[0]).map_or(f64::INFINITY, |x| x as f64),
        window[0],
    ];
    comm.all_max(&mut bound);
    bound
}

/// The largest excess (scaled ns) a phase of `phase_ns` (scaled) can take from `plan`'s
/// injections over one lap; `None` when the lap has too many injections to index (over 4 M) or
/// the injections leave no useful bound.
pub(crate) fn max_excess_ns(plan: &std::sync::Arc<Plan>, phase_ns: f64) -> Option<u64> {
    let opts = plan.options();
    let lap = (plan.period_ns() as f64 * opts.fraction * opts.scale).round() as u64;
    let mut spans = Vec::new();
    for inj in plan.cursor(0) {
        if inj.due_ns >= lap {
            break;
        }
        if spans.len() >= 4 << 20 {
            return None;
        }
        spans.push((inj.due_ns, inj.span_ns));
    }
    jitter_report::metrics::InjectionWindows::new(&spans, lap)
        .max_excess_ns(phase_ns.round() as u64)
}
