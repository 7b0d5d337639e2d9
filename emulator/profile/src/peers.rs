//! The rule by which a profile's point-to-point peers, recorded as offsets from the rank at the
//! profiled size P, become peers at any number of ranks N — one rule for the LogGOPSim export
//! (`goal`) and the predictor (`replay-bench predict --app`):
//!
//! * ring offsets: a peer at offset d from the rank is at offset d modulo N;
//! * with a Cartesian topology of k ≥ 2 dimensions, an offset equal to ± a dimension's stride in
//!   the profiled grid becomes ± that dimension's stride in `MPI_Dims_create(N, k)`'s grid
//!   ([`dims_create`], row-major strides), and the offset of a neighbour across a periodic wrap
//!   (from the origin, (n_k − 1) · stride_k) becomes − that stride;
//! * at an even P the offset P/2 is both +P/2 and −P/2 (at two ranks −1 ≡ +1), and so is, in a
//!   Cartesian grid, the stride of a dimension of size 2 (both neighbours along it are one
//!   rank): the k-th such send of an iteration along d goes to (−1)^k · d and the k-th such
//!   receive comes from −(−1)^k · d ([`Halves`], counted per offset), which makes a two-sided
//!   halo of it and keeps every message matched.

use crate::profile::Cartesian;

/// `MPI_Dims_create(n, d)`: d factors of n, as balanced as can be, non-increasing.
pub(crate) fn dims_create(n: u64, d: usize) -> Vec<u64> {
    let mut dims = vec![1u64; d.max(1)];
    let mut primes = Vec::new();
    let (mut m, mut f) = (n.max(1), 2);
    while f * f <= m {
        while m % f == 0 {
            primes.push(f);
            m /= f;
        }
        f += 1;
    }
    if m > 1 {
        primes.push(m);
    }
    for p in primes.into_iter().rev() {
        let smallest = (0..dims.len()).min_by_key(|&i| dims[i]).unwrap_or(0);
        dims[smallest] *= p;
    }
    dims.sort_unstable_by(|a, b| b.cmp(a));
    dims
}

/// Row-major strides of `dims` (the last dimension varies fastest, as in MPI).
pub(crate) fn strides(dims: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// How offsets recorded at `profiled_ranks` grow to `ranks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Growth {
    /// The profile's ranks P (the size the offsets were recorded at).
    pub profiled_ranks: u64,
    /// The ranks N.
    pub ranks: u64,
    /// The program's Cartesian topology, if any.
    pub cartesian: Option<Cartesian>,
}

impl Growth {
    /// The offset `d` recorded at P, at N ranks (not yet reduced modulo N).
    pub fn offset(&self, d: i32) -> i64 {
        let d = i64::from(d);
        let Some(c) = self.cartesian.as_ref().filter(|c| c.dims.len() >= 2) else {
            return d;
        };
        let old: Vec<u64> = c.dims.iter().map(|&x| x.max(1) as u64).collect();
        let new = dims_create(self.ranks, old.len());
        let (so, sn) = (strides(&old), strides(&new));
        for (k, &s) in so.iter().enumerate() {
            if d.unsigned_abs() == s {
                return d.signum() * sn[k] as i64;
            }
        }
        // A neighbour across a periodic wrap, seen from the grid's origin (the reference rank
        // is the lowest with the loop, rank 0 as a rule): (0, …, n_k − 1, …, 0) is −stride_k
        // (on a 4 × 4 grid, +3 is the row's left neighbour, −1).
        let p: u64 = old.iter().product();
        let mut rest = d.rem_euclid(p as i64) as u64;
        let coords: Vec<u64> = so
            .iter()
            .map(|&s| {
                let x = rest / s;
                rest %= s;
                x
            })
            .collect();
        let moved: Vec<usize> = (0..coords.len()).filter(|&k| coords[k] != 0).collect();
        if let [k] = moved[..] {
            if coords[k] == old[k] - 1 {
                return -(sn[k] as i64);
            }
            if coords[k] == 1 {
                return sn[k] as i64;
            }
        }
        d
    }

    /// True when the growth follows a Cartesian grid (else ring offsets).
    pub fn cartesian(&self) -> bool {
        self.cartesian.as_ref().is_some_and(|c| c.dims.len() >= 2)
    }

    /// Whether the recorded offset `d` names both neighbours at once: P/2 of a ring, or the
    /// stride of a Cartesian dimension of size 2.
    fn ambiguous(&self, d: i32) -> bool {
        let m = u64::from(d.unsigned_abs());
        let p = self.profiled_ranks;
        if p % 2 == 0 && m == p / 2 {
            return true;
        }
        let Some(c) = self.cartesian.as_ref().filter(|c| c.dims.len() >= 2) else {
            return false;
        };
        let dims: Vec<u64> = c.dims.iter().map(|&x| x.max(1) as u64).collect();
        (dims.iter().zip(strides(&dims))).any(|(&n, s)| n == 2 && m == s)
    }
}

/// The sends and receives of one iteration at each ambiguous offset (P/2, or the stride of a
/// dimension of 2 ranks), counted per offset to alternate their sign (reset at every
/// iteration): the first send along each such offset goes to +d.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Halves {
    /// (|d|, [sends, receives]); |d| = 0 marks a free entry.
    counts: [(u32, [u32; 2]); HALVES],
}

/// Ambiguous offsets told apart per iteration (a grid has one per dimension, at most); more
/// share the last entry's count.
const HALVES: usize = 8;

impl Halves {
    /// The peer offset at N of a send (`send`) or a receive recorded at offset `d`, counting
    /// it when it is ambiguous.
    pub fn peer(&mut self, d: i32, send: bool, g: &Growth) -> i64 {
        if g.ambiguous(d) {
            let m = d.unsigned_abs();
            let at = (self.counts.iter())
                .position(|&(k, _)| k == m || k == 0)
                .unwrap_or(HALVES - 1);
            self.counts[at].0 = m;
            let count = &mut self.counts[at].1[usize::from(!send)];
            let sign = if *count % 2 == 0 { 1 } else { -1 };
            *count += 1;
            return g.offset(d.abs() * if send { sign } else { -sign });
        }
        g.offset(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cartesian_strides_grow_as_mpi_dims_create() {
        assert_eq!(dims_create(12, 2), vec![4, 3]);
        assert_eq!(dims_create(64, 3), vec![4, 4, 4]);
        assert_eq!(dims_create(7, 2), vec![7, 1]);
        assert_eq!(strides(&[4, 3]), vec![3, 1]);
        let g = Growth {
            profiled_ranks: 4,
            ranks: 64,
            cartesian: Some(Cartesian {
                dims: vec![2, 2],
                periods: vec![true, true],
            }),
        };
        // At 2 × 2 the row stride is 2; at 8 × 8 it is 8; the column stride stays 1.
        assert_eq!(g.offset(2), 8);
        assert_eq!(g.offset(-1), -1);
        assert!(g.cartesian());
    }

    #[test]
    fn the_half_offset_alternates_sends_and_receives_into_a_two_sided_halo() {
        let g = Growth {
            profiled_ranks: 2,
            ranks: 8,
            cartesian: None,
        };
        let mut h = Halves::default();
        let sends: Vec<i64> = (0..3).map(|_| h.peer(1, true, &g)).collect();
        let recvs: Vec<i64> = (0..3).map(|_| h.peer(1, false, &g)).collect();
        assert_eq!(sends, vec![1, -1, 1]);
        // The k-th receive comes from where the k-th send of the partner went, reversed.
        assert_eq!(recvs, vec![-1, 1, -1]);
        // An offset that is not P/2 is the ring offset.
        let g4 = Growth {
            profiled_ranks: 4,
            ..g
        };
        assert_eq!(Halves::default().peer(1, true, &g4), 1);
    }

    /// A 2 × 2 periodic grid: both neighbours along each dimension are one rank, recorded as
    /// +2, +2, +1, +1; grown to 4 × 4 the sends go both ways along each dimension and every
    /// receive comes from the opposite of a send.
    #[test]
    fn a_dimension_of_two_ranks_alternates_like_the_half() {
        let g = Growth {
            profiled_ranks: 4,
            ranks: 16,
            cartesian: Some(Cartesian {
                dims: vec![2, 2],
                periods: vec![true, true],
            }),
        };
        let mut h = Halves::default();
        let sends: Vec<i64> = [2, 2, 1, 1].iter().map(|&d| h.peer(d, true, &g)).collect();
        let recvs: Vec<i64> = [2, 2, 1, 1].iter().map(|&d| h.peer(d, false, &g)).collect();
        assert_eq!(sends, vec![4, -4, 1, -1]);
        assert_eq!(recvs, vec![-4, 4, -1, 1]);
        // At 3 × 2 (strides 2, 1): the 2 columns make 1 a half, the 3 rows leave 2 none; 3 is
        // P/2 by the ring rule.
        let g6 = Growth {
            profiled_ranks: 6,
            ranks: 6,
            cartesian: Some(Cartesian {
                dims: vec![3, 2],
                periods: vec![true, true],
            }),
        };
        assert!(g6.ambiguous(1) && g6.ambiguous(3) && !g6.ambiguous(2));
    }

    /// On a 4 × 4 periodic grid rank 0's neighbours are recorded as −4, +4 (P/2), +3 (its
    /// row's wrap: the left one) and +1: grown to 8 × 8 they are ∓8 and −1, +1, so every send
    /// to +s has its receive from −s.
    #[test]
    fn a_neighbour_across_the_wrap_is_the_negative_stride() {
        let g = Growth {
            profiled_ranks: 16,
            ranks: 64,
            cartesian: Some(Cartesian {
                dims: vec![4, 4],
                periods: vec![true, true],
            }),
        };
        assert_eq!((g.offset(3), g.offset(1), g.offset(-4)), (-1, 1, -8));
        let mut h = Halves::default();
        let sends: Vec<i64> = [-4, 4, 3, 1].iter().map(|&d| h.peer(d, true, &g)).collect();
        assert_eq!(sends, vec![-8, 8, -1, 1]);
        // An offset that is no neighbour stays as recorded.
        assert_eq!(g.offset(5), 5);
    }
}
