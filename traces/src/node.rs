//! One node of a cluster-wide collection reduced to what [`crate::nodes`] compares
//! ([`NodeSummary`]): its pooled statistics, its longest detours, the resolution of its noise
//! ratio and whether it is usable at all; from a trace in memory or in one pass over its file
//! ([`NodeSink`], constant memory in its length, the same row).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::model::{Detour, Trace};
use crate::scan::{ChunkSink, Scan};
use crate::stats::{Stats, StatsSink};

/// A node whose streams observed less than this share of the collection says nothing.
pub(crate) const MIN_OBSERVED_SHARE: f64 = 0.1;

/// Longest detours kept per node for the repetition test of a long max (a count beyond it is
/// taken as this many: a lower bound, which can only keep a node from being flagged).
pub(crate) const TAIL_KEPT: usize = 64;

/// What one node's trace says, reduced to what the comparison needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// Node name: the trace header's host, or the file stem when hosts are missing or repeated.
    pub node: String,
    /// The trace file.
    pub file: String,
    /// Host recorded in the trace header.
    pub host: String,
    /// Streams (CPUs) in the trace.
    pub streams: usize,
    /// All streams of the node pooled (rates per CPU).
    pub stats: Stats,
    /// The longest detours of the node, ns, longest first.
    pub top_ns: Vec<u64>,
    /// Duration of the collection (the header's, else the longest stream's), ns.
    pub collection_ns: u64,
    /// What the trace lacks (ring loss, damage, truncation) where that makes it unusable (not
    /// salvaged): its numbers describe only part of what the probe saw.
    #[serde(default)]
    pub lacks: Option<String>,
    /// The share kept, where the trace lacks something but was taken (tolerated or salvaged).
    #[serde(default)]
    pub kept: Option<String>,
    /// The second-longest detour, ns (0 with fewer than two): tells a rare stall from a node
    /// whose long detours repeat.
    #[serde(default)]
    pub runner_up_ns: u64,
    /// Relative standard error of the node's noise time, √Σrun² / Σrun (compound Poisson):
    /// the resolution of its noise ratio; 0 without detours.
    #[serde(default)]
    pub noise_rel_se: f64,
    /// The [`TAIL_KEPT`] longest detours, ns, longest first (the repetition test's counts).
    #[serde(default, skip_serializing)]
    pub tail_ns: Vec<u64>,
}

impl NodeSummary {
    /// Summarises one node's trace; `top` longest detours are kept.
    pub fn of_trace(trace: &Trace, file: &str, top: usize) -> NodeSummary {
        let mut runs = RunTally::new(top);
        for r in trace.streams.iter().flat_map(|s| &s.records) {
            runs.record(r.run_ns);
        }
        runs.summary(trace, Stats::of_streams(&trace.streams), file, top)
    }

    /// Why this node's trace says nothing, or `None` when it is usable: no detours at all (no
    /// real CPU goes a whole collection without one; the probe hardly ran), or its streams
    /// observed less than [`MIN_OBSERVED_SHARE`] of the collection on average.
    pub(crate) fn unusable(&self) -> Option<String> {
        if let Some(lacks) = &self.lacks {
            return Some(format!(
                "{lacks}: its numbers describe part of what the probe saw (--salvage ranks it \
                 with what was kept)"
            ));
        }
        if let Some(why) = &self.stats.unmeasured {
            return Some(format!("its rate and noise are not measured: {why}"));
        }
        let per_stream = self.stats.duration_ns as f64 / self.streams.max(1) as f64;
        let observed = crate::units::format_ns(per_stream);
        if self.stats.count == 0 {
            return Some(format!(
                "no detours in {observed} per CPU: its probe hardly ran (see the collector's \
                 output)"
            ));
        }
        (per_stream < MIN_OBSERVED_SHARE * self.collection_ns as f64).then(|| {
            format!(
                "observed {observed} per CPU of a {} collection: its probe hardly ran (see the \
                 collector's output)",
                crate::units::format_ns(self.collection_ns as f64)
            )
        })
    }
}

/// What a node's row needs of its run-times besides their statistics: the longest few and
/// the sums behind the relative standard error of the noise time (exact, in integers).
#[derive(Debug, Clone)]
struct RunTally {
    /// The `keep` longest run-times so far (a min-heap).
    longest: BinaryHeap<Reverse<u64>>,
    keep: usize,
    sum: u128,
    sum_sq: u128,
}

impl RunTally {
    /// An empty tally keeping the `top` longest run-times (at least [`TAIL_KEPT`]: the
    /// runner-up and the repetition test's tail).
    fn new(top: usize) -> RunTally {
        RunTally {
            longest: BinaryHeap::new(),
            keep: top.max(TAIL_KEPT),
            sum: 0,
            sum_sq: 0,
        }
    }

    #[inline]
    fn record(&mut self, run_ns: u64) {
        self.sum += u128::from(run_ns);
        self.sum_sq += u128::from(run_ns) * u128::from(run_ns);
        if self.longest.len() < self.keep {
            self.longest.push(Reverse(run_ns));
        } else if self.longest.peek().is_some_and(|m| m.0 < run_ns) {
            self.longest.pop();
            self.longest.push(Reverse(run_ns));
        }
    }

    /// The row of the node whose trace (records or frame) is `trace`.
    fn summary(self, trace: &Trace, stats: Stats, file: &str, top: usize) -> NodeSummary {
        let (sum, sum_sq) = (self.sum as f64, self.sum_sq as f64);
        let noise_rel_se = if sum > 0.0 { sum_sq.sqrt() / sum } else { 0.0 };
        // Ascending in `Reverse`: the longest first.
        let mut runs: Vec<u64> = (self.longest.into_sorted_vec().into_iter())
            .map(|r| r.0)
            .collect();
        let runner_up_ns = runs.get(1).copied().unwrap_or(0);
        let tail_ns = runs.clone();
        runs.truncate(top);
        NodeSummary {
            node: String::new(),
            file: file.to_string(),
            host: trace.header.host.clone(),
            streams: trace.streams.len(),
            stats,
            top_ns: runs,
            collection_ns: trace.header.duration_ns.max(
                (trace.streams.iter().map(|s| s.duration_ns()))
                    .max()
                    .unwrap_or(0),
            ),
            lacks: None,
            kept: None,
            runner_up_ns,
            noise_rel_se,
            tail_ns,
        }
    }
}

/// A node's row gathered in one pass over its trace file, in constant memory in its length
/// ([`crate::scan::scan_trace`]); the same row as [`NodeSummary::of_trace`] of the trace read
/// whole.
#[derive(Debug)]
pub struct NodeSink {
    stats: StatsSink,
    runs: RunTally,
    top: usize,
}

impl NodeSink {
    /// A sink for a row listing the `top` longest detours.
    pub fn new(top: usize) -> NodeSink {
        NodeSink {
            stats: StatsSink::new(Vec::new()),
            runs: RunTally::new(top),
            top,
        }
    }

    /// The row of the node whose trace `scan` read, from file `file`.
    pub fn summary(self, scan: &Scan, file: &str) -> NodeSummary {
        let stats = self.stats.stats(scan).overall;
        self.runs.summary(&scan.frame, stats, file, self.top)
    }
}

impl ChunkSink for NodeSink {
    fn take(&mut self, stream: usize, detours: Vec<Detour>) {
        for d in &detours {
            self.runs.record(d.run_ns);
        }
        self.stats.take(stream, detours);
    }
}
