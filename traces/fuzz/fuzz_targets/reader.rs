//! Fuzzes the `.jtr` reader: any bytes must give an error or a valid trace, never a panic, a hang
//! or a huge allocation.
//!
//! Random bytes rarely pass the CRC-32 of a chunk, so each input is read twice: as it is, and
//! with the header and chunk checksums recomputed, which lets the fuzzer reach the decoders.

#![no_main]

use std::io::Cursor;

use jitter_trace::format::{read_from, Completeness};
use libfuzzer_sys::fuzz_target;

/// Rewrites the header and chunk CRCs of `bytes` (as far as the length fields allow).
fn fix_checksums(bytes: &mut [u8]) {
    if bytes.len() < 18 {
        return;
    }
    let hlen = u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as usize;
    let Some(hend) = 18usize.checked_add(hlen).filter(|&e| e <= bytes.len()) else {
        return;
    };
    let crc = crc32fast::hash(&bytes[18..hend]);
    bytes[14..18].copy_from_slice(&crc.to_le_bytes());
    let mut at = hend;
    while at + 9 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        let Some(end) = (at + 9).checked_add(len).filter(|&e| e <= bytes.len()) else {
            return;
        };
        let mut h = crc32fast::Hasher::new();
        h.update(&bytes[at..at + 1]);
        h.update(&bytes[at + 9..end]);
        bytes[at + 5..at + 9].copy_from_slice(&h.finalize().to_le_bytes());
        at = end;
    }
}

fn check(bytes: &[u8]) {
    if let Ok(loaded) = read_from(Cursor::new(bytes)) {
        if let Err(e) = loaded.trace.validate() {
            panic!("the reader returned an invalid trace: {e}");
        }
        if let Completeness::Complete = loaded.completeness {
            assert!(loaded.completeness.warning().is_none());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut fixed = data.to_vec();
    fix_checksums(&mut fixed);
    check(&fixed);
});
