//! Transforms of traces: scale, merge short sleeps, slice, select streams, drop short detours.
//!
//! Every transform returns a new trace that passes [`Trace::validate`] and records what was done
//! in the header label `transform` (`;`-separated, oldest first).

use crate::error::TraceError;
use crate::model::{Detour, Stream, Trace};
use crate::stats::check_scale;

/// Appends a step to the `transform` label and refreshes the header from the streams.
fn finish(mut trace: Trace, step: String) -> Result<Trace, TraceError> {
    let label = trace.header.labels.entry("transform".into()).or_default();
    if !label.is_empty() {
        label.push(';');
    }
    label.push_str(&step);
    trace.sync_header();
    trace.validate()?;
    Ok(trace)
}

/// Rebuilds a stream from detours, keeping its CPU and counters.
fn rebuild(
    old: &Stream,
    begin_ns: u64,
    end_ns: u64,
    detours: &[Detour],
) -> Result<Stream, TraceError> {
    let mut s = Stream::from_detours(old.cpu, begin_ns, end_ns, detours)?;
    s.counters = old.counters.clone();
    Ok(s)
}

/// Multiplies every run-time and sleep-time by `scale` (times are scaled from each stream's begin).
///
/// Start and end of each detour are rounded to the nearest ns, so run and sleep stay consistent;
/// with `scale` < 1, detours that rounding makes touch or collide are merged into one.
pub fn scale(trace: &Trace, scale: f64) -> Result<Trace, TraceError> {
    check_scale(scale)?;
    let at = |begin: u64, t: u64| -> Result<u64, TraceError> {
        let v = begin as f64 + ((t - begin) as f64 * scale).round();
        if v >= u64::MAX as f64 {
            return Err(TraceError::Argument(format!(
                "scale {scale} makes time {t} ns overflow"
            )));
        }
        Ok(v as u64)
    };
    let mut out = trace.clone();
    let mut merged = 0u64;
    for (o, s) in out.streams.iter_mut().zip(&trace.streams) {
        let b = s.begin_ns;
        let mut ds: Vec<Detour> = Vec::with_capacity(s.records.len());
        for r in &s.records {
            let start = at(b, r.start_ns)?;
            let end = at(b, r.end_ns())?;
            match ds.last_mut() {
                Some(last) if start <= last.start_ns || start < last.end_ns() => {
                    let e = last.end_ns().max(end);
                    last.run_ns = e - last.start_ns;
                    merged += 1;
                }
                _ => ds.push(Detour {
                    start_ns: start,
                    run_ns: end - start,
                }),
            }
        }
        let end = at(b, s.end_ns)?.max(ds.last().map_or(b, Detour::end_ns));
        *o = rebuild(s, b, end, &ds)?;
    }
    if merged > 0 {
        // A scaled trace holds the same detours, longer or shorter: one whose sleeps round to
        // nothing (below a trace's 1 ns resolution) would be another trace.
        return Err(merge_refusal(scale, merged, trace.record_count() as u64));
    }
    out.header.duration_ns = (trace.header.duration_ns as f64 * scale).round() as u64;
    out.self_windows.clear();
    finish(out, format!("scale={scale}"))
}

/// Why [`scale`] refuses a factor that would merge `merged` of `detours` detours.
pub(crate) fn merge_refusal(scale: f64, merged: u64, detours: u64) -> TraceError {
    TraceError::Argument(format!(
        "scale {scale} would merge {merged} of {detours} detours into their neighbours (the \
         sleeps between them become shorter than 1 ns); use a larger factor"
    ))
}

/// Merges each detour with the next one when the sleep between them is shorter than `min_sleep_ns`.
///
/// The merged detour starts at the first start and its run-time is the sum of the run-times (the
/// short sleep is "replaced with 0", as in paper 001); the removed sleep moves after the merged
/// detour, so every later start is unchanged. The last detour of a stream is never merged with the
/// window end. Returns the trace and the number of sleeps removed.
pub fn merge_short_sleeps(trace: &Trace, min_sleep_ns: u64) -> Result<(Trace, u64), TraceError> {
    let mut out = trace.clone();
    let mut merged = 0u64;
    for (o, s) in out.streams.iter_mut().zip(&trace.streams) {
        let mut ds: Vec<Detour> = Vec::with_capacity(s.records.len());
        let mut extend_last = false;
        for (i, r) in s.records.iter().enumerate() {
            match ds.last_mut() {
                Some(last) if extend_last => {
                    last.run_ns += r.run_ns;
                    merged += 1;
                }
                _ => ds.push(r.detour()),
            }
            extend_last = r.sleep_ns < min_sleep_ns && i + 1 < s.records.len();
        }
        *o = rebuild(s, s.begin_ns, s.end_ns, &ds)?;
    }
    let t = finish(out, format!("merge_sleeps<{min_sleep_ns}ns"))?;
    Ok((t, merged))
}

/// Keeps, in each stream, the detours that start in `[begin + from, begin + to)` of the trace.
///
/// Offsets are from the trace's start (the earliest stream begin). Each stream's window becomes
/// the intersection with the slice; a detour running past the slice end is cut at it.
pub fn slice_time(trace: &Trace, from_ns: u64, to_ns: u64) -> Result<Trace, TraceError> {
    if to_ns <= from_ns {
        return Err(TraceError::Argument(format!(
            "slice end {to_ns} ns must be after its start {from_ns} ns"
        )));
    }
    let origin = trace.streams.iter().map(|s| s.begin_ns).min().unwrap_or(0);
    let a = origin.saturating_add(from_ns);
    let b = origin.saturating_add(to_ns);
    let last = trace
        .streams
        .iter()
        .map(|s| s.end_ns)
        .max()
        .unwrap_or(origin);
    if a >= last {
        return Err(TraceError::Argument(format!(
            "slice start {from_ns} ns is at or after the trace's end ({} ns from its start): \
             the slice would hold nothing",
            last - origin
        )));
    }
    let mut out = trace.clone();
    for (o, s) in out.streams.iter_mut().zip(&trace.streams) {
        *o = cut(s, a.max(s.begin_ns), b.min(s.end_ns))?;
    }
    out.self_windows.retain(|w| w.end_ns > a && w.start_ns < b);
    finish(out, format!("slice={from_ns}ns..{to_ns}ns"))
}

/// Keeps, in each stream, the detours that start in the part `[from, to)` of its window (fractions).
pub fn slice_fraction(trace: &Trace, from: f64, to: f64) -> Result<Trace, TraceError> {
    if !(0.0..=1.0).contains(&from) || !(0.0..=1.0).contains(&to) || to <= from {
        return Err(TraceError::Argument(format!(
            "fractions {from}..{to} must satisfy 0 <= from < to <= 1"
        )));
    }
    let mut out = trace.clone();
    for (o, s) in out.streams.iter_mut().zip(&trace.streams) {
        let d = s.duration_ns() as f64;
        let a = s.begin_ns + (d * from).round() as u64;
        let b = s.begin_ns + (d * to).round() as u64;
        *o = cut(s, a, b)?;
    }
    finish(out, format!("slice_fraction={from}..{to}"))
}

/// The part of a stream in `[a, b)` (an empty window when `b <= a`).
fn cut(s: &Stream, a: u64, b: u64) -> Result<Stream, TraceError> {
    let b = b.max(a);
    let lo = s.records.partition_point(|r| r.start_ns < a);
    let hi = s.records.partition_point(|r| r.start_ns < b);
    let ds: Vec<Detour> = s.records[lo..hi]
        .iter()
        .map(|r| Detour {
            start_ns: r.start_ns,
            run_ns: r.run_ns.min(b - r.start_ns),
        })
        .collect();
    rebuild(s, a, b, &ds)
}

/// Keeps the streams of the given CPUs, in the order given.
pub fn select_streams(trace: &Trace, cpus: &[u32]) -> Result<Trace, TraceError> {
    let mut out = trace.clone();
    out.streams = cpus
        .iter()
        .map(|&c| {
            trace
                .streams
                .iter()
                .find(|s| s.cpu == c)
                .cloned()
                .ok_or_else(|| {
                    let present: Vec<String> =
                        trace.streams.iter().map(|s| s.cpu.to_string()).collect();
                    crate::names::absent("--cpus", &c.to_string(), "CPU", "the trace", &present, "")
                })
        })
        .collect::<Result<_, _>>()?;
    let twice = (1..cpus.len()).find_map(|i| cpus[..i].contains(&cpus[i]).then_some(cpus[i]));
    if let Some(c) = twice {
        return Err(TraceError::Argument(format!(
            "CPU {c} is listed twice: each stream is kept once (list every CPU once)"
        )));
    }
    let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
    finish(out, format!("cpus={}", list.join(",")))
}

/// Removes detours shorter than `threshold_ns`; their time becomes sleep. Returns how many went.
pub fn drop_below(trace: &Trace, threshold_ns: u64) -> Result<(Trace, u64), TraceError> {
    let mut out = trace.clone();
    let mut dropped = 0u64;
    for (o, s) in out.streams.iter_mut().zip(&trace.streams) {
        let ds: Vec<Detour> = s
            .records
            .iter()
            .filter(|r| r.run_ns >= threshold_ns)
            .map(|r| r.detour())
            .collect();
        dropped += (s.records.len() - ds.len()) as u64;
        *o = rebuild(s, s.begin_ns, s.end_ns, &ds)?;
    }
    if out.header.threshold_ns < threshold_ns as f64 {
        out.header.threshold_ns = threshold_ns as f64;
    }
    let t = finish(out, format!("drop<{threshold_ns}ns"))?;
    Ok((t, dropped))
}

/// Removes detours of `threshold_ns` and longer; their time becomes sleep (what a prediction
/// without them answers: how much of a slowdown they cause). Returns how many went.
pub fn drop_at_least(trace: &Trace, threshold_ns: u64) -> Result<(Trace, u64), TraceError> {
    let mut out = trace.clone();
    let mut dropped = 0u64;
    for (o, s) in out.streams.iter_mut().zip(&trace.streams) {
        let ds: Vec<Detour> = (s.records.iter())
            .filter(|r| r.run_ns < threshold_ns)
            .map(|r| r.detour())
            .collect();
        dropped += (s.records.len() - ds.len()) as u64;
        *o = rebuild(s, s.begin_ns, s.end_ns, &ds)?;
    }
    let t = finish(out, format!("drop>={threshold_ns}ns"))?;
    Ok((t, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(ds: &[(u64, u64)], end: u64) -> Trace {
        let ds: Vec<Detour> = ds
            .iter()
            .map(|&(start_ns, run_ns)| Detour { start_ns, run_ns })
            .collect();
        let mut t = Trace {
            streams: vec![Stream::from_detours(0, 0, end, &ds).unwrap()],
            ..Trace::default()
        };
        t.sync_header();
        t
    }

    fn pairs(t: &Trace) -> Vec<(u64, u64)> {
        t.streams[0]
            .records
            .iter()
            .map(|r| (r.start_ns, r.run_ns))
            .collect()
    }

    #[test]
    fn scale_multiplies_runs_and_sleeps() {
        let t = trace(&[(10, 5), (100, 20)], 1000);
        let s = scale(&t, 3.0).unwrap();
        assert_eq!(pairs(&s), vec![(30, 15), (300, 60)]);
        assert_eq!(s.streams[0].end_ns, 3000);
        assert_eq!(s.streams[0].records[0].sleep_ns, 3 * 85);
        assert!(s.header.labels["transform"].contains("scale=3"));
        assert!(scale(&t, 0.0).is_err());
        assert!(scale(&t, -1.0).is_err());
        assert!(scale(&t, f64::NAN).is_err());
    }

    #[test]
    fn a_scale_that_merges_detours_is_refused() {
        let t = trace(&[(10, 1), (12, 1), (100, 20)], 1000);
        let e = scale(&t, 0.1).unwrap_err().to_string();
        assert_eq!(
            e,
            "scale 0.1 would merge 1 of 3 detours into their neighbours (the sleeps between \
             them become shorter than 1 ns); use a larger factor"
        );
        let e = scale(&t, 1e-12).unwrap_err().to_string();
        assert!(
            e.starts_with("scale 0.000000000001 would merge 2 of 3"),
            "{e}"
        );
        let s = scale(&t, 0.5).unwrap();
        assert_eq!(pairs(&s), vec![(5, 1), (6, 1), (50, 10)]);
    }

    #[test]
    fn short_sleeps_merge_and_runs_add() {
        // sleeps: 85 (short), 380, 10 (short, before last), 489 (last, never merged)
        let t = trace(&[(10, 5), (100, 20), (500, 1), (511, 0)], 1000);
        let (m, n) = merge_short_sleeps(&t, 100).unwrap();
        assert_eq!(n, 2);
        assert_eq!(pairs(&m), vec![(10, 25), (500, 1)]);
        assert_eq!(m.streams[0].records[0].sleep_ns, 465);
        assert_eq!(m.streams[0].noise_ns(), t.streams[0].noise_ns());
    }

    #[test]
    fn slices_keep_detours_starting_inside() {
        let t = trace(&[(10, 5), (100, 20), (500, 100)], 1000);
        let s = slice_time(&t, 50, 550).unwrap();
        assert_eq!(pairs(&s), vec![(100, 20), (500, 50)]);
        assert_eq!((s.streams[0].begin_ns, s.streams[0].end_ns), (50, 550));
        let f = slice_fraction(&t, 0.0, 0.1).unwrap();
        assert_eq!(pairs(&f), vec![(10, 5)]);
        assert!(slice_fraction(&t, 0.5, 0.5).is_err());
        assert!(slice_time(&t, 5, 5).is_err());
        let e = slice_time(&t, 1000, 2000).unwrap_err().to_string();
        assert_eq!(
            e,
            "slice start 1000 ns is at or after the trace's end (1000 ns from its start): the \
             slice would hold nothing"
        );
        assert_eq!(pairs(&slice_time(&t, 999, 2000).unwrap()), vec![]);
    }

    #[test]
    fn drop_and_select() {
        let t = trace(&[(10, 5), (100, 20), (500, 1)], 1000);
        let (d, n) = drop_below(&t, 5).unwrap();
        assert_eq!(n, 1);
        assert_eq!(pairs(&d), vec![(10, 5), (100, 20)]);
        assert_eq!(d.streams[0].records[1].sleep_ns, 880);
        assert!(select_streams(&t, &[0]).is_ok());
        assert!(select_streams(&t, &[3])
            .unwrap_err()
            .to_string()
            .contains("CPU 3"));
        let e = select_streams(&t, &[0, 0]).unwrap_err().to_string();
        assert_eq!(
            e,
            "CPU 0 is listed twice: each stream is kept once (list every CPU once)"
        );
    }

    #[test]
    fn dropping_long_detours_keeps_the_short_ones_and_the_length() {
        let t = trace(&[(10, 5), (100, 50), (200, 7), (300, 500)], 1_000);
        let (d, n) = drop_at_least(&t, 50).unwrap();
        assert_eq!(n, 2);
        let runs: Vec<u64> = d.streams[0].records.iter().map(|r| r.run_ns).collect();
        assert_eq!(runs, vec![5, 7]);
        assert_eq!(d.streams[0].duration_ns(), t.streams[0].duration_ns());
        assert_eq!(d.streams[0].noise_ns(), 12);
        assert_eq!(d.header.labels["transform"], "drop>=50ns");
    }
}
