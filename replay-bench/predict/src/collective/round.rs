//! What a collective asks of a rank's clock ([`Clocks`], [`Costs`]), its rounds ([`Round`]) and
//! how a process runs them over its block of ranks ([`block`]) without asking the engine where no
//! rank meets a detour.
//!
//! A round without noise has a closed form: a rank that sends at `t` ends its send at `t + o`;
//! one that receives from `src` leaves at `max(own, t_src + o + l) + o` (`own`: its time after
//! its own send). That answer is the engine's wherever the rank's quiet time
//! ([`Clocks::quiet_until`]) covers it and its source's send ended by the source's: then every
//! question of the round would have been answered from the quiet times, changing no state.
//! [`block`] therefore runs each round as one arithmetic pass over its ranks (for the
//! dissemination's shift, a loop over contiguous slices that the compiler vectorises, for AVX2
//! where the CPU has it), which also flags the ranks where it does not hold; only those are
//! asked, in the order the round-by-round walk asks them (every send of the round, then every
//! receive), each asking for its index lines [`ASK_AHEAD`] flagged ranks ahead. A receive is
//! one question ([`Clocks::receive`]: the wait and the work, detours that begin and end in the
//! wait stepped over, in one search of the indexed engine). Under MPI a receiver whose source
//! another process holds gets the source's true send end (asked first where the send met
//! noise, then exchanged: [`Exchange`]) and is closed-formed from it ([`crossing`]): its
//! flag then rests on its own quiet time alone. One process is the block of all ranks, with no
//! such receiver. Exactness against the round-by-round walk (`run_rounds` in the tests), and of
//! blocks split over processes against one process, is what the tests check.

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

    /// Calls `f(g, partner)` for every rank `g` in `lo..hi` whose partner (its receiver where
    /// `to`, else its source) lies outside `lo..hi`: the messages of the round that cross to or
    /// from another process. A shift's or a long xor's partners are contiguous stretches, so
    /// only the crossing ranks are visited; the other rounds are scanned rank by rank.
    pub(super) fn crossing(
        self,
        to: bool,
        n: u64,
        (lo, hi): (u64, u64),
        mut f: impl FnMut(u64, u64),
    ) {
        let mut stretch = |a: u64, b: u64, pa: u64| {
            // Partners pa + k inside lo..hi for k in k0..k1.
            let len = b.saturating_sub(a);
            let k0 = lo.saturating_sub(pa).min(len);
            let k1 = hi.saturating_sub(pa).clamp(k0, len);
            for k in (0..k0).chain(k1..len) {
                f(a + k, pa + k);
            }
        };
        match self {
            Round::Shift(d) => {
                // To g + d (from g − d), wrapping at n − d (at d).
                let (cut, ahead, behind) = if to { (n - d, d, n - d) } else { (d, n - d, d) };
                stretch(lo, hi.min(cut), lo + ahead);
                let b = lo.max(cut);
                stretch(b, hi, b.wrapping_sub(behind));
            }
            Round::Xor(d, p) if d >= XOR_BLOCKED => {
                let end = hi.min(p);
                let mut g = lo;
                while g < end {
                    let e = ((g | (d - 1)) + 1).min(end);
                    stretch(g, e, g ^ d);
                    g = e;
                }
            }
            _ => {
                for g in lo..hi {
                    let partner = if to { self.to(g, n) } else { self.from(g, n) };
                    if let Some(x) = partner.filter(|&x| x < lo || x >= hi) {
                        f(g, x);
                    }
                }
            }
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

/// The sends of a stretch of ranks whose sources lie in another process (their ends are not
/// here yet): each rank's own send end and its [`SEND_LATE`] flag; the exit and [`ASK`] follow
/// once the ends arrived ([`crossing`]).
#[inline]
fn sends_stretch(t: &[u64], q: &[u64], out: &mut [u64], fl: &mut [u8], c: Costs) {
    let n = out.len();
    let (t, q, fl) = (&t[..n], &q[..n], &mut fl[..n]);
    for i in 0..n {
        let own = t[i] + c.o;
        out[i] = own;
        fl[i] = u8::from(own > q[i]) << 1;
    }
}

/// What a round starts from: the times and quiet times of this process's ranks `lo..` (by
/// local rank), the rank count `n` and the costs.
#[derive(Clone, Copy)]
struct Start<'a> {
    t: &'a [u64],
    q: &'a [u64],
    n: u64,
    lo: usize,
    c: Costs,
}

/// The closed form of round `round` for ranks `g0..g0 + out.len()` (global, from `at`): each
/// rank's noise-free exit and its flags ([`ASK`], [`SEND_LATE`]); for a rank whose source
/// another process holds, its send only ([`sends_stretch`]).
fn closed_form(round: Round, at: Start<'_>, g0: usize, out: &mut [u64], fl: &mut [u8]) {
    let Start { t, n, lo, .. } = at;
    let len = out.len();
    if let Round::Shift(d) = round {
        let (d, n) = (d as usize, n as usize);
        // Ranks below d receive from g + n − d, the others from g − d: two contiguous stretches.
        let split = d.saturating_sub(g0).min(len);
        let (o1, o2) = out.split_at_mut(split);
        let (f1, f2) = fl.split_at_mut(split);
        let (a, b) = (g0, g0 + split);
        if split > 0 {
            stretch(at, a, a + n - d, o1, f1);
        }
        if split < len {
            stretch(at, b, b - d, o2, f2);
        }
        return;
    }
    match round {
        // Ranks below p in half-blocks of d, whose partners are the other half: contiguous.
        Round::Xor(d, p) if d >= XOR_BLOCKED => xor_blocks(d as usize, p as usize, at, g0, out, fl),
        // Only multiples of d send or receive: the others leave as they came, unflagged.
        Round::Gather(d) | Round::Bcast(d) => {
            out.copy_from_slice(&t[g0 - lo..g0 - lo + len]);
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

/// The closed form of the ranks `a..a + out.len()` (global) whose sources are the contiguous
/// `sa..`: where the sources are this process's, [`shift_stretch`]; where another's, the sends
/// only ([`sends_stretch`]). In one process the sources are all here: one call.
#[inline]
fn stretch(at: Start<'_>, a: usize, sa: usize, out: &mut [u64], fl: &mut [u8]) {
    let Start { t, q, lo, c, .. } = at;
    let (len, hi) = (out.len(), lo + t.len());
    // Sources sa + k in lo..hi: k in k0..k1.
    let k0 = lo.saturating_sub(sa).min(len);
    let k1 = hi.saturating_sub(sa).clamp(k0, len);
    let (r, s) = (a - lo, sa.max(lo) - lo);
    if k0 > 0 {
        sends_stretch(
            &t[r..r + k0],
            &q[r..r + k0],
            &mut out[..k0],
            &mut fl[..k0],
            c,
        );
    }
    if k0 < k1 {
        let (rs, re) = (r + k0, r + k1);
        let (ts, qs) = (&t[s..s + (k1 - k0)], &q[s..s + (k1 - k0)]);
        let (o, f) = (&mut out[k0..k1], &mut fl[k0..k1]);
        shift_stretch(&t[rs..re], &q[rs..re], ts, qs, o, f, c);
    }
    if k1 < len {
        let (rs, re) = (r + k1, r + len);
        sends_stretch(&t[rs..re], &q[rs..re], &mut out[k1..], &mut fl[k1..], c);
    }
}

/// Xor rounds of distances from this one on run in contiguous half-blocks ([`xor_blocks`]);
/// shorter ones rank by rank (a call per half-block would cost more than it saves).
const XOR_BLOCKED: u64 = 8;

/// The closed form of an Xor round of distance `d` among the ranks below `p`, for ranks
/// `g0..g0 + out.len()`: each half-block of d ranks receives from the other half of its block,
/// a contiguous stretch ([`stretch`]); ranks from p on take no part.
fn xor_blocks(d: usize, p: usize, at: Start<'_>, g0: usize, out: &mut [u64], fl: &mut [u8]) {
    let (t, lo) = (at.t, at.lo);
    let end = g0 + out.len();
    let mut g = g0;
    while g < end {
        if g >= p {
            out[g - g0..].copy_from_slice(&t[g - lo..end - lo]);
            fl[g - g0..].fill(0);
            return;
        }
        // The end of g's half-block (d is a power of two; p a multiple of 2d).
        let e = ((g | (d - 1)) + 1).min(end).min(p);
        let (o, f) = (&mut out[g - g0..e - g0], &mut fl[g - g0..e - g0]);
        stretch(at, g, g ^ d, o, f);
        g = e;
    }
}

/// The closed form of round `round` for rank `g` (global): its noise-free exit and its flags;
/// where another process holds its source, its send only (as [`sends_stretch`]).
#[inline]
fn one_rank(round: Round, at: Start<'_>, g: usize) -> (u64, u8) {
    let Start { t, q, n, lo, c } = at;
    let (gg, i) = (g as u64, g - lo);
    let sends = round.to(gg, n).is_some();
    let own = if sends { t[i] + c.o } else { t[i] };
    let late = sends && own > q[i];
    let src = round.from(gg, n).map(|s| s as usize);
    let (exit, ask) = match src {
        Some(src) if lo <= src && src < lo + t.len() => {
            let src_sent = t[src - lo] + c.o;
            let exit = own.max(src_sent + c.l) + c.o;
            (exit, exit > q[i] || src_sent > q[src - lo])
        }
        // Another process holds the source: the exit and ASK follow from its end.
        Some(_) => (own, false),
        None => (own, late),
    };
    (exit, u8::from(ask) | (u8::from(late) << 1))
}

/// The closed form of the receivers whose sources another process holds, from their sources'
/// true send ends (`incoming`: (receiver, end) pairs, global ranks), kept in `arrived` by local
/// rank for the questions: each exit and its flags, the source's end taken as given (it was
/// asked where it met noise), so only the receiver's own quiet time decides [`ASK`].
fn crossing(round: Round, at: Start<'_>, incoming: &[u64], ends: Ends<'_>) {
    let Start { t, q, n, lo, c } = at;
    for pair in incoming.chunks_exact(2) {
        let (g, end) = (pair[0], pair[1]);
        let i = g as usize - lo;
        let sends = round.to(g, n).is_some();
        let own = if sends { t[i] + c.o } else { t[i] };
        let late = sends && own > q[i];
        let exit = own.max(end + c.l) + c.o;
        ends.arrived[i] = end;
        ends.out[i] = exit;
        ends.flags[i] = u8::from(exit > q[i]) | (u8::from(late) << 1);
    }
}

/// Where [`crossing`] writes, by local rank.
struct Ends<'a> {
    arrived: &'a mut [u64],
    out: &'a mut [u64],
    flags: &'a mut [u8],
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

/// How the send ends of a round cross between processes (under MPI).
pub(super) trait Exchange {
    /// Sends the ends (`end_of(local sender)`) of `round`'s senders among the `len` ranks from
    /// `lo` of `n` whose receivers another process holds; returns the incoming (receiver, end)
    /// pairs of this process's receivers whose sources another holds, and the buffer their ends
    /// are kept in by local rank. Every process calls it every round, with or without ranks.
    /// `meanwhile` runs while the ends travel.
    fn exchange(
        &mut self,
        round: Round,
        block: (u64, u64, usize),
        end_of: &dyn Fn(usize) -> u64,
        meanwhile: &mut dyn FnMut(),
    ) -> (&[u64], &mut [u64]);
}

/// The ranks one process holds, `lo..lo + states` of `n`, and under MPI how the rounds' send
/// ends cross to the other processes (`routes`; `None`: one process holds every rank).
pub(super) struct Block<'a> {
    pub(super) n: u64,
    pub(super) lo: u64,
    pub(super) routes: Option<&'a mut dyn Exchange>,
}

/// One collective of `rounds` over this process's ranks (`states`, `t` by local rank): each
/// round in closed form, the flagged ranks asked (see the module doc). Under MPI, after the
/// late sends were asked, the send ends that cross to another process travel
/// ([`Exchange`]) and the receivers they reach are closed-formed from them
/// ([`crossing`]) before any question of a receive. `sent` and `quiet` are the caller's scratch
/// (one entry per rank).
pub(super) fn block<C: Clocks>(
    clocks: &C,
    rounds: &[Round],
    costs: Costs,
    mut at: Block<'_>,
    states: &mut [C::Rank],
    t: &mut [u64],
    scratch: (&mut [u64], &mut [u64], &mut Buffers),
) {
    let (sent, quiet, bufs) = scratch;
    let len = states.len();
    debug_assert!(at.routes.is_some() || (at.lo == 0 && len as u64 == at.n));
    let (n, lo) = (at.n, at.lo as usize);
    let chunk = chunk_of(len);
    let (sent, quiet) = (&mut sent[..len], &mut quiet[..len]);
    quiet_times(clocks, states, quiet);
    let (mut cur, mut nxt): (&mut [u64], &mut [u64]) = (t, &mut bufs.next[..len]);
    let flags = &mut bufs.flags[..len];
    let renewed = &mut bufs.renewed[..len];
    let mut swapped = false;
    for &round in rounds {
        let start = Start {
            t: cur,
            q: quiet,
            n,
            lo,
            c: costs,
        };
        let written = Written {
            out: nxt,
            flags,
            sent,
            renewed,
        };
        sends(clocks, round, start, states, written, chunk);
        let asked = Asked {
            cur,
            sent,
            flags,
            renewed,
            n,
            lo,
            costs,
        };
        let Some(routes) = at.routes.as_deref_mut() else {
            asks(clocks, round, asked, states, (nxt, quiet), chunk);
            std::mem::swap(&mut cur, &mut nxt);
            swapped = !swapped;
            continue;
        };
        // Under MPI the receivers whose sources are here are asked while the crossing ends
        // travel (the others are not flagged [`ASK`] yet), then those that arrived.
        let end_of = |l: usize| asked.sent_by(l);
        let mut interior = || asks(clocks, round, asked, states, (nxt, quiet), chunk);
        let (incoming, ends) = routes.exchange(round, (n, at.lo, len), &end_of, &mut interior);
        let start = Start {
            t: cur,
            q: quiet,
            n,
            lo,
            c: costs,
        };
        let to = Ends {
            arrived: &mut *ends,
            out: nxt,
            flags,
        };
        crossing(round, start, incoming, to);
        let asked = Asked {
            cur,
            sent,
            flags,
            renewed,
            n,
            lo,
            costs,
        };
        // In order, each flagged rank's lines asked for [`ASK_AHEAD`] pairs earlier.
        let receivers = incoming.iter().step_by(2).map(|&g| g as usize - lo);
        let ahead = receivers.clone().skip(ASK_AHEAD).map(Some);
        for (l, la) in receivers.zip(ahead.chain(std::iter::repeat(None))) {
            if let Some(la) = la.filter(|&la| flags[la] & ASK != 0) {
                clocks.prefetch(&states[la], la);
            }
            if flags[l] & ASK != 0 {
                let q = (&mut quiet[l], &*ends);
                nxt[l] = ask(clocks, round, &asked, &mut states[l], l, q);
            }
        }
        std::mem::swap(&mut cur, &mut nxt);
        swapped = !swapped;
    }
    if swapped {
        // The last round's exits are in the buffer: `nxt` is the caller's `t`.
        nxt.copy_from_slice(cur);
    }
}

/// What the first pass of a round writes, by local rank: the noise-free exits and the flags,
/// and the late sends' true ends and renewed quiet times.
struct Written<'a> {
    out: &'a mut [u64],
    flags: &'a mut [u8],
    sent: &'a mut [u64],
    renewed: &'a mut [u64],
}

/// A round's first pass: every rank's noise-free exit and whether it holds; then, chunk by
/// chunk, the sends that meet noise, asked before any receive (as the walk does), their renewed
/// quiet times kept apart (the other chunks read the ones the round began with).
fn sends<C: Clocks>(
    clocks: &C,
    round: Round,
    at: Start<'_>,
    states: &mut [C::Rank],
    w: Written<'_>,
    chunk: usize,
) {
    let (cur, quiet, o) = (at.t, at.q, at.c.o);
    let ends = w
        .out
        .par_chunks_mut(chunk)
        .zip(w.flags.par_chunks_mut(chunk))
        .zip(w.sent.par_chunks_mut(chunk))
        .zip(w.renewed.par_chunks_mut(chunk))
        .zip(states.par_chunks_mut(chunk));
    ends.enumerate()
        .for_each(|(c, ((((out, fl), ss), rs), sts))| {
            let l0 = c * chunk;
            closed_form(round, at, at.lo + l0, out, fl);
            each_flagged(fl, SEND_LATE, |i, _| {
                let g = l0 + i;
                let mut q = quiet[g];
                ss[i] = work(clocks, &mut sts[i], g, cur[g], o, &mut q);
                rs[i] = q;
            });
        });
}

/// What a round's questions read, by local rank: the times it began with, the late sends'
/// ends, the flags and renewed quiet times.
#[derive(Clone, Copy)]
struct Asked<'a> {
    cur: &'a [u64],
    sent: &'a [u64],
    flags: &'a [u8],
    renewed: &'a [u64],
    n: u64,
    lo: usize,
    costs: Costs,
}

impl Asked<'_> {
    /// The true end of local rank `l`'s send of the round.
    #[inline]
    fn sent_by(&self, l: usize) -> u64 {
        if self.flags[l] & SEND_LATE != 0 {
            self.sent[l]
        } else {
            self.cur[l] + self.costs.o
        }
    }
}

/// The question of flagged local rank `l` (state `st`, quiet time `q`): its exit from its own
/// send's true end and its source's (this process's, or as it arrived from another: `arrived`
/// by local rank, read only for a source another process holds).
#[inline]
fn ask<C: Clocks>(
    clocks: &C,
    round: Round,
    a: &Asked<'_>,
    st: &mut C::Rank,
    l: usize,
    (q, arrived): (&mut u64, &[u64]),
) -> u64 {
    let (lo, n, c) = (a.lo, a.n, a.costs);
    if a.flags[l] & SEND_LATE != 0 {
        *q = a.renewed[l];
    }
    let g = (lo + l) as u64;
    let own = match round.to(g, n) {
        Some(_) => a.sent_by(l),
        None => a.cur[l],
    };
    match round.from(g, n).map(|s| s as usize) {
        Some(src) => {
            let end = if lo <= src && src < lo + a.cur.len() {
                a.sent_by(src - lo)
            } else {
                arrived[l]
            };
            receive(clocks, st, l, own.max(end + c.l), c.o, q)
        }
        None => own,
    }
}

/// A round's second pass: the ranks flagged [`ASK`] asked with the sends' true ends (`out` and
/// the quiet times by local rank); a rank whose source another process holds is flagged only
/// once its source's end arrived ([`crossing`]), so none is asked here.
fn asks<C: Clocks>(
    clocks: &C,
    round: Round,
    a: Asked<'_>,
    states: &mut [C::Rank],
    (out, quiet): (&mut [u64], &mut [u64]),
    chunk: usize,
) {
    states
        .par_chunks_mut(chunk)
        .zip(out.par_chunks_mut(chunk))
        .zip(quiet.par_chunks_mut(chunk))
        .zip(a.flags.par_chunks(chunk))
        .enumerate()
        .for_each(|(c, (((sts, out), qs), fl))| {
            each_flagged_ahead(fl, ASK, |i, _, ahead| {
                let l = c * chunk + i;
                if ahead {
                    clocks.prefetch(&sts[i], l);
                    return;
                }
                out[i] = ask(clocks, round, &a, &mut sts[i], l, (&mut qs[i], &[]));
            });
        });
}
