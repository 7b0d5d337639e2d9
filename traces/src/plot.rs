//! SVG plots of traces: log-density and CDF of run-times, and detour time series, each able to
//! overlay several traces (e.g. a collected trace and its emulation).
//!
//! - **density**: the Parzen estimate of [`crate::compare::density`] on one shared log-spaced grid,
//!   as the probability of each grid cell on a log axis against run-time (µs, log axis), like
//!   Fig. 1 of paper 001. Cells below 10⁻⁷ of the peak are not drawn.
//! - **cdf**: the empirical distribution function of run-times (µs, log axis), drawn through at
//!   most [`MAX_POINTS`] quantiles per trace.
//! - **timeseries**: run-time (µs, log axis) against the detour start (s from the trace start).
//!   Traces with more than [`MAX_POINTS`] detours are drawn as the longest detour of each of
//!   [`MAX_POINTS`] equal time bins, so the spikes stay visible.
//! - **attribution** (`jitter-trace attribution --bars-svg/--density-svg`): noise time per
//!   detour run-time bucket stacked by source ([`source_bars_svg`]), and each source's
//!   log-density of its time per detour ([`source_density_svg`]); at most [`MAX_SOURCES`]
//!   sources, the legend in a panel right of the data.
//! - **nodes** ([`nodes_svg`]): one box per node of a cluster-wide collection (`jitter-trace
//!   nodes`), in ranking order: box p20–p80 with the median, whiskers from the shortest detour
//!   to p99.9, a cross at the longest; outliers in red.

use std::path::Path;

use crate::output::write_output_bytes;

use plotters::prelude::*;

use crate::attribution::SourceSamples;
use crate::compare::{density, log_runs, Grid, GRID_POINTS};
use crate::error::TraceError;
use crate::model::Stream;
use crate::nodes::NodeRow;

/// Most points drawn per trace in CDF and time-series plots.
pub const MAX_POINTS: usize = 4000;

const SIZE: (u32, u32) = (900, 560);

/// What to plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    /// Log-density of run-times.
    Density,
    /// Cumulative distribution of run-times.
    Cdf,
    /// Run-time against start time.
    TimeSeries,
}

impl std::str::FromStr for PlotKind {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        match s {
            "density" => Ok(PlotKind::Density),
            "cdf" => Ok(PlotKind::Cdf),
            "timeseries" | "time-series" => Ok(PlotKind::TimeSeries),
            _ => Err(TraceError::Argument(format!(
                "unknown plot `{s}` (use density, cdf or timeseries)"
            ))),
        }
    }
}

/// One trace (or some of its streams) in a plot, with its legend label.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// The streams drawn (pooled).
    pub streams: &'a [Stream],
}

fn draw_err<E: std::error::Error + Send + Sync + 'static>(
    path: &Path,
) -> impl Fn(DrawingAreaErrorKind<E>) -> TraceError + '_ {
    move |e| {
        TraceError::io(
            format!("cannot draw {}", path.display()),
            std::io::Error::other(e.to_string()),
        )
    }
}

/// Draws `kind` for every series into the SVG file `path`.
pub fn plot(kind: PlotKind, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    if series.is_empty() {
        return Err(TraceError::Argument("nothing to plot".into()));
    }
    match kind {
        PlotKind::Density => density_svg(series, title, path),
        PlotKind::Cdf => cdf_svg(series, title, path),
        PlotKind::TimeSeries => timeseries_svg(series, title, path),
    }
}

/// Run-time range in µs over all series, for a log axis.
fn run_range_us(series: &[Series]) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = 0.0f64;
    for s in series {
        for r in s.streams.iter().flat_map(|s| &s.records) {
            if r.run_ns > 0 {
                lo = lo.min(r.run_ns as f64 / 1e3);
                hi = hi.max(r.run_ns as f64 / 1e3);
            }
        }
    }
    if !lo.is_finite() {
        return (0.1, 10.0);
    }
    (lo / 1.5, (hi * 1.5).max(lo * 2.0))
}

/// Log-density of run-times of each series, on one shared grid.
pub fn density_svg(series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    let xs: Vec<Vec<f64>> = series.iter().map(|s| log_runs(s.streams)).collect();
    let refs: Vec<&[f64]> = xs.iter().map(Vec::as_slice).collect();
    let grid = Grid::covering(&refs, GRID_POINTS);
    let step = grid.step();
    let curves: Vec<Vec<(f64, f64)>> = xs
        .iter()
        .map(|x| {
            let d = density(x, &grid);
            (0..grid.points)
                .map(|j| (grid.run_ns(j) / 1e3, d.values[j] * step))
                .collect()
        })
        .collect();
    let (peak, x0, x1) = peak_and_span(&curves, &grid);
    let floor = peak * 1e-7;
    let e = draw_err(path);
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), (floor..peak * 2.0).log_scale())
        .map_err(&e)?;
    chart
        .configure_mesh()
        .x_desc("detour run-time (us)")
        .y_desc("probability per grid cell")
        .draw()
        .map_err(&e)?;
    for (i, (c, s)) in curves.iter().zip(series).enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = c.iter().copied().filter(|p| p.1 >= floor).collect();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(&e)?
            .label(s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    legend(&mut chart, &e)?;
    root.present().map_err(&e)?;
    drop((chart, root));
    write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    e: &impl Fn(DrawingAreaErrorKind<DB::ErrorType>) -> TraceError,
) -> Result<(), TraceError> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(e)
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
pub fn cdf_svg(series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    let (x0, x1) = run_range_us(series);
    let e = draw_err(path);
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x0..x1).log_scale(), 0.0..1.0)
        .map_err(&e)?;
    chart
        .configure_mesh()
        .x_desc("detour run-time (us)")
        .y_desc("fraction of detours <= run-time")
        .draw()
        .map_err(&e)?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                cdf_points(s.streams),
                color.stroke_width(2),
            ))
            .map_err(&e)?
            .label(s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    legend(&mut chart, &e)?;
    root.present().map_err(&e)?;
    drop((chart, root));
    write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

/// (start s, run µs) points, reduced to the longest detour per time bin when there are many.
fn timeseries_points(streams: &[Stream], origin: u64, span: u64) -> Vec<(f64, f64)> {
    let all = || {
        streams
            .iter()
            .flat_map(|s| &s.records)
            .filter(|r| r.run_ns > 0)
    };
    let n = all().count();
    let pt = |start: u64, run: u64| ((start - origin) as f64 / 1e9, run as f64 / 1e3);
    if n <= MAX_POINTS {
        return all().map(|r| pt(r.start_ns, r.run_ns)).collect();
    }
    let mut bins: Vec<Option<(u64, u64)>> = vec![None; MAX_POINTS];
    let span = span.max(1);
    for r in all() {
        let b = (((r.start_ns - origin) as u128 * MAX_POINTS as u128 / span as u128) as usize)
            .min(MAX_POINTS - 1);
        match bins[b] {
            Some((_, run)) if run >= r.run_ns => {}
            _ => bins[b] = Some((r.start_ns, r.run_ns)),
        }
    }
    bins.into_iter().flatten().map(|(s, r)| pt(s, r)).collect()
}

/// Run-time against start time for each series.
pub fn timeseries_svg(series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    let (y0, y1) = run_range_us(series);
    let origin = series
        .iter()
        .flat_map(|s| s.streams.iter().map(|s| s.begin_ns))
        .min()
        .unwrap_or(0);
    let end = series
        .iter()
        .flat_map(|s| s.streams.iter().map(|s| s.end_ns))
        .max()
        .unwrap_or(0)
        .max(origin + 1);
    let e = draw_err(path);
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..(end - origin) as f64 / 1e9, (y0..y1).log_scale())
        .map_err(&e)?;
    chart
        .configure_mesh()
        .x_desc("detour start (s)")
        .y_desc("detour run-time (us)")
        .draw()
        .map_err(&e)?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts = timeseries_points(s.streams, origin, end - origin);
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 2, color.filled())))
            .map_err(&e)?
            .label(s.label)
            .legend(move |(x, y)| Circle::new((x + 10, y), 3, color.filled()));
    }
    legend(&mut chart, &e)?;
    root.present().map_err(&e)?;
    drop((chart, root));
    write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

/// Most sources drawn in the attribution charts; the rest are pooled as `other`.
pub const MAX_SOURCES: usize = 8;

/// Run-time buckets per decade in the stacked bar chart.
const BUCKETS_PER_DECADE: f64 = 5.0;

/// Width of the legend panel right of the attribution charts, px.
const LEGEND_WIDTH: u32 = 260;

/// The first [`MAX_SOURCES`] − 1 sources and, when there are more, the rest pooled as `other`.
fn top_sources(sources: &[SourceSamples]) -> Vec<(String, Vec<(u64, u64)>)> {
    if sources.len() <= MAX_SOURCES {
        return sources
            .iter()
            .map(|s| (s.source.clone(), s.samples.clone()))
            .collect();
    }
    let mut out: Vec<(String, Vec<(u64, u64)>)> = sources[..MAX_SOURCES - 1]
        .iter()
        .map(|s| (s.source.clone(), s.samples.clone()))
        .collect();
    let rest = sources[MAX_SOURCES - 1..]
        .iter()
        .flat_map(|s| s.samples.iter().copied())
        .collect();
    out.push((
        format!("other ({} sources)", sources.len() + 1 - MAX_SOURCES),
        rest,
    ));
    out
}

/// Draws the legend (a colour swatch and a label per source) into its own panel, outside the
/// data.
fn legend_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    labels: &[String],
    e: &impl Fn(DrawingAreaErrorKind<DB::ErrorType>) -> TraceError,
) -> Result<(), TraceError> {
    for (i, label) in labels.iter().enumerate() {
        let y = 60 + 22 * i as i32;
        let color = Palette99::pick(i).to_rgba();
        area.draw(&Rectangle::new([(8, y), (24, y + 14)], color.filled()))
            .map_err(e)?;
        let text: String = if label.chars().count() > 34 {
            label.chars().take(33).chain(['…']).collect()
        } else {
            label.clone()
        };
        area.draw(&Text::new(text, (30, y), ("sans-serif", 13)))
            .map_err(e)?;
    }
    Ok(())
}

/// Draws an SVG of the data area (`draw`, with its error mapping) and a legend panel of
/// `labels` right of it, and writes it to `path`.
fn svg_with_legend(
    path: &Path,
    labels: &[String],
    draw: impl FnOnce(
        &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        &dyn Fn(DrawingAreaErrorKind<std::io::Error>) -> TraceError,
    ) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let e = draw_err(path);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (SIZE.0 + LEGEND_WIDTH, SIZE.1)).into_drawing_area();
        root.fill(&WHITE).map_err(&e)?;
        let (left, right) = root.split_horizontally(SIZE.0);
        draw(&left, &e)?;
        legend_panel(&right, labels, &e)?;
        root.present().map_err(&e)?;
    }
    write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

/// Stacked bars of noise time per detour run-time bucket (log-spaced, µs), one colour per
/// source: who fills each bucket. `sources` as from [`crate::attribution::samples`].
pub fn source_bars_svg(
    sources: &[SourceSamples],
    title: &str,
    path: &Path,
) -> Result<(), TraceError> {
    let top = top_sources(sources);
    let runs = || {
        top.iter()
            .flat_map(|s| s.1.iter().map(|p| p.0))
            .filter(|&r| r > 0)
    };
    let (lo, hi) = match (runs().min(), runs().max()) {
        (Some(lo), Some(hi)) => (lo as f64 / 1e3, hi as f64 / 1e3),
        _ => return Err(TraceError::Argument("no detours to chart".into())),
    };
    let first = (lo.log10() * BUCKETS_PER_DECADE).floor() as i32;
    let last = (hi.log10() * BUCKETS_PER_DECADE).floor() as i32;
    let edge = |k: i32| 10f64.powf(k as f64 / BUCKETS_PER_DECADE);
    let buckets = (last - first + 1) as usize;
    // ms of each source in each bucket.
    let mut ms = vec![vec![0.0f64; buckets]; top.len()];
    for (i, (_, samples)) in top.iter().enumerate() {
        for &(run, ns) in samples.iter().filter(|p| p.0 > 0) {
            let k = ((run as f64 / 1e3).log10() * BUCKETS_PER_DECADE).floor() as i32;
            ms[i][(k - first).clamp(0, buckets as i32 - 1) as usize] += ns as f64 / 1e6;
        }
    }
    let peak = (0..buckets)
        .map(|b| ms.iter().map(|m| m[b]).sum::<f64>())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let labels: Vec<String> = top.iter().map(|s| s.0.clone()).collect();
    svg_with_legend(path, &labels, |left, e| {
        let mut chart = ChartBuilder::on(left)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((edge(first)..edge(last + 1)).log_scale(), 0.0..peak * 1.05)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("detour run-time (us)")
            .y_desc("noise time in the bucket (ms)")
            .draw()
            .map_err(e)?;
        let mut base = vec![0.0f64; buckets];
        for (i, m) in ms.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let bars: Vec<Rectangle<(f64, f64)>> = (0..buckets)
                .filter(|&b| m[b] > 0.0)
                .map(|b| {
                    let k = first + b as i32;
                    let r = Rectangle::new(
                        [(edge(k), base[b]), (edge(k + 1), base[b] + m[b])],
                        color.filled(),
                    );
                    base[b] += m[b];
                    r
                })
                .collect();
            chart.draw_series(bars).map_err(e)?;
        }
        Ok(())
    })
}

/// The log-density of each source's time per detour (µs, log axis), each curve weighted by the
/// source's share of all occurrences, so the curves add up to the density of all of them.
pub fn source_density_svg(
    sources: &[SourceSamples],
    title: &str,
    path: &Path,
) -> Result<(), TraceError> {
    let top = top_sources(sources);
    let xs: Vec<Vec<f64>> = top
        .iter()
        .map(|s| {
            s.1.iter()
                .filter(|p| p.1 > 0)
                .map(|p| (p.1 as f64).ln())
                .collect()
        })
        .collect();
    let all: usize = xs.iter().map(Vec::len).sum();
    if all == 0 {
        return Err(TraceError::Argument("no detours to chart".into()));
    }
    let refs: Vec<&[f64]> = xs.iter().map(Vec::as_slice).collect();
    let grid = Grid::covering(&refs, GRID_POINTS);
    let step = grid.step();
    let curves: Vec<Vec<(f64, f64)>> = xs
        .iter()
        .map(|x| {
            let w = x.len() as f64 / all as f64;
            let d = density(x, &grid);
            (0..grid.points)
                .map(|j| (grid.run_ns(j) / 1e3, d.values[j] * step * w))
                .collect()
        })
        .collect();
    let (peak, x0, x1) = peak_and_span(&curves, &grid);
    let floor = peak * 1e-5;
    let labels: Vec<String> = top.iter().map(|s| s.0.clone()).collect();
    svg_with_legend(path, &labels, |left, e| {
        let mut chart = ChartBuilder::on(left)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x0..x1).log_scale(), (floor..peak * 2.0).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("time of the source in one detour (us)")
            .y_desc("share of occurrences per grid cell")
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .draw()
            .map_err(e)?;
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

/// One box per node (run-times in µs on a log axis), in the order of `rows`.
pub fn nodes_svg(rows: &[NodeRow], title: &str, path: &Path) -> Result<(), TraceError> {
    if rows.is_empty() {
        return Err(TraceError::Argument("no nodes to plot".into()));
    }
    let us = |ns: u64| (ns.max(1)) as f64 / 1e3;
    let lo = rows
        .iter()
        .map(|r| us(r.summary.stats.min_ns))
        .fold(f64::INFINITY, f64::min);
    let hi = rows
        .iter()
        .map(|r| us(r.summary.stats.max_ns))
        .fold(0.0, f64::max)
        .max(lo * 2.0);
    let n = rows.len();
    let e = draw_err(path);
    let mut svg = String::new();
    let width = SIZE.0.max(120 + 40 * n as u32);
    let root = SVGBackend::with_string(&mut svg, (width, SIZE.1)).into_drawing_area();
    root.fill(&WHITE).map_err(&e)?;
    let names: Vec<&str> = rows.iter().map(|r| r.summary.node.as_str()).collect();
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names
                .get(i as usize)
                .map_or(String::new(), |s| s.to_string())
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, (lo / 1.5..hi * 1.5).log_scale())
        .map_err(&e)?;
    chart
        .configure_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&label)
        .disable_x_mesh()
        .x_desc("node (noisiest first); red: outlier")
        .y_desc("detour run-time (us): p20-p80 box, median, min-p99.9, x max")
        .draw()
        .map_err(&e)?;
    for (i, r) in rows.iter().enumerate() {
        let s = &r.summary.stats;
        let x = i as f64;
        let color = if r.outlier.is_empty() {
            Palette99::pick(0).to_rgba()
        } else {
            RED.to_rgba()
        };
        let w = 0.3;
        chart
            .draw_series([
                Rectangle::new(
                    [(x - w, us(s.p20_ns)), (x + w, us(s.p80_ns))],
                    color.mix(0.3).filled(),
                ),
                Rectangle::new(
                    [(x - w, us(s.p20_ns)), (x + w, us(s.p80_ns))],
                    color.stroke_width(2),
                ),
            ])
            .map_err(&e)?;
        chart
            .draw_series([
                PathElement::new(
                    vec![(x - w, us(s.median_ns)), (x + w, us(s.median_ns))],
                    color.stroke_width(3),
                ),
                PathElement::new(vec![(x, us(s.min_ns)), (x, us(s.p20_ns))], color),
                PathElement::new(vec![(x, us(s.p80_ns)), (x, us(s.p99_9_ns))], color),
            ])
            .map_err(&e)?;
        chart
            .draw_series([Cross::new((x, us(s.max_ns)), 5, color.stroke_width(2))])
            .map_err(&e)?;
    }
    root.present().map_err(&e)?;
    drop((chart, root));
    write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

/// The highest point of density `curves` (µs, density) and the grid's run-time span in µs.
fn peak_and_span(curves: &[Vec<(f64, f64)>], grid: &Grid) -> (f64, f64, f64) {
    let peak = curves
        .iter()
        .flatten()
        .map(|p| p.1)
        .fold(0.0f64, f64::max)
        .max(1e-300);
    let (x0, x1) = (grid.run_ns(0) / 1e3, grid.run_ns(grid.points - 1) / 1e3);
    (peak, x0, x1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synthesize, Spec};

    #[test]
    fn every_plot_kind_writes_an_svg_with_its_labels() {
        let s: Spec = "poisson:rate=20000/s,dur=exp:3us+periodic:period=4ms,dur=40us"
            .parse()
            .unwrap();
        let a = synthesize(&s, 2, 500_000_000, 1).unwrap();
        let b = synthesize(&s, 1, 500_000_000, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for kind in [PlotKind::Density, PlotKind::Cdf, PlotKind::TimeSeries] {
            let p = dir.path().join(format!("{kind:?}.svg"));
            let series = [
                Series {
                    label: "trace-a",
                    streams: &a.streams,
                },
                Series {
                    label: "trace-b",
                    streams: &b.streams,
                },
            ];
            plot(kind, &series, "test", &p).unwrap();
            let svg = std::fs::read_to_string(&p).unwrap();
            assert!(svg.starts_with("<svg"), "{kind:?}");
            assert!(
                svg.contains("trace-a") && svg.contains("trace-b"),
                "{kind:?}"
            );
            assert!(
                svg.contains("<polyline") || svg.contains("<circle"),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn timeseries_keeps_the_longest_detour_of_each_bin() {
        let s: Spec = "poisson:rate=100000/s,dur=exp:1us+periodic:period=100ms,dur=500us"
            .parse()
            .unwrap();
        let t = synthesize(&s, 1, 1_000_000_000, 9).unwrap();
        let pts = timeseries_points(&t.streams, 0, 1_000_000_000);
        assert!(pts.len() <= MAX_POINTS);
        let big = pts.iter().filter(|p| p.1 >= 500.0).count();
        assert_eq!(big, 10);
    }

    fn sources(n: usize) -> Vec<SourceSamples> {
        // Source i: 100 detours of (i + 1) · 3 µs run-time, the source holding 2/3 of each.
        (0..n)
            .map(|i| SourceSamples {
                source: format!("task:d{i}"),
                samples: (0..100)
                    .map(|k| {
                        let run = (i as u64 + 1) * 3_000 + k;
                        (run, run * 2 / 3)
                    })
                    .collect(),
            })
            .collect()
    }

    /// The x of every `<text>` holding `label`.
    fn text_x(svg: &str, label: &str) -> Vec<f64> {
        svg.split("<text")
            .filter(|t| {
                t.split_once('>')
                    .and_then(|(_, body)| body.split_once('<'))
                    .is_some_and(|(text, _)| text.trim() == label)
            })
            .map(|t| {
                let x = t.split("x=\"").nth(1).unwrap();
                x[..x.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    #[test]
    fn attribution_charts_title_every_source_with_the_legend_right_of_the_data() {
        let dir = tempfile::tempdir().unwrap();
        for (n, draw) in [
            (3, source_bars_svg as fn(&[SourceSamples], &str, &Path) -> _),
            (3, source_density_svg),
            (12, source_bars_svg),
            (12, source_density_svg),
        ] {
            let p = dir.path().join("a.svg");
            draw(&sources(n), "who fills the bucket", &p).unwrap();
            let svg = std::fs::read_to_string(&p).unwrap();
            assert!(svg.contains("who fills the bucket"));
            let shown = n.min(MAX_SOURCES - usize::from(n > MAX_SOURCES));
            for i in 0..shown {
                let x = text_x(&svg, &format!("task:d{i}"));
                assert_eq!(x.len(), 1, "task:d{i} in {x:?}");
                assert!(
                    x[0] > SIZE.0 as f64,
                    "legend inside the data at x = {}",
                    x[0]
                );
            }
            assert_eq!(
                text_x(&svg, &format!("task:d{shown}")).len(),
                0,
                "{n} sources"
            );
            if n > MAX_SOURCES {
                assert_eq!(text_x(&svg, "other (5 sources)").len(), 1);
            }
        }
        assert!(source_bars_svg(&[], "t", &dir.path().join("e.svg")).is_err());
        assert!(source_density_svg(&[], "t", &dir.path().join("e.svg")).is_err());
    }

    #[test]
    fn the_stacked_bars_add_up_to_each_buckets_noise_time() {
        // Two sources in one bucket (3.0-3.1 µs, inside 2.51-3.98 µs): 100 · 2 µs + 100 · 1 µs.
        let s = vec![
            SourceSamples {
                source: "a".into(),
                samples: vec![(3_000, 2_000); 100],
            },
            SourceSamples {
                source: "b".into(),
                samples: vec![(3_100, 1_000); 100],
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.svg");
        source_bars_svg(&s, "t", &p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        // One bar per source, stacked: b's top is the peak (0.3 ms), a's is 2/3 of it.
        let rects: Vec<(f64, f64)> = svg
            .split("<rect")
            .skip(1)
            .filter_map(|r| {
                let num = |k: &str| -> Option<f64> {
                    let v = r.split(&format!(" {k}=\"")).nth(1)?;
                    v[..v.find('"')?].parse().ok()
                };
                Some((num("y")?, num("height")?))
            })
            .collect();
        let bars: Vec<&(f64, f64)> = rects.iter().filter(|r| r.1 > 50.0 && r.1 < 500.0).collect();
        assert_eq!(bars.len(), 2, "{rects:?}");
        let ratio = bars[0].1 / bars[1].1;
        assert!((ratio - 2.0).abs() < 0.05, "{bars:?}");
        // b sits on a (SVG y grows downwards; 1 px of rounding).
        assert!((bars[1].0 + bars[1].1 - bars[0].0).abs() <= 1.0, "{bars:?}");
    }

    #[test]
    fn nodes_draw_one_box_each_and_outliers_in_red() {
        use crate::nodes::{rank, NodeSummary, OUTLIER_Z};
        let s: Spec = "poisson:rate=2000/s,dur=exp:3us".parse().unwrap();
        let mut nodes: Vec<NodeSummary> = (0..4)
            .map(|i| {
                let t = synthesize(&s, 1, 200_000_000, i).unwrap();
                NodeSummary::of_trace(&t, &format!("node{i}.jtr"), 3)
            })
            .collect();
        let noisy: Spec = "poisson:rate=2000/s,dur=exp:3us+periodic:period=1ms,dur=100us"
            .parse()
            .unwrap();
        let t = synthesize(&noisy, 1, 200_000_000, 9).unwrap();
        nodes.push(NodeSummary::of_trace(&t, "noisy.jtr", 3));
        let table = rank(nodes, OUTLIER_Z);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nodes.svg");
        nodes_svg(&table.rows, "nodes", &p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.contains("noisy") && svg.contains("node3"), "{svg}");
        // one filled and one outlined box per node
        assert_eq!(svg.matches("<rect").count() - 1, 2 * 5, "{svg}");
        assert!(svg.contains("#FF0000"), "the outlier is red");
        assert!(nodes_svg(&[], "x", &p).is_err());
    }
}
