//! Collectives as algorithms in the predictor's virtual time: the messages of a dissemination
//! barrier, a recursive-doubling allreduce or a binomial tree, each costing LogP-style overheads
//! on the ranks' own replay clocks, so that a detour met during a round delays the rank's next
//! message and passes from rank to rank through the rounds.
//!
//! Model of one message from rank a to rank b (replay ns, scaled by S like everything else):
//! - a sends at its time `t_a`: CPU work `o`, detours landing in it take their span (as compute):
//!   the send ends at `s_a = work_a(t_a, o)`;
//! - the message travels `ℓ` and arrives at `s_a + ℓ`;
//! - b handles it once it is free and the message is there: idle until `max(t_b, s_a + ℓ)`
//!   (a detour running then holds b until its end, one that ended before costs nothing), then
//!   CPU work `o`.
//!
//! One dissemination round without noise therefore costs `2o + ℓ`; a barrier of N ranks
//! `⌈log₂ N⌉ · (2o + ℓ)`. `offloaded` keeps the fixed-latency model (a barrier in hardware or
//! in the NIC: `⌈log₂ N⌉ · stage`, no CPU involved) and is run by the phase loop in `des`.
//!
//! Every round is two passes over the ranks (the senders, then the receivers), each touching a
//! rank at most once: O(N) per round and O(N log N) per collective, rayon over chunks of ranks.
//!
//! A question whose window ends before the rank's next injection is due is answered from
//! `Clocks::quiet_until` without asking the engine. When one plan, one process and every rank
//! sending and receiving each round make all ranks alike (`symmetric`), they are one state.
//! Under MPI each round's send ends go only to their receivers' processes, as (receiver, end)
//! pairs in one `MPI_Alltoallv` (`Scratch`'s routes): O(own ranks) per process and round.

use jitter_trace::units::format_ns;
use rayon::prelude::*;

use crate::comm::{Collective, Parts};

/// How a collective is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Algorithm {
    /// Dissemination for a barrier, recursive doubling for an allreduce.
    Auto,
    /// Fixed latency `⌈log₂ N⌉ · --barrier-stage-ns`, no CPU involved (hardware or NIC
    /// offload, as Blue Gene/L's barrier network); the predictor's model before collectives
    /// became algorithms.
    Offloaded,
    /// Round k: send to rank + 2^k, receive from rank − 2^k (mod N); ⌈log₂ N⌉ rounds.
    Dissemination,
    /// Round k: exchange with rank XOR 2^k among the largest power of two p ≤ N ranks; the
    /// N − p others first hand their part to rank − p and get the result back at the end.
    RecursiveDoubling,
    /// Gather up a binomial tree to rank 0, then broadcast down it: 2 ⌈log₂ N⌉ rounds.
    BinomialTree,
}

impl Algorithm {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Offloaded => "offloaded",
            Algorithm::Dissemination => "dissemination",
            Algorithm::RecursiveDoubling => "recursive-doubling",
            Algorithm::BinomialTree => "binomial-tree",
        }
    }
}

/// What one phase of the benchmark loop does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LoopShape {
    /// Algorithm 1 of paper 001: barrier; compute q; barrier (qtb from the first barrier's exit).
    #[default]
    BarrierComputeBarrier,
    /// compute q; barrier (a bulk-synchronous step; qtb is the whole step).
    ComputeBarrier,
    /// compute q; allreduce of one small value (an iterative solver's residual check).
    ComputeAllreduce,
}

impl LoopShape {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            LoopShape::BarrierComputeBarrier => "barrier-compute-barrier",
            LoopShape::ComputeBarrier => "compute-barrier",
            LoopShape::ComputeAllreduce => "compute-allreduce",
        }
    }

    /// True when the loop's collective is an allreduce (else a barrier).
    pub fn allreduce(self) -> bool {
        self == LoopShape::ComputeAllreduce
    }
}

/// The communication model of a prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommModel {
    /// The collective's algorithm (never [`Algorithm::Auto`] once resolved).
    pub algorithm: Algorithm,
    /// The loop.
    pub shape: LoopShape,
    /// CPU overhead o of sending or receiving one message, ns (unscaled).
    pub o_ns: f64,
    /// Wire latency ℓ of one message, ns (unscaled).
    pub l_ns: f64,
}

impl CommModel {
    /// Today's model: Algorithm 1 with an offloaded fixed-latency barrier.
    pub const OFFLOADED: CommModel = CommModel {
        algorithm: Algorithm::Offloaded,
        shape: LoopShape::BarrierComputeBarrier,
        o_ns: 0.0,
        l_ns: 0.0,
    };

    /// Resolves [`Algorithm::Auto`] for the shape: dissemination for a barrier, recursive
    /// doubling for an allreduce.
    pub fn resolved(self) -> Self {
        let algorithm = match (self.algorithm, self.shape.allreduce()) {
            (Algorithm::Auto, false) => Algorithm::Dissemination,
            (Algorithm::Auto, true) => Algorithm::RecursiveDoubling,
            (a, _) => a,
        };
        CommModel { algorithm, ..self }
    }

    /// One line naming the model, for the terminal and the report.
    pub fn describe(&self, stage_ns: f64) -> String {
        let op = if self.shape.allreduce() {
            "allreduce"
        } else {
            "barrier"
        };
        match self.algorithm {
            Algorithm::Offloaded => format!(
                "model: loop {}, {op} offloaded (fixed latency ceil(log2 N) x {}, no noise \
                 during communication)",
                self.shape.name(),
                format_ns(stage_ns)
            ),
            a => format!(
                "model: loop {}, {op} by {} in virtual time (LogP o = {}, l = {}: a round \
                 costs 2o + l = {} without noise; detours delay messages)",
                self.shape.name(),
                a.name(),
                format_ns(self.o_ns),
                format_ns(self.l_ns),
                format_ns(2.0 * self.o_ns + self.l_ns)
            ),
        }
    }
}

/// What a collective asks of one rank's replay clock (replay ns). Implemented by the
/// simulation's engines on their per-rank states; `&self` is what the ranks share.
pub trait Clocks: Sync {
    /// One rank's state.
    type Rank: Send + Sync;
    /// CPU work `work` from `start` on rank `g`: its end (detours landing in it add their span).
    fn work(&self, r: &mut Self::Rank, g: usize, start: u64, work: u64) -> u64;
    /// Rank `g` idle until `t`: when it can act (`t`, or the end of a detour running at `t`).
    fn idle_until(&self, r: &mut Self::Rank, g: usize, t: u64) -> u64;
    /// A time by which rank `g` has nothing due: until the rank is asked a question that
    /// reaches past it, work that ends by it ends on time and idling until it returns at once,
    /// neither changing the state (0: not known).
    #[inline]
    fn quiet_until(&self, _r: &Self::Rank, _g: usize) -> u64 {
        0
    }
    /// Simulated ranks the state stands for (identical replays).
    #[inline]
    fn copies_of(&self, _r: &Self::Rank) -> u64 {
        1
    }
}

/// Scaled (replay ns) o and ℓ of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// o, replay ns.
    pub o: u64,
    /// ℓ, replay ns.
    pub l: u64,
}

impl Costs {
    /// o and ℓ of `m` scaled by `scale`.
    pub fn scaled(m: &CommModel, scale: f64) -> Self {
        Costs {
            o: (m.o_ns * scale).round() as u64,
            l: (m.l_ns * scale).round() as u64,
        }
    }
}

/// One round: whom each rank sends to and whom it receives from (global ranks; `None`: no
/// message). Every message of a round has one sender and one receiver that agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Send to g + d, receive from g − d (mod n).
    Shift(u64),
    /// Exchange with g XOR d, among ranks below p.
    Xor(u64, u64),
    /// Ranks ≥ p hand to g − p.
    Fold(u64),
    /// Ranks below n − p hand back to g + p.
    Unfold(u64),
    /// Binomial gather, distance d: g ≡ d (mod 2d) sends to g − d.
    Gather(u64),
    /// Binomial broadcast, distance d: g ≡ 0 (mod 2d) sends to g + d.
    Bcast(u64),
}

impl Round {
    // Every distance d is a power of two below n and every g < n: no division needed.
    #[inline]
    fn to(self, g: u64, n: u64) -> Option<u64> {
        match self {
            Round::Shift(d) => Some(if g + d >= n { g + d - n } else { g + d }),
            Round::Xor(d, p) => (g < p).then_some(g ^ d),
            Round::Fold(p) => (g >= p).then(|| g - p),
            Round::Unfold(p) => (g + p < n).then_some(g + p),
            Round::Gather(d) => (g & (2 * d - 1) == d).then(|| g - d),
            Round::Bcast(d) => (g & (2 * d - 1) == 0 && g + d < n).then_some(g + d),
        }
    }

    #[inline]
    fn from(self, g: u64, n: u64) -> Option<u64> {
        match self {
            Round::Shift(d) => Some(if g >= d { g - d } else { g + n - d }),
            Round::Xor(d, p) => (g < p).then_some(g ^ d),
            Round::Fold(p) => (g + p < n).then_some(g + p),
            Round::Unfold(p) => (g >= p).then(|| g - p),
            Round::Gather(d) => (g & (2 * d - 1) == 0 && g + d < n).then_some(g + d),
            Round::Bcast(d) => (g & (2 * d - 1) == d).then(|| g - d),
        }
    }
}

/// The rounds of `alg` on `n` ranks, in order.
fn rounds(alg: Algorithm, n: u64) -> Vec<Round> {
    let r = super::ranks::ceil_log2(n);
    let dists = (0..r).map(|k| 1u64 << k);
    match alg {
        Algorithm::Auto | Algorithm::Offloaded | Algorithm::Dissemination => {
            dists.map(Round::Shift).collect()
        }
        Algorithm::RecursiveDoubling => {
            let p = if n.is_power_of_two() {
                n
            } else {
                1u64 << (r - 1)
            };
            let mut v = Vec::new();
            if p < n {
                v.push(Round::Fold(p));
            }
            v.extend((0..super::ranks::ceil_log2(p)).map(|k| Round::Xor(1 << k, p)));
            if p < n {
                v.push(Round::Unfold(p));
            }
            v
        }
        Algorithm::BinomialTree => {
            let mut v: Vec<Round> = dists.clone().map(Round::Gather).collect();
            v.extend(dists.rev().map(Round::Bcast));
            v
        }
    }
}

/// Scratch for [`run`]: the send ends of a round of this process's ranks, their quiet times
/// and, under MPI, the routes of the send ends to their receivers' processes. Allocated once
/// per simulation.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Send ends by local rank (by global rank in one process, where they coincide).
    sent: Vec<u64>,
    /// Each rank's [`Clocks::quiet_until`] since its last question (0: ask it).
    quiet: Vec<u64>,
    /// With more than one process: the exchange of send ends.
    routes: Option<Routes>,
}

/// The exchange of a round's send ends between processes: each process sends every one of
/// its senders' ends, as a (receiver, end) pair, to the process holding the receiver
/// (`MPI_Alltoallv`), so a process handles O(its ranks) per round, not O(all ranks).
#[derive(Debug, Default)]
struct Routes {
    /// First global rank of each process, then the rank count: process p holds
    /// `bounds[p]..bounds[p + 1]` (`des::share`).
    bounds: Vec<u64>,
    send: Vec<u64>,
    recv: Vec<u64>,
    /// The outgoing pairs by destination process, and the incoming ones by source.
    to: Parts,
    from: Parts,
    /// The source's send end of each local receiver, by local rank.
    arrived: Vec<u64>,
}

/// A vector of `len` zeros, or an error naming `what` when the memory is not there.
fn zeros<T: Clone + Default>(len: usize, what: &str) -> anyhow::Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| anyhow::anyhow!("cannot allocate the collective's {len} {what}"))?;
    v.resize(len, T::default());
    Ok(v)
}

impl Scratch {
    /// Scratch for this process's ranks `lo..hi` of `n`, split over `procs` processes.
    pub fn new(n: u64, lo: u64, hi: u64, procs: usize) -> anyhow::Result<Self> {
        let local =
            usize::try_from(hi - lo).map_err(|_| anyhow::anyhow!("{n} ranks do not fit"))?;
        let routes = if procs > 1 {
            if 2 * (hi - lo) > i32::MAX as u64 {
                anyhow::bail!(
                    "{} simulated ranks in one process exceed what one MPI message carries \
                     ({} pairs): run more processes",
                    hi - lo,
                    i32::MAX / 2
                );
            }
            let procs64 = procs as u64;
            Some(Routes {
                bounds: (0..=procs64)
                    .map(|p| super::ranks::share(n, procs64, p).0)
                    .collect(),
                send: zeros(2 * local, "outgoing send ends")?,
                recv: zeros(2 * local, "incoming send ends")?,
                to: Parts::new(procs),
                from: Parts::new(procs),
                arrived: zeros(local, "arrived send ends")?,
            })
        } else {
            None
        };
        Ok(Scratch {
            sent: zeros(local, "send times")?,
            quiet: zeros(local, "quiet times")?,
            routes,
        })
    }
}

impl Routes {
    /// The process holding global rank `g`, starting from the last answer (`at`): neighbouring
    /// ranks mostly have neighbouring partners.
    #[inline]
    fn owner(&self, at: &mut usize, g: u64) -> usize {
        if !(self.bounds[*at] <= g && g < self.bounds[*at + 1]) {
            *at = self.bounds.partition_point(|&b| b <= g) - 1;
        }
        *at
    }

    /// Sends the ends in `sent` (local ranks from `lo`) of `round`'s senders to their
    /// receivers' processes and fills `arrived` with the ends this process's receivers wait for.
    fn exchange(&mut self, comm: &dyn Collective, round: Round, n: u64, lo: u64, sent: &[u64]) {
        let (mut at, mut to_at) = (0, 0);
        self.to.counts.fill(0);
        self.from.counts.fill(0);
        for g in lo..lo + sent.len() as u64 {
            if let Some(dst) = round.to(g, n) {
                let p = self.owner(&mut to_at, dst);
                self.to.counts[p] += 2;
            }
            if let Some(src) = round.from(g, n) {
                let p = self.owner(&mut at, src);
                self.from.counts[p] += 2;
            }
        }
        self.to.lay_out();
        let incoming = self.from.lay_out();
        // The outgoing counts become each destination's fill cursor, then are restored.
        for (c, &d) in self.to.counts.iter_mut().zip(&self.to.displs) {
            *c = d;
        }
        for (i, &end) in sent.iter().enumerate() {
            let g = lo + i as u64;
            if let Some(dst) = round.to(g, n) {
                let p = self.owner(&mut to_at, dst);
                let k = self.to.counts[p] as usize;
                self.send[k] = dst;
                self.send[k + 1] = end;
                self.to.counts[p] += 2;
            }
        }
        for (c, &d) in self.to.counts.iter_mut().zip(&self.to.displs) {
            *c -= d;
        }
        comm.exchange(&self.send, &self.to, &mut self.recv, &self.from);
        for pair in self.recv[..incoming].chunks_exact(2) {
            self.arrived[(pair[0] - lo) as usize] = pair[1];
        }
    }
}

/// Bytes per simulated rank an algorithmic collective adds: the loop's clock and phase start
/// per rank, the send ends and the quiet times; under MPI ([`MPI_BYTES_PER_RANK`] more) the
/// outgoing and incoming (receiver, end) pairs and the arrived ends.
pub const BYTES_PER_RANK: usize = 32;

/// Bytes per simulated rank the exchange between processes adds to [`BYTES_PER_RANK`].
pub const MPI_BYTES_PER_RANK: usize = 40;

/// One collective as [`run`] carries it out: its algorithm and message costs, over `n` ranks
/// of which this process holds `lo..` (as many as the states it is given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The algorithm (not [`Algorithm::Auto`] or [`Algorithm::Offloaded`]).
    pub alg: Algorithm,
    /// o and ℓ, replay ns.
    pub costs: Costs,
    /// Ranks in all.
    pub n: u64,
    /// First rank this process holds.
    pub lo: u64,
}

/// Runs one collective of `alg` over `n` ranks: this process holds ranks `lo..lo + states.len()`
/// whose times (when each enters the collective) are `t`; on return `t` holds when each leaves.
/// Send ends go to their receivers' processes after every round's sends (`comm`).
pub fn run<C: Clocks>(
    comm: &dyn Collective,
    clocks: &C,
    call: &Call,
    states: &mut [C::Rank],
    t: &mut [u64],
    scratch: &mut Scratch,
) {
    let chunk = super::ranks::chunk_of(states.len());
    let Call { alg, costs, n, lo } = *call;
    let Costs { o, l } = costs;
    // The states changed since the last collective (compute, resync): ask each rank again.
    scratch.quiet.fill(0);
    // A question answered from the rank's quiet time (most of a collective's, which are short),
    // else asked, and the quiet time after it kept.
    let work = |s: &mut C::Rank, g: usize, start: u64, q: &mut u64| {
        if start + o <= *q {
            return start + o;
        }
        let end = clocks.work(s, g, start, o);
        *q = clocks.quiet_until(s, g);
        end
    };
    let idle = |s: &mut C::Rank, g: usize, until: u64, q: &mut u64| {
        if until <= *q {
            return until;
        }
        let ready = clocks.idle_until(s, g, until);
        *q = clocks.quiet_until(s, g);
        ready
    };
    if let ([one], [t1]) = (&mut *states, &mut *t) {
        if n > 1 && comm.size() == 1 && clocks.copies_of(one) == n && symmetric(alg, n) {
            // One state for all n ranks: every partner sends when this one does, so its
            // message arrives l after this one's send ends.
            let q = &mut scratch.quiet[0];
            for _ in rounds(alg, n) {
                let sent = work(one, 0, *t1, q);
                let ready = idle(one, 0, sent + l, q);
                *t1 = work(one, 0, ready, q);
            }
            return;
        }
    }
    for round in rounds(alg, n) {
        let sent_local = &mut scratch.sent[..];
        let quiet = &mut scratch.quiet[..];
        // The senders.
        states
            .par_chunks_mut(chunk)
            .zip(t.par_chunks_mut(chunk))
            .zip(sent_local.par_chunks_mut(chunk))
            .zip(quiet.par_chunks_mut(chunk))
            .enumerate()
            .for_each(|(c, (((sts, ts), ss), qs))| {
                let g0 = lo + (c * chunk) as u64;
                let each = sts.iter_mut().zip(ts.iter_mut().zip(ss)).zip(qs.iter_mut());
                for (i, ((s, (tt, sd)), qt)) in each.enumerate() {
                    let g = g0 + i as u64;
                    if round.to(g, n).is_some() {
                        *tt = work(s, (g - lo) as usize, *tt, qt);
                        *sd = *tt;
                    }
                }
            });
        if let Some(routes) = scratch.routes.as_mut() {
            routes.exchange(comm, round, n, lo, &scratch.sent);
        }
        let (sent, arrived) = match &scratch.routes {
            Some(r) => (&[][..], &r.arrived[..]),
            None => (&scratch.sent[..], &[][..]),
        };
        let quiet = &mut scratch.quiet[..];
        // The receivers.
        states
            .par_chunks_mut(chunk)
            .zip(t.par_chunks_mut(chunk))
            .zip(quiet.par_chunks_mut(chunk))
            .enumerate()
            .for_each(|(c, ((sts, ts), qs))| {
                let g0 = lo + (c * chunk) as u64;
                for (i, ((s, tt), qt)) in sts.iter_mut().zip(ts.iter_mut()).zip(qs).enumerate() {
                    let g = g0 + i as u64;
                    if let Some(src) = round.from(g, n) {
                        let local = (g - lo) as usize;
                        // One process: the source's end by its rank; else as it arrived.
                        let end = if arrived.is_empty() {
                            sent[src as usize]
                        } else {
                            arrived[local]
                        };
                        let arrival = end + l;
                        let ready = idle(s, local, (*tt).max(arrival), qt);
                        *tt = work(s, local, ready, qt);
                    }
                }
            });
    }
}

/// Whether every rank sends and receives in every round of `alg` on `n` ranks
/// (dissemination; recursive doubling at a power of two), so that ranks that enter in one
/// state with the same noise leave in one state: one state can stand for them all.
pub fn symmetric(alg: Algorithm, n: u64) -> bool {
    rounds(alg, n).iter().all(|r| match *r {
        Round::Shift(_) => true,
        Round::Xor(_, p) => p >= n,
        _ => false,
    })
}

/// Rounds of `alg` on `n` ranks (for the estimate).
pub fn round_count(alg: Algorithm, n: u64) -> u64 {
    match alg {
        Algorithm::Offloaded => 0,
        a => rounds(a, n).len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::Solo;

    /// A reference clock: each rank's detours as sorted (start, span), consumed in order with
    /// the semantics the engines implement (a detour due before the growing end of work takes
    /// its span; idle hides those that end before `t`, one running at `t` holds the rank).
    struct Ref;
    #[derive(Debug, Clone, Default)]
    struct RefRank {
        detours: Vec<(u64, u64)>,
        next: usize,
        busy_until: u64,
    }
    impl RefRank {
        fn peek(&self) -> Option<(u64, u64)> {
            self.detours
                .get(self.next)
                .map(|&(d, s)| (d.max(self.busy_until), s))
        }
        fn take(&mut self, d: u64, s: u64) {
            self.next += 1;
            self.busy_until = d + s;
        }
    }
    impl Clocks for Ref {
        type Rank = RefRank;
        fn work(&self, r: &mut RefRank, _: usize, start: u64, work: u64) -> u64 {
            let mut end = start + work;
            while let Some((d, s)) = r.peek() {
                if d >= end {
                    break;
                }
                r.take(d, s);
                end += s;
            }
            end
        }
        fn idle_until(&self, r: &mut RefRank, _: usize, t: u64) -> u64 {
            while let Some((d, s)) = r.peek() {
                if d >= t {
                    break;
                }
                r.take(d, s);
                if d + s > t {
                    return d + s;
                }
            }
            t
        }
    }

    fn go(alg: Algorithm, o: u64, l: u64, ranks: &mut [RefRank], t: &mut [u64]) {
        let n = ranks.len() as u64;
        let mut sc = Scratch::new(n, 0, n, 1).unwrap();
        run(
            &Solo,
            &Ref,
            &Call {
                alg,
                costs: Costs { o, l },
                n,
                lo: 0,
            },
            ranks,
            t,
            &mut sc,
        );
    }

    #[test]
    fn without_noise_every_algorithm_costs_its_rounds() {
        let (o, l) = (7u64, 5u64);
        let round = 2 * o + l;
        for n in [1u64, 2, 3, 5, 8, 13, 64, 100] {
            let r = u64::from(crate::predict::ranks::ceil_log2(n));
            let mut ranks = vec![RefRank::default(); n as usize];
            let mut t = vec![1000; n as usize];
            go(Algorithm::Dissemination, o, l, &mut ranks, &mut t);
            assert!(
                t.iter().all(|&x| x == 1000 + r * round),
                "dissemination {n}: {t:?}"
            );

            let mut t = vec![1000; n as usize];
            go(Algorithm::RecursiveDoubling, o, l, &mut ranks, &mut t);
            let p = if n.is_power_of_two() { n } else { 1 << (r - 1) };
            let rp = u64::from(crate::predict::ranks::ceil_log2(p));
            let extra = if p < n { 2 } else { 0 };
            let max = *t.iter().max().unwrap();
            if p == n {
                assert!(
                    t.iter().all(|&x| x == 1000 + rp * round),
                    "recursive doubling {n}"
                );
            } else {
                // The fold and unfold add a round each on the critical path at most.
                assert!(max > 1000 + rp * round && max <= 1000 + (rp + extra) * round);
            }

            if n.is_power_of_two() {
                let mut t = vec![1000; n as usize];
                go(Algorithm::BinomialTree, o, l, &mut ranks, &mut t);
                // Gather: the root's last child arrives after r rounds of 2o + l. Broadcast: the
                // rank of all ones is reached along r hops, each the first send of its sender.
                assert_eq!(
                    *t.iter().max().unwrap(),
                    1000 + 2 * r * round,
                    "binomial {n}"
                );
                if n > 1 {
                    // Rank 1 hears last from the root: r sends of o, then l and o.
                    assert_eq!(t[1], 1000 + r * round + r * o + l + o);
                }
            }
        }
    }

    #[test]
    fn one_detour_in_the_first_round_reaches_every_rank_after_log2_n_rounds() {
        // n = 16, rank 0 is in a detour of D when it sends its first message: its message
        // leaves D late and rank 1 ends round 0 D late. A rank late by Y that receives a message
        // late by X ends the round late by max(Y − l, X) (it waits l for the message anyway), so
        // a lateness passes on undiminished along the chain 0 → 1 → 3 → 7 → 15 and loses at most
        // l per round elsewhere; dissemination reaches every rank from rank 0 in
        // ceil(log2 n) = 4 rounds. The barrier ends exactly D after the noise-free 4 (2o + l) on
        // rank 15, and every rank is between D − 4l and D late (rank 0, which hears only from
        // ranks never late, at D − 4l).
        let (o, l, d) = (10u64, 30u64, 5_000u64);
        let n = 16usize;
        let mut ranks = vec![RefRank::default(); n];
        ranks[0].detours = vec![(0, d)];
        let mut t = vec![0; n];
        go(Algorithm::Dissemination, o, l, &mut ranks, &mut t);
        let clean = 4 * (2 * o + l);
        assert_eq!(*t.iter().max().unwrap(), clean + d);
        assert_eq!(t[15], clean + d);
        assert_eq!(t[0], clean + d - 4 * l);
        for (g, &x) in t.iter().enumerate() {
            assert!(x >= clean + d - 4 * l && x <= clean + d, "rank {g}: {x}");
        }
    }

    #[test]
    fn a_detour_that_ends_while_the_rank_waits_costs_nothing() {
        // Rank 1 waits for rank 0's late message (rank 0 computes 1000 longer); a detour of 500
        // on rank 1 inside that wait is hidden; one still running when the message arrives holds
        // rank 1 until its end.
        let (o, l) = (10u64, 20u64);
        for (detour, extra) in [((100u64, 500u64), 0u64), ((1_020, 100), 100 - 10)] {
            let mut ranks = vec![RefRank::default(); 2];
            ranks[1].detours = vec![detour];
            let mut t = vec![1_000, 0];
            go(Algorithm::Dissemination, o, l, &mut ranks, &mut t);
            // Rank 0's message arrives at 1000 + o + l = 1030; rank 1 receives until 1040.
            // Detour (1020, 100) runs until 1120 > 1030: rank 1 receives from 1120 to 1130.
            assert_eq!(t[1], 1_040 + extra, "{detour:?}");
        }
    }

    #[test]
    fn every_message_has_a_matching_sender() {
        for alg in [
            Algorithm::Dissemination,
            Algorithm::RecursiveDoubling,
            Algorithm::BinomialTree,
        ] {
            for n in 1..70u64 {
                for round in rounds(alg, n) {
                    for g in 0..n {
                        if let Some(s) = round.from(g, n) {
                            assert!(s < n && round.to(s, n) == Some(g), "{alg:?} {n} {round:?}");
                        }
                        if let Some(d) = round.to(g, n) {
                            assert!(
                                d < n && round.from(d, n) == Some(g),
                                "{alg:?} {n} {round:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// [`Ref`] that also tells its quiet time (the due of its next detour), so that `run` answers
    /// most questions without asking it.
    struct QuietRef;
    impl Clocks for QuietRef {
        type Rank = RefRank;
        fn work(&self, r: &mut RefRank, g: usize, start: u64, work: u64) -> u64 {
            Ref.work(r, g, start, work)
        }
        fn idle_until(&self, r: &mut RefRank, g: usize, t: u64) -> u64 {
            Ref.idle_until(r, g, t)
        }
        fn quiet_until(&self, r: &RefRank, _: usize) -> u64 {
            r.peek().map_or(u64::MAX, |(d, _)| d)
        }
    }

    proptest::proptest! {
        /// Answering from the quiet times changes no exit: every algorithm, random detours,
        /// entry times and costs, twice in a row (the second collective starts from the state
        /// the first left).
        #[test]
        fn quiet_times_change_no_exit((n, alg, o, l, entries, detours) in case()) {
            let ranks = ref_ranks(&detours[..n]);
            let t0: Vec<u64> = entries[..n].to_vec();
            let (mut a, mut b) = (ranks.clone(), ranks);
            let (mut ta, mut tb) = (t0.clone(), t0);
            let (mut sa, mut sb) = (
                Scratch::new(n as u64, 0, n as u64, 1).unwrap(),
                Scratch::new(n as u64, 0, n as u64, 1).unwrap(),
            );
            for _ in 0..2 {
                run(&Solo, &Ref, &Call { alg, costs: Costs { o, l }, n: n as u64, lo: 0 }, &mut a, &mut ta, &mut sa);
                run(&Solo, &QuietRef, &Call { alg, costs: Costs { o, l }, n: n as u64, lo: 0 }, &mut b, &mut tb, &mut sb);
                proptest::prop_assert_eq!(&ta, &tb);
            }
        }

        /// The ranks split over processes (threads here, exchanging as MPI would) leave every
        /// collective when one process holding them all lets them leave: every algorithm, 2 to
        /// 5 processes (some with no rank when they outnumber the ranks), twice in a row.
        #[test]
        fn a_split_over_processes_changes_no_exit(
            (n, alg, o, l, entries, detours) in case(),
            procs in 2usize..6,
        ) {
            let ranks = ref_ranks(&detours[..n]);
            let mut t_solo = entries[..n].to_vec();
            let mut solo = ranks.clone();
            let nn = n as u64;
            let mut sc = Scratch::new(nn, 0, nn, 1).unwrap();
            let mailbox = Mailbox::new(procs);
            let split: Vec<u64> = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..procs)
                    .map(|me| {
                        let (lo, hi) = crate::predict::ranks::share(nn, procs as u64, me as u64);
                        let mut mine = ranks[lo as usize..hi as usize].to_vec();
                        let mut t = entries[lo as usize..hi as usize].to_vec();
                        let comm = Threads { me, mailbox: &mailbox };
                        scope.spawn(move || {
                            let mut sc = Scratch::new(nn, lo, hi, procs).unwrap();
                            for _ in 0..2 {
                                run(&comm, &QuietRef, &Call { alg, costs: Costs { o, l }, n: nn, lo }, &mut mine, &mut t, &mut sc);
                            }
                            t
                        })
                    })
                    .collect();
                workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
            });
            for _ in 0..2 {
                run(&Solo, &QuietRef, &Call { alg, costs: Costs { o, l }, n: nn, lo: 0 }, &mut solo, &mut t_solo, &mut sc);
            }
            proptest::prop_assert_eq!(t_solo, split);
        }
    }

    /// A random collective: rank count n, algorithm, o, l, 40 entry times and 40 ranks'
    /// detours (gap before each, span); the first n of each are used.
    #[allow(clippy::type_complexity)]
    fn case() -> impl proptest::strategy::Strategy<
        Value = (usize, Algorithm, u64, u64, Vec<u64>, Vec<Vec<(u64, u64)>>),
    > {
        (
            1usize..40,
            proptest::sample::select(vec![
                Algorithm::Dissemination,
                Algorithm::RecursiveDoubling,
                Algorithm::BinomialTree,
            ]),
            0u64..50,
            0u64..100,
            proptest::collection::vec(0u64..2_000, 40),
            proptest::collection::vec(proptest::collection::vec((1u64..300, 1u64..200), 0..20), 40),
        )
    }

    /// Reference ranks with the given detours, each a list of (gap before it, span).
    fn ref_ranks(detours: &[Vec<(u64, u64)>]) -> Vec<RefRank> {
        detours
            .iter()
            .map(|list| {
                let mut at = 0;
                let detours = list.iter().map(|&(gap, span)| {
                    at += gap;
                    let d = (at, span);
                    at += span;
                    d
                });
                RefRank {
                    detours: detours.collect(),
                    ..RefRank::default()
                }
            })
            .collect()
    }

    /// The messages in flight of an all-to-all between threads: `slots[from][to]`.
    struct Mailbox {
        slots: Vec<Vec<std::sync::Mutex<Vec<u64>>>>,
        barrier: std::sync::Barrier,
    }

    impl Mailbox {
        fn new(procs: usize) -> Self {
            let row = || {
                (0..procs)
                    .map(|_| std::sync::Mutex::new(Vec::new()))
                    .collect()
            };
            Mailbox {
                slots: (0..procs).map(|_| row()).collect(),
                barrier: std::sync::Barrier::new(procs),
            }
        }
    }

    /// One thread as one process of a split simulation: only [`Collective::exchange`], the one
    /// call [`run`] makes, is answered.
    struct Threads<'a> {
        me: usize,
        mailbox: &'a Mailbox,
    }

    impl Collective for Threads<'_> {
        fn rank(&self) -> usize {
            self.me
        }
        fn size(&self) -> usize {
            self.mailbox.slots.len()
        }
        fn barrier(&self) {
            self.mailbox.barrier.wait();
        }
        fn all_max(&self, _: &mut [f64]) {
            unreachable!("collective::run exchanges send ends only")
        }
        fn all_sum(&self, _: &mut [f64]) {
            unreachable!("collective::run exchanges send ends only")
        }
        fn sum_to_root(&self, _: &mut [f64]) {
            unreachable!("collective::run exchanges send ends only")
        }
        fn broadcast_u64(&self, _: &mut u64) {
            unreachable!("collective::run exchanges send ends only")
        }
        fn gather_records(&self, _: &[u8; crate::comm::RECORD_BYTES]) -> Vec<Vec<u8>> {
            unreachable!("collective::run exchanges send ends only")
        }
        fn exchange(&self, send: &[u64], to: &Parts, recv: &mut [u64], from: &Parts) {
            let row = &self.mailbox.slots[self.me];
            for (q, slot) in row.iter().enumerate() {
                *slot.lock().unwrap() = to.of(send, q).to_vec();
            }
            self.barrier();
            for (q, row) in self.mailbox.slots.iter().enumerate() {
                let got = row[self.me].lock().unwrap();
                // What the sender sent is what this process expected from it.
                assert_eq!(
                    got.len(),
                    from.counts[q] as usize,
                    "from {q} to {}",
                    self.me
                );
                let at = from.displs[q] as usize;
                recv[at..at + got.len()].copy_from_slice(&got);
            }
            self.barrier();
        }
    }
}
