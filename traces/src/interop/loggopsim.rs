//! **LogGOPSim / netgauge noise trace** (import and export; one file per stream):
//! `<start ns>\t<duration ns>` per line, blank lines and `#` comments ignored, any whitespace
//! accepted between the columns. On export a comment `# jitter-trace cpu=<c> begin_ns=<b>
//! end_ns=<e> origin_ns=<b>` keeps the stream's window and CPU, and import reads it back when
//! present. Exports are written so that LogGOPSim (`--noise-trace`) reads them as intended:
//! it takes time 0 as the trace's origin and wraps at the last record's start, so starts are
//! written relative to the window's begin (`origin_ns`, added back on import), a last record
//! `<e − b>\t0` (no noise) marks the window's end so that LogGOPSim wraps with the stream's
//! period, and the file does not end in a newline (LogGOPSim reads the empty line after a final
//! newline as a second copy of the last record). Import drops that end record. A trace
//! with several streams is exported as one file per stream, its name the output name with
//! [`CPU_PLACEHOLDER`] replaced by the stream's CPU (e.g. `node.cpu{cpu}.lgs`). A trace read
//! stream by stream is written a run of detours at a time (`Codec::export_streams`).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::codec::{assemble, int, io_w, lines, parse_err, with_file, Codec, Part};
use super::spill::{cap, Spilled, Store};
use crate::error::TraceError;
#[cfg(test)]
use crate::load::read_trace;
use crate::model::{Detour, Stream, Trace};
use crate::stream_order::{for_each_record, StreamSource};

/// The LogGOPSim noise-trace codec (import and export).
pub(super) struct LogGopSim;

impl Codec for LogGopSim {
    fn name(&self) -> &'static str {
        "LogGOPSim"
    }

    fn spill(&self, paths: &[PathBuf]) -> Result<Spilled, TraceError> {
        spill_loggopsim(paths)
    }

    fn export(&self, trace: &Trace, path: &Path) -> Result<(), TraceError> {
        if trace.streams.len() == 1 {
            return with_file(path, |w| write_loggopsim(&trace.streams[0], w));
        }
        check_placeholder(path, trace.streams.len())?;
        for s in &trace.streams {
            let p = per_stream_path(path, s.cpu);
            with_file(&p, |w| write_loggopsim(s, w))?;
        }
        Ok(())
    }

    /// The bytes of [`Codec::export`], a stream at a time in the memory of one run of detours.
    fn export_streams(&self, src: &dyn StreamSource, path: &Path) -> Result<(), TraceError> {
        let streams = &src.frame().streams;
        if streams.len() == 1 {
            return with_file(path, |w| write_loggopsim_stream(src, 0, w));
        }
        check_placeholder(path, streams.len())?;
        for (i, s) in streams.iter().enumerate() {
            let p = per_stream_path(path, s.cpu);
            with_file(&p, |w| write_loggopsim_stream(src, i, w))?;
        }
        Ok(())
    }
}

/// Refuses a multi-stream output name without [`CPU_PLACEHOLDER`], before anything is written.
fn check_placeholder(path: &Path, streams: usize) -> Result<(), TraceError> {
    if path.to_string_lossy().contains(CPU_PLACEHOLDER) {
        return Ok(());
    }
    Err(TraceError::Argument(format!(
        "a LogGOPSim file holds one stream and this trace has {streams}: put {CPU_PLACEHOLDER} \
         in the output name for one file per CPU (e.g. node.cpu{CPU_PLACEHOLDER}.lgs), \
         or keep one CPU with `slice --cpus`"
    )))
}

/// What a multi-stream LogGOPSim output name holds where each file's CPU number goes.
pub(crate) const CPU_PLACEHOLDER: &str = "{cpu}";

/// The output path of one stream of a multi-stream export: `path` with every
/// [`CPU_PLACEHOLDER`] replaced by `cpu`.
pub fn per_stream_path(path: &Path, cpu: u32) -> PathBuf {
    PathBuf::from(
        path.to_string_lossy()
            .replace(CPU_PLACEHOLDER, &cpu.to_string()),
    )
}

/// Writes one stream as a LogGOPSim noise trace (`<start ns>\t<duration ns>`): starts relative
/// to the window's begin, a zero-length end record at the window's end, no final newline (see
/// the module documentation).
pub(crate) fn write_loggopsim(stream: &Stream, w: &mut dyn Write) -> Result<(), TraceError> {
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

/// [`write_loggopsim`] of stream `stream` of `src`, its detours read a run at a time.
fn write_loggopsim_stream(
    src: &dyn StreamSource,
    stream: usize,
    w: &mut dyn Write,
) -> Result<(), TraceError> {
    let s = &src.frame().streams[stream];
    let b = s.begin_ns;
    write!(
        w,
        "# jitter-trace cpu={} begin_ns={b} end_ns={} origin_ns={b}",
        s.cpu, s.end_ns
    )
    .map_err(io_w)?;
    let mut index = 0usize;
    for_each_record(src, stream, &mut |r| {
        let rel = r
            .start_ns
            .checked_sub(b)
            .ok_or_else(|| TraceError::Invalid {
                stream,
                index,
                reason: format!(
                    "starts at {} ns, before the window's begin {b} ns",
                    r.start_ns
                ),
            })?;
        index += 1;
        write!(w, "\n{rel}\t{}", r.run_ns).map_err(io_w)
    })?;
    write!(w, "\n{}\t0", s.end_ns - b).map_err(io_w)?;
    Ok(())
}

/// Reads LogGOPSim/netgauge noise traces, one stream per file.
#[cfg(test)]
pub(crate) fn read_loggopsim(paths: &[PathBuf]) -> Result<Trace, TraceError> {
    Ok(read_trace(spill_loggopsim(paths)?.path())?.trace)
}

/// [`read_loggopsim`] into a temporary `.jtr`, in bounded memory ([`super::spill`]).
fn spill_loggopsim(paths: &[PathBuf]) -> Result<Spilled, TraceError> {
    let store = Store::new()?;
    let mut parts = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let mut part = Part::new(i as u32, path);
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
            let row = (Detour { start_ns, run_ns }, n);
            part.detours.push(&store, row, cap(1))?;
        }
        part.detours.seal(&store)?;
        parts.push(part);
    }
    assemble(parts, store, "loggopsim", |_| {})
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interop::tests::write;

    #[test]
    fn loggopsim_parse_errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "n.lgs", "# c\n10\t5\n20 x\n");
        let e = read_loggopsim(&[p]).unwrap_err().to_string();
        assert!(e.contains("n.lgs:3:") && e.contains("`x`"), "{e}");
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
}
