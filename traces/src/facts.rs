//! What a replay of some streams must know of the whole trace, gathered in the one pass of
//! [`crate::scan`] that reads those streams ([`crate::load::read_replayed`]): the content
//! digest over every stream's records in stream order (each stream's CRCs gathered apart, as
//! the chunks interleave, then combined: [`crate::digest::ContentDigest`]), each stream's
//! statistics (its histogram, as [`Stats::of_stream`]), the integrity of the whole file and
//! every warning [`crate::Loaded::warnings`] gives. Each equals what the trace read whole
//! gives, in the memory of one histogram and two CRCs per stream.

use std::ops::Range;

use crate::digest::{ContentDigest, RecordDigest};
use crate::error::TraceError;
use crate::format::Completeness;
use crate::integrity::{Integrity, Salvage};
use crate::model::Detour;
use crate::sanity::{self, Observation};
use crate::scan::Scan;
use crate::stats::{Stats, StatsSink};

/// The whole trace's digest, statistics, integrity and warnings.
#[derive(Debug, Clone)]
pub struct Facts {
    /// [`crate::digest::content_digest`] of the whole trace.
    pub digest: String,
    /// Every stream's statistics, in stream order ([`Stats::of_stream`]).
    pub stats: Vec<Stats>,
    integrity: Integrity,
    warnings: Vec<String>,
}

impl Facts {
    /// Streams in the trace.
    pub fn streams(&self) -> usize {
        self.stats.len()
    }

    /// What the whole trace lacks ([`crate::Loaded::integrity`]).
    pub fn integrity(&self) -> &Integrity {
        &self.integrity
    }

    /// The one policy of every reader, as [`crate::Loaded::accept`] of the whole trace.
    pub fn accept(&self, name: &str, salvage: Salvage) -> Result<Integrity, TraceError> {
        self.integrity.clone().check(name, salvage)
    }

    /// [`crate::Loaded::warnings`] of the whole trace.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The first stream whose CPU was busy with other work ([`sanity::busy`]), in stream
    /// order.
    pub fn busy(&self) -> Option<String> {
        // A stream without an observed time has no noise ratio to judge (`Stats::unmeasured`).
        self.stats
            .iter()
            .filter(|s| s.unmeasured.is_none())
            .find_map(|s| {
                Observation {
                    cpu: s.cpu.unwrap_or(0),
                    duration_ns: s.duration_ns,
                    noise_ns: s.noise_ns,
                    ..Observation::default()
                }
                .busy()
            })
    }

    /// (noise ratio, detours per second per CPU) of the streams `streams` pooled (clamped to
    /// the trace's): [`crate::Trace::noise_ratio`] and [`crate::Trace::detours_per_s`] over
    /// all of them, [`Stats::of_streams`]' over some.
    pub fn pooled(&self, streams: Range<usize>) -> (f64, f64) {
        let end = streams.end.min(self.stats.len());
        let some = &self.stats[streams.start.min(end)..end];
        let noise: u64 = some.iter().map(|s| s.noise_ns).sum();
        let count: u64 = some.iter().map(|s| s.count).sum();
        let time: u64 = some.iter().map(|s| s.duration_ns).sum();
        if time == 0 {
            (0.0, 0.0)
        } else {
            (
                noise as f64 / time as f64,
                count as f64 / (time as f64 / 1e9),
            )
        }
    }
}

/// Gathers the [`Facts`] of a trace from its chunks, in the order of the file.
#[derive(Debug, Default)]
pub struct FactsSink {
    stats: StatsSink,
    digests: Vec<RecordDigest>,
}

impl FactsSink {
    /// Counts the detours of one chunk of stream `stream`.
    pub fn record(&mut self, stream: usize, detours: &[Detour]) {
        self.stats.record(stream, detours);
        if self.digests.len() <= stream {
            self.digests.resize_with(stream + 1, RecordDigest::default);
        }
        self.digests[stream].update(detours);
    }

    /// The facts of the trace whose frame `scan` holds.
    pub fn facts(&self, scan: &Scan) -> Facts {
        let stats = self.stats.stats(scan).streams;
        let mut digest = ContentDigest::default();
        let none = RecordDigest::default();
        for (i, s) in scan.frame.streams.iter().enumerate() {
            digest.push(s, self.digests.get(i).unwrap_or(&none));
        }
        let integrity = scan.integrity();
        let windows_known = matches!(scan.completeness, Completeness::Complete);
        let warnings = (integrity.warning().into_iter())
            .chain(sanity::warnings_from(&scan.frame, &stats, windows_known))
            .collect();
        Facts {
            digest: digest.finish(),
            stats,
            integrity,
            warnings,
        }
    }
}
