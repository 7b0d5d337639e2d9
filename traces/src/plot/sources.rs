//! The attribution charts (`jitter-trace attribution --bars-svg/--density-svg`): noise time per
//! run-time bucket stacked by source, and each source's log-density of its time per detour; the
//! legend in a panel right of the data.

use std::path::Path;

use plotters::coord::combinators::LogCoord;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::density::{density_curves, peak_and_span};
use super::look::{chart_on, mesh, svg_with_legend, y_label_area, Mark};
use crate::attribution::SourceSamples;
use crate::error::TraceError;

/// Most sources drawn in the attribution charts; the rest are pooled as `other`.
pub const MAX_SOURCES: usize = 8;

/// Run-time buckets per decade in the stacked bar chart.
const BUCKETS_PER_DECADE: f64 = 5.0;

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
    let y_area = y_label_area(RangedCoordf64::from(0.0..peak * 1.05));
    svg_with_legend(path, &labels, Mark::Swatch, |left, e| {
        let mut chart = chart_on(left, title, y_area)
            .build_cartesian_2d((edge(first)..edge(last + 1)).log_scale(), 0.0..peak * 1.05)
            .map_err(e)?;
        mesh(
            &mut chart,
            "detour run-time (µs)",
            "noise time in the bucket (ms)",
            &e,
        )?;
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
    let (curves, grid) = density_curves(&xs, |x| x.len() as f64 / all as f64);
    let (peak, x0, x1) = peak_and_span(&curves, &grid);
    let floor = peak * 1e-5;
    let labels: Vec<String> = top.iter().map(|s| s.0.clone()).collect();
    let y_area = y_label_area(LogCoord::from((floor..peak * 2.0).log_scale()));
    svg_with_legend(path, &labels, Mark::Line, |left, e| {
        let mut chart = chart_on(left, title, y_area)
            .build_cartesian_2d((x0..x1).log_scale(), (floor..peak * 2.0).log_scale())
            .map_err(e)?;
        mesh(
            &mut chart,
            "time of the source in one detour (µs)",
            "share of occurrences per grid cell",
            &e,
        )?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::look::SIZE;

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
}
