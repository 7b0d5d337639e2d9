//! The main loop of a sequence of calls, as a real time-step loop has one: a set-up prefix, then
//! iterations that mostly repeat one body while some vary (extra work every k steps, output every
//! m, a data-dependent call), then an output suffix. The sequence given is of call *shapes*
//! (`profile` maps a site to its call, communicator size, peer and root, leaving bytes and
//! request counts out), so that message sizes changing from step to step do not break the loop.
//!
//! The search ([`detect`]):
//! 1. for each period p (1 ≤ p ≤ [`MAX_PERIOD`], at least [`MIN_REPEATS`] repeats), the number
//!    of calls equal to the call p before them (the score); the candidates are the periods no
//!    divisor of which scores as well (a multiple of a period repeats no better), best first,
//!    at most [`CANDIDATES`];
//! 2. for a candidate p, its body is its earliest threefold repetition's first p calls (and, tried
//!    too, its longest repetition's), rotated to where a rotation of them first occurs; the
//!    iterations are cut where the body's shortest unique opening (its anchor, at most
//!    [`MAX_ANCHOR`] calls) occurs; each iteration is a *variant* (its exact sequence of shapes);
//!    a variant seen twice or more is regular, and the loop runs from the first regular
//!    iteration to the last (a final iteration not followed by an anchor counts when it begins
//!    with a regular variant); what lies before is the set-up, after it the output;
//! 3. of the candidates, the loop whose description is shortest in bits — the calls of its
//!    distinct variants and every call outside the loop spelt out (log₂ of the alphabet of
//!    shapes each), and each iteration's variant (the variants' empirical entropy) — is the main
//!    loop (minimum description length: a time step with extra work every 20 steps is one body
//!    and a variant, not one body 20 steps long, when that says it in fewer bits).
//!
//! The dominant variant is the loop's body (its calls are the profile's slots); the others are
//! reported with their shares and how often they come (every k iterations, or irregularly).
//! Cost: O(n · MAX_PERIOD) for the scores, O(n · MAX_ANCHOR) per candidate; once, at merge time.

use std::collections::HashMap;

/// Longest loop body looked for, in calls.
pub(crate) const MAX_PERIOD: usize = 1024;
/// Iterations a loop needs to be called one.
pub(crate) const MIN_REPEATS: usize = 3;
/// Candidate periods whose segmentation is tried.
pub(crate) const CANDIDATES: usize = 12;
/// Longest anchor (the body's unique opening), in calls.
pub(crate) const MAX_ANCHOR: usize = 64;

/// A main loop found in a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Index of the loop's first call (the calls before it are the set-up).
    pub start: usize,
    /// One past the loop's last call (the calls from it on are the output).
    pub end: usize,
    /// Each iteration's first call and its variant (an index into `variants`), in order.
    pub iterations: Vec<(usize, usize)>,
    /// The distinct variants: (first call of its first occurrence, calls); the dominant first.
    pub variants: Vec<(usize, usize)>,
    /// The period the search started from (the body's length before variants).
    pub period: usize,
}

impl Found {
    /// Calls in the loop.
    pub fn covered(&self) -> usize {
        self.end - self.start
    }
    /// Calls of the dominant variant (the loop's body).
    pub(crate) fn body_len(&self) -> usize {
        self.variants[0].1
    }
    /// The calls of iteration `i`: (first, end).
    #[cfg(test)]
    pub(crate) fn iteration(&self, i: usize) -> (usize, usize) {
        let (first, v) = self.iterations[i];
        (first, first + self.variants[v].1)
    }
    /// Iterations of variant `v`.
    pub fn count(&self, v: usize) -> usize {
        self.iterations.iter().filter(|(_, w)| *w == v).count()
    }
    /// How often variant `v` recurs: `Some(k)` when every gap between its iterations is k.
    pub fn every(&self, v: usize) -> Option<usize> {
        let at: Vec<usize> = (self.iterations.iter().enumerate())
            .filter(|(_, (_, w))| *w == v)
            .map(|(i, _)| i)
            .collect();
        let gaps: Vec<usize> = at.windows(2).map(|w| w[1] - w[0]).collect();
        let first = *gaps.first()?;
        gaps.iter().all(|&g| g == first).then_some(first)
    }
}

/// The number of calls equal to the call `p` before them, for every p up to `max`.
fn scores(s: &[u32], max: usize) -> Vec<usize> {
    let n = s.len();
    let mut out = vec![0; max + 1];
    for (p, o) in out.iter_mut().enumerate().skip(1) {
        *o = (0..n - p).filter(|&i| s[i] == s[i + p]).count();
    }
    out
}

/// The candidate periods, best score first: each scores more than every divisor of it.
fn candidates(sc: &[usize]) -> Vec<usize> {
    let mut c: Vec<usize> = (1..sc.len())
        .filter(|&p| sc[p] > 0)
        .filter(|&p| (1..p).all(|q| p % q != 0 || sc[q] < sc[p]))
        .collect();
    c.sort_by_key(|&p| (std::cmp::Reverse(sc[p]), p));
    c.truncate(CANDIDATES);
    c
}

/// The first call of the earliest stretch in which a body of `p` calls repeats
/// [`MIN_REPEATS`] times: where the loop first runs, so that its body starts where the
/// program's iterations start.
fn first_repeat(s: &[u32], p: usize) -> Option<usize> {
    let need = (MIN_REPEATS - 1) * p;
    let mut run = 0;
    for i in 0..s.len() - p {
        run = if s[i] == s[i + p] { run + 1 } else { 0 };
        if run == need {
            return Some(i + 1 - need);
        }
    }
    None
}

/// The first call of the longest stretch in which every call equals the call `p` before it.
fn longest_repeat(s: &[u32], p: usize) -> usize {
    let (mut run, mut run_start, mut top, mut top_start) = (0, 0, 0, 0);
    for i in 0..s.len() - p {
        if s[i] == s[i + p] {
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
    top_start
}

/// The earliest `i ≤ before` at which `s[i..i + p]` is a rotation of `s[before..before + p]`:
/// the body rotated to start where the program's first iteration does (a data-dependent call in
/// the first iterations delays the first clean repeat, not the loop).
fn earliest_rotation(s: &[u32], before: usize, p: usize) -> usize {
    let body = &s[before..before + p];
    (0..before)
        .find(|&i| {
            (0..p)
                .filter(|&r| body[r] == s[i])
                .any(|r| (0..p).all(|j| s[i + j] == body[(r + j) % p]))
        })
        .unwrap_or(before)
}

/// The shortest opening of `body` that occurs nowhere else in it (cyclically).
fn anchor(body: &[u32]) -> Option<usize> {
    let p = body.len();
    (1..=MAX_ANCHOR.min(p)).find(|&q| (1..p).all(|r| (0..q).any(|j| body[(r + j) % p] != body[j])))
}

/// The loop of the sequence cut at the occurrences of `body`'s anchor, and its description's
/// length; `None` when fewer than [`MIN_REPEATS`] iterations are regular.
fn segment(s: &[u32], body: &[u32], period: usize) -> Option<(Found, f64)> {
    let q = anchor(body)?;
    let open = &body[..q];
    let cuts: Vec<usize> = (0..=s.len() - q)
        .filter(|&i| &s[i..i + q] == open)
        .collect();
    if cuts.len() < MIN_REPEATS {
        return None;
    }
    // Variants by content; a segment is (first call, variant).
    let mut ids: HashMap<&[u32], usize> = HashMap::new();
    let mut firsts: Vec<(usize, usize)> = Vec::new();
    let mut segs: Vec<(usize, usize)> = Vec::new();
    for w in cuts.windows(2) {
        let seg = &s[w[0]..w[1]];
        let id = *ids.entry(seg).or_insert_with(|| {
            firsts.push((w[0], seg.len()));
            firsts.len() - 1
        });
        segs.push((w[0], id));
    }
    let mut counts = vec![0usize; firsts.len()];
    for &(_, v) in &segs {
        counts[v] += 1;
    }
    // The last cut: an iteration if a regular variant begins there (the longest that fits).
    let last = *cuts.last().expect("at least MIN_REPEATS cuts");
    let tail = (0..firsts.len())
        .filter(|&v| counts[v] >= 2)
        .filter(|&v| {
            let (f, len) = firsts[v];
            last + len <= s.len() && s[last..last + len] == s[f..f + len]
        })
        .max_by_key(|&v| firsts[v].1);
    if let Some(v) = tail {
        segs.push((last, v));
        counts[v] += 1;
    }
    let regular = |&(_, v): &(usize, usize)| counts[v] >= 2;
    let a = segs.iter().position(regular)?;
    let b = segs.iter().rposition(regular)?;
    let segs = &segs[a..=b];
    if segs.len() < MIN_REPEATS {
        return None;
    }
    // Renumber the variants of the loop, the most frequent first (ties: the first seen).
    let mut used: Vec<usize> = Vec::new();
    for &(_, v) in segs {
        if !used.contains(&v) {
            used.push(v);
        }
    }
    let within = |v: usize| segs.iter().filter(|(_, w)| *w == v).count();
    used.sort_by_key(|&v| std::cmp::Reverse(within(v)));
    if within(used[0]) < 2 {
        return None;
    }
    let iterations: Vec<(usize, usize)> = (segs.iter())
        .map(|&(f, v)| (f, used.iter().position(|&u| u == v).expect("used")))
        .collect();
    let variants: Vec<(usize, usize)> = used.iter().map(|&v| firsts[v]).collect();
    let start = segs[0].0;
    let (lf, lv) = *segs.last().expect("non-empty");
    let end = lf + firsts[lv].1;
    let found = Found {
        start,
        end,
        iterations,
        variants,
        period,
    };
    // Bits: each call spelt out (a variant's, or one outside the loop) is a symbol of the
    // sequence's alphabet; each iteration says its variant (the variants' empirical entropy).
    let mut alphabet: Vec<u32> = s.to_vec();
    alphabet.sort_unstable();
    alphabet.dedup();
    let w = ((alphabet.len() + 1) as f64).log2();
    let n = found.iterations.len() as f64;
    let entropy: f64 = (0..found.variants.len())
        .map(|v| found.count(v) as f64 / n)
        .map(|q| -q * q.log2())
        .sum();
    let spelt = found.variants.iter().map(|v| v.1).sum::<usize>() + (s.len() - found.covered());
    let cost = w * spelt as f64 + n * entropy;
    Some((found, cost))
}

/// The main loop of `s` (a sequence of call shapes), if one repeats at least [`MIN_REPEATS`]
/// times: the candidate whose description is shortest (ties: the one covering more calls, then
/// the shorter body).
pub fn detect(s: &[u32]) -> Option<Found> {
    let n = s.len();
    let max = MAX_PERIOD.min(n / MIN_REPEATS);
    if max == 0 {
        return None;
    }
    let sc = scores(s, max);
    let mut best: Option<(Found, f64)> = None;
    for p in candidates(&sc) {
        // Two bodies per period: where it first runs three times (rotated to its earliest
        // occurrence), and its longest run (a set-up that repeats a call of its own comes first).
        let first = first_repeat(s, p).map(|at| earliest_rotation(s, at, p));
        let longest = earliest_rotation(s, longest_repeat(s, p), p);
        for at in first
            .into_iter()
            .chain((first != Some(longest)).then_some(longest))
        {
            let Some((f, cost)) = segment(s, &s[at..at + p], p) else {
                continue;
            };
            let better = best.as_ref().is_none_or(|(b, c)| {
                let key = |f: &Found| (std::cmp::Reverse(f.covered()), f.body_len());
                cost < *c - 1e-9 || (cost <= *c + 1e-9 && key(&f) < key(b))
            });
            if better {
                best = Some((f, cost));
            }
        }
    }
    best.map(|(f, _)| f)
}

/// The rotation `r` such that `body` rotated left by `r` equals `reference`, if any.
pub(crate) fn rotation<T: PartialEq>(body: &[T], reference: &[T]) -> Option<usize> {
    let p = body.len();
    if p != reference.len() {
        return None;
    }
    (0..p.max(1)).find(|&r| (0..p).all(|j| body[(j + r) % p] == reference[j]))
}

#[cfg(test)]
mod tests;
