//! `scale` and `merge` over a trace read stream by stream ([`crate::stream_order`]), as
//! [`crate::sliced`] does `slice`: the output frame is the in-memory transform of the input's
//! frame (its streams hold no records: the windows, labels and duration come out as
//! [`transform::scale`] and [`transform::merge_short_sleeps`] make them), and each stream's
//! detours pass the transform's rule with one detour of look-behind. The result equals the
//! in-memory transform's detour for detour, in the memory of one run of detours.

use std::cell::Cell;

use crate::error::TraceError;
use crate::model::{Detour, Trace};
use crate::stream_order::{frame_of, RunSink, StreamSource};
use crate::transform;

/// Detours handed on at a time.
const RUN: usize = 4096;

/// A source whose every detour is scaled by a factor from its stream's begin
/// ([`transform::scale`]).
pub struct Scaled<'a> {
    inner: &'a dyn StreamSource,
    frame: Trace,
    scale: f64,
}

impl<'a> Scaled<'a> {
    /// `inner` scaled by `scale`; the errors of [`transform::scale`]: a bad factor, a window
    /// whose scaled end overflows (on the frame), and below 1 a scale that would merge detours
    /// into their neighbours (one more pass over `inner` counts them, before anything is
    /// written; a factor of at least 1 keeps distinct nanoseconds distinct).
    pub fn new(inner: &'a dyn StreamSource, scale: f64) -> Result<Scaled<'a>, TraceError> {
        let frame = transform::scale(&frame_of(inner.frame()), scale)?;
        let scaled = Scaled {
            inner,
            frame,
            scale,
        };
        if scale < 1.0 {
            let (mut merged, mut detours) = (0, 0);
            for stream in 0..scaled.frame.streams.len() {
                merged += scaled.walk(stream, &mut |run| {
                    detours += run.len() as u64;
                    Ok(())
                })?;
            }
            if merged > 0 {
                return Err(transform::merge_refusal(scale, merged, detours + merged));
            }
        }
        Ok(scaled)
    }

    /// Scales the detours of `stream` into `sink`, merging those that would collide as
    /// [`transform::scale`] does; returns how many merged.
    fn walk(&self, stream: usize, sink: &mut RunSink) -> Result<u64, TraceError> {
        let begin = self.inner.frame().streams[stream].begin_ns;
        let scale = self.scale;
        // As `transform::scale`: no time overflows, since none exceeds the window's end,
        // whose scaled value the frame already holds.
        let at = |t: u64| (begin as f64 + ((t - begin) as f64 * scale).round()) as u64;
        let mut run: Vec<Detour> = Vec::with_capacity(RUN);
        let mut last: Option<Detour> = None;
        let mut merged = 0u64;
        self.inner.detours(stream, &mut |part| {
            for d in part {
                let (start, end) = (at(d.start_ns), at(d.end_ns()));
                if let Some(l) = last {
                    if start <= l.start_ns || start < l.end_ns() {
                        merged += 1;
                        last = Some(Detour {
                            start_ns: l.start_ns,
                            run_ns: l.end_ns().max(end) - l.start_ns,
                        });
                        continue;
                    }
                    run.push(l);
                    if run.len() == RUN {
                        sink(&run)?;
                        run.clear();
                    }
                }
                last = Some(Detour {
                    start_ns: start,
                    run_ns: end - start,
                });
            }
            Ok(())
        })?;
        run.extend(last);
        if !run.is_empty() {
            sink(&run)?;
        }
        Ok(merged)
    }
}

impl std::fmt::Debug for Scaled<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scaled")
            .field("scale", &self.scale)
            .finish_non_exhaustive()
    }
}

impl StreamSource for Scaled<'_> {
    fn frame(&self) -> &Trace {
        &self.frame
    }

    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError> {
        self.walk(stream, sink).map(|_| ())
    }
}

/// A source whose detours followed by a sleep shorter than a minimum are merged with the next
/// ([`transform::merge_short_sleeps`]).
pub struct Merged<'a> {
    inner: &'a dyn StreamSource,
    frame: Trace,
    min_sleep_ns: u64,
    merged: Cell<u64>,
}

impl<'a> Merged<'a> {
    /// `inner` with sleeps shorter than `min_sleep_ns` merged away.
    pub fn new(inner: &'a dyn StreamSource, min_sleep_ns: u64) -> Result<Merged<'a>, TraceError> {
        let (frame, _) = transform::merge_short_sleeps(&frame_of(inner.frame()), min_sleep_ns)?;
        Ok(Merged {
            inner,
            frame,
            min_sleep_ns,
            merged: Cell::new(0),
        })
    }

    /// Sleeps removed so far (over the streams read).
    pub fn merged(&self) -> u64 {
        self.merged.get()
    }
}

impl std::fmt::Debug for Merged<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merged")
            .field("min_sleep_ns", &self.min_sleep_ns)
            .field("merged", &self.merged.get())
            .finish_non_exhaustive()
    }
}

impl StreamSource for Merged<'_> {
    fn frame(&self) -> &Trace {
        &self.frame
    }

    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError> {
        let mut run: Vec<Detour> = Vec::with_capacity(RUN);
        // The detour being built, and where the last input detour ended.
        let mut last: Option<Detour> = None;
        let mut prev_end = 0u64;
        self.inner.detours(stream, &mut |part| {
            for d in part {
                if let Some(l) = last.as_mut() {
                    // The sleep after the previous input detour, now that one follows it.
                    if d.start_ns - prev_end < self.min_sleep_ns {
                        l.run_ns += d.run_ns;
                        self.merged.set(self.merged.get() + 1);
                        prev_end = d.end_ns();
                        continue;
                    }
                    run.push(*l);
                    if run.len() == RUN {
                        sink(&run)?;
                        run.clear();
                    }
                }
                last = Some(*d);
                prev_end = d.end_ns();
            }
            Ok(())
        })?;
        run.extend(last);
        if run.is_empty() {
            Ok(())
        } else {
            sink(&run)
        }
    }
}
