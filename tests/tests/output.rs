//! Every binary's standard output behaves like a Unix filter's: a full disk is one `error:`
//! line and exit status 1, a closed pipe ends the process quietly (killed by SIGPIPE, no
//! message), and never a panic message or backtrace.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use jitterbench_tests::bin_dir;

const BINARIES: [&str; 5] = [
    "jitter-collect",
    "jitter-trace",
    "jitter-emulate",
    "jitter-inject",
    "replay-bench",
];

#[test]
fn a_full_disk_on_stdout_is_one_error_line() {
    for b in BINARIES {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = Command::new(bin_dir().join(b))
            .arg("--help")
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{b}: {:?} {err}", out.status);
        assert_eq!(err.lines().count(), 1, "{b}: {err}");
        assert!(
            err.starts_with("error: cannot write to standard output:"),
            "{b}: {err}"
        );
    }
}

#[test]
fn a_closed_pipe_on_stdout_ends_quietly() {
    let trace = jitterbench_tests::workspace_root().join("traces/samples/synthetic-rl1.jtr");
    let runs: [(&str, Vec<String>); 5] = [
        ("jitter-collect", vec!["--help".into()]),
        (
            "jitter-trace",
            vec!["stats".into(), trace.display().to_string()],
        ),
        ("jitter-emulate", vec!["--help".into()]),
        ("jitter-inject", vec!["--help".into()]),
        ("replay-bench", vec!["--help".into()]),
    ];
    for (b, args) in runs {
        // The read end is closed before the child writes: its first write meets EPIPE.
        let mut child = Command::new(bin_dir().join(b))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(err.is_empty(), "{b}: {err}");
        assert!(
            status.success() || status.signal() == Some(libc::SIGPIPE),
            "{b}: {status:?}"
        );
    }
}
