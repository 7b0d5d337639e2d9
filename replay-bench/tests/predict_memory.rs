//! `replay-bench predict` holds the records of the streams it replays only: with
//! `--ranks-per-node 1` its peak resident set (the child's `ru_maxrss`, from `wait4`) is the
//! same whether the trace's other three streams hold 9·10⁵ or 3.6·10⁶ detours together
//! (stream 0 the same in both), and so does `--drivers` (which reads the trace again for its
//! size classes), while `--ranks-per-node 4` (every stream replayed: the control) grows with
//! them.
//! `replay-bench whatif` likewise: its variants, filtered stream by stream from the trace and
//! its sidecar (read detour by detour), are read back with their replayed streams only.
//! Timed by nothing; run single-threaded (`--test-threads=1`) so that two children do not
//! share the machine's memory pressure.

use std::path::{Path, PathBuf};
use std::process::Command;

use jitter_trace::{Detour, Epilogue, Header, StreamSummary, TraceWriter};

#[path = "../../traces/tool/tests/common/peak_rss.rs"]
mod peak_rss;

use peak_rss::peak_rss_kb;

/// Most the peak RSS may grow when only the streams not replayed grow, KB: the pass holds one
/// batch of chunks and a histogram per stream, whatever their length (measured on the 2-vCPU
/// VM, debug build, 2026-11-27: see the journal of s5-streams).
const MARGIN_KB: i64 = 8 * 1024;

/// Detours of stream 0 (the one replayed), in every trace.
const REPLAYED: u64 = 200_000;

/// A trace of four streams, its chunks interleaved as a collection writes them: stream 0 holds
/// [`REPLAYED`] detours every 5 µs, streams 1–3 `others` each, every 5 µs as well; each
/// window is the longest stream's.
fn trace(dir: &Path, others: u64) -> PathBuf {
    trace_with(dir, REPLAYED, others)
}

/// [`trace`] with `replayed` detours on stream 0.
fn trace_with(dir: &Path, replayed: u64, others: u64) -> PathBuf {
    let path = dir.join(format!("t{replayed}-{others}.jtr"));
    let header = Header {
        host: "memory-test".into(),
        stream_cpus: vec![0, 1, 2, 3],
        ..Header::default()
    };
    let mut w = TraceWriter::create(&path, &header).unwrap();
    let count = |s: usize| if s == 0 { replayed } else { others };
    let longest = replayed.max(others);
    let mut run = Vec::with_capacity(4096);
    for first in (0..longest).step_by(4096) {
        for s in 0..4 {
            run.clear();
            run.extend((first..(first + 4096).min(count(s))).map(|i| Detour {
                start_ns: 5_000 * i + s as u64,
                run_ns: 300 + (i * 7919) % 4000,
            }));
            if !run.is_empty() {
                w.append(s, &run).unwrap();
            }
        }
    }
    let end = 5_000 * longest + 5_000;
    let summary = StreamSummary {
        begin_ns: 0,
        end_ns: end,
        ..Default::default()
    };
    w.finish(Epilogue {
        duration_ns: end,
        streams: vec![summary; 4],
        ..Default::default()
    })
    .unwrap();
    path
}

/// Peak RSS of `replay-bench predict` on `trace` with `k` ranks per node and `more` flags, KB.
fn peak_kb(trace: &Path, k: &str, more: &[&str]) -> i64 {
    let args = [
        "predict",
        "--ranks",
        "4",
        "--ranks-per-node",
        k,
        "--phases",
        "20",
        "--sync",
        "none",
        "--trace",
    ];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_replay-bench"));
    cmd.args(args).arg(trace).args(more);
    peak_rss_kb(cmd)
}

#[test]
fn predict_holds_the_streams_it_replays_only() {
    let dir = tempfile::tempdir().unwrap();
    let short = trace(dir.path(), 300_000);
    let long = trace(dir.path(), 1_200_000);
    let (a, b) = (peak_kb(&short, "1", &[]), peak_kb(&long, "1", &[]));
    eprintln!("--ranks-per-node 1: {a} KB with 9·10^5 other detours, {b} KB with 3.6·10^6");
    assert!(b - a < MARGIN_KB, "peak RSS grew from {a} KB to {b} KB");
    // `--drivers` reads the trace again for its size classes: the replayed streams only.
    let drivers = ["--drivers"];
    let (a, b) = (
        peak_kb(&short, "1", &drivers),
        peak_kb(&long, "1", &drivers),
    );
    eprintln!("--drivers, --ranks-per-node 1: {a} KB, then {b} KB");
    assert!(
        b - a < MARGIN_KB,
        "--drivers: peak RSS grew from {a} KB to {b} KB"
    );
    let (c, d) = (peak_kb(&short, "4", &[]), peak_kb(&long, "4", &[]));
    eprintln!("--ranks-per-node 4 (control): {c} KB, then {d} KB");
    assert!(d - c > 2 * MARGIN_KB, "the control: {c} KB, then {d} KB");
}

/// [`trace_with`] 2·10⁴ detours on stream 0 and an attribution sidecar: each detour's first
/// 60 % is `timer`, the rest unattributed. Written as it goes (the JSON of `Attribution`), so
/// that this process stays small: a child inherits its parent's peak RSS across `exec`.
fn attributed(dir: &Path, others: u64) -> PathBuf {
    use std::io::Write;
    let replayed = 20_000;
    let path = trace_with(dir, replayed, others);
    let side = jitter_trace::attribution::sidecar_path(&path);
    let mut w = std::io::BufWriter::new(std::fs::File::create(side).unwrap());
    let end = 5_000 * replayed.max(others) + 5_000;
    write!(
        w,
        r#"{{"version":1,"collection_start_unix_ns":0,"trace_clock":"","#
    )
    .unwrap();
    write!(w, r#""events":[],"cpus":["#).unwrap();
    for s in 0..4u64 {
        let sep = if s == 0 { "" } else { "," };
        write!(
            w,
            r#"{sep}{{"cpu":{s},"begin_ns":0,"end_ns":{end},"events":0,"#
        )
        .unwrap();
        write!(w, r#""events_lost":0,"detours":["#).unwrap();
        // The detours of `trace_with`'s stream s.
        for i in 0..if s == 0 { replayed } else { others } {
            let (start, run) = (5_000 * i + s, 300 + (i * 7919) % 4000);
            let ns = run * 6 / 10;
            let sep = if i == 0 { "" } else { "," };
            write!(
                w,
                r#"{sep}{{"start_ns":{start},"run_ns":{run},"source":"timer","#
            )
            .unwrap();
            write!(w, r#""combination":"timer","explained_ns":{ns},"parts":["#).unwrap();
            write!(w, r#"{{"source":"timer","start_ns":{start},"ns":{ns}}}]}}"#).unwrap();
        }
        write!(w, "]}}").unwrap();
    }
    write!(w, r#"],"notes":{{}}}}"#).unwrap();
    w.flush().unwrap();
    path
}

/// Peak RSS of `replay-bench whatif` on `trace` with `k` ranks per node, KB.
fn whatif_kb(trace: &Path, k: &str) -> i64 {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_replay-bench"));
    cmd.args([
        "whatif",
        "--ranks",
        "4",
        "--ranks-per-node",
        k,
        "--phases",
        "20",
    ])
    .args([
        "--sync",
        "none",
        "--seeds",
        "1",
        "--min-share",
        "0.3",
        "--trace",
    ])
    .arg(trace);
    peak_rss_kb(cmd)
}

/// `whatif` with `--ranks-per-node 1` holds as much with 1.2·10⁵ detours on the streams it does
/// not replay as with 3·10⁴ (the sidecar ≈ 3× as long); replaying every stream (the control)
/// grows with them. (Before, the trace and its attribution were read whole: it grew.)
#[test]
fn whatif_holds_the_streams_it_replays_only() {
    let dir = tempfile::tempdir().unwrap();
    let short = attributed(dir.path(), 10_000);
    let long = attributed(dir.path(), 40_000);
    let (a, b) = (whatif_kb(&short, "1"), whatif_kb(&long, "1"));
    eprintln!("whatif --ranks-per-node 1: {a} KB with 3·10^4 other detours, {b} KB with 1.2·10^5");
    assert!(
        b - a < MARGIN_KB,
        "whatif: peak RSS grew from {a} KB to {b} KB"
    );
    let (c, d) = (whatif_kb(&short, "4"), whatif_kb(&long, "4"));
    eprintln!("whatif --ranks-per-node 4 (control): {c} KB, then {d} KB");
    assert!(d - c > 2 * MARGIN_KB, "the control: {c} KB, then {d} KB");
}
