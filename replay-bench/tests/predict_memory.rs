//! `replay-bench predict` holds the records of the streams it replays only: with
//! `--ranks-per-node 1` its peak resident set (the child's `ru_maxrss`, from `wait4`) is the
//! same whether the trace's other three streams hold 9·10⁵ or 3.6·10⁶ detours together
//! (stream 0 the same in both), and so does `--drivers` (which reads the trace again for its
//! size classes), while `--ranks-per-node 4` (every stream replayed: the control) grows with
//! them.
//! Timed by nothing; run single-threaded (`--test-threads=1`) so that two children do not
//! share the machine's memory pressure.

use std::path::{Path, PathBuf};
use std::process::Command;

use jitter_trace::{Detour, Epilogue, Header, StreamSummary, TraceWriter};

#[path = "../../traces/tests/common/peak_rss.rs"]
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
    let path = dir.join(format!("t{others}.jtr"));
    let header = Header {
        host: "memory-test".into(),
        stream_cpus: vec![0, 1, 2, 3],
        ..Header::default()
    };
    let mut w = TraceWriter::create(&path, &header).unwrap();
    let count = |s: usize| if s == 0 { REPLAYED } else { others };
    let longest = REPLAYED.max(others);
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
