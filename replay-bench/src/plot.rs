//! `replay-bench plot-study`: many reports (one scaling study) as one table and one SVG plot of
//! slowdown against ranks, one line per trace, sync mode and producer (like Figs. 5 and 6).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use plotters::prelude::*;

use crate::report::{Report, ReportKind, ResultRow};

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
pub fn load_rows(paths: &[PathBuf]) -> anyhow::Result<Vec<StudyRow>> {
    let mut rows = Vec::new();
    for p in paths {
        let r = Report::load(p)?;
        rows.extend(
            r.results
                .into_iter()
                .map(|row| StudyRow { kind: r.kind, row }),
        );
    }
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
    Ok(rows)
}

fn kind_name(k: ReportKind) -> &'static str {
    match k {
        ReportKind::Run => "run",
        ReportKind::PredictDes => "des",
        ReportKind::PredictOrderStats => "order-stats",
        ReportKind::VirtualRanks => "virtual-ranks",
    }
}

/// The study as a text table.
pub fn render_table(rows: &[StudyRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<16} {:<10} {:<13} {:>7} {:>8} {:>10} {:>10} {:>10} {:>9}",
        "trace", "sync", "by", "ranks", "phases", "SD eq.2", "SD eq.3", "lost_rel", "injected"
    );
    for r in rows {
        let x = &r.row;
        let _ = writeln!(
            s,
            "{:<16} {:<10} {:<13} {:>7} {:>8} {:>8.3} % {:>8.3} % {:>8.3} % {:>9}",
            if x.trace.is_empty() { "-" } else { &x.trace },
            x.sync,
            kind_name(r.kind),
            x.ranks,
            x.phases,
            x.sd_qtbt_pct,
            x.sd_qt_pct,
            x.lost_rel * 100.0,
            x.emulator.injected
        );
    }
    s
}

/// Draws SD against ranks (log2 axis), one series per (trace, sync, producer).
pub fn draw(rows: &[StudyRow], metric: Metric, title: &str, path: &Path) -> anyhow::Result<()> {
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        let sd = match metric {
            Metric::Qtbt => r.row.sd_qtbt_pct,
            Metric::Qt => r.row.sd_qt_pct,
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
        series
            .entry(name)
            .or_default()
            .push((r.row.ranks as f64, sd));
    }
    anyhow::ensure!(!series.is_empty(), "no plottable rows in the reports");
    let xs = series.values().flatten().map(|p| p.0);
    let ys = series.values().flatten().map(|p| p.1);
    let x_max = xs.clone().fold(1.0f64, f64::max) * 1.5;
    let x_min = xs.fold(f64::INFINITY, f64::min).max(1.0) / 1.5;
    let y_max = ys.clone().fold(0.0f64, f64::max);
    let y_min = ys.fold(0.0f64, f64::min);
    let pad = ((y_max - y_min) * 0.1).max(0.5);
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x_min..x_max).log_scale(), (y_min - pad)..(y_max + pad))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("processes")
        .y_desc(match metric {
            Metric::Qtbt => "slowdown eq. (2), %",
            Metric::Qt => "slowdown eq. (3), %",
        })
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    drop((chart, root));
    jitter_trace::output::write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

/// Runs `replay-bench plot-study`.
pub fn main(args: PlotStudyArgs) -> anyhow::Result<()> {
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
        assert!(load_rows(&[dir.path().join("nope.json")]).is_err());
    }
}
