//! What a prediction will cost, estimated before it starts, and whether to start it.
//!
//! The simulation's work is counted in *events*: each simulated rank costs one event per phase
//! (its two passes), plus one per detour it walks in that phase (the trace's detour density ×
//! the phase's duration; without resyncs, the slowest rank's phase: [`SLOWEST_RANK_FACTOR`])
//! and [`RESYNC_EVENTS`] per resync. One event costs [`NS_PER_EVENT`] on
//! one core (measured, docs/BENCHMARKS.md `### Cost estimate`). Memory is one
//! [`des::RANK_STATE_BYTES`] per simulated rank of the largest rank count, plus the plans'
//! records. The indexed engine's fast path (S = 1, no timer errors) searches instead of
//! walking: a rank-phase costs 1 event plus log2(1 + d) for the d detours passed, at
//! [`INDEXED_NS_PER_EVENT`], its ranks [`des::INDEXED_RANK_BYTES`] each, plus the index. Under
//! MPI every process estimates its own share. An algorithmic collective adds three events per
//! round and collective to every rank-phase ([`collective_events`]), costed as each round in
//! closed form ([`COLLECTIVE_NS_PER_ROUND`]) and one question ([`COLLECTIVE_NS_PER_ASK`]) per
//! detour due while the rank is in its collectives, and [`collective::BYTES_PER_RANK`]
//! per rank ([`collective::MPI_BYTES_PER_RANK`] more under MPI). The indexed engine with an offloaded collective simulates ranks that replay one
//! plan from one start once (sync once, phase, every: one per plan), and so does a symmetric
//! collective ([`collective::symmetric`]) on one plan. The estimate errs on the high side.

use std::fmt;

use jitter_emulator::SyncMode;
use jitter_trace::Record;

#[cfg(test)]
use super::collective::CommModel;
use super::collective::{self, Algorithm};
use super::des;
use super::input::TraceInput;
use super::ranks::share;
use super::simulation::{index_allowed, DesConfig};
use super::spec::PredictSpec;
use crate::spec::Model;

/// Cost of one event on one core, ns (measured by `scripts/bench-predict.sh`: the walk of a dense trace,
/// 2·10⁴ detours/s, 4096 ranks × 200 phases, one thread, ≈ 35 ns abstime, 41 ns itimer; with
/// margin).
pub(crate) const NS_PER_EVENT: f64 = 50.0;
/// Without resyncs, a phase of N ranks lasts at least its mean stretch plus this × the longest
/// detour the N ranks meet in one phase: in the slowest rank's window, then holding ranks at
/// the two barriers. Measured on the collected AMD trace of docs/BENCHMARKS.md (sync none,
/// `### One offloaded loop, …`).
pub(crate) const SLOWEST_RANK_FACTOR: f64 = 2.0;
/// Events a resync adds to its rank's phase (a binary search over the records).
pub(crate) const RESYNC_EVENTS: f64 = 2.0;
/// Indexed engine's fast path (S = 1, no timer errors): cost of one event on one core, ns,
/// where a rank-phase is 1 event plus one per doubling of the detours d it passes (its
/// barrier searches gallop over them; its compute search reads one bucket, at any d);
/// measured by `scripts/bench-predict.sh` at 2048–10⁶ ranks: 51 ns per rank-phase at d ≈ 10 (4.5
/// events), 90–130 ns at d ≈ 100 (7.7 events), with margin.
pub(crate) const INDEXED_NS_PER_EVENT: f64 = 30.0;
/// Cost of one rank-round of an algorithmic collective in closed form on one core, ns, in
/// either engine (one arithmetic pass per round, `collective/round`): measured with one thread
/// (16 384 ranks × 100 phases, sparse trace, the offloaded loop's CPU time taken off;
/// `tests/predict_estimate.rs`): 1.7 ns (dissemination, AVX2), 1.8
/// (binomial tree), 2.9 (recursive doubling); the largest, rounded up.
pub(crate) const COLLECTIVE_NS_PER_ROUND: f64 = 3.0;
/// Cost of one question of a collective asked of the engine (a rank whose quiet time its round
/// passes: a detour met, or passed while it waits), ns: measured as above on a dense trace
/// (2·10⁴ detours/s), 30–70 ns indexed and walked per detour due while the rank is in its
/// collectives (fewer are asked than are due: one question passes all detours of a wait).
pub(crate) const COLLECTIVE_NS_PER_ASK: f64 = 40.0;
/// Indexed engine: bytes of the compiled index per record of an indexed stream (cumulative
/// arrays per record, group and injection, two laps of starts and keys), an upper bound
/// (≈ 129 bytes measured by `PlanIndex::bytes` on dense noise at S = 1, in its test).
pub(crate) const INDEX_BYTES_PER_RECORD: u64 = 144;
/// Indexed engine: time to compile the index once per trace, per record of an indexed stream,
/// ns (≈ 100 ns measured by `scripts/bench-predict.sh`).
pub(crate) const INDEX_NS_PER_RECORD: f64 = 200.0;
/// Cost of the two MPI reductions of one phase when the ranks are split over processes, ns.
pub(crate) const MPI_NS_PER_PHASE: f64 = 50_000.0;
/// Analytic tier: cost of building its two distributions, per record of the stream, ns.
pub(crate) const ORDER_STATS_NS_PER_RECORD: f64 = 2_000.0;
/// Analytic tier: memory of its two distributions, per record of the stream, bytes.
pub(crate) const ORDER_STATS_BYTES_PER_RECORD: u64 = 256;
/// Parallel efficiency assumed for the worker threads (rayon over chunks of ranks): 2 threads
/// ran 1.6–1.9 × one on two cores (docs/BENCHMARKS.md, `### Cost against detour density`),
/// with margin.
pub(crate) const THREAD_EFFICIENCY: f64 = 0.75;
/// Smallest chunk of ranks one worker thread takes (as in the simulation).
pub(crate) const RANKS_PER_CHUNK: u64 = 256;
/// Estimated time beyond which the job is announced on stderr, s.
pub const ANNOUNCE_S: f64 = 3.0;
/// Estimated time beyond which a non-terminal stderr gets a line of progress, s.
pub const TEXT_PROGRESS_S: f64 = 10.0;
/// Estimated time beyond which the job is refused without `--force`, s.
pub(crate) const MAX_SECONDS: f64 = 1800.0;
/// Memory bound when /proc/meminfo cannot be read, bytes.
pub(crate) const FALLBACK_MAX_BYTES: u64 = 8 << 30;

/// The estimated cost of one process's part of a prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Events this process simulates (see the module documentation).
    pub events: f64,
    /// Wall time on this machine, s.
    pub seconds: f64,
    /// Peak memory, bytes; `None` when it does not even fit in 64 bits.
    pub bytes: Option<u64>,
}

impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "estimated work: {} events, about {} on this machine, {}",
            count(self.events),
            seconds(self.seconds),
            mib(self.bytes)
        )
    }
}

fn count(x: f64) -> String {
    if x < 1e6 {
        format!("{x:.0}")
    } else {
        format!("{x:.2e}")
    }
}

fn seconds(s: f64) -> String {
    if s < 1e5 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1e} s")
    }
}

fn mib(b: Option<u64>) -> String {
    match b {
        Some(b) => format!("{} MiB", b.div_ceil(1 << 20)),
        None => "more than 16 EiB".into(),
    }
}

/// The bounds a job must stay within unless forced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Longest estimated time, s.
    pub max_seconds: f64,
    /// Most memory per process, bytes.
    pub max_bytes: u64,
}

impl Limits {
    /// Half of MemAvailable shared by the `procs_on_host` processes of this host, 30 min.
    pub fn here(procs_on_host: usize) -> Self {
        let avail = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| mem_available(&t));
        Limits {
            max_seconds: MAX_SECONDS,
            max_bytes: avail.map_or(FALLBACK_MAX_BYTES, |b| b / 2 / procs_on_host.max(1) as u64),
        }
    }
}

/// `MemAvailable` of a /proc/meminfo text, bytes.
pub(crate) fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Resyncs per phase of `mode` (a resync re-positions every rank's cursor).
fn resyncs_per_phase(mode: SyncMode) -> f64 {
    match mode {
        SyncMode::None | SyncMode::Once => 0.0,
        SyncMode::Phase => 1.0,
        SyncMode::Every(k) => 1.0 / k.max(1) as f64,
    }
}

/// Events an algorithmic collective adds to a rank-phase: a send and a receive (idle, then
/// work) per round, for each collective of the loop; 0 when offloaded.
pub(crate) fn collective_events(comm: &collective::CommModel, n: u64) -> f64 {
    let per_phase = match comm.shape {
        collective::LoopShape::BarrierComputeBarrier => 2.0,
        _ => 1.0,
    };
    3.0 * per_phase * collective::round_count(comm.resolved().algorithm, n) as f64
}

/// The longest detours of the first stream of `t` (its node trace's first for a set),
/// longest first: the `most` longest, or all.
fn longest_detours(t: &TraceInput, most: usize) -> Vec<u64> {
    let Some(plan) = t.plans.first() else {
        return Vec::new();
    };
    let mut runs: Vec<u64> = plan.records().iter().map(|r| r.run_ns).collect();
    let k = most.min(runs.len());
    if k > 0 && k < runs.len() {
        runs.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        runs.truncate(k);
    }
    runs.sort_unstable_by(|a, b| b.cmp(a));
    runs
}

/// How long a phase of `n` ranks lasts, unscaled ns: q + L stretched by the mean noise
/// (`busy`, the noise ratio); where the ranks replay independent offsets (`longest`: the
/// stream's longest detours, longest first, its record count, and the detours one rank meets
/// per phase), that plus [`SLOWEST_RANK_FACTOR`] × the longest detour the n ranks meet in one
/// phase (the largest of n · met draws: the one of rank ⌈records / (n · met)⌉ from the top).
fn phase_ns(cfg: &DesConfig, n: u64, busy: f64, longest: Option<(&[u64], u64, f64)>) -> f64 {
    let work = cfg.quanta_ns as f64 + cfg.barrier.latency_ns(n);
    let mean = work / (1.0 - busy);
    match longest {
        Some((top, records, met)) => mean + slowest_extra_ns(top, records, met, n),
        None => mean,
    }
}

/// Detours per trace ns of `t`, averaged over the streams the ranks replay.
pub(crate) fn density(t: &TraceInput) -> f64 {
    (t.plans.iter())
        .map(|p| p.records().len() as f64 / p.period_ns().max(1) as f64)
        .sum::<f64>()
        / t.plans.len().max(1) as f64
}

/// How long the slowest of `n` ranks that replay independent offsets (sync none) lags behind
/// the others per `work_ns` of work, ns: [`SLOWEST_RANK_FACTOR`] × the longest detour the n
/// ranks meet in it, as [`phase_ns`] prices the loop's phase.
pub(crate) fn slowest_lag_ns(t: &TraceInput, work_ns: f64, n: u64) -> f64 {
    let busy = t.info.noise_ratio.clamp(0.0, 0.9);
    let met = density(t) * work_ns / (1.0 - busy);
    let records0 = t.plans.first().map_or(0, |p| p.records().len() as u64);
    let top = longest_detours(t, (records0 as f64 / met.max(1.0)).ceil() as usize);
    slowest_extra_ns(&top, records0, met, n)
}

/// What the slowest of `n` ranks adds to a phase in which each meets `met` of a stream's
/// `records` detours: [`SLOWEST_RANK_FACTOR`] × the longest detour one of the n·met draws
/// meets (`top`: the stream's longest, longest first; 0 without any).
fn slowest_extra_ns(top: &[u64], records: u64, met: f64, n: u64) -> f64 {
    if top.is_empty() {
        return 0.0;
    }
    let draws = (n as f64 * met).max(1.0);
    let rank = ((records as f64 / draws).ceil() as usize).clamp(1, top.len());
    SLOWEST_RANK_FACTOR * top[rank - 1] as f64
}

/// What the estimate knows of one trace for the simulation's cost per rank-phase.
struct TraceShape<'a> {
    /// Detours per trace ns, averaged over the streams the ranks replay.
    density: f64,
    /// Noise ratio, clamped.
    busy: f64,
    /// Whether the indexed engine's fast path runs it.
    indexed: bool,
    /// The longest detours of its first stream, longest first (sync none, the walk).
    longest: &'a [u64],
    /// Records of its first stream.
    records0: u64,
    /// Detours one rank meets per phase.
    met: f64,
    /// Simulations per point (2 with a background: its baseline is a second one).
    passes: f64,
    /// Plans the ranks replay.
    plans: u64,
}

/// How a prediction is split: this process `me` of `procs`, with `threads` workers.
#[derive(Clone, Copy)]
struct Split {
    procs: u64,
    me: u64,
    threads: usize,
}

/// Events and seconds of the simulation of one point (`n` ranks under `mode`) over all of
/// `spec`'s draws, for this process's share.
fn point_cost(t: &TraceShape, spec: &PredictSpec, mode: SyncMode, n: u64, at: Split) -> (f64, f64) {
    let cfg = &spec.des;
    let Split { procs, me, threads } = at;
    // A phase lasts q + L stretched by the noise; its detours are walked by every rank.
    // (The index's searches do not grow with the phase's length: its longest detours are
    // there for the collective's questions only.)
    let phase_ns = phase_ns(
        cfg,
        n,
        t.busy,
        (mode == SyncMode::None && !t.indexed).then_some((t.longest, t.records0, t.met)),
    );
    let resync = RESYNC_EVENTS * resyncs_per_phase(mode);
    let coll = collective_events(&cfg.comm, n);
    let coll_ns = collective_ns(t, cfg, mode, n);
    // Events per rank-phase, and their cost in ns: the rank's own (its searches, or the
    // detours it walks), then its collective's.
    let (own, own_ns) = if t.indexed {
        let own = 1.0 + (1.0 + t.density * phase_ns).log2() + resync;
        (own, INDEXED_NS_PER_EVENT)
    } else {
        (1.0 + t.density * phase_ns + resync, NS_PER_EVENT)
    };
    let per_rank_phase = own + coll;
    let ns = own * own_ns + coll_ns;
    let (lo, hi) = share(n, procs, me);
    let local = hi - lo;
    // The indexed offloaded loop simulates one state per plan and start offset: with a
    // common start (every mode but none), one per plan; so does a symmetric collective on
    // one plan in one process.
    let alg = cfg.comm.resolved().algorithm;
    let copies = t.indexed
        && mode != SyncMode::None
        && (alg == Algorithm::Offloaded
            || (t.plans == 1 && procs == 1 && collective::symmetric(alg, n)));
    let states = if copies { local.min(t.plans) } else { local };
    // Every draw simulates the point again (with its own offsets).
    let draws = spec.draws.max(1) as f64;
    let rank_phases = states as f64 * cfg.phases as f64 * t.passes * draws;
    let chunks = local.div_ceil(RANKS_PER_CHUNK).max(1);
    let workers = (chunks.min(threads.max(1) as u64) as f64 * THREAD_EFFICIENCY).max(1.0);
    let mut secs = rank_phases * ns * 1e-9 / workers;
    if procs > 1 {
        secs += cfg.phases as f64 * draws * MPI_NS_PER_PHASE * 1e-9;
    }
    (rank_phases * per_rank_phase, secs)
}

/// What an algorithmic collective adds to a rank-phase, ns (0 when offloaded): every round in
/// closed form ([`COLLECTIVE_NS_PER_ROUND`]) and one question ([`COLLECTIVE_NS_PER_ASK`]) per
/// detour due while the rank is in its collectives (at most one per round): the phase beyond
/// q, which without resyncs waits for the slowest rank of the phase.
fn collective_ns(t: &TraceShape, cfg: &DesConfig, mode: SyncMode, n: u64) -> f64 {
    let rounds = collective_events(&cfg.comm, n) / 3.0;
    if rounds == 0.0 {
        return 0.0;
    }
    let longest = (mode == SyncMode::None).then_some((t.longest, t.records0, t.met));
    let outside_q = (phase_ns(cfg, n, t.busy, longest) - cfg.quanta_ns as f64).max(0.0);
    let asks = (t.density * outside_q).min(rounds);
    rounds * COLLECTIVE_NS_PER_ROUND + asks * COLLECTIVE_NS_PER_ASK
}

/// Simulated ranks of this process's largest share: the rank states of one simulation live at
/// a time (0 without a simulation).
fn most_states(spec: &PredictSpec, run_des: bool, procs: u64, me: u64) -> u64 {
    if !run_des {
        return 0;
    }
    (spec.ranks.iter())
        .map(|&n| {
            let (lo, hi) = share(n, procs, me);
            hi - lo
        })
        .max()
        .unwrap_or(0)
}

/// Bytes per simulated rank: the indexed engine's where every trace runs on the index
/// (`all_indexed`), else the walk's (the larger), plus the collective's.
fn rank_bytes(spec: &PredictSpec, procs: u64, all_indexed: bool) -> u64 {
    let per_rank = if all_indexed {
        des::INDEXED_RANK_BYTES as u64 + des::INDEXED_SETUP_BYTES as u64
    } else {
        des::RANK_STATE_BYTES as u64
    };
    per_rank
        + match (spec.des.comm.algorithm, procs) {
            (Algorithm::Offloaded, _) => 0,
            (_, 1) => collective::BYTES_PER_RANK as u64,
            _ => (collective::BYTES_PER_RANK + collective::MPI_BYTES_PER_RANK) as u64,
        }
}

/// Estimates process `me` of `procs`'s part of `spec` over `traces` with `threads` workers.
pub fn estimate(
    traces: &[TraceInput],
    spec: &PredictSpec,
    procs: u64,
    me: u64,
    threads: usize,
) -> Estimate {
    let cfg = &spec.des;
    // The indexed engine's fast path runs at S = 1 without timer errors or an O-after-a-gap
    // curve (where the index exists: else, and at S ≠ 1, the walk's cost is assumed, which
    // is higher).
    let fast = |t: &TraceInput| {
        let o = t.plans.first().map(|p| *p.options());
        index_allowed(spec.engine, cfg)
            && o.is_some_and(|o| o.scale == 1.0 && o.overhead_by_gap.points().is_empty())
    };
    let run_des = matches!(spec.model, Model::Des | Model::Both);
    let run_os = matches!(spec.model, Model::OrderStats | Model::Both) && cfg.ranks_per_node == 1;
    let record_bytes = std::mem::size_of::<Record>() as u64;
    let (mut events, mut secs) = (0f64, 0f64);
    let mut plan_bytes = Some(0u64);
    let mut os_bytes = Some(0u64);
    let mut index_bytes = Some(0u64);
    let mut indexed_any = false;
    for t in traces {
        // A background doubles the work: its baseline is a second simulation (of its plans).
        let background = t.background.iter().flat_map(|b| &b.plans);
        let records: Vec<u64> = (t.plans.iter().chain(background))
            .map(|p| p.records().len() as u64)
            .collect();
        let passes = if t.background.is_some() { 2.0 } else { 1.0 };
        for &n in &records {
            plan_bytes = plan_bytes.and_then(|b| b.checked_add(n.checked_mul(record_bytes)?));
        }
        if run_os {
            // One distribution per plan (per node trace of a set), all held at once.
            let n: u64 = records.iter().sum();
            secs += n as f64 * ORDER_STATS_NS_PER_RECORD * 1e-9;
            let b = n.checked_mul(ORDER_STATS_BYTES_PER_RECORD);
            os_bytes = os_bytes.and_then(|o| Some(o.max(b?)));
        }
        if !run_des {
            continue;
        }
        // Detours per trace ns, averaged over the streams the ranks replay.
        let density = density(t);
        let busy = t.info.noise_ratio.clamp(0.0, 0.9);
        let indexed = fast(t);
        // Without resyncs (sync none) the ranks replay independent offsets, and a phase lasts
        // as long as its slowest rank: the walk's detours per phase follow that, not the mean.
        // The largest of the fewest draws (the smallest rank count) is the deepest needed.
        let records0 = t.plans.first().map_or(0, |p| p.records().len() as u64);
        let met = density * cfg.quanta_ns as f64 / (1.0 - busy);
        let fewest = spec.ranks.iter().min().copied().unwrap_or(1) as f64;
        // Also for the index where a collective waits for the slowest rank (its questions).
        let algorithmic = cfg.comm.resolved().algorithm != Algorithm::Offloaded;
        let longest =
            if (!indexed || algorithmic) && run_des && spec.modes.contains(&SyncMode::None) {
                longest_detours(
                    t,
                    (records0 as f64 / (fewest * met).max(1.0)).ceil() as usize,
                )
            } else {
                Vec::new()
            };
        if indexed {
            indexed_any = true;
            // The indexes of the streams the nodes replay (k per node trace) live for the
            // whole run.
            let n: u64 = records.iter().sum();
            index_bytes =
                index_bytes.and_then(|b| b.checked_add(n.checked_mul(INDEX_BYTES_PER_RECORD)?));
            secs += n as f64 * INDEX_NS_PER_RECORD * 1e-9;
        }
        let shape = TraceShape {
            density,
            busy,
            indexed,
            longest: &longest,
            records0,
            met,
            passes,
            plans: t.plans.len() as u64,
        };
        for &mode in &spec.modes {
            for &n in &spec.ranks {
                let (e, s) = point_cost(&shape, spec, mode, n, Split { procs, me, threads });
                events += e;
                secs += s;
            }
        }
    }
    // The walk's state is the larger one: assumed when any trace may be walked.
    let per_rank = rank_bytes(spec, procs, indexed_any && traces.iter().all(fast));
    let ranks_bytes = most_states(spec, run_des, procs, me).checked_mul(per_rank);
    let bytes = (|| {
        plan_bytes?
            .checked_add(ranks_bytes?)?
            .checked_add(os_bytes?)?
            .checked_add(index_bytes?)
    })();
    Estimate {
        events,
        seconds: secs,
        bytes,
    }
}

/// Refuses (with how to shrink it) an estimate beyond `limits` unless `force`.
pub fn admit(e: &Estimate, limits: &Limits, force: bool) -> anyhow::Result<()> {
    let mut over = Vec::new();
    if e.seconds.is_nan() || e.seconds > limits.max_seconds {
        over.push(format!(
            "about {} (limit {})",
            seconds(e.seconds),
            seconds(limits.max_seconds)
        ));
    }
    if e.bytes.is_none_or(|b| b > limits.max_bytes) {
        over.push(format!(
            "{} of memory (limit {}: half of MemAvailable per process)",
            mib(e.bytes),
            mib(Some(limits.max_bytes))
        ));
    }
    if over.is_empty() || force {
        return Ok(());
    }
    anyhow::bail!(
        "this prediction would need {} for {} simulated events; shrink it with fewer --phases, \
         fewer or lower --ranks, fewer --sync modes or --model order-stats, or run it anyway \
         with --force",
        over.join(" and "),
        count(e.events)
    )
}

#[cfg(test)]
mod tests {
    use jitter_emulator::PlanOptions;
    use jitter_trace::synth::synthesize;

    use super::*;
    use crate::plan_index::CompileIndex as _;

    fn input() -> TraceInput {
        let t = synthesize(
            &"poisson:rate=1000/s,dur=5us".parse().unwrap(),
            1,
            2_000_000_000,
            1,
        )
        .unwrap();
        TraceInput::new(&t, "t.jtr", "t", PlanOptions::ideal(), 1).unwrap()
    }

    fn spec(ranks: Vec<u64>, phases: u64) -> PredictSpec {
        PredictSpec::ideal_offloaded(ranks, vec![SyncMode::None], phases, crate::Engine::Walk)
    }

    /// The per-record bound the estimate counts holds for the arrays an index really holds, and
    /// is not far above them: dense noise at S = 1, the largest index (a group and an injection
    /// per record, and two laps of fast entries; at S ≠ 1 the scaled sums replace those).
    #[test]
    fn an_index_holds_no_more_than_the_bytes_per_record_the_estimate_counts() {
        let t = synthesize(
            &"poisson:rate=100000/s,dur=lognormal:1us:0.5"
                .parse()
                .unwrap(),
            1,
            200_000_000,
            3,
        )
        .unwrap();
        let plan = jitter_emulator::Plan::from_trace(&t, 0, PlanOptions::ideal()).unwrap();
        let ix = plan.index().expect("an index of a dense trace");
        let per_record = ix.bytes() as f64 / plan.records().len() as f64;
        let bound = INDEX_BYTES_PER_RECORD as f64;
        assert!(
            per_record <= bound && per_record > 0.8 * bound,
            "{per_record:.1} bytes per record against {bound}"
        );
    }

    /// `spec` for the indexed engine.
    fn indexed(ranks: Vec<u64>, phases: u64) -> PredictSpec {
        PredictSpec {
            engine: crate::Engine::Indexed,
            ..spec(ranks, phases)
        }
    }

    /// `s` with its collective run by `algorithm` (the offloaded loop's shape and costs).
    fn with_collective(s: &PredictSpec, algorithm: Algorithm) -> PredictSpec {
        let mut s = s.clone();
        s.des.comm = CommModel {
            algorithm,
            ..CommModel::OFFLOADED
        };
        s
    }

    fn limits() -> Limits {
        Limits {
            max_seconds: MAX_SECONDS,
            max_bytes: 1 << 30,
        }
    }

    #[test]
    fn work_grows_linearly_in_ranks_and_phases() {
        let t = [input()];
        // Ranks that resync to one point (without resyncs the slowest of more ranks lasts
        // longer: `without_resyncs_the_walk_is_estimated_over_the_slowest_rank_s_phase`).
        let aligned = |r: u64, p: u64| PredictSpec {
            modes: vec![SyncMode::Once],
            ..spec(vec![r], p)
        };
        let e = |r: u64, p: u64| estimate(&t, &aligned(r, p), 1, 0, 1).events;
        let base = e(1000, 100);
        // ≈ 1 event per rank-phase plus ≈ 1 detour per ms phase (1000/s).
        assert!(
            base > 1.5 * 1000.0 * 100.0 && base < 3.0 * 1000.0 * 100.0,
            "{base}"
        );
        assert!((e(4000, 100) / base - 4.0).abs() < 1e-9);
        assert!((e(1000, 300) / base - 3.0).abs() < 1e-9);
        // Single-threaded time is proportional to the work as well.
        let s = |r: u64| estimate(&t, &aligned(r, 100), 1, 0, 1).seconds;
        assert!((s(4000) / s(1000) - 4.0).abs() < 1e-9);
    }

    /// Every offset draw simulates each point again: `--draws K` costs K times the simulation
    /// of one draw, in events and in time (the index is compiled once), on one process and on
    /// several; memory does not grow (draws run one after another). The bug this pins: the
    /// estimate ignored `--draws` (62 s estimated for a job of about 3 min).
    #[test]
    fn draws_multiply_the_simulation_s_work_not_its_memory() {
        let t = [input()];
        let records = t[0].plans[0].records().len() as f64;
        for (base, procs, setup_s) in [
            (spec(vec![4096], 200), 1, 0.0),
            (
                indexed(vec![4096, 100], 200),
                1,
                records * INDEX_NS_PER_RECORD * 1e-9,
            ),
            (
                with_collective(&indexed(vec![4096], 50), Algorithm::Dissemination),
                2,
                records * INDEX_NS_PER_RECORD * 1e-9,
            ),
        ] {
            let one = estimate(&t, &base, procs, 0, 1);
            assert!(one.seconds > setup_s);
            for k in [2u64, 7] {
                let drawn = PredictSpec {
                    draws: k,
                    ..base.clone()
                };
                let many = estimate(&t, &drawn, procs, 0, 1);
                let kf = k as f64;
                assert!(
                    (many.events / one.events - kf).abs() < 1e-9,
                    "{many:?} {one:?}"
                );
                let want = setup_s + kf * (one.seconds - setup_s);
                assert!((many.seconds / want - 1.0).abs() < 1e-9, "{many:?} {want}");
                assert_eq!(many.bytes, one.bytes);
            }
        }
    }

    #[test]
    fn a_process_estimates_its_own_share() {
        let t = [input()];
        let sp = spec(vec![1 << 20], 10);
        let one = estimate(&t, &sp, 1, 0, 1);
        let half = estimate(&t, &sp, 2, 1, 1);
        assert!((one.events / half.events - 2.0).abs() < 1e-9);
        assert!(half.bytes.unwrap() < one.bytes.unwrap());
    }

    #[test]
    fn a_billion_ranks_are_refused_with_how_to_shrink_the_job() {
        let t = [input()];
        let e = estimate(&t, &spec(vec![1 << 30], 2000), 1, 0, 2);
        assert!(e.bytes.unwrap() >= (1u64 << 30) * des::RANK_STATE_BYTES as u64);
        let msg = admit(&e, &limits(), false).unwrap_err().to_string();
        for want in [
            "--force",
            "--phases",
            "--ranks",
            "--model order-stats",
            "MiB",
        ] {
            assert!(msg.contains(want), "{want} in {msg}");
        }
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn force_lets_a_job_just_over_the_bounds_through() {
        let l = limits();
        let over_time = Estimate {
            events: 1e12,
            seconds: l.max_seconds * 1.01,
            bytes: Some(1 << 20),
        };
        let over_memory = Estimate {
            seconds: 1.0,
            bytes: Some(l.max_bytes + 1),
            ..over_time
        };
        let unrepresentable = Estimate {
            bytes: None,
            ..over_memory
        };
        for e in [over_time, over_memory, unrepresentable] {
            assert!(admit(&e, &l, false).is_err(), "{e}");
            assert!(admit(&e, &l, true).is_ok(), "{e}");
        }
        let within = Estimate {
            seconds: l.max_seconds,
            bytes: Some(l.max_bytes),
            ..over_time
        };
        assert!(admit(&within, &l, false).is_ok());
    }

    #[test]
    fn the_analytic_tier_costs_no_simulated_ranks() {
        let t = [input()];
        let sp = PredictSpec {
            model: Model::OrderStats,
            ..spec(vec![1 << 30], 2000)
        };
        let e = estimate(&t, &sp, 1, 0, 1);
        assert_eq!(e.events, 0.0);
        assert!(admit(&e, &limits(), false).is_ok(), "{e}");
    }

    #[test]
    fn the_indexed_engine_is_estimated_by_its_searches_where_it_runs_fast() {
        let t = [input()];
        let walk = spec(vec![4096], 100);
        let indexed = indexed(vec![4096], 100);
        let (w, i) = (
            estimate(&t, &walk, 1, 0, 1),
            estimate(&t, &indexed, 1, 0, 1),
        );
        // ≈ 1 detour per 1 ms phase: 1 + log2(2) events per rank-phase (not 1 + 1 walked).
        let rank_phases = 4096.0 * 100.0;
        assert!((i.events / rank_phases - 2.0).abs() < 0.05, "{}", i.events);
        // Smaller rank states, plus the index of the stream, compiled once.
        let records = t[0].plans[0].records().len() as u64;
        let compile = records as f64 * INDEX_NS_PER_RECORD * 1e-9;
        assert!(
            ((i.seconds - compile) / (i.events * INDEXED_NS_PER_EVENT * 1e-9) - 1.0).abs() < 1e-9,
            "{i}"
        );
        let per_rank = (des::INDEXED_RANK_BYTES + des::INDEXED_SETUP_BYTES) as u64;
        assert_eq!(
            i.bytes.unwrap() + 4096 * des::RANK_STATE_BYTES as u64,
            w.bytes.unwrap() + 4096 * per_rank + records * INDEX_BYTES_PER_RECORD
        );
        // Timer errors (drift) send the indexed engine to the walk: the walk's estimate.
        let mut drifting = indexed.clone();
        drifting.des.drift_sd_ns = 20_000.0;
        assert_eq!(estimate(&t, &drifting, 1, 0, 1), w);
    }

    #[test]
    fn a_collective_costs_its_rounds_in_closed_form_and_its_questions_in_either_engine() {
        let t = [input()];
        for offloaded in [indexed(vec![4096], 100), spec(vec![4096], 100)] {
            let dissemination = with_collective(&offloaded, Algorithm::Dissemination);
            let (a, b) = (
                estimate(&t, &offloaded, 1, 0, 1),
                estimate(&t, &dissemination, 1, 0, 1),
            );
            // 12 rounds of 3 events for each of the two barriers of a phase.
            let coll = 4096.0 * 100.0 * collective_events(&dissemination.des.comm, 4096);
            assert_eq!(coll, 4096.0 * 100.0 * 72.0);
            assert!(((b.events - a.events) / coll - 1.0).abs() < 1e-9, "{a} {b}");
            // Each round in closed form; this trace's detours (10³/s) are due in at most
            // every round's wait: no more than one question per round.
            let least = 4096.0 * 100.0 * 24.0 * COLLECTIVE_NS_PER_ROUND * 1e-9;
            let most = least + 4096.0 * 100.0 * 24.0 * COLLECTIVE_NS_PER_ASK * 1e-9;
            let extra = b.seconds - a.seconds;
            assert!(
                extra >= least * (1.0 - 1e-9) && extra < most,
                "{:?}: {a} {b}",
                offloaded.engine
            );
        }
    }

    #[test]
    fn synced_ranks_of_one_plan_are_estimated_once() {
        let t = [input()];
        let none = indexed(vec![4096], 100);
        let mut phase = none.clone();
        phase.modes = vec![SyncMode::Phase];
        let (a, b) = (estimate(&t, &none, 1, 0, 1), estimate(&t, &phase, 1, 0, 1));
        // One plan: 1 state instead of 4096, one resync more per rank-phase.
        let per = |e: &Estimate| e.events / 100.0;
        assert!((per(&a) / 4096.0 - 2.0).abs() < 0.05, "{a}");
        assert!((per(&b) - (2.0 + RESYNC_EVENTS)).abs() < 0.05, "{b}");
        // So does a dissemination barrier on one plan.
        let dissemination = with_collective(&phase, Algorithm::Dissemination);
        let per_collective = collective_events(&dissemination.des.comm, 4096);
        let d = estimate(&t, &dissemination, 1, 0, 1);
        assert!(
            (per(&d) - (2.0 + RESYNC_EVENTS + per_collective)).abs() < 0.05,
            "{d}"
        );
        // The walk keeps every rank.
        let mut walk = phase.clone();
        walk.engine = crate::Engine::Walk;
        assert!(estimate(&t, &walk, 1, 0, 1).events > 4000.0 * 100.0);
    }

    #[test]
    fn without_resyncs_the_walk_is_estimated_over_the_slowest_rank_s_phase() {
        // Short detours, and rare long ones that the slowest of many ranks meets every phase.
        let trace = synthesize(
            &"poisson:rate=1000/s,dur=5us+poisson:rate=5/s,dur=2ms"
                .parse()
                .unwrap(),
            1,
            2_000_000_000,
            1,
        )
        .unwrap();
        let t = [TraceInput::new(&trace, "t.jtr", "t", PlanOptions::ideal(), 1).unwrap()];
        let (n, phases) = (4096u64, 100u64);
        let none = spec(vec![n], phases);
        let once = PredictSpec {
            modes: vec![SyncMode::Once],
            ..none.clone()
        };
        let plan = &t[0].plans[0];
        let records = plan.records().len();
        let density = records as f64 / plan.period_ns() as f64;
        let busy = t[0].info.noise_ratio;
        let mean = 1e6 / (1.0 - busy);
        let mut runs: Vec<u64> = plan.records().iter().map(|r| r.run_ns).collect();
        runs.sort_unstable_by(|a, b| b.cmp(a));
        // The longest of the n · (density · mean) detours the ranks meet in one phase.
        let longest_met = |n: u64| {
            let draws = n as f64 * density * mean;
            runs[(records as f64 / draws).ceil() as usize - 1] as f64
        };
        let rank_phases = (n * phases) as f64;
        let want = rank_phases * (1.0 + density * (mean + SLOWEST_RANK_FACTOR * longest_met(n)));
        assert!(
            longest_met(n) >= 2e6,
            "4096 ranks meet a long detour every phase"
        );
        let got = estimate(&t, &none, 1, 0, 1).events;
        assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
        // 16 ranks meet ≈ 16 detours per phase: the longest of them is a short one.
        let few = spec(vec![16], phases);
        assert!(longest_met(16) < 1e5);
        let want =
            (16 * phases) as f64 * (1.0 + density * (mean + SLOWEST_RANK_FACTOR * longest_met(16)));
        let got = estimate(&t, &few, 1, 0, 1).events;
        assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
        // Ranks resynchronised to one point (sync once) share their windows: the mean stretch.
        let want = rank_phases * (1.0 + density * mean);
        let got = estimate(&t, &once, 1, 0, 1).events;
        assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
    }

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:  16000000 kB\nMemFree: 1 kB\nMemAvailable:   8000000 kB\n";
        assert_eq!(mem_available(text), Some(8_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn the_line_names_events_time_and_memory() {
        let e = Estimate {
            events: 4.2e9,
            seconds: 252.4,
            bytes: Some(3 << 20),
        };
        assert_eq!(
            e.to_string(),
            "estimated work: 4.20e9 events, about 252 s on this machine, 3 MiB"
        );
    }

    #[test]
    fn plans_are_shared_not_counted_per_rank() {
        let t = [input()];
        let small = estimate(&t, &spec(vec![1], 1), 1, 0, 1).bytes.unwrap();
        let big = estimate(&t, &spec(vec![1001], 1), 1, 0, 1).bytes.unwrap();
        assert_eq!(big - small, 1000 * des::RANK_STATE_BYTES as u64);
    }
}
