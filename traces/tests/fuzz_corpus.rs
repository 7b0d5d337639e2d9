//! Replays the committed fuzz corpus (`traces/fuzz/seeds/`: inputs `cargo fuzz` found
//! interesting, minimised) through the reader under the fuzz target's own rules: no panic, no
//! allocation larger than the file justifies, a valid trace or an error. One test in this binary:
//! the allocation bound is measured per thread with a tracking global allocator.

#[path = "../fuzz/fuzz_targets/untrusted.rs"]
mod untrusted;

use std::time::{Duration, Instant};

#[test]
fn the_fuzz_corpus_reads_without_panic_or_oversized_allocation() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 10,
        "{} holds {} inputs",
        dir.display(),
        files.len()
    );
    let t0 = Instant::now();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let one = Instant::now();
        let r = std::panic::catch_unwind(|| untrusted::check(&bytes));
        assert!(r.is_ok(), "{} broke a rule", f.display());
        // No loop without progress: a corpus input (at most a few KiB) reads in well under 1 s
        // even on a loaded machine (a hang would show here).
        assert!(
            one.elapsed() < Duration::from_secs(5),
            "{} took {:?}",
            f.display(),
            one.elapsed()
        );
    }
    eprintln!("{} inputs in {:?}", files.len(), t0.elapsed());
}
