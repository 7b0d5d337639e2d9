//! One rank's replay in a [`PlanIndex`] ([`IndexedReplay`], what the predictor keeps per rank:
//! no allocation, no shared pointer) and where a replay segment begins ([`SegmentStart`]): the
//! compute and barrier questions of the predictor answered by search, with the cursor's counts
//! (its executed-injection rule) and its fraction limit. The replay keeps its fast path's next
//! entry and its quiet time (set from the entry a fast answer has just read, recomputed after
//! any other change), so that asking for them reads no line of the index.

use crate::plan_index::{
    first_at_least, gallop, prefetch, FastEntry, PlanIndex, PrefetchTicket, FIRST_BLOCK,
    FIRST_LINEAR,
};
use jitter_emulator::plan::{replayed_ns, PlanStats, RawGroup};

/// Where a replay segment that starts at one timeline point begins in a [`PlanIndex`]: a pure
/// function of the point, so ranks resynchronised to one point share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentStart {
    p: u64,
    g_mid: u64,
    head: Option<HeadGroup>,
}

/// The first injection of a segment that starts inside a group: the rest of that group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeadGroup {
    k: u64,
    a: u64,
    last: u64,
    g: RawGroup,
}

/// A replay in a [`PlanIndex`]: what the predictor keeps per rank (no allocation, no shared
/// pointer), answering the compute and barrier questions by search. Counts follow the
/// cursor's executed-injection rule with [`Cursor::confirm`] after every executed injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedReplay {
    p: u64,
    r0: u64,
    consumed_before: u64,
    i_first: u64,
    next: u64,
    /// Unrolled injections below this end before the fraction limit (learnt once per start).
    i_safe: u64,
    /// [`IndexedReplay::quiet_until`], kept by every change of the replay (from the entry its
    /// answer has just read), so that asking it reads no index line.
    quiet: u64,
    /// [`IndexedReplay::fast_start`], kept as the quiet time is ([`NOT_FAST`]: none).
    i_fast: u32,
    flags: u8,
}

/// [`IndexedReplay`]'s `i_fast` where the fast path does not apply (the index has fewer
/// entries: [`PlanIndex::bucket_keys`]).
const NOT_FAST: u32 = u32::MAX;

/// The start and span of segment `seg`'s head injection (where the replay's `HEAD_INJ` says it
/// has one; the replay keeps neither: they are the segment's).
#[inline]
fn head_of(ix: &PlanIndex, seg: &SegmentStart) -> (u64, u64) {
    seg.head
        .as_ref()
        .map_or((0, 0), |h| (h.a, ix.opts.scaled(h.g.run)))
}

impl Default for IndexedReplay {
    /// A replay of nothing yet: no fast path, nothing quiet (ask the index's `replay` for one).
    fn default() -> Self {
        IndexedReplay {
            p: 0,
            r0: 0,
            consumed_before: 0,
            i_first: 0,
            next: 0,
            i_safe: 0,
            quiet: 0,
            i_fast: NOT_FAST,
            flags: 0,
        }
    }
}

const HEAD_INJ: u8 = 1;
const EXHAUSTED: u8 = 2;
const BOUNDED: u8 = 4;
/// The cursor built past the fraction limit once (its look-ahead): it stays finished, also
/// after a resync (the cursor's `finished` is sticky).
const DEAD: u8 = 8;
/// This segment began finished (see [`DEAD`]): nothing in it.
const EMPTY: u8 = 16;

/// The end of a segment near the fraction limit.
#[derive(Debug, Clone, Copy)]
struct Bound {
    /// Head injections counted (0 or 1).
    h: u64,
    /// Full middle injections end (unrolled injection index).
    mid_end: u64,
    /// End of the whole middle groups met (unrolled group index).
    full_end: u64,
    /// The clipped last group (its start, its group) and its span when injected.
    tail: Option<(u64, RawGroup, Option<u64>)>,
    /// The head group when it is met (clipped or not).
    head: Option<RawGroup>,
    count: u64,
}

impl PlanIndex {
    /// Where a segment from timeline point `offset_ns` (trace ns from the window start)
    /// begins: the rest of the group in progress there, if any, then whole groups.
    pub(crate) fn segment_start(&self, offset_ns: u64) -> SegmentStart {
        let p0 = offset_ns % self.period;
        let p = if p0 < self.u0 { p0 + self.period } else { p0 };
        let k = self.re.partition_point(|&e| e <= p) as u64;
        let (sk, _) = self.rec(k);
        let g = self.group_of(k);
        if sk < p || k != self.gfirst_u(g) {
            let last = self.gfirst_u(g + 1) - 1;
            let a = sk.max(p);
            SegmentStart {
                p,
                g_mid: g + 1,
                head: Some(HeadGroup {
                    k,
                    a,
                    last,
                    g: self.clipped(k, a, last, u64::MAX),
                }),
            }
        } else {
            SegmentStart {
                p,
                g_mid: g,
                head: None,
            }
        }
    }

    /// Starts a replay at timeline point `offset_ns` at replay time 0 (as [`Plan::cursor`]).
    pub fn replay(&self, seg: &SegmentStart) -> IndexedReplay {
        let mut r = self.begin(seg, 0, 0);
        if !self.fast.is_empty() && r.flags & BOUNDED == 0 {
            // Once per start, so that the fast path need not look at the limit again.
            let limit = r.limit_pos(self);
            r.i_safe = gallop(r.i_first, self.fast.len() as u64, |i| self.b_u(i) >= limit);
        }
        r.refresh(self);
        r
    }

    fn begin(&self, seg: &SegmentStart, now: u64, consumed_before: u64) -> IndexedReplay {
        let mut r = IndexedReplay {
            p: seg.p,
            r0: now,
            consumed_before,
            i_first: self.gcum(&self.groups.ginj, seg.g_mid),
            next: 0,
            i_safe: 0,
            quiet: 0,
            i_fast: NOT_FAST,
            flags: 0,
        };
        let limit_pos = r.limit_pos(self);
        if limit_pos <= seg.p {
            r.flags |= DEAD;
        }
        if let Some(h) = &seg.head {
            if h.g.end > limit_pos {
                r.flags |= BOUNDED;
            }
            let span = self.opts.scaled(h.g.run);
            if span > self.opts.overhead_ns {
                r.flags |= HEAD_INJ;
            }
        }
        if r.flags & DEAD != 0 {
            r.flags |= EMPTY | BOUNDED;
        }
        r
    }

    fn bound(&self, r: &IndexedReplay, seg: &SegmentStart) -> Bound {
        let limit = r.limit_pos(self);
        let empty = Bound {
            h: 0,
            mid_end: r.i_first,
            full_end: seg.g_mid,
            tail: None,
            head: None,
            count: 0,
        };
        if limit <= seg.p || r.flags & EMPTY != 0 {
            return empty;
        }
        let over = |g: RawGroup| {
            let span = self.opts.scaled(g.run);
            (span > self.opts.overhead_ns).then_some(span)
        };
        let mut head = None;
        if let Some(h) = &seg.head {
            if h.a >= limit {
                return empty;
            }
            if h.g.end > limit {
                let g = self.clipped(h.k, h.a, h.last, limit);
                let inj = over(g);
                return Bound {
                    h: 0,
                    mid_end: r.i_first,
                    full_end: seg.g_mid,
                    tail: Some((h.a, g, inj)),
                    head: None,
                    count: u64::from(inj.is_some()),
                };
            }
            head = Some(h.g);
        }
        let h = u64::from(r.flags & HEAD_INJ != 0);
        // First group (unrolled, within two laps) starting at or after the limit.
        let (mut lo, mut hi) = (seg.g_mid, 2 * self.group_count() + 1);
        while lo < hi {
            let m = lo + (hi - lo) / 2;
            if self.rec(self.gfirst_u(m)).0 < limit {
                lo = m + 1;
            } else {
                hi = m;
            }
        }
        let g_end = lo;
        let mut b = Bound {
            h,
            mid_end: self.gcum(&self.groups.ginj, g_end),
            full_end: g_end,
            tail: None,
            head,
            count: 0,
        };
        if g_end > seg.g_mid {
            let gl = g_end - 1;
            let (k0, last) = (self.gfirst_u(gl), self.gfirst_u(gl + 1) - 1);
            if self.rec(last).1 > limit {
                let a = self.rec(k0).0;
                let g = self.clipped(k0, a, last, limit);
                b.mid_end = self.gcum(&self.groups.ginj, gl);
                b.full_end = gl;
                b.tail = Some((a, g, over(g)));
            }
        }
        let t = b.tail.map_or(0, |t| u64::from(t.2.is_some()));
        b.count = h + (b.mid_end - r.i_first) + t;
        b
    }
}

impl IndexedReplay {
    #[inline]
    fn limit_pos(&self, ix: &PlanIndex) -> u64 {
        self.p + ix.limit_ns.saturating_sub(self.consumed_before)
    }

    /// Injections before the middle ones (0 or 1: the head).
    #[inline]
    fn h(&self, bound: Option<&Bound>) -> u64 {
        bound.map_or(u64::from(self.flags & HEAD_INJ != 0), |b| b.h)
    }

    /// Start and group end of virtual injection `v` (`v` below the bound's count).
    #[inline]
    fn entry(
        &self,
        ix: &PlanIndex,
        seg: &SegmentStart,
        bound: Option<&Bound>,
        v: u64,
    ) -> (u64, u64) {
        let h = self.h(bound);
        if v < h {
            let a = head_of(ix, seg).0;
            return (a, a);
        }
        let i = self.i_first + (v - h);
        if let Some(b) = bound {
            if i >= b.mid_end {
                let (a, g, _) = b.tail.expect("a virtual injection past the bound");
                return (a, g.end);
            }
        }
        let e = ix.inj_u(i);
        (e.a, e.b)
    }

    /// Σ span of the virtual injections before `v` (`v` up to the bound's count).
    #[inline]
    fn cs_before(&self, ix: &PlanIndex, seg: &SegmentStart, bound: Option<&Bound>, v: u64) -> u64 {
        let h = self.h(bound);
        if v <= h {
            return if v == 1 { head_of(ix, seg).1 } else { 0 };
        }
        let hs = if h == 1 { head_of(ix, seg).1 } else { 0 };
        let i = self.i_first + (v - h);
        if let Some(b) = bound {
            if i > b.mid_end {
                let t = b.tail.and_then(|t| t.2).unwrap_or(0);
                return hs + ix.cs_u(b.mid_end) - ix.cs_u(self.i_first) + t;
            }
        }
        hs + ix.cs_u(i) - ix.cs_u(self.i_first)
    }
}

impl IndexedReplay {
    /// Replay time of virtual injection `v`'s due (no timer error: the index is exact only
    /// then).
    #[inline]
    fn due(&self, ix: &PlanIndex, a: u64) -> u64 {
        self.r0.saturating_add(ix.opts.scaled(a - self.p))
    }

    /// Runs `query` without the limit when neither the answer nor the cursor's look-ahead
    /// can reach it, else with it. `query` returns the first injection not executed, the
    /// answer, and whether it returned right after executing one (without a look at the next).
    #[inline]
    fn answer<T>(
        &mut self,
        ix: &PlanIndex,
        seg: &SegmentStart,
        mut query: impl FnMut(&Self, Option<&Bound>) -> (u64, T, bool),
    ) -> T {
        if self.flags & BOUNDED == 0 {
            let (k, out, early) = query(self, None);
            // The walk built every injection up to the one after the last it looked at.
            let built = if early { k } else { k + 1 };
            if self.entry(ix, seg, None, built).1 <= self.limit_pos(ix) {
                self.next = k;
                return out;
            }
            self.flags |= BOUNDED;
        }
        let bound = ix.bound(self, seg);
        let (k, out, early) = query(self, Some(&bound));
        self.next = k;
        if !early && k == bound.count {
            self.flags |= EXHAUSTED | DEAD;
        }
        if (if early { k } else { k + 1 }) >= bound.count {
            self.flags |= DEAD;
        }
        out
    }

    /// Whether the walk's look-ahead, unrolled injection `built`, ends before the fraction
    /// limit: then every injection up to it starts before the limit as well, and a fast answer
    /// is the walk's.
    #[inline]
    fn before_limit(&self, ix: &PlanIndex, built: u64) -> bool {
        built < self.i_safe || ix.b_u(built) < self.limit_pos(ix)
    }

    /// Where the fast path applies (S = 1, away from the limit, the head of the segment passed):
    /// the unrolled index of the next injection.
    #[inline]
    fn fast_start(&self) -> Option<usize> {
        (self.i_fast != NOT_FAST).then_some(self.i_fast as usize)
    }

    /// [`IndexedReplay::fast_start`] from the replay's counts (what `i_fast` keeps).
    #[inline]
    fn fast_now(&self, ix: &PlanIndex) -> Option<usize> {
        let h = u64::from(self.flags & HEAD_INJ != 0);
        if self.flags & BOUNDED != 0 || self.next < h {
            return None;
        }
        let i = self.i_first + (self.next - h);
        (i < ix.fast.len() as u64).then_some(i as usize)
    }

    /// [`IndexedReplay::compute`] where S = 1, the head of the segment is passed and neither the
    /// answer nor the walk's look-ahead reaches the fraction limit: one threshold on the
    /// precomputed `a − cs`, a branch-free count over the next entries, else galloping. `None`
    /// (nothing changed) elsewhere; `compute` then answers.
    #[inline]
    pub(crate) fn compute_fast(&mut self, ix: &PlanIndex, start: u64, q: u64) -> Option<u64> {
        let i0 = self.fast_start()?;
        let v = &ix.fast[..];
        let end0 = start + q;
        // The first injection left out is due at or after the grown end:
        // r0 + (a_i − p) + cs_{i0} ≥ end0 + cs_i, i.e. a_i − cs_i ≥ end0 + p − r0 − cs_{i0}
        // (a threshold ≤ 0 holds for every key: all keys are ≥ 0). One starting at or after
        // the limit would come first, but then the look-ahead is not before it: no answer.
        let base = v[i0].cs();
        let t = (end0 + self.p).saturating_sub(self.r0 + base);
        // A short window (a message's o, a window ending near the next injection) is answered
        // near the rank's next entry, whose lines are cached; a long one in its bucket.
        let i = if ix.near(v[i0].key, t) {
            first_at_least(v, i0, t, |e| e.key)
        } else {
            ix.first_key_at_least(i0, t)
        };
        if i >= v.len() || !self.before_limit(ix, i as u64 + 1) {
            return None;
        }
        self.next += (i - i0) as u64;
        // Injection i is the next, its look-ahead before the limit: due when the rank is next
        // asked ([`IndexedReplay::quiet_now`]); `i < v.len() < u32::MAX`.
        self.i_fast = i as u32;
        self.quiet = self.due_fast(&v[i]);
        Some(end0 + v[i].cs() - base)
    }

    /// Asks the memory system, without waiting, for the index lines that
    /// [`IndexedReplay::compute_fast`]`(ix, start, q)` reads first: called some ranks ahead of
    /// the search, the cache misses of several ranks overlap instead of queueing. A compute
    /// search reads its threshold's bucket, then the entries it names: this first stage asks
    /// for the bucket (and for the line after the next entry, which the barrier search before
    /// the compute reads next); [`PlanIndex::prefetch_entries`] with the returned ticket, later,
    /// when the bucket's line is there, for the entries. Changes nothing; reads the rank's next
    /// entry, which its last search has just read.
    #[inline]
    pub(crate) fn prefetch_compute(&self, ix: &PlanIndex, start: u64, q: u64) -> PrefetchTicket {
        let Some(i0) = self.fast_start() else {
            return PrefetchTicket::default();
        };
        let v = &ix.fast[..];
        let t = (start + q + self.p).saturating_sub(self.r0 + v[i0].cs());
        // The barrier search before the compute reads the next FIRST_LINEAR entries first, one
        // line or two.
        if let Some(e) = v.get(i0 + FIRST_LINEAR - 1) {
            prefetch(e);
        }
        if ix.near(v[i0].key, t) {
            // Answered near the next entry (see `compute_fast`).
            return PrefetchTicket::default();
        }
        ix.prefetch_bucket(i0, t)
    }

    /// Asks, without waiting, for the index lines that a barrier search
    /// ([`IndexedReplay::leave_barrier_fast`]) reads first: its answer is near the rank's next
    /// entry; it reads the next entry and, when that one is due before the barrier, the first
    /// block from there. Changes nothing.
    #[inline]
    pub(crate) fn prefetch_barrier(&self, ix: &PlanIndex) {
        let Some(i0) = self.fast_start() else {
            return;
        };
        let v = &ix.fast[..];
        prefetch(&v[i0]);
        // The first block's middle and its last entry, which `first_at_least` reads first when
        // the answer is not among the next FIRST_LINEAR.
        let first_block = i0 + FIRST_LINEAR - 1;
        for k in [
            first_block,
            first_block + FIRST_BLOCK / 2 - 1,
            first_block + FIRST_BLOCK - 1,
        ] {
            if let Some(e) = v.get(k) {
                prefetch(e);
            }
        }
    }

    /// Replay time by which nothing is due where the fast path applies (0 elsewhere): a compute
    /// window that ends by it, or a barrier that completes by it, is answered on time and
    /// leaves the replay as it is (the next injection is due at or after the window's end).
    /// Kept in the replay ([`IndexedReplay::quiet_now`] after every change), so reading it
    /// touches no line of the index.
    #[inline]
    pub fn quiet_until(&self) -> u64 {
        self.quiet
    }

    /// [`IndexedReplay::quiet_until`] from the index: the next injection's due where the fast
    /// path applies and the walk's look-ahead past it is before the fraction limit, else 0.
    #[inline]
    fn quiet_now(&self, ix: &PlanIndex) -> u64 {
        match self.fast_now(ix) {
            Some(i0) if self.before_limit(ix, i0 as u64 + 1) => self.due_fast(&ix.fast[i0]),
            _ => 0,
        }
    }

    /// Sets what the replay keeps of its counts (`i_fast`, `quiet`) from them, after a change
    /// other than a fast answer (which sets them from the entry it read).
    #[inline]
    fn refresh(&mut self, ix: &PlanIndex) {
        self.i_fast = self.fast_now(ix).map_or(NOT_FAST, |i| i as u32);
        self.quiet = self.quiet_now(ix);
    }

    /// Replay time at which fast-path entry `e` is due.
    #[inline]
    fn due_fast(&self, e: &FastEntry) -> u64 {
        self.r0 + e.a.saturating_sub(self.p)
    }

    /// Idling until `b` on the fast path, the search [`IndexedReplay::leave_barrier_fast`] and
    /// [`IndexedReplay::receive_fast`] share (no state changed): the fast path's first
    /// injection `i0`, the first injection `i` due at or after `b`, and the end of the one due
    /// before `b` where it still runs at `b` (it holds the rank). `None` off the fast path or
    /// with no injection due at or after `b`.
    #[inline(always)]
    fn idle_until_fast(&self, ix: &PlanIndex, b: u64) -> Option<(usize, usize, Option<u64>)> {
        let i0 = self.fast_start()?;
        let v = &ix.fast[..];
        // Due at or after b: r0 + (a − p) ≥ b, i.e. a ≥ p + (b − r0) (every a ≥ p).
        let t = self.p + b.saturating_sub(self.r0);
        let i = first_at_least(v, i0, t, |e| e.a);
        if i >= v.len() {
            return None;
        }
        // The last injection due before b (where one is, i > i0): still running at b, it holds
        // the rank. Without a branch (whether it does varies from rank to rank): where none is
        // due before b, j = i and `end` is not used.
        let j = i.max(i0 + 1) - 1;
        let end = self.r0 + (v[j].a - self.p) + (v[i].cs() - v[j].cs());
        Some((i0, i, ((i > i0) & (end > b)).then_some(end)))
    }

    /// [`IndexedReplay::leave_barrier`] where [`IndexedReplay::compute_fast`] applies: one
    /// search on the injections' starts; `None` (nothing changed) elsewhere.
    #[inline]
    pub(crate) fn leave_barrier_fast(&mut self, ix: &PlanIndex, b: u64) -> Option<u64> {
        let (i0, i, held) = self.idle_until_fast(ix, b)?;
        let (out, built) = match held {
            Some(end) => (end, i as u64),
            None => (b, i as u64 + 1),
        };
        if !self.before_limit(ix, built) {
            return None;
        }
        self.next += (i - i0) as u64;
        // Injection i is the next (see `quiet_now`).
        self.i_fast = i as u32;
        self.quiet = if held.is_none() || self.before_limit(ix, i as u64 + 1) {
            self.due_fast(&ix.fast[i])
        } else {
            0
        };
        Some(out)
    }

    /// A message's receive where the fast path applies: idle until `b` (as
    /// [`IndexedReplay::leave_barrier_fast`]), then CPU work `work` from when the rank can act,
    /// answered where no injection is due inside that work: the work's end and the quiet time
    /// after it ([`IndexedReplay::quiet_until`]), from one search on the injections' starts.
    /// Detours that begin and end while the rank idles are stepped over (counted, as the walk
    /// counts them). `None` (nothing changed) elsewhere: a detour due inside the work, the fast
    /// path not applying, or the walk's look-ahead reaching the fraction limit; the two
    /// questions asked one after the other then answer.
    #[inline]
    pub(crate) fn receive_fast(&mut self, ix: &PlanIndex, b: u64, work: u64) -> Option<(u64, u64)> {
        let (i0, i, held) = self.idle_until_fast(ix, b)?;
        let v = &ix.fast[..];
        let ready = held.unwrap_or(b);
        // Injection i is the next: the work ends on time when it is due at or after the end;
        // the walk then looked at it, so its look-ahead is injection i + 1.
        let due = self.due_fast(&v[i]);
        let exit = ready + work;
        if due < exit || !self.before_limit(ix, i as u64 + 1) {
            return None;
        }
        self.next += (i - i0) as u64;
        self.i_fast = i as u32;
        self.quiet = due;
        Some((exit, due))
    }

    /// Computes `q` (replay ns) from `start`: the end of the compute window, every injection
    /// due before the growing end taking its span (the predictor's compute phase).
    pub fn compute(&mut self, ix: &PlanIndex, seg: &SegmentStart, start: u64, q: u64) -> u64 {
        if let Some(end) = self.compute_fast(ix, start, q) {
            return end;
        }
        let end = self.compute_slow(ix, seg, start, q);
        self.refresh(ix);
        end
    }

    /// [`IndexedReplay::compute`] by the general search (the quiet time left to the caller).
    fn compute_slow(&mut self, ix: &PlanIndex, seg: &SegmentStart, start: u64, q: u64) -> u64 {
        self.answer(ix, seg, |r, bound| {
            let next = r.next;
            let (hi, limit) = match bound {
                Some(b) => (b.count, u64::MAX),
                None => (u64::MAX / 2, r.limit_pos(ix)),
            };
            let cs_next = r.cs_before(ix, seg, bound, next);
            let k = gallop(next, hi, |v| {
                let a = r.entry(ix, seg, bound, v).0;
                a >= limit
                    || r.due(ix, a).saturating_add(cs_next)
                        >= start + q + r.cs_before(ix, seg, bound, v)
            });
            let cs_k = if k < hi || bound.is_some() {
                r.cs_before(ix, seg, bound, k)
            } else {
                cs_next
            };
            (k, start + q + cs_k - cs_next, false)
        })
    }

    /// Leaves a barrier that completes at `b`: detours that end before it are hidden; one still
    /// running holds the rank until its end. Returns the exit time.
    pub fn leave_barrier(&mut self, ix: &PlanIndex, seg: &SegmentStart, b: u64) -> u64 {
        if let Some(exit) = self.leave_barrier_fast(ix, b) {
            return exit;
        }
        let exit = self.leave_slow(ix, seg, b);
        self.refresh(ix);
        exit
    }

    /// [`IndexedReplay::leave_barrier`] by the general search (the quiet time left to the
    /// caller).
    fn leave_slow(&mut self, ix: &PlanIndex, seg: &SegmentStart, b: u64) -> u64 {
        self.answer(ix, seg, |r, bound| {
            let next = r.next;
            let (hi, limit) = match bound {
                Some(bd) => (bd.count, u64::MAX),
                None => (u64::MAX / 2, r.limit_pos(ix)),
            };
            let k = gallop(next, hi, |v| {
                let a = r.entry(ix, seg, bound, v).0;
                a >= limit || r.due(ix, a) >= b
            });
            if k > next {
                let a = r.entry(ix, seg, bound, k - 1).0;
                let span = r.cs_before(ix, seg, bound, k) - r.cs_before(ix, seg, bound, k - 1);
                let end = r.due(ix, a) + span;
                if end > b {
                    return (k, end, true);
                }
            }
            (k, b, false)
        })
    }

    /// Jumps to timeline point `seg` at replay time `now` (as [`Cursor::resync`]); returns the
    /// counts of the segment left.
    pub fn resync(
        &mut self,
        ix: &PlanIndex,
        old: &SegmentStart,
        new: &SegmentStart,
        now: u64,
    ) -> PlanStats {
        let st = self.stats(ix, old);
        let consumed =
            self.consumed_before + replayed_ns(now.saturating_sub(self.r0), ix.opts.scale);
        let dead = self.flags & DEAD;
        *self = ix.begin(new, now, consumed);
        if dead != 0 {
            self.flags |= DEAD | EMPTY | BOUNDED;
        }
        self.refresh(ix);
        st
    }

    /// The segment this replay is in (a pure function of its start point, so it need not be
    /// kept per rank).
    pub fn segment(&self, ix: &PlanIndex) -> SegmentStart {
        ix.segment_start(self.p)
    }

    /// Share of the stream replayed by replay time `now_ns` (as [`Cursor::progress_at`]).
    pub fn progress_at(&self, ix: &PlanIndex, now_ns: u64) -> f64 {
        let seg = now_ns.saturating_sub(self.r0) as f64 / ix.opts.scale;
        (self.consumed_before as f64 + seg) / ix.period as f64
    }

    /// Counts of this segment's executed injections (as [`Cursor::stats`] with
    /// [`Cursor::confirm`] after each): every group up to the last one executed, or every group
    /// met once the segment ran out.
    pub fn stats(&self, ix: &PlanIndex, seg: &SegmentStart) -> PlanStats {
        let exhausted = self.flags & EXHAUSTED != 0;
        if !exhausted && self.next == 0 {
            return PlanStats::default();
        }
        let bound = (self.flags & BOUNDED != 0).then(|| ix.bound(self, seg));
        let head = match &bound {
            Some(b) => b.head,
            None => seg.head.map(|h| h.g),
        };
        let mut st = head.map_or_else(PlanStats::default, |h| ix.raw_stats(&h));
        let h = self.h(bound.as_ref());
        let through_tail = |st: &mut PlanStats, b: &Bound| {
            *st += ix.group_stats(seg.g_mid, b.full_end);
            if let Some((_, g, _)) = &b.tail {
                *st += ix.raw_stats(g);
            }
        };
        if exhausted {
            if let Some(b) = &bound {
                through_tail(&mut st, b);
            }
            return st;
        }
        let v = self.next - 1;
        if v >= h {
            let i = self.i_first + (v - h);
            match &bound {
                Some(b) if i >= b.mid_end => through_tail(&mut st, b),
                _ => st += ix.group_stats(seg.g_mid, ix.inj_group_u(i) + 1),
            }
        }
        st
    }
}

#[cfg(test)]
mod tests;
