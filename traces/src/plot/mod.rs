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
//!
//! One file per chart; trace charts (`jitter-trace plot --kind`, `stats --plot`) implement
//! [`Chart`] and [`PlotKind::chart`] is the one place that maps the command-line choice to one.
//! Charts of other data (attribution sources, nodes) are functions of their own file.

mod cdf;
mod density;
mod nodes;
mod sources;
mod timeseries;

use std::path::Path;

use plotters::prelude::*;

use crate::error::TraceError;
use crate::model::Stream;
use crate::output::write_output_bytes;

pub use cdf::Cdf;
pub use density::Density;
pub use nodes::nodes_svg;
pub use sources::{source_bars_svg, source_density_svg, MAX_SOURCES};
pub use timeseries::TimeSeries;

/// Most points drawn per trace in CDF and time-series plots.
pub const MAX_POINTS: usize = 4000;

/// Size of a chart (without a legend panel), px.
pub(crate) const SIZE: (u32, u32) = (900, 560);

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

/// A chart of trace series: one implementation per file, picked by [`PlotKind::chart`].
pub trait Chart {
    /// Draws every series under `title` into the SVG file `path`.
    fn draw(&self, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError>;
}

impl PlotKind {
    /// The chart that draws this kind.
    pub fn chart(self) -> &'static dyn Chart {
        match self {
            PlotKind::Density => &Density,
            PlotKind::Cdf => &Cdf,
            PlotKind::TimeSeries => &TimeSeries,
        }
    }
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

/// How a chart maps a drawing error: the file it was drawing names it.
pub(crate) type DrawErr<'e> = &'e dyn Fn(DrawingAreaErrorKind<std::io::Error>) -> TraceError;

/// Draws on a white SVG canvas of `size` with `draw` and writes the file whole to `path` once
/// drawing succeeded: the one place a chart becomes a file.
pub(crate) fn svg_file(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(
        &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        DrawErr,
    ) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let e = draw_err(path);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(&e)?;
        draw(&root, &e)?;
        root.present().map_err(&e)?;
    }
    write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

/// A chart on `area` in the shared look: `title` above, the shared margin, label areas of
/// `x_labels` px below and `y_labels` px left.
pub(crate) fn chart_on<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    x_labels: u32,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(x_labels)
        .y_label_area_size(y_labels);
    b
}

/// Draws `kind` for every series into the SVG file `path`.
pub fn plot(kind: PlotKind, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    if series.is_empty() {
        return Err(TraceError::Argument("nothing to plot".into()));
    }
    kind.chart().draw(series, title, path)
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
}
