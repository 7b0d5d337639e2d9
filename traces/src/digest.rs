//! The identity of a trace by its content: two reports are of the same trace when their
//! digests agree, whatever the files were called.

use crate::model::{Detour, Stream, Trace};

/// A digest of what a replay or prediction reads from `trace`: every stream's CPU, window
/// and records (start and run-time, in order). Two CRC-32s over the same fields in two byte
/// orders (64 bits together) and the record count, e.g. `crc32x2:1a2b3c4d5e6f7081/4414`:
/// traces that differ in any record differ here but for a chance of about 2^-64; the header
/// (host, labels, the collector's counters) does not count, so a converted or re-saved copy of
/// the same detours keeps its digest.
pub fn content_digest(trace: &Trace) -> String {
    let mut digest = ContentDigest::default();
    for s in &trace.streams {
        let mut records = RecordDigest::default();
        for part in s.records.chunks(4096) {
            let run: Vec<Detour> = part.iter().map(crate::model::Record::detour).collect();
            records.update(&run);
        }
        digest.push(s, &records);
    }
    digest.finish()
}

/// The CRCs of one stream's records, fed a run of detours at a time (in time order): the part
/// of [`content_digest`] a pass over a file's interleaved chunks gathers for each stream apart.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecordDigest {
    a: crc32fast::Hasher,
    b: crc32fast::Hasher,
    records: u64,
    bytes: Vec<u8>,
}

impl RecordDigest {
    /// Adds the next detours of the stream.
    pub(crate) fn update(&mut self, detours: &[Detour]) {
        self.bytes.clear();
        for d in detours {
            self.bytes.extend_from_slice(&d.start_ns.to_le_bytes());
            self.bytes.extend_from_slice(&d.run_ns.to_le_bytes());
        }
        self.a.update(&self.bytes);
        self.bytes.clear();
        for d in detours {
            self.bytes.extend_from_slice(&d.run_ns.to_be_bytes());
            self.bytes.extend_from_slice(&d.start_ns.to_be_bytes());
        }
        self.b.update(&self.bytes);
        self.records += detours.len() as u64;
    }
}

/// [`content_digest`] assembled stream by stream, in stream order, from each stream's window
/// and its [`RecordDigest`] (CRC-32s combine: the result is the digest of the whole sequence).
#[derive(Debug, Clone, Default)]
pub(crate) struct ContentDigest {
    a: crc32fast::Hasher,
    b: crc32fast::Hasher,
    records: u64,
}

impl ContentDigest {
    /// Appends the stream whose CPU and window `stream` holds (its `records` are not read) and
    /// whose records `records` digested.
    pub fn push(&mut self, stream: &Stream, records: &RecordDigest) {
        let head = [
            u64::from(stream.cpu),
            stream.begin_ns,
            stream.end_ns,
            records.records,
        ];
        for x in head {
            self.a.update(&x.to_le_bytes());
            self.b.update(&x.to_be_bytes());
        }
        self.a.combine(&records.a);
        self.b.combine(&records.b);
        self.records += records.records;
    }

    /// The digest, `crc32x2:<a><b>/<records>`.
    pub fn finish(self) -> String {
        let (a, b) = (self.a.finalize(), self.b.finalize());
        format!("crc32x2:{a:08x}{b:08x}/{}", self.records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Detour, Stream};

    fn trace(ds: &[(u64, u64)]) -> Trace {
        let ds: Vec<Detour> = ds
            .iter()
            .map(|&(start_ns, run_ns)| Detour { start_ns, run_ns })
            .collect();
        let mut t = Trace {
            streams: vec![Stream::from_detours(0, 0, 1000, &ds).unwrap()],
            ..Trace::default()
        };
        t.sync_header();
        t
    }

    /// The digest as it was first written: one pair of hashers over every field in turn.
    fn sequential(trace: &Trace) -> String {
        let mut a = crc32fast::Hasher::new();
        let mut b = crc32fast::Hasher::new();
        let mut records = 0u64;
        for s in &trace.streams {
            let n = s.records.len() as u64;
            for x in [u64::from(s.cpu), s.begin_ns, s.end_ns, n] {
                a.update(&x.to_le_bytes());
                b.update(&x.to_be_bytes());
            }
            for r in &s.records {
                a.update(&r.start_ns.to_le_bytes());
                a.update(&r.run_ns.to_le_bytes());
                b.update(&r.run_ns.to_be_bytes());
                b.update(&r.start_ns.to_be_bytes());
            }
            records += n;
        }
        format!("crc32x2:{:08x}{:08x}/{records}", a.finalize(), b.finalize())
    }

    #[test]
    fn the_combined_digest_is_the_sequential_one() {
        let spec: crate::Spec = "poisson:rate=20000/s,dur=exp:2us".parse().unwrap();
        for (streams, seed) in [(1u32, 1), (3, 2), (5, 3)] {
            let mut t = crate::synth::synthesize(&spec, streams, 200_000_000, seed).unwrap();
            // An empty stream between full ones.
            t.streams[streams as usize / 2].records.clear();
            assert_eq!(content_digest(&t), sequential(&t));
        }
        assert_eq!(
            content_digest(&Trace::default()),
            sequential(&Trace::default())
        );
    }

    #[test]
    fn equal_records_give_equal_digests_and_any_change_another() {
        let a = trace(&[(10, 5), (100, 20)]);
        let mut renamed = a.clone();
        renamed.header.host = "elsewhere".into();
        assert_eq!(content_digest(&a), content_digest(&renamed));
        let d = content_digest(&a);
        assert!(d.starts_with("crc32x2:") && d.ends_with("/2"), "{d}");
        for other in [
            trace(&[(10, 5), (100, 21)]),
            trace(&[(11, 5), (100, 20)]),
            trace(&[(10, 5)]),
        ] {
            assert_ne!(content_digest(&other), d);
        }
    }
}
