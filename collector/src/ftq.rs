//! FTQ (fixed time quantum, Sottile and Minnich): count work units per fixed quantum of time,
//! and convert the series to detours (work missing from a quantum = time the CPU was away).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock::{read_counter, Clock};
use crate::error::{refuse, CollectError, Result};
use crate::probe::LoopStats;

/// Length of one FTQ quantum, as the user gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantum {
    /// Counter ticks (`2^18cycles`, `262144cycles`).
    Cycles(u64),
    /// Nanoseconds (`100us`, `50000ns`, `1ms`).
    Nanos(u64),
}

impl Quantum {
    /// Parses `2^N cycles`, `N cycles`, or a time such as `100us`, `1ms`, `50000ns`.
    pub fn parse(text: &str) -> Result<Self> {
        let t = text.trim().replace(' ', "");
        // Overflow and a bad number are both "not a number" to the user.
        let num = |s: &str| -> Option<u64> {
            if let Some((b, e)) = s.split_once('^') {
                let (b, e): (u64, u32) = (b.parse().ok()?, e.parse().ok()?);
                return b.checked_pow(e);
            }
            s.parse().ok()
        };
        let parsed = if let Some(n) = t.strip_suffix("cycles").or_else(|| t.strip_suffix("cyc")) {
            num(n).map(Quantum::Cycles)
        } else if let Some(n) = t.strip_suffix("ns") {
            num(n).map(Quantum::Nanos)
        } else if let Some(n) = t.strip_suffix("us") {
            num(n).map(|v| Quantum::Nanos(v.saturating_mul(1_000)))
        } else if let Some(n) = t.strip_suffix("ms") {
            num(n).map(|v| Quantum::Nanos(v.saturating_mul(1_000_000)))
        } else {
            refuse!(
                "bad quantum {text:?}: give cycles (2^18cycles) or a time (100us, 1ms, 50000ns)"
            )
        };
        let q = parsed
            .ok_or_else(|| CollectError::Refused(format!("bad quantum {text:?}: not a number")))?;
        match q {
            Quantum::Cycles(0) | Quantum::Nanos(0) => refuse!("quantum {text:?} must be positive"),
            _ => Ok(q),
        }
    }

    /// The quantum in counter ticks.
    pub fn ticks(self, clock: &Clock) -> u64 {
        match self {
            Quantum::Cycles(c) => c,
            Quantum::Nanos(ns) => clock.ns_to_ticks(ns).max(1),
        }
    }
}

/// End of the quantum containing `t`, on the grid `origin + k·quantum`.
#[inline(always)]
pub(crate) fn quantum_end(t: u64, origin: u64, quantum: u64) -> u64 {
    origin + ((t.saturating_sub(origin)) / quantum + 1) * quantum
}

/// Runs the FTQ loop: for each quantum, counts counter reads until the quantum's end and calls
/// `on_sample(start, count)`. Stops at `deadline`, on `stop`, or after `max_samples`.
#[inline(never)]
pub fn run<F>(
    quantum: u64,
    origin: u64,
    deadline: u64,
    max_samples: u64,
    stop: &AtomicBool,
    mut on_sample: F,
) -> LoopStats
where
    F: FnMut(u64, u64),
{
    let mut stats = LoopStats::default();
    let mut now = read_counter();
    stats.first = now;
    let mut samples = 0u64;
    while now < deadline && samples < max_samples && !stop.load(Ordering::Relaxed) {
        let start = read_counter();
        let end = quantum_end(start, origin, quantum);
        let mut count = 0u64;
        now = start;
        while now < end {
            count += 1;
            now = read_counter();
        }
        on_sample(start, count);
        stats.iterations += count;
        samples += 1;
    }
    stats.last = now;
    stats
}

/// The most work units an undisturbed quantum holds, measured over `quanta` quanta.
pub(crate) fn full_count(quantum: u64, quanta: u64) -> u64 {
    let stop = AtomicBool::new(false);
    let origin = read_counter();
    let mut best = 0u64;
    let mut first = true;
    run(quantum, origin, u64::MAX, quanta + 1, &stop, |_, c| {
        // The first quantum starts mid-grid; only whole quanta count.
        if !first {
            best = best.max(c);
        }
        first = false;
    });
    best.max(1)
}

/// Turns FTQ samples of one CPU into detours, in ticks: the work missing from each quantum is
/// placed at the quantum's end, the gap between a quantum's end and the next start is added, and
/// touching pieces merge; pieces longer than `threshold` ticks come out as detours.
#[derive(Debug, Clone)]
pub struct FtqConverter {
    quantum: u64,
    origin: u64,
    full: u64,
    threshold: u64,
    prev_end: Option<u64>,
    pending: Option<(u64, u64)>,
}

impl FtqConverter {
    /// A converter for quanta of `quantum` ticks holding `full` units when undisturbed.
    pub fn new(quantum: u64, origin: u64, full: u64, threshold: u64) -> Self {
        FtqConverter {
            quantum,
            origin,
            full: full.max(1),
            threshold,
            prev_end: None,
            pending: None,
        }
    }

    fn piece(&mut self, a: u64, b: u64, out: &mut impl FnMut(u64, u64)) {
        if b <= a {
            return;
        }
        match &mut self.pending {
            Some((_, pe)) if a <= *pe => *pe = (*pe).max(b),
            _ => {
                if let Some((s, e)) = self.pending.take() {
                    if e - s > self.threshold {
                        out(s, e);
                    }
                }
                self.pending = Some((a, b));
            }
        }
    }

    /// The undisturbed work count per quantum currently assumed.
    pub fn full(&self) -> u64 {
        self.full
    }

    /// End of the quantum that begins at `start` (ticks).
    pub(crate) fn quantum_end(&self, start: u64) -> u64 {
        quantum_end(start, self.origin, self.quantum)
    }

    /// Feeds one sample (quantum start, count); completed detours go to `out(start, end)`.
    pub fn push(&mut self, start: u64, count: u64, out: &mut impl FnMut(u64, u64)) {
        let end = quantum_end(start, self.origin, self.quantum);
        if let Some(pe) = self.prev_end {
            if start > pe {
                self.piece(pe, start, out);
            }
        }
        let span = end - start;
        // A quantum that held more work than the calibration saw raises the full count (running
        // maximum, as FTQ's upper class of counts is the undisturbed speed).
        let scaled =
            (u128::from(count) * u128::from(self.quantum) / u128::from(span.max(1))) as u64;
        if span * 2 >= self.quantum && scaled > self.full {
            self.full = scaled;
        }
        let expected = (u128::from(span) * u128::from(self.full) / u128::from(self.quantum)) as u64;
        if count < expected {
            let missing = (u128::from(expected - count) * u128::from(self.quantum)
                / u128::from(self.full)) as u64;
            self.piece(end - missing.min(span), end, out);
        }
        self.prev_end = Some(end);
    }

    /// Emits the last pending detour.
    pub fn finish(&mut self, out: &mut impl FnMut(u64, u64)) {
        if let Some((s, e)) = self.pending.take() {
            if e - s > self.threshold {
                out(s, e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quanta() {
        assert_eq!(
            Quantum::parse("2^18cycles").unwrap(),
            Quantum::Cycles(262_144)
        );
        assert_eq!(
            Quantum::parse("1000 cycles").unwrap(),
            Quantum::Cycles(1000)
        );
        assert_eq!(Quantum::parse("100us").unwrap(), Quantum::Nanos(100_000));
        assert_eq!(Quantum::parse("1ms").unwrap(), Quantum::Nanos(1_000_000));
        for bad in ["", "12", "0ns", "xcycles", "2^99cycles"] {
            assert!(Quantum::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn missing_work_becomes_a_detour_of_the_missing_time() {
        // Quantum 1000 ticks, 100 units when undisturbed (10 ticks per unit), threshold 50.
        let mut c = FtqConverter::new(1000, 0, 100, 50);
        let mut out = Vec::new();
        let mut f = |a, b| out.push((a, b));
        c.push(0, 100, &mut f); // undisturbed
        c.push(1000, 70, &mut f); // 300 ticks missing, placed at the end: [1700, 2000)
        c.push(2000, 99, &mut f); // one unit short: below the threshold
                                  // A detour that crosses the boundary: 200 ticks missing in quantum 3, and quantum 4
                                  // starts 150 ticks late with 15 units missing from the rest of its span.
        c.push(3000, 80, &mut f);
        c.push(4150, 70, &mut f);
        c.finish(&mut f);
        // The 2000 quantum's 10-tick piece does not reach the threshold; [3800, 4150) merges.
        assert_eq!(out, vec![(1700, 2000), (3800, 4150), (4850, 5000)]);
        // A faster whole quantum raises the undisturbed count; a short late one does not.
        let mut c = FtqConverter::new(1000, 0, 100, 50);
        c.push(6600, 300, &mut |_, _| {});
        assert_eq!(c.full(), 100);
        c.push(7000, 110, &mut |_, _| {});
        assert_eq!(c.full(), 110);
    }

    #[test]
    fn the_loop_counts_work_per_quantum() {
        let stop = AtomicBool::new(false);
        let origin = read_counter();
        let mut n = 0;
        let s = run(100_000, origin, u64::MAX, 20, &stop, |_, c| {
            assert!(c > 0);
            n += 1;
        });
        assert_eq!(n, 20);
        assert!(s.iterations > 20 && s.last > s.first);
        assert!(full_count(100_000, 8) > 1);
    }
}
