//! Attribution of detours to their kernel sources (written by `jitter-collect --attribute`):
//! the sidecar file `<trace>.attr.json`, the source categories of paper 002, and the per-source
//! table of paper 000 (Table I).
//!
//! The sidecar sits beside the trace and leaves the `.jtr` format untouched, so every reader of
//! format version 1 still accepts the trace; it names the trace's collection start so that a
//! sidecar of another collection is refused.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::TraceError;

/// The sidecar's own format version.
pub const ATTRIBUTION_VERSION: u32 = 1;

/// Label of detour time that no kernel event covers (entry/exit paths, hypervisor time).
pub const UNATTRIBUTED: &str = "unattributed";

/// One source's net share of one detour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Source label, e.g. `timer`, `softirq:TIMER`, `task:kworker/0:1`, `irq:virtio0`.
    pub source: String,
    /// Where the source first covers the detour, ns on the trace's time base.
    pub start_ns: u64,
    /// Net time inside the detour (nested sources subtracted), ns.
    pub ns: u64,
}

/// One detour with its sources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributedDetour {
    /// Start of the detour, ns (as in the trace).
    pub start_ns: u64,
    /// Run-time of the detour, ns (as in the trace).
    pub run_ns: u64,
    /// The dominant source: the one with the most net time, or `unattributed`.
    pub source: String,
    /// Every source in order of first appearance, joined by `+`; `unattributed` when none.
    pub combination: String,
    /// Time explained by kernel events, ns (run − unattributed).
    pub explained_ns: u64,
    /// Net time per source.
    pub parts: Vec<Part>,
}

impl AttributedDetour {
    /// Time no event explains, ns.
    pub fn unattributed_ns(&self) -> u64 {
        self.run_ns.saturating_sub(self.explained_ns)
    }
}

/// The attribution of one stream (CPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CpuAttribution {
    /// The CPU.
    pub cpu: u32,
    /// Observation window of the stream, ns.
    pub begin_ns: u64,
    /// End of the observation window, ns.
    pub end_ns: u64,
    /// Kernel events read for this CPU.
    pub events: u64,
    /// Events the kernel lost (ring buffer overrun and dropped), from `per_cpu/cpuN/stats`.
    pub events_lost: u64,
    /// Handler entries while the probe ran (checks of the shared time base).
    #[serde(default)]
    pub entries_checked: u64,
    /// Of those, entries outside every detour (±1 µs): non-zero means the time bases disagree
    /// or the probe missed the interruption.
    #[serde(default)]
    pub entries_outside: u64,
    /// The detours in trace order.
    pub detours: Vec<AttributedDetour>,
}

/// What `jitter-collect --attribute` writes beside the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Attribution {
    /// Sidecar format version.
    pub version: u32,
    /// The trace's `collection_start_unix_ns`: ties the sidecar to its trace.
    pub collection_start_unix_ns: u64,
    /// The tracefs clock the events were stamped with (`x86-tsc`).
    pub trace_clock: String,
    /// Events enabled in the tracefs instance.
    pub events: Vec<String>,
    /// Per CPU.
    pub cpus: Vec<CpuAttribution>,
    /// Free-form notes (e.g. `hypervisor`).
    pub notes: BTreeMap<String, String>,
}

/// The sidecar path of a trace: `<trace>.attr.json`.
pub fn sidecar_path(trace: &Path) -> PathBuf {
    let mut s = trace.as_os_str().to_owned();
    s.push(".attr.json");
    PathBuf::from(s)
}

impl Attribution {
    /// Writes the sidecar with the safe writer (`output::write_output`).
    pub fn write(&self, path: &Path) -> Result<(), TraceError> {
        let bytes = serde_json::to_vec(self)
            .map_err(|e| TraceError::Argument(format!("cannot encode the attribution: {e}")))?;
        crate::output::write_output_bytes(path, &bytes).map(|_| ())
    }

    /// Reads a sidecar and checks its version.
    pub fn read(path: &Path) -> Result<Self, TraceError> {
        let bytes = std::fs::read(path)
            .map_err(|e| TraceError::io(format!("cannot read {}", path.display()), e))?;
        let a: Attribution = serde_json::from_slice(&bytes).map_err(|e| {
            TraceError::Argument(format!("{} is not an attribution: {e}", path.display()))
        })?;
        if a.version != ATTRIBUTION_VERSION {
            return Err(TraceError::Argument(format!(
                "{}: attribution version {} (this build reads {ATTRIBUTION_VERSION})",
                path.display(),
                a.version
            )));
        }
        Ok(a)
    }
}

/// The categories of paper 002 (plus IPI and unattributed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Timer interrupt and timer softirqs.
    Periodic,
    /// Page fault handler.
    PageFault,
    /// The schedule function, the SCHED/RCU softirqs, and idle time while the probe could not
    /// run (RT throttling).
    Scheduling,
    /// Tasks that preempt the probe (daemons, kernel threads, work items).
    Preemption,
    /// Device interrupts and network/block softirqs and tasklets.
    Io,
    /// Inter-processor interrupts (call function, reschedule, irq_work, platform IPI).
    Ipi,
    /// Time no event explains.
    Unattributed,
}

impl Category {
    /// Name as printed.
    pub fn name(self) -> &'static str {
        match self {
            Category::Periodic => "periodic",
            Category::PageFault => "page fault",
            Category::Scheduling => "scheduling",
            Category::Preemption => "preemption",
            Category::Io => "I/O",
            Category::Ipi => "IPI",
            Category::Unattributed => "unattributed",
        }
    }

    /// The category of a source label.
    pub fn of(source: &str) -> Category {
        let (kind, name) = source.split_once(':').unwrap_or((source, ""));
        match kind {
            "timer" | "nmi" => Category::Periodic,
            "page_fault" => Category::PageFault,
            "sched" | "idle" => Category::Scheduling,
            "task" | "work" => Category::Preemption,
            "irq" => Category::Io,
            "ipi" | "irq_work" => Category::Ipi,
            "softirq" => match name {
                "TIMER" | "HRTIMER" => Category::Periodic,
                "SCHED" | "RCU" => Category::Scheduling,
                _ => Category::Io,
            },
            _ => Category::Unattributed,
        }
    }
}

/// One row of the per-source table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceRow {
    /// Source label.
    pub source: String,
    /// Its category.
    pub category: Category,
    /// Detours it took part in.
    pub count: u64,
    /// Occurrences per second of observation (all CPUs' windows together).
    pub rate_per_s: f64,
    /// Shortest net time in one detour, ns.
    pub min_ns: u64,
    /// Mean net time per detour, ns.
    pub mean_ns: f64,
    /// Median net time per detour, ns.
    pub median_ns: u64,
    /// Longest net time in one detour, ns.
    pub max_ns: u64,
    /// Total net time, ns.
    pub total_ns: u64,
    /// Share of all detour time.
    pub share: f64,
    /// Median time between consecutive occurrences on one CPU, ns (`None` under 2).
    pub period_ns: Option<u64>,
}

/// Detours with one combination of sources.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CombinationRow {
    /// The combination (`timer+softirq:TIMER+sched+task:kworker/0:1`).
    pub combination: String,
    /// Detours with it.
    pub count: u64,
    /// Median run-time of those detours, ns.
    pub median_ns: u64,
    /// Their total run-time, ns.
    pub total_ns: u64,
    /// Share of all detour time.
    pub share: f64,
}

/// How many combinations the report keeps.
pub const TOP_COMBINATIONS: usize = 10;

/// The per-source report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Detours attributed.
    pub detours: u64,
    /// All detour time, ns.
    pub noise_ns: u64,
    /// Share of detour time explained by kernel events.
    pub explained: f64,
    /// Events the kernel lost, all CPUs.
    pub events_lost: u64,
    /// Handler entries while the probe ran, all CPUs.
    pub entries_checked: u64,
    /// Of those, entries outside every detour.
    pub entries_outside: u64,
    /// Rows, by total time, largest first (`unattributed` included).
    pub rows: Vec<SourceRow>,
    /// The combinations with the most detour time, largest first (at most
    /// `TOP_COMBINATIONS`).
    pub combinations: Vec<CombinationRow>,
    /// Notes carried from the sidecar.
    pub notes: BTreeMap<String, String>,
}

/// Builds the per-source table of an attribution.
pub fn report(a: &Attribution) -> Report {
    struct Acc {
        times: Vec<u64>,
        starts: BTreeMap<u32, Vec<u64>>,
    }
    let mut by: BTreeMap<String, Acc> = BTreeMap::new();
    let mut combos: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut noise_ns = 0u64;
    let mut explained = 0u64;
    let mut detours = 0u64;
    let mut window_ns = 0u64;
    for c in &a.cpus {
        window_ns += c.end_ns.saturating_sub(c.begin_ns);
        for d in &c.detours {
            detours += 1;
            noise_ns += d.run_ns;
            combos.entry(&d.combination).or_default().push(d.run_ns);
            explained += d.explained_ns.min(d.run_ns);
            let mut add = |source: &str, start: u64, ns: u64| {
                let acc = by.entry(source.to_string()).or_insert_with(|| Acc {
                    times: Vec::new(),
                    starts: BTreeMap::new(),
                });
                acc.times.push(ns);
                acc.starts.entry(c.cpu).or_default().push(start);
            };
            for p in &d.parts {
                add(&p.source, p.start_ns, p.ns);
            }
            if d.unattributed_ns() > 0 {
                add(UNATTRIBUTED, d.start_ns, d.unattributed_ns());
            }
        }
    }
    let secs = window_ns as f64 / 1e9;
    let mut rows: Vec<SourceRow> = by
        .into_iter()
        .map(|(source, mut acc)| {
            acc.times.sort_unstable();
            let total: u64 = acc.times.iter().sum();
            let n = acc.times.len() as u64;
            let mut gaps: Vec<u64> = acc
                .starts
                .values()
                .flat_map(|s| s.windows(2).map(|w| w[1].saturating_sub(w[0])))
                .collect();
            gaps.sort_unstable();
            SourceRow {
                category: Category::of(&source),
                source,
                count: n,
                rate_per_s: if secs > 0.0 { n as f64 / secs } else { 0.0 },
                min_ns: acc.times.first().copied().unwrap_or(0),
                mean_ns: total as f64 / n.max(1) as f64,
                median_ns: acc.times.get(acc.times.len() / 2).copied().unwrap_or(0),
                max_ns: acc.times.last().copied().unwrap_or(0),
                total_ns: total,
                share: if noise_ns > 0 {
                    total as f64 / noise_ns as f64
                } else {
                    0.0
                },
                period_ns: gaps.get(gaps.len() / 2).copied(),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.source.cmp(&b.source)));
    let mut combinations: Vec<CombinationRow> = combos
        .into_iter()
        .map(|(c, mut runs)| {
            runs.sort_unstable();
            let total: u64 = runs.iter().sum();
            CombinationRow {
                combination: c.to_string(),
                count: runs.len() as u64,
                median_ns: runs[runs.len() / 2],
                total_ns: total,
                share: if noise_ns > 0 {
                    total as f64 / noise_ns as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
    combinations.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(a.combination.cmp(&b.combination))
    });
    combinations.truncate(TOP_COMBINATIONS);
    Report {
        detours,
        noise_ns,
        explained: if noise_ns > 0 {
            explained as f64 / noise_ns as f64
        } else {
            0.0
        },
        events_lost: a.cpus.iter().map(|c| c.events_lost).sum(),
        entries_checked: a.cpus.iter().map(|c| c.entries_checked).sum(),
        entries_outside: a.cpus.iter().map(|c| c.entries_outside).sum(),
        rows,
        combinations,
        notes: a.notes.clone(),
    }
}

fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}

/// The report as text: a summary line, the table, and the notes.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# attribution: {} detours, {:.3} ms of noise, {:.1} % explained by kernel events, {} \
         events lost",
        r.detours,
        r.noise_ns as f64 / 1e6,
        r.explained * 100.0,
        r.events_lost
    );
    if r.entries_checked > 0 {
        let _ = writeln!(
            out,
            "# time base: {} of {} handler entries while the probe ran fall inside a detour",
            r.entries_checked - r.entries_outside,
            r.entries_checked
        );
    }
    let header = [
        "source",
        "category",
        "count",
        "rate/s",
        "min_us",
        "mean_us",
        "median_us",
        "max_us",
        "total_us",
        "share%",
        "period_ms",
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for row in &r.rows {
        cells.push(vec![
            row.source.clone(),
            row.category.name().to_string(),
            row.count.to_string(),
            format!("{:.1}", row.rate_per_s),
            us(row.min_ns as f64),
            us(row.mean_ns),
            us(row.median_ns as f64),
            us(row.max_ns as f64),
            us(row.total_ns as f64),
            format!("{:.2}", row.share * 100.0),
            row.period_ns
                .map_or("-".into(), |p| format!("{:.3}", p as f64 / 1e6)),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| cells.iter().map(|c| c[i].len()).max().unwrap_or(0))
        .collect();
    for c in &cells {
        let line: Vec<String> = c
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if i < 2 {
                    format!("{s:<w$}", w = widths[i])
                } else {
                    format!("{s:>w$}", w = widths[i])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    if !r.combinations.is_empty() {
        let _ = writeln!(out, "# combinations with the most detour time:");
        for c in &r.combinations {
            let _ = writeln!(
                out,
                "#   {:>6.2} %  {:>7} detours  median {:>10} us  {}",
                c.share * 100.0,
                c.count,
                us(c.median_ns as f64),
                c.combination
            );
        }
    }
    for (k, v) in &r.notes {
        let _ = writeln!(out, "# {k}: {v}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detour(start: u64, run: u64, parts: &[(&str, u64, u64)]) -> AttributedDetour {
        let explained = parts.iter().map(|p| p.2).sum();
        AttributedDetour {
            start_ns: start,
            run_ns: run,
            source: parts.first().map_or(UNATTRIBUTED.into(), |p| p.0.into()),
            combination: parts.iter().map(|p| p.0).collect::<Vec<_>>().join("+"),
            explained_ns: explained,
            parts: parts
                .iter()
                .map(|&(s, at, ns)| Part {
                    source: s.into(),
                    start_ns: at,
                    ns,
                })
                .collect(),
        }
    }

    #[test]
    fn categories_follow_paper_002() {
        assert_eq!(Category::of("timer"), Category::Periodic);
        assert_eq!(Category::of("softirq:TIMER"), Category::Periodic);
        assert_eq!(Category::of("softirq:RCU"), Category::Scheduling);
        assert_eq!(Category::of("softirq:NET_RX"), Category::Io);
        assert_eq!(Category::of("sched"), Category::Scheduling);
        assert_eq!(Category::of("idle"), Category::Scheduling);
        assert_eq!(Category::of("task:kworker/0:1"), Category::Preemption);
        assert_eq!(Category::of("irq:virtio0"), Category::Io);
        assert_eq!(Category::of("ipi:reschedule"), Category::Ipi);
        assert_eq!(Category::of("page_fault:user"), Category::PageFault);
        assert_eq!(Category::of(UNATTRIBUTED), Category::Unattributed);
    }

    #[test]
    fn the_table_counts_rates_periods_and_shares_exactly() {
        // One CPU, 1 s: a timer every 4 ms (3 of them), one daemon detour with a residual.
        let a = Attribution {
            version: ATTRIBUTION_VERSION,
            cpus: vec![CpuAttribution {
                cpu: 0,
                begin_ns: 0,
                end_ns: 1_000_000_000,
                detours: vec![
                    detour(1_000_000, 2_000, &[("timer", 1_000_000, 1_500)]),
                    detour(5_000_000, 3_000, &[("timer", 5_000_000, 2_500)]),
                    detour(9_000_000, 1_000, &[("timer", 9_000_000, 1_000)]),
                    detour(
                        20_000_000,
                        304_000,
                        &[
                            ("timer", 20_000_000, 2_000),
                            ("task:d", 20_002_000, 300_000),
                        ],
                    ),
                ],
                ..CpuAttribution::default()
            }],
            ..Attribution::default()
        };
        let r = report(&a);
        assert_eq!(r.detours, 4);
        assert_eq!(r.noise_ns, 310_000);
        let explained = 1_500 + 2_500 + 1_000 + 302_000;
        assert!((r.explained - explained as f64 / 310_000.0).abs() < 1e-12);
        let names: Vec<&str> = r.rows.iter().map(|r| r.source.as_str()).collect();
        assert_eq!(names, ["task:d", "timer", UNATTRIBUTED]);
        let t = &r.rows[1];
        assert_eq!(
            (t.count, t.min_ns, t.max_ns, t.total_ns),
            (4, 1_000, 2_500, 7_000)
        );
        assert_eq!(t.median_ns, 2_000);
        assert!((t.rate_per_s - 4.0).abs() < 1e-12);
        // Gaps 4, 4, 11 ms: the median is 4 ms.
        assert_eq!(t.period_ns, Some(4_000_000));
        let u = &r.rows[2];
        assert_eq!((u.count, u.total_ns), (3, 500 + 500 + 2_000));
        assert_eq!(r.rows[0].period_ns, None);
        let shares: f64 = r.rows.iter().map(|r| r.share).sum();
        assert!((shares - 1.0).abs() < 1e-12, "shares add up to {shares}");
        let combos: Vec<(&str, u64, u64)> = r
            .combinations
            .iter()
            .map(|c| (c.combination.as_str(), c.count, c.total_ns))
            .collect();
        assert_eq!(combos, [("timer+task:d", 1, 304_000), ("timer", 3, 6_000)]);
        assert_eq!(r.combinations[1].median_ns, 2_000);
        let text = render(&r);
        assert!(text.contains("99.0 % explained"), "{text}");
        assert!(text
            .lines()
            .nth(2)
            .unwrap()
            .starts_with("task:d        preemption"));
    }

    #[test]
    fn the_sidecar_round_trips_and_refuses_other_versions() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.jtr");
        let p = sidecar_path(&trace);
        assert!(p.to_string_lossy().ends_with("t.jtr.attr.json"));
        let mut a = Attribution {
            version: ATTRIBUTION_VERSION,
            trace_clock: "x86-tsc".into(),
            ..Attribution::default()
        };
        a.write(&p).unwrap();
        assert_eq!(Attribution::read(&p).unwrap(), a);
        a.version = 99;
        a.write(&p).unwrap();
        assert!(Attribution::read(&p)
            .unwrap_err()
            .to_string()
            .contains("version 99"));
        std::fs::write(&p, b"{").unwrap();
        assert!(Attribution::read(&p).is_err());
    }
}
