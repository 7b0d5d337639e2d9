//! Where the preload library placed the ranks of a measured run on the trace, so that a
//! prediction of that very run (`predict --app --runs-of`) replays the same stretches.
//!
//! The rule is `jitter_emulator::placement::slot` with the library's nodes: with
//! `JITTER_RANKS_PER_NODE` = k, node r / k and local rank r mod k; without it the host is the
//! node (`placement::host_node_id`) and the local rank is the launcher's — the rank itself on
//! the one host of a `replay-bench app` study. Each rank's replay starts at its timeline's
//! offset (`SyncSchedule::start_offset`, from the run's `JITTER_SEED`); every `MPI_Barrier`
//! before the program's main loop counts a phase and may resync all ranks to one point. The
//! point each rank stands at when the loop begins is that resync point, or its start offset
//! when none resynced (the time the program spends before its loop, a few ms of setup, is not
//! known here and not added).

use jitter_emulator::placement::{self, Slot};
use jitter_emulator::SyncSchedule;

/// The ranks of one measured run as the library laid them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryLayout {
    /// The host's name, as the library read it.
    pub host: String,
    /// Ranks of the run (all on that host).
    pub ranks: u64,
    /// `JITTER_RANKS_PER_NODE`, if given.
    pub ranks_per_node: Option<u64>,
    /// Streams of the trace.
    pub streams: u64,
}

impl LibraryLayout {
    /// Where `rank` replays: the library's `Layout::assignment` on one host.
    pub fn slot(&self, rank: u64) -> Slot {
        let (node, local) = match self.ranks_per_node {
            Some(k) if k > 0 => (rank / k, rank % k),
            _ => (placement::host_node_id(&self.host), rank),
        };
        placement::slot(node, local, self.streams)
    }

    /// The timeline point of every rank when the main loop begins, after the program's
    /// `barriers_before` calls of `MPI_Barrier`, on a timeline of `period_ns`.
    pub(crate) fn loop_points(
        &self,
        schedule: &SyncSchedule,
        barriers_before: u64,
        period_ns: u64,
    ) -> Vec<u64> {
        let resynced = (1..=barriers_before)
            .rev()
            .find_map(|b| schedule.resync_offset(b, period_ns));
        (0..self.ranks)
            .map(|r| {
                resynced.unwrap_or_else(|| schedule.start_offset(self.slot(r).timeline, period_ns))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_emulator::SyncMode;
    use jitter_preload::config::Layout;

    fn layout(ranks: u64, k: Option<u64>, streams: u64) -> LibraryLayout {
        LibraryLayout {
            host: "node-a".into(),
            ranks,
            ranks_per_node: k,
            streams,
        }
    }

    /// The library's own code (`jitter_preload::config::Layout::assignment` and the start
    /// offset `lib.rs` takes) for rank `r` of `size` on host `node-a`.
    fn library_offset(r: u64, size: u64, k: Option<u64>, streams: usize, s: &SyncSchedule) -> u64 {
        let vars = [
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", size.to_string()),
            ("OMPI_COMM_WORLD_LOCAL_RANK", r.to_string()),
        ];
        let get = |v: &str| vars.iter().find(|(n, _)| *n == v).map(|(_, x)| x.clone());
        let l = Layout::from_vars(get, "node-a").unwrap();
        s.start_offset(l.assignment(k, streams).unwrap().timeline, 60_000_000_000)
    }

    #[test]
    fn the_points_are_the_library_s_offsets_for_every_mode_and_layout() {
        let period = 60_000_000_000;
        for mode in [SyncMode::None, SyncMode::Once, SyncMode::Phase] {
            for (ranks, k, streams) in [(1, None, 1), (2, None, 1), (16, None, 4), (4, Some(2), 2)]
            {
                let s = SyncSchedule {
                    mode,
                    seed: 6_226_096_877_568_429,
                };
                let pts = layout(ranks, k, streams).loop_points(&s, 0, period);
                for r in 0..ranks {
                    assert_eq!(
                        pts[r as usize],
                        library_offset(r, ranks, k, streams as usize, &s),
                        "{mode} rank {r} of {ranks}"
                    );
                }
            }
        }
        // Two ranks on a one-stream trace under none: two timelines, two points.
        let s = SyncSchedule {
            mode: SyncMode::None,
            seed: 9,
        };
        let pts = layout(2, None, 1).loop_points(&s, 1, period);
        assert_ne!(pts[0], pts[1]);
    }

    #[test]
    fn a_barrier_before_the_loop_resyncs_where_the_mode_says() {
        let period = 10_000_000_000;
        let l = layout(2, None, 1);
        // phase: the loop starts at the resync point of the last barrier before it.
        let s = SyncSchedule {
            mode: SyncMode::Phase,
            seed: 3,
        };
        let want = s.resync_offset(2, period).unwrap();
        assert_eq!(l.loop_points(&s, 2, period), vec![want, want]);
        assert_ne!(want, s.start_offset(0, period));
        // every:3 with two barriers before the loop: no resync yet, the start offset.
        let s = SyncSchedule {
            mode: SyncMode::Every(3),
            seed: 3,
        };
        let start = s.start_offset(l.slot(0).timeline, period);
        assert_eq!(l.loop_points(&s, 2, period), vec![start, start]);
        // once and none never resync.
        let s = SyncSchedule {
            mode: SyncMode::Once,
            seed: 3,
        };
        assert_eq!(l.loop_points(&s, 5, period), l.loop_points(&s, 0, period));
    }
}
