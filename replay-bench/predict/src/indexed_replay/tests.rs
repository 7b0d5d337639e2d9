//! The index against the cursor: every question answered by search as the walk answers it.

use super::*;
use crate::plan_index::*;
use jitter_emulator::plan::*;

use jitter_trace::memory::HUGE_PAGE;
use jitter_trace::{Detour, Stream};
use proptest::prelude::*;

// The emulator's plan tests build their streams so (`jitter-emulator`'s `plan/tests.rs`); its
// test helpers are not part of its library.
fn stream(end: u64, detours: &[(u64, u64)]) -> Stream {
    let d: Vec<Detour> = detours
        .iter()
        .map(|&(s, r)| Detour {
            start_ns: s,
            run_ns: r,
        })
        .collect();
    Stream::from_detours(0, 0, end, &d).unwrap()
}

fn opts() -> PlanOptions {
    PlanOptions::ideal()
}

prop_compose! {
    fn arb_stream()(
        gaps in prop::collection::vec((1u64..5_000, 1u64..500), 1..60),
        tail in 0u64..5_000,
        begin in prop::sample::select(vec![0u64, 1, 7_777, 1 << 40]),
    ) -> Stream {
        let mut t = begin;
        let mut d = Vec::new();
        for (g, r) in gaps { t += g; d.push(Detour { start_ns: t, run_ns: r }); t += r; }
        Stream::from_detours(0, begin, t + tail, &d).unwrap()
    }
}

#[test]
fn a_vector_filled_side_by_side_holds_every_element_in_order() {
    // Five chunks and a part (a chunk is at least a huge page of u64).
    let n = 5 * HUGE_PAGE / 8 + 123;
    let v: Vec<u64> = large_vec_filled(n, |first, part| {
        for (k, x) in (first..).zip(part) {
            x.write(3 * k as u64);
        }
    });
    assert_eq!(v.len(), n);
    assert!(v.iter().enumerate().all(|(k, &x)| x == 3 * k as u64));
}

#[test]
fn a_large_index_is_built_as_one_pass_over_it_would_build_it() {
    // 400 000 detours: the sums are formed beside the groups, and the fast entries span
    // several chunks of `large_vec_filled` (the buckets' chunks have their own test).
    let n = 400_000u64;
    let detours: Vec<(u64, u64)> = (0..n)
        .map(|i| (i * 10_000 + (i * 7919) % 5000, 200 + (i * 31) % 1800))
        .collect();
    let ix = Plan::new(&stream(n * 10_000, &detours), opts())
        .unwrap()
        .index()
        .unwrap();
    let (mut rc, mut nc) = (0, 0);
    for k in 0..n as usize {
        assert_eq!(
            (ix.run_cum[k], ix.noise_cum()[k]),
            (rc, nc),
            "sums before {k}"
        );
        rc += ix.re[k] - ix.rs[k];
        nc += ix.opts.scaled(ix.re[k] - ix.rs[k]);
    }
    assert_eq!(
        (ix.run_cum[n as usize], ix.noise_cum()[n as usize]),
        (rc, nc)
    );
    let m = ix.groups.inj.len();
    assert_eq!(ix.fast.len(), 2 * m);
    assert!(ix.fast.len() * std::mem::size_of::<FastEntry>() > 2 * HUGE_PAGE);
    for (k, f) in ix.fast.iter().enumerate() {
        let (e, lap) = if k < m {
            (&ix.groups.inj[k], 0)
        } else {
            (&ix.groups.inj[k - m], 1)
        };
        assert_eq!(f.a, e.a + lap * ix.period, "entry {k}");
        assert_eq!(f.cs(), e.cs + lap * ix.groups.tot_span, "entry {k}");
    }
    assert!(ix.key_first.len() > 2);
    for (j, &first) in ix.key_first.iter().enumerate() {
        let lo = (j as u64) << ix.key_shift;
        let expected = ix.fast.partition_point(|e| e.key < lo);
        assert_eq!(first as usize, expected, "bucket {j}");
    }
}

#[test]
fn buckets_filled_in_chunks_each_name_their_first_key() {
    // 2^21 buckets of width 8 over keys that advance by 0..=15 (empty buckets, buckets of
    // several entries, equal keys): four chunks of a huge page's worth of u32.
    let mut key = 0u64;
    let v: Vec<FastEntry> = (0..1u64 << 21)
        .map(|i| {
            key += (i * 7919) % 16;
            FastEntry { a: key, key }
        })
        .collect();
    let buckets = (key >> 3) as usize + 2;
    assert!(buckets > 3 * HUGE_PAGE / 4);
    let first = bucket_firsts(&v, 3, buckets);
    assert_eq!(first.len(), buckets);
    for (j, &f) in first.iter().enumerate() {
        let expected = v.partition_point(|e| e.key < (j as u64) << 3);
        assert_eq!(f as usize, expected, "bucket {j}");
    }
}

#[test]
fn searches_in_crowded_buckets_and_near_the_end_find_the_first_key_at_least() {
    // Bursts of 12 detours 2 ns apart every 10 µs: each burst's keys share a bucket, more
    // than the entries a bucket search counts before it bisects; the searches near the
    // end of the entries have fewer entries left than they count.
    let d: Vec<(u64, u64)> = (0..50u64)
        .flat_map(|b| (0..12u64).map(move |k| (1 + b * 10_000 + 2 * k, 1)))
        .collect();
    let plan = Plan::new(&stream(500_000, &d), opts()).unwrap();
    let ix = plan.index().expect("an index at S = 1");
    let v = &ix.fast;
    let crowded = ix.key_first.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(crowded as usize > BUCKET_LINEAR, "{crowded}");
    let mut ts: Vec<u64> = v.iter().flat_map(|e| [e.key, e.a]).collect();
    ts.extend(
        ts.clone()
            .iter()
            .flat_map(|&t| [t.saturating_sub(1), t + 1]),
    );
    for t in ts {
        let by_key: fn(&FastEntry) -> u64 = |e| e.key;
        let by_start: fn(&FastEntry) -> u64 = |e| e.a;
        for (key, what) in [(by_key, "key"), (by_start, "a")] {
            let first = v.partition_point(|e| key(e) < t);
            for lo in [
                0,
                first.saturating_sub(5),
                first.saturating_sub(1),
                first,
                v.len() - 2,
            ] {
                let expected = first.max(lo);
                assert_eq!(
                    first_at_least(v, lo, t, key),
                    expected,
                    "{what} ≥ {t} from {lo}"
                );
                if what == "key" {
                    assert_eq!(
                        ix.first_key_at_least(lo, t),
                        expected,
                        "key ≥ {t} from {lo}"
                    );
                }
            }
        }
    }
}

impl IndexedReplay {
    /// Whether what the replay keeps of its counts (the fast path's next entry, the quiet
    /// time) is what they give.
    fn kept(&self, ix: &PlanIndex) -> bool {
        self.fast_start() == self.fast_now(ix) && self.quiet_until() == self.quiet_now(ix)
    }
}

/// The predictor's walk (des.rs without timer errors): the reference for the index.
struct Walk {
    c: Cursor,
    pending: Option<(u64, u64)>,
    busy_until: u64,
}

impl Walk {
    fn peek(&mut self) -> Option<(u64, u64)> {
        if self.pending.is_none() {
            let i = self.c.next()?;
            self.pending = Some((i.due_ns.max(self.busy_until), i.span_ns));
        }
        self.pending
    }
    fn consume(&mut self, due: u64, span: u64) {
        self.pending = None;
        self.busy_until = due + span;
        self.c.confirm();
    }
    fn compute(&mut self, start: u64, q: u64) -> u64 {
        let mut end = start + q;
        while let Some((due, span)) = self.peek() {
            if due >= end {
                break;
            }
            self.consume(due, span);
            end += span;
        }
        end
    }
    fn leave(&mut self, b: u64) -> u64 {
        while let Some((due, span)) = self.peek() {
            if due >= b {
                break;
            }
            self.consume(due, span);
            if due + span > b {
                return due + span;
            }
        }
        b
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn the_index_answers_exactly_as_the_walk(
        s in arb_stream(),
        scale in prop::sample::select(vec![1.0f64, 1.0, 0.7, 1.5, 3.0, 7.3]),
        overhead in 0u64..300,
        min_sleep in prop::sample::select(vec![0u64, 0, 50, 400, 3_000]),
        offset in 0u64..1_000_000,
        fraction in prop::sample::select(vec![1.0f64, 0.9, 0.3, 0.05]),
        ops in prop::collection::vec((0u64..4_000, 0u64..3_000, 0u64..1_000, 0u64..1_000_000, 0u8..4), 1..40),
    ) {
        let o = PlanOptions { scale, overhead_ns: overhead, min_sleep_ns: min_sleep, fraction, ..PlanOptions::ideal() };
        let Ok(plan) = Plan::new(&s, o) else { return Ok(()); };
        let Some(ix) = plan.index() else {
            // Only these cases may fall back to the walk.
            prop_assert!(scale != 1.0 || min_sleep > 0);
            return Ok(());
        };
        let mut w = Walk { c: plan.cursor(offset), pending: None, busy_until: 0 };
        let mut seg = ix.segment_start(offset);
        let mut r = ix.replay(&seg);
        let mut done = PlanStats::default();
        let mut start = 0u64;
        for (k, &(q, wait, top, off, what)) in ops.iter().enumerate() {
            if what == 0 {
                w.c.resync(off, start);
                w.pending = None;
                w.busy_until = start;
                let new = ix.segment_start(off);
                done += r.resync(&ix, &seg, &new, start);
                seg = new;
                prop_assert!(r.kept(&ix), "kept counts after resync");
            }
            prop_assert_eq!(r.segment(&ix), seg);
            let q = q + 1;
            let (e1, e2) = (w.compute(start, q), r.compute(&ix, &seg, start, q));
            prop_assert_eq!(e1, e2, "compute at op {}", k);
            let b = e1 + wait;
            prop_assert!(r.kept(&ix), "kept counts after compute {}", k);
            let (x1, x2) = (w.leave(b), r.leave_barrier(&ix, &seg, b));
            prop_assert_eq!(x1, x2, "bottom barrier at op {}", k);
            prop_assert!(r.kept(&ix), "kept counts after barrier {}", k);
            let t = x1 + top;
            let (s1, s2) = (w.leave(t), r.leave_barrier(&ix, &seg, t));
            prop_assert_eq!(s1, s2, "top barrier at op {}", k);
            prop_assert!(r.kept(&ix), "kept counts after top {}", k);
            start = s1;
            let mut got = done;
            got += r.stats(&ix, &seg);
            prop_assert_eq!(w.c.stats(), got, "counts at op {}", k);
            prop_assert_eq!(w.c.progress_at(start), r.progress_at(&ix, start));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Long, dense streams at S = 1: the fast path (the compute in its bucket of keys, a barrier
    /// in blocks then galloping, over two laps) answers most questions, each exactly as the walk.
    #[test]
    fn the_fast_path_answers_as_the_walk_on_long_streams(
        gaps in prop::collection::vec((1u64..400, 1u64..200), 50..400),
        min_sleep in prop::sample::select(vec![0u64, 0, 30]),
        overhead in prop::sample::select(vec![0u64, 0, 40]),
        fraction in prop::sample::select(vec![1.0f64, 1.0, 0.5]),
        offset in 0u64..1_000_000,
        ops in prop::collection::vec((0u64..20_000, 0u64..3_000, 0u64..1_000, 0u64..1_000_000, 0u8..12), 1..60),
    ) {
        let mut t = 0u64;
        let mut d = Vec::new();
        for (g, r) in gaps { t += g; d.push(Detour { start_ns: t, run_ns: r }); t += r; }
        let s = Stream::from_detours(0, 0, t + 100, &d).unwrap();
        let o = PlanOptions { overhead_ns: overhead, min_sleep_ns: min_sleep, fraction, ..PlanOptions::ideal() };
        let plan = Plan::new(&s, o).unwrap();
        let Some(ix) = plan.index() else { return Ok(()); };
        let mut w = Walk { c: plan.cursor(offset), pending: None, busy_until: 0 };
        let mut seg = ix.segment_start(offset);
        let mut r = ix.replay(&seg);
        let (mut start, mut fast) = (0u64, 0u32);
        for (n, &(q, wait, top, off, what)) in ops.iter().enumerate() {
            if what == 0 {
                w.c.resync(off, start);
                w.pending = None;
                w.busy_until = start;
                let new = ix.segment_start(off);
                r.resync(&ix, &seg, &new, start);
                seg = new;
            }
            let q = q + 1;
            let e1 = w.compute(start, q);
            let mut f = r;
            if let Some(e) = f.compute_fast(&ix, start, q) {
                prop_assert_eq!(e, e1);
                prop_assert!(f.kept(&ix));
                fast += 1;
            }
            // The first question after the start is answered fast when its window is far
            // from the limit and the segment has no head.
            if n == 0 && what != 0 && fraction == 1.0 && seg.head.is_none()
                && (e1 - start) * 4 < ix.period_ns() {
                prop_assert_eq!(fast, 1);
            }
            prop_assert_eq!(r.compute(&ix, &seg, start, q), e1);
            for b in [e1 + wait, e1 + wait + top] {
                let x1 = w.leave(b);
                let mut f = r;
                if let Some(x) = f.leave_barrier_fast(&ix, b) {
                    prop_assert_eq!(x, x1);
                    prop_assert!(f.kept(&ix));
                    fast += 1;
                }
                prop_assert_eq!(r.leave_barrier(&ix, &seg, b), x1);
                start = x1;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// A message's receive in one search ([`IndexedReplay::receive_fast`]) answers as the walk's
    /// idle then work, leaves the replay as those two questions leave it (its counts with it)
    /// and names the quiet time after them: dense streams, waits that pass several detours
    /// (those that begin and end inside the wait), messages arriving inside a detour, works
    /// short and long, near the fraction limit.
    #[test]
    fn a_receive_in_one_search_answers_as_idle_then_work(
        gaps in prop::collection::vec((1u64..400, 1u64..200), 50..400),
        overhead in prop::sample::select(vec![0u64, 0, 40]),
        fraction in prop::sample::select(vec![1.0f64, 1.0, 0.5, 0.1]),
        offset in 0u64..1_000_000,
        ops in prop::collection::vec((0u64..3_000, 0u64..400, 0u64..3), 1..80),
    ) {
        let mut t = 0u64;
        let mut d = Vec::new();
        for (g, r) in gaps { t += g; d.push(Detour { start_ns: t, run_ns: r }); t += r; }
        let s = Stream::from_detours(0, 0, t + 100, &d).unwrap();
        let o = PlanOptions { overhead_ns: overhead, fraction, ..PlanOptions::ideal() };
        let plan = Plan::new(&s, o).unwrap();
        let Some(ix) = plan.index() else { return Ok(()); };
        let seg = ix.segment_start(offset);
        let mut r = ix.replay(&seg);
        let (mut now, mut fast) = (0u64, 0u32);
        for (k, &(wait, work, kind)) in ops.iter().enumerate() {
            // A short message's o, none, or a long work.
            let work = match kind { 0 => work % 50, 1 => 0, _ => work };
            let b = now + wait;
            let (before, mut f) = (r, r);
            let got = f.receive_fast(&ix, b, work);
            let ready = r.leave_barrier(&ix, &seg, b);
            let exit = r.compute(&ix, &seg, ready, work);
            prop_assert!(r.kept(&ix), "kept counts at op {}", k);
            if let Some((x, quiet)) = got {
                fast += 1;
                prop_assert_eq!(x, exit, "exit at op {}", k);
                prop_assert_eq!(f, r, "state at op {}", k);
                prop_assert_eq!(quiet, r.quiet_until(), "quiet time at op {}", k);
                prop_assert!(quiet >= exit);
                prop_assert_eq!(f.stats(&ix, &seg), r.stats(&ix, &seg));
            } else {
                prop_assert_eq!(f, before, "nothing changed at op {}", k);
            }
            now = exit;
        }
        // How often it answers depends on the draw; that it answers is the next test's.
        let _ = fast;
    }
}

#[test]
fn a_receive_after_a_long_wait_steps_over_the_detours_inside_it() {
    // A detour of 100 ns every µs; the rank idles until 3 550 and then works 10 ns: the three
    // detours due in the wait begin and end in it and change nothing but the counts.
    let d: Vec<Detour> = (1..=50)
        .map(|k| Detour {
            start_ns: k * 1_000,
            run_ns: 100,
        })
        .collect();
    let s = Stream::from_detours(0, 0, 51_000, &d).unwrap();
    let plan = Plan::new(&s, PlanOptions::ideal()).unwrap();
    let ix = plan.index().unwrap();
    let seg = ix.segment_start(0);
    let mut r = ix.replay(&seg);
    let mut w = r;
    let (exit, quiet) = r
        .receive_fast(&ix, 3_550, 10)
        .expect("answered in one search");
    let ready = w.leave_barrier(&ix, &seg, 3_550);
    assert_eq!(ready, 3_550);
    assert_eq!(w.compute(&ix, &seg, ready, 10), 3_560);
    assert_eq!((exit, quiet), (3_560, 4_000));
    assert_eq!(r, w);
    assert_eq!(r.stats(&ix, &seg).injections, 3);
    // A message arriving inside the detour at 4 000: ready at its end, then the work.
    let (exit, quiet) = r
        .receive_fast(&ix, 4_050, 10)
        .expect("answered in one search");
    assert_eq!((exit, quiet), (4_110, 5_000));
    // Work that a detour lands in is not answered, and changes nothing.
    let before = r;
    assert_eq!(r.receive_fast(&ix, 4_995, 10), None);
    assert_eq!(r, before);
}

#[test]
fn questions_past_the_lap_end_are_answered_fast_in_the_second_lap_as_the_walk() {
    // A detour of 100–399 ns every 1000 ns over 200 µs; the replay starts 5 µs before the
    // lap's end and computes 3 µs windows with barriers between them, well into its second
    // lap (the fast entries' second half).
    let d: Vec<(u64, u64)> = (0..200u64)
        .map(|k| (k * 1000 + 1, 100 + (k * 37) % 300))
        .collect();
    let plan = Plan::new(&stream(200_000, &d), opts()).unwrap();
    let ix = plan.index().expect("an index at S = 1");
    let m = ix.groups.inj.len();
    let offset = ix.u0 + ix.period_ns() - 5_000;
    let mut w = Walk {
        c: plan.cursor(offset),
        pending: None,
        busy_until: 0,
    };
    let seg = ix.segment_start(offset);
    let mut r = ix.replay(&seg);
    let second_lap = |r: &IndexedReplay| matches!(r.fast_start(), Some(i) if i >= m);
    let (mut start, mut computed, mut left, mut held) = (0u64, 0u32, 0u32, 0u32);
    for _ in 0..30 {
        let e1 = w.compute(start, 3_000);
        let mut f = r;
        if let Some(e) = f.compute_fast(&ix, start, 3_000) {
            assert_eq!(e, e1);
            computed += u32::from(second_lap(&r));
        }
        assert_eq!(r.compute(&ix, &seg, start, 3_000), e1);
        let b = e1 + 700;
        let x1 = w.leave(b);
        let mut f = r;
        if let Some(x) = f.leave_barrier_fast(&ix, b) {
            assert_eq!(x, x1);
            left += u32::from(second_lap(&r));
            held += u32::from(x > b);
        }
        assert_eq!(r.leave_barrier(&ix, &seg, b), x1);
        start = x1;
    }
    // Past the lap's end the questions are answered fast, some barriers held by a detour
    // running at them.
    assert!(computed >= 25, "{computed} computed fast in the second lap");
    assert!(left >= 25 && held > 0, "{left} barriers fast, {held} held");
}

#[test]
fn the_index_refuses_what_it_cannot_answer_exactly() {
    let s = stream(1000, &[(100, 10), (110, 20), (900, 5)]);
    let curve = OverheadByGap::new(&[(10, 1), (100, 2)]).unwrap();
    let with = |o: PlanOptions| Plan::new(&s, o).unwrap().index().is_some();
    assert!(with(opts()));
    assert!(!with(PlanOptions {
        overhead_by_gap: curve,
        ..opts()
    }));
    // Every sleep merges: one endless injection.
    assert!(!with(PlanOptions {
        min_sleep_ns: 10_000,
        ..opts()
    }));
    // A gap of 0 ns at S = 1.5 could let rounded dues overlap: walked instead.
    let touching = stream(1000, &[(100, 10), (110, 20)]);
    let sc = PlanOptions {
        scale: 1.5,
        ..opts()
    };
    assert!(Plan::new(&touching, sc).unwrap().index().is_none());
    assert!(Plan::new(&s, sc).unwrap().index().is_none());
    let apart = stream(1000, &[(100, 10), (120, 20)]);
    assert!(Plan::new(&apart, sc).unwrap().index().is_some());
}
