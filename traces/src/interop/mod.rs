//! Import and export of trace files: the native `.jtr`, sysjitter `--raw`, LogGOPSim/netgauge
//! noise traces, CSV and JSON lines.
//!
//! One file per format, each a [`Codec`] (its import and/or export half; the other half is a
//! one-line "this format is … only" error); [`Format::codec`] is the one place that maps a
//! format (named by `--from`/`--to` or guessed from a file name) to its codec, and [`import`]
//! and [`export`] go through it. What each format holds is documented in its file:
//!
//! - **jtr** (import and export): the native format of [`crate::format`].
//! - **csv** (import and export): `cpu,start_ns,run_ns[,sleep_ns]` with a header line.
//! - **jsonl** (export): one JSON object per record.
//! - **loggopsim** (import and export): one two-column noise trace per stream, written so that
//!   LogGOPSim reads it as intended.
//! - **sysjitter** (import): sysjitter `--raw` output, one file per core.
//!
//! Formats without a window (CSV, and noise traces without the jitter-trace comment) get the
//! window `[earliest start, latest end]` over all files of the import, the same for every stream.

mod csv;
mod jsonl;
mod jtr;
mod loggopsim;
pub mod perfetto;
mod sysjitter;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;

use crate::error::TraceError;
use crate::format::Completeness;
use crate::model::{Detour, Header, Stream, Trace};

pub use self::csv::{read_csv, write_csv};
pub use self::jsonl::write_jsonl;
pub use self::loggopsim::{per_stream_path, read_loggopsim, write_loggopsim, CPU_PLACEHOLDER};
pub use self::sysjitter::read_sysjitter;

/// A trace file format this crate reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The native `.jtr` format.
    Jtr,
    /// `cpu,start_ns,run_ns[,sleep_ns]` with a header line.
    Csv,
    /// One JSON object per record (export only).
    JsonLines,
    /// Two-column LogGOPSim/netgauge noise trace.
    LogGopSim,
    /// sysjitter `--raw` output (import only).
    Sysjitter,
}

impl Format {
    /// Guesses the format from a file name (`.jtr`, `.csv`, `.jsonl`, `.lgs`/`.noise`, `.<n>`).
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jtr" => Some(Format::Jtr),
            "csv" => Some(Format::Csv),
            "jsonl" | "ndjson" => Some(Format::JsonLines),
            "lgs" | "noise" => Some(Format::LogGopSim),
            e if !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()) => Some(Format::Sysjitter),
            _ => None,
        }
    }

    /// Format of `path`: `given` if set, else guessed from the name, else an error.
    pub fn resolve(given: Option<Format>, path: &Path) -> Result<Format, TraceError> {
        given.or_else(|| Format::from_path(path)).ok_or_else(|| {
            TraceError::Argument(format!(
                "cannot tell the format of {} from its name (use .jtr, .csv, .jsonl, .lgs, \
                 .noise, .<n> for sysjitter, or name it with --from/--to)",
                path.display()
            ))
        })
    }

    /// Format of an output `path`: the one rule of every `jitter-trace` writer. The format
    /// follows the name's extension; `given` (`--to`) decides for a name without a known one
    /// (a device, `trace.bin`) and must agree with a known one: `-o x.csv --to jtr` is refused
    /// rather than writing a `.jtr` under a CSV name. A numeric extension (sysjitter's `.<n>`)
    /// does not contradict `--to`.
    pub fn for_output(given: Option<Format>, path: &Path) -> Result<Format, TraceError> {
        let named = Format::from_path(path).filter(|f| *f != Format::Sysjitter);
        match (given, named) {
            (Some(g), Some(n)) if g != n => Err(TraceError::Argument(format!(
                "{} is named as {} but --to {} was given: name the file for its format \
                 or drop --to",
                path.display(),
                n.codec().name(),
                g.codec().name()
            ))),
            _ => Format::resolve(given, path),
        }
    }

    /// The codec that reads and/or writes this format: the one place a format becomes its
    /// implementation.
    pub fn codec(self) -> &'static dyn Codec {
        match self {
            Format::Jtr => &jtr::Jtr,
            Format::Csv => &csv::Csv,
            Format::JsonLines => &jsonl::JsonLines,
            Format::LogGopSim => &loggopsim::LogGopSim,
            Format::Sysjitter => &sysjitter::Sysjitter,
        }
    }
}

impl FromStr for Format {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        match s.to_ascii_lowercase().as_str() {
            "jtr" => Ok(Format::Jtr),
            "csv" => Ok(Format::Csv),
            "jsonl" | "json-lines" | "ndjson" => Ok(Format::JsonLines),
            "loggopsim" | "lgs" | "netgauge" | "noise" => Ok(Format::LogGopSim),
            "sysjitter" => Ok(Format::Sysjitter),
            _ => Err(TraceError::Argument(format!(
                "unknown format `{s}` (use jtr, csv, jsonl, loggopsim or sysjitter)"
            ))),
        }
    }
}

/// How one format is read and written: one implementation per file, picked by
/// [`Format::codec`]. A format that is only read (or only written) keeps the default of the
/// other half, an error naming the format.
pub trait Codec: Sync {
    /// The format's name in the "… is an import/export format only" errors.
    fn name(&self) -> &'static str;

    /// Reads a trace from `paths` (one file per stream where the format holds one stream).
    fn import(&self, paths: &[PathBuf]) -> Result<Imported, TraceError> {
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
}

/// A trace read by [`import`], with a warning when a `.jtr` file was incomplete.
#[derive(Debug)]
pub struct Imported {
    /// The trace.
    pub trace: Trace,
    /// How complete a `.jtr` input was (always complete for the text formats).
    pub completeness: Completeness,
}

impl Imported {
    /// A trace read whole (every text format).
    fn complete(trace: Trace) -> Imported {
        Imported {
            trace,
            completeness: Completeness::Complete,
        }
    }
}

/// Reads a trace from `paths` in `format` (one file per stream for sysjitter and LogGOPSim).
pub fn import(paths: &[PathBuf], format: Format) -> Result<Imported, TraceError> {
    format.codec().import(paths)
}

/// Writes `trace` to `path` in `format`.
pub fn export(trace: &Trace, path: &Path, format: Format) -> Result<(), TraceError> {
    trace.validate()?;
    format.codec().export(trace, path)
}

/// The one path of a single-file format's input, else an error naming `what` it is.
fn single<'a>(paths: &'a [PathBuf], what: &str) -> Result<&'a Path, TraceError> {
    match paths {
        [p] => Ok(p),
        _ => Err(TraceError::Argument(format!(
            "{what} input is a single file, got {}",
            paths.len()
        ))),
    }
}

/// Creates `path` and lets `f` write it (see [`crate::output::write_output`]).
fn with_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    crate::output::write_output(path, f)?;
    Ok(())
}

/// The error of a failed write of an export.
fn io_w(e: std::io::Error) -> TraceError {
    TraceError::io("cannot write export", e)
}

/// One record of a CSV or JSON Lines export.
#[derive(Serialize)]
struct RecordRow {
    cpu: u32,
    start_ns: u64,
    run_ns: u64,
    sleep_ns: u64,
}

/// Every record of `trace` as an export row, stream by stream.
fn record_rows(trace: &Trace) -> impl Iterator<Item = RecordRow> + '_ {
    trace.streams.iter().flat_map(|s| {
        s.records.iter().map(|r| RecordRow {
            cpu: s.cpu,
            start_ns: r.start_ns,
            run_ns: r.run_ns,
            sleep_ns: r.sleep_ns,
        })
    })
}

/// An input file opened for buffered reading, else an error naming it.
fn open(path: &Path) -> Result<BufReader<File>, TraceError> {
    File::open(path)
        .map(BufReader::new)
        .map_err(|e| TraceError::io(format!("cannot open {}", path.display()), e))
}

/// Lines of a text file with their 1-based numbers.
fn lines(
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
fn parse_err(path: &Path, line: usize, reason: impl Into<String>) -> TraceError {
    TraceError::Parse {
        path: path.display().to_string(),
        line,
        reason: reason.into(),
    }
}

/// `field` as a whole number ≥ 0, else a parse error calling it `what`.
fn int(path: &Path, line: usize, field: &str, what: &str) -> Result<u64, TraceError> {
    field.trim().parse().map_err(|_| {
        parse_err(
            path,
            line,
            format!("{what} `{field}` is not a whole number ≥ 0"),
        )
    })
}

/// Detours of one input file, with an optional known window, and where each came from.
struct Part {
    cpu: u32,
    window: Option<(u64, u64)>,
    detours: Vec<(Detour, usize)>,
    path: PathBuf,
}

/// Builds a trace from parts, sorting each by start and checking for overlaps.
fn assemble(parts: Vec<Part>, label: &str) -> Result<Trace, TraceError> {
    let lo = parts
        .iter()
        .flat_map(|p| p.detours.iter().map(|(d, _)| d.start_ns))
        .min()
        .unwrap_or(0);
    let hi = parts
        .iter()
        .flat_map(|p| p.detours.iter().map(|(d, _)| d.end_ns()))
        .max()
        .unwrap_or(0);
    let mut trace = Trace {
        header: Header {
            tool_version: crate::TOOL_VERSION.into(),
            ..Header::default()
        },
        ..Trace::default()
    };
    trace.header.labels.insert("imported".into(), label.into());
    for mut p in parts {
        if trace.streams.iter().any(|s| s.cpu == p.cpu) {
            return Err(TraceError::Argument(format!(
                "{}: CPU {} appears in two inputs",
                p.path.display(),
                p.cpu
            )));
        }
        p.detours.sort_by_key(|(d, _)| d.start_ns);
        for w in p.detours.windows(2) {
            let ((a, _), (b, line)) = (w[0], w[1]);
            if b.start_ns <= a.start_ns || b.start_ns < a.end_ns() {
                return Err(parse_err(
                    &p.path,
                    line,
                    format!(
                        "detour at {} ns overlaps the one at {} ns (run {} ns)",
                        b.start_ns, a.start_ns, a.run_ns
                    ),
                ));
            }
        }
        let ds: Vec<Detour> = p.detours.iter().map(|(d, _)| *d).collect();
        let (b, e) = p.window.unwrap_or((lo, hi));
        let first = ds.first().map_or(b, |d| d.start_ns);
        let last = ds.last().map_or(e, Detour::end_ns);
        if first < b || last > e {
            return Err(parse_err(
                &p.path,
                1,
                format!("detours [{first}, {last}] ns lie outside the stated window [{b}, {e}] ns"),
            ));
        }
        trace.streams.push(Stream::from_detours(p.cpu, b, e, &ds)?);
    }
    trace.sync_header();
    trace.validate()?;
    Ok(trace)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes `text` to `dir/name` and returns its path.
    pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        File::create(&p)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        p
    }

    #[test]
    fn csv_and_loggopsim_round_trip() {
        let spec: crate::synth::Spec = "poisson:rate=20000/s,dur=exp:3us".parse().unwrap();
        let t = crate::synth::synthesize(&spec, 2, 50_000_000, 5).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("t.csv");
        export(&t, &csv, Format::Csv).unwrap();
        let back = read_csv(&csv).unwrap();
        for (a, b) in t.streams.iter().zip(&back.streams) {
            assert_eq!(a.cpu, b.cpu);
            let da: Vec<Detour> = a.records.iter().map(|r| r.detour()).collect();
            let db: Vec<Detour> = b.records.iter().map(|r| r.detour()).collect();
            assert_eq!(da, db);
        }
        let plain = dir.path().join("t.lgs");
        let e = export(&t, &plain, Format::LogGopSim)
            .unwrap_err()
            .to_string();
        assert!(e.contains("{cpu}") && e.contains("2"), "{e}");
        assert!(!plain.exists());
        let lgs = dir.path().join("t.cpu{cpu}.lgs");
        export(&t, &lgs, Format::LogGopSim).unwrap();
        let files = vec![per_stream_path(&lgs, 0), per_stream_path(&lgs, 1)];
        assert!(files[1].ends_with("t.cpu1.lgs"));
        let back = read_loggopsim(&files).unwrap();
        assert_eq!(back.streams, t.streams);
        // As LogGOPSim reads it: starts from the window's begin, the end record last, no
        // newline after it (LogGOPSim would read the empty last line as a copy of it).
        let text = std::fs::read_to_string(&files[0]).unwrap();
        let s = &t.streams[0];
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(rows.len(), s.records.len() + 1);
        let r0 = &s.records[0];
        assert_eq!(
            rows[0],
            format!("{}\t{}", r0.start_ns - s.begin_ns, r0.run_ns)
        );
        assert_eq!(
            *rows.last().unwrap(),
            format!("{}\t0", s.end_ns - s.begin_ns)
        );
        assert!(!text.ends_with('\n'));
        let jl = dir.path().join("t.jsonl");
        export(&t, &jl, Format::JsonLines).unwrap();
        let text = std::fs::read_to_string(&jl).unwrap();
        assert_eq!(text.lines().count(), t.record_count());
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["start_ns"], t.streams[0].records[0].start_ns);
    }

    #[test]
    fn every_format_imports_what_it_exports_and_refuses_the_half_it_lacks() {
        let spec: crate::synth::Spec = "poisson:rate=20000/s,dur=exp:3us".parse().unwrap();
        let t = crate::synth::synthesize(&spec, 1, 10_000_000, 7).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for (f, name) in [
            (Format::Jtr, "t.jtr"),
            (Format::Csv, "t.csv"),
            (Format::LogGopSim, "t.lgs"),
        ] {
            let p = dir.path().join(name);
            export(&t, &p, f).unwrap();
            let back = import(&[p], f).unwrap();
            assert!(matches!(back.completeness, Completeness::Complete), "{f:?}");
            let da: Vec<Detour> = t.streams[0].records.iter().map(|r| r.detour()).collect();
            let db: Vec<Detour> = back.trace.streams[0]
                .records
                .iter()
                .map(|r| r.detour())
                .collect();
            assert_eq!(da, db, "{f:?}");
        }
        let p = dir.path().join("t.jsonl");
        let e = import(&[p], Format::JsonLines).unwrap_err().to_string();
        assert_eq!(e, "JSON lines is an export format only");
        let p = dir.path().join("t.0");
        let e = export(&t, &p, Format::Sysjitter).unwrap_err().to_string();
        assert_eq!(e, "sysjitter raw output is an import format only");
        assert!(!p.exists());
        let two = [dir.path().join("t.jtr"), dir.path().join("t.csv")];
        let e = import(&two, Format::Csv).unwrap_err().to_string();
        assert_eq!(e, "CSV input is a single file, got 2");
        let e = import(&two, Format::Jtr).unwrap_err().to_string();
        assert_eq!(e, ".jtr input is a single file, got 2");
    }

    #[test]
    fn formats_from_names() {
        assert_eq!(Format::from_path(Path::new("a.jtr")), Some(Format::Jtr));
        assert_eq!(
            Format::from_path(Path::new("raw.12")),
            Some(Format::Sysjitter)
        );
        assert_eq!(
            Format::from_path(Path::new("x.noise")),
            Some(Format::LogGopSim)
        );
        assert_eq!(Format::from_path(Path::new("x")), None);
        assert!("yaml".parse::<Format>().is_err());
    }
}
