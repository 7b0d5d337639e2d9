use super::*;

use jitter_trace::Detour;
use proptest::prelude::*;

pub(crate) fn stream(end: u64, detours: &[(u64, u64)]) -> Stream {
    let d: Vec<Detour> = detours
        .iter()
        .map(|&(s, r)| Detour {
            start_ns: s,
            run_ns: r,
        })
        .collect();
    Stream::from_detours(0, 0, end, &d).unwrap()
}

pub(crate) fn opts() -> PlanOptions {
    PlanOptions::ideal()
}

#[test]
fn a_plan_refuses_scales_and_injections_beyond_its_bounds() {
    // 1 s of trace with a 20 ms detour every 100 ms.
    let d: Vec<(u64, u64)> = (0..10).map(|i| (i * 100_000_000 + 1, 20_000_000)).collect();
    let s = stream(1_000_000_000, &d);
    let with = |scale: f64, min_sleep_ns: u64| {
        Plan::new(
            &s,
            PlanOptions {
                scale,
                min_sleep_ns,
                ..opts()
            },
        )
    };
    for bad in [
        1e19,
        1e300,
        f64::INFINITY,
        f64::NAN,
        0.0,
        -1.0,
        MAX_SCALE * 1.01,
    ] {
        let e = with(bad, 0).unwrap_err().to_string();
        assert!(e.contains("scale must be"), "{bad}: {e}");
    }
    // 20 ms × 1000 = 20 s for one detour: over the 10 s bound.
    let e = with(1000.0, 0).unwrap_err().to_string();
    assert!(e.contains("20.000 s") && e.contains("bound of 10 s"), "{e}");
    // Every sleep merged (80 ms × 100 < M = 10 s): one pass is one 20 s injection.
    let e = with(100.0, MAX_DETOUR_NS).unwrap_err().to_string();
    assert!(e.contains("lower the scale or the minimum sleep"), "{e}");
    let e = with(1.0, MAX_DETOUR_NS + 1).unwrap_err().to_string();
    assert!(e.contains("minimum sleep must be at most 10 s"), "{e}");
    assert!(with(100.0, 0).is_ok());
    assert!(with(1.0, 50_000_000).is_ok());
}

#[test]
fn a_stream_without_time_between_its_detours_is_refused() {
    // A one-row CSV's stream: the window is the detour's own span.
    let one = Stream::from_detours(
        0,
        1_000,
        21_000,
        &[Detour {
            start_ns: 1_000,
            run_ns: 20_000,
        }],
    )
    .unwrap();
    let e = Plan::new(&one, opts()).unwrap_err();
    assert!(matches!(e, PlanError::NoQuietTime(0)), "{e}");
    // One nanosecond of quiet time is a stream to replay.
    assert!(Plan::new(&stream(20_001, &[(0, 20_000)]), opts()).is_ok());
}

#[test]
fn ideal_replay_reproduces_the_stream_from_offset_zero() {
    let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
    let plan = Plan::new(&s, opts()).unwrap();
    let inj: Vec<Injection> = plan.cursor(0).collect();
    let got: Vec<(u64, u64)> = inj.iter().map(|i| (i.due_ns, i.busy_ns)).collect();
    assert_eq!(got, vec![(100, 10), (400, 20), (900, 5)]);
    assert_eq!(inj[0].next_due_ns, 400);
    assert_eq!(inj[0].arm_after_ns, 400 - 110);
    assert_eq!(inj[2].next_due_ns, u64::MAX);
}

#[test]
fn a_paused_replay_resumes_where_it_would_have_been() {
    // The paired design's resume: the timeline ran on while nothing was injected.
    let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
    let plan = Plan::new(
        &s,
        PlanOptions {
            scale: 2.0,
            ..opts()
        },
    )
    .unwrap();
    let mut c = plan.cursor(300);
    assert_eq!(c.point_at(0), 300);
    assert_eq!(c.point_at(400), 500);
    assert_eq!(c.point_at(1600), 100, "wraps around the timeline");
    c.resync(c.point_at(400), 400);
    // From 500 the next detour is (900, 5): due (900 − 500)·2 after the resync.
    assert_eq!(c.next().map(|i| i.due_ns), Some(400 + 800));
}

#[test]
fn stats_count_executed_injections_not_the_ones_a_resync_discards() {
    let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
    let plan = Plan::new(&s, opts()).unwrap();
    let mut c = plan.cursor(0);
    let injections = |c: &Cursor| (c.stats().injections, c.stats().injected_ns);
    c.next().unwrap(); // (100, 10) handed out, (400, 20) computed ahead
    assert_eq!(injections(&c), (0, 0));
    c.next().unwrap(); // (100, 10) executed
    assert_eq!(injections(&c), (1, 10));
    // A resync discards (400, 20), handed out but not executed, and the look-ahead.
    c.resync(850, 300);
    let i = c.next().unwrap();
    assert_eq!((i.trace_ns, i.busy_ns), (900, 5));
    assert_eq!(injections(&c), (1, 10));
    c.next().unwrap(); // (900, 5) executed
    assert_eq!(injections(&c), (2, 15));
    // Running out counts the last one handed out.
    let mut rest = plan.cursor(0);
    assert_eq!(rest.by_ref().count(), 3);
    assert_eq!(injections(&rest), (3, 35));
}

#[test]
fn an_offset_inside_a_detour_injects_its_rest_at_once_and_wraps() {
    let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
    let plan = Plan::new(&s, opts()).unwrap();
    let got: Vec<(u64, u64, u64)> = plan
        .cursor(405)
        .map(|i| (i.due_ns, i.busy_ns, i.trace_ns))
        .collect();
    // Rest of (400, 20) now, then 900 at +495, wrap: 100 at +695, and the first 5 ns of
    // (400, 20) again: f = 1 replays exactly [405, 1405).
    assert_eq!(
        got,
        vec![(0, 15, 405), (495, 5, 900), (695, 10, 1100), (995, 5, 1400)]
    );
}

#[test]
fn a_window_that_does_not_begin_at_zero_is_replayed_relative_to_its_begin() {
    let d = [
        Detour {
            start_ns: 5_100,
            run_ns: 10,
        },
        Detour {
            start_ns: 5_400,
            run_ns: 20,
        },
    ];
    let s = Stream::from_detours(0, 5_000, 6_000, &d).unwrap();
    let plan = Plan::new(&s, opts()).unwrap();
    let got: Vec<(u64, u64)> = plan
        .cursor(0)
        .take(3)
        .map(|i| (i.due_ns, i.trace_ns))
        .collect();
    assert_eq!(got, vec![(100, 100), (400, 400)]);
    let wrapped: Vec<u64> = plan.cursor(500).map(|i| i.due_ns).collect();
    assert_eq!(wrapped, vec![600, 900]);
}

#[test]
fn an_offset_in_a_gap_waits_for_the_next_detour() {
    let s = stream(1000, &[(100, 10), (400, 20)]);
    let plan = Plan::new(&s, opts()).unwrap();
    let first = plan.cursor(950).next().unwrap();
    assert_eq!((first.due_ns, first.busy_ns), (150, 10));
}

#[test]
fn scaling_multiplies_times_and_overhead_is_subtracted_or_drops() {
    let s = stream(1000, &[(100, 10), (400, 2), (900, 5)]);
    let o = PlanOptions {
        scale: 3.0,
        overhead_ns: 7,
        ..opts()
    };
    let plan = Plan::new(&s, o).unwrap();
    let mut c = plan.cursor(0);
    let inj: Vec<(u64, u64)> = c.by_ref().map(|i| (i.due_ns, i.busy_ns)).collect();
    // 3·2 = 6 ≤ 7: dropped; 3·10 − 7 = 23; 3·5 − 7 = 8.
    assert_eq!(inj, vec![(300, 23), (2700, 8)]);
    let st = c.stats();
    assert_eq!(
        (st.detours, st.injections, st.dropped, st.dropped_ns),
        (3, 2, 1, 6)
    );
    assert_eq!(st.noise_ns, 51);
    assert_eq!(st.injected_ns, 45);
}

#[test]
fn short_sleeps_merge_and_runs_add() {
    let s = stream(1000, &[(100, 10), (113, 10), (200, 5)]);
    let o = PlanOptions {
        min_sleep_ns: 5,
        ..opts()
    };
    let plan = Plan::new(&s, o).unwrap();
    let mut c = plan.cursor(0);
    let inj: Vec<(u64, u64, u32)> = c
        .by_ref()
        .map(|i| (i.due_ns, i.busy_ns, i.detours))
        .collect();
    assert_eq!(inj, vec![(100, 20, 2), (200, 5, 1)]);
    assert_eq!(c.stats().merged, 1);
}

#[test]
fn itimer_arms_early_by_the_lateness_abstime_does_not() {
    let s = stream(1000, &[(100, 10), (400, 20)]);
    for (timer, arm) in [(TimerKind::Itimer, 290 - 30), (TimerKind::Abstime, 290)] {
        let plan = Plan::new(
            &s,
            PlanOptions {
                lateness_ns: 30,
                timer,
                ..opts()
            },
        )
        .unwrap();
        assert_eq!(plan.cursor(0).next().unwrap().arm_after_ns, arm);
    }
}

#[test]
fn fraction_stops_the_replay_and_progress_reports_it() {
    let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
    let plan = Plan::new(
        &s,
        PlanOptions {
            fraction: 0.5,
            scale: 2.0,
            ..opts()
        },
    )
    .unwrap();
    let mut c = plan.cursor(0);
    let dues: Vec<u64> = c.by_ref().map(|i| i.due_ns).collect();
    assert_eq!(dues, vec![200, 800]);
    assert!(c.finished());
    assert!((c.progress_at(1000) - 0.5).abs() < 1e-12);
}

#[test]
fn resync_jumps_and_keeps_counting_progress() {
    let s = stream(1000, &[(100, 10), (400, 20), (900, 5)]);
    let plan = Plan::new(&s, opts()).unwrap();
    let mut c = plan.cursor(0);
    assert_eq!(c.next().unwrap().due_ns, 100);
    c.resync(850, 300);
    let i = c.next().unwrap();
    assert_eq!((i.due_ns, i.busy_ns), (350, 5));
    assert!((c.progress_at(300) - 0.3).abs() < 1e-12);
    // Resync into a detour: its rest at once.
    c.resync(105, 600);
    let i = c.next().unwrap();
    assert_eq!((i.due_ns, i.busy_ns), (600, 5));
    // The fraction limit counts every segment: 600 ns used, 400 left from 105.
    let rest: Vec<u64> = c.map(|i| i.trace_ns).collect();
    assert_eq!(rest, vec![400]);
}

#[test]
fn bad_options_and_hopeless_overheads_are_refused() {
    let s = stream(1000, &[(100, 10)]);
    for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(Plan::new(&s, PlanOptions { scale, ..opts() }).is_err());
    }
    for fraction in [0.0, 1.5, -0.1] {
        assert!(Plan::new(&s, PlanOptions { fraction, ..opts() }).is_err());
    }
    let e = Plan::new(
        &s,
        PlanOptions {
            overhead_ns: 10,
            ..opts()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("nothing would be injected"), "{e}");
    // The advice names the knob of every tool, the preload library's included.
    assert!(
        e.to_string()
            .ends_with("(--scale, or JITTER_SCALE for libjitter_preload.so)"),
        "{e}"
    );
    assert!(Plan::new(&stream(1000, &[]), opts()).is_err());
    let t = Trace {
        streams: vec![s],
        ..Trace::default()
    };
    assert!(matches!(
        Plan::from_trace(&t, 1, opts()),
        Err(PlanError::NoStream { .. })
    ));
}

#[test]
fn uniform_offsets_keep_the_density_of_periodic_noise() {
    // Period 1000, duration 50: a window of q = 300 sees 300 · 50/1000 = 15 ns on average.
    let d: Vec<(u64, u64)> = (0..10).map(|k| (k * 1000 + 200, 50)).collect();
    let s = stream(10_000, &d);
    let plan = Plan::new(&s, opts()).unwrap();
    let q = 300u64;
    let mut total = 0u64;
    for offset in 0..10_000u64 {
        // Detour time inside [0, q): injections due before q, clipped at q.
        let mut c = plan.cursor(offset);
        for i in c.by_ref() {
            if i.due_ns >= q {
                break;
            }
            total += i.span_ns.min(q - i.due_ns);
        }
    }
    assert_eq!(total, 15 * 10_000);
}

prop_compose! {
    pub(crate) fn arb_stream()(
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

proptest! {
    /// The bound on one injection is the longest chain of merged detours around the
    /// timeline (the largest sum from any record over the records that follow it across
    /// sleeps shorter than M, wrapping past the end, at most one pass), at least up to just
    /// above [`MAX_DETOUR_NS`].
    #[test]
    fn the_longest_injection_is_the_longest_merged_chain_around_the_timeline(
        s in arb_stream(),
        scale in prop::sample::select(vec![1.0, 0.5, 3.0, 2e6]),
        min_sleep in 0u64..6_000,
    ) {
        let o = PlanOptions { scale, min_sleep_ns: min_sleep, ..PlanOptions::ideal() };
        let (r, d) = (&s.records, s.end_ns - s.begin_ns);
        let n = r.len();
        let gap_after = |k: usize| match r.get(k + 1) {
            Some(next) => next.start_ns - r[k].end_ns(),
            None => (r[0].start_ns + d).saturating_sub(r[k].end_ns()),
        };
        let mut want = 0u64;
        for j in 0..n {
            let mut chain = 0u64;
            for k in (j..j + n).map(|k| k % n) {
                chain = chain.saturating_add(o.scaled(r[k].run_ns));
                want = want.max(chain);
                if o.scaled(gap_after(k)) >= o.min_sleep_ns {
                    break;
                }
            }
        }
        let cap = |x: u64| x.min(MAX_DETOUR_NS + 1);
        prop_assert_eq!(cap(longest_injection_ns(r, d, &o)), cap(want));
    }

    #[test]
    fn injections_are_ordered_non_overlapping_and_add_up(
        s in arb_stream(),
        scale in 0.5f64..8.0,
        overhead in 0u64..300,
        min_sleep in 0u64..400,
        offset in 0u64..1_000_000,
        fraction in 0.05f64..1.0,
    ) {
        let o = PlanOptions { scale, overhead_ns: overhead, min_sleep_ns: min_sleep, fraction, ..PlanOptions::ideal() };
        let Ok(plan) = Plan::new(&s, o) else { return Ok(()); };
        let mut c = plan.cursor(offset);
        let inj: Vec<Injection> = c.by_ref().take(10_000).collect();
        let st = c.stats();
        let mut prev_end = 0u64;
        for (k, i) in inj.iter().enumerate() {
            prop_assert!(i.busy_ns > 0 && i.busy_ns + overhead == i.span_ns);
            prop_assert!(i.due_ns >= prev_end.saturating_sub(2), "overlap at {}", k);
            prev_end = i.due_ns + i.span_ns;
            if let Some(n) = inj.get(k + 1) { prop_assert_eq!(i.next_due_ns, n.due_ns); }
        }
        prop_assert_eq!(st.injections as usize, inj.len());
        prop_assert_eq!(st.injected_ns, inj.iter().map(|i| i.span_ns).sum::<u64>());
        prop_assert_eq!(st.busy_ns, inj.iter().map(|i| i.busy_ns).sum::<u64>());
        prop_assert_eq!(st.injected_detours + st.dropped, st.detours);
        // Merged runs are scaled as one sum: rounding differs by at most 1 ns per merge.
        let accounted = (st.injected_ns + st.dropped_ns) as i64;
        prop_assert!((st.noise_ns as i64 - accounted).unsigned_abs() <= st.merged);
        // Nothing beyond f of the stream is replayed.
        if let Some(last) = inj.last() {
            let replayed = last.trace_ns - (offset % plan.period_ns());
            prop_assert!((replayed as f64) < fraction * plan.period_ns() as f64 + 1.0);
        }
    }
}

#[test]
fn o_after_a_gap_is_interpolated_in_log_gap_and_clamped_at_the_ends() {
    let c =
        OverheadByGap::new(&[(100_000, 5_000), (1_000_000, 6_000), (10_000_000, 9_000)]).unwrap();
    assert_eq!(OverheadByGap::default().at(5), None);
    assert_eq!(c.at(1), Some(5_000));
    assert_eq!(c.at(1_000_000), Some(6_000));
    assert_eq!(c.at(u64::MAX), Some(9_000));
    // √(10⁶ · 10⁷) is halfway in log gap.
    assert_eq!(c.at(3_162_278), Some(7_500));
    assert!(OverheadByGap::new(&[(0, 1)]).is_err());
    assert!(OverheadByGap::new(&[(5, 1), (5, 2)]).is_err());
    assert!(OverheadByGap::new(&[(1, 1); OVERHEAD_POINTS + 1]).is_err());
}

#[test]
fn each_injection_is_compensated_with_o_after_its_own_gap() {
    // Detours at 0, 100 µs and 10 ms (10 µs each); O = 2 µs after 90 µs, 8 µs after ≈ 10 ms.
    let s = stream(
        20_000_000,
        &[(0, 10_000), (100_000, 10_000), (10_000_000, 10_000)],
    );
    let o = PlanOptions {
        overhead_ns: 5_000,
        overhead_by_gap: OverheadByGap::new(&[(90_000, 2_000), (9_890_000, 8_000)]).unwrap(),
        ..opts()
    };
    let plan = Plan::new(&s, o).unwrap();
    let busy: Vec<u64> = plan.cursor(0).take(3).map(|i| i.busy_ns).collect();
    // The first has no predecessor: O = 5 µs.
    assert_eq!(busy, vec![5_000, 8_000, 2_000]);
    let st = {
        let mut c = plan.cursor(0);
        c.by_ref().take(4).for_each(drop);
        c.stats()
    };
    assert_eq!(st.busy_ns, 5_000 + 8_000 + 2_000);
    // A resync forgets the predecessor: O = 5 µs again.
    let mut c = plan.cursor(0);
    c.next();
    c.resync(10_000_000, 0);
    assert_eq!(c.next().unwrap().busy_ns, 5_000);
}
