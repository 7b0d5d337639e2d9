//! The binned input of the periodogram: each CPU's window cut into segments of at most
//! `MAX_BINS · MIN_BIN_NS`, at most [`MAX_SEGMENTS`] of them kept (evenly chosen), and a count
//! of occurrences per bin of [`MIN_BIN_NS`] in each kept segment. This is all the spectrum
//! reads of the occurrence times, so binning them as they arrive, in any order, gives the
//! periods the times themselves give, in memory that does not grow with their number: per
//! kept segment, a count per occupied bin (4 bytes each, at most one per occurrence) until
//! that costs more than a count per bin (4 bytes × the segment's bins: ≤ 1 MiB), then that.

use super::period::{MAX_BINS, MAX_SEGMENTS, MIN_BIN_NS};

/// One kept segment: its window and its counts per bin.
#[derive(Debug, Clone)]
struct Segment {
    begin_ns: u64,
    end_ns: u64,
    /// Bins of the segment: `⌈(end − begin) / MIN_BIN_NS⌉`, at least 1.
    used: usize,
    /// Bin of each occurrence, while they are fewer than `used`.
    sparse: Vec<u32>,
    /// Count per bin, once they are not (then `sparse` is empty).
    dense: Vec<u32>,
}

impl Segment {
    fn add(&mut self, t: u64) {
        let dt = MIN_BIN_NS as f64;
        let b = (((t - self.begin_ns) as f64 / dt) as usize).min(self.used - 1);
        if self.dense.is_empty() {
            self.sparse.push(b as u32);
            if self.sparse.len() >= self.used {
                self.dense = vec![0; self.used];
                for &s in &self.sparse {
                    self.dense[s as usize] += 1;
                }
                self.sparse = Vec::new();
            }
        } else {
            self.dense[b] += 1;
        }
    }

    /// The counts per bin.
    fn counts(&self) -> Vec<u32> {
        if !self.dense.is_empty() {
            return self.dense.clone();
        }
        let mut c = vec![0; self.used];
        for &s in &self.sparse {
            c[s as usize] += 1;
        }
        c
    }
}

/// A kept segment as the spectrum reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct BinnedSegment {
    /// Start of the segment, ns.
    pub begin_ns: u64,
    /// End of the segment, ns.
    pub end_ns: u64,
    /// Occurrences per bin of `MIN_BIN_NS` from `begin_ns` (the last bin holds the rest).
    pub counts: Vec<u32>,
    /// Occurrences in the segment.
    pub count: usize,
}

/// The segments of the windows of one source's CPUs, and the counts in the kept ones.
#[derive(Debug, Clone)]
pub struct Segments {
    /// Per CPU (in the order given), its kept segments (indices into `kept`).
    cpus: Vec<Vec<usize>>,
    /// Every window, in the order given (occurrences outside are ignored).
    windows: Vec<(u64, u64)>,
    /// The kept segments, in analysis order (CPU after CPU, segment after segment).
    kept: Vec<Segment>,
}

impl Segments {
    /// Cuts the `windows` (one per CPU that saw the source, in order) into segments and keeps
    /// at most [`MAX_SEGMENTS`] of all, evenly chosen.
    pub fn new(windows: &[(u64, u64)]) -> Self {
        let max_len = MAX_BINS as u64 * MIN_BIN_NS;
        let mut all: Vec<(usize, u64, u64)> = Vec::new();
        for (i, &(begin_ns, end_ns)) in windows.iter().enumerate() {
            let len = end_ns.saturating_sub(begin_ns);
            let parts = len.div_ceil(max_len).max(1);
            for p in 0..parts {
                let begin = begin_ns + len * p / parts;
                let end = begin_ns + len * (p + 1) / parts;
                all.push((i, begin, end));
            }
        }
        if all.len() > MAX_SEGMENTS {
            all = (0..MAX_SEGMENTS)
                .map(|i| all[i * all.len() / MAX_SEGMENTS])
                .collect();
        }
        let mut cpus = vec![Vec::new(); windows.len()];
        let dt = MIN_BIN_NS as f64;
        let kept = (all.iter().enumerate())
            .map(|(k, &(cpu, begin_ns, end_ns))| {
                cpus[cpu].push(k);
                Segment {
                    begin_ns,
                    end_ns,
                    used: ((end_ns.saturating_sub(begin_ns) as f64 / dt).ceil() as usize)
                        .clamp(1, MAX_BINS),
                    sparse: Vec::new(),
                    dense: Vec::new(),
                }
            })
            .collect();
        Segments {
            cpus,
            windows: windows.to_vec(),
            kept,
        }
    }

    /// One occurrence at `t` on the CPU at position `cpu` of the windows.
    #[inline]
    pub fn add(&mut self, cpu: usize, t: u64) {
        let (begin, end) = self.windows[cpu];
        if t < begin || t >= end {
            return;
        }
        for &k in &self.cpus[cpu] {
            let s = &mut self.kept[k];
            if t >= s.begin_ns && t < s.end_ns {
                s.add(t);
                return;
            }
        }
    }

    /// The kept segments with their counts, in analysis order.
    pub fn binned(&self) -> impl Iterator<Item = BinnedSegment> + '_ {
        self.kept.iter().map(|s| BinnedSegment {
            begin_ns: s.begin_ns,
            end_ns: s.end_ns,
            counts: s.counts(),
            count: if s.dense.is_empty() {
                s.sparse.len()
            } else {
                s.dense.iter().map(|&c| c as usize).sum()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The segments and bins as `periods` made them from the times before: each window's
    /// times sorted, cut at the segments' bounds, binned from each segment's start.
    fn from_times(cpus: &[(u64, u64, Vec<u64>)]) -> Vec<BinnedSegment> {
        let max_len = MAX_BINS as u64 * MIN_BIN_NS;
        let mut segments = Vec::new();
        for (begin_ns, end_ns, times) in cpus {
            let mut t: Vec<u64> = (times.iter().copied())
                .filter(|t| t >= begin_ns && t < end_ns)
                .collect();
            t.sort_unstable();
            let len = end_ns - begin_ns;
            let parts = len.div_ceil(max_len).max(1);
            for i in 0..parts {
                let (b, e) = (begin_ns + len * i / parts, begin_ns + len * (i + 1) / parts);
                let inside: Vec<u64> = t.iter().copied().filter(|&x| x >= b && x < e).collect();
                segments.push((b, e, inside));
            }
        }
        if segments.len() > MAX_SEGMENTS {
            let all = std::mem::take(&mut segments);
            segments = (0..MAX_SEGMENTS)
                .map(|i| all[i * all.len() / MAX_SEGMENTS].clone())
                .collect();
        }
        let dt = MIN_BIN_NS as f64;
        (segments.into_iter())
            .map(|(b, e, times)| {
                let used = (((e - b) as f64 / dt).ceil() as usize).clamp(1, MAX_BINS);
                let mut counts = vec![0u32; used];
                for &t in &times {
                    counts[(((t - b) as f64 / dt) as usize).min(used - 1)] += 1;
                }
                BinnedSegment {
                    begin_ns: b,
                    end_ns: e,
                    counts,
                    count: times.len(),
                }
            })
            .collect()
    }

    #[test]
    fn binning_as_times_arrive_gives_the_segments_of_the_sorted_times() {
        // (CPUs, window, occurrences per CPU): one segment; 3 per CPU; 40 of which 16 kept;
        // a sparse source (bins by occurrence) and a dense one (a count per bin).
        for (cpus, window, n) in [
            (2, 1_000_000_000u64, 50u64),
            (1, 60_000_000_000, 400_000),
            (20, 27_000_000_000, 3_000),
            (3, 7_777, 10),
        ] {
            let data: Vec<(u64, u64, Vec<u64>)> = (0..cpus)
                .map(|c| {
                    let begin = 1_000 * c;
                    // Times in any order, a few outside the window.
                    let times = (0..n)
                        .map(|i| begin + (i * 2_654_435_761 + c) % (window + window / 50))
                        .collect();
                    (begin, begin + window, times)
                })
                .collect();
            let windows: Vec<(u64, u64)> = data.iter().map(|d| (d.0, d.1)).collect();
            let mut s = Segments::new(&windows);
            for (i, d) in data.iter().enumerate() {
                for &t in &d.2 {
                    s.add(i, t);
                }
            }
            assert_eq!(
                s.binned().collect::<Vec<_>>(),
                from_times(&data),
                "{cpus} {window}"
            );
        }
    }
}
