//! Each `jitter-trace` command that reads a trace stream by stream holds the same memory for a
//! trace of 10⁶ detours as for one four times as long: its peak resident set (the child's
//! `ru_maxrss`, from `wait4`) grows by less than [`MARGIN_KB`] between the two. A command that
//! holds the trace (`convert` of a CSV input, read whole: 24 bytes a detour and more, about
//! 100 MB more for the longer trace) is the control: it must grow by more than twice the
//! margin, or the measurement could not tell the two apart. The traces are written once for
//! all cases. Run single-threaded (`--test-threads=1`): the commands are timed by nothing,
//! but two at once would share the machine's memory pressure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jitter_trace::interop::{export_streams, Format};
use jitter_trace::stream_order::TraceFile;
use jitter_trace::{Detour, Header, TraceWriter};

mod common {
    pub mod peak_rss;
}

use common::peak_rss::peak_rss_kb;

/// Most the peak RSS of a streaming command may grow from 10⁶ to 4·10⁶ detours, KB. Measured
/// on the 2-vCPU VM (debug build, 2026-11-27): at most 2.6 MB (`slice` to `.jtr`, whose writer
/// gathers up to 2¹⁸ detours, 4 MiB, into a chunk: bounded, but fuller on a longer stream);
/// every other command within ±0.4 MB; the control (`scale`, then) grew by 170 MB; since
/// s5, the control (`convert` to LogGOPSim) 37 → 119 MB, `scale` and `merge` +0.4 MB.
const MARGIN_KB: i64 = 8 * 1024;

/// Streams of the generated traces.
const STREAMS: usize = 4;

/// Writes a trace of `n` detours over [`STREAMS`] streams whose chunks interleave as a
/// collection writes them (4096 detours per chunk): detour i of a stream starts at 5 µs · i
/// and runs 300 ns + (i · 7919 mod 4000) ns (a spread of run-times, longer ones periodic).
fn trace(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join(format!("t{n}.jtr"));
    let header = Header {
        host: "memory-test".into(),
        stream_cpus: (0..STREAMS as u32).collect(),
        ..Header::default()
    };
    let mut w = TraceWriter::create(&path, &header).unwrap();
    let per = n / STREAMS;
    let mut run = Vec::with_capacity(4096);
    for first in (0..per).step_by(4096) {
        for s in 0..STREAMS {
            run.clear();
            run.extend((first..(first + 4096).min(per)).map(|i| Detour {
                start_ns: 5_000 * i as u64 + s as u64,
                run_ns: 300 + (i as u64 * 7919) % 4000,
            }));
            w.append(s, &run).unwrap();
        }
    }
    let end = 5_000 * per as u64 + 5_000;
    let streams = (0..STREAMS)
        .map(|_| jitter_trace::StreamSummary {
            begin_ns: 0,
            end_ns: end,
            ..Default::default()
        })
        .collect();
    w.finish(jitter_trace::Epilogue {
        duration_ns: end,
        streams,
        ..Default::default()
    })
    .unwrap();
    path
}

/// Runs `jitter-trace args…` (`{}` stands for the trace, `{out}` for an output in `dir`) and
/// returns its peak resident set, KB.
fn peak_kb(dir: &Path, trace: &Path, args: &[&str]) -> i64 {
    let args: Vec<String> = (args.iter())
        .map(|a| {
            a.replace("{}", &trace.display().to_string())
                .replace("{out}", &dir.join("out").display().to_string())
        })
        .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jitter-trace"));
    cmd.args(&args);
    peak_rss_kb(cmd)
}

/// The short (10⁶ detours) and the long (4·10⁶) trace, written once for every case of this
/// file (the cases run one after the other in one process: `--test-threads=1`).
fn traces() -> &'static (tempfile::TempDir, PathBuf, PathBuf) {
    static TRACES: OnceLock<(tempfile::TempDir, PathBuf, PathBuf)> = OnceLock::new();
    TRACES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let short = trace(dir.path(), 1_000_000);
        let long = trace(dir.path(), 4_000_000);
        (dir, short, long)
    })
}

/// Peak RSS of the command on the short and the long trace, KB.
fn peaks(args: &[&str]) -> (i64, i64) {
    let (_, short, long) = traces();
    let out = tempfile::tempdir().unwrap();
    let a = peak_kb(out.path(), short, args);
    let b = peak_kb(out.path(), long, args);
    eprintln!("{args:?}: {a} KB at 10^6 detours, {b} KB at 4·10^6");
    (a, b)
}

fn assert_flat(args: &[&str]) {
    let (a, b) = peaks(args);
    assert!(
        b - a < MARGIN_KB,
        "{args:?}: peak RSS grew from {a} KB to {b} KB with the trace's length"
    );
}

/// The short and the long trace as CSV (written once, stream by stream, from the `.jtr`).
fn csv_traces() -> &'static (PathBuf, PathBuf) {
    static CSV: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    CSV.get_or_init(|| {
        let (dir, short, long) = traces();
        let as_csv = |jtr: &Path| {
            let csv = dir
                .path()
                .join(jtr.with_extension("csv").file_name().unwrap());
            let file = TraceFile::open(jtr).unwrap();
            export_streams(&file, &csv, Format::Csv).unwrap();
            csv
        };
        (as_csv(short), as_csv(long))
    })
}

#[test]
fn the_control_grows_with_the_length() {
    let (short, long) = csv_traces();
    let out = tempfile::tempdir().unwrap();
    let args = ["convert", "{}", "-o", "{out}.jtr"];
    let a = peak_kb(out.path(), short, &args);
    let b = peak_kb(out.path(), long, &args);
    eprintln!("{args:?} of CSV: {a} KB at 10^6 detours, {b} KB at 4·10^6");
    assert!(
        b - a > 2 * MARGIN_KB,
        "convert of a CSV: {a} KB, then {b} KB"
    );
}

#[test]
fn scale_and_merge_hold_one_chunk() {
    assert_flat(&["scale", "{}", "0.5", "-o", "{out}.jtr"]);
    assert_flat(&["merge", "{}", "--min-sleep", "10us", "-o", "{out}.csv"]);
}

#[test]
fn convert_holds_one_chunk() {
    assert_flat(&["convert", "{}", "-o", "{out}.csv"]);
    assert_flat(&["convert", "{}", "-o", "{out}.jtr"]);
    assert_flat(&["convert", "{}", "-o", "{out}{cpu}.lgs"]);
}

#[test]
fn slice_holds_one_chunk() {
    assert_flat(&["slice", "{}", "--start", "1s", "-o", "{out}.jsonl"]);
    let args = ["slice", "{}", "--cpus", "3,1", "--drop-below", "1us"];
    assert_flat(&[&args[..], &["--fraction", "0.1:0.9", "-o", "{out}.jtr"]].concat());
}

#[test]
fn perfetto_holds_its_slices_and_counters() {
    assert_flat(&["perfetto", "{}", "--max-slices", "1000", "-o", "{out}.json"]);
}

#[test]
fn plot_holds_its_points_and_grids() {
    assert_flat(&["plot", "{}", "--kind", "cdf", "-o", "{out}.svg"]);
    assert_flat(&["plot", "{}", "--kind", "timeseries", "-o", "{out}.svg"]);
    assert_flat(&["plot", "{}", "--kind", "density", "-o", "{out}.svg"]);
}

#[test]
fn compare_holds_its_grids_and_cells() {
    assert_flat(&["compare", "{}", "{}", "--plot", "{out}.svg"]);
}

#[test]
fn stats_holds_its_histograms() {
    assert_flat(&["stats", "{}"]);
}
