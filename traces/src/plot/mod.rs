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
//!
//! The shared look is here: tick labels are plain numbers ([`axis_number`]: no exponent, no
//! float noise), the y label area is as wide as its widest tick label plus the axis title
//! ([`y_label_area`]), every legend sits in a panel right of the data ([`svg_with_legend`]),
//! and traces are named by their name or file stem, not their path ([`series_names`]).

mod cdf;
mod density;
mod nodes;
mod sources;
mod timeseries;

use std::path::Path;

use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;

use crate::error::TraceError;
use crate::model::{Header, Stream};
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

/// Longest legend label drawn whole, characters (longer ones end in `…`).
const LEGEND_CHARS: usize = 34;

/// Tick labels an axis of less than a decade shows (plotters' default).
const TICKS: usize = 10;

/// Height of the x label area (tick labels, then the axis title), px.
pub const X_LABEL_AREA: u32 = 48;

/// Width per character of a tick label in the 12 px sans-serif font, px (digits are about
/// 0.6 em: 7.3 px; rounded up).
const CHAR_PX: u32 = 8;

/// What a y label area holds beside its tick labels, px: the rotated axis title (12 px font,
/// 16 px) and a gap (6 px) left of them, the tick marks' distance (10 px) and slack (4 px)
/// right.
const Y_AREA_FIXED_PX: u32 = 36;

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

/// A chart on `area` in the shared look: `title` above, the shared margin, the x label area
/// below and a y label area of `y_labels` px left (from [`y_label_area`]).
pub(crate) fn chart_on<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(y_labels);
    b
}

/// A tick label for people: a plain decimal number of at most three significant digits (all
/// the integer digits of a larger one), no exponent, no float noise: `9.999999999e-5` →
/// `0.0001`, `2.5e-9` → `0.0000000025`, `1e9` → `1000000000`, `12.5` → `12.5`.
pub fn axis_number(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v == 0.0 {
        return "0".into();
    }
    // Decimals for three significant digits; 15 keeps 1e-12 exact and f64 noise out.
    let decimals = (2 - v.abs().log10().floor() as i32).clamp(0, 15) as usize;
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    match text {
        "-0" => "0".into(),
        t => t.to_string(),
    }
}

/// The width of a y label area, px, for the tick labels ([`axis_number`]) that plotters puts
/// on the axis `coord` (e.g. `LogCoord::from((lo..hi).log_scale())`), so that the axis title
/// beside them is never overdrawn.
pub fn y_label_area<C: Ranged<ValueType = f64>>(coord: C) -> u32 {
    let r = coord.range();
    label_area_for(coord.key_points(ticks(r.start, r.end)), axis_number)
}

/// How many tick labels to ask plotters for on an axis over `lo..hi`: over a decade or more
/// (log axes), nine per decade, which makes plotters label the powers of ten only; asked for
/// more, it labels 2 … 10 within each decade and so the end of one decade twice (`10 %`
/// over `10 %`). Under a decade, or from 0 (linear axes), its default of 10.
pub fn ticks(lo: f64, hi: f64) -> usize {
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    if lo > 0.0 && hi / lo >= 10.0 && (hi / lo).is_finite() {
        9 * (hi / lo).log10().floor() as usize
    } else {
        TICKS
    }
}

/// The width of a y label area, px, for tick labels `fmt(value)` at `values`.
pub fn label_area_for(values: Vec<f64>, fmt: impl Fn(f64) -> String) -> u32 {
    let widest = values
        .into_iter()
        .map(|v| fmt(v).chars().count() as u32)
        .max()
        .unwrap_or(1);
    Y_AREA_FIXED_PX + CHAR_PX * widest
}

/// Draws the mesh of `chart` with the axis titles and plain-number tick labels on both axes.
pub(crate) fn mesh<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    x_desc: &str,
    y_desc: &str,
    e: &impl Fn(DrawingAreaErrorKind<DB::ErrorType>) -> TraceError,
) -> Result<(), TraceError>
where
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let (x, y) = (chart.x_range(), chart.y_range());
    chart
        .configure_mesh()
        .x_labels(ticks(x.start, x.end))
        .y_labels(ticks(y.start, y.end))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| axis_number(*v))
        .y_label_formatter(&|v| axis_number(*v))
        .draw()
        .map_err(e)
}

/// How a series is marked in the legend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// A line (curves).
    Line,
    /// A dot (points).
    Dot,
    /// A filled swatch (bars, areas).
    Swatch,
}

/// Draws the legend (a mark in the series' colour and its label per entry, colours
/// `Palette99::pick(i)`) into its own panel, outside the data.
fn legend_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    labels: &[String],
    mark: Mark,
    e: &impl Fn(DrawingAreaErrorKind<DB::ErrorType>) -> TraceError,
) -> Result<(), TraceError> {
    for (i, label) in labels.iter().enumerate() {
        let y = 60 + 22 * i as i32;
        let color = Palette99::pick(i).to_rgba();
        match mark {
            Mark::Swatch => area.draw(&Rectangle::new([(8, y), (24, y + 14)], color.filled())),
            Mark::Line => area.draw(&PathElement::new(
                vec![(6, y + 7), (26, y + 7)],
                color.stroke_width(2),
            )),
            Mark::Dot => area.draw(&Circle::new((16, y + 7), 4, color.filled())),
        }
        .map_err(e)?;
        let text: String = if label.chars().count() > LEGEND_CHARS {
            label.chars().take(LEGEND_CHARS - 1).chain(['…']).collect()
        } else {
            label.clone()
        };
        area.draw(&Text::new(text, (30, y), ("sans-serif", 13)))
            .map_err(e)?;
    }
    Ok(())
}

/// Draws an SVG of the data area (`draw`, with its error mapping) and a legend panel of
/// `labels` (each marked by `mark`) right of it, and writes it to `path`.
pub(crate) fn svg_with_legend(
    path: &Path,
    labels: &[String],
    mark: Mark,
    draw: impl FnOnce(
        &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        DrawErr,
    ) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    // The panel as wide as its longest label (13 px font: 8 px a character) and its mark.
    let chars = labels
        .iter()
        .map(|l| l.chars().count().min(LEGEND_CHARS) as u32)
        .max()
        .unwrap_or(0);
    let width = (40 + 8 * chars).max(120);
    svg_file(path, (SIZE.0 + width, SIZE.1), |root, e| {
        let (left, right) = root.split_horizontally(SIZE.0);
        draw(&left, e)?;
        legend_panel(&right, labels, mark, &e)
    })
}

/// The name of a trace in a legend: its `name` label where it has one, else the file stem of
/// `path` (`runs/node07.jtr` → `node07`), never the whole path.
pub fn trace_name(path: &Path, header: &Header) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synthesize, Spec};
    use plotters::coord::combinators::LogCoord;

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
            streams: &t.streams,
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
