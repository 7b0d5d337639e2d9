//! `slice` over a trace read stream by stream ([`crate::stream_order`]): the frame is cut by
//! the very transforms of [`crate::transform`] (applied to the frame, whose streams hold no records), and
//! each detour then passes one rule per output stream: its source stream, the window it must
//! start in (its run cut at the window's end, as [`transform::slice_time`] cuts it) and the
//! shortest run kept ([`transform::drop_below`]). The result equals the in-memory transforms'
//! detour for detour, in the memory of one run of detours.

use std::cell::Cell;

use crate::error::TraceError;
use crate::model::{Detour, Trace};
use crate::stream_order::{frame_of, RunSink, StreamSource};
use crate::transform;

/// Which part of each stream a slice keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Part {
    /// `[from, to)` ns from the trace's start ([`transform::slice_time`]).
    Time(u64, u64),
    /// The fractions `[from, to)` of each stream's window ([`transform::slice_fraction`]).
    Fraction(f64, f64),
}

/// What `jitter-trace slice` keeps: CPUs (in the order given), then a part, then detours of
/// at least a run-time, applied in that order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SliceSpec {
    /// CPUs kept; empty: all.
    pub cpus: Vec<u32>,
    /// The part kept; `None`: the whole window.
    pub part: Option<Part>,
    /// Shortest run-time kept, ns.
    pub drop_below: Option<u64>,
}

/// The rule of one output stream.
#[derive(Debug, Clone, Copy)]
struct Rule {
    source: usize,
    window: Option<(u64, u64)>,
    min_run: u64,
}

/// A slice of another source, read stream by stream.
pub struct Sliced<'a> {
    inner: &'a dyn StreamSource,
    frame: Trace,
    rules: Vec<Rule>,
    dropped: Cell<u64>,
}

impl<'a> Sliced<'a> {
    /// The slice `spec` of `inner`; the errors of the in-memory transforms (a CPU the trace
    /// lacks, an empty window, bad fractions).
    pub fn new(inner: &'a dyn StreamSource, spec: &SliceSpec) -> Result<Sliced<'a>, TraceError> {
        let mut frame = frame_of(inner.frame());
        let mut source: Vec<usize> = (0..frame.streams.len()).collect();
        if !spec.cpus.is_empty() {
            frame = transform::select_streams(&frame, &spec.cpus)?;
            let cpus: Vec<u32> = inner.frame().streams.iter().map(|s| s.cpu).collect();
            source = (frame.streams.iter())
                .map(|s| cpus.iter().position(|&c| c == s.cpu).unwrap_or(0))
                .collect();
        }
        let windowed = spec.part.is_some();
        frame = match spec.part {
            Some(Part::Time(a, b)) => transform::slice_time(&frame, a, b)?,
            Some(Part::Fraction(a, b)) => transform::slice_fraction(&frame, a, b)?,
            None => frame,
        };
        if let Some(th) = spec.drop_below {
            frame = transform::drop_below(&frame, th)?.0;
        }
        let rules = (frame.streams.iter().zip(source))
            .map(|(s, source)| Rule {
                source,
                window: windowed.then_some((s.begin_ns, s.end_ns)),
                min_run: spec.drop_below.unwrap_or(0),
            })
            .collect();
        Ok(Sliced {
            inner,
            frame,
            rules,
            dropped: Cell::new(0),
        })
    }

    /// Detours the run-time rule dropped so far (over the streams read).
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }
}

impl std::fmt::Debug for Sliced<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sliced")
            .field("rules", &self.rules)
            .field("dropped", &self.dropped.get())
            .finish_non_exhaustive()
    }
}

impl StreamSource for Sliced<'_> {
    fn frame(&self) -> &Trace {
        &self.frame
    }

    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError> {
        let rule = self.rules[stream];
        let mut kept: Vec<Detour> = Vec::new();
        self.inner.detours(rule.source, &mut |run| {
            kept.clear();
            for d in run {
                let d = match rule.window {
                    Some((a, b)) if d.start_ns < a || d.start_ns >= b => continue,
                    Some((_, b)) => Detour {
                        start_ns: d.start_ns,
                        run_ns: d.run_ns.min(b - d.start_ns),
                    },
                    None => *d,
                };
                if d.run_ns < rule.min_run {
                    self.dropped.set(self.dropped.get() + 1);
                } else {
                    kept.push(d);
                }
            }
            if kept.is_empty() {
                Ok(())
            } else {
                sink(&kept)
            }
        })
    }
}
