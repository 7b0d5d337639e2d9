//! The study a demo run leaves in one folder — trace, calibration, measured runs, predictions —
//! turned into `report.md` and three headline lines; and the choice of the scale factor.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use jitter_emulator::calibration::Calibration;
use jitter_emulator::InjectionMode;
use jitter_trace::stats::{injectability, TraceStats};
use jitter_trace::table::{Align, Table};
use jitter_trace::units::format_ns;
use jitter_trace::{Integrity, Salvage, Trace};

use crate::report::{Report, ResultRow};
use jitter_trace::output::check_output;

/// The three numbers a reader takes away, and the lines that say them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Headlines {
    /// Noise ratio of the trace, percent of CPU time.
    pub noise_pct: f64,
    /// Detours per second per CPU.
    pub detours_per_s: f64,
    /// Longest detour, ns.
    pub max_ns: u64,
    /// Process count of the measured headline (0 when nothing was measured).
    pub measured_ranks: u64,
    /// Measured SD (eq. 2) per sync mode at that count, percent.
    pub measured_sd_pct: BTreeMap<String, f64>,
    /// Rank count of the predicted headline.
    pub predicted_ranks: u64,
    /// Predicted SD (eq. 2) per sync mode at that count, percent.
    pub predicted_sd_pct: BTreeMap<String, f64>,
    /// The lines as printed.
    pub lines: Vec<String>,
}

/// Loads a trace under the one policy on what it lacks ([`jitter_trace::integrity`]): a trace
/// whose ring dropped detours, or that is damaged or truncated, is refused unless `salvage`.
pub fn load_trace(path: &Path, salvage: Salvage) -> anyhow::Result<(Trace, Integrity)> {
    let loaded = jitter_trace::read_trace(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let name = path.display().to_string();
    let integrity = loaded.accept(&name, salvage)?;
    if let Some(w) = integrity.warning() {
        eprintln!("warning: {name}: {w}");
    }
    Ok((loaded.trace, integrity))
}

/// The emulator calibration at `path` (JSON of `jitter-emulate calibrate --json`).
pub fn read_calibration(path: &Path) -> anyhow::Result<Calibration> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not an emulator calibration", path.display()))
}

/// Reports in `dir` whose file name starts with `prefix`, sorted by name.
fn reports(dir: &Path, prefix: &str) -> anyhow::Result<Vec<(String, Report)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if name.starts_with(prefix) && name.ends_with(".json") {
            out.push((name, Report::load(&path)?));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2} %")
    } else {
        "n/a".into()
    }
}

/// Thousands separators for a whole number.
fn grouped(x: f64) -> String {
    let s = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn sd_by_sync<'a>(rows: impl Iterator<Item = &'a ResultRow>) -> BTreeMap<String, f64> {
    rows.map(|r| (r.sync.clone(), r.sd_qtbt_pct)).collect()
}

/// `none 3.00 % ± 0.50, phase 1.50 % ± 0.12 [1.20 – 1.90 over 12 draws]`: each mode's SD
/// eq. (2) with its 95 % interval (a measurement's, or a prediction's over its draws) and, for
/// a prediction, the range of its draws.
fn modes_line<'a>(rows: impl Iterator<Item = &'a ResultRow>) -> String {
    let rows: Vec<&ResultRow> = rows.collect();
    ["none", "once", "phase"]
        .iter()
        .filter_map(|k| {
            let r = rows.iter().find(|r| r.sync == *k)?;
            let mut extra = match r.sd_qtbt_ci95_pct {
                Some(h) if h.is_finite() => format!(" ± {h:.2}"),
                _ => String::new(),
            };
            if let Some(d) = r.draws {
                extra.push_str(&format!(
                    " [{:.2} – {:.2} over {} draws]",
                    d.sd_qtbt_range_pct[0], d.sd_qtbt_range_pct[1], d.draws
                ));
            }
            Some(format!("{k} {}{extra}", pct(r.sd_qtbt_pct)))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Builds the headlines from the trace statistics, the measured runs and the prediction.
pub(crate) fn headlines(
    stats: &TraceStats,
    runs: &[(String, Report)],
    prediction: Option<&Report>,
    drivers: Option<&Report>,
    headline_ranks: u64,
) -> Headlines {
    let o = &stats.overall;
    let mut h = Headlines {
        noise_pct: o.noise_ratio * 100.0,
        detours_per_s: o.detours_per_s,
        max_ns: o.max_ns,
        ..Headlines::default()
    };
    h.lines.push(format!(
        "this machine's noise: {:.2} % of CPU time, {} detours/s per CPU, max {}",
        h.noise_pct,
        grouped(h.detours_per_s),
        format_ns(h.max_ns as f64)
    ));
    let measured: Vec<&ResultRow> = runs
        .iter()
        .flat_map(|(_, r)| r.results.iter())
        .filter(|r| !r.trace.is_empty())
        .collect();
    if let Some(n) = measured.iter().map(|r| r.ranks).max() {
        h.measured_ranks = n;
        h.measured_sd_pct = sd_by_sync(measured.iter().copied().filter(|r| r.ranks == n));
        h.lines.push(format!(
            "measured SD at {n} rank{}: {}",
            if n == 1 { "" } else { "s" },
            modes_line(measured.iter().copied().filter(|r| r.ranks == n))
        ));
    } else {
        h.lines.push("measured SD: no replay was run".into());
    }
    if let Some(p) = prediction {
        let n = p
            .results
            .iter()
            .map(|r| r.ranks)
            .filter(|&n| n <= headline_ranks)
            .max();
        if let Some(n) = n {
            h.predicted_ranks = n;
            h.predicted_sd_pct = sd_by_sync(p.results.iter().filter(|r| r.ranks == n));
            h.lines.push(format!(
                "predicted SD at {n} ranks: {}",
                modes_line(p.results.iter().filter(|r| r.ranks == n))
            ));
        }
    }
    if let Some(d) = drivers.and_then(|d| d.config.predict.as_ref()) {
        for x in &d.drivers {
            h.lines.push(format!("what drives it: {}", x.line()));
        }
    }
    h
}

fn results_table(out: &mut String, rows: &[&ResultRow], with_emulator: bool) {
    let mut head = vec![
        "ranks",
        "sync",
        "phases",
        "AvgMaxQTBT",
        "SD eq. 2",
        "AvgMaxQT",
        "SD eq. 3",
        "lost_rel",
    ];
    if with_emulator {
        head.extend(["injected", "dropped", "merged", "noise injected"]);
    } else {
        head.push("95 % from");
    }
    let mut table = Table::new(head).align(1, Align::Left);
    for r in rows {
        let mut cells = vec![
            r.ranks.to_string(),
            r.sync.clone(),
            r.phases.to_string(),
            format_ns(r.avg_max_qtbt_ns),
            crate::formats::fmt_sd(r.sd_qtbt_pct, r.sd_qtbt_ci95_pct),
            format_ns(r.avg_max_qt_ns),
            crate::formats::fmt_sd(r.sd_qt_pct, r.sd_qt_ci95_pct),
            format!("{:.4}", r.lost_rel),
        ];
        if !with_emulator {
            cells.push(crate::plot::interval_words(r));
        }
        if with_emulator {
            let e = &r.emulator;
            cells.extend([
                e.injected.to_string(),
                e.dropped.to_string(),
                e.merged.to_string(),
                format!("{:.1} %", e.injected_share * 100.0),
            ]);
        }
        table.row(cells);
    }
    out.push_str(&table.markdown());
}

/// The measured rows beside the prediction of the same stretches of their trace (the demo's
/// `window-<run>.json`, from `predict --windows-of`) and the whole-trace prediction at the
/// replayed ranks (`here`, with its range over offset draws): one table, like with like.
fn beside(dir: &Path, runs: &[(String, Report)], here: Option<&Report>) -> anyhow::Result<String> {
    let mut md = String::from(
        "\n## Prediction beside measurement: the same stretches of the trace\n\n\
         Each measured row is judged against the prediction of the windows of the trace that run \
         replayed (its offsets, resyncs and blocks; `predict --windows-of`), on the run's own \
         calibrated injector; `same detours` says whether both injected the same detours within \
         the stated tolerance. Beside it, the prediction over the whole trace (its phases pooled \
         over offset draws, with its 95 % interval over the draws and their range in \
         brackets): what a stretch of trace the length of the run could have given.\n\n",
    );
    let mut rows = Vec::new();
    for (name, r) in runs {
        let Some(m) = r.results.first() else { continue };
        let window = dir.join(format!("window-{name}"));
        let same = if window.exists() {
            Some(Report::load(&window)?)
        } else {
            None
        };
        let windows_of = same
            .as_ref()
            .and_then(|p| p.config.predict.as_ref()?.windows_of.as_ref());
        let blocks = (r.config.run.as_ref())
            .and_then(|d| d.paired.as_ref())
            .map_or(&[][..], |p| &p.blocks[..]);
        let same_row = same.as_ref().and_then(|p| p.results.first());
        let whole =
            here.and_then(|p| (p.results.iter()).find(|x| x.ranks == m.ranks && x.sync == m.sync));
        rows.extend(crate::comparison::compare(crate::comparison::Inputs {
            measured: m,
            platform_pct: crate::report::platform_noise_pct(r),
            same_windows: same_row.zip(windows_of),
            blocks,
            whole,
            inject: (r.config.run.as_ref()).map_or_else(Default::default, |d| d.inject),
        }));
    }
    md.push_str(&crate::comparison::render(&rows, true));
    md.push_str(
        "\nThe measured SD also contains the replay machine's own noise (`platform`); the \
         predictions do not, so a prediction within 1 pp plus that noise agrees. A row whose \
         interval is wider than its effect gets no verdict: a longer run (`run --until-verdict \
         --max-time`, the demo's `budget`) narrows it.\n",
    );
    Ok(md)
}

/// What `replay-bench study` is asked: the demo folder, where the Markdown goes, the rank count
/// of the predicted headline and whether a trace that lacks detours is taken.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyRequest {
    /// Folder written by scripts/demo.sh.
    pub dir: std::path::PathBuf,
    /// Where to write the Markdown report (default: `dir/report.md`).
    pub report: Option<std::path::PathBuf>,
    /// Rank count of the predicted headline.
    pub headline_ranks: u64,
    /// Whether to go on with a trace that lacks detours.
    pub salvage: Salvage,
}

/// `replay-bench study`: writes report.md and headlines.json into the folder and returns the
/// headlines.
pub fn write_study(args: &StudyRequest) -> anyhow::Result<Headlines> {
    let dir = &args.dir;
    // Both outputs checked before anything is read.
    let (report_path, flag) = match &args.report {
        Some(p) => (p.clone(), "--report"),
        None => (dir.join("report.md"), "--dir"),
    };
    check_output(&report_path, flag, "a Markdown report", &["md"])?;
    check_output(
        &dir.join("headlines.json"),
        "--dir",
        "the headlines (JSON)",
        &["json"],
    )?;
    let trace_path = dir.join("trace.jtr");
    let (trace, integrity) = load_trace(&trace_path, args.salvage)?;
    let stats = TraceStats::of_trace(&trace);
    // A run saved before the plausibility check (or by another version) is checked again: one
    // whose slowdown the trace cannot cause is left out of the tables, with the reason.
    let (runs, implausible): (Vec<_>, Vec<_>) = reports(dir, "run-")?
        .into_iter()
        .partition(|(_, r)| r.implausible().is_none());
    let baselines = reports(dir, "baseline-")?;
    let load_opt = |name: &str| -> anyhow::Result<Option<Report>> {
        let p = dir.join(name);
        if p.exists() {
            Ok(Some(Report::load(&p)?))
        } else {
            Ok(None)
        }
    };
    let prediction = load_opt("predict.json")?;
    let here = load_opt("predict-here.json")?;
    let calibration = match dir.join("calibration.json") {
        p if p.exists() => Some(read_calibration(&p)?),
        _ => None,
    };
    let drivers = load_opt("drivers.json")?;
    let mut h = headlines(
        &stats,
        &runs,
        prediction.as_ref(),
        drivers.as_ref(),
        args.headline_ranks,
    );
    if let Some(kept) = integrity.kept_line() {
        h.lines
            .insert(0, format!("trace.jtr lacks detours: {kept}"));
    }

    let mut md = String::new();
    md.push_str("# jitterbench study\n\n");
    for l in &h.lines {
        let _ = writeln!(md, "- {l}");
    }
    trace_section(&mut md, &trace, &stats, dir);
    if let Some(c) = &calibration {
        emulator_section(&mut md, c, &runs, &trace);
    }
    measured_section(&mut md, &runs, &baselines, &implausible);
    if let Some(p) = &prediction {
        let _ = write!(
            md,
            "\n## Predicted: `replay-bench predict` (virtual time, platform `{}`)\n\n",
            p.config.platform
        );
        let rows: Vec<&ResultRow> = p.results.iter().collect();
        results_table(&mut md, &rows, false);
        md.push_str("\n![SD vs ranks](sd-vs-ranks.svg)\n");
    }
    if !runs.is_empty() {
        md.push_str(&beside(dir, &runs, here.as_ref())?);
    }
    files_section(&mut md, dir)?;
    let report_path = args.report.clone().unwrap_or_else(|| dir.join("report.md"));
    jitter_trace::output::write_output_bytes(&report_path, md.as_bytes())?;
    let hj = dir.join("headlines.json");
    jitter_trace::output::write_output_bytes(
        &hj,
        (serde_json::to_string_pretty(&h)? + "\n").as_bytes(),
    )?;
    Ok(h)
}

/// The trace's section: where it comes from, its statistics, and the machine's check.
fn trace_section(md: &mut String, trace: &Trace, stats: &TraceStats, dir: &Path) {
    let hd = &trace.header;
    let _ = write!(
        md,
        "\n## The trace\n\n`trace.jtr`: {} stream(s) from `{}` (kernel {}, {}), {} per stream, \
         collected by {}.\n\nKernel command line: `{}`\n\n```text\n{}```\n\n\
         Plots: [run-time density](density.svg), [CDF](cdf.svg), [detour time series](timeseries.svg).\n",
        trace.streams.len(),
        hd.host,
        hd.kernel_release,
        hd.cpu_model,
        format_ns(hd.duration_ns as f64),
        hd.tool_version,
        hd.kernel_cmdline,
        stats.table()
    );
    if let Ok(check) = std::fs::read_to_string(dir.join("check.txt")) {
        let _ = write!(
            md,
            "\n## This machine (`jitter-collect --check`)\n\n```text\n{check}```\n"
        );
    }
}

/// The emulator's calibration on this machine, and what it reproduces of the trace at the
/// runs' S.
fn emulator_section(md: &mut String, c: &Calibration, runs: &[(String, Report)], trace: &Trace) {
    md.push_str("\n## The emulator on this machine\n\n| timer | O median | O sd | L median | L p99 | M |\n|---|---:|---:|---:|---:|---:|\n");
    for t in [&c.itimer, &c.abstime] {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            t.timer,
            format_ns(t.overhead.median_ns),
            format_ns(t.overhead.sd_ns),
            format_ns(t.lateness.median_ns),
            format_ns(t.lateness.p99_ns),
            format_ns(t.min_sleep_ns as f64)
        );
    }
    let Some((_, r)) = runs.first() else {
        return;
    };
    let s = r.config.scale;
    let o = c.timer(r.config.timer).overhead.median_ns.max(0.0);
    let inject = r
        .config
        .run
        .as_ref()
        .map_or_else(Default::default, |d| d.inject);
    if let Ok(choice) = jitter_emulator::InjectionChoice::for_streams(&trace.streams, o) {
        let _ = writeln!(md, "\nHow the runs inject: {}.", choice.reason());
    }
    match inject {
        InjectionMode::Signal => {
            if let Ok(cover) = injectability(&trace.streams, o, s) {
                let _ = writeln!(
                    md,
                    "\nThe runs injected by signal at S = {s}: the injector reproduces {:.1} % of \
                     the detours and {:.1} % of the noise time (S·run > O); the rest is dropped \
                     and counted.",
                    cover.detours * 100.0,
                    cover.noise * 100.0
                );
            }
        }
        InjectionMode::Boundary => {
            md.push_str(
                "\nThe runs paid the detours at their MPI calls (`--inject boundary`, S = 1, no \
                 O, L or M: docs/METHOD.md):\n\n",
            );
            for (name, r) in runs {
                if let Some(p) = r.config.run.as_ref().and_then(|d| d.payments.as_ref()) {
                    let _ = writeln!(md, "- {name}: {}", crate::formats::payments_line(p));
                }
            }
        }
    }
}

/// The runs' results, the baselines, and what was not emulated (with the runs left out).
fn measured_section(
    md: &mut String,
    runs: &[(String, Report)],
    baselines: &[(String, Report)],
    implausible: &[(String, Report)],
) {
    md.push_str("\n## Measured: `replay-bench run` under mpirun\n\n");
    if runs.is_empty() {
        md.push_str("No replay was run.\n");
    } else {
        let rows: Vec<&ResultRow> = runs.iter().flat_map(|(_, r)| &r.results).collect();
        results_table(md, &rows, true);
        let b: Vec<&ResultRow> = baselines.iter().flat_map(|(_, r)| &r.results).collect();
        if !b.is_empty() {
            md.push_str("\nBaselines (no jitter):\n\n");
            results_table(md, &b, false);
        }
        let mut warnings: Vec<String> = runs
            .iter()
            .flat_map(|(n, r)| r.warnings.iter().map(move |w| format!("{n}: {w}")))
            .collect();
        warnings.extend(implausible.iter().filter_map(|(n, r)| {
            let why = r.implausible()?;
            Some(format!("{n}: left out, implausible result: {why}"))
        }));
        warnings.dedup();
        if !warnings.is_empty() {
            md.push_str("\nWhat was not emulated, and warnings:\n\n");
            for w in warnings {
                let _ = writeln!(md, "- {w}");
            }
        }
    }
}

/// Every file of the folder, linked.
fn files_section(md: &mut String, dir: &Path) -> anyhow::Result<()> {
    md.push_str("\n## Files\n\n");
    let mut files: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    files.sort();
    for f in files {
        let _ = writeln!(md, "- [{f}]({f})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Config, ReportKind};
    use jitter_trace::{Detour, Stream};

    fn row(ranks: u64, sync: &str, sd: f64) -> ResultRow {
        ResultRow {
            trace: "t".into(),
            ranks,
            sync: sync.into(),
            sd_qtbt_pct: sd,
            ..ResultRow::default()
        }
    }

    #[test]
    fn headlines_take_the_largest_measured_count_and_the_requested_prediction() {
        // 10 detours of 1 µs in 1 ms: noise 1 %, 10 000 detours/s.
        let d: Vec<Detour> = (0..10)
            .map(|k| Detour {
                start_ns: k * 100_000,
                run_ns: 1_000,
            })
            .collect();
        let s = Stream::from_detours(0, 0, 1_000_000, &d).unwrap();
        let t = Trace {
            streams: vec![s],
            ..Trace::default()
        };
        let stats = TraceStats::of_trace(&t);
        let mut run1 = Report::new(ReportKind::Run, Config::default());
        run1.results = vec![row(1, "none", 1.0)];
        let mut run2 = Report::new(ReportKind::Run, Config::default());
        run2.results = vec![row(2, "none", 3.0), row(2, "phase", 1.5)];
        let mut p = Report::new(ReportKind::PredictDes, Config::default());
        p.results = vec![
            row(1024, "none", 50.0),
            row(2048, "none", 60.0),
            row(2048, "phase", 1.0),
            row(4096, "none", 70.0),
        ];
        let runs = vec![("a".to_string(), run1), ("b".to_string(), run2)];
        let h = headlines(&stats, &runs, Some(&p), None, 2048);
        assert!((h.noise_pct - 1.0).abs() < 1e-9);
        assert!((h.detours_per_s - 10_000.0).abs() < 1e-6);
        assert_eq!(h.measured_ranks, 2);
        assert_eq!(h.measured_sd_pct.get("none"), Some(&3.0));
        assert_eq!(h.predicted_ranks, 2048);
        assert_eq!(h.predicted_sd_pct.get("none"), Some(&60.0));
        assert_eq!(h.lines.len(), 3);
        assert!(
            h.lines[0].contains("1.00 % of CPU time") && h.lines[0].contains("10,000 detours/s"),
            "{}",
            h.lines[0]
        );
        assert!(
            h.lines[1].contains("none 3.00 %, phase 1.50 %"),
            "{}",
            h.lines[1]
        );
        // A measurement shows its interval, a prediction its range over draws.
        let mut runs = runs;
        runs[1].1.results[0].sd_qtbt_ci95_pct = Some(0.5);
        p.results[1].draws = Some(crate::report::DrawSpread {
            draws: 3,
            sd_qtbt_range_pct: [55.0, 66.0],
            sd_qt_range_pct: [50.0, 60.0],
        });
        let h = headlines(&stats, &runs, Some(&p), None, 2048);
        assert!(h.lines[1].contains("none 3.00 % ± 0.50"), "{}", h.lines[1]);
        assert!(
            h.lines[2].contains("none 60.00 % [55.00 – 66.00 over 3 draws]"),
            "{}",
            h.lines[2]
        );
    }

    #[test]
    fn grouped_inserts_separators() {
        assert_eq!(grouped(7200.4), "7,200");
        assert_eq!(grouped(999.0), "999");
        assert_eq!(grouped(1234567.0), "1,234,567");
    }
}
