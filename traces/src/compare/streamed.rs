//! [`super::compare`] of two traces read stream by stream, in constant memory in their lengths, equal to the
//! comparison of the traces read whole (the same `f64` operations in the same order):
//!
//! - the log run-times' sum, then their squared deviations, are added up stream after stream
//!   ([`crate::stream_order`]), as [`crate::summary::mean_variance`] adds the values of a trace in
//!   memory; the quartiles are the exact order statistics ([`crate::stats::kth_longest`]), so
//!   the bandwidth and the grid are the same numbers;
//! - the linear binning onto the grid is the same loop, stream after stream;
//! - the KS statistic is found by refinement: each pass counts both traces' run-times in up to
//!   [`CELLS`] × [`SPLIT`] value cells, the distance at every cell's end is attained (it is
//!   the distance at the last run-time below it), and a cell whose distance at its start plus
//!   its larger share cannot beat the best found is dropped; the others are split again, down
//!   to single values. One pass per level (three or four for run-times up to seconds), more
//!   only when over [`CELLS`] cells stay in the race.
//!
//! Each pass over a file read stream by stream reads it once per stream (decoding each detour
//! once): about 15 passes over each trace; nothing held grows with its length.

use crate::error::TraceError;
use crate::model::{Detour, Stream};
use crate::scan::ChunkSink;
use crate::stats::kth_longest;
use crate::stream_order::StreamSource;
use crate::summary::DetourHistogram;

use super::kde::{
    bandwidth_of, binned, smoothed, Density, Grid, LogSummary, Spread, GRID_POINTS, MIN_BANDWIDTH,
};
use crate::stats::Stats;

/// Cells counted per KS pass.
pub(crate) const CELLS: usize = 1024;
/// Parts a cell is split into at the next level.
pub(crate) const SPLIT: u64 = 1024;

/// Calls `f` with the log run-time of each positive detour of `src`, stream after stream.
fn each_log(src: &dyn StreamSource, f: &mut dyn FnMut(f64)) -> Result<(), TraceError> {
    for i in 0..src.frame().streams.len() {
        src.detours(i, &mut |run| {
            for d in run.iter().filter(|d| d.run_ns > 0) {
                f((d.run_ns as f64).ln());
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// The summary of the log run-times of `file` ([`super::bandwidth`]'s numbers).
pub(crate) fn log_summary(file: &dyn StreamSource) -> Result<LogSummary, TraceError> {
    let (mut n, mut sum) = (0usize, 0.0f64);
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut longest = 0u64;
    for i in 0..file.frame().streams.len() {
        file.detours(i, &mut |run| {
            for d in run.iter().filter(|d| d.run_ns > 0) {
                let x = (d.run_ns as f64).ln();
                n += 1;
                sum += x;
                min = min.min(x);
                max = max.max(x);
                longest = longest.max(d.run_ns);
            }
            Ok(())
        })?;
    }
    if n < 2 {
        let bandwidth = MIN_BANDWIDTH;
        return Ok(LogSummary {
            n,
            min,
            max,
            bandwidth,
        });
    }
    let mean = sum / n as f64;
    let mut squares = 0.0f64;
    each_log(file, &mut |x| squares += (x - mean) * (x - mean))?;
    let sd = (squares / (n - 1) as f64).sqrt();
    // The i-th shortest positive run-time (0-based) is the (n − i)-th longest of all.
    let order = |i: usize| -> Result<f64, TraceError> {
        let k = (n - i) as u64;
        let r = kth_longest(k, longest, |sink| each_pass(file, sink))?.unwrap_or(0);
        Ok((r as f64).ln())
    };
    let quantile = |q: f64| -> Result<f64, TraceError> {
        let pos = q * (n - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        let (a, b) = (order(lo)?, if hi == lo { order(lo)? } else { order(hi)? });
        Ok(a + (b - a) * (pos - lo as f64))
    };
    let spread = Spread {
        sd,
        iqr: quantile(0.75)? - quantile(0.25)?,
        n,
    };
    Ok(LogSummary {
        n,
        min,
        max,
        bandwidth: bandwidth_of(spread),
    })
}

/// The linear binning of `file`'s log run-times onto `grid` ([`super::kde`]'s counts).
fn log_counts(file: &dyn StreamSource, grid: &Grid) -> Result<Vec<f64>, TraceError> {
    let mut counts = vec![0.0f64; grid.points];
    let step = grid.step();
    each_log(file, &mut |x| binned(&mut counts, x, grid.lo, step))?;
    Ok(counts)
}

/// Every detour of `src` into `sink`, stream after stream.
fn each_pass(src: &dyn StreamSource, sink: &mut dyn ChunkSink) -> Result<(), TraceError> {
    for i in 0..src.frame().streams.len() {
        src.detours(i, &mut |run| {
            sink.take(i, run.to_vec());
            Ok(())
        })?;
    }
    Ok(())
}

/// The densities of the log run-times of `sources` on one grid covering them all
/// ([`super::density`] on [`Grid::covering`] of the traces read whole).
pub fn densities(sources: &[&dyn StreamSource]) -> Result<(Vec<Density>, Grid), TraceError> {
    let summaries: Vec<LogSummary> = (sources.iter())
        .map(|s| log_summary(*s))
        .collect::<Result<_, _>>()?;
    let grid = Grid::spanning(&summaries, GRID_POINTS);
    let densities = (sources.iter().zip(&summaries))
        .map(|(s, l)| Ok(smoothed(log_counts(*s, &grid)?, l.n, l.bandwidth, &grid)))
        .collect::<Result<_, TraceError>>()?;
    Ok((densities, grid))
}

/// The statistics of `src`'s detours (`Stats::of_streams` of the trace read whole).
pub(crate) fn stats(s: &dyn StreamSource) -> Result<Stats, TraceError> {
    let mut h = DetourHistogram::new();
    for i in 0..s.frame().streams.len() {
        s.detours(i, &mut |run| {
            run.iter().for_each(|d| h.record(d.run_ns));
            Ok(())
        })?;
    }
    let duration: u64 = s.frame().streams.iter().map(Stream::duration_ns).sum();
    // Rates and shares only where there is observed time (`TraceStats::checked`).
    Ok(crate::stats::TraceStats {
        overall: Stats::from_histogram(&h, duration),
        streams: Vec::new(),
    }
    .checked(&s.frame().header)
    .overall)
}

/// A range of run-times `[lo, hi)` still in the race, with the run-times of each trace below it.
#[derive(Debug, Clone, Copy)]
struct Cell {
    lo: u64,
    hi: u64,
    below: (u64, u64),
}

/// Counts the run-times of a pass into the parts of each cell.
struct CellCount<'a> {
    cells: &'a [Cell],
    widths: &'a [u64],
    counts: &'a mut [u64],
}

impl ChunkSink for CellCount<'_> {
    fn take(&mut self, _: usize, detours: Vec<Detour>) {
        for d in &detours {
            let v = d.run_ns;
            let i = self.cells.partition_point(|c| c.hi <= v);
            if let Some(c) = self.cells.get(i).filter(|c| c.lo <= v) {
                let part = ((v - c.lo) / self.widths[i]) as usize;
                self.counts[i * SPLIT as usize + part] += 1;
            }
        }
    }
}

/// The two-sample KS statistic of the run-times of `a` (`na` of them) and `b` (`nb`), all at
/// most `longest`: `ks_statistic` of the two traces read whole.
pub(crate) fn ks_sources(
    a: &dyn StreamSource,
    b: &dyn StreamSource,
    na: u64,
    nb: u64,
    longest: u64,
) -> Result<f64, TraceError> {
    if na == 0 || nb == 0 {
        return Ok(if na == 0 && nb == 0 { 0.0 } else { 1.0 });
    }
    let (fa, fb) = (na as f64, nb as f64);
    let distance = |i: u64, j: u64| (i as f64 / fa - j as f64 / fb).abs();
    let mut best = 0.0f64;
    let mut race = vec![Cell {
        lo: 0,
        hi: longest.saturating_add(1),
        below: (0, 0),
    }];
    while !race.is_empty() {
        let mut next = Vec::new();
        for cells in race.chunks(CELLS) {
            let widths: Vec<u64> = cells
                .iter()
                .map(|c| (c.hi - c.lo).div_ceil(SPLIT))
                .collect();
            let mut counts = vec![0u64; cells.len() * SPLIT as usize * 2];
            let (ca, cb) = counts.split_at_mut(cells.len() * SPLIT as usize);
            let count = |src, counts| {
                let mut sink = CellCount {
                    cells,
                    widths: &widths,
                    counts,
                };
                each_pass(src, &mut sink)
            };
            count(a, &mut *ca)?;
            count(b, &mut *cb)?;
            for (i, c) in cells.iter().enumerate() {
                let (mut i_a, mut i_b) = c.below;
                let mut lo = c.lo;
                for p in 0..SPLIT as usize {
                    if lo >= c.hi {
                        break;
                    }
                    let hi = (lo + widths[i]).min(c.hi);
                    let (ma, mb) = (ca[i * SPLIT as usize + p], cb[i * SPLIT as usize + p]);
                    let start = distance(i_a, i_b);
                    let bound = start + (ma as f64 / fa).max(mb as f64 / fb);
                    let below = (i_a, i_b);
                    (i_a, i_b) = (i_a + ma, i_b + mb);
                    best = best.max(distance(i_a, i_b));
                    if hi - lo > 1 && ma + mb > 0 {
                        next.push((Cell { lo, hi, below }, bound));
                    }
                    lo = hi;
                }
            }
        }
        // Rounding of the bound is far below 1e-12: a cell dropped cannot hold the maximum.
        race = (next.into_iter())
            .filter(|&(_, bound)| bound > best - 1e-12)
            .map(|(c, _)| c)
            .collect();
    }
    Ok(best)
}
