//! Crash safety of `jitter-collect`'s output: SIGKILL at random moments, a file size limit
//! (disk full), and an existing output that must stay whole until a complete trace replaces it.
//! Each test spawns the collector and reads what it left; they run one at a time (a global lock).
//! `JB_CRASH_KILLS` sets the number of kills (default 8; `scripts/crash-test.sh` runs 50) and
//! `JB_CRASH_SEED` their seed (default: the time, printed).

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jitter_trace::{read_trace, Completeness, TraceError};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const BIN: &str = env!("CARGO_BIN_EXE_jitter-collect");

/// A 1 s collection whose ring cannot overflow, whatever this machine's detour rate: a detour
/// lasts longer than the threshold (1 µs here), so 1 s of probing holds fewer than 10⁶ of them,
/// and the ring holds 2²⁰ per CPU (16 MiB) even when nothing is drained before the end. (With
/// the defaults, a CPU seeing 1.2·10⁵ detours/s overflows a ring of 65 536 drained only at the
/// end, and the collector rightly refuses its trace.)
const LOSSLESS_1S: [&str; 6] = ["-d", "1", "--threshold-ns", "1000", "--ring", "1048576"];

fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` at most `limit` (then kills it and fails).
fn wait_limited(mut child: Child, limit: Duration) -> Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("jitter-collect did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Hidden temporary files `StreamingOutput` leaves beside an output when killed early.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".tmp"))
        })
        .collect()
}

/// What a killed collector left at `path` must read up to its last complete chunk: the file is
/// either cut at a chunk boundary (truncated) or ends inside its last chunk, which is the only
/// loss (one chunk of one stream, written by the last flush); nothing before it is damaged.
/// Returns the records recovered.
fn check_salvage(path: &Path) -> u64 {
    let l = read_trace(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    l.trace
        .validate()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match l.completeness {
        Completeness::Truncated { records } => records,
        Completeness::Damaged {
            records,
            error: TraceError::Chunk { offset, reason, .. },
        } if reason.contains("the file ends inside the chunk") => {
            let len = fs::metadata(path).unwrap().len();
            assert!(
                offset < len,
                "{}: damage at {offset} of {len}",
                path.display()
            );
            records
        }
        other => panic!("{}: damaged before its end: {other:?}", path.display()),
    }
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn sigkill_at_random_moments_keeps_every_complete_chunk() {
    let _g = serial();
    let kills: usize = std::env::var("JB_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let mut seed: u64 = std::env::var("JB_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
        | 1;
    eprintln!("JB_CRASH_SEED={seed} JB_CRASH_KILLS={kills}");
    let dir = tempfile::tempdir().unwrap();
    let (mut with_file, mut records_total) = (0, 0);
    let t0 = Instant::now();
    for i in 0..kills {
        // Moments from the start (setup: counter profiling, clock calibration) to 2 s in
        // (collecting, a drain every 20 ms: about 100 flushes).
        let at = Duration::from_micros(xorshift(&mut seed) % 2_000_000);
        let out = dir.path().join(format!("k{i}.jtr"));
        let mut child = spawn(&[
            "-d",
            "60s",
            "-q",
            "--drain-ms",
            "20",
            "-o",
            out.to_str().unwrap(),
        ]);
        std::thread::sleep(at);
        child.kill().unwrap();
        let _ = child.wait();
        eprintln!("kill {i} at {at:?}: {}", out.exists());
        if out.exists() {
            with_file += 1;
            records_total += check_salvage(&out);
        }
        // A kill before the header is on disk leaves no file at the path, only a temporary
        // that holds at most the header (no chunk: nothing collected is in it); a kill between
        // linking the path and unlinking the temporary leaves a second name of the trace.
        for t in temporaries(dir.path()) {
            // Killed between linking the path and unlinking the temporary: the same file.
            use std::os::unix::fs::MetadataExt;
            let same = fs::metadata(&out).is_ok_and(|m| m.ino() == fs::metadata(&t).unwrap().ino());
            if !same && fs::metadata(&t).unwrap().len() > 0 {
                let l = read_trace(&t).unwrap_or_else(|e| panic!("{}: {e}", t.display()));
                assert_eq!(l.trace.record_count(), 0, "{}", t.display());
            }
            fs::remove_file(t).unwrap();
        }
    }
    eprintln!(
        "{kills} kills in {:?}: {with_file} left a trace, {records_total} records recovered",
        t0.elapsed()
    );
    assert!(
        kills < 4 || with_file > 0,
        "no kill came after the header was written: the moments do not cover a collection"
    );
}

#[test]
fn an_existing_output_stays_whole_until_a_complete_trace_replaces_it() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("old.jtr");
    fs::write(&out, b"precious").unwrap();
    // Killed while collecting: the old file is untouched, the data is in the temporary file.
    let mut child = spawn(&["-d", "60s", "-q", "-o", out.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        fs::read(&out).unwrap() == b"precious",
        "truncated while collecting"
    );
    child.kill().unwrap();
    let _ = child.wait();
    assert!(
        fs::read(&out).unwrap() == b"precious",
        "changed by a killed run"
    );
    let tmp = temporaries(dir.path());
    assert_eq!(tmp.len(), 1, "{tmp:?}");
    assert!(check_salvage(&tmp[0]) > 0);
    fs::remove_file(&tmp[0]).unwrap();
    // Completed: replaced whole, said so, nothing left beside it.
    let o = wait_limited(
        spawn(&[&LOSSLESS_1S[..], &["-q", "-o", out.to_str().unwrap()]].concat()),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("replaced {}", out.display())),
        "{err}"
    );
    let l = read_trace(&out).unwrap();
    assert!(matches!(l.completeness, Completeness::Complete));
    assert!(temporaries(dir.path()).is_empty());
    // A device is written through and stays a device.
    let o = wait_limited(
        spawn(
            &[
                &LOSSLESS_1S[..],
                &["-q", "--drain-ms", "0", "-o", "/dev/null"],
            ]
            .concat(),
        ),
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn a_file_size_limit_stops_with_a_clear_error_and_touches_nothing_else() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let limit: u64 = 192 << 10;
    for existing in [false, true] {
        let out = dir.path().join(format!("full-{existing}.jtr"));
        if existing {
            fs::write(&out, b"precious").unwrap();
        }
        let mut cmd = Command::new(BIN);
        cmd.args(["-d", "30", "-q", "--drain-ms", "20", "-o"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent; the
        // closure runs in the forked child before exec.
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let o = wait_limited(cmd.spawn().unwrap(), Duration::from_secs(60));
        let err = String::from_utf8_lossy(&o.stderr);
        // The premise: 30 s of this machine's detours fill 192 KiB (about 2·10³ detours/s).
        let written = fs::metadata(&out).map_or(0, |m| m.len());
        if o.status.success() && !existing && written < limit {
            println!(
                "premise not met: 30 s of collection wrote {written} bytes, less than the limit \
                 of {limit}: this machine's CPUs see too few detours to fill it"
            );
            return;
        }
        assert!(!o.status.success(), "{err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with("warning:")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].starts_with("error: "), "{err}");
        assert!(lines[0].contains("File too large"), "{err}");
        assert!(
            lines[0].contains("keeps the chunks written before"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        let data = if existing {
            assert!(fs::read(&out).unwrap() == b"precious", "old file touched");
            assert!(lines[0].contains("was left as it was"), "{err}");
            let tmp = temporaries(dir.path());
            assert_eq!(tmp.len(), 1, "{tmp:?}");
            tmp[0].clone()
        } else {
            assert!(temporaries(dir.path()).is_empty());
            out.clone()
        };
        assert!(fs::metadata(&data).unwrap().len() <= limit);
        // The writer cuts a failed flush back to the last whole chunk: a clean truncation.
        match read_trace(&data).unwrap().completeness {
            Completeness::Truncated { records } => assert!(records > 0),
            other => panic!("expected a truncated trace, got {other:?}"),
        }
        if existing {
            fs::remove_file(&data).unwrap();
        }
    }
}
