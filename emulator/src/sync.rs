//! Synchronisation of replays across ranks: where each node starts on the trace's timeline and
//! when all ranks jump to a common point, derived from one shared seed (no messages needed).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::plan::PlanError;

/// How replays on different nodes relate in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// Every node starts at its own random offset and never resyncs.
    None,
    /// All nodes start at one random offset and drift apart with timer errors.
    Once,
    /// All ranks jump to one random point at every phase.
    Phase,
    /// All ranks jump to one random point every K phases (`once` and `phase` are its ends).
    Every(u64),
}

impl std::str::FromStr for SyncMode {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, PlanError> {
        let bad = || {
            PlanError::Option(format!(
                "unknown sync mode '{s}' (use none, once, phase or every:K)"
            ))
        };
        match s {
            "none" => Ok(SyncMode::None),
            "once" => Ok(SyncMode::Once),
            "phase" => Ok(SyncMode::Phase),
            _ => {
                let k = s
                    .strip_prefix("every:")
                    .or_else(|| s.strip_prefix("every"))
                    .ok_or_else(bad)?;
                let k: u64 = k.trim().parse().map_err(|_| bad())?;
                if k == 0 {
                    return Err(PlanError::Option("sync every:K needs K ≥ 1".into()));
                }
                Ok(if k == 1 {
                    SyncMode::Phase
                } else {
                    SyncMode::Every(k)
                })
            }
        }
    }
}

impl std::fmt::Display for SyncMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncMode::None => f.write_str("none"),
            SyncMode::Once => f.write_str("once"),
            SyncMode::Phase => f.write_str("phase"),
            SyncMode::Every(k) => write!(f, "every:{k}"),
        }
    }
}

impl SyncMode {
    /// Resync period in phases, if this mode resyncs at all.
    pub fn period(&self) -> Option<u64> {
        match self {
            SyncMode::None | SyncMode::Once => None,
            SyncMode::Phase => Some(1),
            SyncMode::Every(k) => Some(*k),
        }
    }
}

/// Offsets and resync points for every node, from a seed shared by all ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncSchedule {
    /// The mode.
    pub mode: SyncMode,
    /// The shared seed (rank 0 broadcasts it once).
    pub seed: u64,
}

const ALL_NODES: u64 = u64::MAX;

impl SyncSchedule {
    /// Timeline point (trace ns from the window start, `< period_ns`) where `node` starts.
    pub fn start_offset(&self, node: u64, period_ns: u64) -> u64 {
        let who = if self.mode == SyncMode::None {
            node
        } else {
            ALL_NODES
        };
        draw(self.seed, who, 0, period_ns)
    }

    /// The common point all ranks jump to at the start of `phase`, if they resync then.
    /// Phase 0 is the start itself and never resyncs.
    pub fn resync_offset(&self, phase: u64, period_ns: u64) -> Option<u64> {
        let k = self.mode.period()?;
        if phase == 0 || phase % k != 0 {
            return None;
        }
        Some(draw(self.seed, ALL_NODES, phase / k, period_ns))
    }
}

/// A point drawn uniformly in `[0, period_ns)` from (seed, who, epoch).
fn draw(seed: u64, who: u64, epoch: u64, period_ns: u64) -> u64 {
    let key = seed
        ^ who.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ epoch.wrapping_mul(0xD1B5_4A32_D192_ED03).rotate_left(29);
    StdRng::seed_from_u64(key).random_range(0..period_ns.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_modes() {
        for (s, m) in [
            ("none", SyncMode::None),
            ("once", SyncMode::Once),
            ("phase", SyncMode::Phase),
            ("every:4", SyncMode::Every(4)),
            ("every:1", SyncMode::Phase),
        ] {
            assert_eq!(s.parse::<SyncMode>().unwrap(), m);
        }
        assert_eq!(SyncMode::Every(7).to_string(), "every:7");
        for bad in ["", "always", "every:0", "every:x"] {
            assert!(bad.parse::<SyncMode>().is_err(), "{bad}");
        }
    }

    #[test]
    fn offsets_follow_the_mode() {
        let d = 1_000_000_000;
        let none = SyncSchedule {
            mode: SyncMode::None,
            seed: 42,
        };
        let once = SyncSchedule {
            mode: SyncMode::Once,
            seed: 42,
        };
        assert_ne!(none.start_offset(0, d), none.start_offset(1, d));
        assert_eq!(once.start_offset(0, d), once.start_offset(5, d));
        assert_eq!(once.resync_offset(3, d), None);
        let every = SyncSchedule {
            mode: SyncMode::Every(3),
            seed: 42,
        };
        assert!(every.resync_offset(0, d).is_none() && every.resync_offset(4, d).is_none());
        assert!(every.resync_offset(3, d).is_some());
        assert_ne!(every.resync_offset(3, d), every.resync_offset(6, d));
        // Deterministic from the seed.
        let again = SyncSchedule {
            mode: SyncMode::Every(3),
            seed: 42,
        };
        assert_eq!(every.resync_offset(6, d), again.resync_offset(6, d));
    }

    #[test]
    fn offsets_are_uniform_on_the_timeline() {
        // 20 bins, 20 000 draws: each bin expects 1000 (sd ≈ 31); 5 sd bounds.
        let s = SyncSchedule {
            mode: SyncMode::Phase,
            seed: 7,
        };
        let mut bins = [0u32; 20];
        for p in 1..=20_000 {
            let o = s.resync_offset(p, 1_000).unwrap();
            bins[(o / 50) as usize] += 1;
        }
        assert!(bins.iter().all(|&b| (845..=1155).contains(&b)), "{bins:?}");
    }
}
