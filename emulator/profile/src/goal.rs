//! The main loop as LogGOPSim GOAL text (the schedule format of SPCL's `txt2bin`), at any
//! number of ranks N, so that LogGOPSim can simulate the profiled application as it simulates
//! the benchmark's loop (`scripts/compare-loggopsim.sh`).
//!
//! The rules (each stated in the file's header comment):
//! * every rank runs `iterations` iterations of the loop, the ranks outside the profile's main
//!   loop (boundary ranks) included: the skeleton is periodic;
//! * the compute before a call is its slot's mean (`calc`, ns), the same on every rank;
//! * collectives as the predictor's algorithms send them: Barrier by dissemination (1 byte),
//!   Allreduce by recursive doubling over the largest power of two p ≤ N (the N − p others hand
//!   their part to rank − p first and get the result back at the end), Reduce and Bcast by a
//!   binomial tree at the root, Allgather by dissemination with doubling blocks (Bruck),
//!   Alltoall(v) pairwise in N − 1 rounds of bytes/N;
//! * point-to-point (the rule of `peers`, shared with `predict --app`): peers at the same
//!   offset from the rank modulo N (ring offsets); with a
//!   Cartesian topology of d ≥ 2 dimensions, an offset equal to ± a dimension's stride at the
//!   profiled size becomes ± that dimension's stride in `MPI_Dims_create(N, d)`'s grid;
//!   at an even profiled size P the offset P/2 is both +P/2 and −P/2 (at two ranks −1 ≡ +1):
//!   the k-th such send of an iteration goes to (−1)^k · P/2 and the k-th such receive comes
//!   from −(−1)^k · P/2, which makes a two-sided halo of it and keeps every message matched;
//!   `Isend`/`Irecv` start after the previous blocking point, `Wait` completes the oldest
//!   pending one, `Waitall` all of them; `Sendrecv` sends and receives at once;
//! * the tag of a point-to-point message is its iteration; collectives use tags from 2^24 up.

use std::io::{self, Write};

use crate::error::ProfileError;
use crate::peers::{Growth, Halves};
use crate::profile::{Cartesian, MainLoop};
use crate::site::{Call, Site};

/// Tags of collective rounds start here (point-to-point tags are iterations, below it).
const COLLECTIVE_TAGS: u64 = 1 << 24;

/// What to export.
#[derive(Debug, Clone)]
pub struct GoalSpec {
    /// Ranks N.
    pub ranks: u64,
    /// Iterations of the loop.
    pub iterations: u64,
    /// The profile's ranks (the size the offsets were recorded at).
    pub profiled_ranks: u64,
    /// The program's Cartesian topology, if any.
    pub cartesian: Option<Cartesian>,
}

/// How the profile's offsets grow to the export's ranks (`crate::peers`).
fn growth(spec: &GoalSpec) -> Growth {
    Growth {
        profiled_ranks: spec.profiled_ranks,
        ranks: spec.ranks,
        cartesian: spec.cartesian.clone(),
    }
}

/// One rank's schedule being written: labels, and what the next operation waits for.
struct Rank<'w, W: Write> {
    w: &'w mut W,
    r: u64,
    n: u64,
    label: u64,
    deps: Vec<u64>,
    pending: Vec<u64>,
    /// Sends and receives of this iteration at the ambiguous offset P/2.
    halves: Halves,
    /// How offsets grow to N.
    growth: Growth,
}

impl<W: Write> Rank<'_, W> {
    /// Writes `op` after `deps`; its label.
    fn op(&mut self, op: &str) -> io::Result<u64> {
        self.label += 1;
        let l = self.label;
        writeln!(self.w, "l{l}: {op}")?;
        for d in &self.deps {
            writeln!(self.w, "l{l} requires l{d}")?;
        }
        Ok(l)
    }
    /// A blocking operation: the next one waits for it.
    fn blocking(&mut self, op: &str) -> io::Result<()> {
        let l = self.op(op)?;
        self.deps = vec![l];
        Ok(())
    }
    fn peer(&self, offset: i64) -> u64 {
        (self.r as i64 + offset).rem_euclid(self.n as i64) as u64
    }
    /// The rank at the recorded offset `d` (`send`: a send's destination, else a source).
    fn peer_at(&mut self, d: i32, send: bool) -> u64 {
        let offset = self.halves.peer(d, send, &self.growth);
        self.peer(offset)
    }
    /// Sends to and receives from `to`/`from` at once; the next operation waits for both.
    fn exchange(&mut self, to: u64, from: u64, bytes: u64, tag: u64) -> io::Result<()> {
        let s = self.op(&format!("send {bytes}b to {to} tag {tag}"))?;
        let r = self.op(&format!("recv {bytes}b from {from} tag {tag}"))?;
        self.deps = vec![s, r];
        Ok(())
    }
}

fn rounds(n: u64) -> u32 {
    u64::BITS - (n.max(1) - 1).leading_zeros()
}

fn collective<W: Write>(k: &mut Rank<'_, W>, s: &Site, tag0: u64) -> io::Result<()> {
    let (n, r) = (k.n, k.r);
    let b = s.bytes.max(1);
    match s.call {
        Call::Barrier => {
            for i in 0..rounds(n) {
                let d = 1u64 << i;
                k.exchange((r + d) % n, (r + n - d) % n, 1, tag0 + u64::from(i))?;
            }
        }
        Call::Allreduce => {
            let p = 1u64 << (u64::BITS - 1 - n.leading_zeros());
            let extra = n - p;
            if r >= p {
                k.blocking(&format!("send {b}b to {} tag {tag0}", r - p))?;
                k.blocking(&format!("recv {b}b from {} tag {}", r - p, tag0 + 63))?;
                return Ok(());
            }
            if r < extra {
                k.blocking(&format!("recv {b}b from {} tag {tag0}", r + p))?;
            }
            for i in 0..rounds(p) {
                let partner = r ^ (1 << i);
                k.exchange(partner, partner, b, tag0 + 1 + u64::from(i))?;
            }
            if r < extra {
                k.blocking(&format!("send {b}b to {} tag {}", r + p, tag0 + 63))?;
            }
        }
        Call::Reduce | Call::Bcast => {
            let root = u64::try_from(s.root.max(0)).unwrap_or(0) % n;
            let v = (r + n - root) % n;
            let abs = |x: u64| (x + root) % n;
            if s.call == Call::Reduce {
                let mut mask = 1;
                while mask < n {
                    if v & mask != 0 {
                        k.blocking(&format!("send {b}b to {} tag {tag0}", abs(v - mask)))?;
                        break;
                    }
                    if v + mask < n {
                        k.blocking(&format!("recv {b}b from {} tag {tag0}", abs(v + mask)))?;
                    }
                    mask <<= 1;
                }
            } else {
                let mut mask = 1;
                while mask < n {
                    if v & mask != 0 {
                        k.blocking(&format!("recv {b}b from {} tag {tag0}", abs(v - mask)))?;
                        break;
                    }
                    mask <<= 1;
                }
                mask >>= 1;
                while mask > 0 {
                    if v + mask < n {
                        k.blocking(&format!("send {b}b to {} tag {tag0}", abs(v + mask)))?;
                    }
                    mask >>= 1;
                }
            }
        }
        Call::Allgather => {
            for i in 0..rounds(n) {
                let d = 1u64 << i;
                let size = b * d.min(n - d);
                k.exchange((r + d) % n, (r + n - d) % n, size, tag0 + u64::from(i))?;
            }
        }
        Call::Alltoall | Call::Alltoallv => {
            let size = (s.bytes / n).max(1);
            for d in 1..n {
                k.exchange((r + d) % n, (r + n - d) % n, size, tag0)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn point_to_point<W: Write>(k: &mut Rank<'_, W>, s: &Site, it: u64) -> io::Result<()> {
    let b = s.bytes.max(1);
    let sends = matches!(s.call, Call::Send | Call::Isend | Call::Sendrecv);
    let to = s.peer().map(|d| k.peer_at(d, sends));
    match s.call {
        Call::Send => {
            if let Some(p) = to.filter(|p| *p != k.r) {
                k.blocking(&format!("send {b}b to {p} tag {it}"))?;
            }
        }
        Call::Recv => {
            if let Some(p) = to.filter(|p| *p != k.r) {
                k.blocking(&format!("recv {b}b from {p} tag {it}"))?;
            }
        }
        Call::Isend | Call::Irecv => {
            if let Some(p) = to.filter(|p| *p != k.r) {
                let op = if s.call == Call::Isend {
                    format!("send {b}b to {p} tag {it}")
                } else {
                    format!("recv {b}b from {p} tag {it}")
                };
                let l = k.op(&op)?;
                k.pending.push(l);
            }
        }
        Call::Wait if !k.pending.is_empty() => {
            let l = k.pending.remove(0);
            k.deps.push(l);
        }
        // The oldest requests complete (the profile keeps how many, not which).
        Call::Waitany | Call::Waitsome | Call::Testany | Call::Testsome => {
            let n = (s.requests as usize).min(k.pending.len());
            let done: Vec<_> = k.pending.drain(..n).collect();
            k.deps.extend(done);
        }
        Call::Waitall | Call::Testall => {
            let all = std::mem::take(&mut k.pending);
            k.deps.extend(all);
        }
        Call::Sendrecv => {
            let from = s.source().map(|d| k.peer_at(d, false));
            let mut done = Vec::new();
            if let Some(p) = to.filter(|p| *p != k.r) {
                done.push(k.op(&format!("send {b}b to {p} tag {it}"))?);
            }
            if let Some(p) = from.filter(|p| *p != k.r) {
                done.push(k.op(&format!("recv {b}b from {p} tag {it}"))?);
            }
            if !done.is_empty() {
                k.deps = done;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks that the export can be written (tags fit, Alltoall's size is bounded).
fn check(l: &MainLoop, spec: &GoalSpec) -> Result<(), ProfileError> {
    if spec.ranks == 0 || spec.iterations == 0 {
        return Err(ProfileError::Unusable(
            "the GOAL export needs at least one rank and one iteration".into(),
        ));
    }
    let p = l.slots.len() as u64;
    let top = COLLECTIVE_TAGS + (spec.iterations * p + p) * 64;
    if spec.iterations >= COLLECTIVE_TAGS || top > i32::MAX as u64 {
        return Err(ProfileError::Unusable(format!(
            "{} iterations of {p} calls do not fit LogGOPSim's int tags: export fewer iterations",
            spec.iterations
        )));
    }
    let all_to_all = l
        .slots
        .iter()
        .any(|s| matches!(s.site.call, Call::Alltoall | Call::Alltoallv));
    if all_to_all && spec.ranks > 4096 {
        return Err(ProfileError::Unusable(format!(
            "the loop has an Alltoall: {} ranks would take {} messages per iteration; export at \
             most 4096 ranks",
            spec.ranks,
            spec.ranks * (spec.ranks - 1)
        )));
    }
    Ok(())
}

/// Writes the GOAL schedule of `l` under `spec` to `w`.
pub fn write_goal(l: &MainLoop, spec: &GoalSpec, w: &mut impl Write) -> Result<(), ProfileError> {
    check(l, spec)?;
    let io = |e: io::Error| ProfileError::io("the GOAL output", e);
    let n = spec.ranks;
    writeln!(
        w,
        "// jitterbench profile skeleton: {} iterations of {} calls at {n} ranks (profiled at {}); \
         compute = each slot's mean; collectives: dissemination barrier, recursive-doubling \
         allreduce, binomial reduce/bcast, Bruck allgather, pairwise alltoall; peers at their \
         profiled offsets mod N{}",
        spec.iterations,
        l.slots.len(),
        spec.profiled_ranks,
        if spec.cartesian.as_ref().is_some_and(|c| c.dims.len() >= 2) {
            ", Cartesian strides grown by MPI_Dims_create"
        } else {
            ""
        }
    )
    .map_err(io)?;
    writeln!(w, "num_ranks {n}").map_err(io)?;
    let p = l.slots.len() as u64;
    for r in 0..n {
        writeln!(w, "\nrank {r} {{").map_err(io)?;
        let mut k = Rank {
            w: &mut *w,
            r,
            n,
            label: 0,
            deps: Vec::new(),
            pending: Vec::new(),
            halves: Halves::default(),
            growth: growth(spec),
        };
        for it in 0..spec.iterations {
            k.halves = Halves::default();
            for (j, slot) in l.slots.iter().enumerate() {
                let calc = slot.compute.mean_ns.round() as u64;
                if calc > 0 {
                    k.blocking(&format!("calc {calc}")).map_err(io)?;
                }
                let s = &slot.site;
                if s.call.is_collective() {
                    if n > 1 {
                        let tag0 = COLLECTIVE_TAGS + (it * p + j as u64) * 64;
                        collective(&mut k, s, tag0).map_err(io)?;
                    }
                } else {
                    point_to_point(&mut k, s, it).map_err(io)?;
                }
            }
        }
        writeln!(k.w, "}}").map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::dims_create;
    use crate::profile::Slot;
    use crate::site::PEER_NONE;
    use std::collections::{BTreeMap, HashSet};

    fn slot(site: Site, mean_ns: f64) -> Slot {
        Slot::constant(site, mean_ns).unwrap()
    }

    fn solver() -> MainLoop {
        let on = |call| Site {
            comm_size: 4,
            bytes: 64,
            ..Site::of(call)
        };
        let p2p = |call, peer| Site { peer, ..on(call) };
        MainLoop {
            iterations: 3,
            ranks: vec![0],
            compute_share: 1.0,
            kinds: Vec::new(),
            order: Vec::new(),
            slots: vec![
                slot(
                    Site {
                        root: -1,
                        ..p2p(Call::Sendrecv, 1)
                    },
                    1_000.0,
                ),
                slot(p2p(Call::Irecv, -1), 0.0),
                slot(p2p(Call::Isend, 1), 0.0),
                slot(p2p(Call::Irecv, PEER_NONE), 0.0),
                slot(
                    Site {
                        requests: 2,
                        ..Site::of(Call::Waitall)
                    },
                    0.0,
                ),
                slot(p2p(Call::Send, 2), 10.0),
                slot(p2p(Call::Recv, -2), 10.0),
                slot(on(Call::Allreduce), 500.0),
                slot(on(Call::Barrier), 0.0),
                slot(
                    Site {
                        root: 0,
                        ..on(Call::Reduce)
                    },
                    20.0,
                ),
                slot(
                    Site {
                        root: 1,
                        ..on(Call::Bcast)
                    },
                    20.0,
                ),
                slot(on(Call::Allgather), 20.0),
                slot(on(Call::Alltoall), 20.0),
                slot(p2p(Call::Irecv, -1), 5.0),
                slot(p2p(Call::Isend, 1), 0.0),
                slot(
                    Site {
                        requests: 1,
                        ..Site::of(Call::Wait)
                    },
                    5.0,
                ),
                slot(
                    Site {
                        requests: 1,
                        ..Site::of(Call::Wait)
                    },
                    0.0,
                ),
            ],
        }
    }

    /// Every send's (src, dst, tag, bytes) against every receive's; labels defined before use.
    fn check_matched(text: &str) -> (usize, usize) {
        let mut sends = BTreeMap::new();
        let mut recvs = BTreeMap::new();
        let (mut rank, mut calcs, mut labels) = (0u64, 0, HashSet::new());
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "{"] => {
                    rank = r.parse().unwrap();
                    labels.clear();
                }
                [l, "requires", d] => {
                    assert!(
                        labels.contains(*d),
                        "rank {rank}: {l} requires {d} before it"
                    );
                }
                [l, op, size, dir, peer, "tag", tag] => {
                    labels.insert(l.trim_end_matches(':').to_string());
                    let peer: u64 = peer.parse().unwrap();
                    let key = |a, b| (a, b, tag.to_string(), size.to_string());
                    match (*op, *dir) {
                        ("send", "to") => *sends.entry(key(rank, peer)).or_insert(0) += 1,
                        ("recv", "from") => *recvs.entry(key(peer, rank)).or_insert(0) += 1,
                        _ => panic!("{line}"),
                    }
                }
                [l, "calc", _] => {
                    labels.insert(l.trim_end_matches(':').to_string());
                    calcs += 1;
                }
                _ => {}
            }
        }
        assert_eq!(sends, recvs, "unmatched messages");
        (sends.values().sum(), calcs)
    }

    #[test]
    fn every_message_of_the_skeleton_is_matched_at_any_rank_count() {
        let l = solver();
        for n in [1u64, 2, 3, 5, 8, 13] {
            let spec = GoalSpec {
                ranks: n,
                iterations: 3,
                profiled_ranks: 4,
                cartesian: None,
            };
            let mut out = Vec::new();
            write_goal(&l, &spec, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            let (messages, calcs) = check_matched(&text);
            // 12 slots compute (> 0 ns) per iteration, every rank.
            assert_eq!(calcs as u64, n * 3 * 10, "{n} ranks");
            if n == 1 {
                assert_eq!(messages, 0);
            } else {
                assert!(messages > 0);
            }
        }
    }

    #[test]
    fn a_two_rank_halo_becomes_a_two_sided_halo_at_any_size() {
        // Profiled at 2: both halves of the halo were "+1 from +1".
        let half = Site {
            comm_size: 2,
            bytes: 8,
            peer: 1,
            root: 1,
            ..Site::of(Call::Sendrecv)
        };
        let recv = Site { root: -1, ..half };
        let l = MainLoop {
            slots: vec![
                slot(half, 100.0),
                slot(half, 0.0),
                slot(
                    Site {
                        call: Call::Irecv,
                        ..recv
                    },
                    10.0,
                ),
                slot(
                    Site {
                        call: Call::Irecv,
                        ..recv
                    },
                    0.0,
                ),
                slot(
                    Site {
                        call: Call::Isend,
                        ..recv
                    },
                    0.0,
                ),
                slot(
                    Site {
                        call: Call::Isend,
                        ..recv
                    },
                    0.0,
                ),
                slot(
                    Site {
                        requests: 4,
                        ..Site::of(Call::Waitall)
                    },
                    0.0,
                ),
            ],
            ..solver()
        };
        for n in [3u64, 8] {
            let spec = GoalSpec {
                ranks: n,
                iterations: 2,
                profiled_ranks: 2,
                cartesian: None,
            };
            let mut out = Vec::new();
            write_goal(&l, &spec, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            check_matched(&text);
            // Rank 0 sends to 1 and to n − 1 in each half.
            let rank0 = text.split("rank 1 {").next().unwrap();
            assert!(rank0.contains("send 8b to 1 tag 0"), "{rank0}");
            assert!(
                rank0.contains(&format!("send 8b to {} tag 0", n - 1)),
                "{rank0}"
            );
        }
    }

    #[test]
    fn cartesian_strides_grow_as_mpi_dims_create_and_tags_are_bounded() {
        assert_eq!(dims_create(12, 2), vec![4, 3]);
        let spec = GoalSpec {
            ranks: 64,
            iterations: 1,
            profiled_ranks: 4,
            cartesian: Some(Cartesian {
                dims: vec![2, 2],
                periods: vec![true, true],
            }),
        };
        // At 2 × 2 the row stride is 2; at 8 × 8 it is 8; the column stride stays 1.
        assert_eq!(growth(&spec).offset(2), 8);
        assert_eq!(growth(&spec).offset(-1), -1);
        let huge = GoalSpec {
            iterations: 1 << 24,
            ..spec
        };
        assert!(write_goal(&solver(), &huge, &mut Vec::new()).is_err());
    }
}
