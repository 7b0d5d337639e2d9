//! What a rank's main loop is made of and when it ran: its calls as shapes (the call, its
//! communicator's size, peer and root; bytes and request counts left out, so that sizes varying
//! from step to step do not break the loop), the loop `sequence` finds in them, the compute
//! before each call of the body at each iteration (exact per position, from the record's
//! counters), and the loop's time on the rank (from the end of the call before its first
//! iteration to the end of its last iteration), with the library's start-up apart.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::histogram::LogHistogram;
use crate::record::{RankRecord, NO_SITE};
use crate::sequence::{detect, Found};
use crate::site::{Call, Site};

/// A slot whose bytes vary: (slot, fewest, most bytes).
pub(crate) type SizeRange = (usize, u64, u64);

/// A recorded call: its site, the compute before it and the time in it, ns.
pub(crate) type RecordedCall = (Site, u64, u64);

/// A call without its sizes: what the loop search compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    /// The call.
    pub call: Call,
    /// Its communicator's size.
    pub comm_size: u32,
    /// The relative peer.
    pub peer: i32,
    /// The root (or `Sendrecv`'s source).
    pub root: i32,
}

impl Shape {
    /// The shape of `s`.
    pub fn of(s: &Site) -> Shape {
        Shape {
            call: s.call,
            comm_size: s.comm_size,
            peer: s.peer,
            root: s.root,
        }
    }
}

/// One kind of iteration of the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    /// Calls per iteration of this kind.
    pub calls: usize,
    /// Iterations of this kind.
    pub iterations: u64,
    /// Share of the loop's calls in them.
    pub call_share: f64,
    /// It recurs every this many iterations (`None`: once, or at irregular gaps).
    pub every: Option<u64>,
    /// How it differs from the body, in a few words (empty for the body).
    pub differs: String,
}

/// The main loop as found in the reference rank's sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopStructure {
    /// No loop holds most of the compute: the "loop" is the recorded sequence itself, one
    /// iteration from the end of `MPI_Init` to `MPI_Finalize`, replayed as it is.
    #[serde(default)]
    pub recorded: bool,
    /// The rank it was found in.
    pub rank: u64,
    /// Calls the rank made; the record keeps the last of them (`kept_calls`).
    pub calls: u64,
    /// Calls kept in order (the search saw these).
    pub kept_calls: u64,
    /// Calls before the loop (set-up), among those kept.
    pub setup_calls: u64,
    /// Calls after the loop (output, finalisation).
    pub output_calls: u64,
    /// The period the search started from, in calls.
    pub period: usize,
    /// Iterations found.
    pub iterations: u64,
    /// The kinds of iteration, the body (the most frequent) first.
    pub variants: Vec<Variant>,
    /// Share of the kept calls inside the loop.
    pub call_share: f64,
    /// Share of the rank's compute time inside the loop.
    pub compute_share: f64,
    /// Set-up before the loop, loop, output after it, on the rank's clock, ns (from the end of
    /// `MPI_Init` to the end of the last call).
    pub setup_ns: u64,
    /// See `setup_ns`.
    pub loop_ns: u64,
    /// See `setup_ns`.
    pub output_ns: u64,
    /// Slots of the body whose bytes vary between iterations: (slot, fewest, most bytes).
    pub sizes_vary: Vec<SizeRange>,
    /// Share of the rank's compute time in the body's iterations (what a replay of the body
    /// alone covers).
    #[serde(default)]
    pub body_compute_share: f64,
    /// Share of the rank's compute time in the iterations a prediction replays (every kind kept
    /// in the main loop's `kinds`, each iteration as its own kind).
    #[serde(default)]
    pub replayed_compute_share: f64,
    /// Share of the kept calls in the iterations a prediction replays.
    #[serde(default)]
    pub replayed_call_share: f64,
    /// Kinds of iteration left out of the replay (the rarest, beyond [`MAX_KIND_CALLS`]).
    #[serde(default)]
    pub kinds_left_out: usize,
    /// A prediction replays each iteration as its kind (false: the body stands for every
    /// iteration, its iterations holding at least [`BODY_STANDS_FOR_ALL`] of the loop's compute).
    #[serde(default)]
    pub kinds_replayed: bool,
}

/// The least share of the loop's compute the body's iterations hold for the body to stand for
/// every iteration in a prediction; below it each iteration is replayed as its kind.
pub(crate) const BODY_STANDS_FOR_ALL: f64 = 0.9;

/// The most calls of the kinds of iteration besides the body a profile keeps (the rarest kinds
/// beyond it are left out of the replay and said so).
pub(crate) const MAX_KIND_CALLS: usize = 8192;

/// The variants kept for the replay besides the body (1, 2, …: the most frequent first) while
/// their calls fit in [`MAX_KIND_CALLS`].
pub(crate) fn kept_kinds(f: &Found) -> usize {
    let mut calls = 0;
    (1..f.variants.len())
        .take_while(|&v| {
            calls += f.variants[v].1;
            calls <= MAX_KIND_CALLS
        })
        .count()
}

/// When a rank ran its loop and what its `MPI_Init` cost, ns from the end of `MPI_Init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankTiming {
    /// The preload library's part of `MPI_Init`: reading the trace, the calibration, the plan,
    /// creating the record (the wrapper's time less `PMPI_Init`'s), ns.
    pub startup_ns: u64,
    /// `PMPI_Init`, ns.
    pub mpi_init_ns: u64,
    /// The loop's first iteration began (its first compute), ns after `MPI_Init` returned.
    pub loop_start_ns: Option<u64>,
    /// Its last iteration ended (its last call returned).
    pub loop_end_ns: Option<u64>,
    /// Iterations timed.
    pub iterations: u64,
    /// `MPI_Barrier` calls before the loop (`None`: the record does not keep them all).
    pub barriers_before: Option<u64>,
    /// The last of them returned, ns after `MPI_Init` returned.
    pub last_barrier_exit_ns: Option<u64>,
}

impl RankTiming {
    /// The loop's time on the rank, ns.
    pub fn loop_ns(&self) -> Option<u64> {
        Some(self.loop_end_ns?.saturating_sub(self.loop_start_ns?))
    }
}

/// A rank's sequence, its shapes and the loop found in them.
pub(crate) struct RankLoop {
    /// Site numbers in order (the kept calls).
    pub seq: Vec<u16>,
    /// (start, end) counters of each kept call.
    pub times: Vec<(u64, u64)>,
    /// The loop.
    pub found: Found,
    /// The body's shapes.
    pub body: Vec<Shape>,
}

/// The shape of each kept call (an unknown site, beyond the record's table, is one shape).
fn shapes(r: &RankRecord, seq: &[u16]) -> (Vec<u32>, Vec<Option<Shape>>) {
    let sites = r.sites();
    let mut ids: HashMap<Shape, u32> = HashMap::new();
    let mut of_id: Vec<Option<Shape>> = Vec::new();
    let per_site: Vec<u32> = (sites.iter())
        .map(|s| match s {
            Some(s) => *ids.entry(Shape::of(s)).or_insert_with(|| {
                of_id.push(Some(Shape::of(s)));
                of_id.len() as u32 - 1
            }),
            None => u32::MAX,
        })
        .collect();
    let out = (seq.iter())
        .map(|&id| match id {
            NO_SITE => u32::MAX,
            id => per_site.get(usize::from(id)).copied().unwrap_or(u32::MAX),
        })
        .collect();
    (out, of_id)
}

/// The rank's main loop, if its sequence has one.
pub(crate) fn rank_loop(r: &RankRecord) -> Option<RankLoop> {
    let seq = r.sequence();
    let (sh, of_id) = shapes(r, &seq);
    let found = detect(&sh)?;
    let (f, len) = found.variants[0];
    let body = (sh[f..f + len].iter())
        .map(|&i| of_id.get(i as usize).copied().flatten())
        .collect::<Option<Vec<Shape>>>()?;
    Some(RankLoop {
        times: r.times(),
        seq,
        found,
        body,
    })
}

/// ns from the end of `MPI_Init` to counter `t`.
fn since_init(r: &RankRecord, t: u64) -> u64 {
    r.ns(t.saturating_sub(r.header.init_exit.max(r.header.pmpi_init_exit)))
}

/// Whether the record keeps every call the rank made.
fn complete(r: &RankRecord) -> bool {
    r.header.calls as usize == r.sequence_len()
}

/// When the rank ran its loop (if it has one) and what its `MPI_Init` cost.
pub(crate) fn timing(r: &RankRecord, l: Option<&RankLoop>) -> RankTiming {
    let h = &r.header;
    let pmpi = h.pmpi_init_exit.saturating_sub(h.pmpi_init_enter);
    let wrapper = h.init_exit.saturating_sub(h.init_enter);
    let mut t = RankTiming {
        startup_ns: r.ns(wrapper.saturating_sub(pmpi)),
        mpi_init_ns: r.ns(pmpi),
        loop_start_ns: None,
        loop_end_ns: None,
        iterations: 0,
        barriers_before: None,
        last_barrier_exit_ns: None,
    };
    let Some(l) = l else { return t };
    let (start, end) = (l.found.start, l.found.end);
    let begin = match start {
        0 if complete(r) => Some(h.init_exit.max(h.pmpi_init_exit)),
        0 => None,
        s => Some(l.times[s - 1].1),
    };
    t.loop_start_ns = begin.map(|b| since_init(r, b));
    t.loop_end_ns = Some(since_init(r, l.times[end - 1].1));
    t.iterations = l.found.iterations.len() as u64;
    let barrier = |i: &usize| {
        r.site(l.seq[*i])
            .is_some_and(|(s, _)| s.call == Call::Barrier)
    };
    let before: Vec<usize> = (0..start).filter(barrier).collect();
    if complete(r) {
        t.barriers_before = Some(before.len() as u64);
    }
    t.last_barrier_exit_ns = before.last().map(|&i| since_init(r, l.times[i].1));
    t
}

/// The compute before kept call `i`, ticks (`None` for the first kept call).
fn compute_before(l: &RankLoop, i: usize) -> Option<u64> {
    let prev = l.times.get(i.checked_sub(1)?)?.1;
    Some(l.times.get(i)?.0.saturating_sub(prev))
}

/// Per call of kind `v` of the loop (0: the body, of a rank whose body is the reference's
/// rotated by `rot`; a variant ≥ 1 of the reference itself, `rot` 0): the compute before it and
/// the time in it over the iterations of that kind in `l`, ns, into `hists` and `sums` (count,
/// Σ compute, Σ call time) by position.
pub(crate) fn add_samples(
    r: &RankRecord,
    l: &RankLoop,
    (v, rot): (usize, usize),
    hists: &mut [LogHistogram],
    sums: &mut [(u64, f64, f64)],
) {
    let p = l.found.variants[v].1;
    for &(f, _) in l.found.iterations.iter().filter(|(_, w)| *w == v) {
        for j in 0..p {
            let i = f + (j + rot) % p;
            let Some(c) = compute_before(l, i) else {
                continue;
            };
            let ns = r.ns(c);
            hists[j].add(ns, 1);
            let s = &mut sums[j];
            s.0 += 1;
            s.1 += ns as f64;
            s.2 += r.ns(l.times[i].1.saturating_sub(l.times[i].0)) as f64;
        }
    }
}

/// The site of each call of kind `v` (0: the body; the most frequent at its position) and the
/// calls whose bytes vary.
pub(crate) fn sites_of(
    r: &RankRecord,
    l: &RankLoop,
    v: usize,
) -> Option<(Vec<Site>, Vec<SizeRange>)> {
    let p = l.found.variants[v].1;
    let mut sites = Vec::with_capacity(p);
    let mut vary: Vec<SizeRange> = Vec::new();
    for j in 0..p {
        let mut counts: HashMap<u16, u64> = HashMap::new();
        for &(f, _) in l.found.iterations.iter().filter(|(_, w)| *w == v) {
            *counts.entry(l.seq[f + j]).or_insert(0) += 1;
        }
        let known: Vec<(Site, u64)> = (counts.iter())
            .filter_map(|(&id, &n)| r.site(id).map(|(s, _)| (s, n)))
            .collect();
        let (site, _) = known
            .iter()
            .max_by_key(|(s, n)| (*n, std::cmp::Reverse(s.bytes)))?;
        let lo = known.iter().map(|(s, _)| s.bytes).min().unwrap_or(0);
        let hi = known.iter().map(|(s, _)| s.bytes).max().unwrap_or(0);
        if lo != hi {
            vary.push((j, lo, hi));
        }
        sites.push(*site);
    }
    Some((sites, vary))
}

/// What variant `v` does beyond the body (the calls it has more or fewer of), in a few words.
fn differs(r: &RankRecord, l: &RankLoop, v: usize) -> String {
    let count = |(f, len): (usize, usize)| {
        let mut m: HashMap<Call, i64> = HashMap::new();
        for &id in &l.seq[f..f + len] {
            if let Some((s, _)) = r.site(id) {
                *m.entry(s.call).or_insert(0) += 1;
            }
        }
        m
    };
    let (body, this) = (count(l.found.variants[0]), count(l.found.variants[v]));
    let mut calls: Vec<Call> = body.keys().chain(this.keys()).copied().collect();
    calls.sort();
    calls.dedup();
    let parts: Vec<String> = (calls.iter())
        .filter_map(|c| {
            let d = this.get(c).copied().unwrap_or(0) - body.get(c).copied().unwrap_or(0);
            (d != 0).then(|| format!("{d:+} {}", c.name()))
        })
        .collect();
    if parts.is_empty() {
        "the same calls in another order".into()
    } else {
        parts.join(", ")
    }
}

/// A share to 6 decimals (what a person reads; it survives the JSON round trip).
fn share(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The reference rank's loop described.
pub(crate) fn describe(
    r: &RankRecord,
    l: &RankLoop,
    vary: Vec<(usize, u64, u64)>,
) -> LoopStructure {
    let f = &l.found;
    let n = f.iterations.len() as u64;
    let covered = f.covered().max(1) as f64;
    let variants = (0..f.variants.len())
        .map(|v| Variant {
            calls: f.variants[v].1,
            iterations: f.count(v) as u64,
            call_share: share((f.count(v) * f.variants[v].1) as f64 / covered),
            every: f.every(v).map(|k| k as u64),
            differs: if v == 0 {
                String::new()
            } else {
                differs(r, l, v)
            },
        })
        .collect();
    let compute: u64 = (f.start..f.end).filter_map(|i| compute_before(l, i)).sum();
    // Over the compute of the calls kept (all of it when the record kept every call).
    let kept: u64 = (0..l.seq.len()).filter_map(|i| compute_before(l, i)).sum();
    let total = if complete(r) {
        r.header.compute_ticks.max(1)
    } else {
        kept.max(1)
    };
    // Compute and calls of each kind's iterations, the body's first.
    let mut by_kind = vec![(0u64, 0usize); f.variants.len()];
    for &(first, v) in &f.iterations {
        let len = f.variants[v].1;
        by_kind[v].0 += (first..first + len)
            .filter_map(|i| compute_before(l, i))
            .sum::<u64>();
        by_kind[v].1 += len;
    }
    let body_compute = by_kind[0].0;
    let all_compute: u64 = by_kind.iter().map(|k| k.0).sum();
    let kinds_replayed = (body_compute as f64) < BODY_STANDS_FOR_ALL * all_compute as f64;
    // Without kinds, every iteration is replayed as the body.
    let kinds_kept = if kinds_replayed {
        kept_kinds(f)
    } else {
        f.variants.len() - 1
    };
    let replayed_compute: u64 = by_kind[..=kinds_kept].iter().map(|k| k.0).sum();
    let replayed_calls: usize = by_kind[..=kinds_kept].iter().map(|k| k.1).sum();
    let t = timing(r, Some(l));
    let last = l.times.last().map_or(0, |x| since_init(r, x.1));
    let (a, b) = (t.loop_start_ns.unwrap_or(0), t.loop_end_ns.unwrap_or(0));
    LoopStructure {
        recorded: false,
        rank: r.header.rank,
        calls: r.header.calls,
        kept_calls: l.seq.len() as u64,
        setup_calls: f.start as u64,
        output_calls: (l.seq.len() - f.end) as u64,
        period: f.period,
        iterations: n,
        variants,
        call_share: share(covered / l.seq.len().max(1) as f64),
        compute_share: (compute as f64 / total as f64).min(1.0),
        setup_ns: a,
        loop_ns: b.saturating_sub(a),
        output_ns: last.saturating_sub(b),
        sizes_vary: vary,
        body_compute_share: (body_compute as f64 / total as f64).min(1.0),
        replayed_compute_share: (replayed_compute as f64 / total as f64).min(1.0),
        replayed_call_share: share(replayed_calls as f64 / l.seq.len().max(1) as f64),
        kinds_left_out: f.variants.len() - 1 - kinds_kept,
        kinds_replayed,
    }
}

/// The least share of the compute kept that a loop must hold to be the main loop: a pattern that
/// repeats in a corner of the run (a few broadcasts of the set-up) is not the program's loop.
pub(crate) const MIN_LOOP_COMPUTE_SHARE: f64 = 0.5;

/// The recorded sequence of rank `r` as one iteration (every call, with the compute before it,
/// from the end of `MPI_Init` to `MPI_Finalize`); `None` when the record lost calls (it keeps
/// the last [`crate::record::SEQUENCE`]) or does not know a site.
pub(crate) fn recorded(r: &RankRecord) -> Option<(Vec<RecordedCall>, LoopStructure)> {
    if !complete(r) || r.header.site_overflow > 0 {
        return None;
    }
    let seq = r.sequence();
    let times = r.times();
    let begin = r.header.init_exit.max(r.header.pmpi_init_exit);
    let mut prev = begin;
    let mut calls = Vec::with_capacity(seq.len());
    for (&id, &(enter, exit)) in seq.iter().zip(&times) {
        let (site, _) = r.site(id)?;
        calls.push((
            site,
            r.ns(enter.saturating_sub(prev)),
            r.ns(exit.saturating_sub(enter)),
        ));
        prev = exit;
    }
    let last = times.last().map_or(0, |t| since_init(r, t.1));
    let n = seq.len();
    Some((
        calls,
        LoopStructure {
            recorded: true,
            rank: r.header.rank,
            calls: r.header.calls,
            kept_calls: n as u64,
            setup_calls: 0,
            output_calls: 0,
            period: n,
            iterations: 1,
            variants: vec![Variant {
                calls: n,
                iterations: 1,
                call_share: 1.0,
                every: None,
                differs: String::new(),
            }],
            call_share: 1.0,
            compute_share: 1.0,
            setup_ns: 0,
            loop_ns: last,
            output_ns: 0,
            sizes_vary: Vec::new(),
            body_compute_share: 1.0,
            replayed_compute_share: 1.0,
            replayed_call_share: 1.0,
            kinds_left_out: 0,
            kinds_replayed: false,
        },
    ))
}

/// A rank's timing when its recorded sequence is the loop: from `MPI_Init`'s end to its last
/// call (`MPI_Finalize`).
pub(crate) fn recorded_timing(r: &RankRecord) -> RankTiming {
    let mut t = timing(r, None);
    if complete(r) {
        let last = r.times().last().map_or(0, |x| since_init(r, x.1));
        t.loop_start_ns = Some(0);
        t.loop_end_ns = Some(last);
        t.iterations = 1;
        t.barriers_before = Some(0);
    }
    t
}
