//! The empirical distribution function of run-times (µs, log axis) of each series.

use std::path::Path;

use plotters::prelude::*;

use super::look::{
    chart_on, mesh, run_range_us, svg_with_legend, y_label_area, Chart, Mark, Series, MAX_POINTS,
};
use crate::error::TraceError;
use crate::model::Stream;

/// The CDF chart (`--kind cdf`).
#[derive(Debug, Clone, Copy)]
pub struct Cdf;

impl Chart for Cdf {
    fn draw(&self, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
        cdf_svg(series, title, path)
    }
}

/// Sorted run-times in µs, thinned to at most [`MAX_POINTS`] evenly spaced quantiles.
fn cdf_points(streams: &[Stream]) -> Vec<(f64, f64)> {
    let mut runs: Vec<u64> = streams
        .iter()
        .flat_map(|s| s.records.iter().map(|r| r.run_ns))
        .filter(|&r| r > 0)
        .collect();
    runs.sort_unstable();
    let n = runs.len();
    if n == 0 {
        return Vec::new();
    }
    let k = n.min(MAX_POINTS);
    (0..k)
        .map(|i| {
            let idx = if k == n {
                i
            } else {
                i * (n - 1) / (k - 1).max(1)
            };
            (runs[idx] as f64 / 1e3, (idx + 1) as f64 / n as f64)
        })
        .collect()
}

/// Empirical CDF of run-times of each series.
fn cdf_svg(series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    let (x0, x1) = run_range_us(series);
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
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    cdf_points(s.streams),
                    color.stroke_width(2),
                ))
                .map_err(e)?;
        }
        Ok(())
    })
}
