//! One pass over a `.jtr` file's chunks ([`scan_from`], [`scan_trace`]), in constant memory in
//! the trace's length: every chunk of detours goes to a [`ChunkSink`] as it is decoded, and
//! what the pass learns besides (each stream's window and counters, the end chunk's notes,
//! whether the file was complete) is a [`Scan`], the trace's frame with its records left out,
//! from which [`Scan::integrity`] applies the one policy of [`crate::integrity`] exactly as a
//! whole trace would. [`crate::load`] reads whole traces through the same pass.
//!
//! Chunks are read in order and decoded one by one on the reading thread, or a few side by side
//! where a program registered a way to ([`decode_side_by_side`]: the predictor, on its thread
//! pool; this crate starts no threads and links no thread pool); the first damaged chunk ends
//! the pass, and every chunk before it is kept. A pass holds one batch of chunks (at most
//! [`crate::format::MAX_CHUNK_RECORDS`] detours each) and what its sink keeps.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::OnceLock;

use crate::error::TraceError;
use crate::format::{Chunk, Completeness, Epilogue, TraceReader};
use crate::integrity::{Integrity, Salvage, StreamLoss};
use crate::model::{Detour, Header, Stream, Trace};

/// One chunk's decoding, for a [`SideBySide`] to run.
pub type Job<'a> = Box<dyn FnOnce() + Send + 'a>;

/// A way to decode a few chunks side by side, which a program with a thread pool registers
/// ([`decode_side_by_side`]).
pub trait SideBySide: Sync {
    /// How many chunks the calling thread should decode together now (1: one by one, on it).
    fn batch(&self) -> usize;
    /// Runs every job, side by side where it can; returns when all are done.
    fn run(&self, jobs: Vec<Job<'_>>);
}

static DECODER: OnceLock<&'static dyn SideBySide> = OnceLock::new();

/// Lets every later pass decode chunks side by side through `d` (the first registration holds:
/// one per process). Without one, chunks are decoded one by one on the reading thread.
pub fn decode_side_by_side(d: &'static dyn SideBySide) {
    let _ = DECODER.set(d);
}

/// What a pass over a trace's chunks does with each chunk of detours.
pub trait ChunkSink {
    /// Takes the detours of one chunk of stream `stream` (in the order of the file; a stream's
    /// chunks come in time order, chunks of different streams interleave).
    fn take(&mut self, stream: usize, detours: Vec<Detour>);

    /// Learns the trace's header before any chunk (how many streams it has); by default
    /// nothing.
    fn header(&mut self, _header: &Header) {}
}

/// What one stream held in a pass: how many detours, their time, and where they lie.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    records: u64,
    noise_ns: u64,
    first_start: Option<u64>,
    last: Option<Detour>,
}

/// A trace's frame after one pass over its chunks: the header, each stream's window and
/// counters (its `records` left empty), the end chunk's windows and notes, and how many
/// detours and how much noise time each stream held.
#[derive(Debug)]
pub struct Scan {
    /// The trace without its records (`streams[i].records` is empty).
    pub frame: Trace,
    /// Whether the file was complete.
    pub completeness: Completeness,
    seen: Vec<Seen>,
    /// Record chunks read before the end chunk, the end of the file or the first damage.
    pub(crate) chunks: u64,
}

impl Scan {
    /// Detours read for each stream, in stream order.
    pub fn records(&self) -> impl Iterator<Item = u64> + '_ {
        self.seen.iter().map(|s| s.records)
    }

    /// Detours read, all streams.
    pub fn record_count(&self) -> u64 {
        self.records().sum()
    }

    /// What the trace lacks, as [`Loaded::integrity`] says it of the whole trace.
    pub fn integrity(&self) -> Integrity {
        let streams = (self.frame.streams.iter().zip(&self.seen))
            .map(|(s, seen)| {
                let counter = |k: &str| s.counters.get(k).copied().unwrap_or(0);
                StreamLoss {
                    cpu: s.cpu,
                    detours_kept: seen.records,
                    detours_lost: counter("lost_detours"),
                    noise_kept_ns: seen.noise_ns,
                    noise_lost_ns: counter("lost_ns"),
                }
            })
            .collect();
        Integrity::of_streams(
            streams,
            crate::integrity::defect(&self.frame.notes, &self.completeness),
        )
    }

    /// The one policy of every reader, as [`Loaded::accept`].
    pub fn accept(&self, name: &str, salvage: Salvage) -> Result<Integrity, TraceError> {
        self.integrity().check(name, salvage)
    }
}

/// One pass over the trace in `input`, handing every chunk of detours to `sink`.
pub(crate) fn scan_from<R: Read, S: ChunkSink + ?Sized>(
    input: R,
    sink: &mut S,
) -> Result<Scan, TraceError> {
    let mut reader = TraceReader::new(input)?;
    let header = reader.header().clone();
    sink.header(&header);
    let mut seen = vec![Seen::default(); header.stream_cpus.len()];
    let mut chunks = 0;
    let (epilogue, damage) = read_chunks(&mut reader, &mut seen, &mut chunks, sink);
    let completeness = completeness(&seen, epilogue.as_ref(), damage);
    let frame = frame(header, &seen, epilogue, &completeness);
    Ok(Scan {
        frame,
        completeness,
        seen,
        chunks,
    })
}

/// [`scan_from`] of the file at `path`.
pub fn scan_trace<S: ChunkSink + ?Sized>(path: &Path, sink: &mut S) -> Result<Scan, TraceError> {
    scan_from(open(path)?, sink)
}

/// Reads the chunks in order until the end chunk, the end of the file or the first damage;
/// returns the end chunk (if read) and the damage (if any); `chunks` counts the record chunks
/// taken.
fn read_chunks<R: Read, S: ChunkSink + ?Sized>(
    reader: &mut TraceReader<R>,
    seen: &mut [Seen],
    chunks: &mut u64,
    sink: &mut S,
) -> (Option<Epilogue>, Option<TraceError>) {
    let n = seen.len();
    // Decoding side by side only where a program registered a way to and it says so for this
    // thread: a reader inside an application (the C API, an MPI rank of `run`) starts no threads.
    let side = DECODER.get().copied();
    let batch = side.map_or(1, |d| d.batch()).max(1);
    let mut sealed = Vec::with_capacity(batch);
    loop {
        sealed.clear();
        let mut read_error = None;
        while sealed.len() < batch {
            match reader.next_sealed() {
                Ok(Some(c)) => sealed.push(c),
                Ok(None) => break,
                Err(e) => {
                    read_error = Some(e);
                    break;
                }
            }
        }
        if sealed.is_empty() && read_error.is_none() {
            return (None, None);
        }
        let opened: Vec<Result<Chunk, TraceError>> = match side {
            Some(d) if batch > 1 => {
                let mut slots: Vec<Option<Result<Chunk, TraceError>>> =
                    (0..sealed.len()).map(|_| None).collect();
                let jobs: Vec<Job<'_>> = (slots.iter_mut().zip(&sealed))
                    .map(|(slot, c)| Box::new(move || *slot = Some(c.open(n))) as Job<'_>)
                    .collect();
                d.run(jobs);
                (slots.into_iter().zip(&sealed))
                    .map(|(s, c)| {
                        s.unwrap_or_else(|| {
                            Err(TraceError::Chunk {
                                chunk: c.index,
                                offset: 0,
                                reason: "the registered decoder did not decode it".into(),
                            })
                        })
                    })
                    .collect()
            }
            _ => sealed.iter().map(|c| c.open(n)).collect(),
        };
        for (c, chunk) in sealed.iter().zip(opened) {
            match chunk {
                Ok(Chunk::Records { stream, detours }) => {
                    let s = &mut seen[stream as usize];
                    if !s.extend(&detours) {
                        let reason = format!("stream {stream} goes back in time");
                        let chunk = c.index;
                        let e = TraceError::Chunk {
                            chunk,
                            offset: 0,
                            reason,
                        };
                        return (None, Some(e));
                    }
                    *chunks += 1;
                    if !detours.is_empty() {
                        sink.take(stream as usize, detours);
                    }
                }
                Ok(Chunk::End(e)) => return (Some(e), None),
                Err(e) => return (None, Some(e)),
            }
        }
        if let Some(e) = read_error {
            return (None, Some(e));
        }
    }
}

impl Seen {
    /// Counts a chunk's detours; `false` (nothing counted) when the chunk starts before the
    /// stream's last detour.
    fn extend(&mut self, detours: &[Detour]) -> bool {
        if let (Some(last), Some(first)) = (self.last, detours.first()) {
            if first.start_ns <= last.start_ns || first.start_ns < last.end_ns() {
                return false;
            }
        }
        if let Some(first) = detours.first() {
            self.first_start.get_or_insert(first.start_ns);
        }
        self.last = detours.last().copied().or(self.last);
        self.records += detours.len() as u64;
        let noise = detours.iter().fold(0u64, |a, d| a.wrapping_add(d.run_ns));
        self.noise_ns = self.noise_ns.wrapping_add(noise);
        true
    }
}

/// Whether the file was complete: read to an end chunk whose totals match.
fn completeness(
    seen: &[Seen],
    epilogue: Option<&Epilogue>,
    damage: Option<TraceError>,
) -> Completeness {
    let total: u64 = seen.iter().map(|s| s.records).sum();
    let n = seen.len();
    match (epilogue, damage) {
        (_, Some(error)) => Completeness::Damaged {
            records: total,
            error,
        },
        (None, None) => Completeness::Truncated { records: total },
        (Some(e), None) => {
            let expected: u64 = e.streams.iter().map(|s| s.records).sum();
            if e.streams.len() != n || expected != total {
                Completeness::Damaged {
                    records: total,
                    error: TraceError::Header(format!(
                        "end chunk counts {expected} records in {} streams, the file holds {total} in {n}",
                        e.streams.len()
                    )),
                }
            } else {
                Completeness::Complete
            }
        }
    }
}

/// The trace without its records: each stream's window (from the end chunk when the file is
/// complete, else from its detours) and counters, the end chunk's windows and notes.
fn frame(
    header: Header,
    seen: &[Seen],
    epilogue: Option<Epilogue>,
    completeness: &Completeness,
) -> Trace {
    let complete = matches!(completeness, Completeness::Complete);
    let mut trace = Trace {
        header,
        ..Trace::default()
    };
    for (i, d) in seen.iter().enumerate() {
        let summary = epilogue.as_ref().and_then(|e| e.streams.get(i));
        let last_end = d.last.map_or(0, |l| l.end_ns());
        let (begin_ns, end_ns) = match summary {
            Some(s) if complete => {
                let begin = s.begin_ns.min(d.first_start.unwrap_or(s.begin_ns));
                (begin, s.end_ns.max(last_end).max(begin))
            }
            _ => (0, last_end),
        };
        trace.streams.push(Stream {
            cpu: trace.header.stream_cpus[i],
            begin_ns,
            end_ns,
            records: Vec::new(),
            counters: summary.map(|s| s.counters.clone()).unwrap_or_default(),
        });
    }
    if let Some(e) = epilogue {
        if complete {
            trace.header.duration_ns = e.duration_ns;
        }
        trace.self_windows = e.self_windows;
        trace.notes = e.notes;
    }
    if !complete {
        trace.header.duration_ns = (trace.streams.iter().map(Stream::duration_ns))
            .max()
            .unwrap_or(0);
    }
    trace
}

/// Opens the trace `path` for reading ([`crate::format::open`]).
pub(crate) fn open(path: &Path) -> Result<BufReader<File>, TraceError> {
    crate::format::open(path)
}
