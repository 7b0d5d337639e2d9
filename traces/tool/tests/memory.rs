//! Each `jitter-trace` command that reads a trace stream by stream (or a sidecar detour by
//! detour) holds the same memory for a
//! trace of 5·10⁵ detours as for one four times as long: its peak resident set (the child's
//! `ru_maxrss`, from `wait4`) grows by less than [`MARGIN_KB`] between the two. So do the
//! imports of text inputs (a CSV whose rows come last first, sorted on disk; LogGOPSim files),
//! from 3·10⁵ to 1.2·10⁶ rows: above the import's buffer of 2¹⁸ rows.
//! The sizes still bite: a command that held the detours it read (16 bytes each at least) would
//! grow by 24 MB from the short trace to the long one, and an import that held its rows by
//! 14 MB, against the margin of 8 MB (halved from 10⁶ → 4·10⁶ and 5·10⁵ → 2·10⁶ for CI time).
//! A command that holds what it makes (`synth`: 24 bytes a detour and more) is the control: it
//! must grow by more than twice the margin, or the measurement could not tell the two apart.
//! The inputs are written once for all cases. The cases take one lock, so that they run one at
//! a time whatever the harness's threads: a child's peak RSS starts at the size of the process
//! it was forked from, and a case writing its inputs beside another's child made that child
//! look as large as this whole process (the control then grew by 0.4 MB, from 103 MB).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write;

use jitter_trace::interop::{export_streams, per_stream_path, Format};
use jitter_trace::stream_order::{StreamSource, TraceFile};
use jitter_trace::{Detour, Header, TraceWriter};

mod common {
    pub mod peak_rss;
}

use common::peak_rss::peak_rss_kb;

/// The lock every case holds (see the module's doc).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// Most the peak RSS of a streaming command may grow from the short input to the long one, KB.
/// Measured on the 2-vCPU VM (debug build, 2026-11-27, 10⁶ → 4·10⁶ detours): at most 2.6 MB (`slice` to `.jtr`, whose writer
/// gathers up to 2¹⁸ detours, 4 MiB, into a chunk: bounded, but fuller on a longer stream);
/// every other command within ±0.4 MB; the control (`scale`, then) grew by 170 MB; since
/// s5, the control (`convert` to LogGOPSim) 37 → 119 MB, `scale` and `merge` +0.4 MB; since
/// s6, text imports −1.1 to +0.6 MB (18–22 MB), the control (`synth`) 40 → 134 MB; with the
/// text inputs at 5·10⁵ → 2·10⁶ rows, `stats` of LogGOPSim files 16.5 → 21.1 MB (its buffers
/// not yet full at 5·10⁵; a whole read would grow by about 50 MB), the CSV import flat.
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

/// Runs `jitter-trace args…` (`{}` stands for the input files, `{out}` for an output in `dir`)
/// and returns its peak resident set, KB.
fn peak_kb(dir: &Path, inputs: &[PathBuf], args: &[&str]) -> i64 {
    let out = dir.join("out").display().to_string();
    let args: Vec<String> = (args.iter())
        .flat_map(|a| match *a {
            "{}" => inputs.iter().map(|p| p.display().to_string()).collect(),
            a => vec![a.replace("{out}", &out)],
        })
        .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jitter-trace"));
    cmd.args(&args);
    peak_rss_kb(cmd)
}

/// The short (5·10⁵ detours) and the long (2·10⁶) trace, written once for every case of this
/// file (the cases run one after the other in one process: `--test-threads=1`).
fn traces() -> &'static (tempfile::TempDir, PathBuf, PathBuf) {
    static TRACES: OnceLock<(tempfile::TempDir, PathBuf, PathBuf)> = OnceLock::new();
    TRACES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let short = trace(dir.path(), 500_000);
        let long = trace(dir.path(), 2_000_000);
        (dir, short, long)
    })
}

/// Peak RSS of the command on the short and the long input, KB.
fn peaks_on(short: &[PathBuf], long: &[PathBuf], args: &[&str]) -> (i64, i64) {
    let out = tempfile::tempdir().unwrap();
    let a = peak_kb(out.path(), short, args);
    let b = peak_kb(out.path(), long, args);
    eprintln!(
        "{args:?}: {a} KB on {:?}, {b} KB on {:?}",
        short[0], long[0]
    );
    (a, b)
}

/// [`peaks_on`] the two `.jtr` traces.
fn peaks(args: &[&str]) -> (i64, i64) {
    let (_, short, long) = traces();
    peaks_on(
        std::slice::from_ref(short),
        std::slice::from_ref(long),
        args,
    )
}

fn assert_flat(args: &[&str]) {
    let (a, b) = peaks(args);
    assert!(
        b - a < MARGIN_KB,
        "{args:?}: peak RSS grew from {a} KB to {b} KB with the trace's length"
    );
}

fn assert_flat_on(short: &[PathBuf], long: &[PathBuf], args: &[&str]) {
    let (a, b) = peaks_on(short, long, args);
    assert!(
        b - a < MARGIN_KB,
        "{args:?}: peak RSS grew from {a} KB to {b} KB with the input's length"
    );
}

/// The rows of [`trace`]'s trace of `n` detours as CSV, the last first: every stream's rows
/// out of order, for the import to sort (on disk, in bounded memory).
fn reversed_csv(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join(format!("r{n}.csv"));
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(w, "cpu,start_ns,run_ns").unwrap();
    for i in (0..n / STREAMS).rev() {
        for s in (0..STREAMS).rev() {
            let (start, run) = (5_000 * i as u64 + s as u64, 300 + (i as u64 * 7919) % 4000);
            writeln!(w, "{s},{start},{run}").unwrap();
        }
    }
    w.flush().unwrap();
    path
}

/// Rows of the short and the long text input.
const TEXT_ROWS: [usize; 2] = [300_000, 1_200_000];

/// The short and the long text input as reversed CSV ([`reversed_csv`]) and as LogGOPSim files
/// (one per stream, from a `.jtr` of as many detours), written once; and that long `.jtr`.
fn text_traces() -> &'static ([Vec<PathBuf>; 4], PathBuf) {
    static TEXT: OnceLock<([Vec<PathBuf>; 4], PathBuf)> = OnceLock::new();
    TEXT.get_or_init(|| {
        let dir = &traces().0;
        let [n_short, n_long] = TEXT_ROWS;
        let (short, long) = (trace(dir.path(), n_short), trace(dir.path(), n_long));
        let lgs = |jtr: &Path| {
            let stem = jtr.file_stem().unwrap().to_string_lossy().into_owned();
            let name = dir.path().join(format!("{stem}.cpu{{cpu}}.lgs"));
            let file = TraceFile::open(jtr).unwrap();
            export_streams(&file, &name, Format::LogGopSim).unwrap();
            (0..STREAMS as u32)
                .map(|c| per_stream_path(&name, c))
                .collect()
        };
        let text = [
            vec![reversed_csv(dir.path(), n_short)],
            vec![reversed_csv(dir.path(), n_long)],
            lgs(&short),
            lgs(&long),
        ];
        (text, long)
    })
}

#[test]
fn the_control_grows_with_the_length() {
    let _one = one_at_a_time();
    // `synth` holds the trace it makes: 5·10^5, then 2·10^6 detours over four streams.
    let out = tempfile::tempdir().unwrap();
    let synth = |seconds: &str| {
        let args = ["synth", "periodic:period=5us,dur=300ns", "--streams", "4"];
        let more = ["--duration", seconds, "-o", "{out}.jtr"];
        peak_kb(out.path(), &[], &[&args[..], &more[..]].concat())
    };
    let (a, b) = (synth("625ms"), synth("2500ms"));
    eprintln!("synth: {a} KB at 5·10^5 detours, {b} KB at 2·10^6");
    assert!(b - a > 2 * MARGIN_KB, "synth: {a} KB, then {b} KB");
}

#[test]
fn text_inputs_are_imported_in_bounded_memory() {
    let _one = one_at_a_time();
    let ([csv_short, csv_long, lgs_short, lgs_long], long) = text_traces();
    assert_flat_on(lgs_short, lgs_long, &["stats", "{}"]);
    // The long CSV sorted on disk (four runs a stream, merged) holds the trace's detours.
    let out = tempfile::tempdir().unwrap();
    let args = ["convert", "{}", "-o", "{out}.jtr"];
    let a = peak_kb(out.path(), csv_short, &args);
    let b = peak_kb(out.path(), csv_long, &args);
    eprintln!("{args:?} of the reversed CSV: {a} KB at 3·10^5 rows, {b} KB at 1.2·10^6");
    assert!(b - a < MARGIN_KB, "convert of a CSV: {a} KB, then {b} KB");
    // Compared stream by stream, so that this process stays small (a child's peak counts the
    // parent's pages it was forked with).
    let back = TraceFile::open(&out.path().join("out.jtr")).unwrap();
    let original = TraceFile::open(long).unwrap();
    assert_eq!(back.frame().streams.len(), STREAMS);
    for s in 0..STREAMS {
        assert_eq!(
            fingerprint(&back, s),
            fingerprint(&original, s),
            "stream {s}"
        );
    }
}

/// The detours of stream `s` hashed in order, and how many.
fn fingerprint(src: &dyn StreamSource, s: usize) -> (u64, usize) {
    let (mut h, mut n) = (DefaultHasher::new(), 0);
    src.detours(s, &mut |run| {
        run.iter().for_each(|d| (d.start_ns, d.run_ns).hash(&mut h));
        n += run.len();
        Ok(())
    })
    .unwrap();
    (h.finish(), n)
}

#[test]
fn scale_and_merge_hold_one_chunk() {
    let _one = one_at_a_time();
    assert_flat(&["scale", "{}", "0.5", "-o", "{out}.jtr"]);
    assert_flat(&["merge", "{}", "--min-sleep", "10us", "-o", "{out}.csv"]);
}

#[test]
fn convert_holds_one_chunk() {
    let _one = one_at_a_time();
    assert_flat(&["convert", "{}", "-o", "{out}.csv"]);
    assert_flat(&["convert", "{}", "-o", "{out}.jtr"]);
    assert_flat(&["convert", "{}", "-o", "{out}{cpu}.lgs"]);
}

#[test]
fn slice_holds_one_chunk() {
    let _one = one_at_a_time();
    assert_flat(&["slice", "{}", "--start", "500ms", "-o", "{out}.jsonl"]);
    let args = ["slice", "{}", "--cpus", "3,1", "--drop-below", "1us"];
    assert_flat(&[&args[..], &["--fraction", "0.1:0.9", "-o", "{out}.jtr"]].concat());
}

#[test]
fn perfetto_holds_its_slices_and_counters() {
    let _one = one_at_a_time();
    assert_flat(&["perfetto", "{}", "--max-slices", "1000", "-o", "{out}.json"]);
}

#[test]
fn plot_holds_its_points_and_grids() {
    let _one = one_at_a_time();
    assert_flat(&["plot", "{}", "--kind", "cdf", "-o", "{out}.svg"]);
    assert_flat(&["plot", "{}", "--kind", "timeseries", "-o", "{out}.svg"]);
    assert_flat(&["plot", "{}", "--kind", "density", "-o", "{out}.svg"]);
}

#[test]
fn compare_holds_its_grids_and_cells() {
    let _one = one_at_a_time();
    assert_flat(&["compare", "{}", "{}", "--plot", "{out}.svg"]);
}

#[test]
fn stats_holds_its_histograms() {
    let _one = one_at_a_time();
    assert_flat(&["stats", "{}"]);
}

/// Writes the sidecar `<trace>.attr.json` of a trace of [`trace`]'s making with `n` detours,
/// detour by detour (this process must not grow: its children's peak RSS starts at its own):
/// every detour attributed to one of four sources, half of it explained.
fn sidecar(trace: &Path, n: usize) {
    use std::io::Write;

    use jitter_trace::attribution::{sidecar_path, AttributedDetour, Part};
    let per = n / STREAMS;
    let end = 5_000 * per as u64 + 5_000;
    let file = std::fs::File::create(sidecar_path(trace)).unwrap();
    let mut w = std::io::BufWriter::new(file);
    write!(
        w,
        r#"{{"version":1,"collection_start_unix_ns":0,"trace_clock":"x86-tsc","events":[],"cpus":["#
    )
    .unwrap();
    for s in 0..STREAMS {
        let comma = if s > 0 { "," } else { "" };
        write!(w, r#"{comma}{{"cpu":{s},"begin_ns":0,"end_ns":{end},"events":0,"events_lost":0,"detours":["#).unwrap();
        for i in 0..per {
            let (start, run) = (5_000 * i as u64 + s as u64, 300 + (i as u64 * 7919) % 4000);
            let source = ["timer", "irq:virtio0", "task:kworker/0:1", "ipi:call"][i % 4];
            let ns = run / 2 + (i as u64 % 7);
            let d = AttributedDetour {
                start_ns: start,
                run_ns: run,
                source: source.into(),
                combination: source.into(),
                explained_ns: ns,
                parts: vec![Part {
                    source: source.into(),
                    start_ns: start,
                    ns,
                }],
            };
            if i > 0 {
                w.write_all(b",").unwrap();
            }
            serde_json::to_writer(&mut w, &d).unwrap();
        }
        w.write_all(b"]}").unwrap();
    }
    w.write_all(br#"],"notes":{}}"#).unwrap();
    w.flush().unwrap();
}

/// The short (5·10⁴ detours) and the long (2·10⁵) attributed trace, written once: a sidecar
/// holds about 150 bytes of JSON per detour, so these are 7.5 and 30 MB.
fn attributed() -> &'static (tempfile::TempDir, PathBuf, PathBuf) {
    static TRACES: OnceLock<(tempfile::TempDir, PathBuf, PathBuf)> = OnceLock::new();
    TRACES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (short, long) = (trace(dir.path(), 50_000), trace(dir.path(), 200_000));
        sidecar(&short, 50_000);
        sidecar(&long, 200_000);
        (dir, short, long)
    })
}

/// Peak RSS of the command on the short and the long attributed trace, KB.
fn attributed_peaks(args: &[&str]) -> (i64, i64) {
    let (_, short, long) = attributed();
    let out = tempfile::tempdir().unwrap();
    let a = peak_kb(out.path(), std::slice::from_ref(short), args);
    let b = peak_kb(out.path(), std::slice::from_ref(long), args);
    eprintln!("{args:?}: {a} KB at 5·10^4 attributed detours, {b} KB at 2·10^5");
    (a, b)
}

#[test]
fn the_sidecars_commands_hold_no_detour() {
    let _one = one_at_a_time();
    for args in [
        &["attribution", "{}"][..],
        &[
            "attribution",
            "{}",
            "--mode",
            "time",
            "--bucket",
            "1us..3us",
        ],
        &["diff", "{}", "{}"],
        &["advice", "{}"],
        &["perfetto", "{}", "--max-slices", "1000", "-o", "{out}.json"],
        &["filter", "{}", "--drop", "timer", "-o", "{out}.jtr"],
        &["filter", "{}", "--keep", "task,irq", "-o", "{out}.csv"],
        &[
            "attribution",
            "{}",
            "--bars-svg",
            "{out}b.svg",
            "--density-svg",
            "{out}d.svg",
        ],
    ] {
        let (a, b) = attributed_peaks(args);
        assert!(
            b - a < MARGIN_KB,
            "{args:?}: peak RSS grew from {a} KB to {b} KB with the sidecar's length"
        );
    }
    // No control of its own: `the_control_grows_with_the_length` is the margin's. `filter`
    // was this one's until it read the sidecar whole no more (58 → 186 MB before).
}
