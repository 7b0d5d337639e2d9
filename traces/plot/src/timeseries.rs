//! Run-time (µs, log axis) against the detour start (s) of each series.

use std::path::Path;

use plotters::coord::combinators::LogCoord;
use plotters::prelude::*;

use super::look::{
    chart_on, mesh, run_range_us, svg_with_legend, widen, y_label_area, Chart, Mark, RunSpan,
    Series, MAX_POINTS,
};
use jitter_trace::error::TraceError;
use jitter_trace::stream_order::StreamSource;

/// The time-series chart (`--kind timeseries`).
#[derive(Debug, Clone, Copy)]
pub struct TimeSeries;

impl Chart for TimeSeries {
    fn draw(&self, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
        timeseries_svg(series, title, path)
    }
}

/// The points of one series as its detours come (stream by stream, each in time order):
/// every detour of positive run-time while there are at most [`MAX_POINTS`], and the longest
/// of each of [`MAX_POINTS`] equal time bins (the first of equals), so that the spikes stay
/// visible; in the memory of `2 · MAX_POINTS` points whatever the trace's length.
struct TimePoints {
    origin: u64,
    span: u64,
    count: usize,
    few: Vec<(u64, u64)>,
    bins: Vec<Option<(u64, u64)>>,
    runs: RunSpan,
}

impl TimePoints {
    fn new(origin: u64, span: u64) -> TimePoints {
        TimePoints {
            origin,
            span: span.max(1),
            count: 0,
            few: Vec::new(),
            bins: vec![None; MAX_POINTS],
            runs: None,
        }
    }

    fn add(&mut self, start_ns: u64, run_ns: u64) {
        if run_ns == 0 {
            return;
        }
        widen(&mut self.runs, run_ns);
        self.count += 1;
        if self.count <= MAX_POINTS {
            self.few.push((start_ns, run_ns));
        } else if self.count == MAX_POINTS + 1 {
            self.few = Vec::new();
        }
        let b = (((start_ns - self.origin) as u128 * MAX_POINTS as u128 / self.span as u128)
            as usize)
            .min(MAX_POINTS - 1);
        match self.bins[b] {
            Some((_, run)) if run >= run_ns => {}
            _ => self.bins[b] = Some((start_ns, run_ns)),
        }
    }

    /// (start s, run µs) points.
    fn points(&self) -> Vec<(f64, f64)> {
        let pt =
            |&(start, run): &(u64, u64)| ((start - self.origin) as f64 / 1e9, run as f64 / 1e3);
        if self.count <= MAX_POINTS {
            self.few.iter().map(pt).collect()
        } else {
            self.bins.iter().flatten().map(pt).collect()
        }
    }
}

/// The points of `src` (see [`TimePoints`]).
fn time_points(src: &dyn StreamSource, origin: u64, span: u64) -> Result<TimePoints, TraceError> {
    let mut p = TimePoints::new(origin, span);
    for i in 0..src.frame().streams.len() {
        src.detours(i, &mut |run| {
            for d in run {
                p.add(d.start_ns, d.run_ns);
            }
            Ok(())
        })?;
    }
    Ok(p)
}

/// Run-time against start time for each series.
fn timeseries_svg(series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
    let frames = || series.iter().flat_map(|s| s.source.frame().streams.iter());
    let origin = frames().map(|s| s.begin_ns).min().unwrap_or(0);
    let end = frames()
        .map(|s| s.end_ns)
        .max()
        .unwrap_or(0)
        .max(origin + 1);
    let points: Vec<TimePoints> = series
        .iter()
        .map(|s| time_points(s.source, origin, end - origin))
        .collect::<Result<_, _>>()?;
    let spans: Vec<RunSpan> = points.iter().map(|p| p.runs).collect();
    let (y0, y1) = run_range_us(&spans);
    let y_area = y_label_area(LogCoord::from((y0..y1).log_scale()));
    let labels: Vec<String> = series.iter().map(|s| s.label.to_string()).collect();
    svg_with_legend(path, &labels, Mark::Dot, |root, e| {
        let mut chart = chart_on(root, title, y_area)
            .build_cartesian_2d(0.0..(end - origin) as f64 / 1e9, (y0..y1).log_scale())
            .map_err(e)?;
        mesh(
            &mut chart,
            "detour start (s from the trace's start)",
            "detour run-time (µs)",
            &e,
        )?;
        for (i, p) in points.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(
                    p.points()
                        .into_iter()
                        .map(|p| Circle::new(p, 2, color.filled())),
                )
                .map_err(e)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_trace::synth::{synthesize, Spec};

    #[test]
    fn timeseries_keeps_the_longest_detour_of_each_bin() {
        let s: Spec = "poisson:rate=100000/s,dur=exp:1us+periodic:period=100ms,dur=500us"
            .parse()
            .unwrap();
        let t = synthesize(&s, 1, 1_000_000_000, 9).unwrap();
        let pts = time_points(&t, 0, 1_000_000_000).unwrap().points();
        assert!(pts.len() <= MAX_POINTS);
        let big = pts.iter().filter(|p| p.1 >= 500.0).count();
        assert_eq!(big, 10);
    }
}
