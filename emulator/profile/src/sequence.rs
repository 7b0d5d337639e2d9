//! The main loop of a sequence of call sites: the repeating unit that covers the most calls.
//!
//! For each period p (1 ≤ p ≤ [`MAX_PERIOD`], at least [`MIN_REPEATS`] repetitions), the
//! longest stretch in which every call equals the call p before it; the loop is the period
//! whose stretch covers the most calls (the smallest such period: a multiple of the loop covers
//! no more). An iteration that sometimes does something else (a convergence check every tenth
//! time) makes the unit with it the loop, as it should. The loop starts where its stretch
//! starts, so that its first call is the first call of the program's first iteration. Cost:
//! O(n · MAX_PERIOD), once, at merge time.

/// Longest loop looked for, in calls.
pub const MAX_PERIOD: usize = 1024;
/// Repetitions a loop needs to be called one.
pub const MIN_REPEATS: usize = 3;

/// Where the loop lies in the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Index of the loop's first call.
    pub start: usize,
    /// Calls per iteration.
    pub period: usize,
    /// Calls covered by the stretch (≥ `MIN_REPEATS · period`).
    pub covered: usize,
}

impl Span {
    /// Whole iterations in the stretch.
    pub fn iterations(&self) -> usize {
        self.covered / self.period
    }
}

/// The main loop of `seq`, if some unit repeats at least [`MIN_REPEATS`] times.
pub fn main_loop<T: PartialEq>(seq: &[T]) -> Option<Span> {
    let n = seq.len();
    let mut best: Option<Span> = None;
    for p in 1..=MAX_PERIOD.min(n / MIN_REPEATS) {
        // Longest run of i with seq[i] == seq[i + p].
        let (mut run, mut run_start, mut top, mut top_start) = (0, 0, 0, 0);
        for i in 0..n - p {
            if seq[i] == seq[i + p] {
                if run == 0 {
                    run_start = i;
                }
                run += 1;
                if run > top {
                    (top, top_start) = (run, run_start);
                }
            } else {
                run = 0;
            }
        }
        let covered = top + p;
        if top == 0 || covered < MIN_REPEATS * p {
            continue;
        }
        if best.is_none_or(|b| covered > b.covered) {
            best = Some(Span {
                start: top_start,
                period: p,
                covered,
            });
        }
    }
    best
}

/// The rotation `r` such that `body` rotated left by `r` equals `reference`, if any.
pub fn rotation<T: PartialEq>(body: &[T], reference: &[T]) -> Option<usize> {
    let p = body.len();
    if p != reference.len() {
        return None;
    }
    (0..p.max(1)).find(|&r| (0..p).all(|j| body[(j + r) % p] == reference[j]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_between_a_prologue_and_an_epilogue_is_found_from_its_first_call() {
        let mut seq = vec![9, 8];
        for _ in 0..50 {
            seq.extend([1, 2, 2, 1]);
        }
        seq.extend([7, 9]);
        let s = main_loop(&seq).unwrap();
        assert_eq!((s.start, s.period, s.iterations()), (2, 4, 50));
    }

    #[test]
    fn an_occasional_extra_call_makes_the_longer_unit_the_loop() {
        let mut seq = vec![];
        for _ in 0..20 {
            for _ in 0..4 {
                seq.extend([1, 2]);
            }
            seq.push(3);
        }
        let s = main_loop(&seq).unwrap();
        assert_eq!((s.period, s.start), (9, 0));
    }

    #[test]
    fn no_loop_in_a_sequence_without_repeats() {
        assert_eq!(main_loop(&[1, 2, 3, 4, 5, 6]), None);
        assert_eq!(main_loop::<u8>(&[]), None);
        // Two repetitions are not enough.
        assert_eq!(main_loop(&[1, 2, 1, 2]), None);
    }

    #[test]
    fn rotations_match_bodies_that_start_elsewhere() {
        assert_eq!(rotation(&[2, 3, 1], &[1, 2, 3]), Some(2));
        assert_eq!(rotation(&[1, 2, 3], &[1, 2, 3]), Some(0));
        assert_eq!(rotation(&[1, 3, 2], &[1, 2, 3]), None);
        assert_eq!(rotation(&[1, 2], &[1, 2, 3]), None);
    }
}
