//! Real-time safety of `jitter-collect --sched fifo`: the probes stop within 1 s of SIGINT or
//! SIGTERM, and the watchdog (RLIMIT_RTTIME at the duration + 2 s) is armed while they run.
//! Timing-sensitive (a probe spins at SCHED_FIFO on one CPU): this crate's tests run one at a
//! time (`scripts/test.sh`). Needs root and a CPU left for the others; otherwise it says so.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jitter_collect::cpuset;

const BIN: &str = env!("CARGO_BIN_EXE_jitter-collect");

/// The RLIMIT_RTTIME of process `pid` (soft, hard), µs.
fn rt_timeout(pid: u32) -> Option<(u64, u64)> {
    jitter_collect::watchdog::limits_of(pid as i32).ok()
}

#[test]
fn fifo_probes_stop_within_a_second_of_a_signal_under_an_armed_watchdog() {
    let cpus = cpuset::select(None).unwrap();
    // SAFETY: geteuid has no preconditions.
    if cpus.len() < 2 || unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root and two CPUs (one is left to the kernel's threads)");
        return;
    }
    let cpu = cpus.ids()[cpus.len() - 1].to_string();
    let dir = tempfile::tempdir().unwrap();
    if let Some(l) =
        jitter_collect::rt_budget::limit().filter(jitter_collect::rt_budget::Limit::stops_spinning)
    {
        // A budget that would stop spinning probes for most of each period: the collector must
        // refuse them, in one line that names it.
        let o = Command::new(BIN)
            .args(["--cpus", &cpu, "--sched", "fifo", "-d", "1", "-q", "-o"])
            .arg(dir.path().join("refused.jtr"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "a {} budget was not refused", l.share);
        assert!(
            err.lines().count() == 1 && err.contains(&l.set_by.display().to_string()),
            "{err}"
        );
        eprintln!(
            "premise not met ({}): the collector refused, as it must",
            l.line()
        );
        return;
    }
    use nix::sys::signal::Signal::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        let out = dir.path().join(format!("{sig}.jtr"));
        let mut child = Command::new(BIN)
            .args(["--cpus", &cpu, "--sched", "fifo", "-d", "20", "-q", "-o"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Setup (profiling, clock calibration) takes well under 1.5 s; then the probe spins.
        std::thread::sleep(Duration::from_millis(1500));
        let limits = rt_timeout(child.id());
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("jitter-collect --sched fifo ignored {sig}");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = t0.elapsed();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        eprintln!("{sig}: stopped in {took:?}, RLIMIT_RTTIME {limits:?} µs");
        assert!(status.success(), "{status:?}: {err}");
        assert!(
            took < Duration::from_secs(1),
            "{sig}: stopped after {took:?}"
        );
        // 20 s + the 2 s margin; the hard limit 1 s above.
        assert_eq!(limits, Some((22_000_000, 23_000_000)), "watchdog not armed");
        let l = jitter_trace::read_trace(&out).unwrap();
        assert!(matches!(
            l.completeness,
            jitter_trace::Completeness::Complete
        ));
        assert_eq!(l.trace.notes["stopped_by"], "signal");
    }
}
