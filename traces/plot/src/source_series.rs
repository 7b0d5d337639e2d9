//! The series the attribution charts draw ([`super::sources`]): the first [`MAX_SOURCES`] − 1
//! sources by total time and, when there are more, the rest pooled as `other`, each a sequence
//! of (detour run-time, the source's time in it) samples in the order the charts add them up.
//! Held in memory ([`InMemory`], from [`SourceSamples`]), or read from a sidecar in two passes
//! into a [`jitter_trace::scratch`] file laid out in that order ([`SpilledSeries`]: 16 bytes per
//! sample on disk; in memory a small buffer per source), so that every sum a chart makes is
//! the same `f64` operations in the same order and the SVG is byte for byte the one drawn from
//! memory, in memory that does not grow with the sidecar's length.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;

use jitter_trace::attribution::{Mode, SourceSamples};
use jitter_trace::error::TraceError;
use jitter_trace::scratch::Scratch;
use jitter_trace::sidecar::AttributedDetour;
use jitter_trace::sidecar_reader::DetourSource;

/// Most sources drawn in the attribution charts; the rest are pooled as `other`.
pub const MAX_SOURCES: usize = 8;

/// What the attribution charts draw: labelled series of (run-time, time of the source) samples.
pub trait SourceSeries {
    /// The series' labels, in drawing order.
    fn labels(&self) -> &[String];
    /// Shows `f` every sample of series `i`, in order.
    fn each(&self, i: usize, f: &mut dyn FnMut(u64, u64)) -> Result<(), TraceError>;
}

/// The label of the series pooling the sources past the first [`MAX_SOURCES`] − 1 of `n`.
fn other_label(n: usize) -> String {
    format!("other ({} sources)", n + 1 - MAX_SOURCES)
}

/// The series of [`SourceSamples`] held in memory.
pub(crate) struct InMemory {
    labels: Vec<String>,
    pub(crate) samples: Vec<Vec<(u64, u64)>>,
}

impl InMemory {
    /// The first [`MAX_SOURCES`] − 1 sources and, when there are more, the rest pooled.
    pub(crate) fn top(sources: &[SourceSamples]) -> InMemory {
        let own = if sources.len() <= MAX_SOURCES {
            sources.len()
        } else {
            MAX_SOURCES - 1
        };
        let mut labels: Vec<String> = sources[..own].iter().map(|s| s.source.clone()).collect();
        let mut samples: Vec<Vec<(u64, u64)>> =
            sources[..own].iter().map(|s| s.samples.clone()).collect();
        if own < sources.len() {
            labels.push(other_label(sources.len()));
            samples.push(
                sources[own..]
                    .iter()
                    .flat_map(|s| s.samples.clone())
                    .collect(),
            );
        }
        InMemory { labels, samples }
    }
}

impl SourceSeries for InMemory {
    fn labels(&self) -> &[String] {
        &self.labels
    }

    fn each(&self, i: usize, f: &mut dyn FnMut(u64, u64)) -> Result<(), TraceError> {
        self.samples[i].iter().for_each(|&(run, ns)| f(run, ns));
        Ok(())
    }
}

/// Bytes of a sample on disk: run-time, time of the source (little-endian u64 each).
const SAMPLE_BYTES: usize = 16;
/// Samples buffered per source before they are written, and read back at a time.
const BUFFER: usize = 512;

/// The charts' series of a sidecar, on disk in drawing order (see the module doc).
#[derive(Debug)]
pub struct SpilledSeries {
    labels: Vec<String>,
    /// Each series' samples: `first..end` in samples of the file.
    ranges: Vec<(u64, u64)>,
    file: Scratch,
}

/// One source while its samples are written: where they go, how many came, the buffer.
struct Slot {
    first: u64,
    count: u64,
    written: u64,
    buf: Vec<u8>,
}

impl SpilledSeries {
    /// The series of the detours of `src` with run-times in `runs` (`None`: all), each
    /// source's time in them as `mode` has it: the samples [`jitter_trace::attribution::samples_of`]
    /// holds, in two passes (totals, then the samples into their places).
    pub fn read(
        src: &dyn DetourSource,
        mode: Mode,
        runs: Option<(u64, u64)>,
    ) -> Result<SpilledSeries, TraceError> {
        let wanted =
            |d: &AttributedDetour| runs.is_none_or(|(lo, hi)| d.run_ns >= lo && d.run_ns < hi);
        let mut by: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        src.pass(&mut |_: usize, _: u32, d: &AttributedDetour| {
            if wanted(d) {
                mode.each(d, &mut |source, _, ns| match by.get_mut(source) {
                    Some(c) => *c = (c.0 + 1, c.1 + ns),
                    None => {
                        by.insert(source.to_string(), (1, ns));
                    }
                });
            }
            Ok(())
        })?;
        // The order of `samples_of`: by total, largest first, then by name.
        let mut order: Vec<(String, u64, u64)> =
            by.into_iter().map(|(s, c)| (s, c.0, c.1)).collect();
        order.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let mut slots: BTreeMap<String, Slot> = BTreeMap::new();
        let mut first = 0u64;
        let mut starts = Vec::with_capacity(order.len());
        for (source, count, _) in &order {
            starts.push(first);
            let buf = Vec::with_capacity(BUFFER * SAMPLE_BYTES);
            let slot = Slot {
                first,
                count: *count,
                written: 0,
                buf,
            };
            slots.insert(source.clone(), slot);
            first += count;
        }
        let file = Scratch::new("to chart")?;
        let changed = || TraceError::Argument("the attribution changed while it was read".into());
        let mut failed = None;
        src.pass(&mut |_: usize, _: u32, d: &AttributedDetour| {
            if wanted(d) {
                mode.each(d, &mut |source, _, ns| {
                    let Some(slot) = slots.get_mut(source) else {
                        failed.get_or_insert_with(changed);
                        return;
                    };
                    slot.buf.extend_from_slice(&d.run_ns.to_le_bytes());
                    slot.buf.extend_from_slice(&ns.to_le_bytes());
                    if slot.buf.len() == BUFFER * SAMPLE_BYTES {
                        if let Err(e) = flush(&file, slot) {
                            failed.get_or_insert(e);
                        }
                    }
                });
            }
            failed.take().map_or(Ok(()), Err)
        })?;
        for slot in slots.values_mut() {
            flush(&file, slot)?;
            if slot.written != slot.count {
                return Err(changed());
            }
        }
        let end = first;
        let own = if order.len() <= MAX_SOURCES {
            order.len()
        } else {
            MAX_SOURCES - 1
        };
        let mut labels: Vec<String> = order[..own].iter().map(|o| o.0.clone()).collect();
        let mut ranges: Vec<(u64, u64)> = (0..own)
            .map(|i| (starts[i], starts.get(i + 1).copied().unwrap_or(end)))
            .collect();
        if own < order.len() {
            labels.push(other_label(order.len()));
            ranges.push((starts[own], end));
        }
        Ok(SpilledSeries {
            labels,
            ranges,
            file,
        })
    }
}

/// Writes a slot's buffered samples to their place in `file`.
fn flush(file: &Scratch, slot: &mut Slot) -> Result<(), TraceError> {
    let n = (slot.buf.len() / SAMPLE_BYTES) as u64;
    if slot.written + n > slot.count {
        return Err(TraceError::Argument(
            "the attribution changed while it was read".into(),
        ));
    }
    let at = (slot.first + slot.written) * SAMPLE_BYTES as u64;
    (file.file().write_all_at(&slot.buf, at))
        .map_err(|e| TraceError::io("cannot write the charts' temporary samples", e))?;
    slot.written += n;
    slot.buf.clear();
    Ok(())
}

impl SourceSeries for SpilledSeries {
    fn labels(&self) -> &[String] {
        &self.labels
    }

    fn each(&self, i: usize, f: &mut dyn FnMut(u64, u64)) -> Result<(), TraceError> {
        let (mut at, end) = self.ranges[i];
        let mut bytes = vec![0u8; BUFFER * SAMPLE_BYTES];
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        while at < end {
            let n = (end - at).min(BUFFER as u64) as usize;
            let chunk = &mut bytes[..n * SAMPLE_BYTES];
            (self
                .file
                .file()
                .read_exact_at(chunk, at * SAMPLE_BYTES as u64))
            .map_err(|e| TraceError::io("cannot read the charts' temporary samples", e))?;
            for s in chunk.chunks_exact(SAMPLE_BYTES) {
                f(word(&s[..8]), word(&s[8..]));
            }
            at += n as u64;
        }
        Ok(())
    }
}
