//! The peak resident set of a child process, as the memory tests measure it (`traces`'s
//! `memory.rs`, `replay-bench`'s `predict_memory.rs`, which includes this file by path).

use std::process::{Command, Stdio};

/// Runs `cmd` (its output discarded), asserts that it exits 0 and returns its peak resident
/// set, KB (`wait4`'s `ru_maxrss`: the child's own, not this process's).
pub fn peak_rss_kb(mut cmd: Command) -> i64 {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for (`Child::wait` comes after);
    // `status` and `usage` are valid for writes for the call.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    // Reaped by `wait4` already: std's own wait finds no child (ECHILD), which says nothing.
    let _ = child.wait();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed ({status})"
    );
    usage.ru_maxrss
}
