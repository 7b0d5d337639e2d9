use super::*;
use crate::collective::{CommModel, LoopShape};
use jitter_emulator::PlanOptions;
use jitter_trace::{Detour, Stream};

use crate::comm::Solo;
use crate::ranks::ceil_log2;

/// The simulation in this process, as a prediction runs it: the default engine, its indexes
/// built first ([`indexes`]).
fn sim(
    plans: &[Arc<Plan>],
    ranks: u64,
    mode: SyncMode,
    cfg: &DesConfig,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    sim_engine(plans, ranks, mode, cfg, Engine::default(), on_phase)
}

/// [`sim`] with `engine`.
fn sim_engine(
    plans: &[Arc<Plan>],
    ranks: u64,
    mode: SyncMode,
    cfg: &DesConfig,
    engine: Engine,
    on_phase: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<DesOutcome> {
    let ix = indexes(plans, cfg, engine);
    simulate(&Solo, plans, ix.as_deref(), ranks, mode, cfg, on_phase)
}

fn plan(end: u64, detours: &[(u64, u64)]) -> Arc<Plan> {
    let d: Vec<Detour> = detours
        .iter()
        .map(|&(start_ns, run_ns)| Detour { start_ns, run_ns })
        .collect();
    Plan::new(
        &Stream::from_detours(0, 0, end, &d).unwrap(),
        PlanOptions::ideal(),
    )
    .unwrap()
}

fn cfg(q: u64, phases: u64, stage: f64) -> DesConfig {
    DesConfig {
        quanta_ns: q,
        phases,
        ranks_per_node: 1,
        barrier: BarrierModel { stage_ns: stage },
        comm: CommModel::OFFLOADED,
        drift_sd_ns: 0.0,
        seed: 1,
        window: None,
    }
}

#[test]
fn ceil_log2_is_the_stage_count() {
    let got: Vec<u32> = [0, 1, 2, 3, 4, 5, 1024, 1025].map(ceil_log2).to_vec();
    assert_eq!(got, vec![0, 0, 1, 2, 2, 3, 10, 11]);
}

#[test]
fn a_single_rank_pays_every_detour_in_its_window_and_the_barrier_hides_none() {
    // One rank, q = 100, no barrier latency: the phases tile the timeline, so every detour
    // lands in some compute window. Detours of 10 ns every 250 ns starting at 50 ns: the
    // first window [0, 100) holds the one at 50 and grows to 110, and so on.
    let p = plan(
        1_000_000,
        &(0..4000).map(|i| (50 + 250 * i, 10)).collect::<Vec<_>>(),
    );
    let mode = "once".parse().unwrap();
    let c = DesConfig {
        seed: 3,
        ..cfg(100, 50, 0.0)
    };
    let out = sim(std::slice::from_ref(&p), 1, mode, &c, &|_| {}).unwrap();
    let n = out.averages.phases as f64;
    // Total noise met in the replayed time equals the noise added to the phases.
    let total_qt = out.averages.sum_max_qt_ns;
    let noise = total_qt - 100.0 * n;
    let expected = (total_qt / 250.0).floor() * 10.0;
    assert!((noise - expected).abs() <= 10.0, "{noise} vs {expected}");
    assert_eq!(out.averages.sum_max_qtbt_ns, total_qt);
}

fn rank(p: &Arc<Plan>) -> RankState {
    RankState {
        cursor: p.cursor(0),
        pending: None,
        start_ns: 0,
        busy_until: 0,
        drift_ns: 0,
        limit_at: u64::MAX,
        rng: SmallRng::seed_from_u64(0),
    }
}

#[test]
fn compute_windows_grow_and_barriers_hide_all_but_a_running_detour() {
    let p = plan(
        10_000,
        &[(50, 10), (105, 20), (300, 40), (500, 100), (700, 5)],
    );
    let mut r = rank(&p);
    // [0, 100) holds 50 (+10) → 110 holds 105 (+20) → 130.
    assert_eq!(r.compute(0, 100, 0.0), 130);
    // Barrier completes at 320: the detour [300, 340) is still running → exit 340.
    assert_eq!(r.leave_barrier(320, 0.0), 340);
    // Barrier completes at 650: [500, 600) ended before → exit at once.
    assert_eq!(r.compute(340, 100, 0.0), 440);
    assert_eq!(r.leave_barrier(650, 0.0), 650);
    // A detour due exactly at the barrier completion belongs to the next window.
    assert_eq!(r.leave_barrier(700, 0.0), 700);
    assert_eq!(r.compute(700, 100, 0.0), 805);
}

#[test]
fn a_resync_into_a_detour_costs_its_rest_in_the_next_window() {
    let p = plan(10_000, &[(500, 100)]);
    let mut r = rank(&p);
    r.cursor.resync(560, 1_000);
    r.busy_until = 1_000;
    assert_eq!(r.compute(1_000, 100, 0.0), 1_140);
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let p = plan(
        50_000_000,
        &(0..20_000)
            .map(|i| (i * 2_500 + (i * 7919) % 1000, 100 + (i * 31) % 400))
            .collect::<Vec<_>>(),
    );
    let c = DesConfig {
        drift_sd_ns: 50.0,
        ..cfg(10_000, 200, 1000.0)
    };
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| sim(std::slice::from_ref(&p), 3000, SyncMode::Once, &c, &|_| {}).unwrap())
    };
    let a = run(1);
    let b = run(2);
    assert_eq!(a, b);
    assert!(a.averages.phases == 200);
}

#[test]
fn ranks_of_a_node_replay_its_streams_from_one_offset() {
    // Two ranks on one node (k = 2). With two equal streams they see exactly what one
    // rank alone sees (same offset); with a quiet second stream, rank 1 is faster.
    let noisy: Vec<Detour> = (0..1000)
        .map(|i| Detour {
            start_ns: i * 3_000 + 700,
            run_ns: 150,
        })
        .collect();
    let quiet = [Detour {
        start_ns: 2_999_000,
        run_ns: 1,
    }];
    let trace = |second: &[Detour]| jitter_trace::Trace {
        streams: vec![
            Stream::from_detours(0, 0, 3_000_000, &noisy).unwrap(),
            Stream::from_detours(1, 0, 3_000_000, second).unwrap(),
        ],
        ..jitter_trace::Trace::default()
    };
    let plans = |t: &jitter_trace::Trace| -> Vec<Arc<Plan>> {
        (0..2)
            .map(|s| Plan::from_trace(t, s, PlanOptions::ideal()).unwrap())
            .collect()
    };
    let pair = DesConfig {
        ranks_per_node: 2,
        ..cfg(1_000, 300, 0.0)
    };
    let same = plans(&trace(&noisy));
    let alone = sim(
        &same[..1],
        1,
        SyncMode::None,
        &cfg(1_000, 300, 0.0),
        &|_| {},
    );
    let alone = alone.unwrap();
    let twins = sim(&same, 2, SyncMode::None, &pair, &|_| {}).unwrap();
    assert_eq!(alone.averages.sum_max_qt_ns, twins.averages.sum_max_qt_ns);
    assert_eq!(twins.averages.sum_lost_rel, 0.0);
    assert!(alone.averages.avg_max_qt_ns() > 1_000.0);
    let mixed = plans(&trace(&quiet));
    let mixed = sim(&mixed, 2, SyncMode::None, &pair, &|_| {}).unwrap();
    assert!(
        mixed.averages.sum_lost_rel > 0.0,
        "rank 1 is faster than rank 0"
    );
    let three = DesConfig {
        ranks_per_node: 3,
        ..cfg(1_000, 3, 0.0)
    };
    // Three ranks on two streams: rank 2 replays stream 0 again, a copy on a timeline of
    // its own (jitter_emulator::placement): under none it is no twin of rank 0; under once
    // every rank is at one point and the three are twins.
    let copies = sim(&same, 3, SyncMode::None, &three, &|_| {}).unwrap();
    assert!(copies.averages.sum_lost_rel > 0.0, "{copies:?}");
    let once = sim(&same, 3, SyncMode::Once, &three, &|_| {}).unwrap();
    assert_eq!(once.averages.sum_lost_rel, 0.0);
}

/// 3000 detours of 20–919 ns at irregular points of a 9.1 ms window: every injection path
/// (dropped, merged, single) and every index search get exercised.
fn scattered_stream() -> Stream {
    let d: Vec<Detour> = (0..3000u64)
        .map(|i| Detour {
            start_ns: i * 3_000 + (i * 7919) % 1500,
            run_ns: 20 + (i * 31) % 900,
        })
        .collect();
    Stream::from_detours(0, 0, 9_100_000, &d).unwrap()
}

/// The plan of `s` at scale S, fraction f and overhead O (sleeps under 400 ns merge),
/// which the index answers.
fn indexed_plan(s: &Stream, scale: f64, fraction: f64, overhead: u64) -> Arc<Plan> {
    let o = PlanOptions {
        scale,
        fraction,
        overhead_ns: overhead,
        min_sleep_ns: 400,
        ..PlanOptions::ideal()
    };
    let p = Plan::new(s, o).unwrap();
    assert!(p.index().is_some());
    p
}

#[test]
fn the_indexed_engine_gives_the_walk_s_outcome_in_every_sync_mode() {
    let s = scattered_stream();
    for (scale, fraction, overhead) in [(1.0, 1.0, 0), (1.0, 0.3, 50), (2.5, 0.2, 100)] {
        let p = indexed_plan(&s, scale, fraction, overhead);
        for mode in ["none", "once", "phase", "every:3"] {
            let mode: SyncMode = mode.parse().unwrap();
            let c = cfg(7_000, 400, 500.0);
            let run = |e| sim_engine(std::slice::from_ref(&p), 37, mode, &c, e, &|_| {}).unwrap();
            let (w, i) = (run(Engine::Walk), run(Engine::Indexed));
            assert_eq!(w, i, "{mode} S={scale} f={fraction}");
            assert!(w.emulator.injected > 0);
        }
    }
}

#[test]
fn synced_ranks_of_one_plan_in_a_symmetric_collective_are_one_state_with_the_same_outcome() {
    // Indexed: one state for all ranks (dissemination; recursive doubling at 16), against
    // the walk, which simulates every rank; recursive doubling at 37 keeps every rank.
    let s = scattered_stream();
    for (alg, ranks, scale, fraction, overhead) in [
        (Algorithm::Dissemination, 37, 1.0, 1.0, 0),
        (Algorithm::Dissemination, 16, 1.0, 1.0, 0),
        (Algorithm::RecursiveDoubling, 16, 1.0, 1.0, 0),
        (Algorithm::RecursiveDoubling, 37, 1.0, 1.0, 0),
        // The general search (S ≠ 1), a fraction limit and dropped detours.
        (Algorithm::Dissemination, 37, 2.5, 0.2, 100),
    ] {
        let p = indexed_plan(&s, scale, fraction, overhead);
        assert_eq!(
            symmetric(alg, ranks),
            alg == Algorithm::Dissemination || ranks == 16
        );
        for mode in ["once", "phase", "every:3"] {
            let mode: SyncMode = mode.parse().unwrap();
            let c = DesConfig {
                comm: algorithmic(alg, LoopShape::BarrierComputeBarrier, 150.0, 400.0),
                ..cfg(7_000, 200, 500.0)
            };
            let run =
                |e| sim_engine(std::slice::from_ref(&p), ranks, mode, &c, e, &|_| {}).unwrap();
            let (w, i) = (run(Engine::Walk), run(Engine::Indexed));
            assert_eq!(w, i, "{alg:?} {ranks} {mode} S={scale}");
            assert!(w.emulator.injected > 0);
        }
    }
}

#[test]
fn one_node_trace_listed_twice_gives_the_single_trace_outcome() {
    // Two node traces that are the same trace: every rank replays what it replays with
    // one (start and resync points are drawn per node group on the trace's own period).
    let s = scattered_stream();
    let p = Plan::new(&s, PlanOptions::ideal()).unwrap();
    let twice = [Arc::clone(&p), Arc::clone(&p)];
    for comm in [
        CommModel::OFFLOADED,
        algorithmic(
            Algorithm::Dissemination,
            LoopShape::BarrierComputeBarrier,
            150.0,
            400.0,
        ),
    ] {
        for mode in ["none", "once", "phase", "every:3"] {
            let mode: SyncMode = mode.parse().unwrap();
            let c = DesConfig {
                comm,
                ..cfg(7_000, 200, 500.0)
            };
            for e in [Engine::Walk, Engine::Indexed] {
                let one = sim_engine(std::slice::from_ref(&p), 37, mode, &c, e, &|_| {});
                let two = sim_engine(&twice, 37, mode, &c, e, &|_| {});
                assert_eq!(one.unwrap(), two.unwrap(), "{comm:?} {mode} {e:?}");
            }
        }
    }
    // Plans that are not whole node traces of k streams are refused.
    let three = DesConfig {
        ranks_per_node: 2,
        ..cfg(1_000, 3, 0.0)
    };
    let odd = [Arc::clone(&p), Arc::clone(&p), Arc::clone(&p)];
    let e = sim(&odd, 4, SyncMode::None, &three, &|_| {}).unwrap_err();
    assert!(e.to_string().contains("whole node traces"), "{e}");
}

#[test]
fn both_engines_map_ranks_to_node_traces_alike() {
    // Three node traces of two streams each, windows of different length; enough ranks for
    // several chunks per pass, so each engine's own way to find a rank's plan is crossed.
    let trace = |seed: u64, end: u64| {
        let stream = |c: u64| {
            let d: Vec<Detour> = (0..end / 3_000)
                .map(|i| Detour {
                    start_ns: i * 3_000 + (i * 7919 + seed * 13 + c * 101) % 1500,
                    run_ns: 20 + (i * 31 + seed * 7) % (300 * seed + 100),
                })
                .collect();
            Stream::from_detours(c as u32, 0, end, &d).unwrap()
        };
        jitter_trace::Trace {
            streams: vec![stream(0), stream(1)],
            ..jitter_trace::Trace::default()
        }
    };
    let plans: Vec<Arc<Plan>> = [(1, 3_100_000), (2, 2_000_000), (3, 4_500_000)]
        .into_iter()
        .flat_map(|(seed, end)| {
            let t = trace(seed, end);
            (0..2).map(move |s| Plan::from_trace(&t, s, PlanOptions::ideal()).unwrap())
        })
        .collect();
    for comm in [
        CommModel::OFFLOADED,
        algorithmic(
            Algorithm::Dissemination,
            LoopShape::BarrierComputeBarrier,
            150.0,
            400.0,
        ),
    ] {
        for mode in ["none", "once", "phase", "every:3"] {
            let mode: SyncMode = mode.parse().unwrap();
            let c = DesConfig {
                comm,
                ranks_per_node: 2,
                ..cfg(7_000, 60, 500.0)
            };
            let run = |e| sim_engine(&plans, 1001, mode, &c, e, &|_| {}).unwrap();
            let (w, i) = (run(Engine::Walk), run(Engine::Indexed));
            assert_eq!(w, i, "{comm:?} {mode}");
            assert!(w.emulator.injected > 0);
        }
    }
}

#[test]
fn two_node_traces_of_different_duty_give_a_slowdown_between_theirs() {
    // Periodic noise, period P = 20 us, detours d = 300 ns (A) and 60 ns (B), q = 1 us,
    // 16 ranks, one per node: with two node traces ranks 0, 2, … replay A and 1, 3, … B.
    // A window starting after a barrier at a uniform point outside detours meets one detour
    // with probability p = q/P (docs/VALIDATION.md), so with i ranks on A and j on B,
    // E[max delay] = d_A (1 − (1−p)^i) + d_B (1−p)^i (1 − (1−p)^j): 168.0 ns all on A,
    // 33.6 ns all on B, 114.4 ns half and half.
    let periodic = |d: u64| {
        let detours: Vec<(u64, u64)> = (0..100).map(|i| (i * 20_000 + 5_000, d)).collect();
        plan(2_000_000, &detours)
    };
    let (a, b) = (periodic(300), periodic(60));
    let closed = |i: i32, j: i32| {
        let miss: f64 = 1.0 - 1_000.0 / 20_000.0;
        300.0 * (1.0 - miss.powi(i)) + 60.0 * miss.powi(i) * (1.0 - miss.powi(j))
    };
    // Each seed fixes the ranks' start offsets (one sample of the joint start): the mean
    // over 8 seeds, within the two-sided 99 % Student t interval (7 degrees of freedom).
    const T7_99: f64 = 3.499;
    let delay = |plans: &[Arc<Plan>]| {
        let v: Vec<f64> = (1..=8)
            .map(|seed| {
                let c = DesConfig {
                    seed,
                    ..cfg(1_000, 2_000, 0.0)
                };
                let out = sim(plans, 16, SyncMode::None, &c, &|_| {}).unwrap();
                out.averages.avg_max_qt_ns() - 1_000.0
            })
            .collect();
        let m = v.iter().sum::<f64>() / 8.0;
        let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 7.0).sqrt();
        (m, T7_99 * sd / 8f64.sqrt())
    };
    let on_a = delay(std::slice::from_ref(&a));
    let on_b = delay(std::slice::from_ref(&b));
    let mixed = delay(&[Arc::clone(&a), Arc::clone(&b)]);
    for ((m, half), want, what) in [
        (on_a, closed(16, 0), "A"),
        (on_b, closed(0, 16), "B"),
        (mixed, closed(8, 8), "A+B"),
    ] {
        assert!((m - want).abs() <= half, "{what}: {m} ± {half} vs {want}");
    }
    assert!(
        on_b.0 < mixed.0 && mixed.0 < on_a.0,
        "B {on_b:?} < A+B {mixed:?} < A {on_a:?}"
    );
}

fn algorithmic(alg: Algorithm, shape: LoopShape, o: f64, l: f64) -> CommModel {
    CommModel {
        algorithm: alg,
        shape,
        o_ns: o,
        l_ns: l,
    }
}

#[test]
fn algorithmic_baselines_are_the_rounds_of_the_noise_free_algorithm() {
    // o = 3, l = 4: a round costs 2o + l = 10 ns; 128 ranks: 7 rounds (binomial: 14).
    let p = plan(10_000_000, &[(5_000, 10)]);
    for (alg, shape, qtb, period) in [
        (
            Algorithm::Dissemination,
            LoopShape::BarrierComputeBarrier,
            70,
            140,
        ),
        (Algorithm::Dissemination, LoopShape::ComputeBarrier, 70, 70),
        (Algorithm::BinomialTree, LoopShape::ComputeBarrier, 140, 140),
    ] {
        let c = DesConfig {
            comm: algorithmic(alg, shape, 3.0, 4.0),
            ..cfg(1_000, 5, 0.0)
        };
        let out = sim(std::slice::from_ref(&p), 128, SyncMode::None, &c, &|_| {});
        let out = out.unwrap();
        assert_eq!(
            out.baseline_qtbt_ns,
            1_000.0 + qtb as f64,
            "{alg:?} {shape:?}"
        );
        assert_eq!(out.baseline_period_ns, 1_000.0 + period as f64);
    }
    let c = DesConfig {
        comm: algorithmic(
            Algorithm::RecursiveDoubling,
            LoopShape::ComputeAllreduce,
            3.0,
            4.0,
        ),
        ..cfg(1_000, 5, 0.0)
    };
    // Recursive doubling over 64 (6 rounds) plus the fold and the unfold of 36 ranks; the
    // critical path is not a whole number of rounds: only its bounds are closed.
    let out = sim(std::slice::from_ref(&p), 100, SyncMode::None, &c, &|_| {}).unwrap();
    assert!(out.baseline_qtbt_ns > 1_060.0 && out.baseline_qtbt_ns <= 1_080.0);
}

#[test]
fn a_detour_in_a_round_delays_every_rank_offloading_holds_one() {
    // 16 ranks on one node (k = 16, one shared start offset), q = 1000 ns. Rank 0 meets a
    // 500 ns detour at replay time 1020, inside the barrier after its compute.
    // Offloaded, stage 10 ns: the barrier completes at 1040, the detour still runs, rank 0
    // leaves at 1520: max qtb 1520. Dissemination, o = 3, l = 4 (rounds of 10 ns): rank 0
    // sends round 2 at 1020 and the detour takes it to 1523; rank 4 receives at 1527 and
    // ends the round at 1530, 500 late; round 3 passes that on to rank 12: the barrier ends
    // at 1000 + 4 · 10 + 500 = 1540.
    let period = 10_000_000u64;
    let off = SyncSchedule {
        mode: SyncMode::None,
        seed: 1,
    }
    .start_offset(0, period);
    assert!(off + 1_020 + 500 < period, "pick another seed");
    let far = [Detour {
        start_ns: (off + period / 2) % period,
        run_ns: 1,
    }];
    let mut streams: Vec<Stream> = (0..16)
        .map(|c| Stream::from_detours(c, 0, period, &far).unwrap())
        .collect();
    let hit = [Detour {
        start_ns: off + 1_020,
        run_ns: 500,
    }];
    streams[0] = Stream::from_detours(0, 0, period, &hit).unwrap();
    let t = jitter_trace::Trace {
        streams,
        ..jitter_trace::Trace::default()
    };
    let plans: Vec<Arc<Plan>> = (0..16)
        .map(|s| Plan::from_trace(&t, s, PlanOptions::ideal()).unwrap())
        .collect();
    let run = |comm: CommModel| {
        let c = DesConfig {
            ranks_per_node: 16,
            comm,
            ..cfg(1_000, 1, 10.0)
        };
        sim(&plans, 16, SyncMode::None, &c, &|_| {}).unwrap()
    };
    let offloaded = run(CommModel::OFFLOADED);
    let dissemination = run(algorithmic(
        Algorithm::Dissemination,
        LoopShape::BarrierComputeBarrier,
        3.0,
        4.0,
    ));
    for o in [&offloaded, &dissemination] {
        assert_eq!(o.averages.phases, 1);
        assert_eq!(o.averages.sum_max_qt_ns, 1_000.0);
    }
    assert_eq!(offloaded.averages.sum_max_qtbt_ns, 1_520.0);
    assert_eq!(dissemination.averages.sum_max_qtbt_ns, 1_540.0);
}

#[test]
fn the_indexed_engine_gives_the_walk_s_outcome_with_algorithmic_collectives() {
    let s = scattered_stream();
    for (scale, fraction) in [(1.0, 1.0), (2.5, 0.3)] {
        let o = PlanOptions {
            scale,
            fraction,
            ..PlanOptions::ideal()
        };
        let p = Plan::new(&s, o).unwrap();
        for (alg, shape) in [
            (Algorithm::Dissemination, LoopShape::BarrierComputeBarrier),
            (Algorithm::RecursiveDoubling, LoopShape::ComputeAllreduce),
            (Algorithm::BinomialTree, LoopShape::ComputeBarrier),
            (Algorithm::Offloaded, LoopShape::ComputeBarrier),
        ] {
            for mode in ["none", "phase", "every:3"] {
                let mode: SyncMode = mode.parse().unwrap();
                let c = DesConfig {
                    comm: algorithmic(alg, shape, 150.0, 400.0),
                    ..cfg(7_000, 300, 500.0)
                };
                let run =
                    |e| sim_engine(std::slice::from_ref(&p), 37, mode, &c, e, &|_| {}).unwrap();
                let (w, i) = (run(Engine::Walk), run(Engine::Indexed));
                assert_eq!(w, i, "{alg:?} {shape:?} {mode} S={scale} f={fraction}");
                assert!(w.emulator.injected > 0);
            }
        }
    }
}

#[test]
fn the_fraction_rule_stops_the_run() {
    let d: Vec<(u64, u64)> = (0..100).map(|i| (i * 10_000 + 5_000, 100)).collect();
    let mut o = PlanOptions::ideal();
    o.fraction = 0.5;
    let dd: Vec<Detour> = d
        .iter()
        .map(|&(start_ns, run_ns)| Detour { start_ns, run_ns })
        .collect();
    let p = Plan::new(&Stream::from_detours(0, 0, 1_000_000, &dd).unwrap(), o).unwrap();
    let out = sim(&[p], 4, SyncMode::None, &cfg(1_000, 10_000, 0.0), &|_| {}).unwrap();
    assert!(out.stopped_by_fraction);
    // Half of a 1 ms stream holds about 500 µs / (1 µs + noise) phases, and never more.
    assert!(
        out.averages.phases < 500 && out.averages.phases > 400,
        "{}",
        out.averages.phases
    );
}
