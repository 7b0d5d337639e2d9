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
//! `Clocks::quiet_until` without asking the engine; a receive (idle until the message is there,
//! then o) is one question, `Clocks::receive`. When one plan, one process and every rank
//! sending and receiving each round make all ranks alike (`symmetric`), they are one state.
//! Each process runs its block of ranks in closed form ([`round::block`]); under MPI the send
//! ends that cross to another process go only to their receivers' processes, as (receiver, end)
//! pairs in one `MPI_Alltoallv` per round (`Scratch`'s routes), after the sends that meet noise
//! were asked: O(own ranks) per process and round, one process being the block of all ranks.

use jitter_trace::units::format_ns;

use crate::comm::{Collective, Parts};

mod round;

pub(crate) use round::idle_then_work;
use round::{receive, work, Round};
pub use round::{Clocks, Costs};

/// How a collective is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    pub(crate) fn resolved(self) -> Self {
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

impl Costs {
    /// o and ℓ of `m` scaled by `scale`.
    pub fn scaled(m: &CommModel, scale: f64) -> Self {
        Costs {
            o: (m.o_ns * scale).round() as u64,
            l: (m.l_ns * scale).round() as u64,
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
    /// The buffers of the rounds in closed form.
    bufs: round::Buffers,
}

/// The exchange of a round's send ends between processes: each process sends its senders'
/// ends whose receivers another process holds, as (receiver, end) pairs, to that process
/// (`MPI_Alltoallv`); the ends of its own receivers it keeps. A process handles O(its ranks)
/// per round, not O(all ranks), and sends only what crosses.
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
    /// The source's send end of each local receiver whose source another process holds, by
    /// local rank (written for the receivers of the round's incoming pairs).
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
        let bufs = round::Buffers {
            next: zeros(local, "next times")?,
            flags: zeros(local, "round flags")?,
            renewed: zeros(local, "renewed quiet times")?,
        };
        Ok(Scratch {
            sent: zeros(local, "send times")?,
            quiet: zeros(local, "quiet times")?,
            routes,
            bufs,
        })
    }
}

impl Routes {
    /// The process holding global rank `g` (process p holds `bounds[p]..bounds[p + 1]`),
    /// starting from the last answer (`at`): neighbouring ranks mostly have neighbouring partners.
    #[inline]
    fn owner(bounds: &[u64], at: &mut usize, g: u64) -> usize {
        if !(bounds[*at] <= g && g < bounds[*at + 1]) {
            *at = bounds.partition_point(|&b| b <= g) - 1;
        }
        *at
    }

    /// Sends the ends of `round`'s senders among this process's `len` ranks from `lo` whose
    /// receivers another process holds, as (receiver, end) pairs with `end_of(local sender)`, to
    /// those processes, running `meanwhile` while they travel; returns how many values of
    /// `recv` arrived: the (receiver, end) pairs of
    /// this process's receivers whose sources another process holds. Only the pairs that cross
    /// travel (for a dissemination round of distance d on contiguous blocks, min(d, block) per
    /// boundary); every process calls it every round, with or without ranks.
    fn exchange(
        &mut self,
        comm: &dyn Collective,
        round: Round,
        (n, lo, len): (u64, u64, usize),
        end_of: &dyn Fn(usize) -> u64,
        meanwhile: &mut dyn FnMut(),
    ) -> usize {
        let block = (lo, lo + len as u64);
        let Routes {
            bounds,
            send,
            recv,
            to,
            from,
            ..
        } = self;
        let (mut at, mut to_at) = (0, 0);
        to.counts.fill(0);
        from.counts.fill(0);
        round.crossing(true, n, block, |_, dst| {
            to.counts[Self::owner(bounds, &mut to_at, dst)] += 2;
        });
        round.crossing(false, n, block, |_, src| {
            from.counts[Self::owner(bounds, &mut at, src)] += 2;
        });
        to.lay_out();
        let incoming = from.lay_out();
        // The outgoing counts become each destination's fill cursor, then are restored.
        for (c, &d) in to.counts.iter_mut().zip(&to.displs) {
            *c = d;
        }
        round.crossing(true, n, block, |g, dst| {
            let p = Self::owner(bounds, &mut to_at, dst);
            let k = to.counts[p] as usize;
            send[k] = dst;
            send[k + 1] = end_of((g - lo) as usize);
            to.counts[p] += 2;
        });
        for (c, &d) in to.counts.iter_mut().zip(&to.displs) {
            *c -= d;
        }
        comm.exchange_during(send, to, recv, from, meanwhile);
        incoming
    }
}

/// The routes of this process's send ends with the collective that carries them.
struct Crossing<'a> {
    comm: &'a dyn Collective,
    routes: &'a mut Routes,
}

impl round::Exchange for Crossing<'_> {
    fn exchange(
        &mut self,
        round: Round,
        block: (u64, u64, usize),
        end_of: &dyn Fn(usize) -> u64,
        meanwhile: &mut dyn FnMut(),
    ) -> (&[u64], &mut [u64]) {
        let incoming = self
            .routes
            .exchange(self.comm, round, block, end_of, meanwhile);
        let r = &mut *self.routes;
        (&r.recv[..incoming], &mut r.arrived[..block.2])
    }
}

/// Bytes per simulated rank an algorithmic collective adds: the loop's clock and phase start
/// per rank, the send ends, the quiet times and the closed form's next times, flags and renewed
/// quiet times; under MPI ([`MPI_BYTES_PER_RANK`] more) the outgoing and incoming
/// (receiver, end) pairs and the arrived ends.
pub(crate) const BYTES_PER_RANK: usize = 49;

/// Bytes per simulated rank the exchange between processes adds to [`BYTES_PER_RANK`].
pub(crate) const MPI_BYTES_PER_RANK: usize = 40;

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
    let Call { alg, costs, n, lo } = *call;
    let Costs { o, l } = costs;
    if let ([one], [t1]) = (&mut *states, &mut *t) {
        if n > 1 && comm.size() == 1 && clocks.copies_of(one) == n && symmetric(alg, n) {
            // One state for all n ranks: every partner sends when this one does, so its
            // message arrives l after this one's send ends.
            let q = &mut scratch.quiet[0];
            *q = clocks.quiet_until(one, 0);
            for _ in rounds(alg, n) {
                let sent = work(clocks, one, 0, *t1, o, q);
                *t1 = receive(clocks, one, 0, sent + l, o, q);
            }
            return;
        }
    }
    let Scratch {
        sent,
        quiet,
        routes,
        bufs,
    } = scratch;
    let mut crossing = routes.as_mut().map(|routes| Crossing { comm, routes });
    let block = round::Block {
        n,
        lo,
        routes: crossing.as_mut().map(|c| c as &mut dyn round::Exchange),
    };
    let rounds = rounds(alg, n);
    round::block(
        clocks,
        &rounds,
        costs,
        block,
        states,
        t,
        (sent, quiet, bufs),
    );
}

/// Whether every rank sends and receives in every round of `alg` on `n` ranks
/// (dissemination; recursive doubling at a power of two), so that ranks that enter in one
/// state with the same noise leave in one state: one state can stand for them all.
pub(crate) fn symmetric(alg: Algorithm, n: u64) -> bool {
    rounds(alg, n).iter().all(|r| match *r {
        Round::Shift(_) => true,
        Round::Xor(_, p) => p >= n,
        _ => false,
    })
}

/// Rounds of `alg` on `n` ranks (for the estimate).
pub(crate) fn round_count(alg: Algorithm, n: u64) -> u64 {
    match alg {
        Algorithm::Offloaded => 0,
        a => rounds(a, n).len() as u64,
    }
}

#[cfg(test)]
pub(crate) mod tests;
