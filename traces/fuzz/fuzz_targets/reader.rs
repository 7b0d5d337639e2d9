//! Fuzzes the `.jtr` reader: any bytes must give an error or a valid trace, never a panic, a hang
//! or a huge allocation.
//!
//! Random bytes rarely pass the CRC-32 of a chunk, so each input is read twice: as it is, and
//! with the header and chunk checksums recomputed, which lets the fuzzer reach the decoders.

#![no_main]

use std::io::Cursor;

use jitter_trace::format::{read_from, Completeness};
use libfuzzer_sys::fuzz_target;

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
    jitter_trace::format::reseal_checksums(&mut fixed);
    check(&fixed);
});
