//! The `.jtr` file format: a checksummed header, then self-delimiting checksummed chunks.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! file   := MAGIC(8) version(u16) header_len(u32) header_crc(u32) header(MessagePack)  chunk*
//! chunk  := kind(u8) payload_len(u32) crc32(kind ‖ payload)(u32) payload
//! kind 1 := records of one stream: MessagePack [stream, base_ns, count, bin]; `bin` holds, per
//!           detour, LEB128 varints of (start − previous end, run), the first relative to base_ns
//! kind 2 := end chunk: MessagePack `Epilogue` (stream windows, totals, notes)
//! ```
//!
//! Every chunk decodes on its own, so a reader keeps every chunk before the first damaged one.
//! Sleep-times are not stored: they follow from the next start (or the stream's window end).
//!
//! Loading a trace from these chunks (whole, some streams, or in one pass) is
//! [`crate::load`]'s.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::TraceError;
use crate::model::{Detour, Header, Record, Trace, Window};

/// The eight bytes every `.jtr` file begins with.
pub const MAGIC: [u8; 8] = crate::sniff::JTR_MAGIC;
/// The format version this build writes and reads.
pub(crate) const FORMAT_VERSION: u16 = 1;
/// Largest header accepted, bytes.
pub(crate) const MAX_HEADER_BYTES: u32 = 1 << 20;
/// Largest chunk payload accepted, bytes.
pub(crate) const MAX_CHUNK_BYTES: u32 = 8 << 20;
/// Most detours the writer puts in one chunk.
pub(crate) const MAX_CHUNK_RECORDS: usize = 1 << 18;
/// Reading a file of `n` bytes makes no single allocation larger than
/// `READ_ALLOC_PER_BYTE · n + READ_ALLOC_FIXED` bytes: a detour takes at least 2 bytes of the
/// file, 16 in its chunk's vector and 24 as a `Record` (both allocated exactly, for the count a
/// chunk holds, at most half its bytes); buffers grow with the bytes read, never with a length
/// the file claims.
pub const READ_ALLOC_PER_BYTE: usize = 16;
/// The fixed part of the reader's allocation bound: the 64 KiB read buffer of `read_trace`, and
/// at most 1 MiB that serde preallocates for a sequence whose length MessagePack announces.
pub const READ_ALLOC_FIXED: usize = (1 << 20) + (1 << 16);

const KIND_RECORDS: u8 = 1;
const KIND_END: u8 = 2;

/// Per-stream facts written in the end chunk.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Start of the stream's observation window, ns.
    pub begin_ns: u64,
    /// End of the stream's observation window, ns.
    pub end_ns: u64,
    /// Records written for the stream.
    pub records: u64,
    /// Named counters (e.g. `lost_detours`, `lost_ns`, `invol_ctx`).
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
}

/// The end chunk: what is only known once the collection is over.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Epilogue {
    /// Duration of the collection, ns.
    pub duration_ns: u64,
    /// One summary per stream, in stream order.
    pub streams: Vec<StreamSummary>,
    /// Windows during which the collector itself was active.
    #[serde(default)]
    pub self_windows: Vec<Window>,
    /// Free-form notes (e.g. IRQ count deltas).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

impl Epilogue {
    /// The end chunk that describes a whole trace held in memory.
    pub fn of(trace: &Trace) -> Epilogue {
        Epilogue {
            duration_ns: trace.header.duration_ns,
            streams: trace
                .streams
                .iter()
                .map(|s| StreamSummary {
                    begin_ns: s.begin_ns,
                    end_ns: s.end_ns,
                    records: s.records.len() as u64,
                    counters: s.counters.clone(),
                })
                .collect(),
            self_windows: trace.self_windows.clone(),
            notes: trace.notes.clone(),
        }
    }
}

/// One decoded chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// Detours of one stream, in order.
    Records {
        /// Stream index.
        stream: u32,
        /// The detours.
        detours: Vec<Detour>,
    },
    /// The end chunk.
    End(Epilogue),
}

/// Whether a trace file was read to its end chunk.
#[derive(Debug)]
pub enum Completeness {
    /// The end chunk was read and its totals match.
    Complete,
    /// The file ends without an end chunk (the writer was killed); every complete chunk was kept.
    Truncated {
        /// Records recovered.
        records: u64,
    },
    /// A chunk is damaged; every chunk before it was kept.
    Damaged {
        /// Records recovered before the damage.
        records: u64,
        /// What is wrong, naming the chunk.
        error: TraceError,
    },
}

impl Completeness {
    /// One line for the user, or `None` when the file is complete.
    pub fn warning(&self) -> Option<String> {
        match self {
            Completeness::Complete => None,
            Completeness::Truncated { records } => Some(format!(
                "trace is truncated after {records} records (no end chunk)"
            )),
            Completeness::Damaged { records, error } => {
                let error = crate::error::chain_line(error);
                Some(format!("{error}; kept the {records} records before it"))
            }
        }
    }
}

/// Streaming writer: a header, then chunks appended and flushed as they come.
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    out: W,
    last_end: Vec<u64>,
    last_start: Vec<Option<u64>>,
    counts: Vec<u64>,
    payload: Vec<u8>,
    bin: Vec<u8>,
}

impl TraceWriter<BufWriter<File>> {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: &Path, header: &Header) -> Result<Self, TraceError> {
        let f = File::create(path)
            .map_err(|e| TraceError::io(format!("cannot create {}", path.display()), e))?;
        TraceWriter::new(BufWriter::with_capacity(1 << 16, f), header)
    }
}

impl<W: Write> TraceWriter<W> {
    /// Writes the magic, version and header to `out`.
    pub fn new(mut out: W, header: &Header) -> Result<Self, TraceError> {
        let mut header = header.clone();
        header.format_version = FORMAT_VERSION;
        let bytes = rmp_serde::to_vec_named(&header)
            .map_err(|e| TraceError::Header(format!("cannot encode header: {e}")))?;
        if bytes.len() > MAX_HEADER_BYTES as usize {
            return Err(TraceError::Header(format!(
                "header is {} bytes, over the limit",
                bytes.len()
            )));
        }
        let io = |e| TraceError::io("cannot write trace header", e);
        out.write_all(&MAGIC).map_err(io)?;
        out.write_all(&FORMAT_VERSION.to_le_bytes()).map_err(io)?;
        out.write_all(&(bytes.len() as u32).to_le_bytes())
            .map_err(io)?;
        out.write_all(&crc32fast::hash(&bytes).to_le_bytes())
            .map_err(io)?;
        out.write_all(&bytes).map_err(io)?;
        let n = header.stream_cpus.len();
        Ok(TraceWriter {
            out,
            last_end: vec![0; n],
            last_start: vec![None; n],
            counts: vec![0; n],
            payload: Vec::new(),
            bin: Vec::new(),
        })
    }

    /// Appends detours of `stream` as one or more chunks; they must start after the stream's last end.
    pub fn append(&mut self, stream: usize, detours: &[Detour]) -> Result<(), TraceError> {
        if stream >= self.last_end.len() {
            return Err(TraceError::Argument(format!(
                "stream {stream} does not exist (the header names {})",
                self.last_end.len()
            )));
        }
        for part in detours.chunks(MAX_CHUNK_RECORDS) {
            self.append_chunk(stream, part)?;
        }
        Ok(())
    }

    fn append_chunk(&mut self, stream: usize, detours: &[Detour]) -> Result<(), TraceError> {
        if detours.is_empty() {
            return Ok(());
        }
        let base = self.last_end[stream];
        let mut prev_end = base;
        self.bin.clear();
        let mut prev_start = self.last_start[stream];
        for (i, d) in detours.iter().enumerate() {
            let gap = d
                .start_ns
                .checked_sub(prev_end)
                .filter(|_| prev_start.is_none_or(|p| d.start_ns > p));
            let Some(gap) = gap else {
                return Err(TraceError::Invalid {
                    stream,
                    index: self.counts[stream] as usize + i,
                    reason: format!(
                        "starts at {} ns, not after the previous detour (ends at {prev_end} ns)",
                        d.start_ns
                    ),
                });
            };
            prev_start = Some(d.start_ns);
            put_varint(&mut self.bin, gap);
            put_varint(&mut self.bin, d.run_ns);
            prev_end = d
                .start_ns
                .checked_add(d.run_ns)
                .ok_or_else(|| TraceError::Invalid {
                    stream,
                    index: self.counts[stream] as usize + i,
                    reason: "start + run overflows".into(),
                })?;
        }
        self.payload.clear();
        self.payload.push(KIND_RECORDS);
        let enc = |e: rmp::encode::ValueWriteError| {
            TraceError::Header(format!("cannot encode chunk: {e}"))
        };
        rmp::encode::write_array_len(&mut self.payload, 4).map_err(enc)?;
        rmp::encode::write_uint(&mut self.payload, stream as u64).map_err(enc)?;
        rmp::encode::write_uint(&mut self.payload, base).map_err(enc)?;
        rmp::encode::write_uint(&mut self.payload, detours.len() as u64).map_err(enc)?;
        rmp::encode::write_bin(&mut self.payload, &self.bin).map_err(enc)?;
        write_chunk(&mut self.out, &self.payload)?;
        self.last_end[stream] = prev_end;
        self.last_start[stream] = prev_start;
        self.counts[stream] += detours.len() as u64;
        Ok(())
    }

    /// Records written so far for each stream.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Pushes buffered bytes to the file (complete chunks become durable for readers).
    pub fn flush(&mut self) -> Result<(), TraceError> {
        self.out
            .flush()
            .map_err(|e| TraceError::io("cannot flush trace", e))
    }

    /// Writes the end chunk (record totals are filled in here) and returns the sink.
    pub fn finish(mut self, mut epilogue: Epilogue) -> Result<W, TraceError> {
        if epilogue.streams.len() != self.counts.len() {
            return Err(TraceError::Argument(format!(
                "end chunk describes {} streams, the header names {}",
                epilogue.streams.len(),
                self.counts.len()
            )));
        }
        for (i, s) in epilogue.streams.iter_mut().enumerate() {
            s.records = self.counts[i];
            if s.end_ns < self.last_end[i] {
                s.end_ns = self.last_end[i];
            }
        }
        self.payload.clear();
        self.payload.push(KIND_END);
        rmp_serde::encode::write_named(&mut self.payload, &epilogue)
            .map_err(|e| TraceError::Header(format!("cannot encode end chunk: {e}")))?;
        write_chunk(&mut self.out, &self.payload)?;
        self.flush()?;
        Ok(self.out)
    }
}

/// Recomputes the header's and every chunk's checksum of a `.jtr` byte image in place, as far
/// as its lengths can be followed; for fuzzing and damage tests that edit bytes on purpose.
pub fn reseal_checksums(bytes: &mut [u8]) {
    // Layout: magic (8), version (2), header length (4), header CRC (4), header; then chunks
    // of kind (1), payload length (4), CRC over kind and payload (4), payload.
    if bytes.len() < 18 {
        return;
    }
    let hlen = u32::from_le_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]) as usize;
    let Some(hend) = 18usize.checked_add(hlen).filter(|&e| e <= bytes.len()) else {
        return;
    };
    let crc = crc32fast::hash(&bytes[18..hend]);
    bytes[14..18].copy_from_slice(&crc.to_le_bytes());
    let mut at = hend;
    while at + 9 <= bytes.len() {
        let b = &bytes[at + 1..at + 5];
        let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let Some(end) = (at + 9).checked_add(len).filter(|&e| e <= bytes.len()) else {
            return;
        };
        let mut h = crc32fast::Hasher::new();
        h.update(&bytes[at..at + 1]);
        h.update(&bytes[at + 9..end]);
        bytes[at + 5..at + 9].copy_from_slice(&h.finalize().to_le_bytes());
        at = end;
    }
}

fn write_chunk<W: Write>(out: &mut W, kind_and_payload: &[u8]) -> Result<(), TraceError> {
    let payload_len = (kind_and_payload.len() - 1) as u32;
    let io = |e| TraceError::io("cannot write trace chunk", e);
    out.write_all(&kind_and_payload[..1]).map_err(io)?;
    out.write_all(&payload_len.to_le_bytes()).map_err(io)?;
    out.write_all(&crc32fast::hash(kind_and_payload).to_le_bytes())
        .map_err(io)?;
    out.write_all(&kind_and_payload[1..]).map_err(io)?;
    Ok(())
}

#[inline]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    // One or two bytes (values below 16384 ns: most gaps and run-times) without the loop.
    if let Some(&[b0, b1]) = buf.get(*pos..*pos + 2) {
        if b0 < 0x80 {
            *pos += 1;
            return Some(u64::from(b0));
        }
        if b1 < 0x80 {
            *pos += 2;
            return Some(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
        }
    }
    get_varint_long(buf, pos)
}

/// [`get_varint`] of any length, byte by byte.
fn get_varint_long(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Streaming reader: the header first, then one chunk at a time in constant memory.
#[derive(Debug)]
pub struct TraceReader<R: Read> {
    input: R,
    header: Header,
    chunk_index: u64,
    offset: u64,
    buf: Vec<u8>,
    finished: bool,
}

/// Opens the trace `path` for reading through a 64 KiB buffer; a file that does not begin
/// with the `.jtr` magic is refused naming what it is instead (`sniff`), from the
/// bytes buffered (nothing is read twice: a pipe works).
pub(crate) fn open(path: &Path) -> Result<BufReader<File>, TraceError> {
    use std::io::BufRead;
    let shown = path.display();
    let f = File::open(path).map_err(|e| TraceError::io(format!("cannot open {shown}"), e))?;
    let mut r = BufReader::with_capacity(1 << 16, f);
    let head = r
        .fill_buf()
        .map_err(|e| TraceError::io(format!("cannot read {shown}"), e))?;
    let magic = &MAGIC;
    if !head.is_empty() && !head.starts_with(&magic[..head.len().min(magic.len())]) {
        return Err(crate::sniff::not_a_trace(path, head));
    }
    Ok(r)
}

impl TraceReader<BufReader<File>> {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        TraceReader::new(open(path)?)
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the magic, version and header from `input`.
    pub fn new(mut input: R) -> Result<Self, TraceError> {
        let mut fixed = [0u8; 18];
        match read_full(&mut input, &mut fixed) {
            Ok(n) if n >= 8 && fixed[..8] != MAGIC => return Err(TraceError::BadMagic),
            Ok(0) => return Err(TraceError::Header("the file is empty".into())),
            Ok(n) if n < 8 => return Err(TraceError::BadMagic),
            Ok(n) if n < 18 => {
                return Err(TraceError::Header("the file ends inside the header".into()))
            }
            Ok(_) => {}
            Err(e) => return Err(TraceError::io("cannot read trace header", e)),
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if version != FORMAT_VERSION {
            return Err(TraceError::Version {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let len = u32::from_le_bytes(fixed[10..14].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(fixed[14..18].try_into().expect("4 bytes"));
        if len > MAX_HEADER_BYTES {
            return Err(TraceError::Header(format!(
                "header length {len} is over the {MAX_HEADER_BYTES}-byte limit"
            )));
        }
        let mut bytes = Vec::new();
        let n = read_up_to(&mut input, &mut bytes, len)
            .map_err(|e| TraceError::io("cannot read trace header", e))?;
        if n < len as usize {
            return Err(TraceError::Header("the file ends inside the header".into()));
        }
        if crc32fast::hash(&bytes) != crc {
            return Err(TraceError::Header("header checksum mismatch".into()));
        }
        let header: Header = rmp_serde::from_slice(&bytes)
            .map_err(|e| TraceError::Header(format!("cannot decode header: {e}")))?;
        Ok(TraceReader {
            input,
            header,
            chunk_index: 0,
            offset: 18 + u64::from(len),
            buf: Vec::new(),
            finished: false,
        })
    }

    /// The trace header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Reads the next chunk; `Ok(None)` at a clean end of file (with or without an end chunk).
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, TraceError> {
        let Some(c) = self.next_sealed()? else {
            return Ok(None);
        };
        let out = self.open_sealed(&c);
        // The buffer serves the next chunk: reading streams in constant memory.
        self.buf = c.bytes;
        out.map(Some)
    }

    /// Reads the next chunk's bytes and checks its checksum, without decoding them.
    pub(crate) fn next_sealed(&mut self) -> Result<Option<Sealed>, TraceError> {
        if self.finished {
            return Ok(None);
        }
        let at = self.offset;
        let idx = self.chunk_index;
        let damaged = |reason: String| TraceError::Chunk {
            chunk: idx,
            offset: at,
            reason,
        };
        let mut head = [0u8; 9];
        let n = read_full(&mut self.input, &mut head)
            .map_err(|e| TraceError::io("cannot read trace", e))?;
        if n == 0 {
            self.finished = true;
            return Ok(None);
        }
        if n < head.len() {
            self.finished = true;
            return Err(damaged("the file ends inside the chunk header".into()));
        }
        let kind = head[0];
        let len = u32::from_le_bytes(head[1..5].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(head[5..9].try_into().expect("4 bytes"));
        if len > MAX_CHUNK_BYTES {
            self.finished = true;
            return Err(damaged(format!(
                "length {len} is over the {MAX_CHUNK_BYTES}-byte limit"
            )));
        }
        let mut bytes = std::mem::take(&mut self.buf);
        bytes.clear();
        bytes.push(kind);
        let n = read_up_to(&mut self.input, &mut bytes, len)
            .map_err(|e| TraceError::io("cannot read trace", e))?;
        if n < len as usize {
            self.finished = true;
            return Err(damaged(format!(
                "the file ends inside the chunk ({n} of {len} bytes)"
            )));
        }
        if crc32fast::hash(&bytes) != crc {
            self.finished = true;
            return Err(damaged("checksum mismatch".into()));
        }
        self.offset += 9 + u64::from(len);
        self.chunk_index += 1;
        if kind != KIND_RECORDS {
            // Nothing follows an end chunk (or one of an unknown kind, which is damage).
            self.finished = true;
        }
        Ok(Some(Sealed {
            index: idx,
            offset: at,
            bytes,
        }))
    }

    /// Decodes a chunk [`TraceReader::next_sealed`] read; a damaged one ends the reading.
    fn open_sealed(&mut self, c: &Sealed) -> Result<Chunk, TraceError> {
        let out = c.open(self.header.stream_cpus.len());
        if out.is_err() {
            self.finished = true;
        }
        out
    }
}

/// A chunk's bytes (its kind first), read and checksummed but not decoded, with where it
/// sits in the file.
#[derive(Debug)]
pub(crate) struct Sealed {
    pub(crate) index: u64,
    offset: u64,
    bytes: Vec<u8>,
}

impl Sealed {
    /// The stream of a records chunk, read from its first fields without decoding its
    /// detours; `None` for another kind of chunk or one whose fields do not read.
    pub(crate) fn stream(&self) -> Option<u32> {
        if self.bytes.first() != Some(&KIND_RECORDS) {
            return None;
        }
        let mut rd = &self.bytes[1..];
        let n = rmp::decode::read_array_len(&mut rd).ok()?;
        (n == 4).then_some(())?;
        rmp::decode::read_int(&mut rd).ok()
    }

    /// Decodes the chunk of a trace of `streams` streams.
    pub(crate) fn open(&self, streams: usize) -> Result<Chunk, TraceError> {
        let damaged = |reason: String| TraceError::Chunk {
            chunk: self.index,
            offset: self.offset,
            reason,
        };
        match self.bytes[0] {
            KIND_RECORDS => decode_records(&self.bytes[1..], streams).map_err(damaged),
            KIND_END => {
                let e: Epilogue = rmp_serde::from_slice(&self.bytes[1..])
                    .map_err(|e| damaged(format!("cannot decode end chunk: {e}")))?;
                Ok(Chunk::End(e))
            }
            other => Err(damaged(format!("unknown chunk kind {other}"))),
        }
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<Chunk, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_chunk().transpose()
    }
}

fn decode_records(p: &[u8], streams: usize) -> Result<Chunk, String> {
    let mut rd = p;
    let err = |e: &dyn std::fmt::Display| format!("cannot decode records: {e}");
    let n = rmp::decode::read_array_len(&mut rd).map_err(|e| err(&e))?;
    if n != 4 {
        return Err(format!("records chunk has {n} fields, expected 4"));
    }
    let stream: u32 = rmp::decode::read_int(&mut rd).map_err(|e| err(&e))?;
    let base: u64 = rmp::decode::read_int(&mut rd).map_err(|e| err(&e))?;
    let count: u64 = rmp::decode::read_int(&mut rd).map_err(|e| err(&e))?;
    let bin_len = rmp::decode::read_bin_len(&mut rd).map_err(|e| err(&e))? as usize;
    if stream as usize >= streams {
        return Err(format!(
            "stream {stream} does not exist (the header names {streams})"
        ));
    }
    if bin_len != rd.len() {
        return Err(format!(
            "record data is {} bytes, the chunk says {bin_len}",
            rd.len()
        ));
    }
    if count > MAX_CHUNK_RECORDS as u64 || count > (bin_len / 2) as u64 {
        return Err(format!("record count {count} does not fit the chunk"));
    }
    let mut detours = crate::memory::large_vec(count as usize);
    let mut pos = 0usize;
    let mut prev_end = base;
    let mut prev_start = None;
    for i in 0..count {
        let bad = || format!("record {i} of {count} is cut short or overflows");
        let gap = get_varint(rd, &mut pos).ok_or_else(bad)?;
        let run = get_varint(rd, &mut pos).ok_or_else(bad)?;
        let start = prev_end.checked_add(gap).ok_or_else(bad)?;
        if prev_start == Some(start) {
            return Err(format!(
                "record {i} starts at the same time as the one before"
            ));
        }
        prev_start = Some(start);
        prev_end = start.checked_add(run).ok_or_else(bad)?;
        detours.push(Detour {
            start_ns: start,
            run_ns: run,
        });
    }
    if pos != rd.len() {
        return Err(format!(
            "{} bytes left after {count} records",
            rd.len() - pos
        ));
    }
    Ok(Chunk::Records { stream, detours })
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Appends at most `len` bytes of `r` to `buf`, growing it with the bytes that are there (not
/// with the length a damaged file claims: at most twice what was read); returns how many.
/// (`read_to_end` retries reads interrupted by a signal.)
fn read_up_to<R: Read>(r: &mut R, buf: &mut Vec<u8>, len: u32) -> io::Result<usize> {
    r.by_ref().take(u64::from(len)).read_to_end(buf)
}

/// Writes a whole trace to `out`.
pub fn write_to<W: Write>(out: W, trace: &Trace) -> Result<W, TraceError> {
    trace.validate()?;
    let mut w = TraceWriter::new(out, &trace.header)?;
    let mut buf: Vec<Detour> = Vec::new();
    for (i, s) in trace.streams.iter().enumerate() {
        buf.clear();
        buf.extend(s.records.iter().map(Record::detour));
        w.append(i, &buf)?;
    }
    w.finish(Epilogue::of(trace))
}

/// Writes a whole trace to `path` with [`crate::output::write_output`] (a new or regular file
/// is replaced whole through a temporary file; a device is written through).
pub fn write_trace(path: &Path, trace: &Trace) -> Result<(), TraceError> {
    trace.validate()?;
    crate::output::write_output(path, |w| write_to(w, trace).map(|_| ()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length of varint, alone and at the very end of a buffer (where the two-byte read
    /// has one byte left), reads back as written, and leaves the position after it.
    #[test]
    fn varints_of_every_length_read_back_at_the_end_of_the_buffer_too() {
        let mut values = vec![0, 1, 127, 128, 255, 16_383, 16_384, 2_097_151, 2_097_152];
        values.extend(
            (7..64)
                .step_by(7)
                .flat_map(|b| [(1u64 << b) - 1, 1u64 << b]),
        );
        values.extend([u64::MAX - 1, u64::MAX]);
        for &v in &values {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut pos = 0;
            assert_eq!(get_varint(&buf, &mut pos), Some(v), "{v}");
            assert_eq!(pos, buf.len(), "{v}");
            // After another value, and followed by one.
            let mut two = vec![0x05];
            put_varint(&mut two, v);
            two.push(0x7f);
            let mut pos = 1;
            assert_eq!(get_varint(&two, &mut pos), Some(v), "{v}");
            assert_eq!(pos, two.len() - 1, "{v}");
            // Cut short by a byte: no value.
            let mut pos = 0;
            assert_eq!(get_varint(&buf[..buf.len() - 1], &mut pos), None, "{v}");
        }
    }

    /// Encodings longer than 64 bits are refused, not wrapped.
    #[test]
    fn varints_over_64_bits_are_refused() {
        let mut pos = 0;
        assert_eq!(
            get_varint(
                &[0xff; 9].iter().chain(&[0x02]).copied().collect::<Vec<_>>(),
                &mut pos
            ),
            None
        );
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80; 11], &mut pos), None);
        let mut pos = 0;
        assert_eq!(get_varint(&[], &mut pos), None);
    }
}
