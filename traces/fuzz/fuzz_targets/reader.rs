//! Fuzzes the `.jtr` reader: any bytes must give an error or a valid trace, never a panic, a hang
//! or an allocation larger than the file justifies (the rules are in `untrusted.rs`).

#![no_main]

mod untrusted;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| untrusted::check(data));
