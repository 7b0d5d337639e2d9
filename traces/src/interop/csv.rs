//! **CSV** (import and export): a header line, then `cpu,start_ns,run_ns` (export adds
//! `sleep_ns`, which import ignores). Rows may come in any order; they are grouped by CPU (in
//! bounded memory, sorted on disk where they come out of order: [`super::spill`]). Every CSV
//! is read and written with the `csv` crate.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::codec::{
    assemble, each_row, int, io_w, open, parse_err, single, with_file, Codec, Part,
};
use super::spill::{cap, Spilled, Store};
use crate::error::TraceError;
#[cfg(test)]
use crate::load::read_trace;
use crate::model::{Detour, Trace};
use crate::stream_order::StreamSource;

/// The CSV codec (import and export).
pub(super) struct Csv;

impl Codec for Csv {
    fn name(&self) -> &'static str {
        "CSV"
    }

    fn spill(&self, paths: &[PathBuf]) -> Result<Spilled, TraceError> {
        spill_csv(single(paths, self.name())?)
    }

    fn export(&self, trace: &Trace, path: &Path) -> Result<(), TraceError> {
        with_file(path, |w| write_csv(trace, w))
    }

    fn export_streams(&self, src: &dyn StreamSource, path: &Path) -> Result<(), TraceError> {
        with_file(path, |w| write_csv_streams(src, w))
    }
}

/// The columns of a CSV export, in order (the reader needs the first three).
const CSV_HEADER: [&str; 4] = ["cpu", "start_ns", "run_ns", "sleep_ns"];

/// Writes `cpu,start_ns,run_ns,sleep_ns` rows with a header line.
pub fn write_csv(trace: &Trace, w: &mut dyn Write) -> Result<(), TraceError> {
    write_csv_streams(trace, w)
}

/// [`write_csv`] of a trace read stream by stream.
pub(crate) fn write_csv_streams(
    src: &dyn StreamSource,
    w: &mut dyn Write,
) -> Result<(), TraceError> {
    let csv_w = |e: csv::Error| io_w(e.into());
    let mut out = csv::WriterBuilder::new().has_headers(false).from_writer(w);
    out.write_record(CSV_HEADER).map_err(csv_w)?;
    each_row(src, &mut |row| out.serialize(row).map_err(csv_w))?;
    out.flush().map_err(io_w)
}

/// Reads a CSV file with a header and `cpu,start_ns,run_ns[,...]` rows (fields may be quoted;
/// blank lines are skipped; columns after the third are ignored).
#[cfg(test)]
pub(crate) fn read_csv(path: &Path) -> Result<Trace, TraceError> {
    Ok(read_trace(spill_csv(path)?.path())?.trace)
}

/// [`read_csv`] into a temporary `.jtr`, in bounded memory ([`super::spill`]).
fn spill_csv(path: &Path) -> Result<Spilled, TraceError> {
    let store = Store::new()?;
    let mut rows = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(open(path)?);
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
                // The parts read at once share the memory budget.
                let shared = cap(parts.len() + 1);
                for p in &mut parts {
                    p.detours.trim(&store, shared)?;
                }
                parts.push(Part::new(cpu, path));
                parts.len() - 1
            }
        };
        let (row, shared) = ((Detour { start_ns, run_ns }, n), cap(parts.len()));
        parts[i].detours.push(&store, row, shared)?;
    }
    parts.sort_by_key(|p| p.cpu);
    assemble(parts, store, "csv", |_| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interop::tests::write;

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
    fn csv_parse_errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
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
}
