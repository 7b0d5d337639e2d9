//! One pass over a trace file in constant memory (`scan::scan_trace`) against the trace read
//! whole: the statistics, injectable shares, the k-th longest detour, a node's row and the
//! integrity policy agree exactly (histograms, counts and sums add up; the k-th longest is
//! found bit by bit, not estimated), on generated traces whose streams' chunks interleave as a
//! collection writes them; `read_trace_streams` keeps exactly the streams asked for;
//! `read_replayed` keeps them and knows the whole trace (digest, statistics, warnings).

use std::path::{Path, PathBuf};

use jitter_trace::digest::content_digest;
use jitter_trace::format::{Epilogue, TraceWriter};
use jitter_trace::load::{read_replayed, read_trace, read_trace_streams};
use jitter_trace::nodes::{NodeSink, NodeSummary};
use jitter_trace::scan::{scan_trace, ChunkSink};
use jitter_trace::stats::{
    injectability, kth_longest, scale_for_kth, scale_for_share, share_rank, InjectableTally, Stats,
    StatsSink, TraceStats,
};
use jitter_trace::synth::{synthesize, Spec};
use jitter_trace::{Detour, Record, Salvage, Stream, Trace};

/// Writes `trace` to `path` with its streams' chunks interleaved: `per_chunk` detours of each
/// stream in turn, as the collector's writer drains its rings.
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

/// A synthetic trace of `spec`, written interleaved into `dir`.
fn trace_file(dir: &Path, spec: &str, streams: u32, seconds: u64, seed: u64) -> PathBuf {
    let spec: Spec = spec.parse().unwrap();
    let t = synthesize(&spec, streams, seconds * 1_000_000_000, seed).unwrap();
    let path = dir.join(format!("t{seed}.jtr"));
    write_interleaved(&path, &t, 1000 + seed as usize * 77);
    path
}

const SPECS: [&str; 3] = [
    "periodic:period=4ms,dur=120us+poisson:rate=20000/s,dur=exp:300ns",
    "poisson:rate=5000/s,dur=exp:2us",
    "periodic:period=1ms,dur=10us",
];

#[test]
fn one_pass_statistics_equal_those_of_the_trace_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    for (i, spec) in SPECS.iter().enumerate() {
        let path = trace_file(dir.path(), spec, 1 + i as u32 * 2, 2, i as u64);
        let whole = read_trace(&path).unwrap().trace;
        let scales = [0.5, 1.0, 3.0, 10.0];
        let tallies = scales
            .iter()
            .map(|&s| InjectableTally::new(3000.0, s).unwrap())
            .collect();
        let mut sink = StatsSink::new(tallies);
        let scan = scan_trace(&path, &mut sink).unwrap();
        assert_eq!(scan.record_count(), whole.record_count() as u64, "{spec}");
        assert_eq!(sink.stats(&scan), TraceStats::of_trace(&whole), "{spec}");
        let expected: Vec<_> = (scales.iter())
            .map(|&s| injectability(&whole.streams, 3000.0, s).unwrap())
            .collect();
        assert_eq!(sink.injectability(), expected, "{spec}");
        // The frame is the trace without its records.
        let mut frame = whole.clone();
        frame.streams.iter_mut().for_each(|s| s.records.clear());
        assert_eq!(scan.frame, frame, "{spec}");
    }
}

/// All run-times of the file at `path`, as `kth_longest`'s passes see them.
struct Runs(Vec<u64>);

impl ChunkSink for Runs {
    fn take(&mut self, _stream: usize, detours: Vec<Detour>) {
        self.0.extend(detours.iter().map(|d| d.run_ns));
    }
}

#[test]
fn the_kth_longest_detour_is_the_exact_order_statistic() {
    let dir = tempfile::tempdir().unwrap();
    // Short and long run-times (one pass and up to four), ties, a single detour.
    let specs = [
        SPECS[0],
        SPECS[2],
        "poisson:rate=50/s,dur=exp:3s",
        "poisson:rate=1/s,dur=1us",
    ];
    for (i, spec) in specs.iter().enumerate() {
        let path = trace_file(dir.path(), spec, 2, 3, 10 + i as u64);
        let mut all = Runs(Vec::new());
        scan_trace(&path, &mut all).unwrap();
        let mut sorted = all.0.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let n = sorted.len() as u64;
        let max = sorted.first().copied().unwrap_or(0);
        let mut passes = 0;
        for k in [1, 2, n / 3, n / 2, n.saturating_sub(1), n] {
            if k == 0 {
                continue;
            }
            let got = kth_longest(k, max, |s| {
                passes += 1;
                scan_trace(&path, s).map(|_| ())
            })
            .unwrap();
            assert_eq!(got, Some(sorted[k as usize - 1]), "{spec}: k = {k} of {n}");
        }
        assert!(passes > 0);
        assert_eq!(
            kth_longest(n + 1, max, |s| scan_trace(&path, s).map(|_| ())).unwrap(),
            None
        );
        // The smallest scale covering a share, from the passes, is the in-memory one.
        let whole = read_trace(&path).unwrap().trace;
        for share in [0.1, 0.5, 0.9, 1.0] {
            let k = share_rank(share, n).unwrap();
            let kth = kth_longest(k, max, |s| scan_trace(&path, s).map(|_| ())).unwrap();
            let streamed = scale_for_kth(share, 20_000.0, kth, |scale| {
                injectability(&whole.streams, 20_000.0, scale)
            })
            .unwrap();
            let expected = scale_for_share(&whole.streams, 20_000.0, share).unwrap();
            assert_eq!(streamed, expected, "{spec}: share {share}");
        }
    }
}

#[test]
fn a_node_row_from_one_pass_is_the_row_of_the_trace_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    for (i, spec) in SPECS.iter().enumerate() {
        let path = trace_file(dir.path(), spec, 3, 2, 20 + i as u64);
        let whole = read_trace(&path).unwrap().trace;
        for top in [0, 1, 5, 50] {
            let mut sink = NodeSink::new(top);
            let scan = scan_trace(&path, &mut sink).unwrap();
            let streamed = sink.summary(&scan, "n.jtr");
            let expected = NodeSummary::of_trace(&whole, "n.jtr", top);
            assert_eq!(
                serde_json::to_value(&streamed).unwrap(),
                serde_json::to_value(&expected).unwrap(),
                "{spec}: top {top}"
            );
            assert_eq!(streamed.top_ns.len(), top.min(whole.record_count()));
            // The repetition test's tail (not serialised) is the same too.
            assert_eq!(streamed.tail_ns, expected.tail_ns, "{spec}: top {top}");
        }
    }
}

#[test]
fn a_damaged_or_cut_file_is_refused_in_one_pass_and_salvage_keeps_its_share() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_file(dir.path(), SPECS[0], 2, 2, 30);
    let bytes = std::fs::read(&path).unwrap();
    let mut damaged = bytes.clone();
    let at = bytes.len() / 2;
    damaged[at] ^= 0x55;
    let cases = [("damaged", damaged), ("cut", bytes[..at].to_vec())];
    for (what, content) in cases {
        let bad = dir.path().join(format!("{what}.jtr"));
        std::fs::write(&bad, content).unwrap();
        let loaded = read_trace(&bad).unwrap();
        let mut sink = StatsSink::new(Vec::new());
        let scan = scan_trace(&bad, &mut sink).unwrap();
        assert_eq!(scan.integrity(), loaded.integrity(), "{what}");
        let kept = scan.record_count();
        assert!(kept > 0 && kept < read_trace(&path).unwrap().trace.record_count() as u64);
        let refused = scan.accept("x.jtr", Salvage::Refuse).unwrap_err();
        assert_eq!(
            refused.to_string(),
            loaded
                .accept("x.jtr", Salvage::Refuse)
                .unwrap_err()
                .to_string()
        );
        assert!(refused.to_string().contains("--salvage"), "{refused}");
        let salvaged = scan.accept("x.jtr", Salvage::Keep).unwrap();
        assert!(salvaged.salvaged && salvaged.detours_kept == kept, "{what}");
        assert_eq!(
            salvaged.kept_line(),
            loaded
                .integrity()
                .check("x.jtr", Salvage::Keep)
                .unwrap()
                .kept_line()
        );
        assert_eq!(
            sink.stats(&scan),
            TraceStats::of_trace(&loaded.trace),
            "{what}"
        );
    }
}

#[test]
fn a_selected_read_holds_exactly_the_streams_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_file(dir.path(), SPECS[1], 4, 2, 40);
    let whole = read_trace(&path).unwrap();
    for pick in [vec![0], vec![1, 3], vec![3, 1], vec![0, 1, 2, 3], vec![]] {
        let some = read_trace_streams(&path, &pick).unwrap();
        let mut want: Vec<usize> = pick.clone();
        want.sort_unstable();
        want.dedup();
        let streams: Vec<_> = want
            .iter()
            .map(|&i| whole.trace.streams[i].clone())
            .collect();
        assert_eq!(some.trace.streams, streams, "{pick:?}");
        let cpus: Vec<u32> = streams.iter().map(|s| s.cpu).collect();
        assert_eq!(some.trace.header.stream_cpus, cpus, "{pick:?}");
        some.trace.validate().unwrap();
        assert!(some.integrity().is_whole());
    }
    let e = read_trace_streams(&path, &[2, 4]).unwrap_err().to_string();
    assert!(e.contains("no stream 4 (it has 4)"), "{e}");
}

/// `read_replayed` against the trace read whole: the kept streams' records, every stream's
/// frame, and the facts of the whole trace (digest, statistics, pooled ratios, integrity,
/// warnings, the busy check) equal, on the file as it is, damaged and cut.
fn assert_replayed_is_whole(path: &Path, keep: &[usize], what: &str) {
    let whole = read_trace(path).unwrap();
    let r = read_replayed(path, |i, _| keep.contains(&i)).unwrap();
    let t = &whole.trace;
    assert_eq!(r.facts.digest, content_digest(t), "{what}");
    let stats: Vec<Stats> = t.streams.iter().map(Stats::of_stream).collect();
    assert_eq!(r.facts.stats, stats, "{what}");
    assert_eq!(r.facts.streams(), t.streams.len(), "{what}");
    let n = t.streams.len();
    let (ratio, rate) = r.facts.pooled(0..n);
    assert_eq!(
        (ratio.to_bits(), rate.to_bits()),
        (t.noise_ratio().to_bits(), t.detours_per_s().to_bits()),
        "{what}"
    );
    for k in 1..=n + 1 {
        let first = Stats::of_streams(&t.streams[..k.min(n)]);
        assert_eq!(
            r.facts.pooled(0..k),
            (first.noise_ratio, first.detours_per_s),
            "{what} {k}"
        );
    }
    assert_eq!(r.facts.integrity(), &whole.integrity(), "{what}");
    assert_eq!(r.facts.warnings(), whole.warnings().as_slice(), "{what}");
    let busy = t.streams.iter().find_map(jitter_trace::sanity::busy);
    assert_eq!(r.facts.busy(), busy, "{what}");
    for salvage in [Salvage::Refuse, Salvage::Keep] {
        let line = |x: Result<jitter_trace::Integrity, jitter_trace::TraceError>| {
            x.map_err(|e| e.to_string())
        };
        assert_eq!(
            line(r.facts.accept("x.jtr", salvage)),
            line(whole.accept("x.jtr", salvage)),
            "{what}"
        );
    }
    assert_eq!(r.trace.header, t.header, "{what}");
    assert_eq!(
        (r.trace.streams.len(), &r.trace.notes),
        (n, &t.notes),
        "{what}"
    );
    for (i, (a, b)) in r.trace.streams.iter().zip(&t.streams).enumerate() {
        if keep.contains(&i) {
            assert_eq!(a, b, "{what}: stream {i}");
        } else {
            assert!(a.records.is_empty(), "{what}: stream {i}");
            let frame = Stream {
                records: Vec::new(),
                ..b.clone()
            };
            assert_eq!(a, &frame, "{what}: stream {i}");
        }
    }
}

#[test]
fn a_read_for_replay_keeps_its_streams_and_knows_the_whole_trace() {
    let dir = tempfile::tempdir().unwrap();
    for (i, spec) in SPECS.iter().enumerate() {
        let path = trace_file(dir.path(), spec, 1 + i as u32 * 2, 2, 50 + i as u64);
        for keep in [vec![0], vec![1, 4], vec![], vec![0, 1, 2, 3, 4]] {
            assert_replayed_is_whole(&path, &keep, spec);
        }
    }
    // Damaged and cut: the facts are those of what the whole read kept.
    let path = trace_file(dir.path(), SPECS[0], 3, 2, 60);
    let bytes = std::fs::read(&path).unwrap();
    let mut damaged = bytes.clone();
    damaged[bytes.len() / 2] ^= 0x55;
    for (what, content) in [
        ("damaged", damaged),
        ("cut", bytes[..bytes.len() / 2].to_vec()),
    ] {
        let bad = dir.path().join(format!("{what}.jtr"));
        std::fs::write(&bad, content).unwrap();
        assert_replayed_is_whole(&bad, &[1], what);
    }
    // A collection whose detours pile up at its threshold (implausible) and a busy one.
    let spec: Spec = "poisson:rate=200000/s,dur=exp:100ns".parse().unwrap();
    let mut t = synthesize(&spec, 2, 500_000_000, 61).unwrap();
    t.header.tsc_khz = 1_000_000;
    t.header.threshold_ns = 150.0;
    (t.header.environment).insert("counter_loop_ticks".into(), "100".into());
    let piled = dir.path().join("piled.jtr");
    write_interleaved(&piled, &t, 5000);
    assert!(!read_trace(&piled).unwrap().warnings().is_empty());
    assert_replayed_is_whole(&piled, &[0], "piled");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/vm-shared-allcpus.jtr");
    assert!(read_trace(&sample).unwrap().warnings().len() >= 2);
    assert_replayed_is_whole(&sample, &[1], "busy sample");
}
