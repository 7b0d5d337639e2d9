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
//! `metadata` says how many detours (and how much time) are in the counters only.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::attribution::{AttributedDetour, Attribution};
use crate::error::TraceError;
use crate::model::Trace;

/// Width of one bin of the noise counter, ns.
pub const COUNTER_BIN_NS: u64 = 100_000_000;

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

/// One detour of the window: its CPU (stream index), its record and its attribution.
struct Item<'a> {
    stream: usize,
    start_ns: u64,
    run_ns: u64,
    attributed: Option<&'a AttributedDetour>,
}

/// The trace-event JSON of `trace` (and its attribution, which must be this trace's: one CPU
/// entry per stream with one detour per record; others are refused).
pub fn trace_events(
    trace: &Trace,
    attribution: Option<&Attribution>,
    e: &Export,
) -> Result<(Value, Omitted), TraceError> {
    let t0 = trace.streams.iter().map(|s| s.begin_ns).min().unwrap_or(0);
    let (from, to) = e.window.map_or((0, u64::MAX), |(a, b)| {
        (t0.saturating_add(a), t0.saturating_add(b))
    });
    if from >= to {
        return Err(TraceError::Argument("the window is empty".into()));
    }
    let us = |ns: u64| (ns.saturating_sub(t0)) as f64 / 1e3;
    let mut events = vec![json!({
        "ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0,
        "args": {"name": format!("jitterbench {}", trace.header.host)},
    })];
    let mut items: Vec<Item> = Vec::new();
    for (i, s) in trace.streams.iter().enumerate() {
        let att = attribution
            .map(|a| matching(a, i, s))
            .transpose()?
            .flatten();
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": 1, "tid": s.cpu, "ts": 0,
            "args": {"name": format!("CPU {}", s.cpu)},
        }));
        let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
        for (j, r) in s.records.iter().enumerate() {
            if r.end_ns() <= from || r.start_ns >= to {
                continue;
            }
            add_to_bins(&mut bins, r.start_ns.max(from), r.end_ns().min(to), t0);
            items.push(Item {
                stream: i,
                start_ns: r.start_ns,
                run_ns: r.run_ns,
                attributed: att.map(|d| &d[j]),
            });
        }
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
            events.push(json!({
                "ph": "C", "name": format!("noise % CPU {}", s.cpu), "pid": 1, "tid": s.cpu,
                "ts": us(b.max(lo)), "args": {"noise_pct": pct},
            }));
            b += COUNTER_BIN_NS;
        }
    }
    let omitted = keep_longest(&mut items, e.max_slices);
    items.sort_by_key(|x| (x.stream, x.start_ns));
    for x in &items {
        let cpu = trace.streams[x.stream].cpu;
        events.push(slice(x, cpu, us(x.start_ns)));
    }
    let doc = json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "metadata": {
            "host": trace.header.host,
            "kernel": trace.header.kernel_release,
            "attributed": attribution.is_some(),
            "counter_bin_ms": COUNTER_BIN_NS / 1_000_000,
            "omitted": omitted,
        },
    });
    Ok((doc, omitted))
}

/// The attribution's detours of stream `i`, checked against its records.
fn matching<'a>(
    a: &'a Attribution,
    i: usize,
    s: &crate::model::Stream,
) -> Result<Option<&'a [AttributedDetour]>, TraceError> {
    let Some(c) = a.cpus.iter().find(|c| c.cpu == s.cpu) else {
        return Err(TraceError::Argument(format!(
            "the attribution has no entry for CPU {} (stream {i})",
            s.cpu
        )));
    };
    let same = c.detours.len() == s.records.len()
        && (c.detours.iter().zip(&s.records))
            .all(|(d, r)| (d.start_ns, d.run_ns) == (r.start_ns, r.run_ns));
    if !same {
        return Err(TraceError::Argument(format!(
            "the attribution of CPU {} does not match the trace's detours",
            s.cpu
        )));
    }
    Ok(Some(&c.detours))
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

/// Keeps the `max` longest items (all when fewer) and says what the rest were.
fn keep_longest(items: &mut Vec<Item>, max: usize) -> Omitted {
    let detours = items.len() as u64;
    let mut o = Omitted {
        detours,
        ..Omitted::default()
    };
    if items.len() > max {
        items.select_nth_unstable_by(max, |a, b| b.run_ns.cmp(&a.run_ns));
        for x in &items[max..] {
            o.counter_only += 1;
            o.counter_only_ns += x.run_ns;
        }
        items.truncate(max);
    }
    o.slices = items.len() as u64;
    o
}

/// One detour as a complete event.
fn slice(x: &Item, cpu: u32, ts: f64) -> Value {
    let (name, args) = match x.attributed {
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
    let cat = x.attributed.map_or("detour", |d| {
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
