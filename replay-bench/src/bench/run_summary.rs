//! The summary of one run as rank 0 prints it: the results table over the measured baseline,
//! the emulator's lines, why the run stopped and what its ± means.

use std::fmt::Write as _;

use jitter_report::formats::{fmt_ns, fmt_pct, fmt_sd, payments_line};
use jitter_report::metrics::PhaseAverages;
use jitter_report::report::{Report, TraceInfo};
use jitter_trace::table::Table;

use super::phases::LoopOutcome;

/// The summary of a run as text (rank 0 prints it); `baseline` is the measured baseline's
/// averages (its own run, or the paired design's baseline blocks).
pub(crate) fn render_run(
    report: &Report,
    baseline: Option<&PhaseAverages>,
    outcome: &LoopOutcome,
) -> String {
    let c = &report.config;
    let mut s = String::new();
    let trace = c.trace.as_ref().map_or_else(
        || "no trace (no jitter)".to_string(),
        |t| {
            format!(
                "trace {} ({} stream(s), noise {:.3} %, {:.0} detours/s)",
                t.label,
                t.streams,
                t.noise_ratio * 100.0,
                t.detours_per_s
            )
        },
    );
    let ranks = report.results.first().map_or(0, |r| r.ranks);
    let inject = c.run.as_ref().map_or_else(Default::default, |r| r.inject);
    let how = match inject {
        jitter_emulator::InjectionMode::Signal => format!("signal injection, timer {}", c.timer),
        jitter_emulator::InjectionMode::Boundary => "paid at MPI calls".to_string(),
    };
    let _ = writeln!(
        s,
        "replay-bench run: {ranks} rank(s), {trace}, sync {}, q = {}, S = {}, {how}, seed {}",
        report.results.first().map_or("-", |r| r.sync.as_str()),
        fmt_ns(c.quanta_ns as f64),
        c.scale,
        c.seed
    );
    for line in c.trace.iter().flat_map(TraceInfo::kept_lines) {
        let _ = writeln!(s, "{line}");
    }
    s.push_str(&results_table(report, baseline).render());
    if c.trace.is_some() {
        for r in &report.results {
            let e = &r.emulator;
            let _ = writeln!(
                s,
                "emulator ({}): injected {} ({}), dropped {} ({}), merged {}, injected share \
                 {:.1} %, max progress {:.4}",
                r.sync,
                e.injected,
                fmt_ns(e.injected_ns as f64),
                e.dropped,
                fmt_ns(e.dropped_ns as f64),
                e.merged,
                e.injected_share * 100.0,
                e.max_progress
            );
        }
    }
    if let Some(p) = c.run.as_ref().and_then(|r| r.payments.as_ref()) {
        let _ = writeln!(s, "{}", payments_line(p));
    }
    stop_lines(&mut s, report, outcome);
    let noise: Vec<String> = report
        .calibration
        .iter()
        .map(|c| format!("{}:{:.3} %", c.rank, c.platform_noise_ratio * 100.0))
        .collect();
    let _ = writeln!(s, "platform noise by rank: {}", noise.join(" "));
    if let Some(c) = report.calibration.first() {
        let _ = writeln!(
            s,
            "emulator cost (rank 0): O = {}, L = {}, M = {}",
            fmt_ns(c.overhead_ns as f64),
            fmt_ns(c.lateness_ns as f64),
            fmt_ns(c.min_sleep_ns as f64)
        );
    }
    for w in &report.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// The run's results table: the measured baseline's averages (if any) over each result row.
fn results_table(report: &Report, baseline: Option<&PhaseAverages>) -> Table {
    let mut table = Table::new([
        "",
        "phases",
        "AvgMaxQT",
        "AvgMaxQTBT",
        "SD eq.2 (95%)",
        "SD eq.3 (95%)",
        "lost_rel",
    ])
    .left(1);
    if let Some(a) = baseline {
        table.row([
            "baseline".to_string(),
            a.phases.to_string(),
            fmt_ns(a.avg_max_qt_ns()),
            fmt_ns(a.avg_max_qtbt_ns()),
            String::new(),
            String::new(),
            fmt_pct(a.lost_rel() * 100.0),
        ]);
    }
    for r in &report.results {
        table.row([
            r.sync.clone(),
            r.phases.to_string(),
            fmt_ns(r.avg_max_qt_ns),
            fmt_ns(r.avg_max_qtbt_ns),
            fmt_sd(r.sd_qtbt_pct, r.sd_qtbt_ci95_pct),
            fmt_sd(r.sd_qt_pct, r.sd_qt_ci95_pct),
            fmt_pct(r.lost_rel * 100.0),
        ]);
    }
    table
}

/// Why and when the run stopped, and its design with what its ± means.
fn stop_lines(s: &mut String, report: &Report, outcome: &LoopOutcome) {
    let c = &report.config;
    let _ = writeln!(
        s,
        "stopped by {} after {} measured phases ({} warm-up) in {} (wall, scaled); baseline {}",
        outcome.stopped_by,
        outcome.averages.phases,
        outcome.warmup_phases,
        fmt_ns(outcome.elapsed_ns as f64),
        c.baseline
    );
    let paired = c.run.as_ref().and_then(|r| r.paired.as_ref());
    match &outcome.paired {
        Some(p) => {
            let _ = writeln!(
                s,
                "design paired: {} block pairs of {} phases (baseline and jitter interleaved, \
                 order drawn per pair); ± is the 95 % t-interval of the paired block differences{}",
                p.pairs.len(),
                paired.map_or(0, |d| d.block_phases),
                paired
                    .and_then(|d| d.precision_target_pct)
                    .map_or(String::new(), |t| format!(
                        "; precision target ± {t} pp, reached ± {:.3} pp",
                        p.half_width_pct()
                    ))
            );
        }
        None => {
            let _ = writeln!(
                s,
                "design sequential: ± is a normal 95 % interval from the per-phase spreads (it \
                 does not cover a drift between the baseline and the run)"
            );
        }
    }
}

/// Prints [`render_run`].
pub(crate) fn print_run(report: &Report, baseline: Option<&PhaseAverages>, outcome: &LoopOutcome) {
    print!("{}", render_run(report, baseline, outcome));
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_report::report::{Config, ReportKind, ResultRow};

    fn rep(kind: ReportKind, rows: &[(u64, &str, f64)]) -> Report {
        let mut r = Report::new(kind, Config::default());
        for &(ranks, sync, sd) in rows {
            r.results.push(ResultRow {
                trace: "t".into(),
                ranks,
                sync: sync.into(),
                sd_qtbt_pct: sd,
                sd_qt_pct: sd / 2.0,
                ..ResultRow::default()
            });
        }
        r
    }

    #[test]
    fn the_run_summary_is_one_aligned_table_then_the_emulator_lines() {
        let mut r = rep(ReportKind::Run, &[(2, "none", 4.0), (2, "phase", 12.5)]);
        r.config.trace = Some(jitter_report::report::TraceInfo {
            label: "t".into(),
            ..Default::default()
        });
        r.results[1].sd_qtbt_ci95_pct = Some(0.25);
        let baseline = PhaseAverages {
            phases: 10,
            ..Default::default()
        };
        let outcome = LoopOutcome {
            averages: baseline,
            samples: Vec::new(),
            warmup_phases: 1,
            elapsed_ns: 1_000_000,
            stopped_by: crate::bench::phases::StopReason::Phases,
            sd_max_qt_ns: 0.0,
            sd_max_qtbt_ns: 0.0,
            max_progress: 0.0,
            checksum: 0,
            paired: None,
        };
        let text = render_run(&r, Some(&baseline), &outcome);
        let lines: Vec<&str> = text.lines().collect();
        // Title, header, baseline, two result rows, then one emulator line per row.
        assert!(
            lines[1].ends_with("SD eq.2 (95%)  SD eq.3 (95%)  lost_rel"),
            "{text}"
        );
        assert!(lines[2].starts_with("baseline "), "{text}");
        assert!(lines[3].starts_with("none ") && lines[4].starts_with("phase "));
        // Every table line is as wide as the widest: the columns align (± counts as one).
        let width = |l: &str| l.chars().count();
        assert!(
            lines[1..5].iter().all(|l| width(l) == width(lines[1])),
            "{text}"
        );
        assert!(lines[4].contains("12.50 % ± 0.25"), "{text}");
        assert!(
            lines[5].starts_with("emulator (none): injected 0"),
            "{text}"
        );
        assert!(
            lines[6].starts_with("emulator (phase): injected 0"),
            "{text}"
        );
    }
}
