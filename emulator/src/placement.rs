//! The placement rule: which stream of its node's trace a rank replays and on which timeline
//! (whose start offset it takes), the one rule of the preload library, `replay-bench run` and
//! `replay-bench predict`.
//!
//! The `local`-th rank of a node (0-based) on a trace of s streams replays stream `local mod
//! s`. The first s ranks of the node (copy 0) replay the streams as they were recorded, side
//! by side: they share the node's timeline, so the trace's correlations between CPUs stay.
//! When a node has more ranks than the trace has streams, rank `local` is in copy `local / s`
//! of the trace: ranks c·s … c·s+s−1 replay its s streams side by side again, other CPUs of
//! the same kind whose noise the trace did not record together with the first s. Each further
//! copy takes a timeline of its own, so that under `sync none` its offset is independent (as
//! another node's would be), while `once`, `phase` and `every` still put every rank on one
//! point. Two ranks replaying one stream at one offset would see every detour at the same
//! instant: a correlation no recording showed.

/// Where one rank replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Stream of the node's trace.
    pub stream: usize,
    /// Timeline of the sync schedule (`SyncSchedule::start_offset`'s node): the node itself for
    /// copy 0, its own for each further copy.
    pub timeline: u64,
    /// Copy of the trace on its node: 0 for the first s ranks, `local / s` beyond.
    pub copy: u64,
}

/// Timelines of further copies carry this bit (and not bit 63): they never meet node numbers
/// (rank / k, below 2⁶²) nor the library's host numbers (bit 63 set).
const COPY_BIT: u64 = 1 << 62;

/// The slot of the `local`-th rank of node `node` on a trace of `streams` streams (taken as 1
/// when 0: a trace without streams is refused before this is asked).
pub fn slot(node: u64, local: u64, streams: u64) -> Slot {
    let s = streams.max(1);
    let copy = local / s;
    let timeline = if copy == 0 {
        node
    } else {
        // SplitMix64 of (node, copy): distinct copies of distinct nodes, uniformly spread.
        let mut z = node
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(copy.wrapping_mul(0xBF58_476D_1CE4_E5B9));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z & (COPY_BIT - 1)) | COPY_BIT
    };
    Slot {
        stream: (local % s) as usize,
        timeline,
        copy,
    }
}

/// A node number for `host`, the same in every process (FNV-1a of the name), with bit 63 set so
/// that it never meets the numbers `JITTER_RANKS_PER_NODE` gives: the node of the preload
/// library's ranks on that host when no k is given (and of a prediction of such a run).
pub fn host_node_id(host: &str) -> u64 {
    let h = host.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    h | (1 << 63)
}

/// The sentence reports print when `ranks_per_node` exceeds the trace's `streams`.
pub fn note(ranks_per_node: u64, streams: u64) -> Option<String> {
    (ranks_per_node > streams && streams > 0).then(|| {
        format!(
            "{ranks_per_node} ranks per node on {streams} stream(s): local rank j replays stream \
             j mod {streams}; ranks beyond the first {streams} of a node replay copies of the \
             streams on timelines of their own (independent offsets under sync none; METHOD.md, \
             placement)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SyncMode, SyncSchedule};

    #[test]
    fn the_first_s_ranks_share_the_node_and_further_copies_get_their_own_timelines() {
        // As many ranks as streams: the benchmark's rule, unchanged.
        for local in 0..4 {
            assert_eq!(
                slot(7, local, 4),
                Slot {
                    stream: local as usize,
                    timeline: 7,
                    copy: 0
                }
            );
        }
        // Two ranks on a one-stream trace: both replay stream 0, on different timelines.
        let (a, b) = (slot(0, 0, 1), slot(0, 1, 1));
        assert_eq!((a.stream, b.stream, a.timeline, b.copy), (0, 0, 0, 1));
        assert_ne!(a.timeline, b.timeline);
        // Every timeline of 64 nodes × 16 ranks on 3 streams: copy 0 is the node; the ranks
        // of one further copy share one timeline, distinct from every other copy's, from every
        // node number and from host numbers.
        let mut seen = std::collections::HashMap::new();
        for node in 0..64u64 {
            for local in 0..16u64 {
                let s = slot(node, local, 3);
                assert_eq!((s.stream, s.copy), ((local % 3) as usize, local / 3));
                if s.copy == 0 {
                    assert_eq!(s.timeline, node);
                } else {
                    assert!(s.timeline & COPY_BIT != 0 && s.timeline >> 63 == 0);
                    let owner = *seen.entry(s.timeline).or_insert((node, s.copy));
                    assert_eq!(owner, (node, s.copy), "{node} {local}");
                }
            }
        }
        assert_eq!(seen.len(), 64 * 5);
        // A host number (bit 63) keeps its copies apart from it too.
        let host = 0xdead_beef | (1 << 63);
        assert_ne!(slot(host, 1, 1).timeline, host);
        assert_eq!(slot(5, 2, 0).stream, 0);
    }

    #[test]
    fn copies_are_independent_under_none_and_together_under_the_other_modes() {
        let period = 1_000_000_000;
        let at = |mode, local| {
            SyncSchedule { mode, seed: 3 }.start_offset(slot(0, local, 1).timeline, period)
        };
        assert_ne!(at(SyncMode::None, 0), at(SyncMode::None, 1));
        for mode in [SyncMode::Once, SyncMode::Phase, SyncMode::Every(4)] {
            assert_eq!(at(mode, 0), at(mode, 1), "{mode}");
        }
        assert!(note(2, 1).unwrap().contains("stream j mod 1"));
        assert_eq!(note(2, 2), None);
    }
}
