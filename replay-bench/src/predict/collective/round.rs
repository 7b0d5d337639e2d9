//! What a collective asks of a rank's clock ([`Clocks`], [`Costs`]), its rounds ([`Round`]) and
//! how one process runs them over all its ranks ([`local`]) without asking the engine where no rank meets a detour.
//!
//! A round without noise has a closed form: a rank that sends at `t` ends its send at `t + o`;
//! one that receives from `src` leaves at `max(own, t_src + o + l) + o` (`own`: its time after
//! its own send). That answer is the engine's wherever the rank's quiet time
//! ([`Clocks::quiet_until`]) covers it and its source's send ended by the source's: then every
//! question of the round would have been answered from the quiet times, changing no state.
//! [`local`] therefore runs each round as one arithmetic pass over all ranks (for the
//! dissemination's shift, a loop over contiguous slices that the compiler vectorises, for AVX2
//! where the CPU has it), which also flags the ranks where it does not hold; only those are
//! asked, in the order the round-by-round walk asks them (every send of the round, then every
//! receive), each asking for its index lines [`ASK_AHEAD`] flagged ranks ahead. A receive is
//! one question ([`Clocks::receive`]: the wait and the work, detours that begin and end in the
//! wait stepped over, in one search of the indexed engine). Exactness against that walk
//! ([`super::run_rounds`]) is what the tests check.

use rayon::prelude::*;

use super::super::ranks::chunk_of;

/// What a collective asks of one rank's replay clock (replay ns). Implemented by the
/// simulation's engines on their per-rank states; `&self` is what the ranks share.
pub trait Clocks: Sync {
    /// One rank's state.
    type Rank: Send + Sync;
    /// CPU work `work` from `start` on rank `g`: its end (detours landing in it add their span).
    fn work(&self, r: &mut Self::Rank, g: usize, start: u64, work: u64) -> u64;
    /// Rank `g` idle until `t`: when it can act (`t`, or the end of a detour running at `t`).
    fn idle_until(&self, r: &mut Self::Rank, g: usize, t: u64) -> u64;
    /// A time by which rank `g` has nothing due: until the rank is asked a question that
    /// reaches past it, work that ends by it ends on time and idling until it returns at once,
    /// neither changing the state (0: not known).
    #[inline]
    fn quiet_until(&self, _r: &Self::Rank, _g: usize) -> u64 {
        0
    }
    /// Simulated ranks the state stands for (identical replays).
    #[inline]
    fn copies_of(&self, _r: &Self::Rank) -> u64 {
        1
    }

    /// A message's receive on rank `g`: idle until `until`, then CPU work `o` from when the rank
    /// can act; its end, with the rank's quiet time `q` renewed where a question reached past
    /// it. The default asks [`Clocks::idle_until`], then [`Clocks::work`] ([`idle_then_work`]);
    /// an engine may answer both in one search, with the same answer and the same state.
    #[inline]
    fn receive(&self, r: &mut Self::Rank, g: usize, until: u64, o: u64, q: &mut u64) -> u64
    where
        Self: Sized,
    {
        idle_then_work(self, r, g, until, o, q)
    }
    /// Starts loading what a question about rank `g` reads first, without waiting (a hint
    /// asked some ranks ahead; no effect on any answer).
    #[inline]
    fn prefetch(&self, _r: &Self::Rank, _g: usize) {}
}

/// Scaled (replay ns) o and ℓ of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// o, replay ns.
    pub o: u64,
    /// ℓ, replay ns.
    pub l: u64,
}

/// One round: whom each rank sends to and whom it receives from (global ranks; `None`: no
/// message). Every message of a round has one sender and one receiver that agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// Send to g + d, receive from g − d (mod n).
    Shift(u64),
    /// Exchange with g XOR d, among ranks below p.
    Xor(u64, u64),
    /// Ranks ≥ p hand to g − p.
    Fold(u64),
    /// Ranks below n − p hand back to g + p.
    Unfold(u64),
    /// Binomial gather, distance d: g ≡ d (mod 2d) sends to g − d.
    Gather(u64),
    /// Binomial broadcast, distance d: g ≡ 0 (mod 2d) sends to g + d.
    Bcast(u64),
}

impl Round {
    // Every distance d is a power of two below n and every g < n: no division needed.
    #[inline]
    pub(super) fn to(self, g: u64, n: u64) -> Option<u64> {
        match self {
            Round::Shift(d) => Some(if g + d >= n { g + d - n } else { g + d }),
            Round::Xor(d, p) => (g < p).then_some(g ^ d),
            Round::Fold(p) => (g >= p).then(|| g - p),
            Round::Unfold(p) => (g + p < n).then_some(g + p),
            Round::Gather(d) => (g & (2 * d - 1) == d).then(|| g - d),
            Round::Bcast(d) => (g & (2 * d - 1) == 0 && g + d < n).then_some(g + d),
        }
    }

    #[inline]
    pub(super) fn from(self, g: u64, n: u64) -> Option<u64> {
        match self {
            Round::Shift(d) => Some(if g >= d { g - d } else { g + n - d }),
            Round::Xor(d, p) => (g < p).then_some(g ^ d),
            Round::Fold(p) => (g + p < n).then_some(g + p),
            Round::Unfold(p) => (g >= p).then(|| g - p),
            Round::Gather(d) => (g & (2 * d - 1) == 0 && g + d < n).then_some(g + d),
            Round::Bcast(d) => (g & (2 * d - 1) == d).then(|| g - d),
        }
    }
}

/// The rank's exit must be asked of the engine (its receive, or its send where it only sends).
const ASK: u8 = 1;
/// The rank's send meets noise: its end is asked of the engine before any receive.
const SEND_LATE: u8 = 2;

/// What [`local`] works in, one entry per rank (allocated once per simulation).
#[derive(Debug, Default)]
pub(super) struct Buffers {
    /// The next round's times.
    pub(super) next: Vec<u64>,
    /// Each rank's [`ASK`] and [`SEND_LATE`] flags of the round.
    pub(super) flags: Vec<u8>,
    /// The quiet times renewed by the sends asked in the round.
    pub(super) renewed: Vec<u64>,
}

/// A question answered from the rank's quiet time `q` where it covers the work, else asked (and
/// `q` renewed): the walk's rule for a send or a receive's work.
#[inline]
pub(super) fn work<C: Clocks>(
    c: &C,
    s: &mut C::Rank,
    g: usize,
    start: u64,
    o: u64,
    q: &mut u64,
) -> u64 {
    if start + o <= *q {
        return start + o;
    }
    let end = c.work(s, g, start, o);
    *q = c.quiet_until(s, g);
    end
}

/// Idling until `until`, answered from the quiet time `q` where it covers it (see [`work`]).
#[inline]
pub(super) fn idle<C: Clocks>(c: &C, s: &mut C::Rank, g: usize, until: u64, q: &mut u64) -> u64 {
    if until <= *q {
        return until;
    }
    let ready = c.idle_until(s, g, until);
    *q = c.quiet_until(s, g);
    ready
}

/// A receive as two questions, each answered from the quiet time `q` where it covers it:
/// [`idle`] until `until`, then [`work`] `o` (what [`Clocks::receive`] must equal).
#[inline]
pub(crate) fn idle_then_work<C: Clocks>(
    c: &C,
    s: &mut C::Rank,
    g: usize,
    until: u64,
    o: u64,
    q: &mut u64,
) -> u64 {
    let ready = idle(c, s, g, until, q);
    work(c, s, g, ready, o, q)
}

/// A receive answered from the quiet time `q` where it covers both its wait and its work, else
/// asked of the rank's clock ([`Clocks::receive`]).
#[inline]
pub(super) fn receive<C: Clocks>(
    c: &C,
    s: &mut C::Rank,
    g: usize,
    until: u64,
    o: u64,
    q: &mut u64,
) -> u64 {
    if until + o <= *q {
        return until + o;
    }
    c.receive(s, g, until, o, q)
}

/// Each rank's quiet time, asked once per collective (the states changed since the last).
pub(super) fn quiet_times<C: Clocks>(clocks: &C, states: &[C::Rank], quiet: &mut [u64]) {
    let chunk = chunk_of(states.len());
    states
        .par_chunks(chunk)
        .zip(quiet.par_chunks_mut(chunk))
        .enumerate()
        .for_each(|(c, (sts, qs))| {
            for (i, (s, q)) in sts.iter().zip(qs).enumerate() {
                *q = clocks.quiet_until(s, c * chunk + i);
            }
        });
}

/// The closed form of one shift round over a stretch of ranks whose sources are one contiguous
/// stretch: `t`, `q` of the ranks, `ts`, `qs` of their sources; writes each rank's noise-free
/// exit and its flags. Branch-free over equal-length slices, so it vectorises: with AVX2 where
/// the CPU has it (four ranks at a time; the portable x86-64 baseline has no 64-bit compare).
#[inline]
fn shift_stretch(
    t: &[u64],
    q: &[u64],
    ts: &[u64],
    qs: &[u64],
    out: &mut [u64],
    fl: &mut [u8],
    c: Costs,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `shift_stretch_avx2` requires only that the CPU has AVX2, checked just above.
        unsafe { shift_stretch_avx2(t, q, ts, qs, out, fl, c) };
        return;
    }
    shift_stretch_body(t, q, ts, qs, out, fl, c);
}

/// [`shift_stretch`] compiled for AVX2. Safety: the CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn shift_stretch_avx2(
    t: &[u64],
    q: &[u64],
    ts: &[u64],
    qs: &[u64],
    out: &mut [u64],
    fl: &mut [u8],
    c: Costs,
) {
    shift_stretch_body(t, q, ts, qs, out, fl, c);
}

/// The loop of [`shift_stretch`], inlined into each of its compilations.
#[inline(always)]
fn shift_stretch_body(
    t: &[u64],
    q: &[u64],
    ts: &[u64],
    qs: &[u64],
    out: &mut [u64],
    fl: &mut [u8],
    c: Costs,
) {
    let n = out.len();
    let (t, q, ts, qs, fl) = (&t[..n], &q[..n], &ts[..n], &qs[..n], &mut fl[..n]);
    for i in 0..n {
        let own = t[i] + c.o;
        let src_sent = ts[i] + c.o;
        let exit = own.max(src_sent + c.l) + c.o;
        let late = own > q[i];
        let ask = (exit > q[i]) | (src_sent > qs[i]);
        out[i] = exit;
        fl[i] = u8::from(ask) | (u8::from(late) << 1);
    }
}

/// What a round starts from: the times and quiet times of all `n` ranks, and the costs.
#[derive(Clone, Copy)]
struct Start<'a> {
    t: &'a [u64],
    q: &'a [u64],
    n: u64,
    c: Costs,
}

/// The closed form of round `round` for ranks `g0..g0 + out.len()` (from `at`): each rank's
/// noise-free exit and its flags ([`ASK`], [`SEND_LATE`]).
fn closed_form(round: Round, at: Start<'_>, g0: usize, out: &mut [u64], fl: &mut [u8]) {
    let Start { t, q, n, c } = at;
    let len = out.len();
    if let Round::Shift(d) = round {
        let (d, n) = (d as usize, n as usize);
        // Ranks below d receive from g + n − d, the others from g − d: two contiguous stretches.
        let split = d.saturating_sub(g0).min(len);
        let (o1, o2) = out.split_at_mut(split);
        let (f1, f2) = fl.split_at_mut(split);
        let (a, b, e) = (g0, g0 + split, g0 + len);
        if a < b {
            let (sa, sb) = (a + n - d, b + n - d);
            shift_stretch(&t[a..b], &q[a..b], &t[sa..sb], &q[sa..sb], o1, f1, c);
        }
        if b < e {
            let (sb, se) = (b - d, e - d);
            shift_stretch(&t[b..e], &q[b..e], &t[sb..se], &q[sb..se], o2, f2, c);
        }
        return;
    }
    match round {
        // Ranks below p in half-blocks of d, whose partners are the other half: contiguous.
        Round::Xor(d, p) if d >= XOR_BLOCKED => xor_blocks(d as usize, p as usize, at, g0, out, fl),
        // Only multiples of d send or receive: the others leave as they came, unflagged.
        Round::Gather(d) | Round::Bcast(d) => {
            out.copy_from_slice(&t[g0..g0 + len]);
            fl.fill(0);
            let d = d as usize;
            let first = g0.div_ceil(d) * d;
            for g in (first..g0 + len).step_by(d) {
                (out[g - g0], fl[g - g0]) = one_rank(round, at, g);
            }
        }
        _ => {
            for (i, (x, f)) in out.iter_mut().zip(fl.iter_mut()).enumerate() {
                (*x, *f) = one_rank(round, at, g0 + i);
            }
        }
    }
}

/// Xor rounds of distances from this one on run in contiguous half-blocks ([`xor_blocks`]);
/// shorter ones rank by rank (a call per half-block would cost more than it saves).
const XOR_BLOCKED: u64 = 8;

/// The closed form of an Xor round of distance `d` among the ranks below `p`, for ranks
/// `g0..g0 + out.len()`: each half-block of d ranks receives from the other half of its block,
/// a contiguous stretch ([`shift_stretch`]); ranks from p on take no part.
fn xor_blocks(d: usize, p: usize, at: Start<'_>, g0: usize, out: &mut [u64], fl: &mut [u8]) {
    let Start { t, q, c, .. } = at;
    let end = g0 + out.len();
    let mut g = g0;
    while g < end {
        if g >= p {
            out[g - g0..].copy_from_slice(&t[g..end]);
            fl[g - g0..].fill(0);
            return;
        }
        // The end of g's half-block (d is a power of two; p a multiple of 2d).
        let e = ((g | (d - 1)) + 1).min(end).min(p);
        let (s, se) = (g ^ d, (g ^ d) + (e - g));
        let (o, f) = (&mut out[g - g0..e - g0], &mut fl[g - g0..e - g0]);
        shift_stretch(&t[g..e], &q[g..e], &t[s..se], &q[s..se], o, f, c);
        g = e;
    }
}

/// The closed form of round `round` for rank `g`: its noise-free exit and its flags.
#[inline]
fn one_rank(round: Round, at: Start<'_>, g: usize) -> (u64, u8) {
    let Start { t, q, n, c } = at;
    let gg = g as u64;
    let sends = round.to(gg, n).is_some();
    let own = if sends { t[g] + c.o } else { t[g] };
    let late = sends && own > q[g];
    let (exit, ask) = match round.from(gg, n) {
        Some(src) => {
            let src = src as usize;
            let src_sent = t[src] + c.o;
            let exit = own.max(src_sent + c.l) + c.o;
            (exit, exit > q[g] || src_sent > q[src])
        }
        None => (own, late),
    };
    (exit, u8::from(ask) | (u8::from(late) << 1))
}

/// Calls `f(i, flags)` for every `i` whose flags share a bit with `mask`, skipping eight
/// unflagged ranks at a time.
#[inline]
fn each_flagged(fl: &[u8], mask: u8, mut f: impl FnMut(usize, u8)) {
    let word = u64::from_ne_bytes([mask; 8]);
    let mut words = fl.chunks_exact(8);
    let mut at = 0;
    for w in words.by_ref() {
        let bits = u64::from_ne_bytes(w.try_into().expect("eight flags"));
        if bits & word != 0 {
            for (j, &x) in w.iter().enumerate() {
                if x & mask != 0 {
                    f(at + j, x);
                }
            }
        }
        at += 8;
    }
    for (j, &x) in words.remainder().iter().enumerate() {
        if x & mask != 0 {
            f(at + j, x);
        }
    }
}

/// Flagged ranks ahead of the one being asked whose lines [`each_flagged_ahead`] asks for.
const ASK_AHEAD: usize = 4;

/// [`each_flagged`] with a look-ahead: `f(i, flags, false)` for every flagged `i` in order,
/// each preceded, [`ASK_AHEAD`] flagged ranks earlier, by `f(i, flags, true)` (a prefetch).
#[inline]
fn each_flagged_ahead(fl: &[u8], mask: u8, mut f: impl FnMut(usize, u8, bool)) {
    let mut ring = [(0usize, 0u8); ASK_AHEAD];
    let mut pushed = 0usize;
    each_flagged(fl, mask, |i, x| {
        f(i, x, true);
        let slot = &mut ring[pushed % ASK_AHEAD];
        if pushed >= ASK_AHEAD {
            let (j, y) = *slot;
            f(j, y, false);
        }
        *slot = (i, x);
        pushed += 1;
    });
    for k in pushed.saturating_sub(ASK_AHEAD)..pushed {
        let (j, y) = ring[k % ASK_AHEAD];
        f(j, y, false);
    }
}

/// One collective of `rounds` over all ranks in this process (`states`, `t` by rank): each
/// round in closed form, the flagged ranks asked (see the module doc). `sent` and `quiet` are
/// the caller's scratch (one entry per rank).
pub(super) fn local<C: Clocks>(
    clocks: &C,
    rounds: &[Round],
    costs: Costs,
    states: &mut [C::Rank],
    t: &mut [u64],
    scratch: (&mut [u64], &mut [u64], &mut Buffers),
) {
    let (sent, quiet, bufs) = scratch;
    let bufs: &mut Buffers = bufs;
    let n = states.len();
    let chunk = chunk_of(n);
    let o = costs.o;
    quiet_times(clocks, states, quiet);
    let (mut cur, mut nxt): (&mut [u64], &mut [u64]) = (t, &mut bufs.next[..n]);
    let flags = &mut bufs.flags[..n];
    let renewed = &mut bufs.renewed[..n];
    let mut swapped = false;
    for &round in rounds {
        // Every rank's noise-free exit and whether it holds; then, chunk by chunk, the sends
        // that meet noise, asked before any receive (as the walk does), their renewed quiet
        // times kept apart (the other chunks read the ones the round began with).
        {
            let (cur_all, quiet_all) = (&*cur, &*quiet);
            let ends = nxt
                .par_chunks_mut(chunk)
                .zip(flags.par_chunks_mut(chunk))
                .zip(sent.par_chunks_mut(chunk))
                .zip(renewed.par_chunks_mut(chunk))
                .zip(states.par_chunks_mut(chunk));
            ends.enumerate()
                .for_each(|(c, ((((out, fl), ss), rs), sts))| {
                    let g0 = c * chunk;
                    let at = Start {
                        t: cur_all,
                        q: quiet_all,
                        n: n as u64,
                        c: costs,
                    };
                    closed_form(round, at, g0, out, fl);
                    each_flagged(fl, SEND_LATE, |i, _| {
                        let g = g0 + i;
                        let mut q = quiet_all[g];
                        ss[i] = work(clocks, &mut sts[i], g, cur_all[g], o, &mut q);
                        rs[i] = q;
                    });
                });
        }
        // The flagged exits, asked with the sends' true ends.
        {
            let (cur, sent, flags_all) = (&*cur, &*sent, &*flags);
            let sent_by = |g: usize| {
                if flags_all[g] & SEND_LATE != 0 {
                    sent[g]
                } else {
                    cur[g] + o
                }
            };
            states
                .par_chunks_mut(chunk)
                .zip(nxt.par_chunks_mut(chunk))
                .zip(quiet.par_chunks_mut(chunk))
                .zip(flags_all.par_chunks(chunk))
                .zip(renewed.par_chunks(chunk))
                .enumerate()
                .for_each(|(c, ((((sts, out), qs), fl), rs))| {
                    each_flagged_ahead(fl, ASK, |i, f, ahead| {
                        let g = c * chunk + i;
                        if ahead {
                            clocks.prefetch(&sts[i], g);
                            return;
                        }
                        if f & SEND_LATE != 0 {
                            qs[i] = rs[i];
                        }
                        let own = match round.to(g as u64, n as u64) {
                            Some(_) => sent_by(g),
                            None => cur[g],
                        };
                        out[i] = match round.from(g as u64, n as u64) {
                            Some(src) => {
                                let arrival = sent_by(src as usize) + costs.l;
                                receive(clocks, &mut sts[i], g, own.max(arrival), o, &mut qs[i])
                            }
                            None => own,
                        };
                    });
                });
        }
        std::mem::swap(&mut cur, &mut nxt);
        swapped = !swapped;
    }
    if swapped {
        // The last round's exits are in the buffer: `nxt` is the caller's `t`.
        nxt.copy_from_slice(cur);
    }
}
