//! The shared look of every chart: tick labels as plain numbers ([`axis_number`]: no exponent,
//! no float noise), a y label area as wide as its widest tick label plus the axis title
//! ([`y_label_area`]), every legend in a panel right of the data ([`svg_with_legend`]), one
//! chart size; and what a chart of trace series is ([`Series`], [`Chart`]).

use std::path::Path;

use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;

use jitter_trace::error::TraceError;
use jitter_trace::output::write_output_bytes;
use jitter_trace::stream_order::StreamSource;

/// Most points drawn per trace in CDF and time-series plots.
pub const MAX_POINTS: usize = 4000;

/// Size of a chart (without a legend panel), px.
pub(crate) const SIZE: (u32, u32) = (900, 560);

/// Longest legend label drawn whole, characters (longer ones end in `…`).
pub(crate) const LEGEND_CHARS: usize = 34;

/// Tick labels an axis of less than a decade shows (plotters' default).
pub(crate) const TICKS: usize = 10;

/// Height of the x label area (tick labels, then the axis title), px.
pub const X_LABEL_AREA: u32 = 48;

/// Width per character of a tick label in the 12 px sans-serif font, px (digits are about
/// 0.6 em: 7.3 px; rounded up).
pub(crate) const CHAR_PX: u32 = 8;

/// What a y label area holds beside its tick labels, px: the rotated axis title (12 px font,
/// 16 px) and a gap (6 px) left of them, the tick marks' distance (10 px) and slack (4 px)
/// right.
pub(crate) const Y_AREA_FIXED_PX: u32 = 36;

/// One trace (or some of its streams) in a plot, with its legend label.
#[derive(Clone, Copy)]
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// The trace drawn (its streams pooled): in memory, or read stream by stream from its file.
    pub source: &'a dyn StreamSource,
}

impl std::fmt::Debug for Series<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Series")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// The shortest and longest positive run-time of each series (`None`: none), ns.
pub(crate) type RunSpan = Option<(u64, u64)>;

/// Widens `span` to hold `run_ns` (a run-time of 0 is not drawn on a log axis).
pub(crate) fn widen(span: &mut RunSpan, run_ns: u64) {
    if run_ns > 0 {
        *span = Some(span.map_or((run_ns, run_ns), |(lo, hi)| {
            (lo.min(run_ns), hi.max(run_ns))
        }));
    }
}

/// A chart of trace series: one implementation per file, picked by `PlotKind::chart`.
pub trait Chart {
    /// Draws every series under `title` into the SVG file `path`.
    fn draw(&self, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError>;
}

pub(crate) fn draw_err<E: std::error::Error + Send + Sync + 'static>(
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
pub(crate) fn legend_panel<DB: DrawingBackend>(
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

/// Run-time range in µs over all series, for a log axis.
pub(crate) fn run_range_us(spans: &[RunSpan]) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = 0.0f64;
    for &(a, b) in spans.iter().flatten() {
        lo = lo.min(a as f64 / 1e3);
        hi = hi.max(b as f64 / 1e3);
    }
    if !lo.is_finite() {
        return (0.1, 10.0);
    }
    (lo / 1.5, (hi * 1.5).max(lo * 2.0))
}
