//! The `.jtr` reader and writer against valid, truncated and damaged files.

use std::io::Cursor;

use jitter_trace::format::{write_to, Completeness, Epilogue, TraceWriter};
use jitter_trace::load::{read_from, Loaded};
use jitter_trace::{Detour, Stream, Trace, TraceError};
use proptest::prelude::*;

/// A trace of `streams`, each given as (gap, run) pairs.
fn build(streams: &[Vec<(u64, u64)>]) -> Trace {
    let mut t = Trace::default();
    for (i, pairs) in streams.iter().enumerate() {
        let begin = 1_000 * i as u64;
        let mut at = begin;
        let mut ds = Vec::new();
        for &(gap, run) in pairs {
            at += gap;
            ds.push(Detour {
                start_ns: at,
                run_ns: run,
            });
            at += run;
        }
        t.streams
            .push(Stream::from_detours(i as u32 + 4, begin, at + 17, &ds).unwrap());
    }
    t.header.host = "test".into();
    t.sync_header();
    t
}

/// Writes `trace` chunk by chunk (at most `chunk` detours each, streams interleaved).
fn write_chunked(trace: &Trace, chunk: usize) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), &trace.header).unwrap();
    let longest = trace
        .streams
        .iter()
        .map(|s| s.records.len())
        .max()
        .unwrap_or(0);
    let mut from = 0;
    while from < longest {
        for (i, s) in trace.streams.iter().enumerate() {
            let part: Vec<Detour> = s
                .records
                .iter()
                .skip(from)
                .take(chunk)
                .map(|r| r.detour())
                .collect();
            w.append(i, &part).unwrap();
        }
        from += chunk;
    }
    w.finish(Epilogue::of(trace)).unwrap()
}

/// Chunks decoded side by side on scoped threads, batches of the thread-local `BATCH` (1: one by
/// one): what a program with a pool registers (`scan::decode_side_by_side`; the predictor's runs
/// them on rayon's workers).
struct Threads;

thread_local! {
    static BATCH: std::cell::Cell<usize> = const { std::cell::Cell::new(1) };
}

impl jitter_trace::scan::SideBySide for Threads {
    fn batch(&self) -> usize {
        BATCH.with(|b| b.get())
    }
    fn run(&self, jobs: Vec<jitter_trace::scan::Job<'_>>) {
        std::thread::scope(|s| {
            for job in jobs {
                s.spawn(job);
            }
        });
    }
}

/// Reads `bytes` chunk by chunk and side by side (batches of 4 and 6 chunks); all must give the
/// same trace and the same completeness, which is returned.
fn read_both(bytes: &[u8]) -> Result<Loaded, TraceError> {
    jitter_trace::scan::decode_side_by_side(&Threads);
    let alone = read_from(Cursor::new(bytes));
    for batch in [4, 6] {
        BATCH.with(|b| b.set(batch));
        let side = read_from(Cursor::new(bytes));
        BATCH.with(|b| b.set(1));
        match (&alone, &side) {
            (Ok(a), Ok(p)) => {
                assert_eq!(a.trace.streams, p.trace.streams, "batches of {batch}");
                assert_eq!(
                    format!("{:?}", a.completeness),
                    format!("{:?}", p.completeness),
                    "batches of {batch}"
                );
            }
            (Err(a), Err(p)) => assert_eq!(a.to_string(), p.to_string(), "batches of {batch}"),
            (a, p) => panic!("batches of {batch}: {a:?} against {p:?}"),
        }
    }
    alone
}

/// Byte offsets of every chunk (kind byte) in a file.
fn chunk_offsets(bytes: &[u8]) -> Vec<usize> {
    let hlen = u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as usize;
    let mut at = 18 + hlen;
    let mut out = Vec::new();
    while at + 9 <= bytes.len() {
        out.push(at);
        let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        at += 9 + len;
    }
    out
}

/// A records chunk for stream 0 holding two detours that start at the same time.
#[test]
fn records_starting_together_are_damage() {
    let t = build(&[vec![(10, 5)]]);
    let mut bytes = write_to(Vec::new(), &t).unwrap();
    bytes.truncate(chunk_offsets(&bytes)[0]);
    // [stream 0, base 0, count 2, bin: (gap 7, run 0), (gap 0, run 0)]
    let payload = [0x94, 0x00, 0x00, 0x02, 0xc4, 0x04, 7, 0, 0, 0];
    bytes.push(1);
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(&payload);
    jitter_trace::format::reseal_checksums(&mut bytes);
    let l = read_both(&bytes).unwrap();
    match &l.completeness {
        Completeness::Damaged { records: 0, error } => {
            assert!(error.to_string().contains("same time"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    l.trace.validate().unwrap();
}

fn streams_strategy() -> impl Strategy<Value = Vec<Vec<(u64, u64)>>> {
    let pair = (0u64..5_000_000, 0u64..200_000);
    prop::collection::vec(prop::collection::vec(pair, 0..300), 1..4)
}

proptest! {
    #[test]
    fn any_valid_streams_round_trip(streams in streams_strategy(), chunk in 1usize..64) {
        let t = build(&streams);
        t.validate().unwrap();
        let whole = write_to(Vec::new(), &t).unwrap();
        let back = read_both(&whole).unwrap();
        prop_assert!(matches!(back.completeness, Completeness::Complete));
        prop_assert_eq!(&back.trace.streams, &t.streams);
        let chunked = write_chunked(&t, chunk);
        let back = read_both(&chunked).unwrap();
        prop_assert!(matches!(back.completeness, Completeness::Complete));
        prop_assert_eq!(&back.trace.streams, &t.streams);
    }

    /// Any chunk bytes after a valid header, with checksums made to match so that the decoders
    /// see them: an error, or a trace that validates; never a panic.
    #[test]
    fn arbitrary_chunks_give_an_error_or_a_valid_trace(
        tail in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let t = build(&[vec![(10, 5), (100, 20)], vec![]]);
        let mut bytes = write_to(Vec::new(), &t).unwrap();
        let keep = chunk_offsets(&bytes)[0];
        bytes.truncate(keep);
        bytes.extend_from_slice(&tail);
        for fix in [false, true] {
            if fix {
                jitter_trace::format::reseal_checksums(&mut bytes);
            }
            if let Ok(l) = read_both(&bytes) {
                prop_assert!(l.trace.validate().is_ok(), "{:?}", l.trace.validate());
            }
        }
    }
}

fn sample() -> Trace {
    let pairs: Vec<(u64, u64)> = (0..100).map(|i| (100_000 + i, 2_000 + i)).collect();
    build(&[pairs.clone(), pairs])
}

#[test]
fn truncated_file_keeps_complete_chunks() {
    let t = sample();
    let bytes = write_chunked(&t, 10);
    let offsets = chunk_offsets(&bytes);
    // 20 record chunks (10 per stream) and the end chunk; cut just before the end chunk.
    assert_eq!(offsets.len(), 21);
    let cut = &bytes[..offsets[20]];
    let l = read_both(cut).unwrap();
    match l.completeness {
        Completeness::Truncated { records } => assert_eq!(records, 200),
        other => panic!("{other:?}"),
    }
    assert!(l
        .completeness
        .warning()
        .unwrap()
        .contains("truncated after 200 records"));
    assert_eq!(l.trace.streams[0].records.len(), 100);
    for (a, b) in l.trace.streams.iter().zip(&t.streams) {
        let da: Vec<Detour> = a.records.iter().map(|r| r.detour()).collect();
        let db: Vec<Detour> = b.records.iter().map(|r| r.detour()).collect();
        assert_eq!(da, db);
    }
    l.trace.validate().unwrap();
    // Cut in the middle of a record chunk: the chunks before it are kept.
    let cut = &bytes[..offsets[5] + 12];
    let l = read_both(cut).unwrap();
    match &l.completeness {
        Completeness::Damaged { records, error } => {
            assert_eq!(*records, 50);
            assert!(error.to_string().contains("chunk 5"), "{error}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn flipped_byte_names_the_chunk_and_keeps_earlier_records() {
    let t = sample();
    let bytes = write_chunked(&t, 10);
    let offsets = chunk_offsets(&bytes);
    let mut bad = bytes.clone();
    bad[offsets[7] + 9 + 3] ^= 0x40;
    let l = read_both(&bad).unwrap();
    match &l.completeness {
        Completeness::Damaged { records, error } => {
            assert_eq!(*records, 70);
            let msg = error.to_string();
            assert!(msg.contains("chunk 7") && msg.contains("checksum"), "{msg}");
            assert!(msg.contains(&format!("byte {}", offsets[7])), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(l.trace.record_count(), 70);
    l.trace.validate().unwrap();
}

/// A chunk in the middle that cannot be decoded ends the trace there: the good chunks after it
/// are dropped, by the whole-file reader and the streaming one alike.
#[test]
fn an_undecodable_chunk_in_the_middle_keeps_only_the_chunks_before_it() {
    let t = sample();
    let bytes = write_chunked(&t, 10);
    let offsets = chunk_offsets(&bytes);
    let mut bad = bytes.clone();
    bad[offsets[3]] = 7;
    jitter_trace::format::reseal_checksums(&mut bad);
    let l = read_both(&bad).unwrap();
    match &l.completeness {
        Completeness::Damaged { records, error } => {
            assert_eq!(*records, 30);
            let msg = error.to_string();
            assert!(msg.contains("chunk 3") && msg.contains("kind 7"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(l.trace.record_count(), 30);
    // The streaming reader stops at the same chunk.
    let mut r = jitter_trace::TraceReader::new(Cursor::new(&bad)).unwrap();
    let read: Vec<_> = std::iter::from_fn(|| r.next_chunk().transpose()).collect();
    assert_eq!(read.len(), 4);
    assert!(read[..3].iter().all(Result::is_ok) && read[3].is_err());
}

#[test]
fn garbage_empty_and_wrong_version_are_errors() {
    let e = read_from(Cursor::new(b"hello, this is not a trace at all")).unwrap_err();
    assert!(matches!(e, TraceError::BadMagic), "{e}");
    let e = read_from(Cursor::new(Vec::<u8>::new())).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let mut bytes = write_to(Vec::new(), &sample()).unwrap();
    bytes[8] = 9;
    let e = read_both(&bytes).unwrap_err();
    assert!(matches!(e, TraceError::Version { found: 9, .. }), "{e}");
    let e = read_from(Cursor::new(&bytes[..12])).unwrap_err();
    assert!(e.to_string().contains("header"), "{e}");
}

#[test]
fn zero_record_trace_round_trips() {
    let mut t = Trace::default();
    t.streams
        .push(Stream::from_detours(0, 5, 1_000, &[]).unwrap());
    t.sync_header();
    let bytes = write_to(Vec::new(), &t).unwrap();
    let l = read_both(&bytes).unwrap();
    assert!(matches!(l.completeness, Completeness::Complete));
    assert_eq!(l.trace.streams, t.streams);
    assert_eq!(l.trace.record_count(), 0);
}

#[test]
fn oversized_length_fields_are_refused_without_allocating() {
    let bytes = write_to(Vec::new(), &sample()).unwrap();
    // Header length of 4 GiB - 1.
    let mut bad = bytes.clone();
    bad[10..14].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = read_both(&bad).unwrap_err();
    assert!(e.to_string().contains("over the"), "{e}");
    // Chunk length of 4 GiB - 1: the chunk is reported damaged, nothing is allocated.
    let mut bad = bytes.clone();
    let at = chunk_offsets(&bytes)[0];
    bad[at + 1..at + 5].copy_from_slice(&u32::MAX.to_le_bytes());
    let l = read_both(&bad).unwrap();
    match &l.completeness {
        Completeness::Damaged { records, error } => {
            assert_eq!(*records, 0);
            assert!(error.to_string().contains("over the"), "{error}");
        }
        other => panic!("{other:?}"),
    }
}

/// A stream's chunk that starts before the one read before it ends is damage: the chunks before
/// it are kept, read chunk by chunk or side by side.
#[test]
fn a_chunk_going_back_in_time_keeps_the_chunks_before_it() {
    let t = sample();
    let bytes = write_chunked(&t, 10);
    let offsets = chunk_offsets(&bytes);
    let chunk = |i: usize| &bytes[offsets[i]..offsets[i + 1]];
    // Chunks alternate between the streams: put stream 0's second chunk (records 10..20)
    // before its first.
    let mut bad = bytes[..offsets[0]].to_vec();
    for i in [2, 1, 0] {
        bad.extend_from_slice(chunk(i));
    }
    bad.extend_from_slice(&bytes[offsets[3]..]);
    let l = read_both(&bad).unwrap();
    match &l.completeness {
        Completeness::Damaged { records, error } => {
            assert_eq!(*records, 20);
            let msg = error.to_string();
            assert!(
                msg.contains("chunk 2") && msg.contains("back in time"),
                "{msg}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        l.trace.streams[0].records[0].start_ns,
        t.streams[0].records[10].start_ns
    );
    assert_eq!(l.trace.record_count(), 20);
    l.trace.validate().unwrap();
}
