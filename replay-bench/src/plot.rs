//! Slowdown against ranks, the one table and the one SVG plot of it, one line per trace, sync
//! mode and producer (like Figs. 5 and 6): `replay-bench plot-study` draws many reports (one
//! scaling study), `predict` its prediction, `validate` its runs beside their predictions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use jitter_trace::table::Table;
use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use crate::report::{Report, ReportKind, ResultRow};
use crate::table::fmt_pct;

/// Which slowdown to plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Metric {
    /// Eq. (2): AvgMaxQTBT.
    Qtbt,
    /// Eq. (3): AvgMaxQT.
    Qt,
}

/// Options of `replay-bench plot-study`.
#[derive(Debug, Clone, Args)]
pub struct PlotStudyArgs {
    /// Reports (JSON) of the study.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Write the plot here.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Slowdown equation plotted.
    #[arg(long, value_enum, default_value_t = Metric::Qtbt)]
    pub metric: Metric,
    /// Plot title.
    #[arg(long, default_value = "Slowdown vs processes")]
    pub title: String,
}

/// One point of the study with the producer of its report.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyRow {
    /// What produced it.
    pub kind: ReportKind,
    /// The row.
    pub row: ResultRow,
}

/// Loads every row of every report, sorted by (trace, sync, kind, ranks).
/// Reports that share a series must have measured the same thing (`matching::check_series`);
/// those matched by trace name only (written before digests) are said on standard error.
pub fn load_rows(paths: &[PathBuf]) -> anyhow::Result<Vec<StudyRow>> {
    let reports = paths
        .iter()
        .map(|p| Report::load(p))
        .collect::<anyhow::Result<Vec<Report>>>()?;
    let named: Vec<(&Path, &Report)> = paths.iter().map(PathBuf::as_path).zip(&reports).collect();
    for note in crate::matching::check_series(&named)? {
        eprintln!("warning: {note}");
    }
    Ok(rows(&reports))
}

/// Every row of these reports with its producer, sorted by (trace, sync, kind, ranks).
pub fn rows<'a>(reports: impl IntoIterator<Item = &'a Report>) -> Vec<StudyRow> {
    let mut rows: Vec<StudyRow> = reports
        .into_iter()
        .flat_map(|r| {
            r.results.iter().map(|row| StudyRow {
                kind: r.kind,
                row: row.clone(),
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        (
            a.row.trace.as_str(),
            a.row.sync.as_str(),
            kind_name(a.kind),
            a.row.ranks,
        )
            .cmp(&(
                b.row.trace.as_str(),
                b.row.sync.as_str(),
                kind_name(b.kind),
                b.row.ranks,
            ))
    });
    rows
}

fn kind_name(k: ReportKind) -> &'static str {
    match k {
        ReportKind::Run => "run",
        ReportKind::PredictDes => "des",
        ReportKind::PredictOrderStats => "order-stats",
        ReportKind::VirtualRanks => "virtual-ranks",
    }
}

/// The study as a text table: one line per (trace, sync, producer, ranks).
pub fn render_table(rows: &[StudyRow]) -> String {
    let mut table = Table::new([
        "trace", "sync", "by", "ranks", "phases", "SD eq.2", "SD eq.3", "lost_rel", "injected",
    ])
    .left(3);
    for r in rows {
        let x = &r.row;
        table.row([
            if x.trace.is_empty() {
                "-".into()
            } else {
                x.trace.clone()
            },
            x.sync.clone(),
            kind_name(r.kind).into(),
            x.ranks.to_string(),
            x.phases.to_string(),
            fmt_pct(x.sd_qtbt_pct),
            fmt_pct(x.sd_qt_pct),
            fmt_pct(x.lost_rel * 100.0),
            x.emulator.injected.to_string(),
        ]);
    }
    table.render()
}

/// An axis value in percent for people: at most three significant digits, no float noise
/// (`0.0001` → `0.0001 %`, `9.999999999e-5` → `0.0001 %`, `12.5` → `12.5 %`).
pub fn axis_pct(y: f64) -> String {
    if !y.is_finite() {
        return String::new();
    }
    if y == 0.0 {
        return "0 %".into();
    }
    let digits = (2 - y.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let text = format!("{y:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text} %")
}

/// One plotted series: its points (ranks, SD %, 95 % half-width if measured).
type Series = Vec<(f64, f64, Option<f64>)>;

/// Draws SD against ranks (log axis), one series per (trace, sync, producer); measured points
/// carry their 95 % interval as a bar; the legend sits right of the data.
pub fn draw(rows: &[StudyRow], metric: Metric, title: &str, path: &Path) -> anyhow::Result<()> {
    let mut series: BTreeMap<String, Series> = BTreeMap::new();
    for r in rows {
        let (sd, ci) = match metric {
            Metric::Qtbt => (r.row.sd_qtbt_pct, r.row.sd_qtbt_ci95_pct),
            Metric::Qt => (r.row.sd_qt_pct, r.row.sd_qt_ci95_pct),
        };
        if !sd.is_finite() || r.row.ranks == 0 {
            continue;
        }
        let name = format!(
            "{} {} ({})",
            if r.row.trace.is_empty() {
                "no jitter"
            } else {
                &r.row.trace
            },
            r.row.sync,
            kind_name(r.kind)
        );
        let ci = ci.filter(|h| h.is_finite() && *h >= 0.0);
        series
            .entry(name)
            .or_default()
            .push((r.row.ranks as f64, sd, ci));
    }
    anyhow::ensure!(!series.is_empty(), "no plottable rows in the reports");
    let xs = series.values().flatten().map(|p| p.0);
    let lo = series.values().flatten().map(|p| p.1 - p.2.unwrap_or(0.0));
    let hi = series.values().flatten().map(|p| p.1 + p.2.unwrap_or(0.0));
    let x_max = xs.clone().fold(1.0f64, f64::max) * 1.5;
    let x_min = xs.fold(f64::INFINITY, f64::min).max(1.0) / 1.5;
    let y_max = hi.fold(0.0f64, f64::max);
    let y_min = lo.fold(0.0f64, f64::min);
    // A log y axis when every point is positive and they span more than a decade (small
    // slowdowns beside large ones stay readable; a bar reaching 0 or below is cut at the
    // axis' bottom); linear otherwise.
    let log_y = y_lo_pos(&series).is_some_and(|lo| y_max / lo > 10.0);
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (1100, 560)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (plot_area, legend_area) = root.split_horizontally(800);
    let y_desc = match (metric, log_y) {
        (Metric::Qtbt, false) => "slowdown eq. (2)",
        (Metric::Qt, false) => "slowdown eq. (3)",
        (Metric::Qtbt, true) => "slowdown eq. (2), log scale",
        (Metric::Qt, true) => "slowdown eq. (3), log scale",
    };
    let mut builder = ChartBuilder::on(&plot_area);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    let x_range = (x_min..x_max).log_scale();
    if log_y {
        let lo = y_lo_pos(&series).unwrap_or(1e-3);
        let mut chart = builder
            .build_cartesian_2d(x_range, (lo / 1.5..y_max * 1.5).log_scale())
            .map_err(|e| err(&e))?;
        draw_data(&mut chart, &series, y_desc, lo / 1.5).map_err(|e| err(&e))?;
    } else {
        let pad = ((y_max - y_min) * 0.1).max(0.5);
        let mut chart = builder
            .build_cartesian_2d(x_range, (y_min - pad)..(y_max + pad))
            .map_err(|e| err(&e))?;
        draw_data(&mut chart, &series, y_desc, f64::NEG_INFINITY).map_err(|e| err(&e))?;
    }
    for (i, name) in series.keys().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let y = 50 + 22 * i as i32;
        legend_area
            .draw(&PathElement::new(
                vec![(10, y), (34, y)],
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?;
        legend_area
            .draw(&Text::new(name.clone(), (40, y - 7), ("sans-serif", 14)))
            .map_err(|e| err(&e))?;
    }
    let below = 50 + 22 * series.len() as i32;
    // The notes on interval bars only when some point has one (a prediction has none).
    let bars = series.values().flatten().any(|p| p.2.is_some());
    let mut notes = vec!["series at one count set slightly apart"];
    if bars {
        notes.insert(0, "bars: measured 95 % interval");
        if log_y {
            notes.push("bars reaching 0 are cut at the axis");
        }
    }
    for (k, line) in notes.into_iter().enumerate() {
        legend_area
            .draw(&Text::new(
                line.to_string(),
                (10, below + 6 + 18 * k as i32),
                ("sans-serif", 13),
            ))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    drop((plot_area, legend_area, root));
    jitter_trace::output::write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

/// When every point is positive: the smallest positive point or bar end (the bottom of a log
/// axis; bars reaching below it are cut there).
fn y_lo_pos(series: &BTreeMap<String, Series>) -> Option<f64> {
    let pts = || series.values().flatten();
    if pts().any(|p| p.1 <= 0.0) {
        return None;
    }
    let lo = pts()
        .flat_map(|p| [p.1, p.1 - p.2.unwrap_or(0.0)])
        .filter(|&y| y > 0.0)
        .fold(f64::INFINITY, f64::min);
    lo.is_finite().then_some(lo)
}

/// The mesh, and each series' line, points and interval bars (cut at `y_floor`), on a log-x
/// chart with any y axis.
fn draw_data<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<LogCoord<f64>, Y>>,
    series: &BTreeMap<String, Series>,
    y_desc: &str,
    y_floor: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc("processes (log scale)")
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| axis_pct(*y))
        .draw()?;
    let n = series.len();
    for (i, pts) in series.values().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        // Series side by side at one process count (±1.5 % of x per series) so that their bars
        // do not hide each other.
        let dodge = 1.015f64.powf(i as f64 - (n as f64 - 1.0) / 2.0);
        let pts: Series = pts.iter().map(|&(x, y, h)| (x * dodge, y, h)).collect();
        chart.draw_series(LineSeries::new(
            pts.iter().map(|p| (p.0, p.1)),
            color.stroke_width(2),
        ))?;
        chart.draw_series(
            pts.iter()
                .map(|p| Circle::new((p.0, p.1), 4, color.filled())),
        )?;
        // Interval bars: the vertical span and short caps (a few percent of x: log axis).
        for &(x, y, h) in &pts {
            let Some(h) = h else { continue };
            let style = color.stroke_width(1);
            let low = (y - h).max(y_floor);
            let bar = [
                vec![(x, low), (x, y + h)],
                vec![(x / 1.04, low), (x * 1.04, low)],
                vec![(x / 1.04, y + h), (x * 1.04, y + h)],
            ];
            chart.draw_series(bar.into_iter().map(|v| PathElement::new(v, style)))?;
        }
    }
    Ok(())
}

/// Runs `replay-bench plot-study`.
pub fn main(args: PlotStudyArgs) -> anyhow::Result<()> {
    if let Some(p) = &args.svg {
        jitter_trace::output::check_output(p, "--svg", "an SVG image", &["svg"])?;
    }
    let rows = load_rows(&args.reports)?;
    print!("{}", render_table(&rows));
    if let Some(svg) = &args.svg {
        draw(&rows, args.metric, &args.title, svg)
            .with_context(|| format!("plot {}", svg.display()))?;
        println!("plot: {}", svg.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Config;

    #[test]
    fn table_and_svg_from_reports() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (i, (ranks, sync, sd)) in [(2, "none", 4.0), (1, "none", 2.0), (2, "phase", 2.1)]
            .into_iter()
            .enumerate()
        {
            let mut r = Report::new(ReportKind::Run, Config::default());
            r.results.push(ResultRow {
                trace: "p".into(),
                ranks,
                sync: sync.into(),
                sd_qtbt_pct: sd,
                sd_qtbt_ci95_pct: Some(0.25),
                ..ResultRow::default()
            });
            let p = dir.path().join(format!("{i}.json"));
            r.save(&p).unwrap();
            paths.push(p);
        }
        let rows = load_rows(&paths).unwrap();
        assert_eq!(
            rows.iter()
                .map(|r| (r.row.ranks, r.row.sync.as_str()))
                .collect::<Vec<_>>(),
            vec![(1, "none"), (2, "none"), (2, "phase")]
        );
        assert_eq!(render_table(&rows).lines().count(), 4);
        let svg = dir.path().join("s.svg");
        draw(&rows, Metric::Qtbt, "t", &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("p none (run)"));
        assert!(text.contains("bars: measured 95 % interval"));
        // Label texts stand on lines of their own between the tags.
        let labels: Vec<&str> = text.lines().filter(|l| !l.starts_with('<')).collect();
        assert!(labels.contains(&"0 %"), "{labels:?}");
        assert!(
            labels
                .iter()
                .all(|l| !l.contains("99999") && !l.contains("00001")),
            "float noise in {labels:?}"
        );
        assert!(load_rows(&[dir.path().join("nope.json")]).is_err());
    }

    #[test]
    fn the_y_axis_is_logarithmic_for_positive_values_over_decades_only() {
        let dir = tempfile::tempdir().unwrap();
        let row = |ranks, sd: f64, ci| StudyRow {
            kind: ReportKind::PredictDes,
            row: ResultRow {
                trace: "t".into(),
                ranks,
                sync: "none".into(),
                sd_qt_pct: sd,
                sd_qt_ci95_pct: ci,
                ..ResultRow::default()
            },
        };
        let svg = dir.path().join("s.svg");
        let wide = [
            row(16, 0.02, None),
            row(1024, 40.0, None),
            row(65536, 300.0, None),
        ];
        draw(&wide, Metric::Qt, "t", &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("slowdown eq. (3), log scale"));
        assert!(
            !text.contains("bars: measured"),
            "no interval, no note on bars"
        );
        let labels: Vec<&str> = text.lines().filter(|l| !l.starts_with('<')).collect();
        assert!(
            labels.contains(&"0.1 %") && labels.contains(&"100 %"),
            "{labels:?}"
        );
        // A bar reaching below 0 is cut at the bottom of the log axis.
        draw(
            &[row(16, 0.02, Some(0.5)), row(1024, 40.0, None)],
            Metric::Qt,
            "t",
            &svg,
        )
        .unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("slowdown eq. (3), log scale"));
        // A point at or below 0, or a narrow range: linear.
        for rows in [
            vec![row(16, -0.02, Some(0.5)), row(1024, 40.0, None)],
            vec![row(16, 2.0, None), row(1024, 4.0, None)],
        ] {
            draw(&rows, Metric::Qt, "t", &svg).unwrap();
            let text = std::fs::read_to_string(&svg).unwrap();
            assert!(text.contains("slowdown eq. (3)\n") && !text.contains("eq. (3), log scale"));
        }
    }

    #[test]
    fn axis_labels_are_for_people() {
        assert_eq!(axis_pct(9.999999999e-5), "0.0001 %");
        assert_eq!(axis_pct(0.0001), "0.0001 %");
        assert_eq!(axis_pct(12.5), "12.5 %");
        assert_eq!(axis_pct(3.0), "3 %");
        assert_eq!(axis_pct(-0.25), "-0.25 %");
        assert_eq!(axis_pct(250.0), "250 %");
        assert_eq!(axis_pct(0.0), "0 %");
    }
}
