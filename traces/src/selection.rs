//! Exact order statistics of many series at once, in passes over data that is not kept: the
//! k-th smallest value of each series, found by narrowing a range that holds it. Each pass
//! counts the values of every unresolved series into at most [`BUCKETS`] equal buckets of its
//! range, and the bucket holding the k-th value becomes the range of the next pass; a range of
//! one integer is the answer. A series of values below 2¹⁴ is resolved by one pass, below 2²⁸
//! by two, below 2⁴² by three (each pass holds 8 bytes per bucket per unresolved series).
//! The answer is the value a sort would put at index k: exact, not an estimate.

/// Most buckets per series and pass.
pub const BUCKETS: u64 = 1 << 14;

/// One series: its k, the range known to hold the k-th value, and this pass's counts.
#[derive(Debug, Clone)]
struct Series {
    /// Index of the wanted value in the sorted series (0-based).
    k: u64,
    /// Lowest value the answer may have.
    lo: u64,
    /// Highest value the answer may have (inclusive).
    hi: u64,
    /// Values of the series below `lo` (counted in earlier passes).
    below: u64,
    /// Counts of this pass, one per bucket of `[lo, hi]` (empty when resolved).
    counts: Vec<u64>,
}

impl Series {
    /// Integers in `[lo, hi]`.
    fn width(&self) -> u128 {
        u128::from(self.hi - self.lo) + 1
    }

    /// Buckets of this pass.
    fn buckets(&self) -> u128 {
        self.width().min(u128::from(BUCKETS))
    }
}

/// The k-th values of many series, found in passes (see the module).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    series: Vec<Series>,
}

impl Selection {
    /// A selection of no series yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a series of which the value at sorted index `k` is wanted, knowing its smallest
    /// and largest values (`min ≤ max`; one pass finds them); returns its id.
    pub fn add(&mut self, k: u64, min: u64, max: u64) -> usize {
        self.series.push(Series {
            k,
            lo: min,
            hi: max.max(min),
            below: 0,
            counts: Vec::new(),
        });
        self.series.len() - 1
    }

    /// Whether some series needs another pass.
    pub fn pending(&self) -> bool {
        self.series.iter().any(|s| s.lo < s.hi)
    }

    /// Prepares a pass: the counts of every unresolved series, zeroed.
    pub fn begin_pass(&mut self) {
        for s in &mut self.series {
            if s.lo < s.hi {
                s.counts.clear();
                s.counts.resize(s.buckets() as usize, 0);
            }
        }
    }

    /// One value of series `id` in this pass (every value of the series, every pass).
    #[inline]
    pub fn offer(&mut self, id: usize, v: u64) {
        let s = &mut self.series[id];
        if s.counts.is_empty() || v < s.lo || v > s.hi {
            return;
        }
        let b = u128::from(v - s.lo) * s.buckets() / s.width();
        s.counts[b as usize] += 1;
    }

    /// Ends a pass: each unresolved series narrows its range to the bucket of its k-th value.
    pub fn end_pass(&mut self) {
        for s in &mut self.series {
            if s.counts.is_empty() {
                continue;
            }
            let (w, b) = (s.width(), s.buckets());
            let mut seen = s.below;
            let mut j = s.counts.len() - 1;
            for (i, &c) in s.counts.iter().enumerate() {
                if seen + c > s.k {
                    j = i;
                    break;
                }
                seen += c;
            }
            // Bucket j holds the values v with j ≤ (v − lo)·b/w < j + 1.
            let first = (j as u128 * w).div_ceil(b);
            let next = ((j as u128 + 1) * w).div_ceil(b);
            let lo = s.lo;
            s.lo = lo + first as u64;
            s.hi = lo + (next - 1) as u64;
            s.below = seen;
            s.counts = Vec::new();
        }
    }

    /// The k-th value of series `id`, once resolved.
    pub fn value(&self, id: usize) -> Option<u64> {
        let s = &self.series[id];
        (s.lo == s.hi).then_some(s.lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs passes over `data` until every series is resolved; returns the passes.
    fn resolve(sel: &mut Selection, data: &[Vec<u64>]) -> usize {
        let mut passes = 0;
        while sel.pending() {
            sel.begin_pass();
            for (id, values) in data.iter().enumerate() {
                for &v in values {
                    sel.offer(id, v);
                }
            }
            sel.end_pass();
            passes += 1;
        }
        passes
    }

    proptest! {
        #[test]
        fn the_kth_value_is_the_sorted_one(
            series in prop::collection::vec(
                (prop::collection::vec(any::<u64>(), 1..200), 0u32..64, any::<u64>()),
                1..6,
            ),
        ) {
            // Values spread over 2^0 .. 2^64 (the shift), so both short and wide ranges occur.
            let data: Vec<Vec<u64>> = series
                .iter()
                .map(|(v, shift, base)| {
                    v.iter().map(|x| base.saturating_add(x >> shift)).collect()
                })
                .collect();
            let mut sel = Selection::new();
            let mut wanted = Vec::new();
            for (values, (_, _, base)) in data.iter().zip(&series) {
                let k = base % values.len() as u64;
                let (min, max) = (values.iter().min().unwrap(), values.iter().max().unwrap());
                wanted.push((sel.add(k, *min, *max), k));
            }
            let passes = resolve(&mut sel, &data);
            prop_assert!(passes <= 5, "{passes} passes");
            for ((id, k), values) in wanted.iter().zip(&data) {
                let mut sorted = values.clone();
                sorted.sort_unstable();
                prop_assert_eq!(sel.value(*id), Some(sorted[*k as usize]));
            }
        }
    }

    #[test]
    fn ranges_below_2_to_the_28_take_two_passes_and_ties_one_value() {
        let data = vec![
            (0..100_000u64)
                .map(|i| (i * 7919) % 200_000_000)
                .collect::<Vec<_>>(),
            vec![5; 1000],
        ];
        let mut sel = Selection::new();
        let a = sel.add(50_000, 0, *data[0].iter().max().unwrap());
        let b = sel.add(500, 5, 5);
        assert_eq!(sel.value(b), Some(5));
        assert_eq!(resolve(&mut sel, &data), 2);
        let mut sorted = data[0].clone();
        sorted.sort_unstable();
        assert_eq!(sel.value(a), Some(sorted[50_000]));
    }
}
