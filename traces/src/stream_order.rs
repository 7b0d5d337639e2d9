//! A trace read one stream after the other, in constant memory in its length: what a writer
//! of stream-by-stream output (`convert`, `slice`: CSV and JSON lines rows, `.jtr` chunks)
//! needs from a file whose chunks interleave the streams as a collection wrote them.
//!
//! A [`StreamSource`] is a trace's frame (header, each stream's window and counters, notes;
//! its records left out) and, for each stream, its detours in time order handed over a run
//! at a time. A [`Trace`] in memory is one; so is a [`TraceFile`]: one pass of
//! [`crate::scan`] learns the frame (and applies nothing: the caller applies the integrity
//! policy to [`TraceFile::scan`]), then each stream is one more pass over the file that
//! decodes only that stream's chunks (the others are read and checksummed, not decoded) and
//! stops where the first pass stopped (before the first damaged chunk). A pass holds one
//! chunk (at most [`crate::format::MAX_CHUNK_RECORDS`] detours); `s` streams cost `s + 1`
//! reads of the file and two decodes of each detour. A file that changes between passes is
//! an error, never a mixed output.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use crate::error::TraceError;
use crate::format::{Chunk, TraceReader};
use crate::model::{Detour, Record, Stream, Trace};
use crate::scan::{open, scan_trace, ChunkSink, Scan};

/// What hands a run of detours on: an error stops the reading.
pub type RunSink<'a> = dyn FnMut(&[Detour]) -> Result<(), TraceError> + 'a;

/// A trace whose records are read stream by stream.
pub trait StreamSource {
    /// The trace's header, each stream's window and counters, its notes; a consumer reads
    /// nothing of its streams' `records` (a file-backed frame has none).
    fn frame(&self) -> &Trace;

    /// Hands the detours of stream `stream` (an index of the frame's streams) to `sink` in
    /// time order, a run at a time.
    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError>;
}

/// Detours handed on at a time from a trace in memory.
const RUN: usize = 4096;

impl StreamSource for Trace {
    fn frame(&self) -> &Trace {
        self
    }

    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError> {
        let mut run = Vec::with_capacity(RUN);
        for part in self.streams[stream].records.chunks(RUN) {
            run.clear();
            run.extend(part.iter().map(Record::detour));
            sink(&run)?;
        }
        Ok(())
    }
}

/// The records of stream `stream` of `src`, each with its sleep (to the next start, the last
/// one to the window's end), handed to `f` in order; returns how many.
pub(crate) fn for_each_record(
    src: &dyn StreamSource,
    stream: usize,
    f: &mut dyn FnMut(Record) -> Result<(), TraceError>,
) -> Result<u64, TraceError> {
    let s: &Stream = &src.frame().streams[stream];
    let mut prev: Option<Detour> = None;
    let mut n = 0u64;
    let mut emit = |d: Detour, next: u64, n: u64| -> Result<(), TraceError> {
        let sleep_ns = next
            .checked_sub(d.end_ns())
            .ok_or_else(|| TraceError::Invalid {
                stream: s.cpu as usize,
                index: n as usize,
                reason: format!(
                    "detour ends at {} ns, after the next start {next} ns",
                    d.end_ns()
                ),
            })?;
        f(Record {
            start_ns: d.start_ns,
            run_ns: d.run_ns,
            sleep_ns,
        })
    };
    src.detours(stream, &mut |run| {
        for &d in run {
            if let Some(p) = prev {
                emit(p, d.start_ns, n)?;
                n += 1;
            }
            prev = Some(d);
        }
        Ok(())
    })?;
    if let Some(p) = prev {
        emit(p, s.end_ns, n)?;
        n += 1;
    }
    Ok(n)
}

/// Takes nothing: the frame pass.
struct Nothing;

impl ChunkSink for Nothing {
    fn take(&mut self, _: usize, _: Vec<Detour>) {}
}

/// A `.jtr` file read stream by stream (see the module doc).
#[derive(Debug)]
pub struct TraceFile {
    path: PathBuf,
    scan: Scan,
}

impl TraceFile {
    /// Reads the frame of the trace at `path` (one pass, keeping no detour).
    pub fn open(path: &Path) -> Result<TraceFile, TraceError> {
        let scan = scan_trace(path, &mut Nothing)?;
        Ok(TraceFile {
            path: path.to_path_buf(),
            scan,
        })
    }

    /// What the frame pass learnt: the frame, completeness, detours per stream.
    pub fn scan(&self) -> &Scan {
        &self.scan
    }

    /// The frame, to add notes to (e.g. that it was salvaged).
    pub fn frame_mut(&mut self) -> &mut Trace {
        &mut self.scan.frame
    }

    fn changed(&self, what: String) -> TraceError {
        TraceError::Argument(format!(
            "{} changed while it was read ({what})",
            self.path.display()
        ))
    }
}

impl StreamSource for TraceFile {
    fn frame(&self) -> &Trace {
        &self.scan.frame
    }

    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError> {
        let streams = self.scan.frame.header.stream_cpus.len();
        // What read the first time and not now: the file changed.
        let again = |e: TraceError| self.changed(crate::error::chain_line(&e));
        let mut reader = TraceReader::new(open(&self.path)?).map_err(again)?;
        let mut records = 0u64;
        for _ in 0..self.scan.chunks {
            let sealed = (reader.next_sealed().map_err(again)?)
                .ok_or_else(|| self.changed("it ends sooner".into()))?;
            if sealed.stream() != Some(stream as u32) {
                continue;
            }
            match sealed.open(streams).map_err(again)? {
                Chunk::Records { detours, .. } => {
                    records += detours.len() as u64;
                    sink(&detours)?;
                }
                Chunk::End(_) => return Err(self.changed("an end chunk moved".into())),
            }
        }
        let expected = self.scan.records().nth(stream).unwrap_or(0);
        if records != expected {
            return Err(self.changed(format!(
                "stream {stream}: {expected} detours, then {records}"
            )));
        }
        Ok(())
    }
}

/// A source that counts the detours read through it.
pub struct Counted<'a> {
    inner: &'a dyn StreamSource,
    detours: Cell<u64>,
}

impl<'a> Counted<'a> {
    /// Counts what is read of `inner`.
    pub fn new(inner: &'a dyn StreamSource) -> Counted<'a> {
        Counted {
            inner,
            detours: Cell::new(0),
        }
    }

    /// Detours read so far.
    pub fn detours_read(&self) -> u64 {
        self.detours.get()
    }
}

impl std::fmt::Debug for Counted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counted")
            .field("detours", &self.detours.get())
            .finish_non_exhaustive()
    }
}

impl StreamSource for Counted<'_> {
    fn frame(&self) -> &Trace {
        self.inner.frame()
    }

    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError> {
        self.inner.detours(stream, &mut |run| {
            self.detours.set(self.detours.get() + run.len() as u64);
            sink(run)
        })
    }
}

/// The trace of `src` in memory (for a writer that needs it whole).
pub fn collect(src: &dyn StreamSource) -> Result<Trace, TraceError> {
    let frame = src.frame();
    let mut t = Trace {
        header: frame.header.clone(),
        streams: Vec::with_capacity(frame.streams.len()),
        self_windows: frame.self_windows.clone(),
        notes: frame.notes.clone(),
    };
    for (i, s) in frame.streams.iter().enumerate() {
        let mut runs: Vec<Vec<Detour>> = Vec::new();
        src.detours(i, &mut |run| {
            runs.push(run.to_vec());
            Ok(())
        })?;
        let slices: Vec<&[Detour]> = runs.iter().map(Vec::as_slice).collect();
        let mut stream = Stream::from_detour_runs(s.cpu, s.begin_ns, s.end_ns, &slices)?;
        stream.counters = s.counters.clone();
        t.streams.push(stream);
    }
    Ok(t)
}

/// The frame of `trace`: everything but its records.
pub(crate) fn frame_of(trace: &Trace) -> Trace {
    Trace {
        header: trace.header.clone(),
        streams: (trace.streams.iter())
            .map(|s| Stream {
                cpu: s.cpu,
                begin_ns: s.begin_ns,
                end_ns: s.end_ns,
                records: Vec::new(),
                counters: s.counters.clone(),
            })
            .collect(),
        self_windows: trace.self_windows.clone(),
        notes: trace.notes.clone(),
    }
}
