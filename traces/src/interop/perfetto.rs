//! A collection as Chrome/Perfetto trace-event JSON (`jitter-trace perfetto`), for
//! ui.perfetto.dev or chrome://tracing: one track (thread) per CPU, each detour a complete
//! slice (`"ph": "X"`) named by its dominant source (or `detour` without attribution), its
//! run-time in `dur` and its combination and net parts in `args`; a counter track
//! (`"ph": "C"`) per CPU of the noise in percent per 100 ms bin. Times are µs from the
//! trace's earliest stream start (`ts`, `dur`, fractional: ns kept).
//!
//! Not a [`super::Codec`]: the export takes the attribution beside the trace. Large traces
//! stay loadable: `window` keeps a stretch, and beyond `max_slices` detours only the longest
//! `max_slices` are slices; the counter track still counts every detour, and the file's
//! `metadata` says how many detours (and how much time) are in the counters only. Among equal
//! run-times at that boundary the earlier CPU, then the earlier start, is a slice. The file is
//! written as the trace is read stream by stream, then the attribution detour by detour: it
//! holds the slices kept (with their sources) and the counters, never every detour.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::hash::Hasher;
use std::io::Write;

use serde::Serialize;
use serde_json::{json, Value};

use crate::attribution::AttributedDetour;
#[cfg(test)]
use crate::attribution::Attribution;
use crate::error::TraceError;
#[cfg(test)]
use crate::model::Trace;
use crate::sidecar_reader::DetourSource;
use crate::stream_order::StreamSource;

/// Width of one bin of the noise counter, ns.
pub(crate) const COUNTER_BIN_NS: u64 = 100_000_000;

/// Slices kept by default (a browser loads some hundred thousand events comfortably).
pub const DEFAULT_MAX_SLICES: usize = 200_000;

/// What to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Export {
    /// Stretch `[from, to)` kept, ns from the trace's start; `None`: all of it.
    pub window: Option<(u64, u64)>,
    /// Most detours drawn as slices (the longest ones).
    pub max_slices: usize,
}

impl Default for Export {
    fn default() -> Self {
        Export {
            window: None,
            max_slices: DEFAULT_MAX_SLICES,
        }
    }
}

/// What the export left out of the slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Omitted {
    /// Detours in the window.
    pub detours: u64,
    /// Of those, drawn as slices.
    pub slices: u64,
    /// Detours in the counters only (shorter than every slice).
    pub counter_only: u64,
    /// Their time, ns.
    pub counter_only_ns: u64,
}

/// One detour of the window: its stream, its detour and its index in the stream (for its
/// attribution).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Item {
    stream: usize,
    start_ns: u64,
    run_ns: u64,
    index: usize,
}

impl Item {
    /// The order of preference for a slice: longer first, then the earlier CPU, then the
    /// earlier start.
    fn rank(&self) -> Rank {
        (self.run_ns, Reverse(self.stream), Reverse(self.start_ns))
    }
}

/// How much an item is preferred as a slice ([`Item::rank`]): greater is kept first.
type Rank = (u64, Reverse<usize>, Reverse<u64>);

/// The `max` most preferred items seen ([`Item::rank`]) and what the others were, in the
/// memory of `max` items.
struct Longest {
    max: usize,
    heap: BinaryHeap<Reverse<(Rank, Item)>>,
    omitted: Omitted,
}

impl Longest {
    fn new(max: usize) -> Longest {
        Longest {
            max,
            heap: BinaryHeap::new(),
            omitted: Omitted::default(),
        }
    }

    fn offer(&mut self, x: Item) {
        self.omitted.detours += 1;
        let entry = Reverse((x.rank(), x));
        let out = if self.heap.len() < self.max {
            self.heap.push(entry);
            None
        } else if self.heap.peek().is_some_and(|least| least.0 .0 < x.rank()) {
            let least = self.heap.pop().map(|r| r.0 .1);
            self.heap.push(entry);
            least
        } else {
            Some(x)
        };
        if let Some(o) = out {
            self.omitted.counter_only += 1;
            self.omitted.counter_only_ns += o.run_ns;
        }
    }

    /// The items kept, by stream and start, and what was left out.
    fn finish(self) -> (Vec<Item>, Omitted) {
        let mut items: Vec<Item> = self.heap.into_iter().map(|r| r.0 .1).collect();
        items.sort_unstable_by_key(|x| (x.stream, x.start_ns));
        let mut o = self.omitted;
        o.slices = items.len() as u64;
        (items, o)
    }
}

/// Appends one event to the comma-separated list `out`.
fn push(out: &mut Vec<u8>, event: &Value) -> Result<(), TraceError> {
    if !out.is_empty() {
        out.push(b',');
    }
    serde_json::to_writer(&mut *out, event)
        .map_err(|e| TraceError::io("cannot write events", e.into()))
}

/// The trace-event JSON of `trace` (and its attribution, which must be this trace's: one CPU
/// entry per stream with one detour per record; others are refused), as a value.
#[cfg(test)]
pub(crate) fn trace_events(
    trace: &Trace,
    attribution: Option<&Attribution>,
    e: &Export,
) -> Result<(Value, Omitted), TraceError> {
    let mut bytes = Vec::new();
    let attribution = attribution.map(|a| a as &dyn DetourSource);
    let omitted = write_trace_events(trace, attribution, e, &mut bytes)?;
    let doc = serde_json::from_slice(&bytes)
        .map_err(|e| TraceError::io("cannot read events back", e.into()))?;
    Ok((doc, omitted))
}

/// Writes the trace-event JSON of the trace of `src` (read stream by stream) to `out`, in
/// the memory of the `max_slices` slices kept and the counters (one per CPU and 100 ms):
/// nothing grows with the number of detours. The attribution (a sidecar file read detour by
/// detour, or one in memory) is read once after the trace: each CPU entry's detours must be
/// its stream's (their starts and run-times, compared by a 64-bit digest of the sequence and
/// its length), and the slices' sources are kept. Ties among the longest detours at the
/// `max_slices` boundary keep the earlier CPU, then the earlier start.
pub fn write_trace_events(
    src: &dyn StreamSource,
    attribution: Option<&dyn DetourSource>,
    e: &Export,
    out: &mut dyn Write,
) -> Result<Omitted, TraceError> {
    let trace = src.frame();
    let t0 = trace.streams.iter().map(|s| s.begin_ns).min().unwrap_or(0);
    let (from, to) = e.window.map_or((0, u64::MAX), |(a, b)| {
        (t0.saturating_add(a), t0.saturating_add(b))
    });
    if from >= to {
        return Err(TraceError::Argument("the window is empty".into()));
    }
    if let Some((a, b)) = e.window {
        let end = trace.streams.iter().map(|s| s.end_ns).max().unwrap_or(t0);
        crate::names::window_within("--window", a, b, end.saturating_sub(t0), "the trace")?;
    }
    let us = |ns: u64| (ns.saturating_sub(t0)) as f64 / 1e3;
    let mut events = Vec::new();
    push(
        &mut events,
        &json!({
            "ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0,
            "args": {"name": format!("jitterbench {}", trace.header.host)},
        }),
    )?;
    let mut longest = Longest::new(e.max_slices);
    let mut digests = Vec::new();
    for (i, s) in trace.streams.iter().enumerate() {
        push(
            &mut events,
            &json!({
                "ph": "M", "name": "thread_name", "pid": 1, "tid": s.cpu, "ts": 0,
                "args": {"name": format!("CPU {}", s.cpu)},
            }),
        )?;
        let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
        let mut index = 0usize;
        let mut digest = Digest::default();
        src.detours(i, &mut |run| {
            for d in run {
                digest.add(d.start_ns, d.run_ns);
                if d.end_ns() > from && d.start_ns < to {
                    add_to_bins(&mut bins, d.start_ns.max(from), d.end_ns().min(to), t0);
                    longest.offer(Item {
                        stream: i,
                        start_ns: d.start_ns,
                        run_ns: d.run_ns,
                        index,
                    });
                }
                index += 1;
            }
            Ok(())
        })?;
        digests.push(digest);
        let (lo, hi) = (s.begin_ns.max(from), s.end_ns.min(to));
        let mut b = (lo.saturating_sub(t0) / COUNTER_BIN_NS) * COUNTER_BIN_NS + t0;
        while b < hi {
            let width = (b + COUNTER_BIN_NS).min(hi) - b.max(lo);
            let busy = bins.get(&b).copied().unwrap_or(0);
            let pct = if width > 0 {
                100.0 * busy as f64 / width as f64
            } else {
                0.0
            };
            push(
                &mut events,
                &json!({
                    "ph": "C", "name": format!("noise % CPU {}", s.cpu), "pid": 1, "tid": s.cpu,
                    "ts": us(b.max(lo)), "args": {"noise_pct": pct},
                }),
            )?;
            b += COUNTER_BIN_NS;
        }
    }
    let (items, omitted) = longest.finish();
    let attributed = match attribution {
        Some(a) => Some(slice_sources(a, &trace.streams, &digests, &items)?),
        None => None,
    };
    let metadata = json!({
        "host": trace.header.host,
        "kernel": trace.header.kernel_release,
        "attributed": attribution.is_some(),
        "counter_bin_ms": COUNTER_BIN_NS / 1_000_000,
        "omitted": omitted,
    });
    let io = |e: std::io::Error| TraceError::io("cannot write events", e);
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"metadata\":")
        .map_err(io)?;
    serde_json::to_writer(&mut *out, &metadata).map_err(|e| io(e.into()))?;
    out.write_all(b",\"traceEvents\":[").map_err(io)?;
    out.write_all(&events).map_err(io)?;
    drop(events);
    for (k, x) in items.iter().enumerate() {
        let cpu = trace.streams[x.stream].cpu;
        let attributed = attributed.as_ref().and_then(|a| a[k].as_ref());
        out.write_all(b",").map_err(io)?;
        serde_json::to_writer(&mut *out, &slice(x, attributed, cpu, us(x.start_ns)))
            .map_err(|e| io(e.into()))?;
    }
    out.write_all(b"]}").map_err(io)?;
    Ok(omitted)
}

/// A stream's or CPU entry's sequence of (start, run-time): its length and a 64-bit digest.
#[derive(Debug, Clone, Default)]
struct Digest {
    count: u64,
    hash: std::hash::DefaultHasher,
}

impl Digest {
    fn add(&mut self, start_ns: u64, run_ns: u64) {
        self.count += 1;
        self.hash.write_u64(start_ns);
        self.hash.write_u64(run_ns);
    }

    fn value(&self) -> (u64, u64) {
        (self.count, self.hash.finish())
    }
}

/// The attributed detour of each slice in `items` (in their order), in one pass over the
/// attribution `a`: the first CPU entry of each stream's CPU must hold that stream's detours
/// (`digests`, in stream order), or the attribution is refused as another trace's.
fn slice_sources(
    a: &dyn DetourSource,
    streams: &[crate::model::Stream],
    digests: &[Digest],
    items: &[Item],
) -> Result<Vec<Option<AttributedDetour>>, TraceError> {
    let mut wanted: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
    for x in items {
        wanted
            .entry(streams[x.stream].cpu)
            .or_default()
            .insert(x.index);
    }
    let mut entries: Vec<Digest> = Vec::new();
    let mut kept: BTreeMap<(usize, usize), AttributedDetour> = BTreeMap::new();
    let frame = a.pass(&mut |entry: usize, cpu: u32, d: &AttributedDetour| {
        if entries.len() <= entry {
            entries.resize(entry + 1, Digest::default());
        }
        let index = entries[entry].count as usize;
        entries[entry].add(d.start_ns, d.run_ns);
        if wanted.get(&cpu).is_some_and(|w| w.contains(&index)) {
            kept.insert((entry, index), d.clone());
        }
        Ok(())
    })?;
    entries.resize(frame.detours.len(), Digest::default());
    let cpus = &frame.attribution.cpus;
    let mut entry_of = Vec::with_capacity(streams.len());
    for (i, s) in streams.iter().enumerate() {
        let Some(entry) = cpus.iter().position(|c| c.cpu == s.cpu) else {
            return Err(TraceError::Argument(format!(
                "the attribution has no entry for CPU {} (stream {i})",
                s.cpu
            )));
        };
        if entries[entry].value() != digests[i].value() {
            return Err(mismatch(s.cpu));
        }
        entry_of.push(entry);
    }
    Ok(items
        .iter()
        .map(|x| kept.remove(&(entry_of[x.stream], x.index)))
        .collect())
}

/// The error of an attribution that is not this trace's.
fn mismatch(cpu: u32) -> TraceError {
    TraceError::Argument(format!(
        "the attribution of CPU {cpu} does not match the trace's detours"
    ))
}

/// Adds the detour time `[a, b)` to the 100 ms bins (keys: bin start, ns) it covers.
fn add_to_bins(bins: &mut BTreeMap<u64, u64>, a: u64, b: u64, t0: u64) {
    let mut x = a;
    while x < b {
        let start = (x - t0) / COUNTER_BIN_NS * COUNTER_BIN_NS + t0;
        let end = (start + COUNTER_BIN_NS).min(b);
        *bins.entry(start).or_default() += end - x;
        x = end;
    }
}

/// One detour as a complete event.
fn slice(x: &Item, attributed: Option<&AttributedDetour>, cpu: u32, ts: f64) -> Value {
    let (name, args) = match attributed {
        Some(d) => {
            let parts: BTreeMap<&str, u64> =
                d.parts.iter().map(|p| (p.source.as_str(), p.ns)).collect();
            (
                d.source.as_str(),
                json!({
                    "run_ns": x.run_ns,
                    "combination": d.combination,
                    "parts_ns": parts,
                    "unattributed_ns": d.unattributed_ns(),
                }),
            )
        }
        None => ("detour", json!({"run_ns": x.run_ns})),
    };
    let cat = attributed.map_or("detour", |d| {
        crate::attribution::Category::of(&d.source).name()
    });
    json!({
        "ph": "X", "name": name, "cat": cat, "pid": 1, "tid": cpu,
        "ts": ts, "dur": x.run_ns as f64 / 1e3, "args": args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::{CpuAttribution, Part};
    use crate::model::{Detour, Stream};

    /// Two CPUs over 1 s from 5 s: CPU 0 a detour of 30 ms at 5.05 s (across the first
    /// counter bin's end, 20 ms in it) and one of 2 µs at 5.5 s; CPU 2 one of 1 ms at 5.3 s.
    fn sample() -> (Trace, Attribution) {
        let base = 5_000_000_000;
        let d = |s: u64, r: u64| Detour {
            start_ns: base + s,
            run_ns: r,
        };
        let s0 = Stream::from_detours(
            0,
            base,
            base + 1_000_000_000,
            &[d(80_000_000, 30_000_000), d(500_000_000, 2_000)],
        )
        .unwrap();
        let s2 = Stream::from_detours(2, base, base + 1_000_000_000, &[d(300_000_000, 1_000_000)])
            .unwrap();
        let mut t = Trace {
            streams: vec![s0, s2],
            ..Trace::default()
        };
        t.sync_header();
        let att = |s: &Stream| CpuAttribution {
            cpu: s.cpu,
            detours: (s.records.iter())
                .map(|r| AttributedDetour {
                    start_ns: r.start_ns,
                    run_ns: r.run_ns,
                    source: "task:d".into(),
                    combination: "timer+task:d".into(),
                    explained_ns: r.run_ns,
                    parts: vec![
                        Part {
                            source: "timer".into(),
                            start_ns: r.start_ns,
                            ns: r.run_ns / 4,
                        },
                        Part {
                            source: "task:d".into(),
                            start_ns: r.start_ns,
                            ns: r.run_ns - r.run_ns / 4,
                        },
                    ],
                })
                .collect(),
            ..CpuAttribution::default()
        };
        let a = Attribution {
            cpus: t.streams.iter().map(att).collect(),
            ..Attribution::default()
        };
        (t, a)
    }

    /// The file holds what the trace-event format asks: a `traceEvents` array of objects with
    /// `ph`, `pid`, `tid`; complete events with `ts` and `dur` in µs; counters with `ts` and a
    /// numeric `args` value; every slice and counter at the values the detours give.
    #[test]
    fn the_export_is_valid_trace_event_json_with_the_detours_in_us() {
        let (t, a) = sample();
        let (v, o) = trace_events(&t, Some(&a), &Export::default()).unwrap();
        let text = serde_json::to_string(&v).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        for e in ev {
            let ph = e["ph"].as_str().unwrap();
            assert!(["X", "C", "M"].contains(&ph), "{e}");
            assert!(
                e["pid"].is_u64() && e["tid"].is_u64() && e["name"].is_string(),
                "{e}"
            );
            if ph != "M" {
                assert!(e["ts"].as_f64().unwrap() >= 0.0, "{e}");
            }
        }
        let slices: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(slices.len(), 3);
        let first = slices.iter().find(|e| e["tid"] == 0).unwrap();
        assert_eq!(first["ts"].as_f64(), Some(80_000.0));
        assert_eq!(first["dur"].as_f64(), Some(30_000.0));
        assert_eq!(first["name"], "task:d");
        assert_eq!(first["cat"], "preemption");
        assert_eq!(first["args"]["combination"], "timer+task:d");
        assert_eq!(first["args"]["parts_ns"]["timer"], 7_500_000);
        let tiny = slices
            .iter()
            .find(|e| e["args"]["run_ns"] == 2_000)
            .unwrap();
        assert_eq!(tiny["dur"].as_f64(), Some(2.0));
        // Counters: CPU 0 bin 0 holds 20 ms of 100 ms, bin 1 10 ms; CPU 2 bin 3 1 ms.
        let counter = |cpu: u32, ts: f64| {
            ev.iter()
                .find(|e| e["ph"] == "C" && e["tid"] == cpu && e["ts"].as_f64() == Some(ts))
                .map(|e| e["args"]["noise_pct"].as_f64().unwrap())
        };
        assert_eq!(counter(0, 0.0), Some(20.0));
        assert_eq!(counter(0, 100_000.0), Some(10.0));
        assert_eq!(counter(0, 200_000.0), Some(0.0));
        assert!((counter(0, 500_000.0).unwrap() - 0.002).abs() < 1e-12);
        assert_eq!(counter(2, 300_000.0), Some(1.0));
        assert_eq!(ev.iter().filter(|e| e["ph"] == "C").count(), 20);
        assert_eq!((o.detours, o.slices, o.counter_only), (3, 3, 0));
        assert_eq!(v["metadata"]["attributed"], true);
    }

    /// Among detours of equal run-time at the `max_slices` boundary the earlier CPU, then the
    /// earlier start, is a slice: the same file for the same trace, whatever the reading order.
    #[test]
    fn ties_at_the_boundary_keep_the_earlier_cpu_then_the_earlier_start() {
        let d = |start_ns: u64, run_ns: u64| Detour { start_ns, run_ns };
        let s0 = Stream::from_detours(0, 0, 1_000, &[d(10, 5), d(100, 9), d(200, 5)]).unwrap();
        let s1 = Stream::from_detours(1, 0, 1_000, &[d(5, 5), d(50, 9)]).unwrap();
        let mut t = Trace {
            streams: vec![s0, s1],
            ..Trace::default()
        };
        t.sync_header();
        let e = Export {
            window: None,
            max_slices: 3,
        };
        let (v, o) = trace_events(&t, None, &e).unwrap();
        let kept: Vec<(u64, f64)> = (v["traceEvents"].as_array().unwrap().iter())
            .filter(|x| x["ph"] == "X")
            .map(|x| (x["tid"].as_u64().unwrap(), x["ts"].as_f64().unwrap() * 1e3))
            .collect();
        // Both 9 ns detours, then the first 5 ns one of CPU 0.
        assert_eq!(kept, vec![(0, 10.0), (0, 100.0), (1, 50.0)]);
        assert_eq!(
            (o.detours, o.slices, o.counter_only, o.counter_only_ns),
            (5, 3, 2, 10)
        );
    }

    /// Beyond `max_slices` only the longest detours are slices, the rest are counted; a
    /// window keeps its stretch; without attribution slices are `detour`; a foreign
    /// attribution is refused.
    #[test]
    fn large_traces_keep_the_longest_slices_and_windows_cut() {
        let (t, mut a) = sample();
        let e = Export {
            window: None,
            max_slices: 2,
        };
        let (v, o) = trace_events(&t, None, &e).unwrap();
        assert_eq!(
            (o.detours, o.slices, o.counter_only, o.counter_only_ns),
            (3, 2, 1, 2_000)
        );
        let ev = v["traceEvents"].as_array().unwrap();
        assert!(ev
            .iter()
            .filter(|e| e["ph"] == "X")
            .all(|e| e["name"] == "detour"));
        assert_eq!(v["metadata"]["omitted"]["counter_only"], 1);
        let w = Export {
            window: Some((250_000_000, 400_000_000)),
            max_slices: 10,
        };
        let (v, o) = trace_events(&t, Some(&a), &w).unwrap();
        assert_eq!(o.detours, 1);
        let ev = v["traceEvents"].as_array().unwrap();
        let c: Vec<f64> = (ev.iter())
            .filter(|e| e["ph"] == "C" && e["tid"] == 0)
            .map(|e| e["ts"].as_f64().unwrap())
            .collect();
        assert_eq!(c, vec![250_000.0, 300_000.0]);
        assert!(trace_events(
            &t,
            None,
            &Export {
                window: Some((5, 5)),
                max_slices: 1
            }
        )
        .is_err());
        a.cpus[1].detours[0].run_ns += 1;
        let e = trace_events(&t, Some(&a), &Export::default()).unwrap_err();
        assert!(e.to_string().contains("CPU 2 does not match"), "{e}");
    }
}
