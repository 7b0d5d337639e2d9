//! A trace read stream by stream from its file (`stream_order::TraceFile`) against the trace
//! read whole, on generated traces whose streams' chunks interleave as a collection writes
//! them: every export (`.jtr`, CSV, JSON lines, LogGOPSim) is byte for byte the export of the
//! loaded trace; every slice equals the in-memory transforms' (as a trace and as bytes); the
//! Perfetto export is the same document; `compare` is the same comparison; a damaged file is read to the same chunk, and one
//! that changes between passes is an error.

use std::path::{Path, PathBuf};

use jitter_trace::compare::{compare, compare_sources};
use jitter_trace::format::{Epilogue, TraceWriter};
use jitter_trace::interop::perfetto::{write_trace_events, Export};
use jitter_trace::interop::{export, export_streams, per_stream_path, Format};
use jitter_trace::load::read_trace;
use jitter_trace::rewritten::{Merged, Scaled};
use jitter_trace::sliced::{Part, SliceSpec, Sliced};
use jitter_trace::stream_order::{collect, StreamSource, TraceFile};
use jitter_trace::synth::{synthesize, Spec};
use jitter_trace::transform;
use jitter_trace::{Detour, Record, Trace};

/// Writes `trace` to `path` with its streams' chunks interleaved, `per_chunk` detours each.
fn write_interleaved(path: &Path, trace: &Trace, per_chunk: usize) {
    let mut w = TraceWriter::create(path, &trace.header).unwrap();
    let detours: Vec<Vec<Detour>> = (trace.streams.iter())
        .map(|s| s.records.iter().map(Record::detour).collect())
        .collect();
    let longest = detours.iter().map(Vec::len).max().unwrap_or(0);
    for at in (0..longest).step_by(per_chunk) {
        for (i, d) in detours.iter().enumerate() {
            if at < d.len() {
                w.append(i, &d[at..(at + per_chunk).min(d.len())]).unwrap();
            }
        }
    }
    w.finish(Epilogue::of(trace)).unwrap();
}

/// Synthetic traces of 1, 3 and 4 streams (one stream of more than one output chunk).
fn traces(dir: &Path) -> Vec<PathBuf> {
    let specs = [
        (
            "periodic:period=4ms,dur=120us+poisson:rate=200000/s,dur=exp:300ns",
            1,
            2,
        ),
        ("poisson:rate=5000/s,dur=exp:2us", 3, 2),
        (
            "periodic:period=1ms,dur=10us+poisson:rate=3000/s,dur=exp:5us",
            4,
            1,
        ),
    ];
    (specs.iter().enumerate())
        .map(|(i, (spec, streams, seconds))| {
            let spec: Spec = spec.parse().unwrap();
            let t = synthesize(&spec, *streams, seconds * 1_000_000_000, i as u64).unwrap();
            let path = dir.join(format!("t{i}.jtr"));
            write_interleaved(&path, &t, 1000 + i * 333);
            path
        })
        .collect()
}

#[test]
fn every_export_stream_by_stream_is_the_export_of_the_whole_trace() {
    let dir = tempfile::tempdir().unwrap();
    for path in traces(dir.path()) {
        let whole = read_trace(&path).unwrap().trace;
        let file = TraceFile::open(&path).unwrap();
        assert_eq!(collect(&file).unwrap(), whole, "{}", path.display());
        for (ext, format) in [
            ("jtr", Format::Jtr),
            ("csv", Format::Csv),
            ("jsonl", Format::JsonLines),
            ("lgs", Format::LogGopSim),
        ] {
            // Several streams in LogGOPSim: one file per CPU, named by the placeholder.
            let cpu = if format == Format::LogGopSim && whole.streams.len() > 1 {
                ".cpu{cpu}"
            } else {
                ""
            };
            let a = dir.path().join(format!("a{cpu}.{ext}"));
            let b = dir.path().join(format!("b{cpu}.{ext}"));
            export(&whole, &a, format).unwrap();
            export_streams(&file, &b, format).unwrap();
            for s in &whole.streams {
                let (a, b) = (per_stream_path(&a, s.cpu), per_stream_path(&b, s.cpu));
                let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
                assert!(a == b, "{} as {ext}: the bytes differ", path.display());
            }
        }
        if whole.streams.len() > 1 {
            // Without the placeholder, refused word for word as the export in memory, and
            // nothing written.
            let c = dir.path().join("c.lgs");
            let e = export_streams(&file, &c, Format::LogGopSim).unwrap_err();
            let f = export(&whole, &c, Format::LogGopSim).unwrap_err();
            assert_eq!(e.to_string(), f.to_string());
            assert!(!c.exists());
        }
    }
}

#[test]
fn a_slice_stream_by_stream_equals_the_in_memory_transforms() {
    let dir = tempfile::tempdir().unwrap();
    for path in traces(dir.path()) {
        let whole = read_trace(&path).unwrap().trace;
        let file = TraceFile::open(&path).unwrap();
        let cpus: Vec<u32> = whole.streams.iter().rev().map(|s| s.cpu).collect();
        let specs = [
            (vec![], Some(Part::Time(300_000_000, 1_200_000_000)), None),
            (vec![], Some(Part::Time(0, 700_000_001)), Some(2_000)),
            (cpus.clone(), Some(Part::Fraction(0.25, 0.6)), Some(1_000)),
            (cpus[..1].to_vec(), None, None),
            (vec![], None, Some(5_000)),
        ];
        for (cpus, part, drop_below) in specs {
            let spec = SliceSpec {
                cpus: cpus.clone(),
                part,
                drop_below,
            };
            let mut t = whole.clone();
            if !cpus.is_empty() {
                t = transform::select_streams(&t, &cpus).unwrap();
            }
            t = match part {
                Some(Part::Time(a, b)) => transform::slice_time(&t, a, b).unwrap(),
                Some(Part::Fraction(a, b)) => transform::slice_fraction(&t, a, b).unwrap(),
                None => t,
            };
            let mut dropped = 0;
            if let Some(th) = drop_below {
                (t, dropped) = transform::drop_below(&t, th).unwrap();
            }
            let sliced = Sliced::new(&file, &spec).unwrap();
            assert_eq!(collect(&sliced).unwrap(), t, "{spec:?}");
            assert_eq!(sliced.dropped(), dropped, "{spec:?}");
            let a = dir.path().join("a.jtr");
            let b = dir.path().join("b.jtr");
            export(&t, &a, Format::Jtr).unwrap();
            export_streams(&Sliced::new(&file, &spec).unwrap(), &b, Format::Jtr).unwrap();
            assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        }
        // The in-memory transforms' refusals, word for word.
        let far = SliceSpec {
            part: Some(Part::Time(1_000_000_000_000, 2_000_000_000_000)),
            ..SliceSpec::default()
        };
        let e = Sliced::new(&file, &far).unwrap_err().to_string();
        assert!(e.contains("at or after the trace's end"), "{e}");
        let absent = SliceSpec {
            cpus: vec![99],
            ..SliceSpec::default()
        };
        let e = Sliced::new(&file, &absent).unwrap_err().to_string();
        assert!(e.contains("the trace has no CPU 99"), "{e}");
    }
}

#[test]
fn the_perfetto_export_of_the_file_is_that_of_the_trace_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    for path in traces(dir.path()) {
        let whole = read_trace(&path).unwrap().trace;
        let file = TraceFile::open(&path).unwrap();
        for e in [
            Export::default(),
            Export {
                window: Some((100_000_000, 900_000_000)),
                max_slices: 50,
            },
        ] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let oa = write_trace_events(&whole, None, &e, &mut a).unwrap();
            let ob = write_trace_events(&file, None, &e, &mut b).unwrap();
            assert_eq!(oa, ob);
            assert!(a == b, "{}: the documents differ", path.display());
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            let slices = (v["traceEvents"].as_array().unwrap().iter())
                .filter(|x| x["ph"] == "X")
                .count();
            assert_eq!(slices as u64, ob.slices);
            assert_eq!(ob.slices + ob.counter_only, ob.detours);
        }
    }
}

#[test]
fn a_damaged_file_is_read_to_its_first_damage_and_a_changed_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = &traces(dir.path())[2];
    let bytes = std::fs::read(path).unwrap();
    let cut = dir.path().join("cut.jtr");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let whole = read_trace(&cut).unwrap().trace;
    let file = TraceFile::open(&cut).unwrap();
    assert!(file.scan().record_count() > 0);
    assert_eq!(collect(&file).unwrap(), whole);
    // Fewer chunks than the first pass counted: an error, not a shorter stream.
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let e = (0..file.frame().streams.len())
        .map(|i| file.detours(i, &mut |_| Ok(())))
        .find_map(Result::err)
        .expect("a changed file is refused");
    assert!(e.to_string().contains("changed while it was read"), "{e}");
}

/// `compare` read stream by stream is the comparison of the traces read whole, to the last
/// bit: the bandwidths (sums in the same order, exact quartiles), the grid, the binned
/// densities and KL divergences, and the KS statistic found by refinement.
#[test]
fn compare_stream_by_stream_equals_the_comparison_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let paths = traces(dir.path());
    let files: Vec<TraceFile> = paths.iter().map(|p| TraceFile::open(p).unwrap()).collect();
    let wholes: Vec<Trace> = paths.iter().map(|p| read_trace(p).unwrap().trace).collect();
    for i in 0..files.len() {
        for j in 0..files.len() {
            let c = compare_sources(&files[i], &files[j]).unwrap();
            assert_eq!(c, compare(&wholes[i], &wholes[j]), "{i} against {j}");
            if i == j {
                assert_eq!(c.ks_statistic, 0.0);
            }
        }
    }
    // Run-times of 0 (in the KS statistic, not the density) and a single detour.
    let d = |start_ns, run_ns| Detour { start_ns, run_ns };
    let few = [d(10, 0), d(100, 7), d(200, 0), d(300, 7), d(400, 3_000_000)];
    let mut t = Trace {
        streams: vec![
            jitter_trace::Stream::from_detours(0, 0, 10_000_000, &few).unwrap(),
            jitter_trace::Stream::from_detours(1, 0, 10_000_000, &few[1..2]).unwrap(),
        ],
        ..Trace::default()
    };
    t.sync_header();
    for other in &wholes {
        let c = compare_sources(&t, other).unwrap();
        assert_eq!(c, compare(&t, other));
    }
}

#[test]
fn scale_and_merge_stream_by_stream_equal_the_in_memory_transforms() {
    let dir = tempfile::tempdir().unwrap();
    let mut refused_merges = 0;
    for path in traces(dir.path()) {
        let whole = read_trace(&path).unwrap().trace;
        let file = TraceFile::open(&path).unwrap();
        let (a, b) = (dir.path().join("a.jtr"), dir.path().join("b.jtr"));
        for factor in [1.0, 2.0, 3.7, 0.5, 1e-3, 1e-7, 0.0] {
            let t = transform::scale(&whole, factor).map_err(|e| e.to_string());
            let s = Scaled::new(&file, factor).map_err(|e| e.to_string());
            let (t, s) = match (t, s) {
                (Ok(t), Ok(s)) => (t, s),
                // The refusals word for word (a bad factor; detours that would merge).
                (t, s) => {
                    let e = t.unwrap_err();
                    assert_eq!(e, s.unwrap_err(), "scale {factor}");
                    refused_merges += usize::from(e.contains("would merge"));
                    continue;
                }
            };
            assert_eq!(collect(&s).unwrap(), t, "scale {factor}");
            export(&t, &a, Format::Jtr).unwrap();
            export_streams(&s, &b, Format::Jtr).unwrap();
            assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        }
        for min_sleep in [0, 1_000, 10_000, 200_000, 10_000_000] {
            let (t, merged) = transform::merge_short_sleeps(&whole, min_sleep).unwrap();
            let m = Merged::new(&file, min_sleep).unwrap();
            assert_eq!(collect(&m).unwrap(), t, "merge {min_sleep}");
            assert_eq!(m.merged(), merged, "merge {min_sleep}");
            export(&t, &a, Format::Jtr).unwrap();
            export_streams(&Merged::new(&file, min_sleep).unwrap(), &b, Format::Jtr).unwrap();
            assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        }
    }
    assert!(
        refused_merges >= 3,
        "{refused_merges} merging scales refused"
    );
}
