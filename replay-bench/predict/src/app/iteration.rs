//! The application's iterations in virtual time ([`iterate`]): every rank takes the
//! skeleton's steps, each a parallel pass over the ranks (collectives through
//! [`collective::run`]); at the end of every `MPI_Barrier` every rank counts a phase and
//! resyncs when the sync schedule says so, as the preload library does (a loop without a
//! barrier resyncs nowhere: `phase` and `every:K` then replay as `once`); per iteration the slowest rank's compute
//! (its windows summed: AvgMaxQT) and the iteration's period (from the last rank's end of the
//! previous iteration to the last rank's end of this one: what the program's loop time grows
//! by, AvgMaxQTBT) are recorded, and an iteration in which some rank reached f is cut, as the
//! loop cuts a phase. Each iteration takes its part of the skeleton (its kind, or the even or
//! odd copy). Nothing is allocated per iteration.

use std::sync::atomic::AtomicU64;

use jitter_emulator::{PlanStats, SyncSchedule};
use rayon::prelude::*;

use super::replay_clocks::AppClock;
use super::skeleton::{Skeleton, Step};
use super::stretch::{self, Stretch};
use crate::collective::{self, Call, Costs, Scratch};
use crate::comm::Solo;
use crate::rank_layout::Timelines;
use crate::ranks::chunk_of;
use jitter_report::metrics::{PhaseAverages, PhaseSample};

/// What one simulation of the skeleton takes besides the clock and the states.
#[derive(Clone, Copy)]
pub(crate) struct Spec<'a> {
    pub(crate) skeleton: &'a Skeleton,
    /// Ranks N (the states stand for them: one each, or one for all).
    pub(crate) n: u64,
    /// Iterations to run: the first of the `planned` ones.
    pub(crate) iterations: u64,
    /// The run the kinds of iteration are laid over ([`Skeleton::part`]): a baseline of a run
    /// cut short runs the same first iterations, of the same kinds.
    pub(crate) planned: u64,
    pub(crate) costs: Costs,
    pub(crate) lines: &'a Timelines,
    pub(crate) schedule: SyncSchedule,
    pub(crate) scale: f64,
}

/// What the iterations measured (replay ns where not said).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Run {
    pub(crate) averages: PhaseAverages,
    pub(crate) stopped_by_fraction: bool,
    /// Latest end of the last iteration recorded, and of the one before it.
    pub(crate) last_exit: u64,
    pub(crate) prev_exit: u64,
    /// What the plans injected, and the largest share of a stream replayed.
    pub(crate) stats: PlanStats,
    pub(crate) max_progress: f64,
}

/// One iteration's reduction over the ranks (integers: independent of the split).
#[derive(Debug, Clone, Copy, Default)]
struct Pass {
    max_qt: u64,
    sum_qt: u64,
    max_end: u64,
    over_limit: bool,
}

impl Pass {
    fn join(a: Pass, b: Pass) -> Pass {
        Pass {
            max_qt: a.max_qt.max(b.max_qt),
            sum_qt: a.sum_qt + b.sum_qt,
            max_end: a.max_end.max(b.max_end),
            over_limit: a.over_limit || b.over_limit,
        }
    }
}

/// A vector of `len` zeros, or an error naming `what`.
fn zeros(len: usize, what: &str) -> anyhow::Result<Vec<u64>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| anyhow::anyhow!("cannot allocate the {what} of {len} simulated ranks"))?;
    v.resize(len, 0);
    Ok(v)
}

/// The per-rank arrays of a simulation (allocated once).
struct Arrays {
    /// Each state's time.
    t: Vec<u64>,
    /// Its compute this iteration.
    qt: Vec<u64>,
    /// Send ends, per buffer.
    sent: Vec<Vec<AtomicU64>>,
}

/// Runs `spec.iterations` iterations of the skeleton on `states` (rank order, or one state
/// standing for all N ranks where the skeleton is symmetric and the ranks start alike): what
/// they measured, and each state's time at the end.
pub(crate) fn iterate<C: AppClock>(
    clock: &C,
    states: &mut [C::Rank],
    spec: &Spec,
) -> anyhow::Result<(Run, Vec<u64>)> {
    let len = states.len();
    let mut a = Arrays {
        t: zeros(len, "clocks")?,
        qt: zeros(len, "compute times")?,
        sent: (0..spec.skeleton.buffers)
            .map(|_| stretch::ends(len))
            .collect::<anyhow::Result<_>>()?,
    };
    let sk = spec.skeleton;
    let cuts: Vec<Vec<Stretch>> = (0..sk.parts.len())
        .map(|p| stretch::stretches(sk.steps_of(p), sk.buffers))
        .collect();
    let mut scratch = Scratch::new(spec.n, 0, len as u64, 1)?;
    let mut points = spec.lines.points_buffer();
    let mut run = Run::default();
    let chunk = chunk_of(len);
    let place = spec.lines.placement;
    let mut barriers = 0u64;
    for it in 0..spec.iterations {
        let part = sk.part(it, spec.planned);
        let (steps, cut) = (sk.steps_of(part), &cuts[part]);
        a.qt.fill(0);
        for piece in cut {
            let i = match piece {
                Stretch::Local(r) => {
                    let p = stretch::Pass {
                        steps: &steps[r.clone()],
                        sent: &a.sent,
                        shared: len as u64 != spec.n,
                        n: spec.n,
                        costs: spec.costs,
                        chunk,
                    };
                    stretch::walk(clock, states, &mut a.t, &mut a.qt, p);
                    continue;
                }
                Stretch::Single(i) => *i,
            };
            match steps[i] {
                Step::BarrierExit => {
                    barriers += 1;
                    if spec
                        .lines
                        .resync_points(&spec.schedule, barriers, &mut points)
                    {
                        let pts = &points;
                        run.stats += (states.par_iter_mut().zip(&a.t).enumerate())
                            .map(|(g, (s, &now))| {
                                clock.resync(s, g, pts[place.trace(g as u64)], now)
                            })
                            .reduce(PlanStats::default, |mut x, y| {
                                x += y;
                                x
                            });
                    }
                }
                Step::Collective(alg) => {
                    let call = Call {
                        alg,
                        costs: spec.costs,
                        n: spec.n,
                        lo: 0,
                    };
                    collective::run(&Solo, clock, &call, states, &mut a.t, &mut scratch);
                }
                // Rank-local steps are in the local stretches.
                Step::Compute(_) | Step::Send { .. } | Step::Receive { .. } => {}
            }
        }
        let pass = (states.par_chunks(chunk).enumerate())
            .map(|(c, sts)| {
                let mut acc = Pass::default();
                for (i, s) in sts.iter().enumerate() {
                    let g = c * chunk + i;
                    acc.max_qt = acc.max_qt.max(a.qt[g]);
                    acc.sum_qt += a.qt[g] * clock.copies_of(s);
                    acc.max_end = acc.max_end.max(a.t[g]);
                    acc.over_limit |= a.t[g] >= clock.limit_at(s);
                }
                acc
            })
            .reduce(Pass::default, Pass::join);
        if pass.over_limit {
            run.stopped_by_fraction = true;
            break;
        }
        run.averages.add(PhaseSample {
            max_qt_ns: pass.max_qt as f64 / spec.scale,
            max_qtbt_ns: (pass.max_end - run.last_exit) as f64 / spec.scale,
            mean_qt_ns: pass.sum_qt as f64 / spec.n as f64 / spec.scale,
        });
        run.prev_exit = run.last_exit;
        run.last_exit = pass.max_end;
    }
    for (g, s) in states.iter().enumerate() {
        let (st, progress) = clock.totals(s, g, a.t[g]);
        run.stats += st;
        run.max_progress = run.max_progress.max(progress);
    }
    Ok((run, a.t))
}
