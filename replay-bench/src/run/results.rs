//! Rank 0's report of a run: its configuration beside what it measured, the warnings, the
//! slowdowns with their intervals (paired or sequential) and the result row.

use anyhow::{bail, Context};

use super::state::{Gathered, Measured, Prepared};
use crate::bench::baseline::{Baseline, Reference};
use crate::bench::mpi::Mpi;
use crate::bench::noise;
use crate::bench::phases::LoopOutcome;
use crate::flags::run::RunArgs;
use jitter_predict::comm::Collective;
use jitter_predict::rank_layout::Placement;
use jitter_report::metrics::{paired_slowdown, sequential_slowdown, PhaseAverages, Slowdown};
use jitter_report::report::{
    BaselineDetails, Config, EmulatorTotals, PairedDetails, Report, ReportKind, ResultRow,
    RunDetails, TraceBound,
};

/// The configuration of a run with what it measured beside its results, and the baseline's
/// averages (its own run, sequential, or its blocks, paired).
pub(crate) fn run_config(
    args: &RunArgs,
    p: &Prepared,
    m: &Measured,
    g: &Gathered,
) -> (Config, Option<PhaseAverages>) {
    let outcome = &m.outcome;
    let base = match (&outcome.paired, &m.measured_baseline) {
        (Some(pr), _) => Some((
            pr.baseline,
            pr.baseline_sd_max_qt_ns,
            pr.baseline_sd_max_qtbt_ns,
        )),
        (None, Some(b)) => Some((b.averages, b.sd_max_qt_ns, b.sd_max_qtbt_ns)),
        (None, None) => None,
    };
    let details = RunDetails {
        iterations: p.iterations,
        ns_per_iteration: p.ns_per_iteration,
        elapsed_ns: outcome.elapsed_ns,
        stopped_by: outcome.stopped_by.to_string(),
        noise_probe_ns: args.noise_probe,
        platform_noise_max_ns: g.platform_noise_max_ns,
        checksum: outcome.checksum,
        mpi_library: mpi::environment::library_version()
            .map(|v| v.lines().next().unwrap_or("").trim().to_string())
            .unwrap_or_default(),
        sd_max_qt_ns: outcome.sd_max_qt_ns,
        sd_max_qtbt_ns: outcome.sd_max_qtbt_ns,
        design: p.design.to_string(),
        baseline: base.map(|(a, sd_qt, sd_qtbt)| BaselineDetails {
            phases: a.phases,
            sd_max_qt_ns: sd_qt,
            sd_max_qtbt_ns: sd_qtbt,
            lost_rel: a.lost_rel(),
        }),
        paired: outcome.paired.as_ref().map(|pr| PairedDetails {
            block_phases: args.block_phases,
            pairs: pr.pairs.len() as u64,
            precision_target_pct: args.precision,
            max_time_ns: (args.precision.is_some() || args.until_verdict)
                .then(|| args.max_time_ns()),
            until_verdict: args.until_verdict,
            precision_reached_pct: pr.half_width_pct(),
            blocks: pr.pairs.clone(),
        }),
        virtual_ranks_per_process: (args.virtual_ranks > 1).then_some(args.virtual_ranks),
        trace_bound: (p.plan.is_some() && m.bound[0].is_finite()).then_some(TraceBound {
            excess_ns: m.bound[0],
            window_ns: m.bound[1],
        }),
        windows: g.windows.clone(),
        inject: args.inject.mode,
        payments: g.payments.clone(),
    };
    let config = Config {
        trace: p.trace.as_ref().map(|t| t.info.clone()),
        ranks_per_node: args.ranks_per_node.k as usize,
        quanta_ns: args.quanta.ns,
        period_ns: if args.phases.is_some() {
            0
        } else {
            args.period
        },
        phases: args.phases.unwrap_or(0),
        warmup_phases: args.warmup,
        scale: p.replay.scale.get(),
        fraction: p.replay.fraction.get(),
        timer: p.replay.cost.timer,
        seed: p.seed,
        baseline: args.baseline.to_string(),
        platform: "mpi".into(),
        run: Some(details),
        predict: None,
    };
    (config, base.map(|b| b.0))
}

/// Rank 0: the report of the run (configuration, calibrations, warnings, the result row) and
/// the baseline's averages; an error when the slowdown fails its plausibility check.
pub(crate) fn build_report(
    comm: &Mpi,
    args: &RunArgs,
    p: &Prepared,
    m: &Measured,
    g: Gathered,
) -> anyhow::Result<(Report, Option<PhaseAverages>)> {
    let (trace, outcome, measured_baseline) = (&p.trace, &m.outcome, &m.measured_baseline);
    let emulator = g.emulator;
    let (config, base) = run_config(args, p, m, &g);
    let virtual_ranks = args.virtual_ranks > 1;
    let kind = if virtual_ranks {
        ReportKind::VirtualRanks
    } else {
        ReportKind::Run
    };
    let mut report = Report::new(kind, config);
    if virtual_ranks {
        report.warnings.push(format!(
            "{} barrier-free virtual ranks per process: qt only (MaxQTBT is MaxQT)",
            args.virtual_ranks
        ));
    }
    report.calibration = g.calibration;
    if let Some(t) = &trace {
        report.warnings.extend(t.warnings.iter().cloned());
        report.warnings.extend(jitter_emulator::placement::note(
            args.ranks_per_node.k,
            t.info.streams as u64,
        ));
        for c in &report.calibration {
            // Each rank against the trace it replays (its node group's of a set).
            let replayed = match t.info.nodes.as_slice() {
                [] => t.info.noise_ratio,
                nodes => Placement::new(
                    args.ranks_per_node.k,
                    nodes.len() * args.ranks_per_node.k as usize,
                )
                .map_or(t.info.noise_ratio, |p| {
                    nodes[p.trace(c.rank.max(0) as u64)].noise_ratio
                }),
            };
            if let Some(w) = noise::warning(c.rank as usize, c.platform_noise_ratio, replayed) {
                report.warnings.push(w);
            }
        }
        if emulator.dropped > 0 {
            report.warnings.push(format!(
                "{} detour(s) ({} ns scaled) shorter than the overhead O were not injected",
                emulator.dropped, emulator.dropped_ns
            ));
        }
        if emulator.merged > 0 {
            report.warnings.push(format!(
                "{} detour(s) followed a sleep shorter than M and were merged into their predecessor",
                emulator.merged
            ));
        }
    }
    if outcome.averages.phases < 10 {
        report.warnings.push(format!(
            "only {} measured phases: the averages are not reliable",
            outcome.averages.phases
        ));
    }
    let (reference, slowdowns) = slowdowns(outcome, measured_baseline.as_ref(), m.reference);
    if let Some(w) = faster_than_calibrated(args, &reference) {
        report.warnings.push(w);
    }
    if let Some(p) = &outcome.paired {
        if p.pairs.len() < 2 {
            report.warnings.push(format!(
                "only {} complete block pair(s): no confidence interval (lengthen --period or \
                 shorten --block-phases)",
                p.pairs.len()
            ));
        }
        if outcome.stopped_by == crate::bench::phases::StopReason::MaxTime {
            report.warnings.push(match args.precision {
                Some(hw) => format!(
                    "--max-time ran out before the precision {hw} pp: reached ± {:.3} pp",
                    p.half_width_pct()
                ),
                None => format!(
                    "--max-time ran out before the intervals were narrower than half their \
                     slowdowns (reached ± {:.3} pp): a comparison with a prediction may get no \
                     verdict; a longer --max-time, or a machine with less noise of its own, \
                     narrows them",
                    p.half_width_pct()
                ),
            });
        }
    }
    report.results.push(result_row(
        trace.as_ref().map_or("", |t| t.info.label.as_str()),
        comm.size() as u64 * args.virtual_ranks,
        if trace.is_some() {
            args.sync.to_string()
        } else {
            "baseline".into()
        },
        outcome,
        reference,
        slowdowns,
        emulator,
    ));
    if let Some(why) = report.implausible() {
        bail!(
            "implausible result: {why}; nothing printed or saved — re-run on a quiet machine or \
             on isolated CPUs"
        );
    }
    Ok((report, base))
}

/// A warning when the measured no-jitter phases lasted under 0.9 q: the cores ran faster than
/// when the work loop was timed (a vCPU whose speed changed), so times are not q-based, while
/// the slowdowns, which compare like with like, stand.
pub(crate) fn faster_than_calibrated(args: &RunArgs, reference: &Reference) -> Option<String> {
    let ratio = reference.avg_max_qt_ns / args.quanta.ns as f64;
    (matches!(args.baseline, Baseline::Measured) && ratio < 0.9).then(|| {
        format!(
            "no-jitter phases lasted {ratio:.2} × q: the cores ran faster than when the work loop \
             was timed (a vCPU whose speed changed); times are not in units of q, slowdowns stand"
        )
    })
}

/// The reference and the slowdowns (eq. 2, eq. 3) with their intervals: from the block pairs
/// (paired), or from the two runs' per-phase spreads (sequential).
pub(crate) fn slowdowns(
    out: &LoopOutcome,
    measured: Option<&LoopOutcome>,
    reference: Reference,
) -> (Reference, [Slowdown; 2]) {
    if let Some(p) = &out.paired {
        let reference = Reference {
            avg_max_qt_ns: p.baseline.avg_max_qt_ns(),
            avg_max_qtbt_ns: p.baseline.avg_max_qtbt_ns(),
        };
        return (
            reference,
            [
                paired_slowdown(&p.qtbt_pairs()),
                paired_slowdown(&p.qt_pairs()),
            ],
        );
    }
    let a = &out.averages;
    let (bn, b_qt, b_qtbt) = measured.map_or((0, 0.0, 0.0), |b| {
        (b.averages.phases, b.sd_max_qt_ns, b.sd_max_qtbt_ns)
    });
    (
        reference,
        [
            sequential_slowdown(
                (a.avg_max_qtbt_ns(), out.sd_max_qtbt_ns, a.phases),
                (reference.avg_max_qtbt_ns, b_qtbt, bn),
            ),
            sequential_slowdown(
                (a.avg_max_qt_ns(), out.sd_max_qt_ns, a.phases),
                (reference.avg_max_qt_ns, b_qt, bn),
            ),
        ],
    )
}

/// A finite half-width, or `None` (it is not written then).
pub(crate) fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

pub(crate) fn result_row(
    label: &str,
    ranks: u64,
    sync: String,
    out: &LoopOutcome,
    reference: Reference,
    sd: [Slowdown; 2],
    emulator: EmulatorTotals,
) -> ResultRow {
    let a = &out.averages;
    ResultRow {
        trace: label.to_string(),
        ranks,
        sync,
        phases: a.phases,
        avg_max_qt_ns: a.avg_max_qt_ns(),
        avg_max_qtbt_ns: a.avg_max_qtbt_ns(),
        baseline_avg_max_qt_ns: reference.avg_max_qt_ns,
        baseline_avg_max_qtbt_ns: reference.avg_max_qtbt_ns,
        sd_qtbt_pct: sd[0].pct,
        sd_qt_pct: sd[1].pct,
        sd_qtbt_ci95_pct: finite(sd[0].ci95_pct),
        sd_qt_ci95_pct: finite(sd[1].ci95_pct),
        lost_rel: a.lost_rel(),
        emulator,
        period_ns: None,
        draws: None,
        interval: None,
    }
}

pub(crate) fn write_csv(path: &std::path::Path, out: &LoopOutcome) -> anyhow::Result<()> {
    let shown = path.display().to_string();
    jitter_trace::output::write_output(path, |w| {
        out.write_phases_csv(w)
            .with_context(|| format!("cannot write {shown}"))
    })?;
    Ok(())
}
