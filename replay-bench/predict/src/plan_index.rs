//! A plan compiled for the predictor: the same transform as the cursor's, compiled once per
//! stream into cumulative arrays, so that "when does a rank that starts computing q at time t
//! finish?" is a search, not a walk ([`PlanIndex`], built by [`CompileIndex::index`]; its per-rank
//! replay is `indexed_replay`'s).
//!
//! At S = 1 the index keeps flat `(a, a − cs)` entries of two laps and a bucket table over
//! `a − cs`, so a question is one threshold found near the rank's next entry
//! (`first_at_least`, a branch-free `count_below`) or through its bucket
//! (`first_key_at_least`); other cases take the general search (`bisect`, `gallop`). Its arrays
//! are advised huge pages (`jitter_trace::memory::large_vec`) and filled in chunks on the
//! caller's rayon pool (`large_vec_filled`). The predictor asks for the lines a search will read
//! a few ranks ahead (`prefetch_compute` returns a [`PrefetchTicket`] that
//! [`PlanIndex::prefetch_entries`] reads; `prefetch_barrier`), a hint that never changes an
//! answer.

use jitter_trace::memory::{large_vec, HUGE_PAGE};

use jitter_emulator::plan::{merge_group, DetourSource, Plan, PlanOptions, PlanStats, RawGroup};

/// A [`large_vec`] (`jitter_trace::memory`) of `n` elements written in chunks side by side on the worker threads
/// (`fill(first, chunk)` writes every element of `chunk`, elements `first..`), each thread
/// taking the page faults of its own chunks.
pub(crate) fn large_vec_filled<T: Send>(
    n: usize,
    fill: impl Fn(usize, &mut [std::mem::MaybeUninit<T>]) + Sync,
) -> Vec<T> {
    use rayon::prelude::*;
    let mut v = large_vec(n);
    // A few chunks per thread, each at least a huge page's worth of elements.
    let chunk =
        (n / (4 * rayon::current_num_threads())).max(HUGE_PAGE / std::mem::size_of::<T>().max(1));
    v.spare_capacity_mut()[..n]
        .par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(c, part)| fill(c * chunk, part));
    // SAFETY: the vector has capacity for `n` elements (`large_vec(n)`), and `fill` wrote
    // every element of each chunk of the first `n`, which cover them all.
    unsafe { v.set_len(n) };
    v
}

/// One injection of the compiled lap: start and end of its (merged) detours on the compiled
/// timeline, and the Σ span of the injections before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) cs: u64,
}

/// A plan compiled for the predictor: one lap of the stream as merged groups and injections
/// with cumulative counts, built with the cursor's own merge rule ([`merge_group`]). Timeline
/// points are *compiled*: the records are rotated to start at a group boundary `u0`, so one lap
/// is `[u0, u0 + D)`; a replay segment spans at most two laps.
///
/// It exists (see [`Plan::index`]) when its answers are exactly the cursor's: a constant
/// overhead (no O-after-a-gap curve, which depends on the previous injection), some sleep that
/// does not merge, and, at S ≠ 1, inter-group gaps of at least 3 replay ns so that rounded due
/// times never overlap the previous injection.
#[derive(Debug)]
pub struct PlanIndex {
    pub(crate) opts: PlanOptions,
    pub(crate) period: u64,
    pub(crate) limit_ns: u64,
    pub(crate) u0: u64,
    pub(crate) rs: Vec<u64>,
    pub(crate) re: Vec<u64>,
    pub(crate) run_cum: Vec<u64>,
    pub(crate) noise_cum: Vec<u64>,
    pub(crate) groups: Groups,
    /// At S = 1 (empty otherwise): every injection of two laps, its start beside its key, so
    /// that one cache line serves the barrier search and the compute search that follows it.
    pub(crate) fast: Vec<FastEntry>,
    /// At S = 1: `key_first[j]` is the first entry of `fast` whose key is at least
    /// `j << key_shift` (the last is `fast.len()`), so that the compute search goes straight to
    /// the bucket of its threshold, ≈ 1–2 entries, instead of searching towards it.
    pub(crate) key_first: Vec<u32>,
    /// log₂ of a bucket's width in key ns: the smallest power of two above the mean key
    /// advance per entry.
    pub(crate) key_shift: u32,
}

/// One injection of the fast path (S = 1): its start, and `a − cs`, non-decreasing, which the
/// compute search compares with one per-query threshold (no scaling, no lap arithmetic per
/// probe); `cs = a − key`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastEntry {
    pub(crate) a: u64,
    pub(crate) key: u64,
}

impl FastEntry {
    /// Σ span of the injections before this one (within its two laps).
    #[inline]
    pub(crate) fn cs(&self) -> u64 {
        self.a - self.key
    }
}

/// What the second stage of a compute search's prefetch asks for
/// ([`PlanIndex::prefetch_entries`]), as the first ([`IndexedReplay::prefetch_compute`]) found
/// it: the bucket of the search's threshold and the entry it starts from; the default asks
/// for nothing (a search near the rank's next entry, or no fast path).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrefetchTicket {
    pub(crate) bucket: usize,
    pub(crate) lo: usize,
}

impl Default for PrefetchTicket {
    fn default() -> Self {
        PrefetchTicket {
            bucket: usize::MAX,
            lo: 0,
        }
    }
}

/// The rotated records from record `i` on, around the timeline (record `i` of the next lap is
/// `lap_ns` = D later).
struct RotSource<'a> {
    rs: &'a [u64],
    re: &'a [u64],
    period: u64,
    i: usize,
    lap_ns: u64,
    peeked: Option<(u64, u64)>,
}

impl DetourSource for RotSource<'_> {
    #[inline]
    fn next_raw(&mut self) -> Option<(u64, u64)> {
        if let Some(p) = self.peeked.take() {
            return Some(p);
        }
        if self.i == self.rs.len() {
            self.i = 0;
            self.lap_ns += self.period;
        }
        let i = self.i;
        self.i += 1;
        Some((self.rs[i] + self.lap_ns, self.re[i] + self.lap_ns))
    }
    fn put_back(&mut self, d: (u64, u64)) {
        self.peeked = Some(d);
    }
}

/// A plan compiled for the predictor (the emulator's [`Plan`] knows nothing of its index).
pub(crate) trait CompileIndex {
    /// Compiles the plan for the predictor; `None` where the index could not answer exactly as
    /// the cursor does (see [`PlanIndex`]): the caller walks the cursor instead.
    fn index(&self) -> Option<PlanIndex>;
}

impl CompileIndex for Plan {
    fn index(&self) -> Option<PlanIndex> {
        let opts = *self.options();
        if !opts.overhead_by_gap.points().is_empty() {
            return None;
        }
        let n = self.records().len();
        if n == 0 || n >= u32::MAX as usize {
            return None;
        }
        let d = self.period_ns();
        let rel = |k: usize| {
            let r = &self.records()[k];
            (r.start_ns - self.begin_ns(), r.end_ns() - self.begin_ns())
        };
        let gap_before = |j: usize| {
            if j > 0 {
                rel(j).0 - rel(j - 1).1
            } else {
                d + rel(0).0 - rel(n - 1).1
            }
        };
        let j0 = (0..n).find(|&j| opts.scaled(gap_before(j)) >= opts.min_sleep_ns)?;
        let (mut rs, mut re) = (large_vec(n), large_vec(n));
        // Records j0.. of this lap, then ..j0 of the next.
        for (o, add) in (j0..n).map(|o| (o, 0)).chain((0..j0).map(|o| (o, d))) {
            let (s, e) = rel(o);
            rs.push(s + add);
            re.push(e + add);
        }
        // The cumulative runs on one worker while this one forms the groups (they read only
        // `rs` and `re`): loading a dense trace is a large part of a short prediction.
        let ((run_cum, noise_cum), groups) = rayon::join(
            || {
                // At S = 1 the scaled sums are the sums (`noise_cum` stays empty).
                let scaled = opts.scale != 1.0;
                let mut run_cum = large_vec(n + 1);
                let mut noise_cum = if scaled { large_vec(n + 1) } else { Vec::new() };
                let (mut rc, mut nc) = (0u64, 0u64);
                for k in 0..n {
                    run_cum.push(rc);
                    rc += re[k] - rs[k];
                    if scaled {
                        noise_cum.push(nc);
                        nc += opts.scaled(re[k] - rs[k]);
                    }
                }
                run_cum.push(rc);
                if scaled {
                    noise_cum.push(nc);
                }
                (run_cum, noise_cum)
            },
            || Groups::of(opts, &rs, &re, d),
        );
        let groups = groups?;
        let mut ix = PlanIndex {
            opts,
            period: d,
            limit_ns: (d as f64 * opts.fraction).round() as u64,
            u0: rs[0],
            rs,
            re,
            run_cum,
            noise_cum,
            groups,
            fast: Vec::new(),
            key_first: Vec::new(),
            key_shift: 0,
        };
        if opts.scale == 1.0 {
            // a ≥ cs: at S = 1 a span is its group's run, and the runs before a lie in [u0, a).
            // Two laps (a segment spans at most two), the second shifted by D and Σ span.
            let (m, tot, inj) = (ix.groups.inj.len(), ix.groups.tot_span, &ix.groups.inj[..]);
            ix.fast = large_vec_filled(2 * m, |first, part| {
                for (k, f) in (first..).zip(part) {
                    let (e, lap) = if k < m {
                        (&inj[k], 0)
                    } else {
                        (&inj[k - m], 1)
                    };
                    let a = e.a + lap * d;
                    f.write(FastEntry {
                        a,
                        key: a - (e.cs + lap * tot),
                    });
                }
            });
            ix.bucket_keys()?;
        }
        Some(ix)
    }
}

/// The merged groups of a plan's records, rotated to begin after a sleep (`rs`, `re`), with
/// their injections: the part of a [`PlanIndex`] formed in one pass over the records.
#[derive(Debug)]
pub(crate) struct Groups {
    pub(crate) rgroup: Vec<u32>,
    pub(crate) gfirst: Vec<u32>,
    pub(crate) ginj: Vec<u64>,
    pub(crate) ginj_ns: Vec<u64>,
    pub(crate) gdrop: Vec<u64>,
    pub(crate) gdrop_ns: Vec<u64>,
    pub(crate) inj: Vec<IndexEntry>,
    pub(crate) inj_group: Vec<u32>,
    pub(crate) tot_span: u64,
}

impl Groups {
    /// Forms the groups as the cursor merges them; `None` where the index cannot answer as the
    /// cursor does (see [`PlanIndex`]).
    pub(crate) fn of(opts: PlanOptions, rs: &[u64], re: &[u64], d: u64) -> Option<Groups> {
        let n = rs.len();
        let per_group = || {
            let mut v = large_vec(n + 1);
            v.push(0u64);
            v
        };
        let mut gs = Groups {
            rgroup: {
                let mut v = large_vec(n);
                v.resize(n, 0);
                v
            },
            // Sized for the most groups and injections (one per record): no growth copies.
            gfirst: large_vec(n + 1),
            ginj: per_group(),
            ginj_ns: per_group(),
            gdrop: per_group(),
            gdrop_ns: per_group(),
            inj: large_vec(n),
            inj_group: large_vec(n),
            tot_span: 0,
        };
        let mut k = 0usize;
        let mut prev_end: Option<u64> = None;
        while k < n {
            let mut src = RotSource {
                rs,
                re,
                period: d,
                i: k + 1,
                lap_ns: 0,
                peeked: None,
            };
            let g = merge_group(&opts, (rs[k], re[k]), u64::MAX, &mut src)?;
            let gi = gs.gfirst.len();
            let det = g.detours as usize;
            if k + det > n {
                return None;
            }
            gs.gfirst.push(k as u32);
            gs.rgroup[k..k + det].fill(gi as u32);
            if opts.scale != 1.0 {
                if let Some(e) = prev_end {
                    if ((rs[k] - e) as f64) * opts.scale < 3.0 {
                        return None;
                    }
                }
            }
            prev_end = Some(g.end);
            let span = opts.scaled(g.run);
            let (mut i, mut ins, mut dr, mut drns) =
                (gs.ginj[gi], gs.ginj_ns[gi], gs.gdrop[gi], gs.gdrop_ns[gi]);
            if span <= opts.overhead_ns {
                dr += g.detours as u64;
                drns += span;
            } else {
                gs.inj.push(IndexEntry {
                    a: rs[k],
                    b: g.end,
                    cs: gs.tot_span,
                });
                gs.inj_group.push(gi as u32);
                gs.tot_span += span;
                i += 1;
                ins += span;
            }
            gs.ginj.push(i);
            gs.ginj_ns.push(ins);
            gs.gdrop.push(dr);
            gs.gdrop_ns.push(drns);
            k += det;
        }
        if opts.scale != 1.0 {
            let e = prev_end?;
            if ((rs[0] + d - e) as f64) * opts.scale < 3.0 {
                return None;
            }
        }
        gs.gfirst.push(n as u32);
        if gs.inj.is_empty() {
            return None;
        }
        Some(gs)
    }
}

impl PlanIndex {
    /// The options compiled in.
    pub fn options(&self) -> &PlanOptions {
        &self.opts
    }

    /// Length D of the timeline, trace ns.
    pub fn period_ns(&self) -> u64 {
        self.period
    }

    /// Bytes the index holds (the lengths of its arrays).
    pub fn bytes(&self) -> usize {
        fn b<T>(v: &[T]) -> usize {
            std::mem::size_of_val(v)
        }
        let g = &self.groups;
        b(&self.rs)
            + b(&self.re)
            + b(&self.run_cum)
            + b(&self.noise_cum)
            + b(&g.rgroup)
            + b(&g.gfirst)
            + b(&g.ginj)
            + b(&g.ginj_ns)
            + b(&g.gdrop)
            + b(&g.gdrop_ns)
            + b(&g.inj)
            + b(&g.inj_group)
            + b(&self.fast)
            + b(&self.key_first)
    }

    /// Builds `key_first` over `fast` (its keys non-decreasing); `None` where `fast` has more
    /// entries than a `u32` counts.
    pub(crate) fn bucket_keys(&mut self) -> Option<()> {
        let v = &self.fast;
        let (Some(f), Some(l)) = (v.first(), v.last()) else {
            return Some(());
        };
        if v.len() >= u32::MAX as usize {
            return None;
        }
        // A bucket wider than the mean step: at most as many buckets as entries (+ 2).
        let step = (l.key - f.key) / v.len() as u64;
        self.key_shift = 64 - step.leading_zeros();
        let buckets = (l.key >> self.key_shift) as usize + 2;
        self.key_first = bucket_firsts(v, self.key_shift, buckets);
        Some(())
    }

    /// First entry `i ≥ lo` of `fast` whose key is at least `t`, else `fast.len()`: a search
    /// within `t`'s bucket only (its first entry is the first with a key at least the bucket's
    /// start, and the next bucket's first has a key above `t`).
    #[inline]
    pub(crate) fn first_key_at_least(&self, lo: usize, t: u64) -> usize {
        let v = &self.fast;
        let j = (t >> self.key_shift) as usize;
        let Some(b) = self.key_first.get(j..j + 2) else {
            return v.len();
        };
        let from = (b[0] as usize).max(lo);
        let to = (b[1] as usize).max(from);
        // A bucket holds one or two entries on average: count those below `t` among the
        // first few (every entry from the next bucket's first on has a key above `t`, so the
        // count stops at the answer), where a search's branches on the bucket's varying size
        // are mispredicted.
        if let Some(first) = v.get(from..from + BUCKET_LINEAR) {
            let below = count_below(first, t, |e| e.key);
            if below < BUCKET_LINEAR {
                return from + below;
            }
        }
        from + v[from..to].partition_point(|e| e.key < t)
    }

    /// Whether a compute search from a next entry of key `key` for threshold `t` is short: an
    /// answer expected within a block of the next entry, read there, not in its bucket.
    #[inline]
    pub(crate) fn near(&self, key: u64, t: u64) -> bool {
        t.saturating_sub(key) < (FIRST_BLOCK as u64) << self.key_shift
    }

    /// Starts loading the bucket of compute threshold `t` (the first stage of a search's
    /// prefetch): the ticket of the second, which reads it (the search starts at `lo`).
    #[inline]
    pub(crate) fn prefetch_bucket(&self, lo: usize, t: u64) -> PrefetchTicket {
        let bucket = (t >> self.key_shift) as usize;
        if let Some(b) = self.key_first.get(bucket) {
            prefetch(b);
        }
        PrefetchTicket { bucket, lo }
    }

    /// Starts loading the entries that a compute search reads first, as `ticket` names them
    /// (the second stage of its prefetch, once the bucket's line is there; nothing for an empty
    /// ticket).
    #[inline]
    pub(crate) fn prefetch_entries(&self, ticket: PrefetchTicket) {
        let j = ticket.bucket;
        if let Some(b) = self.key_first.get(j..j.wrapping_add(2)) {
            // The bucket's first entry and the next bucket's, where an answer past every entry
            // of the bucket lies (the search reads between them).
            let from = (b[0] as usize).max(ticket.lo);
            for k in [from, (b[1] as usize).max(from)] {
                if let Some(e) = self.fast.get(k) {
                    prefetch(e);
                }
            }
        }
    }

    /// End of the group of unrolled injection `i` (`u64::MAX` beyond two laps).
    #[inline]
    pub(crate) fn b_u(&self, i: u64) -> u64 {
        let m = self.groups.inj.len() as u64;
        if i < m {
            self.groups.inj[i as usize].b
        } else if i < 2 * m {
            self.groups.inj[(i - m) as usize].b + self.period
        } else {
            u64::MAX
        }
    }

    #[inline]
    pub(crate) fn n(&self) -> u64 {
        self.rs.len() as u64
    }

    #[inline]
    pub(crate) fn group_count(&self) -> u64 {
        (self.groups.gfirst.len() - 1) as u64
    }

    #[inline]
    pub(crate) fn split(k: u64, n: u64) -> (usize, u64) {
        ((k % n) as usize, k / n)
    }

    pub(crate) fn rec(&self, k: u64) -> (u64, u64) {
        let (i, lap) = Self::split(k, self.n());
        (
            self.rs[i] + lap * self.period,
            self.re[i] + lap * self.period,
        )
    }

    pub(crate) fn run_cum_u(&self, k: u64) -> u64 {
        let (i, lap) = Self::split(k, self.n());
        self.run_cum[i] + lap * self.run_cum[self.rs.len()]
    }

    pub(crate) fn noise_cum_u(&self, k: u64) -> u64 {
        let (i, lap) = Self::split(k, self.n());
        let v = self.noise_cum();
        v[i] + lap * v[self.rs.len()]
    }

    /// Σ S·run of the records before each record (one more: the lap's): the plain sums at
    /// S = 1.
    pub(crate) fn noise_cum(&self) -> &[u64] {
        if self.noise_cum.is_empty() {
            &self.run_cum
        } else {
            &self.noise_cum
        }
    }

    pub(crate) fn group_of(&self, k: u64) -> u64 {
        let (i, lap) = Self::split(k, self.n());
        u64::from(self.groups.rgroup[i]) + lap * self.group_count()
    }

    pub(crate) fn gfirst_u(&self, g: u64) -> u64 {
        let (i, lap) = Self::split(g, self.group_count());
        u64::from(self.groups.gfirst[i]) + lap * self.n()
    }

    pub(crate) fn gcum(&self, v: &[u64], g: u64) -> u64 {
        let (i, lap) = Self::split(g, self.group_count());
        v[i] + lap * v[self.groups.gfirst.len() - 1]
    }

    #[inline]
    pub(crate) fn inj_u(&self, i: u64) -> IndexEntry {
        let m = self.groups.inj.len() as u64;
        if i < m {
            self.groups.inj[i as usize]
        } else if i < 2 * m {
            let e = self.groups.inj[(i - m) as usize];
            IndexEntry {
                a: e.a + self.period,
                b: e.b + self.period,
                cs: e.cs + self.groups.tot_span,
            }
        } else {
            // Beyond two laps (no segment reaches it): never consumed.
            IndexEntry {
                a: u64::MAX,
                b: u64::MAX,
                cs: u64::MAX / 4,
            }
        }
    }

    #[inline]
    pub(crate) fn cs_u(&self, i: u64) -> u64 {
        let m = self.groups.inj.len() as u64;
        if i < m {
            self.groups.inj[i as usize].cs
        } else if i < 2 * m {
            self.groups.inj[(i - m) as usize].cs + self.groups.tot_span
        } else {
            let (j, lap) = Self::split(i, m);
            self.groups.inj[j].cs + lap * self.groups.tot_span
        }
    }

    pub(crate) fn inj_group_u(&self, i: u64) -> u64 {
        let m = self.groups.inj.len() as u64;
        let (j, lap) = Self::split(i, m);
        u64::from(self.groups.inj_group[j]) + lap * self.group_count()
    }

    /// The group of records `k..=last` (unrolled) started at `a` (≥ their first start), its
    /// ends clipped at `limit` and only records starting before `limit` merged: what
    /// [`merge_group`] makes of them.
    pub(crate) fn clipped(&self, k: u64, a: u64, last: u64, limit: u64) -> RawGroup {
        // Records k..=last starting before the limit (k itself always, as a < limit).
        let (mut lo, mut hi) = (k + 1, last + 1);
        while lo < hi {
            let m = lo + (hi - lo) / 2;
            if self.rec(m).0 < limit {
                lo = m + 1;
            } else {
                hi = m;
            }
        }
        let end_k = lo - 1;
        let (sk, ek) = self.rec(k);
        let (sl, el) = self.rec(end_k);
        let s = |x: u64| self.opts.scaled(x);
        let el_c = el.min(limit);
        let run = self.run_cum_u(end_k + 1) - self.run_cum_u(k) - (a - sk) - (el - el_c);
        let noise = if end_k == k {
            s(ek.min(limit) - a)
        } else {
            s(ek - a) + (self.noise_cum_u(end_k) - self.noise_cum_u(k + 1)) + s(el_c - sl)
        };
        RawGroup {
            run,
            detours: (end_k - k + 1) as u32,
            noise_ns: noise,
            end: el_c,
        }
    }

    /// Counts of whole groups `[g0, g1)` (unrolled).
    pub(crate) fn group_stats(&self, g0: u64, g1: u64) -> PlanStats {
        if g1 <= g0 {
            return PlanStats::default();
        }
        let (f0, f1) = (self.gfirst_u(g0), self.gfirst_u(g1));
        let detours = f1 - f0;
        let d = |v: &[u64]| self.gcum(v, g1) - self.gcum(v, g0);
        let (injections, injected_ns, dropped) = (
            d(&self.groups.ginj),
            d(&self.groups.ginj_ns),
            d(&self.groups.gdrop),
        );
        PlanStats {
            detours,
            injections,
            injected_detours: detours - dropped,
            injected_ns,
            busy_ns: injected_ns - injections * self.opts.overhead_ns,
            dropped,
            dropped_ns: d(&self.groups.gdrop_ns),
            merged: detours - (g1 - g0),
            noise_ns: self.noise_cum_u(f1) - self.noise_cum_u(f0),
        }
    }

    pub(crate) fn raw_stats(&self, g: &RawGroup) -> PlanStats {
        let span = self.opts.scaled(g.run);
        let det = u64::from(g.detours);
        let mut st = PlanStats {
            detours: det,
            merged: det - 1,
            noise_ns: g.noise_ns,
            ..PlanStats::default()
        };
        if span <= self.opts.overhead_ns {
            st.dropped = det;
            st.dropped_ns = span;
        } else {
            st.injections = 1;
            st.injected_detours = det;
            st.injected_ns = span;
            st.busy_ns = span - self.opts.overhead_ns;
        }
        st
    }
}

/// Entries [`first_at_least`] counts before its blocks (read one by one, 4 and 8 beat 1 by
/// 5–9 % on dense traces; counted without a branch, 4 beat 8; `scripts/bench-predict.sh`,
/// docs/BENCHMARKS.md).
pub(crate) const FIRST_LINEAR: usize = 4;
/// Entries of a bucket that [`PlanIndex::first_key_at_least`] counts before it searches.
pub(crate) const BUCKET_LINEAR: usize = 4;
/// Entries per block of [`first_at_least`]'s search.
pub(crate) const FIRST_BLOCK: usize = 8;
/// Blocks [`first_at_least`] looks at before it gallops.
pub(crate) const FIRST_BLOCKS: usize = 4;

/// For each of `buckets` buckets of key width 2^`shift`, the first entry of `v` (keys
/// non-decreasing) whose key is at least the bucket's start (`v.len()` past the last key).
pub(crate) fn bucket_firsts(v: &[FastEntry], shift: u32, buckets: usize) -> Vec<u32> {
    large_vec_filled(buckets, |j0, part| {
        // The chunk's first bucket begins at the first entry with a key at least its start.
        let mut i = v.partition_point(|e| e.key < (j0 as u64) << shift);
        for (j, f) in (j0 as u64..).zip(part) {
            let lo = j << shift;
            while i < v.len() && v[i].key < lo {
                i += 1;
            }
            f.write(i as u32);
        }
    })
}

/// Starts loading the cache line of `e` without waiting for it (a hint: it never faults and
/// changes no value); nothing where no prefetch instruction is available.
#[inline(always)]
pub(crate) fn prefetch<T>(e: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults (any address is allowed, and `e` is a
    // valid reference); it reads and writes nothing the program can observe. (Safe to call
    // from Rust 1.87; the workspace's MSRV is 1.85.)
    #[allow(unused_unsafe)]
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((e as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = e;
}

/// First index `i ≥ lo` of `v` with `key(v[i]) ≥ t` (`key` non-decreasing), else `v.len()`,
/// for answers expected near `lo` (a barrier's): the first [`FIRST_LINEAR`] entries counted
/// without a branch, then blocks of 8 entries, each with one branch and a branch-free search
/// inside, then galloping.
#[inline(always)]
pub(crate) fn first_at_least(
    v: &[FastEntry],
    lo: usize,
    t: u64,
    key: impl Fn(&FastEntry) -> u64 + Copy,
) -> usize {
    // The next few first, counted: most answers (a message's o, an idle wait) are among them,
    // on the line already read; a block's last entry is often a line further. Inlined into
    // every search; the blocks beyond are a call.
    let Some(first) = v.get(lo..lo + FIRST_LINEAR) else {
        return first_at_least_near_end(v, lo, t, key);
    };
    let below = count_below(first, t, key);
    if below < FIRST_LINEAR {
        return lo + below;
    }
    first_at_least_far(v, lo + FIRST_LINEAR - 1, t, key)
}

/// [`first_at_least`] past its first [`FIRST_LINEAR`] entries, from entry `at` (below `t`):
/// blocks of [`FIRST_BLOCK`] entries, then galloping.
#[inline(never)]
fn first_at_least_far(
    v: &[FastEntry],
    mut at: usize,
    t: u64,
    key: impl Fn(&FastEntry) -> u64 + Copy,
) -> usize {
    const W: usize = FIRST_BLOCK;
    // Entry `at` is below t (the block search needs only its last entry at or above).
    for _ in 0..FIRST_BLOCKS {
        let Some(block) = v.get(at..at + W) else {
            break;
        };
        if key(&block[W - 1]) >= t {
            let mut b = usize::from(key(&block[3]) < t) * 4;
            b += usize::from(key(&block[b + 1]) < t) * 2;
            b += usize::from(key(&block[b]) < t);
            return at + b;
        }
        at += W;
    }
    gallop(at as u64, v.len() as u64, |i| key(&v[i as usize]) >= t) as usize
}

/// [`first_at_least`] where fewer than [`FIRST_LINEAR`] entries are left from `lo`: where the
/// first at or above `t` sits among them, else the end (rare: kept out of the searches' code).
#[cold]
#[inline(never)]
fn first_at_least_near_end(
    v: &[FastEntry],
    lo: usize,
    t: u64,
    key: impl Fn(&FastEntry) -> u64,
) -> usize {
    let from = lo.min(v.len());
    from + count_below(&v[from..], t, key)
}

/// How many entries of `w` (`key` non-decreasing) have a key below `t`, counted without a
/// branch: those below are a prefix, so the count is where the first at or above `t` sits
/// (where the answer lies varies from rank to rank, and a branch on it is mispredicted).
#[inline]
fn count_below(w: &[FastEntry], t: u64, key: impl Fn(&FastEntry) -> u64) -> usize {
    w.iter().fold(0, |c, e| c + usize::from(key(e) < t))
}

/// Smallest `v` in `[l, r]` with `pred(v)` (monotone), given `pred(r)` or `r` the end.
#[inline]
pub(crate) fn bisect(mut l: u64, mut r: u64, mut pred: impl FnMut(u64) -> bool) -> u64 {
    while l < r {
        let m = l + (r - l) / 2;
        if pred(m) {
            r = m;
        } else {
            l = m + 1;
        }
    }
    l
}

/// Smallest `v` in `[lo, hi)` with `pred(v)` (monotone), else `hi`: galloping from `lo`, so
/// the cost grows with the log of the distance, not of the array.
#[inline]
pub(crate) fn gallop(lo: u64, hi: u64, mut pred: impl FnMut(u64) -> bool) -> u64 {
    let mut l = lo;
    let mut step = 1u64;
    let r = loop {
        let c = l.saturating_add(step - 1);
        if c >= hi {
            break hi;
        }
        if pred(c) {
            break c;
        }
        l = c + 1;
        step = step.saturating_mul(2);
    };
    bisect(l, r, pred)
}
