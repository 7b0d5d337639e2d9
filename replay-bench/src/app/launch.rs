//! One run of the user's command: started in its own process group with the environment of its
//! arm, timed from spawn to exit on the collector's clock, its output captured, and the whole
//! group ended (SIGTERM, then SIGKILL) when it outlives its time limit.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use jitter_collect::clock::{read_counter, Clock};
use serde::{Deserialize, Serialize};

/// Most bytes of a run's standard output kept for `--metric` (the rest is read and dropped).
const MAX_STDOUT: usize = 16 << 20;
/// Bytes of the end of a run's standard error kept for the error line of a failed run.
const STDERR_TAIL: usize = 4096;
/// How long a group gets between SIGTERM and SIGKILL (mpirun forwards SIGTERM to its ranks).
const TERM_GRACE: Duration = Duration::from_secs(3);
/// How long the output pipes may stay open after the run ended (a child that left the group).
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "ended", content = "code")]
pub enum RunStatus {
    /// Exited with this status (0: success).
    Exited(i32),
    /// Killed by this signal (not by the time limit).
    Signalled(i32),
    /// Outlived the time limit and was ended.
    TimedOut,
}

impl RunStatus {
    /// Whether the run succeeded (exit status 0).
    pub fn success(self) -> bool {
        self == RunStatus::Exited(0)
    }

    fn of(status: ExitStatus) -> RunStatus {
        match (status.code(), status.signal()) {
            (Some(c), _) => RunStatus::Exited(c),
            (None, Some(s)) => RunStatus::Signalled(s),
            (None, None) => RunStatus::Exited(-1),
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunStatus::Exited(c) => write!(f, "exit {c}"),
            RunStatus::Signalled(s) => write!(f, "signal {s}"),
            RunStatus::TimedOut => f.write_str("timed out"),
        }
    }
}

/// What to run: the command line, the variables to set and the prefixes of those to remove.
#[derive(Debug, Clone)]
pub(crate) struct Launch<'a> {
    /// Program and arguments.
    pub argv: &'a [String],
    /// Variables set for this run.
    pub set: Vec<(&'static str, OsString)>,
    /// Variables removed (exact names).
    pub remove: Vec<String>,
    /// Time limit.
    pub limit: Duration,
}

/// A finished run.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// How it ended.
    pub status: RunStatus,
    /// Wall time from spawn to exit, ns.
    pub wall_ns: u64,
    /// Standard output (its first `MAX_STDOUT` bytes).
    pub stdout: String,
    /// The end of standard error.
    pub stderr_tail: String,
}

/// Reads `r` to its end in a thread, keeping the first `keep` bytes (or the last, `tail`).
fn drain(mut r: impl Read + Send + 'static, keep: usize, tail: bool) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > keep {
                        if tail {
                            kept.drain(..kept.len() - keep);
                        } else {
                            kept.truncate(keep);
                        }
                    }
                }
            }
        }
        let _ = tx.send(kept);
    });
    rx
}

/// Sends `signal` to the process group `pgid`.
fn signal_group(pgid: u32, signal: i32) {
    // SAFETY: kill(2) on the process group of our own child (its pid, set by process_group(0)).
    unsafe { libc::kill(-(pgid as i32), signal) };
}

/// Runs `l` and waits for it, at most its time limit (then its group is ended).
pub(crate) fn run(clock: &Clock, l: &Launch<'_>) -> std::io::Result<Outcome> {
    let (program, args) = l
        .argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command to run"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for v in &l.remove {
        cmd.env_remove(v);
    }
    cmd.envs(l.set.iter().map(|(k, v)| (k, v)));
    let start = read_counter();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let out = drain(child.stdout.take().expect("piped"), MAX_STDOUT, false);
    let err = drain(child.stderr.take().expect("piped"), STDERR_TAIL, true);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send((status, read_counter()));
    });
    let (status, end) = match rx.recv_timeout(l.limit) {
        Ok((status, end)) => (RunStatus::of(status?), end),
        Err(_) => {
            signal_group(pid, libc::SIGTERM);
            let ended = rx.recv_timeout(TERM_GRACE);
            if ended.is_err() {
                signal_group(pid, libc::SIGKILL);
                let _ = rx.recv();
            }
            (RunStatus::TimedOut, read_counter())
        }
    };
    // The group's other members (a shell's children) may still hold the pipes open.
    let stdout = out.recv_timeout(PIPE_GRACE).unwrap_or_default();
    let stderr = err.recv_timeout(PIPE_GRACE).unwrap_or_default();
    Ok(Outcome {
        status,
        wall_ns: clock.ticks_to_ns(end.wrapping_sub(start)),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr_tail: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, limit: Duration) -> Outcome {
        let clock = Clock::for_tools().unwrap();
        let argv = ["sh".to_string(), "-c".into(), script.into()];
        let l = Launch {
            argv: &argv,
            set: vec![("APP_TEST_VALUE", "7".into())],
            remove: vec!["APP_TEST_GONE".into()],
            limit,
        };
        run(&clock, &l).unwrap()
    }

    #[test]
    fn a_run_reports_its_status_output_and_environment() {
        std::env::set_var("APP_TEST_GONE", "1");
        let o = sh(
            "echo v=$APP_TEST_VALUE g=${APP_TEST_GONE:-none}; echo oops >&2; exit 3",
            Duration::from_secs(20),
        );
        assert_eq!(o.status, RunStatus::Exited(3));
        assert_eq!(o.stdout, "v=7 g=none\n");
        assert_eq!(o.stderr_tail, "oops\n");
        let o = sh("kill -9 $$", Duration::from_secs(20));
        assert_eq!(o.status, RunStatus::Signalled(9));
    }

    #[test]
    fn the_wall_time_is_the_run_s_and_a_run_past_its_limit_is_ended_with_its_children() {
        // sleep 0.3: the wall time lies between 0.3 s and 0.3 s plus a generous start-up.
        let o = sh("sleep 0.3", Duration::from_secs(20));
        assert!(o.status.success());
        assert!((300_000_000..2_000_000_000).contains(&o.wall_ns), "{o:?}");
        // A shell whose child ignores nothing: both end at the limit, SIGTERM to the group.
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let t0 = std::time::Instant::now();
        let o = sh(&script, Duration::from_millis(500));
        assert_eq!(o.status, RunStatus::TimedOut);
        assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
        let child: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // Alive: its /proc entry is there and not a zombie (which no init may have reaped).
        let alive = std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        });
        assert!(
            !alive,
            "the program's child {child} outlived the time limit"
        );
        // A group that ignores SIGTERM is killed after the grace.
        let o = sh("trap '' TERM; sleep 30", Duration::from_millis(300));
        assert_eq!(o.status, RunStatus::TimedOut);
    }
}
