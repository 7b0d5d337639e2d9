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
//! A text input is read in one pass into a temporary `.jtr` ([`import_to_file`], `spill`:
//! each stream's rows sorted on disk where they come out of order), which every reader then
//! reads as any `.jtr`, in bounded memory.

mod codec;
mod csv;
mod jsonl;
mod jtr;
mod loggopsim;
pub mod perfetto;
mod spill;
mod sysjitter;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::TraceError;
use crate::model::Trace;
use crate::stream_order::StreamSource;

pub(crate) use self::codec::Codec;
#[cfg(test)]
pub(crate) use self::codec::Imported;
pub use self::csv::write_csv;
pub(crate) use self::jtr::write_streams as write_jtr_streams;
pub use self::loggopsim::per_stream_path;
pub use self::spill::Spilled;

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
    pub(crate) fn codec(self) -> &'static dyn Codec {
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

/// Reads a trace from `paths` in `format` (one file per stream for sysjitter and LogGOPSim).
#[cfg(test)]
pub(crate) fn import(paths: &[PathBuf], format: Format) -> Result<Imported, TraceError> {
    check_inputs(paths, format)?;
    format.codec().import(paths)
}

/// Refuses a text input whose content is not text (`sniff`: a `.jtr` under a CSV name, an
/// executable) before its reader complains about its first bytes.
fn check_inputs(paths: &[PathBuf], format: Format) -> Result<(), TraceError> {
    if format == Format::Jtr {
        return Ok(());
    }
    paths
        .iter()
        .try_for_each(|p| crate::sniff::check_text_input(p, format.codec().name()))
}

/// Reads a text input (CSV, sysjitter, LogGOPSim) from `paths` into a temporary `.jtr` file,
/// in bounded memory in the input's length (see `spill`), with the errors and the trace of
/// [`import`]; the file is removed when the [`Spilled`] is dropped.
pub fn import_to_file(paths: &[PathBuf], format: Format) -> Result<Spilled, TraceError> {
    check_inputs(paths, format)?;
    format.codec().spill(paths)
}

/// Writes the trace of `src` to `path` in `format`, stream by stream, in the memory of one
/// run of detours.
pub fn export_streams(
    src: &dyn StreamSource,
    path: &Path,
    format: Format,
) -> Result<(), TraceError> {
    src.frame().validate()?;
    format.codec().export_streams(src, path)
}

/// Writes `trace` to `path` in `format`.
pub fn export(trace: &Trace, path: &Path, format: Format) -> Result<(), TraceError> {
    trace.validate()?;
    format.codec().export(trace, path)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::csv::read_csv;
    use super::loggopsim::read_loggopsim;
    use super::*;
    use crate::format::Completeness;
    use crate::model::Detour;
    use std::fs::File;
    use std::io::Write;

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
        let two = [dir.path().join("t.csv"), dir.path().join("t.csv")];
        let e = import(&two, Format::Csv).unwrap_err().to_string();
        let two = [dir.path().join("t.jtr"), dir.path().join("t.csv")];
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
