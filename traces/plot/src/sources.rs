//! The attribution charts (`jitter-trace attribution --bars-svg/--density-svg`): noise time per
//! run-time bucket stacked by source, and each source's log-density of its time per detour; the
//! legend in a panel right of the data.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::density::log_density_svg;
use super::look::{chart_on, mesh, svg_with_legend, y_label_area, Mark};
#[cfg(test)]
use super::source_series::MAX_SOURCES;
use super::source_series::{InMemory, SourceSeries};
use jitter_trace::attribution::SourceSamples;
use jitter_trace::compare::kde::{
    bandwidth_of, binned, smoothed, LogSummary, Spread, MIN_BANDWIDTH,
};
use jitter_trace::compare::{Grid, GRID_POINTS};
use jitter_trace::error::TraceError;
use jitter_trace::selection::Selection;

/// Run-time buckets per decade in the stacked bar chart.
const BUCKETS_PER_DECADE: f64 = 5.0;

/// Stacked bars of noise time per detour run-time bucket (log-spaced, µs), one colour per
/// source: who fills each bucket. `sources` as from [`jitter_trace::attribution::samples`].
pub fn source_bars_svg(
    sources: &[SourceSamples],
    title: &str,
    path: &Path,
) -> Result<(), TraceError> {
    source_bars_of(&InMemory::top(sources), title, path)
}

/// [`source_bars_svg`] of the series of `top` (in memory or spilled: the same SVG).
pub fn source_bars_of(top: &dyn SourceSeries, title: &str, path: &Path) -> Result<(), TraceError> {
    let labels = top.labels().to_vec();
    let (mut lo, mut hi) = (None::<u64>, None::<u64>);
    for i in 0..labels.len() {
        top.each(i, &mut |r, _| {
            if r > 0 {
                lo = Some(lo.map_or(r, |l| l.min(r)));
                hi = Some(hi.map_or(r, |h| h.max(r)));
            }
        })?;
    }
    let (lo, hi) = match (lo, hi) {
        (Some(lo), Some(hi)) => (lo as f64 / 1e3, hi as f64 / 1e3),
        _ => return Err(TraceError::Argument("no detours to chart".into())),
    };
    let first = (lo.log10() * BUCKETS_PER_DECADE).floor() as i32;
    let last = (hi.log10() * BUCKETS_PER_DECADE).floor() as i32;
    let edge = |k: i32| 10f64.powf(k as f64 / BUCKETS_PER_DECADE);
    let buckets = (last - first + 1) as usize;
    // ms of each source in each bucket.
    let mut ms = vec![vec![0.0f64; buckets]; labels.len()];
    for (i, m) in ms.iter_mut().enumerate() {
        top.each(i, &mut |run, ns| {
            if run > 0 {
                let k = ((run as f64 / 1e3).log10() * BUCKETS_PER_DECADE).floor() as i32;
                m[(k - first).clamp(0, buckets as i32 - 1) as usize] += ns as f64 / 1e6;
            }
        })?;
    }
    let peak = (0..buckets)
        .map(|b| ms.iter().map(|m| m[b]).sum::<f64>())
        .fold(0.0f64, f64::max)
        .max(1e-9);
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
    source_density_of(&InMemory::top(sources), title, path)
}

/// [`source_density_svg`] of the series of `top` (in memory or spilled: the same SVG).
pub fn source_density_of(
    top: &dyn SourceSeries,
    title: &str,
    path: &Path,
) -> Result<(), TraceError> {
    let (curves, grid) = log_densities(top)?;
    let axes = [
        "time of the source in one detour (µs)",
        "share of occurrences per grid cell",
    ];
    log_density_svg(path, title, top.labels(), &curves, &grid, 1e-5, axes)
}

/// Each series' curve: (µs, share per grid cell) at every grid point.
type Curves = Vec<Vec<(f64, f64)>>;

/// The curves `density_curves` draws of the natural logs of each series' positive times,
/// weighted by the series' share of them, computed in passes over the series: the sum, then
/// the squared deviations, in the order a slice is summed; the quartiles from the exact order
/// statistics (`selection`: ln is monotone, so the k-th log is the log of the k-th time); the
/// grid from each series' extremes ([`Grid::spanning`]); the linear binning in order.
fn log_densities(top: &dyn SourceSeries) -> Result<(Curves, Grid), TraceError> {
    let n = top.labels().len();
    let mut sums: Vec<LogSummary> = Vec::with_capacity(n);
    let mut extremes = Vec::with_capacity(n);
    for i in 0..n {
        let (mut count, mut sum) = (0usize, 0.0f64);
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        top.each(i, &mut |_, ns| {
            if ns > 0 {
                count += 1;
                sum += (ns as f64).ln();
                lo = lo.min(ns);
                hi = hi.max(ns);
            }
        })?;
        let min = if count > 0 {
            (lo as f64).ln()
        } else {
            f64::INFINITY
        };
        let max = if count > 0 {
            (hi as f64).ln()
        } else {
            f64::NEG_INFINITY
        };
        sums.push(LogSummary {
            n: count,
            min,
            max,
            bandwidth: MIN_BANDWIDTH,
        });
        extremes.push((sum, lo, hi));
    }
    let all: usize = sums.iter().map(|s| s.n).sum();
    if all == 0 {
        return Err(TraceError::Argument("no detours to chart".into()));
    }
    // The four order statistics of each quartile pair, found together.
    let mut sel = Selection::new();
    let mut ids: Vec<Vec<(usize, usize)>> = Vec::with_capacity(n);
    for (s, &(_, lo, hi)) in sums.iter().zip(&extremes) {
        let mut mine = Vec::new();
        if s.n >= 2 {
            for q in [0.25f64, 0.75] {
                let pos = q * (s.n - 1) as f64;
                let (a, b) = (pos.floor() as u64, pos.ceil() as u64);
                mine.push((sel.add(a, lo, hi), sel.add(b, lo, hi)));
            }
        }
        ids.push(mine);
    }
    while sel.pending() {
        sel.begin_pass();
        for (i, mine) in ids.iter().enumerate().filter(|(_, m)| !m.is_empty()) {
            top.each(i, &mut |_, ns| {
                if ns > 0 {
                    for &(a, b) in mine {
                        sel.offer(a, ns);
                        sel.offer(b, ns);
                    }
                }
            })?;
        }
        sel.end_pass();
    }
    for (i, s) in sums.iter_mut().enumerate() {
        if s.n < 2 {
            continue;
        }
        let mean = extremes[i].0 / s.n as f64;
        let mut squares = 0.0f64;
        top.each(i, &mut |_, ns| {
            if ns > 0 {
                let x = (ns as f64).ln();
                squares += (x - mean) * (x - mean);
            }
        })?;
        let sd = (squares / (s.n - 1) as f64).sqrt();
        let quartile = |k: usize, q: f64| -> f64 {
            let (a, b) = ids[i][k];
            let at = |id| (sel.value(id).unwrap_or(0) as f64).ln();
            let pos = q * (s.n - 1) as f64;
            at(a) + (at(b) - at(a)) * (pos - pos.floor())
        };
        let iqr = quartile(1, 0.75) - quartile(0, 0.25);
        s.bandwidth = bandwidth_of(Spread { sd, iqr, n: s.n });
    }
    let grid = Grid::spanning(&sums, GRID_POINTS);
    let step = grid.step();
    let mut curves = Vec::with_capacity(n);
    for (i, s) in sums.iter().enumerate() {
        let w = s.n as f64 / all as f64;
        let mut counts = vec![0.0f64; grid.points];
        top.each(i, &mut |_, ns| {
            if ns > 0 {
                binned(&mut counts, (ns as f64).ln(), grid.lo, step);
            }
        })?;
        let d = smoothed(counts, s.n, s.bandwidth, &grid);
        let curve = (0..grid.points)
            .map(|j| (grid.run_ns(j) / 1e3, d.values[j] * step * w))
            .collect();
        curves.push(curve);
    }
    Ok((curves, grid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::look::SIZE;

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

    /// Sources of varied sizes: source i has 40 + 37·i samples, some with a zero time or a
    /// zero run-time, times spread over three decades.
    fn varied(n: usize) -> Vec<SourceSamples> {
        (0..n)
            .map(|i| SourceSamples {
                source: format!("s{i:02}"),
                samples: (0..40 + 37 * i as u64)
                    .map(|k| {
                        let h = (k * 2_654_435_761 + i as u64 * 40_503) % 100_000;
                        let run = if h % 53 == 0 { 0 } else { 200 + h * 7 };
                        let ns = if h % 31 == 0 {
                            0
                        } else {
                            run * (1 + h % 5) / 6
                        };
                        (run, ns)
                    })
                    .collect(),
            })
            .collect()
    }

    /// An attribution of one CPU whose detours are the samples of `sources`, one after another,
    /// each detour's part that source's time (the rest unattributed).
    fn attributed_with(sources: &[SourceSamples]) -> jitter_trace::sidecar::Attribution {
        let mut start = 0u64;
        let mut detours = Vec::new();
        for s in sources {
            for &(run, ns) in &s.samples {
                start += run + 1_000;
                let part = jitter_trace::sidecar::Part {
                    source: s.source.clone(),
                    start_ns: start,
                    ns: ns.min(run),
                };
                detours.push(jitter_trace::filter::attributed(start, run, vec![part]));
            }
        }
        jitter_trace::sidecar::Attribution {
            version: 1,
            cpus: vec![jitter_trace::sidecar::CpuAttribution {
                detours,
                end_ns: start + 1_000,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The charts drawn from a sidecar through its scratch file are byte for byte those drawn
    /// from its samples in memory (3 sources; 12, where 5 are pooled as `other`; a bucket),
    /// and the density's curves are, to the bit, those the in-memory `density_curves` gives.
    #[test]
    fn the_charts_of_a_spilled_sidecar_are_the_charts_of_its_samples_in_memory() {
        use crate::density::density_curves;
        use crate::source_series::SpilledSeries;
        use jitter_trace::attribution::Mode;
        let dir = tempfile::tempdir().unwrap();
        for n in [3, 12] {
            let a = attributed_with(&varied(n));
            for (mode, runs) in [
                (Mode::Frequency, None),
                (Mode::Time, Some((1_000, 300_000))),
            ] {
                let samples = jitter_trace::attribution::samples_of(&a, mode, runs).unwrap();
                let spilled = SpilledSeries::read(&a, mode, runs).unwrap();
                let mem = InMemory::top(&samples);
                assert_eq!(spilled.labels(), mem.labels());
                for (k, draw) in [
                    source_bars_of as fn(&dyn SourceSeries, &str, &Path) -> _,
                    source_density_of,
                ]
                .into_iter()
                .enumerate()
                {
                    let (p, q) = (dir.path().join("m.svg"), dir.path().join("s.svg"));
                    draw(&mem, "t", &p).unwrap();
                    draw(&spilled, "t", &q).unwrap();
                    let (m, s) = (std::fs::read(&p).unwrap(), std::fs::read(&q).unwrap());
                    assert!(m == s, "{n} sources, {mode:?}, chart {k}");
                }
                let xs: Vec<Vec<f64>> = (mem.samples.iter())
                    .map(|v| {
                        v.iter()
                            .filter(|p| p.1 > 0)
                            .map(|p| (p.1 as f64).ln())
                            .collect()
                    })
                    .collect();
                let all: usize = xs.iter().map(Vec::len).sum();
                let want = density_curves(&xs, |x| x.len() as f64 / all as f64);
                let got = log_densities(&spilled).unwrap();
                assert_eq!(got.1, want.1);
                let bits = |c: &Vec<Vec<(f64, f64)>>| -> Vec<(u64, u64)> {
                    c.iter()
                        .flatten()
                        .map(|p| (p.0.to_bits(), p.1.to_bits()))
                        .collect()
                };
                assert_eq!(bits(&got.0), bits(&want.0), "{n} sources, {mode:?}");
            }
        }
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
