//! Real-time safety of the emulator's SCHED_FIFO processes: `jitter-inject` stops within 1 s of
//! SIGINT or SIGTERM whether it is sleeping or spinning a detour, and the watchdog ends a thread
//! that spins at SCHED_FIFO without sleeping. Timing-sensitive (they spin on a CPU at real-time
//! priority): this crate's tests run one at a time (`scripts/test.sh`). Need root (CAP_SYS_NICE);
//! without it they say so and check nothing.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jitter_emulator::realtime::{Realtime, Watchdog};

fn can_use_fifo() -> bool {
    match Realtime::enter(1, None) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: cannot enter SCHED_FIFO ({e}); run as root");
            false
        }
    }
}

/// The last CPU this process may run on (the injector's CPU; the test waits elsewhere on a
/// machine with more than one).
/// Sends `sig` to `child` and waits for it to end (killed, and the test failed, after 10 s);
/// its exit status and how long it took.
fn signal_and_wait(
    child: &mut std::process::Child,
    sig: nix::sys::signal::Signal,
    what: &str,
) -> (std::process::ExitStatus, Duration) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, sig).unwrap();
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s, t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("{what} ignored {sig}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn victim_cpu() -> usize {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    (0..nix::sched::CpuSet::count())
        .rev()
        .find(|&c| set.is_set(c).unwrap_or(false))
        .unwrap()
}

/// Runs in a child (re-executed test binary): spins at SCHED_FIFO for ever under a 300 ms
/// watchdog. Does nothing in a normal test run.
#[test]
fn runaway_spin_helper() {
    if std::env::var_os("JB_RUNAWAY_SPIN").is_none() {
        return;
    }
    let _w = Watchdog::arm(Duration::from_millis(300)).unwrap();
    let _rt = Realtime::enter(10, Some(victim_cpu())).unwrap();
    loop {
        std::hint::spin_loop();
    }
}

#[test]
fn the_watchdog_ends_a_real_time_thread_that_never_sleeps() {
    if !can_use_fifo() {
        return;
    }
    // 300 ms of real-time CPU: where a budget grants real-time tasks `share` of each period,
    // ⌈0.3 s / (share · period)⌉ periods of wall time; plus the child's start (4 s, loaded VM).
    let (share, period_s) = jitter_collect::rt_budget::limit()
        .map_or((1.0, 1.0), |l| (l.share, l.period_us as f64 / 1e6));
    let spin_s = (0.3 / (share * period_s)).ceil() * period_s;
    if spin_s > 30.0 {
        eprintln!("premise not met: a real-time budget of {share} of each period needs {spin_s} s");
        return;
    }
    let limit = Duration::from_secs_f64(spin_s + 4.0);
    let t0 = Instant::now();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "runaway_spin_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("JB_RUNAWAY_SPIN", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("a SCHED_FIFO spin outlived its 300 ms watchdog by {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{status:?}: {err}");
    assert!(
        err.contains("real-time watchdog stopped this process"),
        "{err}"
    );
    eprintln!("watchdog ended the spin after {:?}", t0.elapsed());
}

#[test]
fn jitter_inject_stops_within_a_second_of_sigint_or_sigterm_sleeping_or_spinning() {
    if !can_use_fifo() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_jitter-inject");
    let cpu = victim_cpu().to_string();
    use nix::sys::signal::Signal::{SIGINT, SIGTERM};
    // 900 ms detours every second: a signal 0.5 s in finds it spinning; 1 ms detours: sleeping.
    for (dur, state) in [("900ms", "spinning"), ("1ms", "sleeping")] {
        let spec = format!("periodic:period=1s,dur={dur},phase=100ms")
            .parse()
            .unwrap();
        let t = jitter_trace::synth::synthesize(&spec, 1, 30_000_000_000, 1).unwrap();
        let p = dir.path().join(format!("{state}.jtr"));
        jitter_trace::write_trace(&p, &t).unwrap();
        for sig in [SIGINT, SIGTERM] {
            let mut child = Command::new(bin)
                .args(["--trace", p.to_str().unwrap(), "--cpu", &cpu])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Wait for "injecting …" (printed once at SCHED_FIFO, just before the replay).
            let mut err = BufReader::new(child.stderr.take().unwrap());
            let mut line = String::new();
            while !line.starts_with("injecting") {
                line.clear();
                assert!(err.read_line(&mut line).unwrap() > 0, "no start line");
            }
            std::thread::sleep(Duration::from_millis(500));
            let (status, took) =
                signal_and_wait(&mut child, sig, &format!("jitter-inject {state}"));
            let mut out = String::new();
            std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
            eprintln!("{sig} while {state}: stopped in {took:?}");
            assert!(status.success(), "{status:?}");
            assert!(out.contains("stopped by signal"), "{out}");
            assert!(
                took < Duration::from_secs(1),
                "{sig} while {state}: stopped after {took:?}"
            );
        }
    }
}

#[test]
fn jitter_emulate_fidelity_stops_within_a_second_of_a_signal_under_an_armed_watchdog() {
    if !can_use_fifo() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = "periodic:period=1ms,dur=100us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&spec, 1, 30_000_000_000, 1).unwrap();
    let trace = dir.path().join("p.jtr");
    jitter_trace::write_trace(&trace, &t).unwrap();
    let duration = Duration::from_secs(3);
    let want = jitter_emulator::fidelity::watchdog_limit(duration).as_micros() as u64;
    use nix::sys::signal::Signal::{SIGINT, SIGTERM};
    // The baseline probe (the first 3 s) and the replay under the probe (after the
    // "replaying" line): both spin at SCHED_FIFO 50 without sleeping.
    for (state, line_start) in [("probing", "measuring"), ("replaying", "replaying")] {
        for sig in [SIGINT, SIGTERM] {
            let mut child = Command::new(env!("CARGO_BIN_EXE_jitter-emulate"))
                .args([
                    "fidelity",
                    "--scale",
                    "1",
                    "--timer",
                    "abstime",
                    "--duration",
                    "3s",
                ])
                .arg("--trace")
                .arg(&trace)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Lines read on a thread, so that a silent child cannot hang the test (a first run
            // on a host calibrates first, about 20 s).
            let err = child.stderr.take().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for l in BufReader::new(err).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
            let t_start = Instant::now();
            loop {
                match rx.recv_timeout(Duration::from_secs(1)) {
                    Ok(l) if l.starts_with(line_start) => break,
                    Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(e) => panic!("jitter-emulate ended before {state}: {e}"),
                }
                if t_start.elapsed() > Duration::from_secs(120) {
                    let _ = child.kill();
                    panic!("no `{line_start}` line from jitter-emulate in 120 s");
                }
            }
            std::thread::sleep(Duration::from_millis(500));
            let limits = jitter_collect::watchdog::limits_of(child.id() as i32).ok();
            let (status, took) =
                signal_and_wait(&mut child, sig, &format!("jitter-emulate fidelity {state}"));
            eprintln!("{sig} while {state}: stopped in {took:?}, RLIMIT_RTTIME {limits:?} µs");
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(sig as i32), "{status:?}");
            assert!(
                took < Duration::from_secs(1),
                "{sig} while {state}: stopped after {took:?}"
            );
            // 3 s of probe + one planned injection at most (10 s) + 2 s; the hard limit 1 s above.
            assert_eq!(limits, Some((want, want + 1_000_000)), "watchdog not armed");
        }
    }
}
