//! What a loaded trace lacks, and the one policy every reader applies to it.
//!
//! A trace can lack detours three ways: the collector's ring was full and dropped some (counted
//! per stream in the end chunk as `lost_detours` and `lost_ns`), a chunk is damaged (the reader
//! keeps every chunk before it), or the file ends without its end chunk (truncated: the writer
//! was killed). Every reader treats them alike through [`Integrity`]: it refuses such a trace
//! with one line that names what is missing and that `--salvage` goes on ([`Salvage::Keep`]);
//! salvaged, it prints and records the share kept beside its numbers.
//!
//! One loss is tolerated without `--salvage`: a ring that dropped at most
//! [`TOLERATED_LOSS_SHARE`] of a stream's detours *and* of its noise time. A slowdown is at
//! most proportional to the noise injected, so such a loss moves any number computed from the
//! trace by at most 0.1 % of itself, far inside the intervals every measurement carries; the
//! share kept is still printed.

use serde::{Deserialize, Serialize};

use crate::error::TraceError;
use crate::format::Completeness;
use crate::model::{Stream, Trace};

/// The largest share of a stream's detours, and of its noise time, that its ring may have
/// dropped for a reader to accept the trace without `--salvage`.
pub const TOLERATED_LOSS_SHARE: f64 = 1e-3;

/// The note under which a trace written from a salvaged one names the defect it was salvaged
/// from (a damaged or truncated file's remainder is a complete file: the note carries the loss).
pub const SALVAGED_NOTE: &str = "salvaged";

/// Whether a reader goes on with a trace that lacks detours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Salvage {
    /// Refuse it with one line naming what is missing (the default).
    #[default]
    Refuse,
    /// Go on with what was kept, printing the share kept (`--salvage`).
    Keep,
}

impl Salvage {
    /// The choice a `--salvage` flag (or `JITTER_SALVAGE=1`) makes.
    pub fn from_flag(salvage: bool) -> Salvage {
        if salvage {
            Salvage::Keep
        } else {
            Salvage::Refuse
        }
    }
}

/// What one stream kept and what its ring dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StreamLoss {
    /// CPU of the stream.
    pub cpu: u32,
    /// Detours in the trace.
    pub detours_kept: u64,
    /// Detours the collector's ring dropped (`lost_detours`).
    pub detours_lost: u64,
    /// Noise time of the detours kept, ns.
    pub noise_kept_ns: u64,
    /// Noise time of the detours dropped (`lost_ns`), ns.
    pub noise_lost_ns: u64,
}

impl StreamLoss {
    /// The counts of one stream, its losses from its counters.
    pub fn of(stream: &Stream) -> StreamLoss {
        let counter = |k: &str| stream.counters.get(k).copied().unwrap_or(0);
        StreamLoss {
            cpu: stream.cpu,
            detours_kept: stream.records.len() as u64,
            detours_lost: counter("lost_detours"),
            noise_kept_ns: stream.noise_ns(),
            noise_lost_ns: counter("lost_ns"),
        }
    }

    /// Share of the detours kept (1 when nothing was seen).
    pub fn detour_share(&self) -> f64 {
        share(self.detours_kept, self.detours_lost)
    }

    /// Share of the noise time kept (1 when there was none).
    pub fn time_share(&self) -> f64 {
        share(self.noise_kept_ns, self.noise_lost_ns)
    }

    /// The ring dropped no more than [`TOLERATED_LOSS_SHARE`] of the detours and of the time.
    pub(crate) fn tolerated(&self) -> bool {
        self.detours_lost == 0
            || (1.0 - self.detour_share() <= TOLERATED_LOSS_SHARE
                && 1.0 - self.time_share() <= TOLERATED_LOSS_SHARE)
    }
}

/// The damage or truncation of a trace read with `completeness`, or the defect its `notes` say
/// it was salvaged from; `None` for a whole file.
pub(crate) fn defect(
    notes: &std::collections::BTreeMap<String, String>,
    completeness: &Completeness,
) -> Option<String> {
    completeness.warning().or_else(|| {
        (notes.get(SALVAGED_NOTE)).map(|d| format!("written from a salvaged trace ({d})"))
    })
}

/// `kept / (kept + lost)`, 1 when both are 0.
fn share(kept: u64, lost: u64) -> f64 {
    let all = kept as f64 + lost as f64;
    if all == 0.0 {
        1.0
    } else {
        kept as f64 / all
    }
}

/// Everything a loaded trace lacks; serialised into the JSON reports computed from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Integrity {
    /// Detours in the trace, all streams.
    pub detours_kept: u64,
    /// Detours the collector's rings dropped, all streams.
    pub detours_lost: u64,
    /// Noise time kept, ns.
    pub noise_kept_ns: u64,
    /// Noise time dropped, ns.
    pub noise_lost_ns: u64,
    /// Share of the detours kept, where it is known (not after damage or truncation: the
    /// records past it are not counted anywhere readable).
    pub detour_share_kept: Option<f64>,
    /// Share of the noise time kept, where it is known.
    pub time_share_kept: Option<f64>,
    /// Damage or truncation, one line; `None` when the file was read to its end chunk.
    pub defect: Option<String>,
    /// Whether a reader went on with a trace it would refuse by default.
    pub salvaged: bool,
    /// Per stream, what it kept and lost.
    #[serde(skip)]
    pub streams: Vec<StreamLoss>,
}

impl Integrity {
    /// What `trace`, read with `completeness`, lacks.
    pub fn of(trace: &Trace, completeness: &Completeness) -> Integrity {
        let defect = defect(&trace.notes, completeness);
        Integrity::of_streams(trace.streams.iter().map(StreamLoss::of).collect(), defect)
    }

    /// What a collection of `streams` lacks, with its file's `defect` if any (the collector
    /// judges its own rings' loss with this before any reader does).
    pub fn of_streams(streams: Vec<StreamLoss>, defect: Option<String>) -> Integrity {
        let sum = |f: fn(&StreamLoss) -> u64| streams.iter().map(f).sum::<u64>();
        let (detours_kept, detours_lost) = (sum(|s| s.detours_kept), sum(|s| s.detours_lost));
        let (noise_kept_ns, noise_lost_ns) = (sum(|s| s.noise_kept_ns), sum(|s| s.noise_lost_ns));
        let known = defect.is_none();
        Integrity {
            detours_kept,
            detours_lost,
            noise_kept_ns,
            noise_lost_ns,
            detour_share_kept: known.then(|| share(detours_kept, detours_lost)),
            time_share_kept: known.then(|| share(noise_kept_ns, noise_lost_ns)),
            defect,
            salvaged: false,
            streams,
        }
    }

    /// Nothing is missing at all.
    pub fn is_whole(&self) -> bool {
        self.defect.is_none() && self.detours_lost == 0
    }

    /// Whether a reader takes the trace without `--salvage`: no damage, no truncation, and
    /// every stream's ring loss within [`TOLERATED_LOSS_SHARE`].
    pub fn acceptable(&self) -> bool {
        self.defect.is_none() && self.streams.iter().all(StreamLoss::tolerated)
    }

    /// What is missing, one line (without the file's name); `None` when nothing is.
    pub fn problem(&self) -> Option<String> {
        let ring = self.ring_loss();
        match (&self.defect, ring) {
            (None, None) => None,
            (Some(d), None) => Some(d.clone()),
            (None, Some(r)) => Some(r),
            (Some(d), Some(r)) => Some(format!("{d}; {r}")),
        }
    }

    /// The rings' loss, one line naming the worst stream; `None` when nothing was dropped.
    fn ring_loss(&self) -> Option<String> {
        let lossy: Vec<&StreamLoss> = self.streams.iter().filter(|s| s.detours_lost > 0).collect();
        let worst = lossy
            .iter()
            .min_by(|a, b| a.detour_share().total_cmp(&b.detour_share()))?;
        let on = if lossy.len() == 1 {
            format!("on CPU {}", worst.cpu)
        } else {
            format!("on {} CPUs, worst CPU {}", lossy.len(), worst.cpu)
        };
        Some(format!(
            "the collector's ring dropped {} of {} detours ({} of noise) {on}: {} of {} detours \
             kept there",
            self.detours_lost,
            self.detours_kept + self.detours_lost,
            ms(self.noise_lost_ns),
            worst.detours_kept,
            worst.detours_kept + worst.detours_lost,
        ))
    }

    /// The share kept, one line, printed beside every number computed from a trace that lacks
    /// anything; `None` for a whole trace.
    pub fn kept_line(&self) -> Option<String> {
        if self.is_whole() {
            return None;
        }
        Some(match (self.detour_share_kept, self.time_share_kept) {
            (Some(d), Some(t)) => format!(
                "share kept: {} of {} detours ({} %), {} % of the noise time",
                self.detours_kept,
                self.detours_kept + self.detours_lost,
                pct(d),
                pct(t)
            ),
            _ => format!(
                "share kept: the {} detours before the defect, of a whole the file no longer \
                 counts",
                self.detours_kept
            ),
        })
    }

    /// What is missing and the share kept, one line for a reader's warnings; `None` for a
    /// whole trace.
    pub fn warning(&self) -> Option<String> {
        Some(format!("{} ({})", self.problem()?, self.kept_line()?))
    }

    /// Applies the policy: `Ok` with the integrity (marked salvaged where `salvage` made the
    /// difference) or one line naming `name`, what is missing and that `--salvage` goes on.
    pub fn check(mut self, name: &str, salvage: Salvage) -> Result<Integrity, TraceError> {
        if self.acceptable() {
            return Ok(self);
        }
        match salvage {
            Salvage::Keep => {
                self.salvaged = true;
                Ok(self)
            }
            Salvage::Refuse => Err(TraceError::Incomplete(format!(
                "{name}: {}; refused (--salvage goes on with what was kept and prints the \
                 share kept)",
                self.problem().unwrap_or_default()
            ))),
        }
    }
}

/// A duration in ms, three decimals.
fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// A share as a percentage: two decimals, three significant digits below 1 %, and four
/// decimals just under 100 % (so that a small share never reads 0.00 nor a loss 100.00).
fn pct(share: f64) -> String {
    let p = share * 100.0;
    if p > 0.0 && p < 1.0 {
        let decimals = (2.0 - p.log10().floor()).clamp(2.0, 12.0) as usize;
        format!("{p:.decimals$}")
    } else if p > 99.99 && p < 100.0 {
        format!("{p:.4}")
    } else {
        format!("{p:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Record;

    fn stream(cpu: u32, detours: u64, run_ns: u64, lost: u64, lost_ns: u64) -> Stream {
        let records = (0..detours)
            .map(|i| Record {
                start_ns: i * 1_000_000,
                run_ns,
                sleep_ns: 1_000_000 - run_ns,
            })
            .collect();
        let mut s = Stream {
            cpu,
            begin_ns: 0,
            end_ns: detours * 1_000_000,
            records,
            ..Stream::default()
        };
        s.counters.insert("lost_detours".into(), lost);
        s.counters.insert("lost_ns".into(), lost_ns);
        s
    }

    fn trace(streams: Vec<Stream>) -> Trace {
        Trace {
            streams,
            ..Trace::default()
        }
    }

    #[test]
    fn a_whole_trace_passes_and_prints_nothing() {
        let i = Integrity::of(
            &trace(vec![stream(0, 10, 1000, 0, 0)]),
            &Completeness::Complete,
        );
        assert!(i.is_whole() && i.acceptable());
        assert_eq!(i.kept_line(), None);
        assert_eq!(i.clone().check("a.jtr", Salvage::Refuse).unwrap(), i);
    }

    #[test]
    fn ring_loss_is_refused_with_its_counts_and_salvaged_with_its_share() {
        // The case: `--ring 2 --drain-ms 0` kept 2 of 14 770 detours.
        let t = trace(vec![stream(3, 2, 1000, 14_768, 14_700_000)]);
        let i = Integrity::of(&t, &Completeness::Complete);
        assert!(!i.acceptable());
        let e = i.clone().check("r.jtr", Salvage::Refuse).unwrap_err();
        assert_eq!(
            e.to_string(),
            "r.jtr: the collector's ring dropped 14768 of 14770 detours (14.700 ms of noise) on \
             CPU 3: 2 of 14770 detours kept there; refused (--salvage goes on with what was \
             kept and prints the share kept)"
        );
        let kept = i.check("r.jtr", Salvage::Keep).unwrap();
        assert!(kept.salvaged);
        assert_eq!(
            kept.kept_line().unwrap(),
            "share kept: 2 of 14770 detours (0.0135 %), 0.0136 % of the noise time"
        );
        assert_eq!(kept.detour_share_kept, Some(2.0 / 14_770.0));
    }

    #[test]
    fn a_loss_within_the_tolerance_of_detours_and_time_is_taken_and_shown() {
        // 1 of 1001 detours (0.0999 %), 1 µs of 1.001 ms: within both bounds.
        let t = trace(vec![stream(0, 1000, 1000, 1, 1000)]);
        let i = Integrity::of(&t, &Completeness::Complete).check("t.jtr", Salvage::Refuse);
        let i = i.unwrap();
        assert!(!i.salvaged);
        assert_eq!(
            i.kept_line().unwrap(),
            "share kept: 1000 of 1001 detours (99.90 %), 99.90 % of the noise time"
        );
        // The same count of detours holding more time than the bound is refused: a long
        // stall lost counts by its time.
        let long = trace(vec![stream(0, 1000, 1000, 1, 2000)]);
        assert!(!Integrity::of(&long, &Completeness::Complete).acceptable());
        // Two detours of 1001 (0.2 %) with little time: refused by the count.
        let many = trace(vec![stream(0, 999, 1000, 2, 10)]);
        assert!(!Integrity::of(&many, &Completeness::Complete).acceptable());
        // Each stream on its own: a whole stream does not hide a lossy one.
        let mixed = trace(vec![
            stream(0, 100_000, 1000, 0, 0),
            stream(1, 10, 1000, 5, 5000),
        ]);
        let i = Integrity::of(&mixed, &Completeness::Complete);
        assert!(!i.acceptable());
        assert!(i
            .problem()
            .unwrap()
            .contains("on CPU 1: 10 of 15 detours kept there"));
    }

    #[test]
    fn damage_and_truncation_are_refused_and_their_share_is_unknown() {
        let t = trace(vec![stream(0, 4987, 1000, 0, 0)]);
        let damaged = Completeness::Damaged {
            records: 4987,
            error: TraceError::Chunk {
                chunk: 1,
                offset: 99,
                reason: "checksum mismatch".into(),
            },
        };
        let i = Integrity::of(&t, &damaged);
        let e = i.clone().check("d.jtr", Salvage::Refuse).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d.jtr: chunk 1 (at byte 99) is damaged: checksum mismatch; kept the 4987 records \
             before it; refused (--salvage goes on with what was kept and prints the share kept)"
        );
        let kept = i.check("d.jtr", Salvage::Keep).unwrap();
        assert_eq!(kept.detour_share_kept, None);
        assert!(kept
            .kept_line()
            .unwrap()
            .starts_with("share kept: the 4987 detours before the defect"));
        let truncated = Completeness::Truncated { records: 4987 };
        let e = Integrity::of(&t, &truncated)
            .check("t.jtr", Salvage::Refuse)
            .unwrap_err();
        assert!(e
            .to_string()
            .starts_with("t.jtr: trace is truncated after 4987 records (no end chunk); refused"));
    }
}
