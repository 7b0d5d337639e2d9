//! SVG plots of traces: log-density and CDF of run-times, and detour time series, each able to
//! overlay several traces (e.g. a collected trace and its emulation).
//!
//! - **density**: the Parzen estimate of [`jitter_trace::compare::density`] on one shared log-spaced grid,
//!   as the probability of each grid cell on a log axis against run-time (µs, log axis), like
//!   Fig. 1 of paper 001. Cells below 10⁻⁷ of the peak are not drawn.
//! - **cdf**: the empirical distribution function of run-times (µs, log axis), drawn through at
//!   most [`MAX_POINTS`] order statistics per trace: exact up to [`MAX_POINTS`] detours, from
//!   the run-time histogram beyond (each within 0.1 % of the exact one: at most a pixel).
//!
//! Every chart but the density reads its traces stream by stream in constant memory
//! ([`jitter_trace::stream_order`]); the density needs every run-time (8 bytes each) for its bandwidth.
//! - **timeseries**: run-time (µs, log axis) against the detour start (s from the trace start).
//!   Traces with more than [`MAX_POINTS`] detours are drawn as the longest detour of each of
//!   [`MAX_POINTS`] equal time bins, so the spikes stay visible.
//! - **attribution** (`jitter-trace attribution --bars-svg/--density-svg`): noise time per
//!   detour run-time bucket stacked by source ([`source_bars_svg`]), and each source's
//!   log-density of its time per detour ([`source_density_svg`]); at most [`MAX_SOURCES`]
//!   sources, the legend in a panel right of the data. From a sidecar, the samples go to a
//!   scratch file in drawing order ([`SpilledSeries`]) and the charts are drawn from it in a
//!   few passes ([`source_bars_of`], [`source_density_of`]): the same SVG, in constant memory.
//! - **nodes** ([`nodes_svg`]): one box per node of a cluster-wide collection (`jitter-trace
//!   nodes`), in ranking order: box p20–p80 with the median, whiskers from the shortest detour
//!   to p99.9, a cross at the longest; outliers in red.
//!
//! One file per chart; trace charts (`jitter-trace plot --kind`, `stats --plot`) implement
//! [`Chart`] and [`PlotKind::chart`] is the one place that maps the command-line choice to one.
//! Charts of other data (attribution sources, nodes) are functions of their own file.
//!
//! The shared look is `look`'s: tick labels are plain numbers ([`axis_number`]: no exponent, no
//! float noise), the y label area is as wide as its widest tick label plus the axis title
//! ([`y_label_area`]), every legend sits in a panel right of the data ([`svg_with_legend`]),
//! and traces are named by their name or file stem, not their path ([`series_names`]).

mod cdf;
mod density;
mod look;
mod node_boxes;
mod source_series;
mod sources;
mod timeseries;

use std::path::Path;

use jitter_trace::error::TraceError;
use jitter_trace::model::Header;

pub(crate) use cdf::Cdf;
pub use density::Density;
pub use look::{
    axis_number, label_area_for, ticks, y_label_area, Chart, Series, MAX_POINTS, X_LABEL_AREA,
};
pub use node_boxes::nodes_svg;
pub use source_series::{SpilledSeries, MAX_SOURCES};

pub use sources::{source_bars_of, source_bars_svg, source_density_of, source_density_svg};
pub use timeseries::TimeSeries;

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

impl PlotKind {
    /// The chart's title in words, when the user gives none.
    pub fn title(self) -> &'static str {
        match self {
            PlotKind::Density => "Density of detour run-times",
            PlotKind::Cdf => "Distribution of detour run-times (CDF)",
            PlotKind::TimeSeries => "Time series of detour run-times",
        }
    }

    /// The chart that draws this kind.
    pub fn chart(self) -> &'static dyn Chart {
        match self {
            PlotKind::Density => &Density,
            PlotKind::Cdf => &Cdf,
            PlotKind::TimeSeries => &TimeSeries,
        }
    }
}

/// The name of a trace in a legend: its `name` label where it has one, else the file stem of
/// `path` (`runs/node07.jtr` → `node07`), never the whole path.
pub(crate) fn trace_name(path: &Path, header: &Header) -> String {
    if let Some(name) = header.labels.get("name").filter(|n| !n.is_empty()) {
        return name.clone();
    }
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The legend names of traces read from `paths` ([`trace_name`]); where two would be equal,
/// those carry their parent folder (`a/x`, `b/x`) so that every line stays told apart.
pub fn series_names(items: &[(&Path, &Header)]) -> Vec<String> {
    let names: Vec<String> = items.iter().map(|(p, h)| trace_name(p, h)).collect();
    names
        .iter()
        .zip(items)
        .map(|(n, (p, _))| {
            if names.iter().filter(|m| *m == n).count() < 2 {
                return n.clone();
            }
            match p.parent().and_then(|d| d.file_name()) {
                Some(dir) => format!("{}/{n}", dir.to_string_lossy()),
                None => n.clone(),
            }
        })
        .collect()
}

/// Draws `kind` for every series into the SVG file `path`.
///
/// ```
/// use jitter_plot::{plot, PlotKind, Series};
/// use jitter_trace::synth::{synthesize, Spec};
///
/// let noise: Spec = "periodic:period=4ms,dur=120us+poisson:rate=1000/s,dur=exp:5us".parse()?;
/// let trace = synthesize(&noise, 1, 1_000_000_000, 3)?;
/// let dir = tempfile::tempdir()?;
/// let svg = dir.path().join("cdf.svg");
/// let series = [Series { label: "synthetic", source: &trace }];
/// plot(PlotKind::Cdf, &series, PlotKind::Cdf.title(), &svg)?;
/// assert!(std::fs::read_to_string(&svg)?.contains("<svg"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plot(kind: PlotKind, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    if series.is_empty() {
        return Err(TraceError::Argument("nothing to plot".into()));
    }
    kind.chart().draw(series, title, path)
}

#[cfg(test)]
mod tests {
    use super::look::{SIZE, TICKS};
    use super::*;
    use jitter_trace::synth::{synthesize, Spec};
    use plotters::coord::combinators::LogCoord;
    use plotters::prelude::*;

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
                    source: &a,
                },
                Series {
                    label: "trace-b",
                    source: &b,
                },
            ];
            plot(kind, &series, kind.title(), &p).unwrap();
            let svg = std::fs::read_to_string(&p).unwrap();
            assert!(svg.starts_with("<svg"), "{kind:?}");
            assert!(
                svg.contains("<polyline") || svg.contains("<circle"),
                "{kind:?}"
            );
            let texts = texts(&svg);
            assert!(texts.iter().any(|t| t.text == kind.title()), "{kind:?}");
            // The legend names each series once, in the panel right of the data.
            for name in ["trace-a", "trace-b"] {
                let at: Vec<&Text> = texts.iter().filter(|t| t.text == name).collect();
                assert_eq!(at.len(), 1, "{kind:?}: {name}");
                assert!(at[0].x > SIZE.0 as f64, "{kind:?}: {name} inside the data");
            }
            // Tick labels are plain numbers.
            let numbers: Vec<&str> = texts
                .iter()
                .map(|t| t.text.as_str())
                .filter(|t| t.starts_with(|c: char| c.is_ascii_digit() || c == '-'))
                .collect();
            assert!(numbers.len() >= 6, "{kind:?}: {numbers:?}");
            for n in &numbers {
                assert!(
                    n.parse::<f64>().is_ok() && !n.contains(['e', 'E']),
                    "{kind:?}: tick label {n}"
                );
            }
        }
    }

    /// One `<text>` of an SVG of plotters: its anchor point, anchor and content.
    #[derive(Debug)]
    struct Text {
        x: f64,
        anchor: String,
        transform: bool,
        text: String,
    }

    /// Every `<text>` element of `svg`.
    fn texts(svg: &str) -> Vec<Text> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let attr = |k: &str| -> Option<String> {
                    let v = t.split(&format!(" {k}=\"")).nth(1)?;
                    Some(v[..v.find('"')?].to_string())
                };
                let (_, body) = t.split_once('>')?;
                let (text, _) = body.split_once("</text>")?;
                Some(Text {
                    x: attr("x")?.parse().ok()?,
                    anchor: attr("text-anchor").unwrap_or_default(),
                    transform: attr("transform").is_some(),
                    text: text.trim().to_string(),
                })
            })
            .collect()
    }

    #[test]
    fn tick_labels_are_plain_numbers_from_1e_minus_9_to_1e9() {
        for (v, text) in [
            (9.999999999e-5, "0.0001"),
            (1e-9, "0.000000001"),
            (2.5e-9, "0.0000000025"),
            (1e-7, "0.0000001"),
            (0.25, "0.25"),
            (1.0, "1"),
            (12.5, "12.5"),
            (100.0, "100"),
            (10_000.0, "10000"),
            (123_456.0, "123456"),
            (1e9, "1000000000"),
            (-0.25, "-0.25"),
            (0.0, "0"),
        ] {
            assert_eq!(axis_number(v), text, "{v:e}");
        }
        // Every value the charts' axes take: three significant digits, read back within half
        // a unit of the third, never an exponent.
        for k in -9..=9 {
            for m in [1.0, 1.5, 2.0, 2.5, 3.3333333, 5.0, 7.77777, 9.999999999] {
                let v = m * 10f64.powi(k);
                let text = axis_number(v);
                assert!(!text.contains(['e', 'E']), "{v:e} -> {text}");
                let back: f64 = text.parse().unwrap();
                assert!((back - v).abs() <= 5e-3 * v, "{v:e} -> {text}");
            }
        }
        // The ticks plotters puts on a log axis over the whole range are told apart.
        // (plotters labels the end of a decade twice when asked for more than `ticks` gives).
        for (lo, hi) in [(1e-9, 1e9), (0.6, 45.0), (0.02, 3000.0), (0.5, 3.0)] {
            let coord = LogCoord::from((lo..hi).log_scale());
            let points = coord.key_points(ticks(lo, hi));
            let labels: Vec<String> = points.iter().map(|&v| axis_number(v)).collect();
            let mut distinct = labels.clone();
            distinct.dedup();
            assert_eq!(distinct.len(), labels.len(), "{lo}..{hi}: {labels:?}");
            assert!(labels.len() >= 2, "{lo}..{hi}: {labels:?}");
        }
        let points = LogCoord::from((0.6..45.0).log_scale()).key_points(TICKS);
        let labels: Vec<String> = points.iter().map(|&v| axis_number(v)).collect();
        assert_eq!(
            labels.iter().filter(|l| *l == "10").count(),
            2,
            "plotters' own count labels the decade's end twice: {labels:?}"
        );
    }

    #[test]
    fn legend_names_are_stems_or_the_traces_name() {
        let plain = Header::default();
        let mut named = Header::default();
        named.labels.insert("name".into(), "node 7, after".into());
        assert_eq!(
            trace_name(Path::new("/data/runs/node07.jtr"), &plain),
            "node07"
        );
        assert_eq!(trace_name(Path::new("node07.jtr"), &named), "node 7, after");
        let (a, b, c) = (
            Path::new("/data/a/x.jtr"),
            Path::new("/data/b/x.jtr"),
            Path::new("/data/b/y.jtr"),
        );
        assert_eq!(
            series_names(&[(a, &plain), (b, &plain), (c, &plain)]),
            ["a/x", "b/x", "y"]
        );
    }

    #[test]
    fn the_density_labels_its_y_axis_left_of_tick_labels_that_do_not_cover_it() {
        // A heavy tail: the density spans ten decades, its y ticks reach 0.0000001.
        let s: Spec = "poisson:rate=20000/s,dur=exp:1us+periodic:period=50ms,dur=5ms"
            .parse()
            .unwrap();
        let t = synthesize(&s, 1, 1_000_000_000, 3).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.svg");
        let series = [Series {
            label: "heavy",
            source: &t,
        }];
        plot(PlotKind::Density, &series, "Heavy tail", &p).unwrap();
        let texts = texts(&std::fs::read_to_string(&p).unwrap());
        let desc = texts
            .iter()
            .find(|t| t.text == "probability per grid cell")
            .expect("the y axis title");
        assert!(desc.transform, "the y axis title is rotated");
        // Right-aligned tick labels left of the axis: their left edge (12 px sans-serif digits
        // are at most 7.3 px wide) stays right of the rotated title's 14 px line.
        let ticks: Vec<&Text> = texts
            .iter()
            .filter(|t| t.anchor == "end" && t.text.parse::<f64>().is_ok())
            .collect();
        assert!(ticks.len() >= 5, "{texts:?}");
        assert!(ticks.iter().any(|t| t.text == "0.0000001"), "{ticks:?}");
        for t in ticks {
            let left = t.x - 7.3 * t.text.chars().count() as f64;
            assert!(
                left >= desc.x + 14.0,
                "{t:?} covers the title at {}",
                desc.x
            );
        }
    }
}
