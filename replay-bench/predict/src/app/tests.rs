//! Tests of `predict --app` against closed forms and against the loop.

use indicatif::ProgressBar;
use jitter_emulator::{PlanOptions, PlanStats, SyncMode, SyncSchedule};
use jitter_profile::site::PEER_NONE;
use jitter_profile::{Call, MainLoop, Site, Slot};

use super::iteration::{iterate, Spec};
use super::replay_clocks::{AppClock, IdxClock, QuietClock};
use super::*;
use crate::collective::tests::{Ref, RefRank};
use crate::collective::{Algorithm, CommModel, LoopShape};
use crate::des::{BarrierModel, DesConfig, Engine};
use crate::platform::Platform;
use crate::spec::Model;

pub(crate) fn slot(site: Site, mean_ns: f64) -> Slot {
    Slot::constant(site, mean_ns).unwrap()
}

pub(crate) fn on(call: Call, n: u32) -> Site {
    Site {
        comm_size: n,
        bytes: 8,
        ..Site::of(call)
    }
}

/// A point-to-point `call` to (or from) offset `peer`, profiled at 4 ranks.
fn p2p(call: Call, peer: i32) -> Site {
    Site {
        peer,
        ..on(call, 4)
    }
}

/// A halo of two `Sendrecv`s (to +1 from −1, to −1 from +1) and two allreduces, profiled at 4.
pub(crate) fn halo_loop(c: [f64; 4]) -> MainLoop {
    let sr = |to: i32| Site {
        peer: to,
        root: -to,
        ..on(Call::Sendrecv, 4)
    };
    MainLoop {
        iterations: 10,
        ranks: vec![0, 1, 2, 3],
        compute_share: 1.0,
        kinds: Vec::new(),
        order: Vec::new(),
        slots: vec![
            slot(sr(1), c[0]),
            slot(sr(-1), c[1]),
            slot(on(Call::Allreduce, 4), c[2]),
            slot(on(Call::Allreduce, 4), c[3]),
        ],
    }
}

fn growth(n: u64) -> Growth {
    Growth {
        profiled_ranks: 4,
        ranks: n,
        cartesian: None,
    }
}

/// The collectives' reference clock (`collective::tests::Ref`), with no resyncs, limit or
/// totals.
impl AppClock for Ref {
    fn resync(&self, _: &mut RefRank, _: usize, _: u64, _: u64) -> PlanStats {
        PlanStats::default()
    }
    fn limit_at(&self, _: &RefRank) -> u64 {
        u64::MAX
    }
    fn totals(&self, _: &RefRank, _: usize, _: u64) -> (PlanStats, f64) {
        (PlanStats::default(), 0.0)
    }
}

/// One iteration of `l` at `n` ranks on `clock` (o, ℓ given; sync none, no resync).
fn once<C: AppClock>(
    clock: &C,
    states: &mut [C::Rank],
    l: &MainLoop,
    n: u64,
    o: u64,
    ll: u64,
) -> Vec<u64> {
    let sk = Skeleton::new(l, &growth(n), 1.0).unwrap();
    let lines = Timelines::new(1, &[1_000_000_000]).unwrap();
    let spec = Spec {
        skeleton: &sk,
        n,
        iterations: 1,
        planned: 1,
        costs: Costs { o, l: ll },
        lines: &lines,
        schedule: SyncSchedule {
            mode: SyncMode::None,
            seed: 1,
        },
        scale: 1.0,
    };
    iterate(clock, states, &spec).unwrap().1
}

#[test]
fn without_noise_an_iteration_is_its_compute_plus_the_closed_form_of_its_messages() {
    let (o, l) = (70u64, 500u64);
    let round = 2 * o + l;
    let c = [10_000.0, 3_000.0, 20_000.0, 700.0];
    let sum: u64 = c.iter().map(|&x| x as u64).sum();
    for n in [2u64, 8, 64, 1024] {
        // A Sendrecv is one round (send o, the partner's message ℓ later, receive o); an
        // allreduce at a power of two log2 N rounds.
        let r = u64::from(crate::ranks::ceil_log2(n));
        let want = sum + (2 + 2 * r) * round;
        let every = once(
            &QuietClock,
            &mut vec![1; n as usize],
            &halo_loop(c),
            n,
            o,
            l,
        );
        assert!(every.iter().all(|&t| t == want), "{n}: {every:?} vs {want}");
        // One state standing for all (symmetric): the same.
        let one = once(&QuietClock, &mut [n], &halo_loop(c), n, o, l);
        assert_eq!(one, vec![want], "{n}");
    }
    // Reduce and Bcast: the binomial tree's halves, log2 N rounds each on the critical path.
    let tree = MainLoop {
        slots: vec![
            slot(
                Site {
                    root: 0,
                    ..on(Call::Reduce, 4)
                },
                1_000.0,
            ),
            slot(
                Site {
                    root: 0,
                    ..on(Call::Bcast, 4)
                },
                0.0,
            ),
        ],
        ..halo_loop(c)
    };
    for n in [2u64, 16, 256] {
        let r = u64::from(crate::ranks::ceil_log2(n));
        let t = once(&QuietClock, &mut vec![1; n as usize], &tree, n, o, l);
        assert_eq!(*t.iter().max().unwrap(), 1_000 + 2 * r * round, "{n}");
    }
}

#[test]
fn one_detour_delays_its_halo_neighbour_by_its_length_and_reaches_everyone_through_an_allreduce() {
    let (o, l, d, c) = (50u64, 400u64, 30_000u64, 10_000u64);
    let n = 8u64;
    // Compute c, then a one-sided halo (Sendrecv to +1 from −1): rank 3 meets a detour of d
    // halfway through its compute.
    let halo = MainLoop {
        slots: vec![slot(
            Site {
                peer: 1,
                root: -1,
                ..on(Call::Sendrecv, 4)
            },
            c as f64,
        )],
        ..halo_loop([0.0; 4])
    };
    let ranks = || {
        let mut v = vec![RefRank::default(); n as usize];
        v[3].detours = vec![(c / 2, d)];
        v
    };
    let clean = c + 2 * o + l;
    let t = once(&Ref, &mut ranks(), &halo, n, o, l);
    // Rank 3 sends d late; rank 4 receives its message d late: exactly d. Rank 3's own receive
    // had its message waiting: d − ℓ. Nobody else is touched.
    assert_eq!(t[4], clean + d);
    assert_eq!(t[3], clean + d - l);
    for g in [0usize, 1, 2, 5, 6, 7] {
        assert_eq!(t[g], clean, "rank {g}");
    }
    // An allreduce after it (recursive doubling, 3 rounds): a lateness passes whole to the
    // partner and loses at most ℓ per round staying: the slowest rank ends exactly d late, and
    // every rank at least d − 3ℓ late (the noise-free end: one round more per round of it).
    let with_allreduce = MainLoop {
        slots: vec![halo.slots[0].clone(), slot(on(Call::Allreduce, 4), 0.0)],
        ..halo.clone()
    };
    let clean = clean + 3 * (2 * o + l);
    let t = once(&Ref, &mut ranks(), &with_allreduce, n, o, l);
    assert_eq!(*t.iter().max().unwrap(), clean + d);
    for (g, &x) in t.iter().enumerate() {
        assert!(x >= clean + d - 3 * l && x <= clean + d, "rank {g}: {x}");
    }
}

/// A trace of one stream: 5 µs detours about every 300 µs (seeded), 2 s.
fn noisy() -> TraceInput {
    let spec: jitter_trace::synth::Spec = "poisson:rate=3333/s,dur=5us".parse().unwrap();
    let trace = jitter_trace::synth::synthesize(&spec, 1, 2_000_000_000, 7).unwrap();
    TraceInput::new(&trace, "noisy.jtr", "noisy", PlanOptions::ideal(), 1).unwrap()
}

/// The loop's own prediction (`crate::predict`) of `t`: its simulation's report.
fn loop_report(t: &[TraceInput], spec: &PredictSpec) -> Report {
    let p = crate::predict(&crate::comm::Solo, t, spec, &ProgressBar::hidden(), &|_| {});
    p.unwrap().des.unwrap()
}

fn spec_of(ranks: Vec<u64>, shape: LoopShape, q: u64) -> PredictSpec {
    PredictSpec {
        ranks,
        modes: ["none", "once", "phase", "every:3"]
            .map(|m| m.parse().unwrap())
            .to_vec(),
        model: Model::Des,
        des: DesConfig {
            quanta_ns: q,
            phases: 60,
            ranks_per_node: 1,
            barrier: BarrierModel { stage_ns: 0.0 },
            comm: CommModel {
                algorithm: Algorithm::Auto,
                shape,
                o_ns: 300.0,
                l_ns: 1_000.0,
            },
            drift_sd_ns: 0.0,
            seed: 11,
            window: None,
        },
        platform: Platform::ideal(),
        engine: Engine::Indexed,
        draws: 2,
        precision: None,
    }
}

fn app_of(slots: Vec<Slot>) -> App {
    App {
        path: "loop.json".into(),
        main_loop: MainLoop {
            slots,
            ..halo_loop([0.0; 4])
        },
        profiled_ranks: 4,
        cartesian: None,
        runs: None,
    }
}

#[test]
fn a_loop_shaped_profile_predicts_what_the_loop_predicts() {
    let q = 200_000u64;
    let t = [noisy()];
    let ranks = vec![1, 5, 64];
    for (shape, call) in [
        (LoopShape::ComputeBarrier, Call::Barrier),
        (LoopShape::ComputeAllreduce, Call::Allreduce),
    ] {
        let spec = spec_of(ranks.clone(), shape, q);
        let app = app_of(vec![slot(on(call, 4), q as f64)]);
        let got = predict(&app, &t, &spec).unwrap().des.unwrap();
        // The application resyncs where the preload library does, at the end of each
        // MPI_Barrier: the barrier's end is the loop's phase start, so compute-barrier resyncs
        // as the loop does; a loop of allreduces resyncs nowhere, so its phase and every:3 are
        // the loop's once.
        let mut loop_spec = spec.clone();
        if call == Call::Allreduce {
            loop_spec.modes = ["none", "once", "once", "once"]
                .map(|m| m.parse().unwrap())
                .to_vec();
        }
        let want = loop_report(&t, &loop_spec);
        // Every row as the loop's: the same windows, collectives, resyncs and counts. The
        // application's qtbt is its iteration's period (the loop's `period_ns`), its qt the
        // loop's qt, byte for byte.
        assert_eq!(got.results.len(), want.results.len());
        for (a, b) in got.results.iter().zip(&want.results) {
            let at = format!("{shape:?}, {} ranks, sync {}", a.ranks, a.sync);
            assert_eq!(
                (
                    a.avg_max_qt_ns,
                    a.sd_qt_pct,
                    a.phases,
                    a.lost_rel,
                    a.emulator
                ),
                (
                    b.avg_max_qt_ns,
                    b.sd_qt_pct,
                    b.phases,
                    b.lost_rel,
                    b.emulator
                ),
                "{at}"
            );
            assert_eq!(
                a.draws.map(|d| d.sd_qt_range_pct),
                b.draws.map(|d| d.sd_qt_range_pct),
                "{at}"
            );
            let p = b.period_ns.unwrap();
            assert_eq!(a.period_ns, b.period_ns, "{at}");
            assert_eq!(
                (a.avg_max_qtbt_ns, a.baseline_avg_max_qtbt_ns),
                (p[0], p[1]),
                "{at}"
            );
        }
        assert!(got.results.iter().any(|r| r.sd_qtbt_pct > 0.5), "{shape:?}");
    }
    // Algorithm 1 (barrier, compute q, barrier) as the profile [barrier after q, barrier after
    // 0]: the same compute windows (qt byte for byte) without resyncs (none, once; the library
    // resyncs at both barriers, the loop once per phase); the iteration holds both barriers
    // where the loop's qtb holds the bottom one only.
    let spec = spec_of(ranks, LoopShape::BarrierComputeBarrier, q);
    let app = app_of(vec![
        slot(on(Call::Barrier, 4), q as f64),
        slot(on(Call::Barrier, 4), 0.0),
    ]);
    let got = predict(&app, &t, &spec).unwrap().des.unwrap();
    let want = loop_report(&t, &spec);
    let unsynced = |r: &&jitter_report::report::ResultRow| r.sync == "none" || r.sync == "once";
    let (got_rows, want_rows): (Vec<_>, Vec<_>) = (
        got.results.iter().filter(unsynced).collect(),
        want.results.iter().filter(unsynced).collect(),
    );
    assert_eq!(got_rows.len(), 2 * 3);
    for (a, b) in got_rows.into_iter().zip(want_rows) {
        assert_eq!(
            (a.avg_max_qt_ns, a.sd_qt_pct, a.phases),
            (b.avg_max_qt_ns, b.sd_qt_pct, b.phases),
            "{} ranks, sync {}",
            a.ranks,
            a.sync
        );
        let barrier = a.baseline_avg_max_qtbt_ns - b.baseline_avg_max_qtbt_ns;
        let rounds = crate::ranks::ceil_log2(a.ranks) as f64;
        assert_eq!(barrier, rounds * 1_600.0, "{} ranks", a.ranks);
    }
}

#[test]
fn profiles_without_a_loop_or_with_a_receive_before_its_send_are_refused() {
    let p = Profile {
        format: jitter_profile::profile::FORMAT.into(),
        version: jitter_profile::profile::VERSION,
        program: "./x".into(),
        job: "j".into(),
        ranks: 2,
        reported: Vec::new(),
        missing: vec![0, 1],
        cartesian: None,
        structure: None,
        main_loop: None,
    };
    let e = main_loop(&p, "x.json").unwrap_err().to_string();
    assert!(e.starts_with("profile x.json: no main loop found"), "{e}");
    // Recv from −1 before the Send to +1: every rank waits for its left neighbour for ever.
    let dead = MainLoop {
        slots: vec![
            slot(
                Site {
                    peer: -1,
                    ..on(Call::Recv, 4)
                },
                10.0,
            ),
            slot(
                Site {
                    peer: 1,
                    ..on(Call::Send, 4)
                },
                10.0,
            ),
        ],
        ..halo_loop([0.0; 4])
    };
    let e = Skeleton::new(&dead, &growth(8), 1.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("comes later in the loop or never"), "{e}");
    // Irecv, Isend, Waitall: fine, and symmetric; a receive from any source is left out.
    let ok = MainLoop {
        slots: vec![
            slot(
                Site {
                    peer: -1,
                    ..on(Call::Irecv, 4)
                },
                10.0,
            ),
            slot(
                Site {
                    peer: 1,
                    ..on(Call::Isend, 4)
                },
                10.0,
            ),
            slot(
                Site {
                    peer: PEER_NONE,
                    ..on(Call::Recv, 4)
                },
                0.0,
            ),
            slot(
                Site {
                    requests: 2,
                    ..Site::of(Call::Waitall)
                },
                0.0,
            ),
        ],
        ..halo_loop([0.0; 4])
    };
    let sk = Skeleton::new(&ok, &growth(8), 1.0).unwrap();
    assert!(sk.symmetric);
    assert_eq!(sk.warnings.len(), 1, "{:?}", sk.warnings);
}

/// The waits and tests beyond `Wait`/`Waitall` complete the oldest pending requests, as many as
/// they completed; a matched probe receives its message; nothing is left pending or unmatched.
#[test]
fn waitsome_waitany_testsome_and_matched_probes_complete_what_they_completed() {
    let completed = |call, requests| Site {
        requests,
        ..Site::of(call)
    };
    let l = MainLoop {
        slots: vec![
            slot(p2p(Call::Irecv, -1), 10.0),
            slot(p2p(Call::Irecv, 1), 10.0),
            slot(p2p(Call::Isend, 1), 10.0),
            slot(p2p(Call::Isend, -1), 10.0),
            slot(completed(Call::Waitsome, 2), 0.0),
            slot(completed(Call::Waitany, 1), 0.0),
            slot(completed(Call::Testsome, 1), 0.0),
            slot(p2p(Call::Send, 1), 10.0),
            slot(p2p(Call::Mprobe, -1), 0.0),
            slot(Site::of(Call::Imrecv), 0.0),
            slot(completed(Call::Testany, 1), 0.0),
        ],
        ..halo_loop([0.0; 4])
    };
    let sk = Skeleton::new(&l, &growth(8), 1.0).unwrap();
    assert!(sk.warnings.is_empty(), "{:?}", sk.warnings);
    assert!(sk.symmetric);
}

#[test]
fn a_waitsome_leaves_a_receive_whose_send_comes_later_pending() {
    // Meep's pattern: a receive posted, a Waitsome that returns what is ready (not that
    // receive: its send is later in the iteration), the send, then a wait that completes it.
    let l = MainLoop {
        slots: vec![
            slot(p2p(Call::Irecv, 1), 10.0),
            slot(
                Site {
                    requests: 1,
                    ..Site::of(Call::Waitsome)
                },
                0.0,
            ),
            slot(p2p(Call::Isend, -1), 10.0),
            slot(Site::of(Call::Waitall), 0.0),
        ],
        ..halo_loop([0.0; 4])
    };
    let sk = Skeleton::new(&l, &growth(8), 1.0).unwrap();
    assert!(sk.warnings.is_empty(), "{:?}", sk.warnings);
}

#[test]
fn cartesian_halo_offsets_grow_with_the_grid_and_ring_offsets_wrap() {
    use super::skeleton::{Link, Step};
    // A 2-D halo profiled on a 2 × 2 grid: ± the row stride 2 and ± 1.
    let l = MainLoop {
        slots: vec![
            slot(p2p(Call::Isend, 2), 100.0),
            slot(p2p(Call::Irecv, -2), 0.0),
            slot(p2p(Call::Isend, 1), 0.0),
            slot(p2p(Call::Irecv, -1), 0.0),
            slot(
                Site {
                    requests: 4,
                    ..Site::of(Call::Waitall)
                },
                0.0,
            ),
        ],
        ..halo_loop([0.0; 4])
    };
    let grid = Growth {
        cartesian: Some(jitter_profile::profile::Cartesian {
            dims: vec![2, 2],
            periods: vec![true, true],
        }),
        ..growth(64)
    };
    // At 64 ranks the grid is 8 × 8: the row stride 8; each receive pairs with its send.
    let sk = Skeleton::new(&l, &grid, 1.0).unwrap();
    assert_eq!(
        sk.steps,
        vec![
            Step::Compute(100),
            Step::Send {
                buf: 1,
                link: Link::Shift(8)
            },
            Step::Send {
                buf: 2,
                link: Link::Shift(1)
            },
            Step::Receive {
                buf: 1,
                link: Link::Shift(8)
            },
            Step::Receive {
                buf: 2,
                link: Link::Shift(1)
            },
        ]
    );
    // As a ring (no topology) the offsets stay 2 and 1; at 2 ranks ±2 is the rank itself.
    let ring = Skeleton::new(&l, &growth(64), 1.0).unwrap();
    assert_eq!(
        ring.steps[1],
        Step::Send {
            buf: 1,
            link: Link::Shift(2)
        }
    );
    let two = Skeleton::new(&l, &growth(2), 1.0).unwrap();
    assert_eq!(two.steps.len(), 3, "{:?}", two.steps);
}

#[test]
fn the_index_and_one_shared_state_give_what_the_walk_of_every_rank_gives() {
    // The halo loop (symmetric at a power of two: one state at sync once/phase/every; at 6
    // ranks the allreduce is not, and every rank is its own state) on the index, against the
    // walk of every rank's cursor: the same outcome in every mode.
    let t = noisy();
    let spec = spec_of(vec![1, 6, 64], LoopShape::ComputeBarrier, 0);
    let ix: Vec<PlanIndex> = t.plans.iter().map(|p| p.index().unwrap()).collect();
    let app = app_of(halo_loop([90_000.0, 1_000.0, 60_000.0, 30_000.0]).slots);
    for &mode in &spec.modes {
        for &n in &spec.ranks {
            let sk = Skeleton::new(&app.main_loop, &app.growth(n), 1.0).unwrap();
            let point = |ix| Point {
                runs: None,
                input: &t,
                ix,
                skeleton: &sk,
                n,
                mode,
            };
            let indexed = point(Some(&ix)).simulate(&spec, 5, None).unwrap();
            let walked = point(None).simulate(&spec, 5, None).unwrap();
            assert_eq!(indexed, walked, "{n} ranks, sync {mode}");
            assert!(indexed.emulator.injected > 0);
        }
    }
}

/// Noise time of `plan`'s records in [p, p + len) of its timeline (around its end), ns.
fn noise_in(plan: &jitter_emulator::Plan, p: u64, len: u64) -> u64 {
    let d = plan.period_ns();
    let within = |a: u64, b: u64| -> u64 {
        let (a, b) = (plan.begin_ns() + a, plan.begin_ns() + b);
        (plan.records().iter())
            .map(|r| r.end_ns().min(b).saturating_sub(r.start_ns.max(a)))
            .sum()
    };
    within(p, (p + len).min(d)) + within(0, (p + len).saturating_sub(d))
}

#[test]
fn each_measured_run_is_predicted_from_the_library_s_point_for_its_seed() {
    // 30 ms detours every 100 ms: a run's 20 iterations of 1 ms see all, some or none of one,
    // as its start point says.
    let synth: jitter_trace::synth::Spec = "periodic:period=100ms,dur=30ms".parse().unwrap();
    let trace = jitter_trace::synth::synthesize(&synth, 1, 2_000_000_000, 3).unwrap();
    let t = TraceInput::new(&trace, "p.jtr", "p", PlanOptions::ideal(), 1).unwrap();
    let runs = MeasuredRuns {
        path: "app.json".into(),
        runs: (0..24)
            .map(|i| MeasuredRun {
                pair: i,
                seed: 1000 + 7 * i,
            })
            .collect(),
        host: "node-a".into(),
        host_assumed: false,
        ranks: 1,
        ranks_per_node: None,
        sync: SyncMode::None,
        scale: 1.0,
        barriers_before: 0,
        timings: Vec::new(),
    };
    let app = App {
        runs: Some(runs.clone()),
        ..app_of(vec![slot(on(Call::Barrier, 1), 1_000_000.0)])
    };
    let spec = PredictSpec {
        modes: vec![SyncMode::None],
        des: DesConfig {
            phases: 20,
            ..spec_of(vec![1], LoopShape::ComputeBarrier, 1_000_000).des
        },
        ..spec_of(vec![1], LoopShape::ComputeBarrier, 1_000_000)
    };
    let p = predict(&app, std::slice::from_ref(&t), &spec).unwrap();
    let r = p.des.unwrap();
    assert_eq!(r.measured_runs.len(), 24);
    let plan = &t.plans[0];
    let (mut hit, mut miss) = (0, 0);
    for m in &r.measured_runs {
        let run = MeasuredRun {
            pair: m.pair,
            seed: m.seed,
        };
        let w = runs.window(run, 1, plan.period_ns());
        // The library's point: host node-a's timeline, the seed's start offset.
        let s = SyncSchedule {
            mode: SyncMode::None,
            seed: m.seed,
        };
        let lib = s.start_offset(runs.layout(1).slot(0).timeline, plan.period_ns());
        assert_eq!(w.points_ns, vec![lib]);
        // The run lasts 20 ms of compute stretched by its noise: the trace's noise in that
        // stretch from the library's point is the share the prediction injected.
        let elapsed = (20_000_000.0 * (1.0 + m.sd_qtbt_pct / 100.0)).round() as u64;
        let want = noise_in(plan, lib, elapsed) as f64 / elapsed as f64;
        assert!(
            (m.noise_share - want).abs() < 0.01,
            "pair {}: {} against {want}",
            m.pair,
            m.noise_share
        );
        if want > 0.5 {
            hit += 1;
        } else if want < 0.05 {
            miss += 1;
        }
    }
    // Both kinds of run occur among 24 seeds (30 % of the timeline is noise).
    assert!(hit > 0 && miss > 0, "{hit} {miss}");
    // Another rank count or mode than the runs' is refused.
    let other = PredictSpec {
        ranks: vec![2],
        ..spec.clone()
    };
    let e = predict(&app, std::slice::from_ref(&t), &other).unwrap_err();
    assert!(e.to_string().contains("--ranks 1 --sync none"), "{e}");
}

/// A nonblocking halo (Irecv ×2, Isend ×2, Waitall), a reduce and a bcast (their rounds reuse
/// buffer 0) and a `Sendrecv`, compute before each call; profiled at 4.
fn nonblocking_loop() -> MainLoop {
    let sr = Site {
        peer: 1,
        root: -1,
        ..on(Call::Sendrecv, 4)
    };
    MainLoop {
        slots: vec![
            slot(p2p(Call::Irecv, -1), 20_000.0),
            slot(p2p(Call::Irecv, 1), 100.0),
            slot(p2p(Call::Isend, 1), 100.0),
            slot(p2p(Call::Isend, -1), 200.0),
            slot(on(Call::Waitall, 4), 7_000.0),
            slot(on(Call::Reduce, 4), 3_000.0),
            slot(on(Call::Bcast, 4), 1_000.0),
            slot(sr, 5_000.0),
        ],
        ..halo_loop([0.0; 4])
    }
}

/// The skeleton's steps one pass each, every rank in turn, asking the clock at every step (what
/// the iterations did before the local stretches); no collectives in `sk`.
fn step_by_step<C: AppClock>(
    clock: &C,
    states: &mut [C::Rank],
    sk: &Skeleton,
    c: Costs,
) -> Vec<u64> {
    use super::skeleton::Step;
    let n = states.len();
    let mut t = vec![0u64; n];
    let mut sent = vec![vec![0u64; n]; sk.buffers];
    for step in &sk.steps {
        for (g, s) in states.iter_mut().enumerate() {
            let gg = g as u64;
            match *step {
                Step::Compute(w) => t[g] = clock.work(s, g, t[g], w),
                Step::Send { buf, link } if link.sends(gg, n as u64) => {
                    t[g] = clock.work(s, g, t[g], c.o);
                    sent[buf][g] = t[g];
                }
                Step::Receive { buf, link } => {
                    if let Some(src) = link.source(gg, n as u64) {
                        let ready = clock.idle_until(s, g, t[g].max(sent[buf][src as usize] + c.l));
                        t[g] = clock.work(s, g, ready, c.o);
                    }
                }
                Step::Collective(_) => panic!("no collectives here"),
                _ => {}
            }
        }
    }
    t
}

#[test]
fn local_stretches_end_where_a_rank_would_read_an_end_written_in_the_same_pass() {
    use super::skeleton::Step;
    use super::stretch::{stretches, Stretch};
    let sk = Skeleton::new(&nonblocking_loop(), &growth(8), 1.0).unwrap();
    let cut = stretches(&sk.steps, sk.buffers);
    // Every step in exactly one stretch, in order.
    let mut next = 0;
    for s in &cut {
        let r = match s {
            Stretch::Local(r) => r.clone(),
            Stretch::Single(i) => *i..*i + 1,
        };
        assert_eq!(r.start, next, "{cut:?}");
        next = r.end;
        // No receive of a buffer written earlier in its stretch, no send to one read there.
        let (mut w, mut rd) = (vec![false; sk.buffers], vec![false; sk.buffers]);
        for step in &sk.steps[r] {
            match *step {
                Step::Send { buf, .. } => {
                    assert!(!rd[buf], "{cut:?}");
                    w[buf] = true;
                }
                Step::Receive { buf, .. } => {
                    assert!(!w[buf], "{cut:?}");
                    rd[buf] = true;
                }
                _ => {}
            }
        }
    }
    assert_eq!(next, sk.steps.len());
    // The halo's computes and sends are one pass, and a stretch ends only where it must: the
    // step after it reads a buffer it wrote or writes one it read.
    assert_eq!(cut[0], Stretch::Local(0..7), "{cut:?}");
    for w in cut.windows(2) {
        if let [Stretch::Local(a), Stretch::Local(b)] = w {
            let forced = match sk.steps[b.start] {
                Step::Receive { buf, .. } => (sk.steps[a.clone()].iter())
                    .any(|s| matches!(*s, Step::Send { buf: x, .. } if x == buf)),
                Step::Send { buf, .. } => (sk.steps[a.clone()].iter())
                    .any(|s| matches!(*s, Step::Receive { buf: x, .. } if x == buf)),
                _ => false,
            };
            assert!(forced, "{a:?} then {b:?}: {cut:?}");
        }
    }
}

#[test]
fn local_stretches_give_what_step_by_step_passes_give_under_noise() {
    // Reference clock with seeded detours on every rank (it asks at every step), and the
    // index of a noisy trace (quiet times: the closed form), against step-by-step passes.
    let c = Costs { o: 300, l: 2_000 };
    let l = nonblocking_loop();
    for n in [1u64, 5, 8, 13] {
        let sk = Skeleton::new(&l, &growth(n), 1.0).unwrap();
        let ranks = || {
            let mut v = vec![RefRank::default(); n as usize];
            for (g, r) in v.iter_mut().enumerate() {
                let g = g as u64;
                r.detours = (0..40)
                    .map(|k| (k * 9_000 + g * 1_313 % 7_000, 2_500 + g * 100))
                    .collect();
            }
            v
        };
        let want = step_by_step(&Ref, &mut ranks(), &sk, c);
        assert_eq!(once(&Ref, &mut ranks(), &l, n, c.o, c.l), want, "{n} ranks");
        // 5 µs detours about every 20 µs: every rank meets some in its ≈ 40 µs.
        let spec: jitter_trace::synth::Spec = "poisson:rate=50000/s,dur=5us".parse().unwrap();
        let trace = jitter_trace::synth::synthesize(&spec, 1, 200_000_000, 3).unwrap();
        let t = TraceInput::new(&trace, "dense.jtr", "dense", PlanOptions::ideal(), 1).unwrap();
        let ix: Vec<PlanIndex> = t.plans.iter().map(|p| p.index().unwrap()).collect();
        let clock = IdxClock {
            ix: &ix,
            place: Timelines::new(1, &[t.plans[0].period_ns()])
                .unwrap()
                .placement,
            fraction: 1.0,
        };
        let fresh = || {
            (0..n)
                .map(|g| clock.rank(0, g * 7_777_777, 1))
                .collect::<Vec<_>>()
        };
        let want = step_by_step(&clock, &mut fresh(), &sk, c);
        assert_eq!(
            once(&clock, &mut fresh(), &l, n, c.o, c.l),
            want,
            "{n} ranks, index"
        );
        let quiet = step_by_step(&QuietClock, &mut vec![1; n as usize], &sk, c);
        assert_ne!(want, quiet, "{n} ranks: no detour met");
    }
}

/// `iterations` iterations of `l` at `n` ranks without noise (o, ℓ given; sync none): each
/// state's time at the end, and the skeleton.
fn quiet_run(l: &MainLoop, n: u64, iterations: u64, o: u64, ll: u64) -> (Vec<u64>, Skeleton) {
    let sk = Skeleton::new(l, &growth(n), 1.0).unwrap();
    let lines = Timelines::new(1, &[1_000_000_000]).unwrap();
    let spec = Spec {
        skeleton: &sk,
        n,
        iterations,
        planned: iterations,
        costs: Costs { o, l: ll },
        lines: &lines,
        schedule: SyncSchedule {
            mode: SyncMode::None,
            seed: 1,
        },
        scale: 1.0,
    };
    let mut units = vec![1u64; n as usize];
    let t = iterate(&QuietClock, &mut units, &spec).unwrap().1;
    (t, sk)
}

/// A ring whose receive is completed in the next iteration: each iteration first waits for the
/// receive and the send posted in the iteration before (two `Wait`s), then posts a receive from
/// −1 and, after 1 µs of compute, sends to +1. Each wait now pays for its message: the send
/// ended the iteration before, the receive waits ℓ for it and costs o; the old skeleton left
/// the receive pending for ever and it cost nothing.
#[test]
fn a_receive_completed_in_the_next_iteration_costs_its_message() {
    let l = MainLoop {
        slots: vec![
            slot(on(Call::Wait, 4), 0.0),
            slot(on(Call::Wait, 4), 0.0),
            slot(p2p(Call::Irecv, -1), 0.0),
            slot(p2p(Call::Isend, 1), 1_000.0),
        ],
        ..halo_loop([0.0; 4])
    };
    let (o, ll) = (70u64, 500u64);
    for n in [2u64, 4, 16] {
        let (t, sk) = quiet_run(&l, n, 6, o, ll);
        assert!(sk.doubled, "{n}");
        assert!(sk.warnings.is_empty(), "{n}: {:?}", sk.warnings);
        // The even copy's receive reads the odd copy's send buffer and the other way round.
        let bufs = |p: usize| -> (Vec<usize>, Vec<usize>) {
            let steps = sk.steps_of(p);
            let recv = (steps.iter())
                .filter_map(|s| match s {
                    super::skeleton::Step::Receive { buf, .. } => Some(*buf),
                    _ => None,
                })
                .collect();
            let send = (steps.iter())
                .filter_map(|s| match s {
                    super::skeleton::Step::Send { buf, .. } => Some(*buf),
                    _ => None,
                })
                .collect();
            (recv, send)
        };
        let ((ra, sa), (rb, sb)) = (bufs(0), bufs(1));
        assert_eq!(ra, sb, "{n}");
        assert_eq!(rb, sa, "{n}");
        assert_eq!(ra.len(), 1, "{n}");
        // Iteration 0 waits ℓ for a send at time 0; every later one for the send that ended
        // the iteration before: 6 × (ℓ + o + 1 µs + o).
        let want = 6 * (ll + 2 * o + 1_000);
        assert!(t.iter().all(|&x| x == want), "{n}: {t:?} vs {want}");
    }
}

/// Waitsome completes the oldest pending requests that are ready: the receive carried from the
/// iteration before (its send is there) and the send carried with it, not the receive posted
/// just before it, whose send comes later in the iteration (it stays pending for the next).
#[test]
fn waitsome_takes_the_carried_receive_before_a_receive_whose_send_comes_later() {
    let some = Site {
        requests: 2,
        ..on(Call::Waitsome, 4)
    };
    let l = MainLoop {
        slots: vec![
            slot(p2p(Call::Irecv, -1), 0.0),
            slot(some, 0.0),
            slot(p2p(Call::Isend, 1), 1_000.0),
        ],
        ..halo_loop([0.0; 4])
    };
    let (o, ll) = (70u64, 500u64);
    let (t, sk) = quiet_run(&l, 4, 4, o, ll);
    assert!(sk.doubled && sk.warnings.is_empty(), "{:?}", sk.warnings);
    // Iteration 0: ℓ for a send at 0, o; then 1 µs and the send's o; the same every iteration.
    let want = 4 * (ll + 2 * o + 1_000);
    assert!(t.iter().all(|&x| x == want), "{t:?} vs {want}");
}

/// A loop with two kinds of iteration replays each iteration as its recorded kind: 1 µs of
/// compute in the body, 5 µs in the other kind (every fourth iteration), at one rank (no
/// messages): 8 iterations take 6 × 1 + 2 × 5 µs; 16 take the order twice over.
#[test]
fn iterations_of_another_kind_are_replayed_in_the_recorded_order() {
    let a = on(Call::Allreduce, 4);
    let l = MainLoop {
        slots: vec![slot(a, 1_000.0)],
        kinds: vec![jitter_profile::Kind {
            slots: vec![slot(a, 1_000.0), slot(a, 4_000.0)],
            iterations: 2,
        }],
        order: vec![(0, 3), (1, 1), (0, 3), (1, 1)],
        ..halo_loop([0.0; 4])
    };
    assert_eq!(l.mean_compute_ns(), 2_000.0);
    let (t, sk) = quiet_run(&l, 1, 8, 70, 500);
    assert_eq!(
        (sk.parts.len(), sk.compute_ns, sk.doubled),
        (2, 2_000, false)
    );
    assert_eq!(t, vec![16_000]);
    assert_eq!(quiet_run(&l, 1, 16, 70, 500).0, vec![32_000]);
    let kinds: Vec<usize> = (0..8).map(|i| sk.part(i, 8)).collect();
    assert_eq!(kinds, vec![0, 0, 0, 1, 0, 0, 0, 1]);
    // A run of 4 takes every second recorded iteration.
    let kinds: Vec<usize> = (0..4).map(|i| sk.part(i, 4)).collect();
    assert_eq!(kinds, vec![0, 0, 0, 0]);
    assert_eq!(sk.weights(), vec![0.75, 0.25]);
}

/// A run cut short where a rank replayed f of its stream is set beside the baseline of the
/// iterations it recorded, of the same kinds: 50 iterations of 10 µs, then 50 of 1 ms, on a
/// 3 ms trace whose detours are 1 ns every 100 µs stop the run after about 52. Against the
/// baseline of all 100 (505 µs an iteration for about 48) it read −90 %; each detour delays
/// everybody by at most its span, so the slowdown lies in [0, N · 1 ns/100 µs] (doubled for
/// the detours met at the ends of the run).
#[test]
fn a_run_cut_at_f_is_compared_with_the_baseline_of_the_iterations_it_ran() {
    let a = on(Call::Allreduce, 4);
    let mut app = app_of(vec![slot(a, 10_000.0)]);
    app.main_loop.kinds = vec![jitter_profile::Kind {
        slots: vec![slot(a, 1_000_000.0)],
        iterations: 50,
    }];
    app.main_loop.order = vec![(0, 50), (1, 50)];
    app.main_loop.iterations = 100;
    let spec: jitter_trace::synth::Spec = "periodic:period=100us,dur=1ns".parse().unwrap();
    let trace = jitter_trace::synth::synthesize(&spec, 1, 3_000_000, 3).unwrap();
    let t = TraceInput::new(&trace, "cut.jtr", "cut", PlanOptions::ideal(), 1).unwrap();
    let n = 2;
    let mut spec = spec_of(vec![n], LoopShape::BarrierComputeBarrier, 1_000);
    spec.modes = vec![SyncMode::None];
    spec.des.phases = 100;
    let r = predict(&app, &[t], &spec).unwrap().des.unwrap();
    let row = &r.results[0];
    assert!(
        row.phases < 2 * 100,
        "the run was not cut: {} phases",
        row.phases
    );
    let bound = 2.0 * 100.0 * n as f64 * 1.0 / 100_000.0;
    for sd in [row.sd_qtbt_pct, row.sd_qt_pct] {
        assert!(
            (0.0..=bound).contains(&sd),
            "slowdown {sd} % outside [0, {bound}] %"
        );
    }
}
