//! [`crate::filter`] stream by stream: a trace read through a [`StreamSource`] and its sidecar
//! read detour by detour ([`crate::sidecar_reader`]), filtered into a `.jtr` and a sidecar
//! written as they come ([`crate::sidecar_writer`]), in constant memory in the trace's length.
//! The bytes are those of [`crate::filter::filter`] written whole, and so are the errors, in
//! the same order.
//!
//! Passes: one over the sidecar learns its frame and what the filter removes (the header's
//! label needs the sum before the first chunk is written); a check pass reads each stream and
//! its CPU's detours side by side, refusing another trace's attribution before anything is
//! written; the write pass reads them side by side again. The sidecar's detours of a CPU are
//! handed over from a thread that parses the file, through a bounded channel: streams whose
//! CPUs come in the sidecar's order share one parse, another order costs one more.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use crate::error::TraceError;
use crate::filter::{
    filter_one, label, no_entry, other_count, same_detour, threshold_of, SourceFilter, Tally,
};
use crate::model::{Detour, Trace};
use crate::sidecar::{AttributedDetour, UNATTRIBUTED};
use crate::sidecar_reader::{DetourSource, Frame};
use crate::sidecar_writer::SidecarWriter;
use crate::stream_order::{frame_of, RunSink, StreamSource};

/// A sidecar that a thread can read.
pub type SharedSidecar = Arc<dyn DetourSource + Send + Sync>;

/// Detours handed over at a time, from the sidecar's thread and to the trace's writer.
const BATCH: usize = 512;
/// Batches the channel holds.
const BATCHES: usize = 8;

/// A filter of one trace and its sidecar, planned and checked, ready to write.
pub struct FilterPlan<'a> {
    src: &'a dyn StreamSource,
    sidecar: SharedSidecar,
    f: &'a SourceFilter,
    threshold: u64,
    /// The sidecar without its detours.
    side: Frame,
    /// Each stream's CPU entry in the sidecar (the first with its CPU).
    entries: Vec<Option<usize>>,
    /// The filtered trace's frame.
    frame: Trace,
    tally: Tally,
    /// Every source label the attribution names (`unattributed` where time is unexplained).
    labels: BTreeSet<String>,
}

impl std::fmt::Debug for FilterPlan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterPlan")
            .field("entries", &self.entries)
            .field("tally", &self.tally)
            .finish_non_exhaustive()
    }
}

impl<'a> FilterPlan<'a> {
    /// Plans `f` over the trace of `src` and its attribution `sidecar` and checks that the
    /// attribution is the trace's (see the module doc; the errors of [`crate::filter::filter`]).
    pub fn new(
        src: &'a dyn StreamSource,
        sidecar: SharedSidecar,
        f: &'a SourceFilter,
    ) -> Result<Self, TraceError> {
        let plan = Self::planned(src, sidecar, f)?;
        plan.check()?;
        Ok(plan)
    }

    /// [`FilterPlan::new`] before its check: one pass over the sidecar (its errors), for a
    /// caller that checks the sidecar's collection before [`FilterPlan::check`].
    pub fn planned(
        src: &'a dyn StreamSource,
        sidecar: SharedSidecar,
        f: &'a SourceFilter,
    ) -> Result<Self, TraceError> {
        if f.selectors.is_empty() {
            return Err(TraceError::Argument(
                "name at least one source to filter".into(),
            ));
        }
        let threshold = threshold_of(&src.frame().header);
        let mut tallies: Vec<Tally> = Vec::new();
        let mut labels = BTreeSet::new();
        let side = sidecar.pass(&mut |entry: usize, _cpu: u32, d: &AttributedDetour| {
            if tallies.len() <= entry {
                tallies.resize(entry + 1, Tally::default());
            }
            filter_one(f, threshold, d, &mut tallies[entry]);
            for p in &d.parts {
                if !labels.contains(&p.source) {
                    labels.insert(p.source.clone());
                }
            }
            if d.unattributed_ns() > 0 && !labels.contains(UNATTRIBUTED) {
                labels.insert(UNATTRIBUTED.to_string());
            }
            Ok(())
        })?;
        let cpus = &side.attribution.cpus;
        let entries: Vec<Option<usize>> = (src.frame().streams.iter())
            .map(|s| cpus.iter().position(|c| c.cpu == s.cpu))
            .collect();
        let mut tally = Tally::default();
        for e in entries.iter().flatten() {
            tally.add(tallies.get(*e).unwrap_or(&Tally::default()));
        }
        let mut frame = frame_of(src.frame());
        frame.sync_header();
        label(&mut frame.header, f, tally.removed_ns);
        Ok(FilterPlan {
            src,
            sidecar,
            f,
            threshold,
            side,
            entries,
            frame,
            tally,
            labels,
        })
    }

    /// Refuses a filter whose selectors, given by a user with `flag`, name a source the
    /// attribution does not have (`crate::names`): a typo would write the trace unchanged
    /// under a filter's label (`--drop`), or a trace without noise (`--keep`).
    pub fn require_named_sources(&self, flag: &str) -> Result<(), TraceError> {
        let labels: Vec<&String> = self.labels.iter().collect();
        crate::names::each_present(
            flag,
            &self.f.selectors,
            |sel| self.labels.iter().any(|l| sel.matches(l)),
            "source",
            "the trace's attribution",
            &labels,
            "jitter-trace attribution lists each with its share",
        )
    }

    /// The `collection_start_unix_ns` the sidecar names.
    pub fn collection_start_unix_ns(&self) -> u64 {
        self.side.attribution.collection_start_unix_ns
    }

    /// What the filter removes.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// The filtered trace's frame (its header labelled).
    pub fn frame(&self) -> &Trace {
        &self.frame
    }

    /// The filtered trace, read stream by stream (its attribution not written).
    pub fn source(&self) -> impl StreamSource + '_ {
        Filtering {
            plan: self,
            reader: RefCell::new(None),
            side: RefCell::new(None),
        }
    }

    /// Writes the filtered trace to `path` (`.jtr`) and its attribution to `sidecar`, each
    /// with [`crate::output::write_output`] (the trace's file opened first).
    pub fn write_jtr(&self, path: &Path, sidecar: &Path) -> Result<(), TraceError> {
        self.frame.validate()?;
        crate::output::write_output(path, |w| {
            crate::output::write_output(sidecar, |sw| {
                let mut side = SidecarWriter::begin(sw, &self.side.attribution)?;
                let filtering = Filtering {
                    plan: self,
                    reader: RefCell::new(None),
                    side: RefCell::new(Some(&mut side)),
                };
                crate::interop::write_jtr_streams(w, &filtering)?;
                drop(filtering);
                side.finish()
            })
            .map(|_| ())
        })?;
        Ok(())
    }

    /// Writes the filtered trace alone (`.jtr`, its attribution not written) to `out`, e.g. a
    /// temporary file to read back: the bytes [`FilterPlan::write_jtr`] writes to its `path`.
    pub fn write_jtr_to<W: std::io::Write>(&self, out: W) -> Result<W, TraceError> {
        self.frame.validate()?;
        crate::interop::write_jtr_streams(out, &self.source())
    }

    /// Every stream beside its CPU's detours, in order: the counts first, then each detour
    /// (the errors of [`crate::filter::filter`]).
    pub fn check(&self) -> Result<(), TraceError> {
        let mut reader = None;
        for i in 0..self.entries.len() {
            let (cpu, e) = self.entry(i)?;
            let mut records = 0u64;
            self.src.detours(i, &mut |run| {
                records += run.len() as u64;
                Ok(())
            })?;
            if self.side.detours[e] != records {
                return Err(other_count(cpu, self.side.detours[e], records));
            }
            self.zip(i, &mut reader, &mut |_| Ok(()))?;
        }
        Ok(())
    }

    /// The CPU of stream `i` and its entry in the sidecar.
    fn entry(&self, i: usize) -> Result<(u32, usize), TraceError> {
        let cpu = self.frame.streams[i].cpu;
        let e = self.entries[i].ok_or_else(|| no_entry(cpu, i))?;
        Ok((cpu, e))
    }

    /// Shows `visit` each detour of stream `i` as its CPU's entry has it, after checking that
    /// the trace has it the same; `reader` is the sidecar's thread, kept for the next stream.
    fn zip(
        &self,
        i: usize,
        reader: &mut Option<EntryReader>,
        visit: &mut dyn FnMut(&AttributedDetour) -> Result<(), TraceError>,
    ) -> Result<(), TraceError> {
        let (cpu, e) = self.entry(i)?;
        if !(reader.as_ref()).is_some_and(|r| r.streams.start == i && i < r.streams.end) {
            *reader = Some(self.reader_from(i));
        }
        let r = reader.as_mut().expect("set above");
        r.streams.start += 1;
        let mut j = 0usize;
        self.src.detours(i, &mut |run| {
            for t in run {
                let d = r.next(e)?;
                same_detour(cpu, j, t, &d)?;
                visit(&d)?;
                j += 1;
            }
            Ok(())
        })?;
        if self.side.detours[e] != j as u64 {
            return Err(changed());
        }
        Ok(())
    }

    /// A thread reading the detours of the entries of streams `i..` for as long as they come
    /// in the sidecar's order.
    fn reader_from(&self, i: usize) -> EntryReader {
        let mut end = i + 1;
        while end < self.entries.len() {
            match (self.entries[end - 1], self.entries[end]) {
                (Some(a), Some(b)) if b > a => end += 1,
                _ => break,
            }
        }
        let mut wanted = vec![false; self.side.detours.len()];
        for e in self.entries[i..end].iter().flatten() {
            wanted[*e] = true;
        }
        EntryReader::open(Arc::clone(&self.sidecar), wanted, i..end)
    }
}

/// The error of a sidecar whose detours differ between passes.
fn changed() -> TraceError {
    TraceError::Argument("the attribution changed while it was read".into())
}

/// What the sidecar's thread hands over.
enum Batch {
    /// Detours of one entry, in order.
    Detours(usize, Vec<AttributedDetour>),
    /// The pass failed.
    Failed(TraceError),
}

/// The detours of some entries of a sidecar, parsed by a thread of its own (which ends when
/// this is dropped, at its next hand-over).
struct EntryReader {
    rx: Receiver<Batch>,
    entry: usize,
    batch: std::vec::IntoIter<AttributedDetour>,
    /// The streams it serves; `start` is the next one.
    streams: Range<usize>,
}

impl EntryReader {
    fn open(sidecar: SharedSidecar, wanted: Vec<bool>, streams: Range<usize>) -> EntryReader {
        let (tx, rx) = sync_channel(BATCHES);
        std::thread::spawn(move || {
            let mut cur: (usize, Vec<AttributedDetour>) = (0, Vec::with_capacity(BATCH));
            let hung_up = || TraceError::Argument("the filter stopped reading".into());
            let result = sidecar.pass(&mut |entry: usize, _cpu: u32, d: &AttributedDetour| {
                if !wanted.get(entry).copied().unwrap_or(false) {
                    return Ok(());
                }
                if cur.0 != entry || cur.1.len() == BATCH {
                    let full = std::mem::replace(&mut cur.1, Vec::with_capacity(BATCH));
                    if !full.is_empty() {
                        tx.send(Batch::Detours(cur.0, full))
                            .map_err(|_| hung_up())?;
                    }
                    cur.0 = entry;
                }
                cur.1.push(d.clone());
                Ok(())
            });
            let last = match result {
                Ok(_) => Batch::Detours(cur.0, cur.1),
                Err(e) => Batch::Failed(e),
            };
            let _gone = tx.send(last);
        });
        EntryReader {
            rx,
            entry: 0,
            batch: Vec::new().into_iter(),
            streams,
        }
    }

    /// The next detour, which must be of entry `entry`.
    fn next(&mut self, entry: usize) -> Result<AttributedDetour, TraceError> {
        loop {
            if let Some(d) = self.batch.next() {
                return if self.entry == entry {
                    Ok(d)
                } else {
                    Err(changed())
                };
            }
            match self.rx.recv() {
                Ok(Batch::Detours(e, v)) => {
                    self.entry = e;
                    self.batch = v.into_iter();
                }
                Ok(Batch::Failed(e)) => return Err(e),
                Err(_) => return Err(changed()),
            }
        }
    }
}

/// The filtered trace as a [`StreamSource`], its attribution written beside it when `side`
/// is set (each stream read once, in order, as the `.jtr` writer reads them).
struct Filtering<'p, 's, 'w> {
    plan: &'p FilterPlan<'p>,
    reader: RefCell<Option<EntryReader>>,
    side: RefCell<Option<&'s mut SidecarWriter<'w>>>,
}

impl StreamSource for Filtering<'_, '_, '_> {
    fn frame(&self) -> &Trace {
        &self.plan.frame
    }

    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError> {
        let plan = self.plan;
        let (_, e) = plan.entry(stream)?;
        let mut side = self.side.borrow_mut();
        if let Some(s) = side.as_mut() {
            s.cpu(&plan.side.attribution.cpus[e])?;
        }
        let mut run: Vec<Detour> = Vec::with_capacity(BATCH);
        let mut ignored = Tally::default();
        plan.zip(stream, &mut self.reader.borrow_mut(), &mut |d| {
            if let Some(k) = filter_one(plan.f, plan.threshold, d, &mut ignored) {
                if let Some(s) = side.as_mut() {
                    s.detour(&k)?;
                }
                run.push(Detour {
                    start_ns: k.start_ns,
                    run_ns: k.run_ns,
                });
                if run.len() == BATCH {
                    sink(&run)?;
                    run.clear();
                }
            }
            Ok(())
        })?;
        if !run.is_empty() {
            sink(&run)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{filter, Selector};
    use crate::sidecar::{Attribution, CpuAttribution, Part};
    use crate::sidecar_reader::SidecarFile;
    use crate::stream_order::TraceFile;

    /// A synthetic trace of `streams` streams (threshold 150 ns) and its attribution, the
    /// sources of each detour drawn from its start and run-time as `jitter-collect` would
    /// have them: a tick with a softirq on long detours, otherwise an interrupt, a task, an
    /// IPI or nothing, some time unexplained.
    fn attributed(streams: u32, seed: u64) -> (Trace, Attribution) {
        let spec: crate::synth::Spec = "periodic:period=200us,dur=3us+poisson:rate=40000/s,\
                                        dur=exp:600ns"
            .parse()
            .unwrap();
        let mut t = crate::synth::synthesize(&spec, streams, 20_000_000, seed).unwrap();
        t.header.threshold_ns = 150.0;
        t.header.collection_start_unix_ns = 42;
        let cpus = (t.streams.iter())
            .map(|s| CpuAttribution {
                cpu: s.cpu,
                begin_ns: s.begin_ns,
                end_ns: s.end_ns,
                events: 3,
                detours: (s.records.iter())
                    .map(|r| {
                        let (st, run) = (r.start_ns, r.run_ns);
                        let h = (st.wrapping_mul(2_654_435_761) + run * 40_503) % 1000;
                        let p = |source: &str, at: u64, ns: u64| Part {
                            source: source.into(),
                            start_ns: st + at,
                            ns,
                        };
                        let mut parts = Vec::new();
                        if run >= 2_500 {
                            parts.push(p("timer", 0, 1_500));
                            if h < 300 {
                                parts.push(p("softirq:TIMER", 1_500, (run - 1_500) / 2));
                            }
                        } else {
                            if h < 200 {
                                parts.push(p("irq:virtio0", 0, run / 2));
                            }
                            if (150..400).contains(&h) {
                                parts.push(p(&format!("task:kworker/{}:1", s.cpu), 1, run / 3));
                            }
                            if (700..720).contains(&h) {
                                parts.push(p("ipi:reschedule", 0, run / 4));
                            }
                        }
                        crate::filter::attributed(st, run, parts)
                    })
                    .collect(),
                ..CpuAttribution::default()
            })
            .collect();
        let a = Attribution {
            version: 1,
            collection_start_unix_ns: 42,
            trace_clock: "x86-tsc".into(),
            events: vec!["irq:irq_handler_entry".into()],
            cpus,
            notes: [("hypervisor".to_string(), "kvm".to_string())].into(),
        };
        (t, a)
    }

    fn filters() -> Vec<SourceFilter> {
        let sel = |names: &[&str]| -> Vec<Selector> {
            names.iter().map(|n| n.parse().unwrap()).collect()
        };
        vec![
            SourceFilter::drop(sel(&["timer"])),
            SourceFilter::drop(sel(&["task"])).with_wakeups(),
            SourceFilter::keep(sel(&["irq", "category:periodic"])),
            SourceFilter::keep(sel(&["unattributed"])),
            SourceFilter::drop(sel(&[
                "timer",
                "softirq",
                "irq",
                "task",
                "ipi",
                "unattributed",
            ])),
        ]
    }

    /// The `.jtr` and sidecar bytes of the whole filter, and its tally.
    fn whole(dir: &Path, t: &Trace, a: &Attribution, f: &SourceFilter) -> (Vec<u8>, Vec<u8>) {
        let w = filter(t, a, f).unwrap();
        let path = dir.join("whole.jtr");
        crate::interop::export(&w.trace, &path, crate::interop::Format::Jtr).unwrap();
        let side = dir.join("whole.jtr.attr.json");
        w.attribution.write(&side).unwrap();
        (std::fs::read(path).unwrap(), std::fs::read(side).unwrap())
    }

    /// The same through a plan over `src` and `sidecar`.
    fn streamed(
        dir: &Path,
        src: &dyn StreamSource,
        sidecar: SharedSidecar,
        f: &SourceFilter,
    ) -> (Vec<u8>, Vec<u8>, Tally) {
        let plan = FilterPlan::new(src, sidecar, f).unwrap();
        let (path, side) = (dir.join("s.jtr"), dir.join("s.jtr.attr.json"));
        plan.write_jtr(&path, &side).unwrap();
        let out = (std::fs::read(path).unwrap(), std::fs::read(side).unwrap());
        let alone = plan.write_jtr_to(Vec::new()).unwrap();
        assert!(
            alone == out.0,
            "the trace alone is the trace written with its sidecar"
        );
        (out.0, out.1, plan.tally())
    }

    /// Five filters over traces of 1, 3 and 4 streams, the sidecar in the trace's CPU order,
    /// reversed (one parse per stream), with a second entry for a CPU (ignored, as the whole
    /// filter ignores it) and from memory: the `.jtr` and the sidecar byte for byte those of
    /// the whole filter, and the tally its counts.
    #[test]
    fn stream_by_stream_is_the_whole_filter_to_the_byte() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (streams, seed) in [(1, 1), (3, 2), (4, 3)] {
            let (t, a) = attributed(streams, seed);
            let mut reversed = a.clone();
            reversed.cpus.reverse();
            let mut doubled = a.clone();
            let mut second = a.cpus[0].clone();
            second.detours.truncate(3);
            doubled.cpus.push(second);
            let trace = d.join("t.jtr");
            crate::format::write_trace(&trace, &t).unwrap();
            let file = TraceFile::open(&trace).unwrap();
            for (k, a) in [a, reversed, doubled].into_iter().enumerate() {
                let side = d.join(format!("t{k}.attr.json"));
                a.write(&side).unwrap();
                for f in filters() {
                    let (jtr, json) = whole(d, &t, &a, &f);
                    let w = filter(&t, &a, &f).unwrap();
                    let on_file = Arc::new(SidecarFile::new(&side));
                    let (sj, ss, tally) = streamed(d, &file, on_file, &f);
                    assert!(sj == jtr && ss == json, "{streams} streams, {k}, {f:?}");
                    let counts = (tally.removed_ns, tally.emptied, tally.below_threshold);
                    assert_eq!(counts, (w.removed_ns, w.emptied, w.below_threshold));
                    assert_eq!((tally.shortened, tally.wakeups), (w.shortened, w.wakeups));
                    assert_eq!(tally.kept, w.trace.record_count() as u64);
                    let (mj, ms, _) = streamed(d, &t, Arc::new(a.clone()), &f);
                    assert!(mj == jtr && ms == json, "in memory: {streams}, {k}, {f:?}");
                }
            }
        }
    }

    /// Another trace's attribution gets the whole filter's error, in its order: a CPU without
    /// an entry, a count, a detour's run-time (in the second stream), the count of an earlier
    /// stream before a later detour.
    #[test]
    fn another_traces_attribution_gets_the_whole_filters_error() {
        let (t, a) = attributed(3, 5);
        let f = &filters()[0];
        let mut cases = Vec::new();
        let mut x = a.clone();
        x.cpus.remove(1);
        cases.push(x);
        let mut x = a.clone();
        x.cpus[2].detours.pop();
        cases.push(x);
        let mut x = a.clone();
        x.cpus[1].detours[40].run_ns += 1;
        cases.push(x);
        let mut x = a.clone();
        x.cpus[2].detours[4].start_ns += 1;
        x.cpus[1].detours.pop();
        cases.push(x);
        for x in cases {
            let want = filter(&t, &x, f).unwrap_err().to_string();
            let got = FilterPlan::new(&t, Arc::new(x), f).unwrap_err().to_string();
            assert_eq!(got, want);
        }
        assert!(FilterPlan::new(&t, Arc::new(a), &SourceFilter::drop(vec![])).is_err());
    }
}
