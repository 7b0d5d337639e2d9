//! The profile's main loop at N ranks ([`Skeleton`]): the steps every simulated rank takes in
//! one iteration, each a pass over the ranks — compute, a collective run by
//! [`collective::run`](crate::collective::run), or one side of a message (a send, whose
//! end each rank keeps in a buffer, or a receive, which waits for the matching send's end + ℓ).
//!
//! The rules (stated in the model line):
//! * compute before a call is its slot's mean (see METHOD.md: the recorded spread holds the
//!   profiling machine's own noise);
//! * Barrier: dissemination; Allreduce: recursive doubling; Allgather: dissemination (Bruck's
//!   pattern, whose messages grow with the round: bytes are not modelled, LogP without G);
//!   Reduce: the binomial tree's gather half to rank 0; Bcast: its broadcast half from rank 0;
//!   Alltoall(v): pairwise, N − 1 rounds (send to g + d, receive from g − d), up to
//!   [`ALLTOALL_MAX_RANKS`] ranks;
//! * point-to-point: peers at their recorded offsets grown to N by `jitter_profile::peers`
//!   (ring offsets mod N, Cartesian strides by `MPI_Dims_create`, the P/2 rule); the k-th send
//!   of an iteration to offset d pairs with the k-th receive from offset −d; `Send`/`Isend`
//!   cost o at the call (eager: the sender goes on), a receive costs o once its message is
//!   there, at `Recv`, at the `Wait` that completes its `Irecv` (the oldest pending request),
//!   at `Waitall`/`Testall`, at `Waitany`/`Waitsome`/`Testany`/`Testsome` (the oldest ready pending
//!   requests, as many as they completed) or at a matched probe (`Mprobe`/`Improbe`; its
//!   `Mrecv`/`Imrecv` then receives at once); `Sendrecv` sends, then receives; a message to the
//!   rank itself is none;
//! * requests still pending at the end of an iteration (a receive posted in one iteration and
//!   completed by a wait in the next) are carried into the next: the loop is then built twice
//!   (even and odd iterations, each with its own send buffers), and a carried receive waits at
//!   its wait for the send of the iteration before;
//! * a loop with several kinds of iteration (the profile's `kinds`) is one part per kind,
//!   replayed in the recorded order (every iteration as its kind; a run of fewer iterations than
//!   recorded takes every (recorded ÷ run)-th); nothing is carried between kinds.

use jitter_profile::peers::{Growth, Halves};
use jitter_profile::{Call, MainLoop, Profile};

use crate::collective::{symmetric, Algorithm};
use crate::ranks::ceil_log2;

/// The most ranks at which a loop with an `Alltoall` is simulated (N − 1 rounds per call).
pub(crate) const ALLTOALL_MAX_RANKS: u64 = 4096;

/// Whom a rank sends to or receives from in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// Send to g + d, receive from g − d (mod N).
    Shift(u64),
    /// Binomial gather to rank 0, distance d: g ≡ d (mod 2d) sends to g − d.
    Gather(u64),
    /// Binomial broadcast from rank 0, distance d: g ≡ 0 (mod 2d) sends to g + d.
    Bcast(u64),
}

impl Link {
    /// Whether rank `g` of `n` sends in this step.
    #[inline]
    pub(crate) fn sends(self, g: u64, n: u64) -> bool {
        match self {
            Link::Shift(_) => true,
            Link::Gather(d) => g & (2 * d - 1) == d,
            Link::Bcast(d) => g & (2 * d - 1) == 0 && g + d < n,
        }
    }

    /// The rank `g` of `n` receives from in this step, if any.
    #[inline]
    pub(crate) fn source(self, g: u64, n: u64) -> Option<u64> {
        match self {
            Link::Shift(d) => Some(if g >= d { g - d } else { g + n - d }),
            Link::Gather(d) => (g & (2 * d - 1) == 0 && g + d < n).then_some(g + d),
            Link::Bcast(d) => (g & (2 * d - 1) == d).then(|| g - d),
        }
    }
}

/// One pass over the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// CPU work, replay ns.
    Compute(u64),
    /// A collective by [`collective::run`](crate::collective::run).
    Collective(Algorithm),
    /// Every rank that sends on `link` spends o and keeps the end in buffer `buf`.
    Send { buf: usize, link: Link },
    /// Every rank with a source on `link` waits for its message (the source's end in `buf`,
    /// + ℓ) and spends o.
    Receive { buf: usize, link: Link },
    /// The end of an `MPI_Barrier`: where the preload library counts a phase and resyncs when
    /// the sync schedule says (also at one rank, where the barrier is no message).
    BarrierExit,
}

/// One kind of iteration's steps (a range of [`Skeleton::steps`]) and its compute.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Part {
    pub(crate) steps: std::ops::Range<usize>,
    /// Σ compute of one iteration of it, replay ns.
    pub(crate) compute_ns: u64,
}

/// The main loop at N ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct Skeleton {
    /// Every part's steps, one after the other.
    pub(crate) steps: Vec<Step>,
    /// The parts: one per kind of iteration (two per kind where requests are carried).
    pub(crate) parts: Vec<Part>,
    /// The recorded kinds of iteration in order (empty: every iteration is kind 0).
    pub(crate) order: Vec<u32>,
    /// Each kind is two parts, taken by even and odd iterations (requests carried between).
    pub(crate) doubled: bool,
    /// Send-end buffers one iteration needs.
    pub(crate) buffers: usize,
    /// Σ compute per iteration (the mean over the replayed kinds), replay ns.
    pub(crate) compute_ns: u64,
    /// Every rank does the same in every step (symmetric collectives, shifts only): ranks that
    /// start alike stay alike, and one state may stand for them all.
    pub(crate) symmetric: bool,
    /// What the skeleton leaves out (messages without a peer or a partner).
    pub(crate) warnings: Vec<String>,
}

/// The main loop of `profile`, or why there is none to predict.
pub fn main_loop<'a>(profile: &'a Profile, path: &str) -> anyhow::Result<&'a MainLoop> {
    let l = profile.main_loop.as_ref().ok_or_else(|| {
        anyhow::anyhow!(
            "profile {path}: no main loop found (no repeating sequence of MPI calls in {} \
             rank records): nothing to predict",
            profile.reported.len()
        )
    })?;
    anyhow::ensure!(
        !l.slots.is_empty(),
        "profile {path}: the main loop has no calls"
    );
    Ok(l)
}

impl Skeleton {
    /// The part iteration `i` of a run of `iterations` takes: its recorded kind (every
    /// (recorded ÷ run)-th where the run is shorter, in turn where longer), the even or odd copy
    /// where requests are carried.
    #[inline]
    pub(crate) fn part(&self, i: u64, iterations: u64) -> usize {
        let kind = if self.order.is_empty() {
            0
        } else {
            let len = self.order.len() as u64;
            let at = if iterations < len {
                i * len / iterations.max(1)
            } else {
                i % len
            };
            self.order[at as usize] as usize
        };
        if self.doubled {
            2 * kind + (i & 1) as usize
        } else {
            kind
        }
    }

    /// The mean of `f` over a run's iterations: each part's steps, weighted by its share of
    /// the iterations ([`Skeleton::weights`]).
    pub(crate) fn per_iteration(&self, f: impl Fn(&[Step]) -> f64) -> f64 {
        let w = self.weights();
        (0..self.parts.len())
            .map(|p| w[p] * f(self.steps_of(p)))
            .sum()
    }

    /// The share of a run's iterations each part takes (its kind's share of the recorded
    /// iterations, halved between the copies where requests are carried).
    pub(crate) fn weights(&self) -> Vec<f64> {
        let mut w = vec![0.0; self.parts.len()];
        if self.order.is_empty() {
            let each = 1.0 / self.parts.len() as f64;
            w.fill(each);
            return w;
        }
        let one = 1.0 / self.order.len() as f64;
        for &k in &self.order {
            w[k as usize] += one;
        }
        w
    }

    /// The steps of part `p`.
    pub(crate) fn steps_of(&self, p: usize) -> &[Step] {
        &self.steps[self.parts[p].steps.clone()]
    }
}

/// A point-to-point receive waiting for its completion (an `Irecv` before its `Wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// A receive from offset `from` (mod N), its index among the receives of that channel.
    Receive { channel: u64, k: usize },
    /// A receive carried from the iteration before, whose send's end is in `buf`.
    Carried { channel: u64, buf: usize },
    /// A send (complete at once: eager).
    Send,
}

/// The skeleton being built.
struct Builder {
    n: u64,
    scale: f64,
    steps: Vec<Step>,
    /// Buffers of each channel's sends this iteration, in order (channel = offset mod N).
    sends: std::collections::BTreeMap<u64, Vec<usize>>,
    /// Receives taken so far per channel.
    taken: std::collections::BTreeMap<u64, usize>,
    pending: std::collections::VecDeque<Pending>,
    buffers: usize,
    no_peer: u64,
}

impl Builder {
    fn channel(&self, offset: i64) -> u64 {
        offset.rem_euclid(self.n as i64) as u64
    }

    /// A send to offset `d` at N: its step and its buffer, registered on its channel.
    fn send(&mut self, offset: i64) {
        let c = self.channel(offset);
        if c == 0 {
            return;
        }
        let buf = self.buffers;
        self.buffers += 1;
        self.sends.entry(c).or_default().push(buf);
        self.steps.push(Step::Send {
            buf,
            link: Link::Shift(c),
        });
    }

    /// A receive from offset `e` at N: the channel of its matching sends (−e mod N) and its
    /// index among them; `None` from the rank itself.
    fn post(&mut self, offset: i64) -> Option<Pending> {
        let c = self.channel(-offset);
        if c == 0 {
            return None;
        }
        let k = self.taken.entry(c).or_insert(0);
        *k += 1;
        Some(Pending::Receive {
            channel: c,
            k: *k - 1,
        })
    }

    /// Whether `p` can complete now: a send, or a receive whose matching send is already in
    /// the iteration.
    fn ready(&self, p: &Pending) -> bool {
        match p {
            Pending::Send | Pending::Carried { .. } => true,
            Pending::Receive { channel, k } => {
                self.sends.get(channel).is_some_and(|v| v.len() > *k)
            }
        }
    }

    /// Completes a receive: its step, once its matching send is in the iteration before it.
    fn complete(&mut self, p: Pending, at: &str) -> anyhow::Result<()> {
        let (channel, k) = match p {
            Pending::Receive { channel, k } => (channel, k),
            Pending::Carried { channel, buf } => {
                self.steps.push(Step::Receive {
                    buf,
                    link: Link::Shift(channel),
                });
                return Ok(());
            }
            Pending::Send => return Ok(()),
        };
        let Some(&buf) = self.sends.get(&channel).and_then(|v| v.get(k)) else {
            anyhow::bail!(
                "the main loop's {at} waits for a message from offset -{channel} at {} ranks \
                 whose send (the {}-th to offset +{channel} of the iteration) comes later in \
                 the loop or never: every rank running this loop would wait for ever; not \
                 modelled",
                self.n,
                k + 1
            );
        };
        self.steps.push(Step::Receive {
            buf,
            link: Link::Shift(channel),
        });
        Ok(())
    }

    /// A rooted or all-to-all collective as rounds of messages (buffer 0, reused per round).
    fn rounds(&mut self, links: impl Iterator<Item = Link>) {
        for link in links {
            self.steps.push(Step::Send { buf: 0, link });
            self.steps.push(Step::Receive { buf: 0, link });
        }
    }
}

impl Builder {
    /// One iteration of `slots` as a part, `carried` pending from the iteration before: its
    /// compute, and the requests it leaves pending.
    fn part(
        &mut self,
        slots: &[jitter_profile::Slot],
        growth: &Growth,
        carried: &[Pending],
    ) -> anyhow::Result<(Part, Vec<Pending>)> {
        self.sends.clear();
        self.taken.clear();
        self.pending = carried.iter().copied().collect();
        self.no_peer = 0;
        let first = self.steps.len();
        let mut halves = Halves::default();
        let mut compute_ns = 0u64;
        for (j, slot) in slots.iter().enumerate() {
            let c = (slot.compute.mean_ns.max(0.0) * self.scale).round() as u64;
            if c > 0 {
                self.steps.push(Step::Compute(c));
                compute_ns += c;
            }
            let at = format!("call {} ({})", j + 1, slot.site.call.name());
            call_steps(self, &mut halves, growth, &slot.site, &at)?;
        }
        let part = Part {
            steps: first..self.steps.len(),
            compute_ns,
        };
        Ok((part, self.pending.drain(..).collect()))
    }

    /// Of the requests `left` pending at the end of an iteration, those the next iteration
    /// carries: sends and carried receives as they are, a receive whose send is in the
    /// iteration as a receive of that send's buffer moved by `shift` (the other copy's);
    /// receives without a send in the iteration are dropped (counted in `unsent`).
    fn carry(&self, left: &[Pending], shift: usize, unsent: &mut usize) -> Vec<Pending> {
        let mut out = Vec::new();
        for p in left {
            match *p {
                Pending::Receive { channel, k } => {
                    match self.sends.get(&channel).and_then(|v| v.get(k)) {
                        Some(&buf) => out.push(Pending::Carried {
                            channel,
                            buf: buf + shift,
                        }),
                        None => *unsent += 1,
                    }
                }
                other => out.push(other),
            }
        }
        out
    }
}

impl Skeleton {
    /// `l` (profiled at `growth.profiled_ranks`) at `growth.ranks` ranks, compute scaled by
    /// `scale`.
    pub fn new(l: &MainLoop, growth: &Growth, scale: f64) -> anyhow::Result<Skeleton> {
        let n = growth.ranks;
        anyhow::ensure!(n >= 1, "the rank count must be at least 1");
        let mut b = Builder {
            n,
            scale,
            steps: Vec::new(),
            sends: Default::default(),
            taken: Default::default(),
            pending: Default::default(),
            // Buffer 0: the rounds of rooted and all-to-all collectives.
            buffers: 1,
            no_peer: 0,
        };
        let mut warnings = Vec::new();
        let order = l.kinds_in_order().unwrap_or_default();
        if !order.is_empty() {
            // One part per kind, nothing carried between kinds.
            let mut parts = Vec::with_capacity(l.kinds.len() + 1);
            let kinds = std::iter::once(&l.slots).chain(l.kinds.iter().map(|k| &k.slots));
            for (k, slots) in kinds.enumerate() {
                let (part, left) = b.part(slots, growth, &[])?;
                let mut unsent = 0;
                let carried = b.carry(&left, 0, &mut unsent);
                let kind = if k == 0 {
                    String::new()
                } else {
                    format!("kind {k}: ")
                };
                for w in part_warnings(&b, unsent, carried.len()) {
                    warnings.push(format!("{kind}{w}"));
                }
                parts.push(part);
            }
            let mean = order
                .iter()
                .map(|&k| parts[k as usize].compute_ns)
                .sum::<u64>()
                / order.len() as u64;
            return Ok(finish(b, parts, order, false, mean, warnings));
        }
        let (part, left) = b.part(&l.slots, growth, &[])?;
        let mut unsent = 0;
        let sends = b.buffers - 1;
        let even = b.carry(&left, sends, &mut unsent);
        if !even.iter().any(|p| matches!(p, Pending::Carried { .. })) {
            // Nothing waits across iterations: one part, as built.
            warnings.extend(part_warnings(&b, unsent, left.len() - unsent));
            let compute = part.compute_ns;
            return Ok(finish(b, vec![part], Vec::new(), false, compute, warnings));
        }
        // Requests completed in the next iteration: two copies, each carrying the other's.
        b.steps.clear();
        b.buffers = 1;
        let (a, left_a) = b.part(&l.slots, growth, &even)?;
        let mut unsent_a = 0;
        let odd = b.carry(&left_a, 0, &mut unsent_a);
        let (c, left_c) = b.part(&l.slots, growth, &odd)?;
        let mut unsent_c = 0;
        let _ = b.carry(&left_c, 0, &mut unsent_c);
        warnings.extend(part_warnings(&b, unsent_c, 0));
        let stuck = left_c
            .iter()
            .filter(|p| matches!(p, Pending::Carried { .. }))
            .count();
        if left_c.len() - unsent_c != even.len() || stuck > 0 {
            warnings.push(format!(
                "{} requests per iteration are carried into the next and {} of them are still \
                 pending after it: the later ones are not modelled",
                left_c.len() - unsent_c,
                stuck
            ));
        }
        let compute = a.compute_ns;
        Ok(finish(b, vec![a, c], Vec::new(), true, compute, warnings))
    }
}

/// The steps of one call into `b`.
fn call_steps(
    b: &mut Builder,
    halves: &mut Halves,
    growth: &Growth,
    s: &jitter_profile::Site,
    at: &str,
) -> anyhow::Result<()> {
    let n = b.n;
    let r = ceil_log2(n);
    let dists = (0..r).map(|k| 1u64 << k);
    let mut peer = |d: Option<i32>, send: bool, b: &mut Builder| {
        let p = d.map(|d| halves.peer(d, send, growth));
        if p.is_none() {
            b.no_peer += 1;
        }
        p
    };
    match s.call {
        Call::Barrier | Call::Allgather => {
            if n > 1 {
                b.steps.push(Step::Collective(Algorithm::Dissemination));
            }
            if s.call == Call::Barrier {
                b.steps.push(Step::BarrierExit);
            }
        }
        Call::Allreduce if n > 1 => b.steps.push(Step::Collective(Algorithm::RecursiveDoubling)),
        Call::Reduce => b.rounds(dists.map(Link::Gather)),
        Call::Bcast => b.rounds(dists.rev().map(Link::Bcast)),
        Call::Alltoall | Call::Alltoallv => {
            anyhow::ensure!(
                n <= ALLTOALL_MAX_RANKS,
                "the main loop's {at} is pairwise over N − 1 rounds: at {n} ranks that is \
                 {} messages per call; predict --app models it up to {ALLTOALL_MAX_RANKS} ranks",
                n * (n - 1)
            );
            b.rounds((1..n).map(Link::Shift));
        }
        Call::Send | Call::Isend => {
            if let Some(p) = peer(s.peer(), true, b) {
                b.send(p);
            }
            if s.call == Call::Isend {
                b.pending.push_back(Pending::Send);
            }
        }
        Call::Recv => {
            if let Some(p) = peer(s.peer(), false, b).and_then(|p| b.post(p)) {
                b.complete(p, at)?;
            }
        }
        Call::Irecv => {
            let p = peer(s.peer(), false, b).and_then(|p| b.post(p));
            // A receive from the rank itself or from no one completes at once.
            b.pending.push_back(p.unwrap_or(Pending::Send));
        }
        Call::Wait => {
            if let Some(p) = b.pending.pop_front() {
                b.complete(p, at)?;
            }
        }
        Call::Waitall | Call::Testall => {
            while let Some(p) = b.pending.pop_front() {
                b.complete(p, at)?;
            }
        }
        // The profile keeps how many completed, not which: the oldest of those that can complete
        // here (a send, or a receive whose send is already in the iteration); a receive whose
        // send comes later stays pending for a later wait (a Waitsome returns what is ready).
        Call::Waitany | Call::Waitsome | Call::Testany | Call::Testsome => {
            let mut left = s.requests;
            let mut i = 0;
            while left > 0 && i < b.pending.len() {
                if b.ready(&b.pending[i]) {
                    if let Some(p) = b.pending.remove(i) {
                        b.complete(p, at)?;
                    }
                    left -= 1;
                } else {
                    i += 1;
                }
            }
        }
        // A matching probe waits for the message; its `Mrecv`/`Imrecv` then receives it at once.
        Call::Mprobe | Call::Improbe => {
            if let Some(p) = peer(s.peer(), false, b).and_then(|p| b.post(p)) {
                b.complete(p, at)?;
            }
        }
        Call::Imrecv => b.pending.push_back(Pending::Send),
        Call::Sendrecv => {
            if let Some(p) = peer(s.peer(), true, b) {
                b.send(p);
            }
            if let Some(p) = peer(s.source(), false, b).and_then(|p| b.post(p)) {
                b.complete(p, at)?;
            }
        }
        // One rank: a collective is no message; Finalize ends the program, not an iteration; a
        // plain probe's message is received by the receive after it; `Mrecv`'s at its probe.
        Call::Allreduce | Call::Finalize | Call::Probe | Call::Iprobe | Call::Mrecv => {}
    }
    Ok(())
}

/// What an iteration just built leaves out: `unsent` receives without a send in the
/// iteration, `never` requests no wait of the loop completes.
fn part_warnings(b: &Builder, unsent: usize, never: usize) -> Vec<String> {
    let mut warnings = Vec::new();
    if b.no_peer > 0 {
        warnings.push(format!(
            "{} point-to-point calls per iteration have no peer (MPI_ANY_SOURCE or \
             MPI_PROC_NULL): not modelled",
            b.no_peer
        ));
    }
    let unmatched: usize = (b.sends.iter())
        .map(|(c, v)| v.len().saturating_sub(b.taken.get(c).copied().unwrap_or(0)))
        .sum();
    if unmatched > 0 {
        warnings.push(format!(
            "{unmatched} sends per iteration have no matching receive at {} ranks: each costs \
             its sender o, nobody waits for it",
            b.n
        ));
    }
    if unsent > 0 {
        warnings.push(format!(
            "{unsent} receives per iteration have no matching send at {} ranks (the profiled \
             rank receives more messages on a channel than it sends on it, and every rank \
             replays its calls): they cost nothing",
            b.n
        ));
    }
    if never > 0 {
        warnings.push(format!(
            "{never} requests per iteration are never waited for: their receives cost nothing"
        ));
    }
    warnings
}

/// The skeleton of the built parts.
fn finish(
    b: Builder,
    parts: Vec<Part>,
    order: Vec<u32>,
    doubled: bool,
    compute_ns: u64,
    warnings: Vec<String>,
) -> Skeleton {
    let n = b.n;
    let symmetric = b.steps.iter().all(|s| match s {
        Step::Collective(a) => symmetric(*a, n),
        Step::Send { link, .. } | Step::Receive { link, .. } => matches!(link, Link::Shift(_)),
        Step::Compute(_) | Step::BarrierExit => true,
    });
    Skeleton {
        steps: b.steps,
        parts,
        order,
        doubled,
        buffers: b.buffers,
        compute_ns,
        symmetric,
        warnings,
    }
}
