//! What every format's file shares: the [`Codec`] trait (a format's import and export halves),
//! [`Imported`], writing through the safe writer, reading numbered lines, and assembling
//! streams parsed from text into a temporary `.jtr` (the common window of formats without
//! one; their rows held by [`super::spill`]).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::spill::{Rows, Spilled, Store};
use crate::error::TraceError;
#[cfg(test)]
use crate::format::Completeness;
use crate::format::{Epilogue, StreamSummary, TraceWriter};
#[cfg(test)]
use crate::load::read_trace;
use crate::model::{Detour, Header, Trace, LABEL_WINDOW, WINDOW_INFERRED};
use crate::stream_order::{for_each_record, StreamSource};

/// How one format is read and written: one implementation per file, picked by
/// [`super::Format::codec`]. A format that is only read (or only written) keeps the default of the
/// other half, an error naming the format.
pub(crate) trait Codec: Sync {
    /// The format's name in the "… is an import/export format only" errors.
    fn name(&self) -> &'static str;

    /// Reads a trace from `paths` (one file per stream where the format holds one stream)
    /// into memory: by default the `.jtr` of [`Codec::spill`], read whole.
    #[cfg(test)]
    fn import(&self, paths: &[PathBuf]) -> Result<Imported, TraceError> {
        let spilled = self.spill(paths)?;
        let loaded = read_trace(spilled.path())?;
        Ok(Imported {
            trace: loaded.trace,
            completeness: loaded.completeness,
        })
    }

    /// Reads a text input into a temporary `.jtr` file in bounded memory (one pass over the
    /// text, each stream's rows sorted on disk where they come out of order: `spill`).
    fn spill(&self, paths: &[PathBuf]) -> Result<Spilled, TraceError> {
        let _ = paths;
        Err(TraceError::Argument(format!(
            "{} is an export format only",
            self.name()
        )))
    }

    /// Writes `trace`, already validated, to `path`.
    fn export(&self, trace: &Trace, path: &Path) -> Result<(), TraceError> {
        let _ = (trace, path);
        Err(TraceError::Argument(format!(
            "{} is an import format only",
            self.name()
        )))
    }

    /// Writes the trace of `src` (its frame valid) to `path`, stream by stream; a format
    /// that cannot be written so (its writer needs the whole trace) reads it into memory.
    fn export_streams(&self, src: &dyn StreamSource, path: &Path) -> Result<(), TraceError> {
        let trace = crate::stream_order::collect(src)?;
        trace.validate()?;
        self.export(&trace, path)
    }
}

/// A trace read by [`super::import`], with a warning when a `.jtr` file was incomplete.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Imported {
    /// The trace.
    pub trace: Trace,
    /// How complete a `.jtr` input was (always complete for the text formats).
    pub completeness: Completeness,
}

/// The one path of a single-file format's input, else an error naming `what` it is.
pub(super) fn single<'a>(paths: &'a [PathBuf], what: &str) -> Result<&'a Path, TraceError> {
    match paths {
        [p] => Ok(p),
        _ => Err(TraceError::Argument(format!(
            "{what} input is a single file, got {}",
            paths.len()
        ))),
    }
}

/// Creates `path` and lets `f` write it (see [`crate::output::write_output`]).
pub(super) fn with_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    crate::output::write_output(path, f)?;
    Ok(())
}

/// The error of a failed write of an export.
pub(super) fn io_w(e: std::io::Error) -> TraceError {
    TraceError::io("cannot write export", e)
}

/// One record of a CSV or JSON Lines export.
#[derive(Serialize)]
pub(super) struct RecordRow {
    pub(super) cpu: u32,
    pub(super) start_ns: u64,
    pub(super) run_ns: u64,
    pub(super) sleep_ns: u64,
}

/// Every record of `src` as an export row, stream by stream, handed to `f`.
pub(super) fn each_row(
    src: &dyn StreamSource,
    f: &mut dyn FnMut(RecordRow) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    for (i, s) in src.frame().streams.iter().enumerate() {
        let cpu = s.cpu;
        for_each_record(src, i, &mut |r| {
            f(RecordRow {
                cpu,
                start_ns: r.start_ns,
                run_ns: r.run_ns,
                sleep_ns: r.sleep_ns,
            })
        })?;
    }
    Ok(())
}

/// An input file opened for buffered reading, else an error naming it.
pub(super) fn open(path: &Path) -> Result<BufReader<File>, TraceError> {
    File::open(path)
        .map(BufReader::new)
        .map_err(|e| TraceError::io(format!("cannot open {}", path.display()), e))
}

/// Lines of a text file with their 1-based numbers.
pub(super) fn lines(
    path: &Path,
) -> Result<impl Iterator<Item = (usize, Result<String, TraceError>)>, TraceError> {
    let p = path.display().to_string();
    Ok(open(path)?.lines().enumerate().map(move |(i, l)| {
        (
            i + 1,
            l.map_err(|e| TraceError::Parse {
                path: p.clone(),
                line: i + 1,
                reason: format!("cannot read: {e}"),
            }),
        )
    }))
}

/// A parse error at `line` of `path`.
pub(super) fn parse_err(path: &Path, line: usize, reason: impl Into<String>) -> TraceError {
    TraceError::Parse {
        path: path.display().to_string(),
        line,
        reason: reason.into(),
    }
}

/// `field` as a whole number ≥ 0, else a parse error calling it `what`.
pub(super) fn int(path: &Path, line: usize, field: &str, what: &str) -> Result<u64, TraceError> {
    field.trim().parse().map_err(|_| {
        parse_err(
            path,
            line,
            format!("{what} `{field}` is not a whole number ≥ 0"),
        )
    })
}

/// Detours of one input file (or one CPU of a CSV), with an optional known window, and where
/// each came from.
pub(super) struct Part {
    pub(super) cpu: u32,
    pub(super) window: Option<(u64, u64)>,
    pub(super) detours: Rows,
    pub(super) path: PathBuf,
}

impl Part {
    /// A part of `cpu` read from `path`, its window not known (yet).
    pub(super) fn new(cpu: u32, path: &Path) -> Part {
        Part {
            cpu,
            window: None,
            detours: Rows::default(),
            path: path.to_path_buf(),
        }
    }
}

/// Detours written to the `.jtr` of an import at a time.
const CHUNK: usize = 1 << 16;

/// Builds a trace from parts (each sorted by start, checked for overlaps and against its
/// window) into a `.jtr` file in `store`, stream by stream: the trace [`Stream::from_detours`]
/// of each part would make, `header` tuned by `tune` (e.g. sysjitter's frequency).
pub(super) fn assemble(
    parts: Vec<Part>,
    store: Store,
    label: &str,
    tune: impl FnOnce(&mut Header),
) -> Result<Spilled, TraceError> {
    let lo = parts.iter().filter_map(|p| p.detours.lo).min().unwrap_or(0);
    let hi = parts.iter().map(|p| p.detours.hi).max().unwrap_or(0);
    let mut header = Header {
        tool_version: crate::TOOL_VERSION.into(),
        stream_cpus: parts.iter().map(|p| p.cpu).collect(),
        ..Header::default()
    };
    header.labels.insert("imported".into(), label.into());
    if parts.iter().any(|p| p.window.is_none()) {
        header
            .labels
            .insert(LABEL_WINDOW.into(), WINDOW_INFERRED.into());
    }
    tune(&mut header);
    let out = std::io::BufWriter::with_capacity(1 << 16, store.jtr.file());
    let mut w = TraceWriter::new(out, &header)?;
    let mut streams: Vec<StreamSummary> = Vec::with_capacity(parts.len());
    for (i, p) in parts.into_iter().enumerate() {
        if header.stream_cpus[..i].contains(&p.cpu) {
            return Err(TraceError::Argument(format!(
                "{}: CPU {} appears in two inputs",
                p.path.display(),
                p.cpu
            )));
        }
        let (b, e) = p.window.unwrap_or((lo, hi));
        let (first, last) = write_part(&mut w, i, p.detours, &store, &p.path)?;
        let first = first.unwrap_or(b);
        let last = last.unwrap_or(e);
        if first < b || last > e {
            return Err(parse_err(
                &p.path,
                1,
                format!("detours [{first}, {last}] ns lie outside the stated window [{b}, {e}] ns"),
            ));
        }
        streams.push(StreamSummary {
            begin_ns: b,
            end_ns: e,
            ..StreamSummary::default()
        });
    }
    let duration_ns = streams.iter().map(|s| s.end_ns - s.begin_ns).max();
    let mut out = w.finish(Epilogue {
        duration_ns: duration_ns.unwrap_or(0),
        streams,
        ..Epilogue::default()
    })?;
    out.flush()
        .map_err(|e| TraceError::io("cannot write the import's temporary trace", e))?;
    drop(out);
    store.drop_rows()?;
    Ok(Spilled::new(store))
}

/// Writes the rows of one part as stream `stream`, in order of start, refusing an overlap at
/// its line; returns the first start and the last end.
fn write_part<W: Write>(
    w: &mut TraceWriter<W>,
    stream: usize,
    rows: Rows,
    store: &Store,
    path: &Path,
) -> Result<(Option<u64>, Option<u64>), TraceError> {
    let mut prev: Option<Detour> = None;
    let mut first = None;
    let mut buf: Vec<Detour> = Vec::with_capacity(CHUNK);
    rows.for_each_sorted(store, &mut |(b, line)| {
        if let Some(a) = prev {
            if b.start_ns <= a.start_ns || b.start_ns < a.end_ns() {
                return Err(parse_err(
                    path,
                    line,
                    format!(
                        "detour at {} ns overlaps the one at {} ns (run {} ns)",
                        b.start_ns, a.start_ns, a.run_ns
                    ),
                ));
            }
        }
        first.get_or_insert(b.start_ns);
        prev = Some(b);
        buf.push(b);
        if buf.len() == CHUNK {
            w.append(stream, &buf)?;
            buf.clear();
        }
        Ok(())
    })?;
    w.append(stream, &buf)?;
    Ok((first, prev.map(|d| d.end_ns())))
}
