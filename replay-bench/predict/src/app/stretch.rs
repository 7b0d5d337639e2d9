//! Stretches of rank-local steps ([`Stretch`]): consecutive compute, send and receive steps
//! that one pass over the ranks can take together, each rank walking them in order — a
//! receive reads only send ends written before the stretch began, and no send overwrites an
//! end the stretch reads, so every rank sees what the step-by-step passes showed it.
//!
//! Within a pass each rank asks its clock once when it is next due ([`Clocks::quiet_until`]);
//! work that ends by then ends on time and idling until then returns at once, neither
//! changing the state (the clocks' contract), so a rank that meets no detour in the stretch
//! takes it in closed form: additions and the maxima of its messages' arrivals. Where a step
//! reaches past that time the rank asks its clock, exactly as the step's own pass would, and
//! asks again when it is next due. The collectives' rounds do the same with their quiet
//! times (`collective::round`).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::skeleton::Step;
use crate::collective::{Clocks, Costs};

/// A run of steps of the skeleton: rank-local ones walked in one pass, or one other step
/// (a collective, a barrier's exit) taken on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stretch {
    /// Steps `range` (compute, sends, receives) in one pass.
    Local(Range<usize>),
    /// Step `i` alone.
    Single(usize),
}

/// The skeleton's steps cut into stretches: a local stretch ends before a receive from a
/// buffer it wrote, before a send to a buffer it read, and at any other step.
pub(crate) fn stretches(steps: &[Step], buffers: usize) -> Vec<Stretch> {
    let mut out = Vec::new();
    let mut written = vec![false; buffers];
    let mut read = vec![false; buffers];
    let mut start: Option<usize> = None;
    let close = |out: &mut Vec<Stretch>, start: &mut Option<usize>, end: usize| {
        if let Some(s) = start.take() {
            out.push(Stretch::Local(s..end));
        }
    };
    for (i, step) in steps.iter().enumerate() {
        let conflict = match *step {
            Step::Compute(_) => false,
            Step::Send { buf, .. } => read[buf],
            Step::Receive { buf, .. } => written[buf],
            Step::Collective(_) | Step::BarrierExit => {
                close(&mut out, &mut start, i);
                out.push(Stretch::Single(i));
                continue;
            }
        };
        if conflict || start.is_none() {
            close(&mut out, &mut start, i);
            written.fill(false);
            read.fill(false);
            start = Some(i);
        }
        match *step {
            Step::Send { buf, .. } => written[buf] = true,
            Step::Receive { buf, .. } => read[buf] = true,
            _ => {}
        }
    }
    close(&mut out, &mut start, steps.len());
    out
}

/// `len` send ends set to 0, or an error.
pub(crate) fn ends(len: usize) -> anyhow::Result<Vec<AtomicU64>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| anyhow::anyhow!("cannot allocate the send ends of {len} simulated ranks"))?;
    v.extend((0..len).map(|_| AtomicU64::new(0)));
    Ok(v)
}

/// What one local pass reads besides the ranks' own arrays.
#[derive(Clone, Copy)]
pub(crate) struct Pass<'a> {
    pub(crate) steps: &'a [Step],
    /// Send ends per buffer (a rank stores its own; receives load their sources').
    pub(crate) sent: &'a [Vec<AtomicU64>],
    /// One state stands for all ranks: every rank's partner is itself.
    pub(crate) shared: bool,
    pub(crate) n: u64,
    pub(crate) costs: Costs,
    pub(crate) chunk: usize,
}

/// The quiet time `q` read as a bound: 0 is "not known".
#[inline]
fn on_time(end: u64, q: u64) -> bool {
    q != 0 && end <= q
}

/// Takes the pass's steps on every state (times `t`, compute this iteration `qt`).
pub(crate) fn walk<C: Clocks>(
    clock: &C,
    states: &mut [C::Rank],
    t: &mut [u64],
    qt: &mut [u64],
    p: Pass<'_>,
) {
    let chunk = p.chunk;
    (states.par_chunks_mut(chunk).zip(t.par_chunks_mut(chunk)))
        .zip(qt.par_chunks_mut(chunk))
        .enumerate()
        .for_each(|(k, ((sts, ts), qs))| {
            for (i, (s, (t, q))) in sts.iter_mut().zip(ts.iter_mut().zip(qs)).enumerate() {
                rank(clock, s, k * chunk + i, (t, q), p);
            }
        });
}

/// One rank `g` through the pass's steps (its time and compute in `tq`).
#[inline]
fn rank<C: Clocks>(clock: &C, s: &mut C::Rank, g: usize, tq: (&mut u64, &mut u64), p: Pass<'_>) {
    let (t, qt) = tq;
    let Costs { o, l } = p.costs;
    let n = p.n;
    let mut quiet = clock.quiet_until(s, g);
    let work = |s: &mut C::Rank, quiet: &mut u64, start: u64, w: u64| {
        let end = start + w;
        if on_time(end, *quiet) {
            end
        } else {
            let end = clock.work(s, g, start, w);
            *quiet = clock.quiet_until(s, g);
            end
        }
    };
    for step in p.steps {
        match *step {
            Step::Compute(c) => {
                let end = work(s, &mut quiet, *t, c);
                *qt += end - *t;
                *t = end;
            }
            Step::Send { buf, link } => {
                if link.sends(g as u64, n) {
                    *t = work(s, &mut quiet, *t, o);
                    p.sent[buf][g].store(*t, Ordering::Relaxed);
                }
            }
            Step::Receive { buf, link } => {
                if let Some(src) = link.source(g as u64, n) {
                    let from = if p.shared { 0 } else { src as usize };
                    let arrive = (*t).max(p.sent[buf][from].load(Ordering::Relaxed) + l);
                    let ready = if on_time(arrive, quiet) {
                        arrive
                    } else {
                        let r = clock.idle_until(s, g, arrive);
                        quiet = clock.quiet_until(s, g);
                        r
                    };
                    *t = work(s, &mut quiet, ready, o);
                }
            }
            Step::Collective(_) | Step::BarrierExit => {}
        }
    }
}
