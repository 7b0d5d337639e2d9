//! Loading a `.jtr` trace into memory: whole ([`read_trace`]) or only the streams a replay
//! needs ([`read_trace_streams`]; [`read_replayed`] with the whole trace's [`Facts`] gathered
//! in the same pass), through the one pass of [`crate::scan`] (the first damaged chunk ends
//! the read; every chunk before it is kept). A whole read holds every record (24 bytes each);
//! a selected read holds the records of its streams only.

use std::io::Read;
use std::path::Path;

use crate::error::TraceError;
use crate::facts::{Facts, FactsSink};
use crate::format::Completeness;
use crate::integrity::{Integrity, Salvage};
use crate::model::{Detour, Header, Stream, Trace};
use crate::scan::{open, scan_from, ChunkSink, Scan};

/// A trace read from a file, with how much of the file was readable.
#[derive(Debug)]
pub struct Loaded {
    /// Everything recovered.
    pub trace: Trace,
    /// Whether the file was complete.
    pub completeness: Completeness,
}

impl Loaded {
    /// What the trace lacks: detours its rings dropped, damage, truncation.
    pub fn integrity(&self) -> Integrity {
        Integrity::of(&self.trace, &self.completeness)
    }

    /// The one policy of every reader ([`crate::integrity`]): `Ok` with what the trace lacks
    /// (salvaged where `salvage` made the difference), or one line naming `name`, what is
    /// missing and that `--salvage` goes on.
    pub fn accept(&self, name: &str, salvage: Salvage) -> Result<Integrity, TraceError> {
        self.integrity().check(name, salvage)
    }

    /// Every warning a user of this trace must see: what it lacks (damage, truncation, ring
    /// loss, as one line with the share kept), and numbers no machine has.
    pub fn warnings(&self) -> Vec<String> {
        let windows_known = matches!(self.completeness, Completeness::Complete);
        self.integrity()
            .warning()
            .into_iter()
            .chain(crate::sanity::warnings_of(&self.trace, windows_known))
            .collect()
    }
}

/// Keeps the chunks of the streams `keep` selects, as they come.
struct Collect<F: Fn(usize) -> bool> {
    keep: F,
    runs: Vec<Vec<Vec<Detour>>>,
}

impl<F: Fn(usize) -> bool> ChunkSink for Collect<F> {
    fn take(&mut self, stream: usize, detours: Vec<Detour>) {
        if (self.keep)(stream) {
            if self.runs.len() <= stream {
                self.runs.resize_with(stream + 1, Vec::new);
            }
            self.runs[stream].push(detours);
        }
    }
}

/// Reads the trace in `input`, keeping the records of the streams `keep` selects (by index);
/// the others are read, checked and counted, not kept (their `records` stay empty).
fn read_selected<R: Read>(input: R, keep: impl Fn(usize) -> bool) -> Result<Loaded, TraceError> {
    let mut sink = Collect {
        keep,
        runs: Vec::new(),
    };
    let Scan {
        frame,
        completeness,
        ..
    } = scan_from(input, &mut sink)?;
    Ok(Loaded {
        trace: assemble(frame, &sink.runs)?,
        completeness,
    })
}

/// The frame with the records of `runs` (each stream's chunks, in order) in its streams.
fn assemble(mut frame: Trace, runs: &[Vec<Vec<Detour>>]) -> Result<Trace, TraceError> {
    for (s, runs) in frame.streams.iter_mut().zip(runs) {
        if runs.is_empty() {
            continue;
        }
        let slices: Vec<&[Detour]> = runs.iter().map(Vec::as_slice).collect();
        let counters = std::mem::take(&mut s.counters);
        *s = Stream::from_detour_runs(s.cpu, s.begin_ns, s.end_ns, &slices)?;
        s.counters = counters;
    }
    Ok(frame)
}

/// A trace read for a replay of some of its streams ([`read_replayed`]).
#[derive(Debug)]
pub struct Replayed {
    /// Every stream's window and counters, the header and notes of the whole trace, and the
    /// records of the streams kept only (the others' `records` are empty: numbers about the
    /// whole trace come from `facts`, never from here).
    pub trace: Trace,
    /// Whether the file was complete.
    pub completeness: Completeness,
    /// The whole trace's digest, statistics, integrity and warnings.
    pub facts: Facts,
}

/// Keeps the chunks of the streams a replay selects and gathers the facts of all.
struct ForReplay<F: Fn(usize, usize) -> bool> {
    keep: F,
    streams: usize,
    runs: Vec<Vec<Vec<Detour>>>,
    facts: FactsSink,
}

impl<F: Fn(usize, usize) -> bool> ChunkSink for ForReplay<F> {
    fn header(&mut self, header: &Header) {
        self.streams = header.stream_cpus.len();
    }

    fn take(&mut self, stream: usize, detours: Vec<Detour>) {
        self.facts.record(stream, &detours);
        if (self.keep)(stream, self.streams) {
            if self.runs.len() <= stream {
                self.runs.resize_with(stream + 1, Vec::new);
            }
            self.runs[stream].push(detours);
        }
    }
}

/// Reads the trace at `path` for a replay: the records of the streams `keep(index, streams)`
/// selects (`streams`: how many the trace has), and in the same pass the whole trace's
/// [`Facts`] (digest, statistics, integrity, warnings) in constant memory in the other
/// streams' length. A damaged chunk anywhere ends the read, as for the whole trace.
pub fn read_replayed(
    path: &Path,
    keep: impl Fn(usize, usize) -> bool,
) -> Result<Replayed, TraceError> {
    read_replayed_from(open(path)?, keep)
}

/// [`read_replayed`] of the trace in `input` (e.g. a temporary file written a moment ago).
pub fn read_replayed_from<R: Read>(
    input: R,
    keep: impl Fn(usize, usize) -> bool,
) -> Result<Replayed, TraceError> {
    let mut sink = ForReplay {
        keep,
        streams: 0,
        runs: Vec::new(),
        facts: FactsSink::default(),
    };
    let scan = scan_from(input, &mut sink)?;
    let facts = sink.facts.facts(&scan);
    Ok(Replayed {
        trace: assemble(scan.frame, &sink.runs)?,
        completeness: scan.completeness,
        facts,
    })
}

/// Reads a whole trace from `input`, keeping every readable chunk.
pub fn read_from<R: Read>(input: R) -> Result<Loaded, TraceError> {
    read_selected(input, |_| true)
}

/// Reads a whole trace file, keeping every readable chunk.
///
/// ```
/// use jitter_trace::format::write_trace;
/// use jitter_trace::load::read_trace;
/// use jitter_trace::synth::synthesize;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("node.jtr");
/// let trace = synthesize(&"poisson:rate=1000/s,dur=exp:20us".parse()?, 1, 100_000_000, 7)?;
/// write_trace(&path, &trace)?;
/// let loaded = read_trace(&path)?;
/// assert_eq!(loaded.trace.streams[0].records, trace.streams[0].records);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_trace(path: &Path) -> Result<Loaded, TraceError> {
    read_from(open(path)?)
}

/// Reads only the streams of `path` whose indices are in `streams` (in the file's order; an
/// index the trace lacks is an error): what a replay of some streams needs, in the memory of
/// those streams. The other streams are read and checked (a damaged chunk anywhere ends the
/// read, as for the whole trace) but not kept; the trace returned holds the selected streams
/// only (its header names their CPUs), and its integrity is theirs.
pub fn read_trace_streams(path: &Path, streams: &[usize]) -> Result<Loaded, TraceError> {
    let mut loaded = read_selected(open(path)?, |i| streams.contains(&i))?;
    let t = &mut loaded.trace;
    if let Some(&missing) = streams.iter().find(|&&i| i >= t.streams.len()) {
        return Err(TraceError::Argument(format!(
            "{}: the trace has no stream {missing} (it has {})",
            path.display(),
            t.streams.len()
        )));
    }
    let keep = |i: &usize| streams.contains(i);
    t.streams = std::mem::take(&mut t.streams)
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| keep(&i).then_some(s))
        .collect();
    t.header.stream_cpus = std::mem::take(&mut t.header.stream_cpus)
        .into_iter()
        .enumerate()
        .filter_map(|(i, c)| keep(&i).then_some(c))
        .collect();
    Ok(loaded)
}
