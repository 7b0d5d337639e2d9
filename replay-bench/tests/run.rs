//! `replay-bench run` under a real MPI launcher (timing-sensitive: ONE test, cases in sequence).
//!
//! Closed forms used below (P period and d duration of periodic noise, q quanta, all in the
//! same units; derivation in docs/VALIDATION.md, `## replay-bench run`): a rank whose replay
//! point is uniform on the timeline loses, per phase, `E[X] = (q·d + d²/2) / P` (a detour in
//! progress at t1 costs its rest, one starting inside the q of work costs all of d), with
//! `E[X²] = (q·d² + d³/3) / P`. With `--sync phase` every rank sees the same detours, so
//! SD(eq. 3) = 100·E[X]/q. With `--sync none`, 2 ranks whose start offsets are further apart
//! than q + d never share a detour in a phase: MaxQT's excess is the sum, SD = 2·100·E[X]/q.
//! Tolerances: 4 standard errors of the two averages (from the measured spread of MaxQT per
//! phase) plus the platform noise the probe measured on the ranks (the baseline removes its
//! mean; what is left is its drift between the two runs, bounded by its size).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use jitter_emulator::{SyncMode, SyncSchedule, TimerKind};
use jitter_report::report::{Report, RunDetails};
use jitter_trace::synth::{synthesize, Spec};

mod common;
use common::{mpirun, run, swamped, Ran, BIN};

/// Platform noise (probe, any rank) above which timing closed forms are not checked: the report
/// itself warns that such a platform overstates slowdown (10 % of the trace's 2 % ratio would
/// be 0.2 %; this cut is deliberately far looser so that an ordinary busy CI runner checks).
const NOISY: f64 = 0.10;

/// The largest platform noise ratio any rank measured; prints what is skipped above [`NOISY`].
fn quiet_enough(r: &Report, what: &str) -> bool {
    let nu = r
        .calibration
        .iter()
        .map(|c| c.platform_noise_ratio)
        .fold(0.0, f64::max);
    if nu > NOISY {
        eprintln!(
            "NOT CHECKED ({what}): platform noise {:.1} % > {:.0} % — the machine is busy",
            nu * 100.0,
            NOISY * 100.0
        );
        false
    } else {
        true
    }
}

/// Whether the vCPU speed held still from the work calibration to the end of the baseline: the
/// calibrated work then takes q (scaled) plus at most the platform noise. This VM's vCPUs share
/// host cores, and their speed was seen to drift by up to ±18 % between runs seconds apart,
/// more than the effects checked (2.2 %); a run whose own baseline shows such a drift cannot
/// judge a slowdown, and says so.
fn speed_stable(r: &Report, what: &str) -> bool {
    let row = &r.results[0];
    let q = r.config.quanta_ns as f64;
    let nu = r
        .calibration
        .iter()
        .map(|c| c.platform_noise_ratio)
        .fold(0.0, f64::max);
    let ratio = row.baseline_avg_max_qt_ns / q;
    let ok = ratio >= 0.99 && ratio <= 1.01 + 3.0 * nu;
    if !ok {
        eprintln!(
            "NOT CHECKED ({what}): baseline AvgMaxQT = {ratio:.3} × q with platform noise {:.1} % — \
             the vCPU speed drifted since the work calibration",
            nu * 100.0
        );
    }
    ok
}

/// Whether the vCPU speed also held during the replay: with this trace (P = 10 ms, d = 200 µs,
/// q = 1 ms) a phase meets no detour with probability 0.88 (one window) or 0.9^8 = 0.43 (eight
/// virtual ranks), so the 20th percentile of the run's MaxQT is an undisturbed phase and must
/// be q within 1–2 %, as the baseline's phases were (`speed_stable`). The slowdown compares the two, so a drift between them is not
/// a slowdown; a run that shows one cannot judge, and says so.
fn clean_phases_at_q(csv: &Path, what: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Phase {
        max_qt_ns: f64,
    }
    let mut qt: Vec<f64> = csv::Reader::from_path(csv)
        .unwrap()
        .deserialize()
        .map(|row: Result<Phase, _>| row.unwrap().max_qt_ns)
        .collect();
    assert!(!qt.is_empty(), "no phases in {}", csv.display());
    qt.sort_by(f64::total_cmp);
    let ratio = qt[qt.len() / 5] / 1e6;
    let ok = (0.99..=1.02).contains(&ratio);
    if !ok {
        eprintln!(
            "NOT CHECKED ({what}): the replay's undisturbed phases (p20) took {ratio:.3} × q — the vCPU \
             speed drifted between the baseline and the replay"
        );
    }
    ok
}

/// `run` that must succeed; None, after a NOT CHECKED line, when the run refused its result
/// because other work on the CPUs swamped the measurement (the product is right to refuse).
fn ok(np: u32, args: &[&str]) -> Option<Ran> {
    let r = run(np, args, Duration::from_secs(120));
    if let Some(line) = swamped(&r) {
        println!("{line}");
        return None;
    }
    assert_eq!(
        r.code,
        Some(0),
        "run {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    Some(r)
}

/// `run` of `trace` under `sync` with `seed` and `extra` flags, a short noise probe, the
/// report to `out` and the phases to `csv`; the report (None: see [`ok`]).
fn replay(
    np: u32,
    trace: &Path,
    sync: &str,
    seed: &str,
    extra: &[&str],
    out: &Path,
    csv: &Path,
) -> Option<Report> {
    let mut args = vec![
        "--phases-csv",
        csv.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--sync",
        sync,
        "--seed",
        seed,
        "--noise-probe",
        "300ms",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    ok(np, &args)?;
    Some(Report::load(out).unwrap())
}

fn write_trace(path: &Path, spec: &str, streams: u32, seconds: u64) {
    let spec: Spec = spec.parse().unwrap();
    let t = synthesize(&spec, streams, seconds * 1_000_000_000, 1).unwrap();
    jitter_trace::write_trace(path, &t).unwrap();
}

fn details(r: &Report) -> &RunDetails {
    r.config
        .run
        .as_ref()
        .expect("a run report carries its details")
}

/// 4 standard errors of SD (percent) from the spread of the two averages, plus the largest
/// per-rank platform noise (percent) — the measured noise floor of this comparison.
fn floor_pct(r: &Report, metric: &str) -> (f64, f64) {
    let row = &r.results[0];
    let n = row.phases as f64;
    let d = details(r);
    let b = d.baseline.unwrap_or_default();
    let nb = if d.baseline.is_some() {
        b.phases as f64
    } else {
        n
    };
    let (sd, sdb, base) = match metric {
        "qt" => (d.sd_max_qt_ns, b.sd_max_qt_ns, row.baseline_avg_max_qt_ns),
        _ => (
            d.sd_max_qtbt_ns,
            b.sd_max_qtbt_ns,
            row.baseline_avg_max_qtbt_ns,
        ),
    };
    let se = 100.0 * (sd * sd / n + sdb * sdb / nb).sqrt() / base;
    let noise = r
        .calibration
        .iter()
        .map(|c| c.platform_noise_ratio)
        .fold(0.0, f64::max)
        * 100.0;
    (4.0 * se, noise)
}

/// Expected SD (percent) of one rank under uniform replay points.
fn sd_one_rank(p: f64, d: f64, q: f64) -> f64 {
    100.0 * (q * d + d * d / 2.0) / p / q
}

/// A seed whose `none` start offsets for nodes 0 and 1 (drawn on a timeline of `timeline` ns)
/// are at least `gap` apart modulo the noise `period` (so the two ranks' compute windows never
/// see the same detour).
fn seed_with_gap(timeline: u64, period: u64, gap: u64) -> u64 {
    (1..10_000)
        .find(|&seed| {
            let s = SyncSchedule {
                mode: SyncMode::None,
                seed,
            };
            let a = s.start_offset(0, timeline) % period;
            let b = s.start_offset(1, timeline) % period;
            let diff = a.abs_diff(b);
            diff.min(period - diff) >= gap
        })
        .unwrap()
}

/// The no-jitter run's SD is compared with the noise floor twice at most: its baseline and the
/// run are timed seconds apart, and this VM's vCPU speed can move by a few percent between them
/// even when each looks undisturbed (a run 3 % faster than its baseline was seen once in six
/// CI runs). A defect in how the two are measured shows in both attempts; a speed drift rarely
/// twice in a row.
fn no_trace_sd_is_within_the_noise_and_phases_fill_the_period(dir: &Path) {
    if let Err(first) = no_trace_attempt(dir) {
        eprintln!("no trace: {first}; once more");
        if let Err(second) = no_trace_attempt(dir) {
            panic!("twice: {first}; then {second}");
        }
    }
}

/// One no-jitter run; `Err` when its SD exceeds the noise floor, panics on every other check.
fn no_trace_attempt(dir: &Path) -> Result<(), String> {
    let out = dir.join("notrace.json");
    let Some(r) = ok(
        // One rank: with two, both vCPUs of this VM are busy and their speed drifts between
        // the baseline and the run by more than the effects checked here (see below).
        1,
        &[
            "--period",
            "500ms",
            "--noise-probe",
            "300ms",
            "-o",
            out.to_str().unwrap(),
        ],
    ) else {
        return Ok(());
    };
    assert!(r.stdout.contains("AvgMaxQTBT"), "{}", r.stdout);
    let rep = Report::load(&out).unwrap();
    let row = &rep.results[0];
    assert_eq!((row.sync.as_str(), row.ranks), ("baseline", 1));
    assert_eq!(rep.calibration.len(), 1);
    // Phases fill the period: the run stops in the first phase past it, and the phases' own
    // spans (MaxQTBT) cover the elapsed time but for the collectives between phases.
    let elapsed = details(&rep).elapsed_ns as f64;
    let period = 500e6;
    assert!(elapsed >= period, "{elapsed}");
    let covered = row.phases as f64 * row.avg_max_qtbt_ns / elapsed;
    // phases × q ≈ period: exactly covered × q / AvgMaxQTBT; the calibrated work never runs
    // faster than q (noise only adds), and platform noise ν stretches phases by 1 / (1 − ν).
    let nu = rep
        .calibration
        .iter()
        .map(|c| c.platform_noise_ratio)
        .fold(0.0, f64::max);
    let pq = row.phases as f64 * 1e6 / period;
    eprintln!(
        "no trace: phases × q = {pq:.3} × period, SD eq.2 {:.3} %, eq.3 {:.3} %, ν {nu:.4}",
        row.sd_qtbt_pct, row.sd_qt_pct
    );
    // The run itself meets no jitter: its phases must take q as the baseline's did.
    let run_at_q = (0.99..=1.02 + 3.0 * nu).contains(&(row.avg_max_qt_ns / 1e6));
    if !run_at_q {
        eprintln!(
            "NOT CHECKED (no-trace closed forms): the run's AvgMaxQT = {:.3} × q — the vCPU speed \
             drifted between the baseline and the run",
            row.avg_max_qt_ns / 1e6
        );
    }
    if !run_at_q
        || !quiet_enough(&rep, "no-trace closed forms")
        || !speed_stable(&rep, "no-trace closed forms")
    {
        return Ok(());
    }
    assert!(
        elapsed < period + 50e6,
        "the last phase ended {elapsed} ns after the start"
    );
    // A rank descheduled between its barrier exit and t3 stretches its qtb into rank 0's
    // collectives, so this holds only on a quiet machine.
    assert!(
        (0.5..=1.02).contains(&covered),
        "phases cover {covered} of the period"
    );
    assert!(
        row.avg_max_qt_ns >= 0.95e6,
        "AvgMaxQT {} < q",
        row.avg_max_qt_ns
    );
    assert!(
        pq <= 1.05 && pq >= 0.5 * (1.0 - nu),
        "phases × q = {pq} × period (platform noise {nu})"
    );
    for (metric, sd) in [("qt", row.sd_qt_pct), ("qtbt", row.sd_qtbt_pct)] {
        let (stat, noise) = floor_pct(&rep, metric);
        if sd.abs() > stat + noise {
            return Err(format!(
                "SD {metric} {sd} % without jitter exceeds the noise floor {stat} + {noise} %"
            ));
        }
    }
    Ok(())
}

fn periodic_noise_matches_the_closed_forms(dir: &Path) {
    let (p, d, q) = (10e6, 200e3, 1e6);
    let trace = dir.join("periodic.jtr");
    write_trace(&trace, "periodic:period=10ms,dur=200us", 1, 60);
    let expected = sd_one_rank(p, d, q);
    let seed = seed_with_gap(60_000_000_000, 10_000_000, 3_000_000).to_string();
    // Closed forms are asserted where this 2-vCPU VM can resolve them: one rank (the other vCPU
    // absorbs the OS). With two ranks both vCPUs are busy, every OS activity lands on a rank,
    // and the vCPUs' speed drifts by up to ±10 % between the baseline and the replay (measured:
    // a no-jitter run against its own baseline gave −3 … +1.3 %), more than the 2.2 % effect:
    // the 2-rank values are measured and printed (docs/VALIDATION.md) but not asserted.
    for (np, sync, factor) in [
        (1, "phase", 1.0),
        (1, "none", 1.0),
        (2, "phase", 1.0),
        (2, "none", 2.0),
    ] {
        let out = dir.join(format!("{sync}-np{np}.json"));
        let csv = dir.join(format!("{sync}-np{np}.csv"));
        // S = 5: the emulated detours and the phases grow 5×, this machine's own noise does
        // not, so its share of the measured slowdown shrinks 5× (pitfall 1).
        let Some(rep) = replay(
            np,
            &trace,
            sync,
            &seed,
            &["--scale", "5", "--phases", "400"],
            &out,
            &csv,
        ) else {
            return;
        };
        let row = &rep.results[0];
        assert_eq!(row.ranks, np as u64);
        // 400 phases take about 0.45 s of the 60 s trace; only a machine so busy that a phase
        // lasts 150 ms replays the whole stream first (the fraction rule, f = 1).
        match details(&rep).stopped_by.as_str() {
            "phases" => assert_eq!(row.phases, 400),
            other => {
                assert_eq!(other, "fraction");
                assert!(
                    row.emulator.max_progress >= 1.0 && row.phases < 400,
                    "{row:?}"
                );
            }
        }
        // A resync landing in the last O of a detour leaves a rest ≤ O: dropped, and small.
        let e = row.emulator;
        assert!(
            e.injected > 0 && e.dropped_ns * 100 <= e.injected_ns,
            "{row:?}"
        );
        let (stat, noise) = floor_pct(&rep, "qt");
        let want = factor * expected;
        eprintln!(
            "np {np} --sync {sync}: SD eq.3 {:.3} % eq.2 {:.3} %, closed form {want:.3} % ± {stat:.3} + {noise:.3}",
            row.sd_qt_pct, row.sd_qtbt_pct
        );
        if np == 1
            && quiet_enough(&rep, "periodic closed form")
            && speed_stable(&rep, "periodic closed form")
            && clean_phases_at_q(&csv, "periodic closed form")
        {
            assert!(
                (row.sd_qt_pct - want).abs() <= stat + noise,
                "--sync {sync}: SD eq.3 {} %, closed form {want} % ± {stat} (stat) + {noise} (platform)",
                row.sd_qt_pct
            );
        }
    }
}

/// A resync that lands inside a detour costs the phase the detour's rest (the d²/2 term of
/// E[X]): with P = 20 ms, d = 4 ms and q = 1 ms it is 8 of E[X]'s 12 parts, so SD(eq. 3) is
/// 60 % with it and 20 % without. Checked twice: what the emulator injected per phase (the
/// plan and the resync points, given the phase's measured length) and the measured SD.
fn a_resync_into_a_detour_costs_the_phase_its_rest(dir: &Path) {
    let (p, d, q): (f64, f64, f64) = (20e6, 4e6, 1e6);
    let trace = dir.join("long.jtr");
    write_trace(&trace, "periodic:period=20ms,dur=4ms", 1, 60);
    let out = dir.join("long-phase.json");
    let csv = dir.join("long-phase.csv");
    let phases = 2000.0;
    let Some(rep) = replay(1, &trace, "phase", "1", &["--phases", "2000"], &out, &csv) else {
        return;
    };
    let row = &rep.results[0];
    assert_eq!(row.phases as f64, phases, "{row:?}");
    // Per phase X is the injected time: mean (w·d + d²/2)/P, second moment (w·d² + d³/3)/P,
    // for a window of w = q plus the platform's own noise (on a busy machine a phase lasts
    // longer and meets more detours): the baseline's phase, measured beside it.
    let w = row.baseline_avg_max_qt_ns;
    let mean = (w * d + d * d / 2.0) / p;
    let sd = ((w * d * d + d * d * d / 3.0) / p - mean * mean).sqrt();
    let injected = row.emulator.injected_ns as f64 / phases;
    assert!(
        (injected - mean).abs() <= 4.0 * sd / phases.sqrt(),
        "injected {injected} ns per phase, expected {mean} ± {}",
        4.0 * sd / phases.sqrt()
    );
    let want = sd_one_rank(p, d, q);
    let (stat, noise) = floor_pct(&rep, "qt");
    eprintln!(
        "resync into long detours: SD eq.3 {:.2} %, closed form {want:.2} % ± {stat:.2} + {noise:.2} \
         (without the rest: {:.2} %)",
        row.sd_qt_pct,
        100.0 * d / p
    );
    if quiet_enough(&rep, "rest of a detour at a resync")
        && speed_stable(&rep, "rest of a detour at a resync")
        && clean_phases_at_q(&csv, "rest of a detour at a resync")
    {
        assert!(
            (row.sd_qt_pct - want).abs() <= stat + noise,
            "SD eq.3 {} %, closed form {want} % ± {stat} (stat) + {noise} (platform)",
            row.sd_qt_pct
        );
    }
}

fn short_detours_are_dropped_at_s1_and_injected_scaled(dir: &Path) {
    // O as the tool will use it: this host's calibration, which a run measures in its own main
    // thread where the cache lacks one or holds a busy machine's (the itimer's part needs a
    // process's main thread; this test runs on a harness thread), read back from the cache.
    let warm = dir.join("warm.jtr");
    write_trace(&warm, "periodic:period=10ms,dur=200us", 1, 2);
    let warm_out = dir.join("warm.json");
    let warm_args = [
        "--trace",
        warm.to_str().unwrap(),
        "--sync",
        "none",
        "--phases",
        "20",
        "-o",
        warm_out.to_str().unwrap(),
    ];
    if ok(1, &warm_args).is_none() {
        return;
    }
    let cal = jitter_emulator::Calibration::load(&jitter_emulator::Calibration::cache_path())
        .unwrap()
        .expect("a run left no calibration in the cache");
    let o = cal
        .cost(TimerKind::Abstime, &Default::default())
        .overhead_ns;
    assert!(o > 0 && o < 100_000, "implausible overhead O = {o} ns");
    // Short detours of O/2 every 1 ms, plus long ones every 10 ms so S = 1 has something to
    // inject; S = 4 makes S·run = 2·O > O.
    let short = (o / 2).max(1);
    let trace = dir.join("short.jtr");
    write_trace(
        &trace,
        &format!("periodic:period=10ms,dur=200us+periodic:period=1ms,dur={short}ns,phase=500us"),
        1,
        60,
    );
    let mut rows = Vec::new();
    for scale in ["1", "4"] {
        let out = dir.join(format!("short-{scale}.json"));
        if ok(
            1,
            &[
                "--trace",
                trace.to_str().unwrap(),
                "--sync",
                "phase",
                "--scale",
                scale,
                "--phases",
                "300",
                "--noise-probe",
                "300ms",
                "-o",
                out.to_str().unwrap(),
            ],
        )
        .is_none()
        {
            return;
        };
        rows.push(Report::load(&out).unwrap());
    }
    let e1 = rows[0].results[0].emulator;
    let e4 = rows[1].results[0].emulator;
    // The drops a replay reports are those before injections it executed (a resync discards
    // the plan's look-ahead, drops included): with the work loop calibrated at another vCPU
    // speed, phases of 0.26 q executed so few of the long detours that none was reported
    // (seen on 2026-11-26).
    if speed_stable(&rows[0], "short detours dropped at S = 1") {
        assert!(e1.dropped > 0 && e1.injected > 0, "S = 1: {e1:?}");
        assert!(rows[0]
            .warnings
            .iter()
            .any(|w| w.contains("shorter than the overhead")));
    }
    // At S = 4 only a resync point inside a detour's last O/4 leaves a rest too short to
    // inject: 11 detours per 10 ms give 11·O/4 ≈ 30 µs per 10 ms, 0.3 % of 300 resyncs ≈ 1
    // expected (P(> 10) < 1e-7). Each such rest is at most O.
    assert!(
        e4.dropped <= 10
            && e4.dropped_ns <= e4.dropped * o
            && e4.dropped_ns * 100 <= e4.injected_ns,
        "S = 4: {e4:?}"
    );
    assert!(
        e4.injected_share > 0.99 && e4.injected > e1.injected,
        "S = 4: {e4:?}"
    );
    // Times are divided by S: AvgMaxQT ≈ q = 1 ms, where dividing twice would give 0.25 ms and
    // not dividing 4 ms. The bounds sit at the geometric means (0.5 and 2 ms), so a vCPU speed
    // drift of even ±40 % (seen on this VM) cannot make a correct run fail or a broken one pass;
    // the upper bound is stretched by the platform noise ν the run measured (phases take
    // q / (1 − ν)), which a busy machine adds to every time.
    let nu = rows[1]
        .calibration
        .iter()
        .map(|c| c.platform_noise_ratio)
        .fold(0.0, f64::max)
        .min(0.5);
    let upper = 2.0 / (1.0 - nu);
    let r4 = &rows[1].results[0];
    let avg = r4.avg_max_qt_ns / 1e6;
    eprintln!(
        "S = 4: AvgMaxQT {avg:.4} ms, SD eq.3 {:.3} %, platform noise {:.1} %",
        r4.sd_qt_pct,
        nu * 100.0
    );
    assert!(avg > 0.5, "AvgMaxQT {avg} ms at S = 4: divided by S twice?");
    assert!(avg < upper, "AvgMaxQT {avg} ms at S = 4: not divided by S?");
    let base = r4.baseline_avg_max_qt_ns / 1e6;
    assert!(
        base > 0.5 && base < upper,
        "baseline {base} ms at S = 4: {r4:?}"
    );
    assert_eq!(rows[1].config.scale, 4.0);
}

fn bad_input_fails_fast_on_every_rank(dir: &Path) {
    let garbage = dir.join("garbage.jtr");
    std::fs::write(&garbage, b"this is not a trace at all, not even close").unwrap();
    let one = dir.join("one.jtr");
    write_trace(&one, "periodic:period=10ms,dur=200us", 1, 1);
    let missing = dir.join("missing.jtr");
    let one_twice = format!("{},{}", one.display(), one.display());
    let cases: Vec<(u32, Vec<&str>, &str)> = vec![
        (
            2,
            vec!["--trace", missing.to_str().unwrap()],
            "cannot use trace",
        ),
        (
            2,
            vec!["--trace", garbage.to_str().unwrap()],
            "not a .jtr trace",
        ),
        // Rank 0 checks every node trace, also those only other ranks replay.
        (
            1,
            vec![
                "--node-traces",
                one.to_str().unwrap(),
                garbage.to_str().unwrap(),
            ],
            "not a .jtr trace",
        ),
        (
            2,
            vec!["--node-traces", &one_twice, "--ranks-per-node", "2"],
            "fewer than --ranks-per-node 2",
        ),
        (2, vec!["--quanta", "0ms"], "must be positive"),
        (2, vec!["--quanta=-1ms"], "not negative"),
        (2, vec!["--sync", "sometimes"], "unknown sync mode"),
        (3, vec![], "online CPUs"),
    ];
    // "Fails fast": no slower than the shortest successful run (MPI start-up, counter and work
    // calibration, one phase) plus a few seconds, measured now, on this machine's load.
    let Some(reference) = ok(
        2,
        &[
            "--phases",
            "1",
            "--warmup",
            "0",
            "--baseline",
            "quanta",
            "--noise-probe",
            "0s",
        ],
    )
    .map(|r| r.secs) else {
        return;
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (np, args, msg) in cases {
        if msg == "online CPUs" && cpus >= 3 {
            continue; // only meaningful where 3 ranks exceed the cores
        }
        let mut all = args.clone();
        all.extend(["--period", "100ms", "--noise-probe", "0s"]);
        let r = run(np, &all, Duration::from_secs(20));
        assert!(
            r.code.is_some_and(|c| c != 0),
            "{args:?} exited {:?}",
            r.code
        );
        assert!(
            r.secs < reference + 5.0,
            "{args:?} took {} s, a minimal run {reference} s",
            r.secs
        );
        let errors = r.stderr.lines().filter(|l| l.starts_with("error:")).count();
        assert_eq!(
            errors, 1,
            "{args:?}: one error line expected:\n{}",
            r.stderr
        );
        assert!(r.stderr.contains(msg), "{args:?}:\n{}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
}

/// `--virtual-ranks K` on one process: K compute windows per phase, each from its own point
/// of the trace (sync none). For periodic noise (P, d) with q + d ≤ P, a window that starts
/// outside a detour is delayed by d iff a detour starts within it (probability q/P), and one
/// that starts inside waits for its rest first (not counted in qt): over K independent windows
/// E[MaxQT] − q = d · (1 − (1 − q/P)^K) (docs/VALIDATION.md, `## Predictor`).
fn virtual_ranks_take_the_maximum_over_barrier_free_windows(dir: &Path) {
    let (p, d, q, k): (f64, f64, f64, u64) = (10e6, 200e3, 1e6, 8);
    let trace = dir.join("periodic.jtr");
    let out = dir.join("virtual.json");
    let csv = dir.join("virtual.csv");
    if ok(
        1,
        &[
            "--phases-csv",
            csv.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
            "--virtual-ranks",
            &k.to_string(),
            "--sync",
            "none",
            "--seed",
            "5",
            "--phases",
            "150",
            "--warmup",
            "5",
            "--noise-probe",
            "300ms",
            "-o",
            out.to_str().unwrap(),
        ],
    )
    .is_none()
    {
        return;
    };
    let rep = Report::load(&out).unwrap();
    assert_eq!(rep.kind, jitter_report::report::ReportKind::VirtualRanks);
    let row = &rep.results[0];
    assert_eq!(row.ranks, k);
    assert!(row.emulator.injected > 0, "{row:?}");
    // No barrier among virtual ranks: qtb is qt.
    assert_eq!(row.avg_max_qt_ns, row.avg_max_qtbt_ns);
    let want = 100.0 * d * (1.0 - (1.0 - q / p).powi(k as i32)) / q;
    let (stat, noise) = floor_pct(&rep, "qt");
    eprintln!(
        "virtual ranks K = {k}: SD eq.3 {:.3} %, closed form {want:.3} % ± {stat:.3} + {noise:.3}",
        row.sd_qt_pct
    );
    if quiet_enough(&rep, "virtual ranks")
        && speed_stable(&rep, "virtual ranks")
        && clean_phases_at_q(&csv, "virtual ranks")
    {
        // The platform's own noise P ≥ 0 adds to the trace's J in every window, and
        // max(J) ≤ max(J + P) ≤ max(J) + max(P): AvgMaxQT with jitter lies between q plus the
        // closed form and that plus the baseline's excess over q (its max over K windows of P).
        // A slowdown against the baseline is no closed form here, since the maxima do not add.
        let (got, base) = (row.avg_max_qt_ns / q, row.baseline_avg_max_qt_ns / q);
        let (lo, hi) = (
            1.0 + want / 100.0,
            1.0 + want / 100.0 + (base - 1.0).max(0.0),
        );
        let slack = stat / 100.0;
        assert!(
            got >= lo - slack && got <= hi + slack,
            "virtual ranks: AvgMaxQT {got:.4} × q outside [{lo:.4}, {hi:.4}] ± {slack:.4} (baseline {base:.4} × q)"
        );
    }
}

/// `--node-traces A,B` at 2 ranks, one per node: rank 0 replays A, rank 1 B. Periodic noise
/// of one period P = 10 ms, A with d = 2 ms (E[X]/q = 40 % at q = 1 ms, by the closed form at
/// the top), B with d = 100 us (1.05 %; above this VM's O); start offsets at least q + d_A
/// apart, so the two ranks' windows never meet a detour in the same phase and SD(eq. 3) is the
/// sum of the ranks': 80 % with A on both, 41 % with A and B, 2.1 % with B on both. Both vCPUs
/// are busy at 2 ranks (see `periodic_noise_matches_the_closed_forms`), so the values are
/// printed beside the closed form and the order is asserted where the platform is quiet enough
/// to resolve it (gaps of 39 points against this VM's drift of a few).
fn node_traces_give_each_node_group_its_own_trace(dir: &Path) {
    let (p, q) = (10e6, 1e6);
    let a = dir.join("node-a.jtr");
    let b = dir.join("node-b.jtr");
    write_trace(&a, "periodic:period=10ms,dur=2ms", 1, 20);
    write_trace(&b, "periodic:period=10ms,dur=100us", 1, 20);
    let seed = seed_with_gap(20_000_000_000, 10_000_000, 3_000_000).to_string();
    let set = format!("{},{}", a.display(), b.display());
    let (xa, xb) = (sd_one_rank(p, 2e6, q), sd_one_rank(p, 100e3, q));
    let (mut sd, mut quiet) = (Vec::new(), true);
    for (name, flags, want) in [
        ("A", vec!["--trace", a.to_str().unwrap()], 2.0 * xa),
        ("A,B", vec!["--node-traces", set.as_str()], xa + xb),
        ("B", vec!["--trace", b.to_str().unwrap()], 2.0 * xb),
    ] {
        let out = dir.join(format!("nodes-{name}.json"));
        let mut args = flags;
        args.extend([
            "--sync",
            "none",
            "--seed",
            &seed,
            "--phases",
            "400",
            "--noise-probe",
            "300ms",
            "-o",
            out.to_str().unwrap(),
        ]);
        if ok(2, &args).is_none() {
            return;
        }
        let rep = Report::load(&out).unwrap();
        let row = &rep.results[0];
        let (stat, noise) = floor_pct(&rep, "qt");
        eprintln!(
            "np 2 --sync none, {name}: SD eq.3 {:.3} %, closed form {want:.3} % ± {stat:.3} + {noise:.3}",
            row.sd_qt_pct
        );
        if name == "A,B" {
            let info = rep.config.trace.as_ref().unwrap();
            assert_eq!(info.label, "nodes(2)");
            let paths: Vec<&str> = info.nodes.iter().map(|t| t.path.as_str()).collect();
            assert_eq!(paths, [a.to_str().unwrap(), b.to_str().unwrap()]);
        }
        sd.push(row.sd_qt_pct);
        quiet &=
            quiet_enough(&rep, "node traces' order") && speed_stable(&rep, "node traces' order");
    }
    assert!(
        !quiet || (sd[0] > sd[1] && sd[1] > sd[2]),
        "SD with A on both nodes {} > A and B {} > B on both {}",
        sd[0],
        sd[1],
        sd[2]
    );
}

fn compare_sets_reports_side_by_side(dir: &Path) {
    let a = dir.join("phase-np1.json");
    let b = dir.join("notrace.json");
    // A run with a trace and one without share no row (trace, ranks, sync): nothing to
    // compare, said as an error (like with like).
    let out = Command::new(BIN)
        .args(["compare", a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to compare"), "{err}");
    // A report beside itself: every row, the differences zero.
    let out = Command::new(BIN)
        .args(["compare", a.to_str().unwrap(), a.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("phase"), "{text}");
    let bad = Command::new(BIN)
        .args(["compare", a.to_str().unwrap(), "/nonexistent.json"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
}

/// More ranks per node than streams (the placement rule, `jitter_emulator::placement`): both
/// ranks of a node replay stream 0 of a one-stream trace, rank 1 on a timeline of its own, and
/// the report says so (refused before).
fn a_one_stream_trace_on_two_ranks_per_node_replays_copies(dir: &Path) {
    let one = dir.join("copies.jtr");
    write_trace(&one, "periodic:period=10ms,dur=200us", 1, 30);
    let out = dir.join("copies.json");
    if ok(
        2,
        &[
            "--trace",
            one.to_str().unwrap(),
            "--ranks-per-node",
            "2",
            "--sync",
            "none",
            "--period",
            "2s",
            "--noise-probe",
            "0s",
            "-o",
            out.to_str().unwrap(),
        ],
    )
    .is_none()
    {
        return;
    };
    let r = Report::load(&out).unwrap();
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("2 ranks per node on 1 stream(s)")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn replay_bench_run_under_mpi() {
    mpirun();
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    bad_input_fails_fast_on_every_rank(dir.path());
    a_one_stream_trace_on_two_ranks_per_node_replays_copies(dir.path());
    no_trace_sd_is_within_the_noise_and_phases_fill_the_period(dir.path());
    periodic_noise_matches_the_closed_forms(dir.path());
    a_resync_into_a_detour_costs_the_phase_its_rest(dir.path());
    short_detours_are_dropped_at_s1_and_injected_scaled(dir.path());
    compare_sets_reports_side_by_side(dir.path());
    virtual_ranks_take_the_maximum_over_barrier_free_windows(dir.path());
    node_traces_give_each_node_group_its_own_trace(dir.path());
    eprintln!(
        "replay-bench run tests took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
