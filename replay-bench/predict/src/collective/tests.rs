use super::round::quiet_times;
use super::*;
use crate::comm::Solo;

/// [`run`] round by round in one process: every rank's send, then every rank's receive, each
/// question answered from the rank's quiet time where it covers it (with [`Ref`], which tells
/// none, every question asked). What the closed form ([`round::block`]) must equal.
fn run_rounds<C: Clocks>(clocks: &C, call: &Call, states: &mut [C::Rank], t: &mut [u64]) {
    let Call { alg, costs, n, .. } = *call;
    let Costs { o, l } = costs;
    assert_eq!(states.len() as u64, n, "the walk holds every rank");
    let mut quiet = vec![0; states.len()];
    let mut sent = vec![0; states.len()];
    quiet_times(clocks, states, &mut quiet);
    for round in rounds(alg, n) {
        for (g, ((s, tt), q)) in states
            .iter_mut()
            .zip(t.iter_mut())
            .zip(&mut quiet)
            .enumerate()
        {
            if round.to(g as u64, n).is_some() {
                *tt = work(clocks, s, g, *tt, o, q);
                sent[g] = *tt;
            }
        }
        for (g, ((s, tt), q)) in states
            .iter_mut()
            .zip(t.iter_mut())
            .zip(&mut quiet)
            .enumerate()
        {
            if let Some(src) = round.from(g as u64, n) {
                let arrival = sent[src as usize] + l;
                *tt = receive(clocks, s, g, (*tt).max(arrival), o, q);
            }
        }
    }
}

/// A reference clock: each rank's detours as sorted (start, span), consumed in order with
/// the semantics the engines implement (a detour due before the growing end of work takes
/// its span; idle hides those that end before `t`, one running at `t` holds the rank).
/// Shared with the application's tests (`predict::app::tests`).
pub(crate) struct Ref;
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RefRank {
    pub(crate) detours: Vec<(u64, u64)>,
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
        let r = u64::from(crate::ranks::ceil_log2(n));
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
        let rp = u64::from(crate::ranks::ceil_log2(p));
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

#[test]
fn crossing_messages_are_the_partners_outside_the_block() {
    for alg in [
        Algorithm::Dissemination,
        Algorithm::RecursiveDoubling,
        Algorithm::BinomialTree,
    ] {
        for n in 1..70u64 {
            for round in rounds(alg, n) {
                for (lo, hi) in [
                    (0, n),
                    (0, n / 3),
                    (n / 3, n),
                    (n / 4, n / 2 + 1),
                    (1, n - 1),
                ] {
                    let (lo, hi) = (lo.min(n), hi.clamp(lo.min(n), n));
                    for to in [true, false] {
                        let mut got = Vec::new();
                        round.crossing(to, n, (lo, hi), |g, x| got.push((g, x)));
                        got.sort_unstable();
                        let want: Vec<(u64, u64)> = (lo..hi)
                            .filter_map(|g| {
                                let x = if to { round.to(g, n) } else { round.from(g, n) };
                                x.filter(|&x| x < lo || x >= hi).map(|x| (g, x))
                            })
                            .collect();
                        assert_eq!(got, want, "{alg:?} {n} {round:?} {lo}..{hi} to {to}");
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

    /// The ranks split over processes (threads here, exchanging as MPI would; each process
    /// runs its block in closed form) leave every collective when one process holding them
    /// all lets them leave, in the same states: every algorithm, 2 to 5 processes (some with
    /// no rank when they outnumber the ranks), twice in a row.
    #[test]
    fn a_split_over_processes_changes_no_exit(
        (n, alg, o, l, entries, detours) in case(),
        procs in 2usize..6,
    ) {
        split_against_one_process(procs, alg, Costs { o, l }, &entries[..n], &detours[..n])?;
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]
    /// As `a_split_over_processes_changes_no_exit` over blocks of more ranks than one chunk
    /// holds, so that a round's sources cross both chunk and block boundaries, in one stretch.
    #[test]
    fn a_split_over_processes_changes_no_exit_across_chunks(
        n in 2049usize..5000,
        alg in algorithms(),
        procs in 2usize..4,
        o in 0u64..50,
        l in 0u64..100,
        seed in 0u64..1_000_000,
    ) {
        let (entries, detours) = random_ranks(n, seed);
        split_against_one_process(procs, alg, Costs { o, l }, &entries, &detours)?;
    }
}

/// The ranks split into `procs` blocks, each run by a thread as one process of an MPI run,
/// against one process holding them all, twice in a row: the same exits and the same states.
fn split_against_one_process(
    procs: usize,
    alg: Algorithm,
    costs: Costs,
    entries: &[u64],
    detours: &[Vec<(u64, u64)>],
) -> Result<(), proptest::test_runner::TestCaseError> {
    let ranks = ref_ranks(detours);
    let nn = entries.len() as u64;
    let mut t_solo = entries.to_vec();
    let mut solo = ranks.clone();
    let mut sc = Scratch::new(nn, 0, nn, 1).unwrap();
    let mailbox = Mailbox::new(procs);
    let split: Vec<(Vec<RefRank>, Vec<u64>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..procs)
            .map(|me| {
                let (lo, hi) = crate::ranks::share(nn, procs as u64, me as u64);
                let mut mine = ranks[lo as usize..hi as usize].to_vec();
                let mut t = entries[lo as usize..hi as usize].to_vec();
                let comm = Threads {
                    me,
                    mailbox: &mailbox,
                };
                scope.spawn(move || {
                    let mut sc = Scratch::new(nn, lo, hi, procs).unwrap();
                    let call = Call {
                        alg,
                        costs,
                        n: nn,
                        lo,
                    };
                    for _ in 0..2 {
                        run(&comm, &QuietRef, &call, &mut mine, &mut t, &mut sc);
                    }
                    (mine, t)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let call = Call {
        alg,
        costs,
        n: nn,
        lo: 0,
    };
    for _ in 0..2 {
        run(&Solo, &QuietRef, &call, &mut solo, &mut t_solo, &mut sc);
    }
    let t_split: Vec<u64> = split.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    proptest::prop_assert_eq!(t_solo, t_split);
    let states: Vec<&RefRank> = split.iter().flat_map(|(s, _)| s).collect();
    proptest::prop_assert!(solo.iter().eq(states), "states differ");
    Ok(())
}

proptest::proptest! {
    /// The rounds in closed form (one process, [`run`]) leave every collective where the
    /// round-by-round walk asking every question ([`run_rounds`] on [`Ref`]) does, with every
    /// rank's replay in the same state: every algorithm, random detours, entry times and costs,
    /// rank counts not powers of two, three collectives in a row (each starts from the state
    /// the last left).
    #[test]
    fn rounds_in_closed_form_equal_the_walk((n, alg, o, l, entries, detours) in case()) {
        closed_form_against_walk(n, alg, Costs { o, l }, &entries[..n], &detours[..n])?;
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]
    /// As `rounds_in_closed_form_equal_the_walk` over more ranks than one chunk holds
    /// ([`MIN_CHUNK`](super::super::ranks::MIN_CHUNK)), so that a shift's sources lie in other
    /// chunks and wrap around.
    #[test]
    fn rounds_in_closed_form_equal_the_walk_across_chunks(
        n in 1025usize..2600,
        alg in algorithms(),
        o in 0u64..50,
        l in 0u64..100,
        seed in 0u64..1_000_000,
    ) {
        let (entries, detours) = random_ranks(n, seed);
        closed_form_against_walk(n, alg, Costs { o, l }, &entries, &detours)?;
    }
}

/// [`run`] with quiet times against [`run_rounds`] asking every question, three times in a row:
/// the same exits and the same states.
fn closed_form_against_walk(
    n: usize,
    alg: Algorithm,
    costs: Costs,
    entries: &[u64],
    detours: &[Vec<(u64, u64)>],
) -> Result<(), proptest::test_runner::TestCaseError> {
    let ranks = ref_ranks(detours);
    let nn = n as u64;
    let call = Call {
        alg,
        costs,
        n: nn,
        lo: 0,
    };
    let (mut walk, mut closed) = (ranks.clone(), ranks);
    let (mut tw, mut tc) = (entries.to_vec(), entries.to_vec());
    let mut sc = Scratch::new(nn, 0, nn, 1).unwrap();
    for k in 0..3u64 {
        run_rounds(&Ref, &call, &mut walk, &mut tw);
        run(&Solo, &QuietRef, &call, &mut closed, &mut tc, &mut sc);
        proptest::prop_assert_eq!(&tw, &tc, "collective {}", k);
        proptest::prop_assert!(walk == closed, "states after collective {}", k);
        // The next collective starts some compute later.
        for (a, b) in tw.iter_mut().zip(tc.iter_mut()) {
            *a += 300;
            *b += 300;
        }
    }
    Ok(())
}

/// A random collective: rank count n, algorithm, o, l, 40 entry times and 40 ranks'
/// detours (gap before each, span); the first n of each are used.
#[allow(clippy::type_complexity)]
fn case() -> impl proptest::strategy::Strategy<
    Value = (usize, Algorithm, u64, u64, Vec<u64>, Vec<Vec<(u64, u64)>>),
> {
    (
        1usize..40,
        algorithms(),
        0u64..50,
        0u64..100,
        proptest::collection::vec(0u64..2_000, 40),
        proptest::collection::vec(proptest::collection::vec((1u64..300, 1u64..200), 0..20), 40),
    )
}

/// `n` ranks' entry times and detours (gap before each, span), drawn from `seed`.
/// Every algorithmic collective (what the property tests draw from).
fn algorithms() -> impl proptest::strategy::Strategy<Value = Algorithm> {
    proptest::sample::select(vec![
        Algorithm::Dissemination,
        Algorithm::RecursiveDoubling,
        Algorithm::BinomialTree,
    ])
}

fn random_ranks(n: usize, seed: u64) -> (Vec<u64>, Vec<Vec<(u64, u64)>>) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let entries: Vec<u64> = (0..n).map(|_| rng.random_range(0..2_000)).collect();
    let detours: Vec<Vec<(u64, u64)>> = (0..n)
        .map(|_| {
            let k = rng.random_range(0..6);
            (0..k)
                .map(|_| (rng.random_range(1..800), rng.random_range(1..200)))
                .collect()
        })
        .collect();
    (entries, detours)
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
        self.exchange_during(send, to, recv, from, &mut || {});
    }
    /// As MPI would: `meanwhile` runs after the values were posted, before they are read.
    fn exchange_during(
        &self,
        send: &[u64],
        to: &Parts,
        recv: &mut [u64],
        from: &Parts,
        meanwhile: &mut dyn FnMut(),
    ) {
        let row = &self.mailbox.slots[self.me];
        for (q, slot) in row.iter().enumerate() {
            *slot.lock().unwrap() = to.of(send, q).to_vec();
        }
        meanwhile();
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
