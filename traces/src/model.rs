//! The trace model: detours, records, streams and traces.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::TraceError;

/// One interruption as the probe sees it: when it began and how long the CPU was away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Detour {
    /// Start of the detour, ns on the trace's time base.
    pub start_ns: u64,
    /// Duration of the detour (run-time), ns.
    pub run_ns: u64,
}

impl Detour {
    /// End of the detour (start + run), ns.
    #[inline]
    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.run_ns
    }
}

/// The union of detours given in order of start: overlapping or touching detours become one
/// spanning both, empty ones are dropped (two noise sources on one CPU lose the union's time).
pub fn unite(sorted: impl IntoIterator<Item = Detour>) -> Vec<Detour> {
    let mut out: Vec<Detour> = Vec::new();
    for d in sorted.into_iter().filter(|d| d.run_ns > 0) {
        match out.last_mut() {
            Some(last) if d.start_ns <= last.end_ns() => {
                last.run_ns = last.end_ns().max(d.end_ns()) - last.start_ns;
            }
            _ => out.push(d),
        }
    }
    out
}

/// A trace record: start time, run-time and the sleep-time to the next detour, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Record {
    /// Start of the detour, ns on the trace's time base.
    pub start_ns: u64,
    /// Duration of the detour, ns.
    pub run_ns: u64,
    /// Gap from the end of this detour to the start of the next one (or to the stream's end), ns.
    pub sleep_ns: u64,
}

impl Record {
    /// End of the detour (start + run), ns.
    #[inline]
    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.run_ns
    }

    /// The detour part of the record.
    #[inline]
    pub fn detour(&self) -> Detour {
        Detour {
            start_ns: self.start_ns,
            run_ns: self.run_ns,
        }
    }
}

/// The records of one CPU over one observation window `[begin_ns, end_ns)`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Stream {
    /// CPU id the stream was collected on (or a synthetic index).
    pub cpu: u32,
    /// Start of the observation window, ns.
    pub begin_ns: u64,
    /// End of the observation window, ns; the last record's sleep reaches it.
    pub end_ns: u64,
    /// The detours, ordered by start time.
    pub records: Vec<Record>,
    /// Named counters the collector kept for this stream (e.g. `lost_detours`, `invol_ctx`).
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
}

impl Stream {
    /// Builds a stream from detours observed in `[begin_ns, end_ns)`, deriving every sleep-time.
    pub fn from_detours(
        cpu: u32,
        begin_ns: u64,
        end_ns: u64,
        detours: &[Detour],
    ) -> Result<Self, TraceError> {
        Stream::from_detour_runs(cpu, begin_ns, end_ns, std::slice::from_ref(&detours))
    }

    /// [`Stream::from_detours`] over the concatenation of `runs` (consecutive runs of detours,
    /// as a trace file's chunks hold them), without copying them into one first.
    pub fn from_detour_runs(
        cpu: u32,
        begin_ns: u64,
        end_ns: u64,
        runs: &[&[Detour]],
    ) -> Result<Self, TraceError> {
        let n: usize = runs.iter().map(|r| r.len()).sum();
        let mut records = crate::memory::large_vec(n);
        let mut prev: Option<&Detour> = None;
        let mut push = |d: &Detour, next: u64, i: usize| {
            let sleep_ns = next
                .checked_sub(d.end_ns())
                .ok_or_else(|| TraceError::Invalid {
                    stream: cpu as usize,
                    index: i,
                    reason: format!(
                        "detour ends at {} ns, after the next start {} ns",
                        d.end_ns(),
                        next
                    ),
                })?;
            records.push(Record {
                start_ns: d.start_ns,
                run_ns: d.run_ns,
                sleep_ns,
            });
            Ok(())
        };
        for (i, d) in runs.iter().flat_map(|r| r.iter()).enumerate() {
            if let Some(p) = prev {
                push(p, d.start_ns, i - 1)?;
            }
            prev = Some(d);
        }
        if let Some(p) = prev {
            push(p, end_ns, n - 1)?;
        }
        Ok(Stream {
            cpu,
            begin_ns,
            end_ns,
            records,
            counters: BTreeMap::new(),
        })
    }

    /// Length of the observation window, ns.
    #[inline]
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.begin_ns)
    }

    /// Sum of all run-times, ns.
    pub fn noise_ns(&self) -> u64 {
        self.records.iter().map(|r| r.run_ns).sum()
    }

    /// Checks ordering and sleep consistency; `index` names the stream in errors.
    pub fn validate(&self, index: usize) -> Result<(), TraceError> {
        let bad = |i: usize, reason: String| TraceError::Invalid {
            stream: index,
            index: i,
            reason,
        };
        if self.end_ns < self.begin_ns {
            return Err(bad(
                0,
                format!(
                    "window ends ({}) before it begins ({})",
                    self.end_ns, self.begin_ns
                ),
            ));
        }
        let mut prev_end = self.begin_ns;
        let mut prev_start: Option<u64> = None;
        for (i, r) in self.records.iter().enumerate() {
            if let Some(p) = prev_start {
                if r.start_ns <= p {
                    return Err(bad(
                        i,
                        format!(
                            "start {} ns is not after the previous start {} ns",
                            r.start_ns, p
                        ),
                    ));
                }
            }
            if r.start_ns < prev_end {
                return Err(bad(
                    i,
                    format!(
                        "starts at {} ns, before the previous detour (or window) ends at {} ns",
                        r.start_ns, prev_end
                    ),
                ));
            }
            let end = r
                .start_ns
                .checked_add(r.run_ns)
                .ok_or_else(|| bad(i, "start + run overflows".into()))?;
            let next = self.records.get(i + 1).map_or(self.end_ns, |n| n.start_ns);
            let expected = next.checked_sub(end).ok_or_else(|| {
                bad(
                    i,
                    format!("ends at {end} ns, after the next start or window end {next} ns"),
                )
            })?;
            if r.sleep_ns != expected {
                return Err(bad(
                    i,
                    format!(
                        "sleep is {} ns but next start - (start + run) = {} ns",
                        r.sleep_ns, expected
                    ),
                ));
            }
            prev_end = end;
            prev_start = Some(r.start_ns);
        }
        Ok(())
    }
}

/// Facts about the machine and the collection that explain the noise in a trace.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Header {
    /// Version of the `.jtr` format the trace was written with.
    pub format_version: u16,
    /// Name and version of the tool that produced the trace (e.g. `jitter-collect 0.1.0`).
    pub tool_version: String,
    /// Host name.
    pub host: String,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// Kernel command line (`/proc/cmdline`).
    pub kernel_cmdline: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Cycle-counter frequency used to convert to ns, kHz (0 when unknown or synthetic).
    pub tsc_khz: u64,
    /// t_min: the probe loop's undisturbed period, ns (older traces: the shortest back-to-back read).
    pub t_min_ns: f64,
    /// Detour threshold in force, ns.
    pub threshold_ns: f64,
    /// Wall-clock start of the collection, ns since the Unix epoch.
    pub collection_start_unix_ns: u64,
    /// Duration of the collection, ns (final value comes from the end chunk).
    pub duration_ns: u64,
    /// CPU id of each stream, in stream order.
    pub stream_cpus: Vec<u32>,
    /// Free-form `key=value` labels (e.g. `config=runlevel1`, `synthetic=periodic`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Machine configuration read at collection time (clocksource, governor, HZ, ...).
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
}

/// Header label saying how the streams' windows were found; [`WINDOW_INFERRED`] where the
/// input states none (CSV, LogGOPSim) and they run from the first detour's start to the last
/// one's end: rates and noise shares are then over that span, and not measured at all for a
/// stream of fewer than two detours (`crate::stats`); set by a text import (`interop`).
pub(crate) const LABEL_WINDOW: &str = "window";
/// See [`LABEL_WINDOW`].
pub(crate) const WINDOW_INFERRED: &str = "inferred from the detours";

/// A time window `[start_ns, end_ns)` on the trace's time base, e.g. when the collector's writer ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Window {
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
}

/// A trace: a header and one stream per CPU, all on one time base.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Trace {
    /// What was collected where, and how.
    pub header: Header,
    /// One stream per CPU.
    pub streams: Vec<Stream>,
    /// Windows during which the collector itself was active (its own noise).
    #[serde(default)]
    pub self_windows: Vec<Window>,
    /// Notes written at the end of the collection (e.g. IRQ count deltas).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

impl Trace {
    /// Checks every stream and that the header names one CPU per stream.
    pub fn validate(&self) -> Result<(), TraceError> {
        if self.header.stream_cpus.len() != self.streams.len() {
            return Err(TraceError::Header(format!(
                "header names {} stream CPUs but the trace has {} streams",
                self.header.stream_cpus.len(),
                self.streams.len()
            )));
        }
        for (i, s) in self.streams.iter().enumerate() {
            s.validate(i)?;
        }
        Ok(())
    }

    /// Total number of records over all streams.
    pub fn record_count(&self) -> usize {
        self.streams.iter().map(|s| s.records.len()).sum()
    }

    /// Detour time over observation time, all streams pooled (what [`crate::Stats`] says,
    /// without its histogram).
    pub fn noise_ratio(&self) -> f64 {
        let (noise, time) = self.pooled();
        if time == 0 {
            0.0
        } else {
            noise as f64 / time as f64
        }
    }

    /// Detours per second per CPU, all streams pooled (as [`crate::Stats`] counts them).
    pub fn detours_per_s(&self) -> f64 {
        let (_, time) = self.pooled();
        if time == 0 {
            0.0
        } else {
            self.record_count() as f64 / (time as f64 / 1e9)
        }
    }

    /// (Σ detour time, Σ observation time) over the streams, ns.
    fn pooled(&self) -> (u64, u64) {
        (self.streams.iter()).fold((0, 0), |(n, t), s| (n + s.noise_ns(), t + s.duration_ns()))
    }

    /// Sets `header.stream_cpus` and `header.duration_ns` from the streams.
    pub fn sync_header(&mut self) {
        self.header.stream_cpus = self.streams.iter().map(|s| s.cpu).collect();
        self.header.duration_ns = self
            .streams
            .iter()
            .map(Stream::duration_ns)
            .max()
            .unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_ratio_and_rate_are_the_statistics_without_a_histogram() {
        let s: crate::Spec = "poisson:rate=5000/s,dur=lognormal:3us:0.5".parse().unwrap();
        let t = crate::synth::synthesize(&s, 3, 2_000_000_000, 4).unwrap();
        let st = crate::TraceStats::of_trace(&t).overall;
        assert!((t.noise_ratio() - st.noise_ratio).abs() < 1e-15);
        assert!((t.detours_per_s() - st.detours_per_s).abs() < 1e-9);
        assert!(t.noise_ratio() > 0.0);
    }

    #[test]
    fn a_union_of_detours_counts_overlaps_once() {
        let d = |start_ns, run_ns| Detour { start_ns, run_ns };
        let u = unite([d(0, 10), d(5, 10), d(15, 1), d(20, 0), d(30, 5), d(31, 1)]);
        assert_eq!(u, vec![d(0, 16), d(30, 5)]);
        assert!(unite([]).is_empty());
    }

    fn d(start_ns: u64, run_ns: u64) -> Detour {
        Detour { start_ns, run_ns }
    }

    #[test]
    fn sleeps_are_derived_up_to_the_window_end() {
        let s = Stream::from_detours(3, 0, 1000, &[d(10, 5), d(100, 20), d(500, 1)]).unwrap();
        let sleeps: Vec<u64> = s.records.iter().map(|r| r.sleep_ns).collect();
        assert_eq!(sleeps, vec![85, 380, 499]);
        s.validate(0).unwrap();
        assert_eq!(s.noise_ns(), 26);
    }

    #[test]
    fn overlapping_detours_are_rejected_with_their_index() {
        let err = Stream::from_detours(0, 0, 1000, &[d(10, 100), d(50, 1)]).unwrap_err();
        assert!(err.to_string().contains("index 0"), "{err}");
    }

    /// Runs of detours give the stream of their concatenation; an overlap across two runs, or
    /// a last detour past the window's end, names the detour's index in the whole stream.
    #[test]
    fn detour_runs_make_the_stream_of_their_concatenation() {
        let all = [d(10, 5), d(100, 20), d(200, 1), d(300, 7)];
        let runs: [&[Detour]; 4] = [&all[..1], &[], &all[1..3], &all[3..]];
        let joined = Stream::from_detour_runs(3, 0, 1000, &runs).unwrap();
        assert_eq!(joined, Stream::from_detours(3, 0, 1000, &all).unwrap());
        let err = Stream::from_detour_runs(0, 0, 1000, &[&[d(10, 5), d(100, 150)], &[d(200, 1)]])
            .unwrap_err();
        assert!(err.to_string().contains("index 1"), "{err}");
        let err = Stream::from_detour_runs(0, 0, 250, &[&[d(10, 5)], &[d(200, 60)]]).unwrap_err();
        assert!(err.to_string().contains("index 1"), "{err}");
        let none: [&[Detour]; 2] = [&[], &[]];
        assert!(Stream::from_detour_runs(0, 0, 9, &none)
            .unwrap()
            .records
            .is_empty());
    }

    #[test]
    fn validate_names_stream_and_index() {
        let mut s = Stream::from_detours(0, 0, 1000, &[d(10, 5), d(100, 20)]).unwrap();
        s.records[1].sleep_ns += 1;
        let err = s.validate(7).unwrap_err().to_string();
        assert!(err.contains("stream 7") && err.contains("index 1"), "{err}");
        s.records[1].sleep_ns -= 1;
        s.records[1].start_ns = 10;
        let err = s.validate(7).unwrap_err().to_string();
        assert!(
            err.contains("index 0") && err.contains("after the next start"),
            "{err}"
        );
        let z = Stream {
            records: vec![
                Record {
                    start_ns: 5,
                    run_ns: 0,
                    sleep_ns: 0,
                },
                Record {
                    start_ns: 5,
                    run_ns: 0,
                    sleep_ns: 5,
                },
            ],
            end_ns: 10,
            ..Stream::default()
        };
        let err = z.validate(0).unwrap_err().to_string();
        assert!(
            err.contains("index 1") && err.contains("not after the previous start"),
            "{err}"
        );
    }

    #[test]
    fn header_must_match_streams() {
        let mut t = Trace {
            streams: vec![Stream::default()],
            ..Trace::default()
        };
        assert!(t.validate().is_err());
        t.sync_header();
        t.validate().unwrap();
    }
}
