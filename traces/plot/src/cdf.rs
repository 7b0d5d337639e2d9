//! The empirical distribution function of run-times (µs, log axis) of each series.

use std::path::Path;

use plotters::prelude::*;

use super::look::{
    chart_on, mesh, run_range_us, svg_with_legend, widen, y_label_area, Chart, Mark, RunSpan,
    Series, MAX_POINTS,
};
use jitter_trace::error::TraceError;
use jitter_trace::stream_order::StreamSource;
use jitter_trace::summary::DetourHistogram;

/// The CDF chart (`--kind cdf`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cdf;

impl Chart for Cdf {
    fn draw(&self, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
        cdf_svg(series, title, path)
    }
}

/// The positive run-times of a series: every one while there are at most [`MAX_POINTS`], and
/// their histogram ([`DetourHistogram`], 3 significant digits) in any case.
struct Runs {
    few: Vec<u64>,
    hist: DetourHistogram,
    span: RunSpan,
}

/// The run-times of `src`.
fn runs_of(src: &dyn StreamSource) -> Result<Runs, TraceError> {
    let mut r = Runs {
        few: Vec::new(),
        hist: DetourHistogram::new(),
        span: None,
    };
    for i in 0..src.frame().streams.len() {
        src.detours(i, &mut |run| {
            for d in run.iter().filter(|d| d.run_ns > 0) {
                widen(&mut r.span, d.run_ns);
                r.hist.record(d.run_ns);
                if r.hist.count <= MAX_POINTS as u64 {
                    r.few.push(d.run_ns);
                } else if r.hist.count == MAX_POINTS as u64 + 1 {
                    r.few = Vec::new();
                }
            }
            Ok(())
        })?;
    }
    Ok(r)
}

/// The CDF through at most [`MAX_POINTS`] evenly spaced order statistics, in µs: exact up to
/// [`MAX_POINTS`] run-times; beyond, each order statistic is the histogram's (within 0.1 %
/// of the exact one, never outside the shortest and longest), so that a trace of any length
/// is drawn in the memory of its histogram.
fn cdf_points(runs: &mut Runs) -> Vec<(f64, f64)> {
    let n = runs.hist.count as usize;
    if n == 0 {
        return Vec::new();
    }
    let k = n.min(MAX_POINTS);
    let ranks: Vec<u64> = (0..k)
        .map(|i| if k == n { i } else { i * (n - 1) / (k - 1).max(1) } as u64)
        .collect();
    let values = if n <= MAX_POINTS {
        runs.few.sort_unstable();
        ranks.iter().map(|&i| runs.few[i as usize]).collect()
    } else {
        runs.hist.at_ranks(&ranks)
    };
    (ranks.iter().zip(values))
        .map(|(&idx, v)| (v as f64 / 1e3, (idx + 1) as f64 / n as f64))
        .collect()
}

/// Empirical CDF of run-times of each series.
fn cdf_svg(series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    let mut runs: Vec<Runs> = (series.iter())
        .map(|s| runs_of(s.source))
        .collect::<Result<_, _>>()?;
    let spans: Vec<RunSpan> = runs.iter().map(|r| r.span).collect();
    let (x0, x1) = run_range_us(&spans);
    let y_area = y_label_area(plotters::coord::types::RangedCoordf64::from(0.0..1.0));
    let labels: Vec<String> = series.iter().map(|s| s.label.to_string()).collect();
    svg_with_legend(path, &labels, Mark::Line, |root, e| {
        let mut chart = chart_on(root, title, y_area)
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..1.0)
            .map_err(e)?;
        mesh(
            &mut chart,
            "detour run-time (µs)",
            "share of detours ≤ run-time",
            &e,
        )?;
        for (i, r) in runs.iter_mut().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(cdf_points(r), color.stroke_width(2)))
                .map_err(e)?;
        }
        Ok(())
    })
}
