//! Steal time beside unattributed time: how much of the detour time that no kernel event
//! explains the host accounted as stolen from the vCPU.
//!
//! The kernel accounts steal in `/proc/stat` in whole USER_HZ ticks (10 ms at USER_HZ 100),
//! so a run's steal is known only to a couple of ticks per CPU. The comparison says what that
//! resolution allows: a share of the unattributed time when the count is large enough, an
//! upper bound when steal is a few ticks but the unattributed time is larger still, and that it
//! cannot resolve anything otherwise.

use std::fmt::Write as _;

use serde::Serialize;

use crate::sidecar::Attribution;
pub use crate::sidecar::Steal;
use crate::table::{Align, Table};

/// How far one CPU's steal delta can be from the steal that happened, ticks: under 1 from
/// `/proc/stat` truncating to whole ticks, under 1 more because the kernel folds the host's
/// steal clock into its counters only at its own tick (1/HZ ≤ 1/USER_HZ).
pub(crate) const UNCERTAINTY_TICKS_PER_CPU: u64 = 2;

/// A steal count resolves a share of the unattributed time when its uncertainty is at most
/// this fraction of it (8 ticks on one CPU).
pub(crate) const RESOLVED_RELATIVE: f64 = 0.25;

/// What the steal count can say about the unattributed time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// The collection did not record steal time (an older trace, no `/proc/stat`).
    NotRecorded,
    /// Too few ticks: even their upper bound could be all of the unattributed time.
    Unresolved,
    /// Too few ticks for a share, but their upper bound is below the unattributed time.
    AtMost {
        /// The largest share of the unattributed time steal can be.
        max_fraction: f64,
    },
    /// Enough ticks: steal's share of the unattributed time, with its bounds.
    Share {
        /// Steal ÷ unattributed time.
        fraction: f64,
        /// With the count at its lower bound.
        min_fraction: f64,
        /// With the count at its upper bound.
        max_fraction: f64,
    },
    /// Even the lower bound of steal exceeds the unattributed time: stolen time also fell
    /// inside traced events or outside the probes' window.
    Exceeds,
}

/// What `ticks` of steal (`tick_ns` each, summed over `cpus` CPUs) say about
/// `unattributed_ns`.
pub fn verdict(unattributed_ns: u64, ticks: u64, tick_ns: u64, cpus: u64) -> Verdict {
    let spread = UNCERTAINTY_TICKS_PER_CPU * cpus.max(1);
    let lo = ticks.saturating_sub(spread).saturating_mul(tick_ns);
    let hi = (ticks + spread).saturating_mul(tick_ns);
    let u = unattributed_ns as f64;
    if lo > unattributed_ns {
        Verdict::Exceeds
    } else if spread as f64 <= RESOLVED_RELATIVE * ticks as f64 && unattributed_ns > 0 {
        // (unattributed ≥ lo > 0 whenever ticks have a length.)
        Verdict::Share {
            fraction: ticks.saturating_mul(tick_ns) as f64 / u,
            min_fraction: lo as f64 / u,
            max_fraction: hi as f64 / u,
        }
    } else if hi < unattributed_ns {
        Verdict::AtMost {
            max_fraction: hi as f64 / u,
        }
    } else {
        Verdict::Unresolved
    }
}

/// Unattributed time beside steal time, on one CPU or on all measured CPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The CPU (`None`: all measured CPUs together).
    pub cpu: Option<u32>,
    /// CPUs summed (1 for one CPU's).
    pub cpus: u64,
    /// The probes' observation time, ns.
    pub window_ns: u64,
    /// Detour time no kernel event explains, ns.
    pub unattributed_ns: u64,
    /// Of the observation time.
    pub unattributed_share: f64,
    /// Steal ticks (`None`: not recorded).
    pub steal_ticks: Option<u64>,
    /// Length of one tick, ns.
    pub tick_ns: Option<u64>,
    /// Steal time, ns.
    pub steal_ns: Option<u64>,
    /// Of the time between the steal snapshots.
    pub steal_share: Option<f64>,
    /// What the steal count says about the unattributed time.
    pub verdict: Verdict,
}

impl Comparison {
    /// One CPU's comparison, or all CPUs' (`cpus` > 1, their sums).
    fn new(
        cpu: Option<u32>,
        cpus: u64,
        window_ns: u64,
        unattributed_ns: u64,
        steal: Option<Steal>,
    ) -> Self {
        let share = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        Comparison {
            cpu,
            cpus,
            window_ns,
            unattributed_ns,
            unattributed_share: share(unattributed_ns, window_ns),
            steal_ticks: steal.map(|s| s.ticks),
            tick_ns: steal.map(|s| s.tick_ns),
            steal_ns: steal.map(|s| s.ns()),
            steal_share: steal.map(|s| share(s.ns(), s.window_ns)),
            verdict: steal.map_or(Verdict::NotRecorded, |s| {
                verdict(unattributed_ns, s.ticks, s.tick_ns, cpus)
            }),
        }
    }

    /// The verdict in words.
    pub fn verdict_line(&self) -> String {
        let pct = |f: f64| format!("{:.0} %", f * 100.0);
        match self.verdict {
            Verdict::NotRecorded => "steal time not recorded".into(),
            Verdict::Unresolved => format!(
                "cannot resolve: steal is counted in whole ticks of {:.0} ms, {} tick(s) ± {} \
                 against {:.1} ms unattributed",
                self.tick_ns.unwrap_or(0) as f64 / 1e6,
                self.steal_ticks.unwrap_or(0),
                self.spread(),
                self.unattributed_ns as f64 / 1e6
            ),
            Verdict::AtMost { max_fraction } => {
                let mut s = format!(
                    "steal is at most {} of the unattributed time",
                    pct(max_fraction)
                );
                if max_fraction < 0.5 {
                    s.push_str(": most unattributed time is not accounted as steal");
                }
                s
            }
            Verdict::Share {
                fraction,
                min_fraction,
                max_fraction,
            } => format!(
                "steal is {} of the unattributed time ({}–{} at ± {} ticks)",
                pct(fraction),
                pct(min_fraction),
                pct(max_fraction),
                self.spread()
            ),
            Verdict::Exceeds => "steal exceeds the unattributed time: stolen time also fell \
                                 inside traced events"
                .into(),
        }
    }

    /// The uncertainty of the steal count, ticks.
    pub fn spread(&self) -> u64 {
        UNCERTAINTY_TICKS_PER_CPU * self.cpus.max(1)
    }
}

/// The comparison per measured CPU, then for all of them together (when more than one).
#[cfg(test)]
pub(crate) fn comparisons(a: &Attribution) -> Vec<Comparison> {
    let unattributed: Vec<u64> = (a.cpus.iter())
        .map(|c| c.detours.iter().map(|d| d.unattributed_ns()).sum())
        .collect();
    comparisons_of(a, &unattributed)
}

/// [`comparisons`] of the CPU entries of `a` (their detours not read: a sidecar's frame) with
/// `unattributed[i]` the time no event explains in entry i's detours, ns.
pub(crate) fn comparisons_of(a: &Attribution, unattributed: &[u64]) -> Vec<Comparison> {
    let mut out: Vec<Comparison> = (a.cpus.iter().zip(unattributed))
        .map(|(c, &unattributed)| {
            Comparison::new(
                Some(c.cpu),
                1,
                c.end_ns.saturating_sub(c.begin_ns),
                unattributed,
                c.steal,
            )
        })
        .collect();
    if out.len() > 1 {
        let steal: Option<Vec<Steal>> = a.cpus.iter().map(|c| c.steal).collect();
        let steal = steal.and_then(|all| {
            let tick_ns = all[0].tick_ns;
            all.iter().all(|s| s.tick_ns == tick_ns).then(|| Steal {
                ticks: all.iter().map(|s| s.ticks).sum(),
                tick_ns,
                window_ns: all.iter().map(|s| s.window_ns).sum(),
            })
        });
        let total = Comparison::new(
            None,
            out.len() as u64,
            out.iter().map(|c| c.window_ns).sum(),
            out.iter().map(|c| c.unattributed_ns).sum(),
            steal,
        );
        out.push(total);
    }
    out
}

/// The comparisons as `#` lines of the attribution report: a table of each CPU (and of all of
/// them, when more than one) with its verdict; nothing when `rows` is empty.
pub fn render(rows: &[Comparison]) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    if rows.iter().all(|r| r.verdict == Verdict::NotRecorded) {
        out.push_str("# steal: steal time not recorded\n");
        return out;
    }
    let _ = writeln!(
        out,
        "# unattributed time beside steal time (the kernel's, in whole ticks, ± {} per CPU):",
        UNCERTAINTY_TICKS_PER_CPU
    );
    let mut table = Table::new([
        "cpu",
        "window_s",
        "unattributed_ms",
        "unattributed%",
        "steal_ticks",
        "steal_ms",
        "steal%",
        "verdict",
    ])
    .left(1)
    .align(7, Align::Left);
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for r in rows {
        table.row([
            r.cpu.map_or("all".into(), |c| c.to_string()),
            format!("{:.2}", r.window_ns as f64 / 1e9),
            format!("{:.3}", r.unattributed_ns as f64 / 1e6),
            format!("{:.3}", r.unattributed_share * 100.0),
            opt(r.steal_ticks.map(|t| t.to_string())),
            opt(r.steal_ns.map(|ns| format!("{:.0}", ns as f64 / 1e6))),
            opt(r.steal_share.map(|s| format!("{:.3}", s * 100.0))),
            r.verdict_line(),
        ]);
    }
    for line in table.render().lines() {
        let _ = writeln!(out, "#   {line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::{AttributedDetour, CpuAttribution};

    const TICK: u64 = 10_000_000;
    const MS: u64 = 1_000_000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn a_few_ticks_bound_the_share_from_above_or_resolve_nothing() {
        // 1 tick ± 2: steal in [0, 30 ms).
        match verdict(200 * MS, 1, TICK, 1) {
            Verdict::AtMost { max_fraction } => assert!(close(max_fraction, 0.15)),
            v => panic!("{v:?}"),
        }
        assert_eq!(verdict(30 * MS, 1, TICK, 1), Verdict::Unresolved);
        assert_eq!(verdict(0, 0, TICK, 1), Verdict::Unresolved);
        // Ticks without a length (a damaged sidecar) say nothing, and divide by nothing.
        assert_eq!(verdict(0, 100, 0, 1), Verdict::Unresolved);
        // 7 ticks: ± 2 is more than a quarter of 7, so only the bound (90 ms of 200).
        match verdict(200 * MS, 7, TICK, 1) {
            Verdict::AtMost { max_fraction } => assert!(close(max_fraction, 0.45)),
            v => panic!("{v:?}"),
        }
        assert_eq!(verdict(80 * MS, 7, TICK, 1), Verdict::Unresolved);
    }

    #[test]
    fn eight_ticks_per_cpu_resolve_a_share_with_its_bounds() {
        match verdict(200 * MS, 8, TICK, 1) {
            Verdict::Share {
                fraction,
                min_fraction,
                max_fraction,
            } => {
                assert!(close(fraction, 0.4));
                assert!(close(min_fraction, 0.3));
                assert!(close(max_fraction, 0.5));
            }
            v => panic!("{v:?}"),
        }
        // Summed over two CPUs the uncertainty is ± 4: 8 ticks are only a bound, 16 a share.
        match verdict(200 * MS, 8, TICK, 2) {
            Verdict::AtMost { max_fraction } => assert!(close(max_fraction, 0.6)),
            v => panic!("{v:?}"),
        }
        assert!(matches!(
            verdict(200 * MS, 16, TICK, 2),
            Verdict::Share { fraction, .. } if close(fraction, 0.8)
        ));
    }

    #[test]
    fn steal_above_the_unattributed_time_is_said_to_exceed_it() {
        // 10 ticks ± 2: at least 80 ms against 50 ms.
        assert_eq!(verdict(50 * MS, 10, TICK, 1), Verdict::Exceeds);
        assert_eq!(verdict(0, 3, TICK, 1), Verdict::Exceeds);
        // 10 ticks against 80 ms: the lower bound touches it, a share above 1.
        assert!(matches!(
            verdict(80 * MS, 10, TICK, 1),
            Verdict::Share { fraction, .. } if close(fraction, 1.25)
        ));
    }

    fn cpu(cpu: u32, unattributed: &[u64], steal: Option<u64>) -> CpuAttribution {
        CpuAttribution {
            cpu,
            begin_ns: 0,
            end_ns: 10_000 * MS,
            detours: unattributed
                .iter()
                .enumerate()
                .map(|(i, &u)| AttributedDetour {
                    start_ns: i as u64 * MS,
                    run_ns: u + 1_000,
                    source: "timer".into(),
                    combination: "timer".into(),
                    explained_ns: 1_000,
                    parts: Vec::new(),
                })
                .collect(),
            steal: steal.map(|ticks| Steal {
                ticks,
                tick_ns: TICK,
                window_ns: 10_010 * MS,
            }),
            ..CpuAttribution::default()
        }
    }

    #[test]
    fn each_cpu_and_their_sum_are_compared_over_their_windows() {
        let a = Attribution {
            cpus: vec![
                cpu(0, &[100 * MS, 100 * MS], Some(1)),
                cpu(1, &[50 * MS], Some(15)),
            ],
            ..Attribution::default()
        };
        let c = comparisons(&a);
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].cpu, c[0].unattributed_ns), (Some(0), 200 * MS));
        assert!(close(c[0].unattributed_share, 0.02));
        assert_eq!(c[0].steal_ns, Some(TICK));
        assert!(close(c[0].steal_share.unwrap(), 10.0 / 10_010.0));
        assert!(matches!(c[0].verdict, Verdict::AtMost { .. }));
        assert!(
            c[0].verdict_line()
                .ends_with("most unattributed time is not accounted as steal"),
            "{}",
            c[0].verdict_line()
        );
        // 15 ticks ± 2: at least 130 ms against 50 ms.
        assert_eq!(c[1].verdict, Verdict::Exceeds);
        let all = &c[2];
        assert_eq!((all.cpu, all.cpus), (None, 2));
        assert_eq!(all.window_ns, 20_000 * MS);
        assert_eq!(all.unattributed_ns, 250 * MS);
        assert_eq!(all.steal_ticks, Some(16));
        assert!(close(all.steal_share.unwrap(), 160.0 / 20_020.0));
        // 16 ticks ± 4 over two CPUs: 120–200 ms of 250.
        match all.verdict {
            Verdict::Share {
                fraction,
                min_fraction,
                max_fraction,
            } => {
                assert!(close(fraction, 0.64));
                assert!(close(min_fraction, 0.48));
                assert!(close(max_fraction, 0.8));
            }
            v => panic!("{v:?}"),
        }
        let text = render(&c);
        assert!(text.contains("#   all "), "{text}");
        assert!(text.contains("steal is 64 % of the unattributed time (48 %–80 % at ± 4 ticks)"));
    }

    #[test]
    fn one_cpu_has_no_sum_row() {
        let a = Attribution {
            cpus: vec![cpu(3, &[MS], Some(0))],
            ..Attribution::default()
        };
        let c = comparisons(&a);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].verdict, Verdict::Unresolved);
        let text = render(&c);
        assert!(!text.contains("all"), "{text}");
        assert!(text.contains("cannot resolve: steal is counted in whole ticks of 10 ms"));
    }

    #[test]
    fn without_steal_data_the_comparison_says_not_recorded() {
        let a = Attribution {
            cpus: vec![cpu(0, &[MS], None), cpu(1, &[MS], Some(1))],
            ..Attribution::default()
        };
        let c = comparisons(&a);
        assert_eq!(c[0].verdict, Verdict::NotRecorded);
        assert_eq!(c[0].verdict_line(), "steal time not recorded");
        assert_eq!((c[0].steal_ns, c[0].steal_share), (None, None));
        // One CPU without data: no sum.
        assert_eq!(c[2].verdict, Verdict::NotRecorded);
        let text = render(&c);
        assert!(text.contains("steal time not recorded"), "{text}");
        let none = Attribution {
            cpus: vec![cpu(0, &[MS], None)],
            ..Attribution::default()
        };
        assert_eq!(
            render(&comparisons(&none)),
            "# steal: steal time not recorded\n"
        );
        assert_eq!(render(&[]), "");
    }
}
