//! Import and export of other trace formats: sysjitter `--raw`, LogGOPSim/netgauge noise traces,
//! CSV and JSON lines.
//!
//! # Formats
//!
//! - **sysjitter `--raw`** (import; one file per core, named `<prefix>.<n>`): `#` comment lines,
//!   among them `# cpu_mhz: <MHz>`, `# threshold: <n>ns` and `# total_runtime: <x> seconds`, then
//!   one line per interruption. Unsorted files (the default) have four columns
//!   `<timestamp ns> <delta us> <interruption cycles> <interruption ns>`, files written with
//!   `--sort` three: `<timestamp ns> <interruption cycles> <interruption ns>`. The timestamp is
//!   when the thread got the CPU back (the *end* of the interruption) relative to the start of the
//!   run, so a detour is `start = timestamp − ns, run = ns`. Lines are sorted by time on import.
//!   Truncation to ns in sysjitter can make a detour start up to a few ns before the previous one
//!   ends; such a start is moved to the previous end (and the run shortened by as much). The
//!   stream window is `[0, total_runtime]` (or `[0, last end]` without that line); the CPU id is
//!   the number after the last `.` of the file name, else the file's position.
//! - **LogGOPSim / netgauge noise trace** (import and export; one file per stream):
//!   `<start ns>\t<duration ns>` per line, blank lines and `#` comments ignored, any whitespace
//!   accepted between the columns. On export a comment `# jitter-trace cpu=<c> begin_ns=<b>
//!   end_ns=<e> origin_ns=<b>` keeps the stream's window and CPU, and import reads it back when
//!   present. Exports are written so that LogGOPSim (`--noise-trace`) reads them as intended:
//!   it takes time 0 as the trace's origin and wraps at the last record's start, so starts are
//!   written relative to the window's begin (`origin_ns`, added back on import), a last record
//!   `<e − b>\t0` (no noise) marks the window's end so that LogGOPSim wraps with the stream's
//!   period, and the file does not end in a newline (LogGOPSim reads the empty line after a final
//!   newline as a second copy of the last record). Import drops that end record. A trace
//!   with several streams is exported as one file per stream, `<stem>.cpu<c>.<ext>`.
//! - **CSV** (import and export): a header line, then `cpu,start_ns,run_ns` (export adds
//!   `sleep_ns`, which import ignores). Rows may come in any order; they are grouped by CPU.
//! - **JSON lines** (export): one object `{"cpu","start_ns","run_ns","sleep_ns"}` per record.
//!
//! Formats without a window (CSV, and noise traces without the comment) get the window
//! `[earliest start, latest end]` over all files of the import, the same for every stream.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;

use crate::error::TraceError;
use crate::format::{read_trace, write_trace, Completeness};
use crate::model::{Detour, Header, Stream, Trace};

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

/// A trace read by [`import`], with a warning when a `.jtr` file was incomplete.
#[derive(Debug)]
pub struct Imported {
    /// The trace.
    pub trace: Trace,
    /// How complete a `.jtr` input was (always complete for the text formats).
    pub completeness: Completeness,
}

/// Reads a trace from `paths` in `format` (one file per stream for sysjitter and LogGOPSim).
pub fn import(paths: &[PathBuf], format: Format) -> Result<Imported, TraceError> {
    let one = |what: &str| -> Result<&PathBuf, TraceError> {
        match paths {
            [p] => Ok(p),
            _ => Err(TraceError::Argument(format!(
                "{what} input is a single file, got {}",
                paths.len()
            ))),
        }
    };
    let trace = match format {
        Format::Jtr => {
            let l = read_trace(one(".jtr")?)?;
            return Ok(Imported {
                trace: l.trace,
                completeness: l.completeness,
            });
        }
        Format::Csv => read_csv(one("CSV")?)?,
        Format::LogGopSim => read_loggopsim(paths)?,
        Format::Sysjitter => read_sysjitter(paths)?,
        Format::JsonLines => {
            return Err(TraceError::Argument(
                "JSON lines is an export format only".into(),
            ))
        }
    };
    Ok(Imported {
        trace,
        completeness: Completeness::Complete,
    })
}

/// Writes `trace` to `path` in `format`.
pub fn export(trace: &Trace, path: &Path, format: Format) -> Result<(), TraceError> {
    trace.validate()?;
    match format {
        Format::Jtr => write_trace(path, trace),
        Format::Csv => with_file(path, |w| write_csv(trace, w)),
        Format::JsonLines => with_file(path, |w| write_jsonl(trace, w)),
        Format::LogGopSim => {
            if trace.streams.len() == 1 {
                return with_file(path, |w| write_loggopsim(&trace.streams[0], w));
            }
            if !path.to_string_lossy().contains(CPU_PLACEHOLDER) {
                return Err(TraceError::Argument(format!(
                    "a LogGOPSim file holds one stream and this trace has {}: put {CPU_PLACEHOLDER} \
                     in the output name for one file per CPU (e.g. node.cpu{CPU_PLACEHOLDER}.lgs), \
                     or keep one CPU with `slice --cpus`",
                    trace.streams.len()
                )));
            }
            for s in &trace.streams {
                let p = per_stream_path(path, s.cpu);
                with_file(&p, |w| write_loggopsim(s, w))?;
            }
            Ok(())
        }
        Format::Sysjitter => Err(TraceError::Argument(
            "sysjitter raw output is an import format only".into(),
        )),
    }
}

/// What a multi-stream LogGOPSim output name holds where each file's CPU number goes.
pub const CPU_PLACEHOLDER: &str = "{cpu}";

/// The output path of one stream of a multi-stream export: `path` with every
/// [`CPU_PLACEHOLDER`] replaced by `cpu`.
pub fn per_stream_path(path: &Path, cpu: u32) -> PathBuf {
    PathBuf::from(
        path.to_string_lossy()
            .replace(CPU_PLACEHOLDER, &cpu.to_string()),
    )
}

fn with_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    crate::output::write_output(path, f)?;
    Ok(())
}

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

/// The columns of a CSV export, in order (the reader needs the first three).
const CSV_HEADER: [&str; 4] = ["cpu", "start_ns", "run_ns", "sleep_ns"];

/// Writes `cpu,start_ns,run_ns,sleep_ns` rows with a header line.
pub fn write_csv(trace: &Trace, w: &mut dyn Write) -> Result<(), TraceError> {
    let csv_w = |e: csv::Error| io_w(e.into());
    let mut out = csv::WriterBuilder::new().has_headers(false).from_writer(w);
    out.write_record(CSV_HEADER).map_err(csv_w)?;
    for row in record_rows(trace) {
        out.serialize(row).map_err(csv_w)?;
    }
    out.flush().map_err(io_w)
}

/// Writes one JSON object per record.
pub fn write_jsonl(trace: &Trace, w: &mut dyn Write) -> Result<(), TraceError> {
    for rec in record_rows(trace) {
        serde_json::to_writer(&mut *w, &rec)
            .map_err(|e| TraceError::io("cannot write export", e.into()))?;
        w.write_all(b"\n").map_err(io_w)?;
    }
    Ok(())
}

/// Writes one stream as a LogGOPSim noise trace (`<start ns>\t<duration ns>`): starts relative
/// to the window's begin, a zero-length end record at the window's end, no final newline (see
/// the module documentation).
pub fn write_loggopsim(stream: &Stream, w: &mut dyn Write) -> Result<(), TraceError> {
    let b = stream.begin_ns;
    write!(
        w,
        "# jitter-trace cpu={} begin_ns={b} end_ns={} origin_ns={b}",
        stream.cpu, stream.end_ns
    )
    .map_err(io_w)?;
    for r in &stream.records {
        write!(w, "\n{}\t{}", r.start_ns - b, r.run_ns).map_err(io_w)?;
    }
    write!(w, "\n{}\t0", stream.end_ns - b).map_err(io_w)?;
    Ok(())
}

/// Lines of a text file with their 1-based numbers.
fn lines(
    path: &Path,
) -> Result<impl Iterator<Item = (usize, Result<String, TraceError>)>, TraceError> {
    let f = File::open(path)
        .map_err(|e| TraceError::io(format!("cannot open {}", path.display()), e))?;
    let p = path.display().to_string();
    Ok(BufReader::new(f).lines().enumerate().map(move |(i, l)| {
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

fn parse_err(path: &Path, line: usize, reason: impl Into<String>) -> TraceError {
    TraceError::Parse {
        path: path.display().to_string(),
        line,
        reason: reason.into(),
    }
}

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

/// Reads a CSV file with a header and `cpu,start_ns,run_ns[,...]` rows (fields may be quoted;
/// blank lines are skipped; columns after the third are ignored).
pub fn read_csv(path: &Path) -> Result<Trace, TraceError> {
    let f = File::open(path)
        .map_err(|e| TraceError::io(format!("cannot open {}", path.display()), e))?;
    let mut rows = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(BufReader::new(f));
    let line_of = |e: &csv::Error| e.position().map_or(1, |p| p.line() as usize);
    let cannot_read = |e: csv::Error| parse_err(path, line_of(&e), format!("cannot read: {e}"));
    let header = rows.headers().map_err(cannot_read)?;
    if header.is_empty() {
        return Err(parse_err(path, 1, "the file is empty (no CSV header)"));
    }
    if header.len() < 3 || header.iter().take(3).ne(CSV_HEADER.into_iter().take(3)) {
        let n = header.position().map_or(1, |p| p.line() as usize);
        return Err(parse_err(
            path,
            n,
            "expected the header `cpu,start_ns,run_ns`",
        ));
    }
    let mut parts: Vec<Part> = Vec::new();
    let mut record = csv::StringRecord::new();
    while rows.read_record(&mut record).map_err(cannot_read)? {
        let n = record.position().map_or(1, |p| p.line() as usize);
        if record.len() < 3 {
            return Err(parse_err(
                path,
                n,
                format!("expected 3 columns, found {}", record.len()),
            ));
        }
        let cpu = u32::try_from(int(path, n, &record[0], "cpu")?)
            .map_err(|_| parse_err(path, n, "cpu is too large"))?;
        let start_ns = int(path, n, &record[1], "start_ns")?;
        let run_ns = int(path, n, &record[2], "run_ns")?;
        if start_ns.checked_add(run_ns).is_none() {
            return Err(parse_err(path, n, "start + run overflows"));
        }
        let i = match parts.iter().position(|p| p.cpu == cpu) {
            Some(i) => i,
            None => {
                parts.push(Part {
                    cpu,
                    window: None,
                    detours: Vec::new(),
                    path: path.to_path_buf(),
                });
                parts.len() - 1
            }
        };
        parts[i].detours.push((Detour { start_ns, run_ns }, n));
    }
    parts.sort_by_key(|p| p.cpu);
    assemble(parts, "csv")
}

/// Reads LogGOPSim/netgauge noise traces, one stream per file.
pub fn read_loggopsim(paths: &[PathBuf]) -> Result<Trace, TraceError> {
    let mut parts = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let mut part = Part {
            cpu: i as u32,
            window: None,
            detours: Vec::new(),
            path: path.clone(),
        };
        // Starts are relative to this (the `origin_ns` of an export; 0 otherwise).
        let mut origin = 0u64;
        for (n, line) in lines(path)? {
            let line = line?;
            let l = line.trim();
            if l.is_empty() {
                continue;
            }
            if let Some(c) = l.strip_prefix('#') {
                if let Some(meta) = c.trim().strip_prefix("jitter-trace ") {
                    let (cpu, window, o) = parse_meta(path, n, meta)?;
                    part.cpu = cpu;
                    part.window = Some(window);
                    origin = o;
                }
                continue;
            }
            let cols: Vec<&str> = l.split_whitespace().collect();
            if cols.len() != 2 {
                return Err(parse_err(
                    path,
                    n,
                    format!(
                        "expected `<start ns> <duration ns>`, found {} columns",
                        cols.len()
                    ),
                ));
            }
            let start_ns = int(path, n, cols[0], "start")?
                .checked_add(origin)
                .ok_or_else(|| parse_err(path, n, "origin + start overflows"))?;
            let run_ns = int(path, n, cols[1], "duration")?;
            if start_ns.checked_add(run_ns).is_none() {
                return Err(parse_err(path, n, "start + duration overflows"));
            }
            // The export's end record (no noise, at the window's end) is not a detour.
            if run_ns == 0 && part.window.is_some_and(|(_, e)| e == start_ns) {
                continue;
            }
            part.detours.push((Detour { start_ns, run_ns }, n));
        }
        parts.push(part);
    }
    assemble(parts, "loggopsim")
}

/// The jitter-trace comment: CPU, window and the origin of the starts (0 when absent).
fn parse_meta(path: &Path, n: usize, meta: &str) -> Result<(u32, (u64, u64), u64), TraceError> {
    let (mut cpu, mut b, mut e, mut o) = (None, None, None, 0);
    for kv in meta.split_whitespace() {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| parse_err(path, n, format!("`{kv}` is not key=value")))?;
        match k {
            "cpu" => cpu = Some(int(path, n, v, "cpu")?),
            "begin_ns" => b = Some(int(path, n, v, "begin_ns")?),
            "end_ns" => e = Some(int(path, n, v, "end_ns")?),
            "origin_ns" => o = int(path, n, v, "origin_ns")?,
            _ => {}
        }
    }
    match (cpu, b, e) {
        (Some(c), Some(b), Some(e)) if b <= e => {
            let c = u32::try_from(c).map_err(|_| parse_err(path, n, "cpu is too large"))?;
            Ok((c, (b, e), o))
        }
        _ => Err(parse_err(
            path,
            n,
            "the jitter-trace comment needs cpu, begin_ns <= end_ns",
        )),
    }
}

/// Reads sysjitter `--raw` files, one stream per file.
pub fn read_sysjitter(paths: &[PathBuf]) -> Result<Trace, TraceError> {
    let mut parts = Vec::new();
    let mut mhz = None;
    let mut threshold = None;
    for (i, path) in paths.iter().enumerate() {
        let cpu = path
            .extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse::<u32>().ok())
            .unwrap_or(i as u32);
        let mut runtime_ns: Option<u64> = None;
        let mut rows: Vec<(Detour, usize)> = Vec::new();
        let mut columns = None;
        for (n, line) in lines(path)? {
            let line = line?;
            let l = line.trim();
            if l.is_empty() {
                continue;
            }
            if let Some(c) = l.strip_prefix('#') {
                let c = c.trim();
                if let Some(v) = c.strip_prefix("cpu_mhz:") {
                    mhz = v.trim().parse::<u64>().ok().or(mhz);
                } else if let Some(v) = c.strip_prefix("threshold:") {
                    threshold = v
                        .trim()
                        .trim_end_matches("ns")
                        .parse::<f64>()
                        .ok()
                        .or(threshold);
                } else if let Some(v) = c.strip_prefix("total_runtime:") {
                    if let Some(secs) = v.trim().strip_suffix("seconds") {
                        let s: f64 = secs.trim().parse().map_err(|_| {
                            parse_err(
                                path,
                                n,
                                format!("total_runtime `{}` is not a number", secs.trim()),
                            )
                        })?;
                        if !(s.is_finite() && s >= 0.0) {
                            return Err(parse_err(path, n, "total_runtime is negative"));
                        }
                        runtime_ns = Some((s * 1e9).round() as u64);
                    }
                }
                continue;
            }
            let cols: Vec<&str> = l.split_whitespace().collect();
            match columns {
                None if cols.len() == 3 || cols.len() == 4 => columns = Some(cols.len()),
                Some(k) if k == cols.len() => {}
                _ => {
                    return Err(parse_err(
                        path,
                        n,
                        format!(
                            "expected 4 columns (timestamp, delta, cycles, ns) or 3 (--sort), \
                             found {}",
                            cols.len()
                        ),
                    ))
                }
            }
            let ts = int(path, n, cols[0], "timestamp")?;
            let ns = int(path, n, cols[cols.len() - 1], "interruption ns")?;
            int(path, n, cols[cols.len() - 2], "interruption cycles")?;
            if cols.len() == 4 {
                let delta = cols[1];
                if !delta
                    .parse::<f64>()
                    .is_ok_and(|d| d.is_finite() && d >= 0.0)
                {
                    return Err(parse_err(
                        path,
                        n,
                        format!("delta `{delta}` is not a number ≥ 0"),
                    ));
                }
            }
            rows.push((
                Detour {
                    start_ns: ts.saturating_sub(ns),
                    run_ns: ns.min(ts),
                },
                n,
            ));
        }
        rows.sort_by_key(|(d, _)| d.start_ns);
        // sysjitter truncates cycles to ns separately for the timestamp and the interruption, so
        // a start may fall a few ns before the previous end: move it to that end.
        let mut kept: Vec<(Detour, usize)> = Vec::with_capacity(rows.len());
        for (mut d, n) in rows {
            if let Some(&(last, m)) = kept.last() {
                if d == last {
                    return Err(parse_err(path, n, format!("duplicates line {m}")));
                }
                let end = last.end_ns();
                if d.start_ns < end {
                    let shift = end - d.start_ns;
                    if shift > 1_000 {
                        return Err(parse_err(
                            path,
                            n,
                            format!("interruption overlaps the previous one by {shift} ns"),
                        ));
                    }
                    if shift >= d.run_ns {
                        return Err(parse_err(
                            path,
                            n,
                            format!("interruption lies within the one of line {m}"),
                        ));
                    }
                    d.run_ns -= shift;
                    d.start_ns = end;
                }
                if d.start_ns <= last.start_ns {
                    continue;
                }
            }
            kept.push((d, n));
        }
        let last_end = kept.last().map_or(0, |(d, _)| d.end_ns());
        parts.push(Part {
            cpu,
            window: Some((0, runtime_ns.unwrap_or(0).max(last_end))),
            detours: kept,
            path: path.clone(),
        });
    }
    let mut t = assemble(parts, "sysjitter")?;
    if let Some(m) = mhz {
        t.header.tsc_khz = m * 1000;
    }
    if let Some(th) = threshold {
        t.header.threshold_ns = th;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        File::create(&p)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        p
    }

    const SYSJITTER: &str = "# cpu_mhz: 2445
# threshold: 200ns
# n_interruptions: 3
# interruption: 0.001000%
# total_interruption: 24450 cycles
# total_runtime: 2445000000 cycles
# total_interruption: 0.000010000 seconds
# total_runtime: 1.000000000 seconds
#
#      Timestamp      delta   <== interruption =>
#         (nsec)     (usec)   (cycles)     (nsec)
           10000          0       4890       2000
          500000        490      12225       5000
          900003        400       7335       3001
";

    #[test]
    fn sysjitter_refuses_a_duplicated_line_and_a_non_numeric_delta() {
        let dir = tempfile::tempdir().unwrap();
        let last = SYSJITTER.lines().last().unwrap();
        let dup = format!("{SYSJITTER}{last}\n");
        let p = write(dir.path(), "dup.0", &dup);
        let e = read_sysjitter(&[p]).unwrap_err().to_string();
        assert!(e.contains("dup.0:15: duplicates line 14"), "{e}");
        let bad = SYSJITTER.replace("    490  ", "    4x0  ");
        assert_ne!(bad, SYSJITTER);
        let p = write(dir.path(), "delta.0", &bad);
        let e = read_sysjitter(&[p]).unwrap_err().to_string();
        assert!(e.contains("delta.0:13: delta `4x0` is not a number"), "{e}");
    }

    #[test]
    fn sysjitter_raw_becomes_detours_ending_at_the_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "raw.3", SYSJITTER);
        let t = read_sysjitter(&[p]).unwrap();
        let s = &t.streams[0];
        assert_eq!(s.cpu, 3);
        assert_eq!((s.begin_ns, s.end_ns), (0, 1_000_000_000));
        let d: Vec<(u64, u64)> = s.records.iter().map(|r| (r.start_ns, r.run_ns)).collect();
        assert_eq!(d, vec![(8000, 2000), (495_000, 5000), (897_002, 3001)]);
        assert_eq!(t.header.tsc_khz, 2_445_000);
        assert_eq!(t.header.threshold_ns, 200.0);
    }

    #[test]
    fn sysjitter_sorted_output_is_resorted_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let text = "# cpu_mhz: 1000\n 500000 5000 5000\n 10000 2000 2000\n";
        let p = write(dir.path(), "raw.0", text);
        let t = read_sysjitter(&[p]).unwrap();
        assert_eq!(t.streams[0].records[0].start_ns, 8000);
        assert_eq!(t.streams[0].end_ns, 500_000);
    }

    #[test]
    fn parse_errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "n.lgs", "# c\n10\t5\n20 x\n");
        let e = read_loggopsim(&[p]).unwrap_err().to_string();
        assert!(e.contains("n.lgs:3:") && e.contains("`x`"), "{e}");
        let p = write(dir.path(), "c.csv", "cpu,start_ns,run_ns\n0,10,5\n0,12,1\n");
        let e = read_csv(&p).unwrap_err().to_string();
        assert!(e.contains("c.csv:3:") && e.contains("overlaps"), "{e}");
        let p = write(dir.path(), "h.csv", "a,b,c\n");
        assert!(read_csv(&p).unwrap_err().to_string().contains("h.csv:1:"));
        let p = write(dir.path(), "e.csv", "");
        assert!(read_csv(&p).unwrap_err().to_string().contains("empty"));
        let p = write(dir.path(), "s.csv", "cpu,start_ns,run_ns\n0,10,5\n0,30\n");
        let e = read_csv(&p).unwrap_err().to_string();
        assert!(e.contains("s.csv:3:") && e.contains("found 2"), "{e}");
    }

    #[test]
    fn csv_fields_may_be_quoted_and_padded_and_blank_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let text = "cpu, start_ns ,run_ns,note\n\n\"1\", 10 ,5,\"a, b\"\n1,30,2,x\n";
        let t = read_csv(&write(dir.path(), "q.csv", text)).unwrap();
        let runs: Vec<(u64, u64)> = t.streams[0]
            .records
            .iter()
            .map(|r| (r.start_ns, r.run_ns))
            .collect();
        assert_eq!((t.streams[0].cpu, runs), (1, vec![(10, 5), (30, 2)]));
        let mut out = Vec::new();
        write_csv(&t, &mut out).unwrap();
        let r = &t.streams[0].records;
        let expected = format!(
            "cpu,start_ns,run_ns,sleep_ns\n1,10,5,{}\n1,30,2,{}\n",
            r[0].sleep_ns, r[1].sleep_ns
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
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
    fn a_loggopsim_export_starts_at_the_window_s_begin_and_reads_back_absolute() {
        // A collected stream's times are absolute (e.g. since boot): LogGOPSim would see noise
        // only after that much time; the export counts from the window's begin.
        let d = [
            Detour {
                start_ns: 5_000_000_100,
                run_ns: 40,
            },
            Detour {
                start_ns: 5_000_000_900,
                run_ns: 100,
            },
        ];
        let s = Stream::from_detours(3, 5_000_000_000, 5_000_001_000, &d).unwrap();
        let mut out = Vec::new();
        write_loggopsim(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "# jitter-trace cpu=3 begin_ns=5000000000 end_ns=5000001000 origin_ns=5000000000\n\
             100\t40\n900\t100\n1000\t0"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "s.lgs", &text);
        let back = read_loggopsim(&[p]).unwrap();
        assert_eq!(back.streams, vec![s]);
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
