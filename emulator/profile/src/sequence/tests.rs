use super::*;
use proptest::prelude::*;

#[test]
fn a_loop_between_a_prologue_and_an_epilogue_is_found_from_its_first_call() {
    let mut seq = vec![9, 8];
    for _ in 0..50 {
        seq.extend([1, 2, 2, 1]);
    }
    seq.extend([7, 9]);
    let f = detect(&seq).unwrap();
    assert_eq!((f.start, f.end, f.body_len()), (2, 202, 4));
    assert_eq!((f.iterations.len(), f.variants.len()), (50, 1));
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
    let f = detect(&seq).unwrap();
    // 20 bodies of 9 calls: 9 calls spelt out; 2-call bodies and a 3-call variant: 5 calls and
    // 80 iterations' choice (0.81 bit each).
    assert_eq!((f.body_len(), f.start, f.iterations.len()), (9, 0, 20));
}

#[test]
fn a_long_step_with_work_every_twenty_steps_is_one_step_and_a_variant() {
    // 30 calls per step, 4 more every 20th step, 200 steps: one step and its variant spell out
    // 64 calls (and 0.28 bit per step), a 604-call body 604.
    let step: Vec<u32> = (0..30).collect();
    let mut seq = vec![];
    for i in 1..=200 {
        seq.extend(&step);
        if i % 20 == 0 {
            seq.extend([40, 41, 42, 43]);
        }
    }
    seq.extend(&step);
    let f = detect(&seq).unwrap();
    assert_eq!((f.body_len(), f.variants.len()), (30, 2));
    assert_eq!(f.variants[1].1, 34);
    assert_eq!((f.count(0), f.count(1), f.every(1)), (191, 10, Some(20)));
    assert_eq!((f.start, f.end), (0, seq.len()));
}

#[test]
fn no_loop_in_a_sequence_without_repeats() {
    assert_eq!(detect(&[1, 2, 3, 4, 5, 6]), None);
    assert_eq!(detect(&[]), None);
    // Two repetitions are not enough.
    assert_eq!(detect(&[1, 2, 1, 2]), None);
}

#[test]
fn rotations_match_bodies_that_start_elsewhere() {
    assert_eq!(rotation(&[2, 3, 1], &[1, 2, 3]), Some(2));
    assert_eq!(rotation(&[1, 2, 3], &[1, 2, 3]), Some(0));
    assert_eq!(rotation(&[1, 3, 2], &[1, 2, 3]), None);
    assert_eq!(rotation(&[1, 2], &[1, 2, 3]), None);
}

/// A generated program: set-up, `iterations` of a body with a block every k and an output every
/// m, a data-dependent extra call in some iterations of the middle third, an output suffix. Symbols of each
/// part are apart, so the loop's extent is known exactly.
#[derive(Debug, Clone)]
struct Program {
    setup: Vec<u32>,
    body: Vec<u32>,
    every_k: Option<(usize, Vec<u32>)>,
    every_m: Option<(usize, Vec<u32>)>,
    extra_at: Vec<usize>,
    iterations: usize,
    suffix: Vec<u32>,
}

impl Program {
    fn sequence(&self) -> (Vec<u32>, usize, usize) {
        let mut s = self.setup.clone();
        let start = s.len();
        for i in 0..self.iterations {
            s.extend(&self.body);
            if self.extra_at.contains(&i) {
                s.push(600);
            }
            for (k, block) in self.every_k.iter().chain(&self.every_m) {
                if (i + 1) % k == 0 {
                    s.extend(block);
                }
            }
        }
        let end = s.len();
        s.extend(&self.suffix);
        (s, start, end)
    }
}

fn program() -> impl Strategy<Value = Program> {
    let body = (1usize..12).prop_flat_map(|a| proptest::collection::vec(1u32..20, a - 1));
    (
        proptest::collection::vec(200u32..220, 0..30),
        body,
        proptest::option::of((2usize..6, proptest::collection::vec(300u32..320, 1..6))),
        proptest::option::of((7usize..15, proptest::collection::vec(400u32..420, 1..8))),
        proptest::collection::vec(1usize..40, 0..3),
        40usize..100,
        proptest::collection::vec(500u32..520, 0..20),
    )
        .prop_map(|(setup, rest, k, m, extra, it, suffix)| {
            // The body opens with a call of its own (its anchor); the last iteration is plain.
            let mut body = vec![100];
            body.extend(rest);
            let plain = |it: usize| {
                k.as_ref().is_none_or(|(k, _)| it % k != 0)
                    && m.as_ref().is_none_or(|(m, _)| it % m != 0)
            };
            let iterations = (it..).find(|&i| plain(i)).unwrap();
            Program {
                setup,
                body,
                every_k: k,
                every_m: m,
                // Data-dependent calls in the middle third (an irregular first or last unit is
                // set-up or output by the rule, as it should be).
                extra_at: (extra.into_iter())
                    .map(|e| iterations / 3 + e % (iterations / 3).max(1))
                    .collect(),
                iterations,
                suffix,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the variants, the loop found lies within the program's loop, short of either end
    /// by at most one of its longest iterations (where the unit chosen for its shorter
    /// description is longer than the program's body, or a rotation of it, a partial or
    /// one-off unit at either end is left to the set-up or the output), and its iterations tile
    /// it; a loop of one body is that body from the set-up's end, every time.
    #[test]
    fn the_loop_of_a_generated_program_is_its_loop(p in program()) {
        let (s, start, end) = p.sequence();
        let f = detect(&s).expect("a loop");
        let longest = f.variants.iter().map(|v| v.1).max().unwrap_or(0);
        prop_assert!(f.start >= start && f.start - start <= longest, "{:?} starts at {}", f, start);
        prop_assert!(f.end <= end && end - f.end <= longest, "{:?} ends at {}", f, end);
        let mut at = f.start;
        for i in 0..f.iterations.len() {
            let (a, b) = f.iteration(i);
            prop_assert_eq!(a, at);
            at = b;
        }
        prop_assert_eq!(at, f.end);
        if p.every_k.is_none() && p.every_m.is_none() && p.extra_at.is_empty() {
            prop_assert_eq!(f.variants.len(), 1);
            prop_assert_eq!(f.body_len(), p.body.len());
            prop_assert_eq!(f.iterations.len(), p.iterations);
            prop_assert_eq!(f.start, start);
        }
    }
}
