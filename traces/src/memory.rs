//! Large arrays the kernel may back with huge pages: a dense trace's records and the
//! predictor's index are hundreds of MB written once, where 4 KiB pages cost a fault each.

/// An empty vector with room for `n` elements, whose pages the kernel may back with huge pages
/// (2 MiB): a dense trace's records and a predictor's index reach hundreds of MB, and with
/// 4 KiB pages the kernel takes a fault for every 4 KiB first written (half the loading time of
/// 2048 ranks on a 15 s trace at 10^5 detours/s can be system time).
pub fn large_vec<T>(n: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    advise_huge_pages(v.as_ptr().cast(), v.capacity() * std::mem::size_of::<T>());
    v
}

/// Size of a huge page on x86-64 and aarch64 with 4 KiB base pages.
pub const HUGE_PAGE: usize = 2 << 20;

/// The whole huge pages inside `[ptr, ptr + bytes)`: their start and length, if any.
fn huge_pages_within(ptr: usize, bytes: usize) -> Option<(usize, usize)> {
    let begin = ptr.checked_next_multiple_of(HUGE_PAGE)?;
    let end = ptr.saturating_add(bytes) & !(HUGE_PAGE - 1);
    (end > begin).then(|| (begin, end - begin))
}

/// Asks the kernel to back the whole huge pages inside `[ptr, ptr + bytes)`, an allocation of
/// this process not yet written, with huge pages where its transparent huge page setting is
/// `madvise` (ignored where not allowed: only a hint).
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    let Some((begin, len)) = huge_pages_within(ptr as usize, bytes) else {
        return;
    };
    if let Some(at) = std::ptr::NonNull::new(begin as *mut std::ffi::c_void) {
        // SAFETY: the range lies inside one live allocation owned by the caller's vector and is
        // page-aligned; MADV_HUGEPAGE changes only how the kernel backs its pages, no content
        // and no mapping; an error (a kernel without THP) leaves the range as it was.
        let _ =
            unsafe { nix::sys::mman::madvise(at, len, nix::sys::mman::MmapAdvise::MADV_HUGEPAGE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_huge_pages_inside_an_allocation_are_advised() {
        const H: usize = HUGE_PAGE;
        assert_eq!(huge_pages_within(H + 16, 3 * H), Some((2 * H, 2 * H)));
        assert_eq!(huge_pages_within(2 * H, 2 * H), Some((2 * H, 2 * H)));
        assert_eq!(huge_pages_within(H + 16, H), None);
        assert_eq!(huge_pages_within(16, 0), None);
        assert_eq!(huge_pages_within(usize::MAX - 8, H), None);
    }

    /// Where the kernel allows it (`madvise` or `always`), a large index array is backed by
    /// huge pages once written (/proc/self/smaps of its mapping).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_vector_gets_huge_pages_where_the_kernel_allows_them() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !(mode.contains("[madvise]") || mode.contains("[always]")) {
            eprintln!("NOT CHECKED: transparent huge pages are {mode:?} here");
            return;
        }
        let n = 8 * HUGE_PAGE / 8;
        let mut v: Vec<u64> = large_vec(n);
        v.resize(n, 1);
        let (at, end) = (v.as_ptr() as usize, v.as_ptr() as usize + 8 * n);
        // The advice splits the vector's mapping: sum over every mapping that overlaps it.
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut huge_kb = 0u64;
        let mut overlaps = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = range.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    overlaps = lo < end && at < hi;
                    continue;
                }
            }
            if let (true, Some(kb)) = (overlaps, line.strip_prefix("AnonHugePages:")) {
                huge_kb += kb
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        // 7 of its 8 huge pages lie whole inside it; a fragmented machine may refuse some.
        assert!(
            huge_kb >= 2048,
            "no huge page backs a 16 MiB index array ({huge_kb} kB)"
        );
        // The vector lived, written, while its mappings were read.
        assert_eq!(v.iter().sum::<u64>(), n as u64);
    }
}
