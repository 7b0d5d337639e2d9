//! The stretches of the trace a run replayed: each rank's [`WindowMark`]s (where its replay
//! opened each measured stretch of jitter, and what it had injected by then) gathered into the
//! report's [`ReplayedWindows`], which `predict --windows-of` replays in virtual time (like with
//! like: the same offsets, resyncs and blocks).

use super::replay::WindowMark;
use jitter_predict::comm::Collective;
use jitter_report::report::{ReplayedWindow, ReplayedWindows};

/// Most (windows × ranks) a run records: beyond, the exchange would cost more than it tells
/// (a prediction of the same stretches is meant for the few ranks a real run has).
pub(crate) const MAX_WINDOW_SLOTS: usize = 1 << 20;

/// Values per (window, rank) slot: point, injections, their span, the window's length.
const SLOT: usize = 4;

/// One rank's window with what it injected and how long it lasted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RankWindow {
    /// Phase index (warm-up included) of its first phase.
    pub phase: u64,
    /// Timeline point it started at, trace ns.
    pub point_ns: u64,
    /// Injections executed in it.
    pub injected: u64,
    /// Their span, ns (scaled).
    pub injected_ns: u64,
    /// Its length, replay ns (scaled).
    pub span_ns: u64,
}

/// This rank's windows with what each injected (the counts before the next window, or at the
/// end, `end` = (injections, span) of the whole replay, less those before it) and lasted
/// (a window still open closes at `end_ns`).
pub(crate) fn with_injections(
    marks: &[WindowMark],
    end: (u64, u64),
    end_ns: u64,
) -> Vec<RankWindow> {
    marks
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let (n, ns) = marks
                .get(i + 1)
                .map_or(end, |next| (next.injected_before, next.injected_ns_before));
            let closed = if m.closed_ns == 0 {
                end_ns
            } else {
                m.closed_ns
            };
            RankWindow {
                phase: m.phase,
                point_ns: m.point_ns,
                injected: n.saturating_sub(m.injected_before),
                injected_ns: ns.saturating_sub(m.injected_ns_before),
                span_ns: closed.saturating_sub(m.opened_ns),
            }
        })
        .collect()
}

/// Collective (every rank calls it): the windows of all ranks, the first `kept` of them (those
/// whose phases were measured), on rank 0; `None` on other ranks, when the ranks disagree on the
/// count, or beyond [`MAX_WINDOW_SLOTS`].
pub(crate) fn gather(
    comm: &dyn Collective,
    mine: &[RankWindow],
    kept: usize,
    phases_per_window: u64,
) -> Option<ReplayedWindows> {
    let size = comm.size();
    let w = mine.len();
    let mut counts = [w as f64, -(w as f64)];
    comm.all_max(&mut counts);
    // The same count on every rank (max = −(−min)); all ranks decide alike.
    if counts[0] as usize != w
        || (-counts[1]) as usize != w
        || w.saturating_mul(size) > MAX_WINDOW_SLOTS
    {
        return None;
    }
    let rank = comm.rank();
    let mut slots = vec![0.0f64; w * size * SLOT];
    let mut phases = vec![0.0f64; w];
    for (i, x) in mine.iter().enumerate() {
        let at = (i * size + rank) * SLOT;
        // Trace ns, counts and spans stay far below 2^53: exact in f64.
        slots[at..at + SLOT].copy_from_slice(&[
            x.point_ns as f64,
            x.injected as f64,
            x.injected_ns as f64,
            x.span_ns as f64,
        ]);
        phases[i] = x.phase as f64;
    }
    comm.all_max(&mut slots);
    comm.all_max(&mut phases);
    if rank != 0 {
        return None;
    }
    let windows = (0..w.min(kept))
        .map(|i| {
            let slot = |r: usize, k: usize| slots[(i * size + r) * SLOT + k] as u64;
            ReplayedWindow {
                phase: phases[i] as u64,
                points_ns: (0..size).map(|r| slot(r, 0)).collect(),
                injected: (0..size).map(|r| slot(r, 1)).sum(),
                injected_ns: (0..size).map(|r| slot(r, 2)).sum(),
                span_ns: (0..size).map(|r| slot(r, 3)).sum(),
            }
        })
        .collect();
    Some(ReplayedWindows {
        phases_per_window,
        windows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_predict::comm::Solo;

    fn mark(phase: u64, point_ns: u64, n: u64, ns: u64, open: u64, close: u64) -> WindowMark {
        WindowMark {
            phase,
            point_ns,
            injected_before: n,
            injected_ns_before: ns,
            opened_ns: open,
            closed_ns: close,
        }
    }

    fn win(phase: u64, point_ns: u64, injected: u64, injected_ns: u64, span_ns: u64) -> RankWindow {
        RankWindow {
            phase,
            point_ns,
            injected,
            injected_ns,
            span_ns,
        }
    }

    #[test]
    fn each_window_counts_what_was_injected_until_the_next_or_the_end() {
        let marks = [
            mark(20, 500, 3, 30, 1_000, 6_000),
            mark(120, 9_000, 10, 100, 11_000, 0),
        ];
        assert_eq!(
            with_injections(&marks, (15, 160), 16_500),
            vec![win(20, 500, 7, 70, 5_000), win(120, 9_000, 5, 60, 5_500)]
        );
        assert!(with_injections(&[], (4, 4), 9).is_empty());
    }

    #[test]
    fn one_rank_keeps_the_measured_windows_only() {
        let mine = [
            win(20, 500, 7, 70, 5_000),
            win(120, 9_000, 5, 60, 5_500),
            win(220, 7, 1, 1, 1),
        ];
        let w = gather(&Solo, &mine, 2, 50).unwrap();
        assert_eq!(w.phases_per_window, 50);
        assert_eq!(
            w.windows,
            vec![
                ReplayedWindow {
                    phase: 20,
                    points_ns: vec![500],
                    injected: 7,
                    injected_ns: 70,
                    span_ns: 5_000,
                },
                ReplayedWindow {
                    phase: 120,
                    points_ns: vec![9_000],
                    injected: 5,
                    injected_ns: 60,
                    span_ns: 5_500,
                }
            ]
        );
    }
}
