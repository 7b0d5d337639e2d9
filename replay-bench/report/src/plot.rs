//! Slowdown against ranks, the one table and the one SVG plot of it, one line per trace, sync
//! mode and producer (like Figs. 5 and 6): `replay-bench plot-study` draws many reports (one
//! scaling study), `predict` its prediction, `validate` its runs beside their predictions.
//!
//! Measured points carry their 95 % interval as a bar; a prediction with a spread over offset
//! draws carries it as a band ([`spread`] is the one place that reads it from a row). Tick
//! labels are plain numbers (`jitter_plot::axis_number`), the y label area fits them
//! and the axis title, and the legend sits right of the data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jitter_plot::{axis_number, label_area_for, ticks};
use jitter_trace::table::Table;
use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::{Ranged as _, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::formats::{fmt_pct, fmt_sd};
use crate::report::{Report, ReportKind, ResultRow};

/// Which slowdown to plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Metric {
    /// Eq. (2): AvgMaxQTBT.
    Qtbt,
    /// Eq. (3): AvgMaxQT.
    Qt,
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
        "trace",
        "sync",
        "by",
        "ranks",
        "phases",
        "SD eq.2 (95%)",
        "SD eq.3 (95%)",
        "95% from",
        "lost_rel",
        "injected",
    ])
    .left(3)
    .align(7, jitter_trace::table::Align::Left);
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
            fmt_sd(x.sd_qtbt_pct, x.sd_qtbt_ci95_pct),
            fmt_sd(x.sd_qt_pct, x.sd_qt_ci95_pct),
            interval_words(x),
            fmt_pct(x.lost_rel * 100.0),
            x.emulator.injected.to_string(),
        ]);
    }
    table.render()
}

/// Where a row's interval came from, for the table: `12 draws, precision` (the draws of the
/// precision mode and why they stopped), `3 draws`, `1 draw: phases only` (batch means: not
/// the stretch of trace), `measured`, or `-` (exact: the analytic model, a run's windows).
pub(crate) fn interval_words(row: &ResultRow) -> String {
    use jitter_trace::interval::Source;
    match &row.interval {
        Some(i) => {
            let draws = format!("{} draw{}", i.draws, if i.draws == 1 { "" } else { "s" });
            match (i.source, i.precision.is_some()) {
                (Source::Batches, _) => format!("{draws}: phases only"),
                (Source::Draws, true) => format!("{draws}, {}", i.stopped_by),
                (Source::Draws, false) => draws,
            }
        }
        None if row.sd_qtbt_ci95_pct.is_some() => "measured".into(),
        None => "-".into(),
    }
}

/// An axis value in percent for people: at most three significant digits, no float noise
/// (`0.0001` → `0.0001 %`, `9.999999999e-5` → `0.0001 %`, `12.5` → `12.5 %`).
pub(crate) fn axis_pct(y: f64) -> String {
    if !y.is_finite() {
        return String::new();
    }
    format!("{} %", axis_number(y))
}

/// One plotted point.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    /// Ranks.
    x: f64,
    /// SD, %.
    y: f64,
    /// Half-width of the measured 95 % interval, percentage points (a bar).
    ci: Option<f64>,
    /// The prediction's 95 % interval (low, high), % (a band).
    band: Option<(f64, f64)>,
    /// The prediction's range over offset draws (low, high), % (thin lines).
    range: Option<(f64, f64)>,
}

impl Point {
    /// The lowest and highest value the point draws (its bar, band or range included).
    fn span(&self) -> (f64, f64) {
        let h = self.ci.unwrap_or(0.0);
        let (bl, bh) = self.band.unwrap_or((self.y, self.y));
        let (rl, rh) = self.range.unwrap_or((self.y, self.y));
        ((self.y - h).min(bl).min(rl), (self.y + h).max(bh).max(rh))
    }
}

/// One plotted series: its points.
type Series = Vec<Point>;

/// Every series, by (trace and sync, producer): one colour per trace and sync, so that a
/// measurement and its prediction share it; measured series are dots with interval bars on a
/// thin line, predictions a thick line in the band of their 95 % interval, their range over
/// offset draws as two thin lines.
type Lines = BTreeMap<(String, &'static str), Series>;

/// The colour index of each series: its (trace, sync) group's rank among the groups.
fn colours(lines: &Lines) -> Vec<usize> {
    let mut groups: Vec<&str> = lines.keys().map(|k| k.0.as_str()).collect();
    groups.dedup();
    lines
        .keys()
        .map(|k| groups.iter().position(|g| *g == k.0).unwrap_or(0))
        .collect()
}

/// Whether a series is measured (a run) rather than predicted.
fn measured(by: &str) -> bool {
    by == kind_name(ReportKind::Run)
}

/// The spread over offset draws of a prediction row's `metric` (low, high, %), drawn as thin
/// lines around the prediction's line: the one place that reads it from a row — the range of
/// the slowdowns over offset draws (`predict --draws`, the precision mode); one draw has none.
fn spread(row: &ResultRow, metric: Metric) -> Option<(f64, f64)> {
    let d = row.draws?;
    let [lo, hi] = match metric {
        Metric::Qtbt => d.sd_qtbt_range_pct,
        Metric::Qt => d.sd_qt_range_pct,
    };
    (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
}

/// Draws SD against ranks (log axis), one series per (trace, sync, producer); measured points
/// carry their 95 % interval as a bar, predictions theirs as a band; the legend sits right of
/// the data.
pub fn draw(rows: &[StudyRow], metric: Metric, title: &str, path: &Path) -> anyhow::Result<()> {
    let mut series = Lines::new();
    for r in rows {
        let (sd, ci) = match metric {
            Metric::Qtbt => (r.row.sd_qtbt_pct, r.row.sd_qtbt_ci95_pct),
            Metric::Qt => (r.row.sd_qt_pct, r.row.sd_qt_ci95_pct),
        };
        if !sd.is_finite() || r.row.ranks == 0 {
            continue;
        }
        let group = format!(
            "{} {}",
            if r.row.trace.is_empty() {
                "no jitter"
            } else {
                &r.row.trace
            },
            r.row.sync,
        );
        let ci = ci.filter(|h| h.is_finite() && *h >= 0.0);
        let range = spread(&r.row, metric).filter(|(l, h)| l.is_finite() && h.is_finite());
        // A measurement's interval is a bar; a prediction's a band.
        let (ci, band) = if r.kind == ReportKind::Run {
            (ci, None)
        } else {
            (None, ci.map(|h| (sd - h, sd + h)))
        };
        series
            .entry((group, kind_name(r.kind)))
            .or_default()
            .push(Point {
                x: r.row.ranks as f64,
                y: sd,
                ci,
                band,
                range,
            });
    }
    draw_series(&series, metric, title, path)
}

/// Draws the named series (see [`draw`]).
fn draw_series(series: &Lines, metric: Metric, title: &str, path: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(!series.is_empty(), "no plottable rows in the reports");
    let xs = series.values().flatten().map(|p| p.x);
    let lo = series.values().flatten().map(|p| p.span().0);
    let hi = series.values().flatten().map(|p| p.span().1);
    let x_max = xs.clone().fold(1.0f64, f64::max) * 1.5;
    let x_min = xs.fold(f64::INFINITY, f64::min).max(1.0) / 1.5;
    let y_max = hi.fold(0.0f64, f64::max);
    let y_min = lo.fold(0.0f64, f64::min);
    // A log y axis when every point is positive and they span more than a decade (small
    // slowdowns beside large ones stay readable; a bar reaching 0 or below is cut at the
    // axis' bottom); linear otherwise.
    let log_y = y_lo_pos(series).is_some_and(|lo| y_max / lo > 10.0);
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
        .x_label_area_size(jitter_plot::X_LABEL_AREA);
    let x_range = (x_min..x_max).log_scale();
    // The y label area fits the widest tick label plotters will put there.
    let y_area = |ticks: Vec<f64>| label_area_for(ticks, axis_pct);
    if log_y {
        let lo = y_lo_pos(series).unwrap_or(1e-3);
        let y_range = (lo / 1.5..y_max * 1.5).log_scale();
        let n = ticks(lo / 1.5, y_max * 1.5);
        builder.y_label_area_size(y_area(LogCoord::from(y_range.clone()).key_points(n)));
        let mut chart = builder
            .build_cartesian_2d(x_range, y_range)
            .map_err(|e| err(&e))?;
        draw_data(&mut chart, series, y_desc, lo / 1.5).map_err(|e| err(&e))?;
    } else {
        let pad = ((y_max - y_min) * 0.1).max(0.5);
        let y_range = (y_min - pad)..(y_max + pad);
        let n = ticks(y_range.start, y_range.end);
        builder.y_label_area_size(y_area(RangedCoordf64::from(y_range.clone()).key_points(n)));
        let mut chart = builder
            .build_cartesian_2d(x_range, y_range)
            .map_err(|e| err(&e))?;
        draw_data(&mut chart, series, y_desc, f64::NEG_INFINITY).map_err(|e| err(&e))?;
    }
    draw_legend(&legend_area, series, log_y).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    drop((plot_area, legend_area, root));
    jitter_trace::output::write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

/// The legend right of the data: each series' mark and name, then notes on its bars and bands.
fn draw_legend<DB: DrawingBackend>(
    legend_area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &Lines,
    log_y: bool,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (i, ((group, by), c)) in series.keys().zip(colours(series)).enumerate() {
        let color = Palette99::pick(c).to_rgba();
        let y = 50 + 22 * i as i32;
        let width = if measured(by) { 1 } else { 3 };
        legend_area.draw(&PathElement::new(
            vec![(10, y), (34, y)],
            color.stroke_width(width),
        ))?;
        if measured(by) {
            legend_area.draw(&Circle::new((22, y), 4, color.filled()))?;
            legend_area.draw(&PathElement::new(vec![(22, y - 8), (22, y + 8)], color))?;
        }
        legend_area.draw(&Text::new(
            format!("{group} ({by})"),
            (40, y - 7),
            ("sans-serif", 14),
        ))?;
    }
    let below = 50 + 22 * series.len() as i32;
    // The notes on interval bars and bands only when some point has one.
    let bars = series.values().flatten().any(|p| p.ci.is_some());
    let bands = series.values().flatten().any(|p| p.band.is_some());
    let mut notes = Vec::new();
    if bars {
        notes.push("bars: measured 95 % interval");
    }
    if bands {
        notes.push("band: prediction's 95 % interval");
    }
    if series.values().flatten().any(|p| p.range.is_some()) {
        notes.push("thin lines: its range over offset draws");
    }
    notes.push("series at one count set slightly apart");
    if log_y {
        match (bars, bands) {
            (true, true) => notes.push("bars and bands reaching 0 are cut at the axis"),
            (true, false) => notes.push("bars reaching 0 are cut at the axis"),
            (false, true) => notes.push("bands reaching 0 are cut at the axis"),
            (false, false) => {}
        }
    }
    for (k, line) in notes.into_iter().enumerate() {
        legend_area.draw(&Text::new(
            line.to_string(),
            (10, below + 6 + 18 * k as i32),
            ("sans-serif", 13),
        ))?;
    }
    Ok(())
}

/// When every point is positive: the smallest positive point or bar end (the bottom of a log
/// axis; bars reaching below it are cut there).
fn y_lo_pos(series: &Lines) -> Option<f64> {
    let pts = || series.values().flatten();
    if pts().any(|p| p.y <= 0.0) {
        return None;
    }
    let lo = pts()
        .flat_map(|p| [p.y, p.span().0])
        .filter(|&y| y > 0.0)
        .fold(f64::INFINITY, f64::min);
    lo.is_finite().then_some(lo)
}

/// The mesh, and each series' band, line, points and interval bars (cut at `y_floor`), on a
/// log-x chart with any y axis.
fn draw_data<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<LogCoord<f64>, Y>>,
    series: &Lines,
    y_desc: &str,
    y_floor: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let (x, y) = (chart.x_range(), chart.y_range());
    chart
        .configure_mesh()
        .x_labels(ticks(x.start, x.end))
        .y_labels(ticks(y.start, y.end))
        .x_desc("processes (log scale)")
        .y_desc(y_desc)
        .x_label_formatter(&|x| axis_number(*x))
        .y_label_formatter(&|y| axis_pct(*y))
        .draw()?;
    let n = series.len();
    for (i, (((_, by), pts), c)) in series.iter().zip(colours(series)).enumerate() {
        let color = Palette99::pick(c).to_rgba();
        // Series side by side at one process count (±1.5 % of x per series) so that their bars
        // do not hide each other.
        let dodge = 1.015f64.powf(i as f64 - (n as f64 - 1.0) / 2.0);
        let pts: Series = pts
            .iter()
            .map(|p| Point {
                x: p.x * dodge,
                ..*p
            })
            .collect();
        // The band: the spread's low ends left to right, then its high ends back, filled.
        let band: Vec<(f64, f64, f64)> = pts
            .iter()
            .filter_map(|p| p.band.map(|(l, h)| (p.x, l.max(y_floor), h)))
            .collect();
        if band.len() >= 2 {
            let outline: Vec<(f64, f64)> = band
                .iter()
                .map(|b| (b.0, b.1))
                .chain(band.iter().rev().map(|b| (b.0, b.2)))
                .collect();
            chart.draw_series([Polygon::new(outline, color.mix(0.18).filled())])?;
        }
        // A band of one point: a wide bar.
        for &(x, l, h) in band.iter().filter(|_| band.len() == 1) {
            let r = Rectangle::new([(x / 1.06, l), (x * 1.06, h)], color.mix(0.18).filled());
            chart.draw_series([r])?;
        }
        // The range over offset draws: its low ends and its high ends, each a thin line.
        let range: Vec<(f64, f64, f64)> = pts
            .iter()
            .filter_map(|p| p.range.map(|(l, h)| (p.x, l.max(y_floor), h)))
            .collect();
        for end in [
            |r: &(f64, f64, f64)| (r.0, r.1),
            |r: &(f64, f64, f64)| (r.0, r.2),
        ] {
            chart.draw_series(LineSeries::new(
                range.iter().map(end),
                color.mix(0.6).stroke_width(1),
            ))?;
        }
        let (width, radius) = if measured(by) { (1, 4) } else { (3, 3) };
        chart.draw_series(LineSeries::new(
            pts.iter().map(|p| (p.x, p.y)),
            color.stroke_width(width),
        ))?;
        chart.draw_series(
            pts.iter()
                .map(|p| Circle::new((p.x, p.y), radius, color.filled())),
        )?;
        // Interval bars: the vertical span and short caps (a few percent of x: log axis).
        for &Point { x, y, ci, .. } in &pts {
            let Some(h) = ci else { continue };
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
    fn a_prediction_with_an_interval_is_a_band_and_a_measurement_keeps_its_bars() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("band.svg");
        let pt = |x: f64, y: f64, ci, band| Point {
            x,
            y,
            ci,
            band,
            range: None,
        };
        let mut lines = Lines::new();
        lines.insert(
            ("t none".into(), "des"),
            vec![
                pt(1.0, 2.0, None, Some((1.0, 3.5))),
                pt(16.0, 8.0, None, Some((5.0, 12.0))),
                pt(256.0, 20.0, None, Some((14.0, 30.0))),
            ],
        );
        lines.insert(
            ("t none".into(), "run"),
            vec![pt(1.0, 2.5, Some(0.5), None), pt(2.0, 4.0, Some(1.0), None)],
        );
        draw_series(&lines, Metric::Qt, "Slowdown vs processes", &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("band: prediction&apos;s 95 % interval"));
        assert!(!text.contains("thin lines"), "no range, no note on it");
        assert!(text.contains("bars: measured 95 % interval"));
        // One filled band (six corners) in the series' colour, a measurement and its
        // prediction in one colour.
        let polygons: Vec<&str> = text.split("<polygon").skip(1).collect();
        assert_eq!(polygons.len(), 1, "{text}");
        let corners = polygons[0].split(" points=\"").nth(1).unwrap();
        let corners = &corners[..corners.find('"').unwrap()];
        assert_eq!(corners.split_whitespace().count(), 6, "{corners}");
        assert_eq!(colours(&lines), [0, 0]);
        // The band widens the y range: its bottom (1 %) is on the axis (the points and bars
        // alone reach down to 2 %, the axis to 2 / 1.5 %), and the log axis labels each decade
        // once.
        let labels: Vec<&str> = text.lines().filter(|l| !l.starts_with('<')).collect();
        assert!(labels.contains(&"1 %"), "{labels:?}");
        assert_eq!(
            labels.iter().filter(|l| **l == "10 %").count(),
            1,
            "{labels:?}"
        );
        assert!(
            labels
                .iter()
                .all(|l| !l.contains("e-") && !l.contains("e+")),
            "{labels:?}"
        );
        // Without rows with a spread (today's reports), no band and no note on it.
        let svg2 = dir.path().join("none.svg");
        let rows = [StudyRow {
            kind: ReportKind::PredictDes,
            row: ResultRow {
                trace: "t".into(),
                ranks: 4,
                sync: "none".into(),
                sd_qt_pct: 3.0,
                ..ResultRow::default()
            },
        }];
        draw(&rows, Metric::Qt, "t", &svg2).unwrap();
        let text = std::fs::read_to_string(&svg2).unwrap();
        assert!(!text.contains("<polygon") && !text.contains("band:"));
        // A prediction row with its interval and its draws' range: the interval is the band
        // (sd ± h), the range two thin lines, and the y axis holds the range.
        let row = |ranks: u64, sd: f64| StudyRow {
            kind: ReportKind::PredictDes,
            row: ResultRow {
                trace: "t".into(),
                ranks,
                sync: "none".into(),
                sd_qt_pct: sd,
                sd_qt_ci95_pct: Some(0.5),
                draws: Some(crate::report::DrawSpread {
                    draws: 10,
                    sd_qtbt_range_pct: [0.0, 0.0],
                    sd_qt_range_pct: [sd - 2.0, sd + 9.0],
                }),
                ..ResultRow::default()
            },
        };
        draw(&[row(4, 3.0), row(64, 5.0)], Metric::Qt, "t", &svg2).unwrap();
        let text = std::fs::read_to_string(&svg2).unwrap();
        assert!(
            text.contains("band: prediction&apos;s 95 % interval"),
            "{text}"
        );
        assert!(text.contains("thin lines: its range over offset draws"));
        assert!(!text.contains("bars: measured"));
        let polygons: Vec<&str> = text.split("<polygon").skip(1).collect();
        assert_eq!(polygons.len(), 1);
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
        assert_eq!(axis_pct(1e-9), "0.000000001 %");
        assert_eq!(axis_pct(1e9), "1000000000 %");
    }
}
