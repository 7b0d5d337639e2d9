//! The log-density of run-times (µs, log axis) of each series on one shared log-spaced grid.

use std::path::Path;

use plotters::coord::combinators::LogCoord;
use plotters::prelude::*;

use super::look::{chart_on, mesh, svg_with_legend, y_label_area, Chart, Mark, Series};
use jitter_trace::compare::Grid;
#[cfg(test)]
use jitter_trace::compare::{density, GRID_POINTS};
use jitter_trace::error::TraceError;
use jitter_trace::stream_order::StreamSource;

/// The density chart (`--kind density`).
#[derive(Debug, Clone, Copy)]
pub struct Density;

impl Chart for Density {
    fn draw(&self, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
        density_svg(series, title, path)
    }
}

/// Log-density of run-times of each series, on one shared grid.
fn density_svg(series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    // Read stream by stream (`compare::densities`): the numbers of the traces read whole.
    let sources: Vec<&dyn StreamSource> = series.iter().map(|s| s.source).collect();
    let (densities, grid) = jitter_trace::compare::densities(&sources)?;
    let step = grid.step();
    let curves: Vec<Vec<(f64, f64)>> = (densities.iter())
        .map(|d| {
            (0..grid.points)
                .map(|j| (grid.run_ns(j) / 1e3, d.values[j] * step * 1.0))
                .collect()
        })
        .collect();
    let labels: Vec<String> = series.iter().map(|s| s.label.to_string()).collect();
    let axes = ["detour run-time (µs)", "probability per grid cell"];
    log_density_svg(path, title, &labels, &curves, &grid, 1e-7, axes)
}

/// Density curves on log–log axes, one colour and legend entry each, drawn from `floor` × their
/// peak up (below it a log axis spends its decades on nothing): the run-time density and the
/// sources' density. `axes`: the x and y labels.
pub(super) fn log_density_svg(
    path: &Path,
    title: &str,
    labels: &[String],
    curves: &[Vec<(f64, f64)>],
    grid: &Grid,
    floor: f64,
    axes: [&str; 2],
) -> Result<(), TraceError> {
    let (peak, x0, x1) = peak_and_span(curves, grid);
    let floor = peak * floor;
    let y_area = y_label_area(LogCoord::from((floor..peak * 2.0).log_scale()));
    svg_with_legend(path, labels, Mark::Line, |root, e| {
        let mut chart = chart_on(root, title, y_area)
            .build_cartesian_2d((x0..x1).log_scale(), (floor..peak * 2.0).log_scale())
            .map_err(e)?;
        mesh(&mut chart, axes[0], axes[1], &e)?;
        for (i, c) in curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = c.iter().copied().filter(|p| p.1 >= floor).collect();
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                .map_err(e)?;
        }
        Ok(())
    })
}

/// The density of each sample of log run-times on one shared grid, as (run µs, share per grid
/// step × `weight(sample)`) points, and the grid.
#[cfg(test)]
pub(super) fn density_curves(
    xs: &[Vec<f64>],
    weight: impl Fn(&[f64]) -> f64,
) -> (Vec<Vec<(f64, f64)>>, Grid) {
    let refs: Vec<&[f64]> = xs.iter().map(Vec::as_slice).collect();
    let grid = Grid::covering(&refs, GRID_POINTS);
    let step = grid.step();
    let curves = xs
        .iter()
        .map(|x| {
            let w = weight(x);
            let d = density(x, &grid);
            (0..grid.points)
                .map(|j| (grid.run_ns(j) / 1e3, d.values[j] * step * w))
                .collect()
        })
        .collect();
    (curves, grid)
}

/// The highest point of density `curves` (µs, density) and the grid's run-time span in µs.
pub(super) fn peak_and_span(curves: &[Vec<(f64, f64)>], grid: &Grid) -> (f64, f64, f64) {
    let peak = curves
        .iter()
        .flatten()
        .map(|p| p.1)
        .fold(0.0f64, f64::max)
        .max(1e-300);
    let (x0, x1) = (grid.run_ns(0) / 1e3, grid.run_ns(grid.points - 1) / 1e3);
    (peak, x0, x1)
}
