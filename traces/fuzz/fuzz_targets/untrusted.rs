//! What must hold for any bytes given to the `.jtr` reader, shared by the fuzz target
//! (`fuzz_targets/reader.rs`) and the corpus replay test (`traces/tests/fuzz_corpus.rs`):
//! an error or a trace that validates, never a panic, and no single allocation larger than
//! `READ_ALLOC_PER_BYTE · len + READ_ALLOC_FIXED` (the reader's stated bound). A hang shows as
//! a libFuzzer timeout, or as the test's time limit.
//!
//! Random bytes rarely pass the CRC-32 of a chunk, so each input is read twice: as it is, and
//! with the header and chunk checksums recomputed, which lets the fuzzer reach the decoders.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;

use jitter_trace::format::{reseal_checksums, Completeness, READ_ALLOC_FIXED, READ_ALLOC_PER_BYTE};
use jitter_trace::load::read_from;

thread_local! {
    /// Largest single allocation (or reallocation) of this thread since the last reset.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, recording the largest request of each thread.
#[derive(Debug)]
pub struct Tracking;

fn note(size: usize) {
    // `try_with`: during thread teardown the slot may be gone; such requests are not the
    // reader's.
    let _ = LARGEST.try_with(|c| c.set(c.get().max(size)));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; recording a
// size in a const-initialised thread-local `Cell` allocates nothing.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// Reads `bytes` as they are and with their checksums resealed; panics if a rule is broken.
pub fn check(bytes: &[u8]) {
    read_checked(bytes);
    let mut fixed = bytes.to_vec();
    reseal_checksums(&mut fixed);
    read_checked(&fixed);
}

fn read_checked(bytes: &[u8]) {
    LARGEST.with(|c| c.set(0));
    let result = read_from(Cursor::new(bytes));
    let largest = LARGEST.with(Cell::get);
    let bound = READ_ALLOC_PER_BYTE * bytes.len() + READ_ALLOC_FIXED;
    assert!(
        largest <= bound,
        "reading {} bytes allocated {largest} bytes at once, over the bound of {bound}",
        bytes.len()
    );
    if let Ok(loaded) = result {
        if let Err(e) = loaded.trace.validate() {
            panic!("the reader returned an invalid trace: {e}");
        }
        if let Completeness::Complete = loaded.completeness {
            assert!(loaded.completeness.warning().is_none());
        }
    }
}
