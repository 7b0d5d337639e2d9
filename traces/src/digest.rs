//! The identity of a trace by its content: two reports are of the same trace when their
//! digests agree, whatever the files were called.

use crate::model::Trace;

/// A digest of what a replay or prediction reads from `trace`: every stream's CPU, window
/// and records (start and run-time, in order). Two CRC-32s over the same fields in two byte
/// orders (64 bits together) and the record count, e.g. `crc32x2:1a2b3c4d5e6f7081/4414`:
/// traces that differ in any record differ here but for a chance of about 2^-64; the header
/// (host, labels, the collector's counters) does not count, so a converted or re-saved copy of
/// the same detours keeps its digest.
pub fn content_digest(trace: &Trace) -> String {
    let mut a = crc32fast::Hasher::new();
    let mut b = crc32fast::Hasher::new();
    let mut records = 0u64;
    for s in &trace.streams {
        let head = [
            u64::from(s.cpu),
            s.begin_ns,
            s.end_ns,
            s.records.len() as u64,
        ];
        for x in head {
            a.update(&x.to_le_bytes());
            b.update(&x.to_be_bytes());
        }
        for r in &s.records {
            a.update(&r.start_ns.to_le_bytes());
            a.update(&r.run_ns.to_le_bytes());
            b.update(&r.run_ns.to_be_bytes());
            b.update(&r.start_ns.to_be_bytes());
        }
        records += s.records.len() as u64;
    }
    format!("crc32x2:{:08x}{:08x}/{records}", a.finalize(), b.finalize())
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
