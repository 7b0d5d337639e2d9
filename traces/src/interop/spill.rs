//! The rows of a text input (CSV, LogGOPSim, sysjitter) in bounded memory: each part's rows
//! (a file's, or a CPU's of a CSV) are buffered and, past a budget, written to a temporary
//! file as sorted runs; [`Rows::for_each_sorted`] hands them back in order of start (then of
//! line: the order of the stable sort the formats promise), chaining the runs of a part whose
//! rows came in order (what every writer of these formats produces) and merging them
//! otherwise (an external merge sort: one heap entry and [`READ_ROWS`] rows per run).
//!
//! Memory: at most [`BUDGET_ROWS`] rows (24 bytes each, 6 MiB) buffered over the parts being
//! read, [`KEEP_ROWS`] per finished part, and a merge's buffers (6 KiB per run; a run per
//! [`BUDGET_ROWS`] rows of an input out of order). Disk: 24 bytes per row in a temporary
//! file, then the `.jtr` made of them in another ([`Store`]): both [`crate::scratch`] files,
//! unlinked while open, so nothing is left under `$TMPDIR` however the process ends.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::error::TraceError;
use crate::model::Detour;
use crate::scratch::Scratch;

/// A detour and the line it came from.
pub(super) type Row = (Detour, usize);

/// Rows buffered over all parts being read at once, at most (6 MiB).
const BUDGET_ROWS: usize = 1 << 18;

/// Rows a finished part keeps in memory (more go to disk when it is sealed).
const KEEP_ROWS: usize = 4096;

/// Rows one run reader reads at a time.
const READ_ROWS: usize = 256;

/// Bytes of a row on disk: start, run, line (little-endian u64 each).
const ROW_BYTES: usize = 24;

/// How many rows each of `parts` parts read at once may buffer before it spills.
pub(super) fn cap(parts: usize) -> usize {
    (BUDGET_ROWS / parts.max(1)).max(KEEP_ROWS)
}

/// The scratch files of one import: the spilled rows, then the `.jtr` made of them.
pub(super) struct Store {
    rows: Scratch,
    pub(super) jtr: Scratch,
    written: Cell<u64>,
}

impl Store {
    /// A new store (two scratch files under `$TMPDIR`).
    pub(super) fn new() -> Result<Store, TraceError> {
        Ok(Store {
            rows: Scratch::new("to import")?,
            jtr: Scratch::new("to import")?,
            written: Cell::new(0),
        })
    }

    /// The spilled rows are no longer needed (the `.jtr` holds them): frees their disk.
    pub(super) fn drop_rows(&self) -> Result<(), TraceError> {
        (self.rows.file().set_len(0))
            .map_err(|e| TraceError::io("cannot truncate the import's rows", e))
    }

    /// Writes `rows` as one run.
    fn write(&self, rows: &[Row]) -> Result<Run, TraceError> {
        let mut bytes = Vec::with_capacity(rows.len() * ROW_BYTES);
        for (d, line) in rows {
            bytes.extend_from_slice(&d.start_ns.to_le_bytes());
            bytes.extend_from_slice(&d.run_ns.to_le_bytes());
            bytes.extend_from_slice(&(*line as u64).to_le_bytes());
        }
        let first = self.written.get();
        (self
            .rows
            .file()
            .write_all_at(&bytes, first * ROW_BYTES as u64))
        .map_err(|e| TraceError::io("cannot write the import's temporary rows", e))?;
        self.written.set(first + rows.len() as u64);
        Ok(Run {
            first,
            len: rows.len() as u64,
        })
    }
}

/// Rows `first..first + len` of the store's file, sorted.
#[derive(Debug, Clone, Copy)]
struct Run {
    first: u64,
    len: u64,
}

/// Reads one run a few rows at a time.
struct Reader {
    run: Run,
    read: u64,
    buf: Vec<Row>,
    pos: usize,
}

impl Reader {
    fn new(run: Run) -> Reader {
        Reader {
            run,
            read: 0,
            buf: Vec::new(),
            pos: 0,
        }
    }

    fn next(&mut self, file: &File, bytes: &mut Vec<u8>) -> Result<Option<Row>, TraceError> {
        if self.pos == self.buf.len() {
            let n = (self.run.len - self.read).min(READ_ROWS as u64) as usize;
            if n == 0 {
                return Ok(None);
            }
            bytes.resize(n * ROW_BYTES, 0);
            let at = (self.run.first + self.read) * ROW_BYTES as u64;
            (file.read_exact_at(bytes, at))
                .map_err(|e| TraceError::io("cannot read the import's temporary rows", e))?;
            let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            self.buf.clear();
            self.buf.extend(bytes.chunks_exact(ROW_BYTES).map(|r| {
                let d = Detour {
                    start_ns: word(&r[0..8]),
                    run_ns: word(&r[8..16]),
                };
                (d, word(&r[16..24]) as usize)
            }));
            self.read += n as u64;
            self.pos = 0;
        }
        self.pos += 1;
        Ok(Some(self.buf[self.pos - 1]))
    }
}

/// The rows of one part, in memory up to a budget and on disk beyond it.
#[derive(Default)]
pub(super) struct Rows {
    buf: Vec<Row>,
    runs: Vec<Run>,
    /// Every row so far came after the one before (by start, then line).
    out_of_order: bool,
    last: Option<(u64, usize)>,
    /// Earliest start and latest end of the rows pushed.
    pub(super) lo: Option<u64>,
    pub(super) hi: u64,
}

impl Rows {
    /// Adds a row (its start + run checked for overflow by the parser); beyond `cap` rows in
    /// memory ([`cap`]) they go to disk as a run.
    pub(super) fn push(&mut self, store: &Store, row: Row, cap: usize) -> Result<(), TraceError> {
        let (d, line) = row;
        let key = (d.start_ns, line);
        self.out_of_order |= self.last.is_some_and(|l| l > key);
        self.last = Some(key);
        self.lo = Some(self.lo.map_or(d.start_ns, |lo| lo.min(d.start_ns)));
        self.hi = self.hi.max(d.start_ns.saturating_add(d.run_ns));
        self.buf.push(row);
        if self.buf.len() >= cap {
            self.spill(store)?;
        }
        Ok(())
    }

    /// Another part joined the ones read at once: this one keeps at most `cap` rows in memory.
    pub(super) fn trim(&mut self, store: &Store, cap: usize) -> Result<(), TraceError> {
        if self.buf.len() > cap {
            self.spill(store)?;
        }
        self.buf.shrink_to(cap);
        Ok(())
    }

    /// The part is read whole: a part that spilled, or holds more than [`KEEP_ROWS`] rows,
    /// puts the rest on disk too.
    pub(super) fn seal(&mut self, store: &Store) -> Result<(), TraceError> {
        if !self.buf.is_empty() && (!self.runs.is_empty() || self.buf.len() > KEEP_ROWS) {
            self.spill(store)?;
        }
        self.buf.shrink_to_fit();
        Ok(())
    }

    fn spill(&mut self, store: &Store) -> Result<(), TraceError> {
        if self.out_of_order {
            self.buf
                .sort_unstable_by_key(|&(d, line)| (d.start_ns, line));
        }
        self.runs.push(store.write(&self.buf)?);
        self.buf.clear();
        Ok(())
    }

    /// Hands every row to `f` in order of start, then line.
    pub(super) fn for_each_sorted(
        mut self,
        store: &Store,
        f: &mut dyn FnMut(Row) -> Result<(), TraceError>,
    ) -> Result<(), TraceError> {
        self.seal(store)?;
        if self.runs.is_empty() {
            if self.out_of_order {
                self.buf.sort_by_key(|&(d, line)| (d.start_ns, line));
            }
            return self.buf.into_iter().try_for_each(f);
        }
        let mut bytes = Vec::new();
        let mut readers: Vec<Reader> = self.runs.iter().map(|&r| Reader::new(r)).collect();
        if !self.out_of_order {
            // In order: the runs follow one another.
            for r in &mut readers {
                while let Some(row) = r.next(store.rows.file(), &mut bytes)? {
                    f(row)?;
                }
            }
            return Ok(());
        }
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some((d, line)) = r.next(store.rows.file(), &mut bytes)? {
                heap.push(Reverse((d.start_ns, line, i, d.run_ns)));
            }
        }
        while let Some(Reverse((start_ns, line, i, run_ns))) = heap.pop() {
            f((Detour { start_ns, run_ns }, line))?;
            if let Some((d, line)) = readers[i].next(store.rows.file(), &mut bytes)? {
                heap.push(Reverse((d.start_ns, line, i, d.run_ns)));
            }
        }
        Ok(())
    }
}

/// A text input imported into a temporary `.jtr` file, gone when this is dropped (and when
/// the process ends: a [`Scratch`] file).
pub struct Spilled {
    store: Store,
    path: PathBuf,
}

impl Spilled {
    pub(super) fn new(store: Store) -> Spilled {
        let path = store.jtr.path();
        Spilled { store, path }
    }

    /// A name that opens the temporary `.jtr` file while this lives ([`Scratch::path`]).
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl std::fmt::Debug for Spilled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spilled")
            .field("jtr", &self.store.jtr)
            .field("path", &self.path)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(start_ns: u64, line: usize) -> Row {
        (
            Detour {
                start_ns,
                run_ns: 1,
            },
            line,
        )
    }

    fn sorted(rows: Rows, store: &Store) -> Vec<Row> {
        let mut out = Vec::new();
        rows.for_each_sorted(store, &mut |r| {
            out.push(r);
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn rows_come_back_as_a_stable_sort_by_start_in_memory_and_from_runs() {
        let store = Store::new().unwrap();
        // Pseudo-random starts with ties; lines increase as a parser reads them.
        let input: Vec<Row> = (0..20_000u64)
            .map(|i| row((i * 7919) % 3001, i as usize + 2))
            .collect();
        let mut expected = input.clone();
        expected.sort_by_key(|(d, _)| d.start_ns);
        for cap in [usize::MAX, 1000, 4097] {
            let mut rows = Rows::default();
            for &r in &input {
                rows.push(&store, r, cap).unwrap();
            }
            assert_eq!((rows.lo, rows.hi), (Some(0), 3001));
            assert_eq!(sorted(rows, &store), expected, "cap {cap}");
        }
        // In order: the runs are chained, whatever their number.
        let mut rows = Rows::default();
        for &r in &expected {
            rows.push(&store, r, 100).unwrap();
        }
        assert!(!rows.out_of_order && rows.runs.len() == 200);
        assert_eq!(sorted(rows, &store), expected);
        // The rows' file has no name: only the open handle reaches it.
        let link = std::fs::read_link(store.rows.path()).unwrap();
        assert!(link.to_string_lossy().ends_with("(deleted)"), "{link:?}");
    }
}
