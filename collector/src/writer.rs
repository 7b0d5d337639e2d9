//! The writer: drains the probes' rings, converts ticks to ns on the common time base, keeps
//! per-CPU statistics, and appends checksummed chunks that are on disk after every drain.

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jitter_trace::{Detour, Header, TraceWriter, Window};

use crate::clock::{read_counter, Clock};
use crate::collection_progress::Progress;
use crate::end_table::DetourHistogram;
use crate::error::{Context, Result};
use crate::ftq::FtqConverter;
use crate::ring::RingConsumer;

/// Slack around a writer window within which a detour counts as the writer's own: its wake-up
/// (timer interrupt, context switch) comes before the window starts, its sleep after it ends.
pub const SELF_SLACK_NS: u64 = 50_000;

/// The columns of the FTQ series (`--ftq-csv`), in order.
pub(crate) const FTQ_HEADER: [&str; 4] = ["cpu", "start_ns", "end_ns", "count"];

/// One quantum of the FTQ series: its CPU, start and end (ns from time 0) and the work count.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct FtqRow {
    cpu: u32,
    start_ns: u64,
    end_ns: u64,
    count: u64,
}

/// Most writer activity windows kept for the end chunk (16 B each); later ones are counted only.
pub(crate) const MAX_SELF_WINDOWS: usize = 1 << 18;

/// A file sink that holds what the trace writer produces and hands it to the kernel in one
/// `write` per flush; if that fails (disk full, file size limit) the file is cut back to the last
/// complete flush, so every chunk on disk stays whole.
#[derive(Debug)]
pub struct ChunkFile {
    file: File,
    buf: Vec<u8>,
    committed: u64,
}

impl ChunkFile {
    /// Wraps an open, empty file.
    pub fn new(file: File) -> Self {
        ChunkFile {
            file,
            buf: Vec::with_capacity(1 << 16),
            committed: 0,
        }
    }

    /// Bytes safely on disk.
    pub fn committed(&self) -> u64 {
        self.committed
    }
}

impl Write for ChunkFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let result = self.file.write_all(&self.buf);
        let len = self.buf.len() as u64;
        self.buf.clear();
        if self.buf.capacity() > 1 << 24 {
            self.buf.shrink_to(1 << 16);
        }
        match result {
            Ok(()) => {
                self.committed += len;
                Ok(())
            }
            Err(e) => {
                // Best effort: drop a partly written chunk so the file ends on a chunk boundary.
                let _ = self.file.set_len(self.committed);
                Err(e)
            }
        }
    }
}

/// How the entries of a ring are to be read.
#[derive(Debug, Clone)]
pub enum Decoder {
    /// Entries are (start, end) ticks of a detour.
    Detours,
    /// Entries are FTQ samples (quantum start, work count), converted to detours.
    Ftq(FtqConverter),
}

/// Per-stream state of the writer.
#[derive(Debug)]
pub struct StreamState {
    /// CPU of the stream.
    pub cpu: u32,
    /// Statistics of the detours written.
    pub stats: DetourHistogram,
    /// Detours dropped because they did not start after the previous one (clock anomalies).
    pub merged: u64,
    /// Detour time inside a writer activity window widened by `SELF_SLACK_NS` on each side, ns:
    /// an upper bound of the noise the collector caused on this CPU.
    pub self_overlap_ns: u64,
    decoder: Decoder,
    last_start: Option<u64>,
    last_end: u64,
}

impl StreamState {
    /// The undisturbed FTQ work count per quantum in use (FTQ mode).
    pub(crate) fn ftq_full(&self) -> Option<u64> {
        match &self.decoder {
            Decoder::Ftq(c) => Some(c.full()),
            Decoder::Detours => None,
        }
    }
}

/// Everything the writer needs; run with `Writer::run` on its own thread.
#[derive(Debug)]
pub struct Writer {
    trace: TraceWriter<ChunkFile>,
    rings: Vec<RingConsumer>,
    /// Per-stream state, in stream order.
    pub streams: Vec<StreamState>,
    buf: Vec<Detour>,
    ticks: Vec<[u64; 2]>,
    clock: Clock,
    origin: u64,
    /// Writer activity windows (at most `MAX_SELF_WINDOWS`).
    pub windows: Vec<Window>,
    /// Windows not kept because of the cap.
    pub windows_dropped: u64,
    recent: [Window; 3],
    csv: Option<csv::Writer<File>>,
    /// Detours written so far.
    pub total: u64,
    max_detours: Option<u64>,
    stop: Arc<AtomicBool>,
    progress: Option<Arc<dyn Progress>>,
    observe_ns: u64,
}

/// Settings of a writer.
#[derive(Debug)]
pub struct WriterSetup {
    /// The open trace (header written).
    pub trace: TraceWriter<ChunkFile>,
    /// One ring per stream.
    pub rings: Vec<RingConsumer>,
    /// CPU and decoder per stream.
    pub streams: Vec<(u32, Decoder)>,
    /// Counter-to-ns conversion.
    pub clock: Clock,
    /// Counter value of time 0.
    pub origin: u64,
    /// Where to write the FTQ series, if any.
    pub csv: Option<File>,
    /// Stop after this many detours in all.
    pub max_detours: Option<u64>,
    /// Set to stop the collection.
    pub stop: Arc<AtomicBool>,
    /// Where the collection reports how far it is, if anywhere.
    pub progress: Option<Arc<dyn Progress>>,
}

impl Writer {
    /// A writer over an open trace.
    pub fn new(s: WriterSetup) -> Result<Self> {
        let cap = s
            .rings
            .iter()
            .map(RingConsumer::capacity)
            .max()
            .unwrap_or(0);
        let mut csv = s.csv.map(|f| {
            csv::WriterBuilder::new()
                .has_headers(false)
                .buffer_capacity(1 << 16)
                .from_writer(f)
        });
        if let Some(w) = csv.as_mut() {
            w.write_record(FTQ_HEADER)
                .context("cannot write the FTQ series")?;
        }
        Ok(Writer {
            trace: s.trace,
            rings: s.rings,
            streams: s
                .streams
                .into_iter()
                .map(|(cpu, decoder)| StreamState {
                    cpu,
                    stats: DetourHistogram::new(),
                    merged: 0,
                    self_overlap_ns: 0,
                    decoder,
                    last_start: None,
                    last_end: 0,
                })
                .collect(),
            buf: Vec::with_capacity(cap),
            ticks: Vec::with_capacity(cap),
            clock: s.clock,
            origin: s.origin,
            windows: Vec::new(),
            windows_dropped: 0,
            recent: [Window::default(); 3],
            csv,
            total: 0,
            max_detours: s.max_detours,
            stop: s.stop,
            progress: s.progress,
            observe_ns: 0,
        })
    }

    fn now_ns(&self) -> u64 {
        self.clock
            .ticks_to_ns(read_counter().saturating_sub(self.origin))
    }

    /// Drains every `period` (or only when woken, with `None`) until `done` is set and the
    /// thread is unparked; then drains what is left.
    pub fn run(&mut self, period: Option<Duration>, done: &AtomicBool) -> Result<()> {
        let period_ns = period.map(|p| p.as_nanos() as u64);
        let mut next = period_ns.map(|p| self.now_ns() + p);
        loop {
            // Sleep until the next drain time (park may wake early or spuriously) or the end.
            while !done.load(Ordering::Acquire) {
                match next {
                    Some(t) => {
                        let now = self.now_ns();
                        if now >= t {
                            break;
                        }
                        std::thread::park_timeout(Duration::from_nanos(t - now));
                    }
                    None => std::thread::park(),
                }
            }
            let finished = done.load(Ordering::Acquire);
            if let Err(e) = self.drain_once() {
                self.stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
            if finished {
                return Ok(());
            }
            if let (Some(t), Some(p)) = (next.as_mut(), period_ns) {
                // Keep to the grid; after a late wake-up skip the missed slots.
                *t += p;
                let now = self.now_ns();
                if *t <= now {
                    *t = now + p - (now - *t) % p;
                }
            }
        }
    }

    /// Drains all rings once, writes and flushes, and records the activity window.
    pub(crate) fn drain_once(&mut self) -> Result<()> {
        let start = self.now_ns();
        for i in 0..self.rings.len() {
            self.drain_stream(i)?;
        }
        self.trace.flush().context("cannot write the trace")?;
        if let Some(w) = self.csv.as_mut() {
            w.flush().context("cannot write the FTQ series")?;
        }
        if let (Some(max), false) = (self.max_detours, self.stop.load(Ordering::Relaxed)) {
            if self.total >= max {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
        self.observe_ns = self.now_ns();
        if let Some(p) = &self.progress {
            let sum: u64 = self.streams.iter().map(|s| s.stats.sum_ns).sum();
            let span = (self.observe_ns as f64) * self.streams.len().max(1) as f64;
            p.observed(
                self.observe_ns,
                self.total,
                100.0 * sum as f64 / span.max(1.0),
            );
        }
        let end = self.now_ns();
        let window = Window {
            start_ns: start,
            end_ns: end.max(start),
        };
        self.recent.rotate_right(1);
        self.recent[0] = window;
        if self.windows.len() < MAX_SELF_WINDOWS {
            self.windows.push(window);
        } else {
            self.windows_dropped += 1;
        }
        Ok(())
    }

    /// Drains ring `i` into the trace.
    fn drain_stream(&mut self, i: usize) -> Result<()> {
        self.ticks.clear();
        let ticks = &mut self.ticks;
        self.rings[i].drain(|e| ticks.push(e));
        self.buf.clear();
        let (clock, origin) = (self.clock, self.origin);
        let st = &mut self.streams[i];
        let buf = &mut self.buf;
        let mut add = |st_last: &mut (Option<u64>, u64, u64), a: u64, b: u64| {
            let s = clock.ticks_to_ns(a.saturating_sub(origin));
            let e = clock.ticks_to_ns(b.saturating_sub(origin));
            let (last_start, last_end, merged) = st_last;
            let s = s.max(*last_end);
            if e <= s || last_start.is_some_and(|p| s <= p) {
                *merged += 1;
                return;
            }
            buf.push(Detour {
                start_ns: s,
                run_ns: e - s,
            });
            *last_start = Some(s);
            *last_end = e;
        };
        let mut pos = (st.last_start, st.last_end, st.merged);
        match &mut st.decoder {
            Decoder::Detours => {
                for &[a, b] in ticks.iter() {
                    add(&mut pos, a, b);
                }
            }
            Decoder::Ftq(conv) => {
                for &[start, count] in ticks.iter() {
                    if let Some(w) = self.csv.as_mut() {
                        let q = conv.quantum_end(start);
                        w.serialize(FtqRow {
                            cpu: st.cpu,
                            start_ns: clock.ticks_to_ns(start.saturating_sub(origin)),
                            end_ns: clock.ticks_to_ns(q.saturating_sub(origin)),
                            count,
                        })
                        .context("cannot write the FTQ series")?;
                    }
                    conv.push(start, count, &mut |a, b| add(&mut pos, a, b));
                }
            }
        }
        (st.last_start, st.last_end, st.merged) = pos;
        for d in buf.iter() {
            st.stats.record(d.run_ns);
            // Only the part of the detour that coincides with a window (± slack) is counted.
            for w in self.recent.iter().filter(|w| w.end_ns > 0) {
                let a = d.start_ns.max(w.start_ns.saturating_sub(SELF_SLACK_NS));
                let b = d.end_ns().min(w.end_ns + SELF_SLACK_NS);
                st.self_overlap_ns += b.saturating_sub(a);
            }
        }
        self.total += buf.len() as u64;
        self.trace
            .append(i, buf)
            .context("cannot append detours to the trace")?;
        Ok(())
    }

    /// Emits the FTQ converters' last pending detours (after the final drain).
    pub(crate) fn finish_streams(&mut self) -> Result<()> {
        for i in 0..self.streams.len() {
            let (clock, origin) = (self.clock, self.origin);
            let st = &mut self.streams[i];
            let Decoder::Ftq(conv) = &mut st.decoder else {
                continue;
            };
            let mut ends = Vec::new();
            conv.finish(&mut |a, b| ends.push((a, b)));
            let mut out = Vec::new();
            for (a, b) in ends {
                let s = clock.ticks_to_ns(a.saturating_sub(origin)).max(st.last_end);
                let e = clock.ticks_to_ns(b.saturating_sub(origin));
                if e > s && st.last_start.is_none_or(|p| s > p) {
                    out.push(Detour {
                        start_ns: s,
                        run_ns: e - s,
                    });
                    st.stats.record(e - s);
                    st.last_start = Some(s);
                    st.last_end = e;
                }
            }
            self.total += out.len() as u64;
            self.trace
                .append(i, &out)
                .context("cannot append detours to the trace")?;
        }
        Ok(())
    }

    /// Where the collection reports how far it is, if anywhere.
    pub fn progress(&self) -> Option<Arc<dyn Progress>> {
        self.progress.clone()
    }

    /// End of the last detour written for stream `i`, ns.
    pub fn last_end_ns(&self, i: usize) -> u64 {
        self.streams[i].last_end
    }

    /// Writes the end chunk and closes the trace; returns the bytes on disk.
    pub fn finish(self, epilogue: jitter_trace::Epilogue) -> Result<u64> {
        let sink = self
            .trace
            .finish(epilogue)
            .context("cannot write the end chunk")?;
        Ok(sink.committed())
    }

    /// Writes the magic and `header` to `file` and puts them on disk.
    pub fn open(file: File, header: &Header) -> Result<TraceWriter<ChunkFile>> {
        let mut w = TraceWriter::new(ChunkFile::new(file), header)
            .context("cannot write the trace header")?;
        w.flush().context("cannot write the trace header")?;
        Ok(w)
    }
}
