//! The per-source tallies of an attribution in a few passes over it ([`DetourSource`]: a
//! sidecar file read detour by detour, or one in memory), holding per source and CPU, not per
//! detour. The first pass counts, sums and finds each source's, gap series' and combination's
//! extremes; the medians are then exact by [`Selection`] (one or two more passes for run-times
//! below 268 ms, three for gaps up to 73 min); the periods from the occurrence times binned
//! into the periodogram's own segments and bins ([`Segments`], in the second pass), which is
//! all the periodogram reads of them. Every figure equals the one a sort of all values gives.
//!
//! What stays: per source, its CPUs' last starts (for the gaps) and the kept segments' bins
//! (≤ 16 per source, ≤ 1 MiB each, fewer where the source is rare); per combination, four
//! numbers; per series still unresolved, 2¹⁴ counts during a pass.

use std::collections::BTreeMap;

use crate::error::TraceError;
use crate::periodogram::{FindPeriods, Period, Segments};
use crate::selection::Selection;
use crate::sidecar::AttributedDetour;
use crate::sidecar_reader::{DetourSource, Frame};

/// The sources of one detour, shown one by one as (label, first appearance, time), ns.
pub(crate) type Shares<'a> = &'a dyn Fn(&AttributedDetour, &mut dyn FnMut(&str, u64, u64));

/// What to tally.
pub struct Plan<'a> {
    /// The sources of a detour (individual sources or its combination).
    pub shares: Shares<'a>,
    /// Only the detours with run-times in `[lo, hi)`; `None`: every detour.
    pub runs: Option<(u64, u64)>,
    /// How to find each source's periods in its binned occurrences (`None`: not analysed): the
    /// spectrum (`periodogram::periods_binned`, feature `periodogram`) is the caller's to pass,
    /// so that nothing else here reaches the FFT.
    pub periods: Option<FindPeriods>,
    /// Combinations with a median: the first this many by total time, largest first (ties
    /// by label).
    pub top_combinations: usize,
}

impl std::fmt::Debug for Plan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("runs", &self.runs)
            .field("periods", &self.periods.is_some())
            .field("top_combinations", &self.top_combinations)
            .finish_non_exhaustive()
    }
}

/// One source's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTally {
    /// Detours it took part in.
    pub count: u64,
    /// Its total time, ns.
    pub total_ns: u64,
    /// Shortest time in one detour, ns.
    pub min_ns: u64,
    /// Median time per detour (the value at index count/2 in sorted order), ns.
    pub median_ns: u64,
    /// Longest time in one detour, ns.
    pub max_ns: u64,
    /// Median of the gaps between consecutive occurrences on one CPU (`None`: no gap).
    pub median_gap_ns: Option<u64>,
    /// Its periods (`None`: not analysed).
    pub periods: Option<Vec<Period>>,
}

/// One combination's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct CombinationTally {
    /// Detours with it.
    pub count: u64,
    /// Their total run-time, ns.
    pub total_ns: u64,
    /// Their median run-time, ns (only for the top combinations of the plan).
    pub median_ns: Option<u64>,
}

/// Everything tallied.
#[derive(Debug, Clone)]
pub struct Tallies {
    /// The sidecar without its detours.
    pub frame: Frame,
    /// Detours tallied.
    pub detours: u64,
    /// Their total run-time, ns.
    pub noise_ns: u64,
    /// Of which kernel events explain, ns.
    pub explained_ns: u64,
    /// Time no event explains per CPU entry of the frame, ns.
    pub unattributed_ns: Vec<u64>,
    /// Per source label.
    pub sources: BTreeMap<String, SourceTally>,
    /// Per combination label.
    pub combinations: BTreeMap<String, CombinationTally>,
    /// Passes over the source.
    pub passes: usize,
}

/// A source while it is tallied.
struct Source {
    count: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
    /// Last occurrence per CPU (reset each pass).
    last: BTreeMap<u32, u64>,
    gaps: u64,
    gap_min: u64,
    gap_max: u64,
    times_id: usize,
    gaps_id: Option<usize>,
    /// Position of each CPU among the source's (for `segments`).
    positions: BTreeMap<u32, usize>,
    segments: Option<Segments>,
}

impl Source {
    fn new() -> Self {
        Source {
            count: 0,
            total_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            last: BTreeMap::new(),
            gaps: 0,
            gap_min: u64::MAX,
            gap_max: 0,
            times_id: 0,
            gaps_id: None,
            positions: BTreeMap::new(),
            segments: None,
        }
    }

    /// The gap since this CPU's last occurrence (none for its first), and the new last.
    fn gap(&mut self, cpu: u32, start: u64) -> Option<u64> {
        (self.last.insert(cpu, start)).map(|last| start.saturating_sub(last))
    }
}

/// A combination while it is tallied.
struct Combination {
    count: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
    id: Option<usize>,
}

/// The state of all passes.
struct Acc {
    detours: u64,
    noise_ns: u64,
    explained_ns: u64,
    unattributed_ns: Vec<u64>,
    sources: BTreeMap<String, Source>,
    combinations: BTreeMap<String, Combination>,
}

fn kept(plan: &Plan, d: &AttributedDetour) -> bool {
    plan.runs
        .is_none_or(|(lo, hi)| d.run_ns >= lo && d.run_ns < hi)
}

impl Acc {
    /// The first pass: counts, sums, extremes.
    fn first(&mut self, plan: &Plan, entry: usize, cpu: u32, d: &AttributedDetour) {
        if !kept(plan, d) {
            return;
        }
        self.detours += 1;
        self.noise_ns += d.run_ns;
        self.explained_ns += d.explained_ns.min(d.run_ns);
        if self.unattributed_ns.len() <= entry {
            self.unattributed_ns.resize(entry + 1, 0);
        }
        self.unattributed_ns[entry] += d.unattributed_ns();
        if !self.combinations.contains_key(&d.combination) {
            let c = Combination {
                count: 0,
                total_ns: 0,
                min_ns: u64::MAX,
                max_ns: 0,
                id: None,
            };
            self.combinations.insert(d.combination.clone(), c);
        }
        if let Some(c) = self.combinations.get_mut(&d.combination) {
            c.count += 1;
            c.total_ns += d.run_ns;
            c.min_ns = c.min_ns.min(d.run_ns);
            c.max_ns = c.max_ns.max(d.run_ns);
        }
        let sources = &mut self.sources;
        (plan.shares)(d, &mut |label, start, ns| {
            if !sources.contains_key(label) {
                sources.insert(label.to_string(), Source::new());
            }
            let Some(s) = sources.get_mut(label) else {
                return;
            };
            s.count += 1;
            s.total_ns += ns;
            s.min_ns = s.min_ns.min(ns);
            s.max_ns = s.max_ns.max(ns);
            if let Some(gap) = s.gap(cpu, start) {
                s.gaps += 1;
                s.gap_min = s.gap_min.min(gap);
                s.gap_max = s.gap_max.max(gap);
            }
        });
    }

    /// A later pass: every value offered to the selection, occurrences binned (`bin`).
    fn again(
        &mut self,
        plan: &Plan,
        sel: &mut Selection,
        bin: bool,
        cpu: u32,
        d: &AttributedDetour,
    ) {
        if !kept(plan, d) {
            return;
        }
        if let Some(id) = self.combinations.get(&d.combination).and_then(|c| c.id) {
            sel.offer(id, d.run_ns);
        }
        let sources = &mut self.sources;
        (plan.shares)(d, &mut |label, start, ns| {
            let Some(s) = sources.get_mut(label) else {
                return;
            };
            sel.offer(s.times_id, ns);
            let gap = s.gap(cpu, start);
            if let (Some(id), Some(gap)) = (s.gaps_id, gap) {
                sel.offer(id, gap);
            }
            if let (true, Some(seg)) = (bin, s.segments.as_mut()) {
                if let Some(&p) = s.positions.get(&cpu) {
                    seg.add(p, start);
                }
            }
        });
    }

    /// The series whose k-th values are wanted, and (with `periods`) the segments to bin.
    fn prepare(&mut self, plan: &Plan, frame: &Frame) -> Selection {
        let mut sel = Selection::new();
        let windows: BTreeMap<u32, (u64, u64)> = (frame.attribution.cpus.iter())
            .map(|c| (c.cpu, (c.begin_ns, c.end_ns)))
            .collect();
        for s in self.sources.values_mut() {
            s.times_id = sel.add(s.count / 2, s.min_ns, s.max_ns);
            if s.gaps > 0 {
                s.gaps_id = Some(sel.add(s.gaps / 2, s.gap_min, s.gap_max));
            }
            if plan.periods.is_some() {
                let w: Vec<(u64, u64)> = (s.last.keys())
                    .map(|cpu| windows.get(cpu).copied().unwrap_or_default())
                    .collect();
                s.positions = s.last.keys().enumerate().map(|(i, &c)| (c, i)).collect();
                s.segments = Some(Segments::new(&w));
            }
            s.last.clear();
        }
        let mut top: Vec<(&String, &Combination)> = self.combinations.iter().collect();
        top.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
        let top: Vec<String> = (top.iter().take(plan.top_combinations))
            .map(|(k, _)| (*k).clone())
            .collect();
        for k in top {
            if let Some(c) = self.combinations.get_mut(&k) {
                c.id = Some(sel.add(c.count / 2, c.min_ns, c.max_ns));
            }
        }
        sel
    }
}

/// Tallies `src` by `plan` (see the module for the passes).
pub fn tally(src: &dyn DetourSource, plan: &Plan) -> Result<Tallies, TraceError> {
    let mut acc = Acc {
        detours: 0,
        noise_ns: 0,
        explained_ns: 0,
        unattributed_ns: Vec::new(),
        sources: BTreeMap::new(),
        combinations: BTreeMap::new(),
    };
    let frame = src.pass(&mut |entry: usize, cpu: u32, d: &AttributedDetour| {
        acc.first(plan, entry, cpu, d);
        Ok(())
    })?;
    acc.unattributed_ns.resize(frame.detours.len(), 0);
    let mut sel = acc.prepare(plan, &frame);
    let mut passes = 1;
    let mut bin = plan.periods.is_some();
    while sel.pending() || bin {
        sel.begin_pass();
        let again = src.pass(&mut |_: usize, cpu: u32, d: &AttributedDetour| {
            acc.again(plan, &mut sel, bin, cpu, d);
            Ok(())
        })?;
        if again != frame {
            return Err(TraceError::Argument(
                "the attribution changed while it was read".into(),
            ));
        }
        for s in acc.sources.values_mut() {
            s.last.clear();
        }
        sel.end_pass();
        bin = false;
        passes += 1;
    }
    let sources = (acc.sources.into_iter())
        .map(|(label, s)| {
            let tally = SourceTally {
                count: s.count,
                total_ns: s.total_ns,
                min_ns: s.min_ns,
                median_ns: sel.value(s.times_id).unwrap_or(s.min_ns),
                max_ns: s.max_ns,
                median_gap_ns: s.gaps_id.and_then(|id| sel.value(id)),
                periods: (plan.periods.zip(s.segments.as_ref()))
                    .map(|(find, seg)| find(&seg.binned().collect::<Vec<_>>())),
            };
            (label, tally)
        })
        .collect();
    let combinations = (acc.combinations.into_iter())
        .map(|(label, c)| {
            let tally = CombinationTally {
                count: c.count,
                total_ns: c.total_ns,
                median_ns: c.id.and_then(|id| sel.value(id)),
            };
            (label, tally)
        })
        .collect();
    Ok(Tallies {
        frame,
        detours: acc.detours,
        noise_ns: acc.noise_ns,
        explained_ns: acc.explained_ns,
        unattributed_ns: acc.unattributed_ns,
        sources,
        combinations,
        passes,
    })
}
