//! Run-time (µs, log axis) against the detour start (s) of each series.

use std::path::Path;

use plotters::coord::combinators::LogCoord;
use plotters::prelude::*;

use super::look::{
    chart_on, mesh, run_range_us, svg_with_legend, y_label_area, Chart, Mark, Series, MAX_POINTS,
};
use crate::error::TraceError;
use crate::model::Stream;

/// The time-series chart (`--kind timeseries`).
#[derive(Debug, Clone, Copy)]
pub struct TimeSeries;

impl Chart for TimeSeries {
    fn draw(&self, series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
        timeseries_svg(series, title, path)
    }
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
fn timeseries_svg(series: &[Series], title: &str, path: &Path) -> Result<(), TraceError> {
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
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts = timeseries_points(s.streams, origin, end - origin);
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 2, color.filled())))
                .map_err(e)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synthesize, Spec};

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
}
