//! Attribution of detours to their kernel sources (written by `jitter-collect --attribute`):
//! the source categories of paper 002 and the per-source table of paper 000 (Table I). The
//! sidecar file `<trace>.attr.json` itself is [`crate::sidecar`]'s (re-exported here); the
//! diff of two runs is [`crate::changes`]'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::error::TraceError;
use crate::periodogram::Period;
#[cfg(feature = "periodogram")]
use crate::periodogram::{periods, Occurrences};
use crate::steal;
use crate::table::{Align, Table};

pub use crate::sidecar::{
    sidecar_path, AttributedDetour, Attribution, CpuAttribution, Part, Steal, ATTRIBUTION_VERSION,
    UNATTRIBUTED,
};

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

/// What a row of the per-source table is (paper 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Individual sources only: a detour's time is split over its members by their net times,
    /// and the time no event explains is the `unattributed` row.
    #[default]
    Frequency,
    /// Each combination of sources is a source of its own, with the detours' whole run-times.
    Time,
}

impl std::str::FromStr for Mode {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        match s {
            "frequency" | "individual" => Ok(Mode::Frequency),
            "time" | "combination" => Ok(Mode::Time),
            _ => Err(TraceError::Argument(format!(
                "unknown mode `{s}` (use frequency or time)"
            ))),
        }
    }
}

impl Mode {
    /// The sources of one detour in this mode: (label, first appearance, time), ns.
    pub fn shares(self, d: &AttributedDetour) -> Vec<(&str, u64, u64)> {
        match self {
            Mode::Time => vec![(d.combination.as_str(), d.start_ns, d.run_ns)],
            Mode::Frequency => {
                let mut v: Vec<(&str, u64, u64)> = d
                    .parts
                    .iter()
                    .map(|p| (p.source.as_str(), p.start_ns, p.ns))
                    .collect();
                if d.unattributed_ns() > 0 {
                    v.push((UNATTRIBUTED, d.start_ns, d.unattributed_ns()));
                }
                v
            }
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
    /// The dominant period from the periodogram of the occurrence times, ns (`None` when no
    /// period is significant or the periods were not analysed; see [`crate::periodogram`]).
    pub period_ns: Option<u64>,
    /// Every significant period (harmonics grouped), strongest first; `None`: not analysed
    /// ([`report_in`] leaves them to `add_periods`, which the `periodogram` feature offers:
    /// the collector shows its table without them, `jitter-trace attribution` with them).
    pub periods: Option<Vec<Period>>,
    /// Median time between consecutive occurrences on one CPU, ns (`None` under 2).
    pub median_gap_ns: Option<u64>,
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
    /// What the rows are.
    pub mode: Mode,
    /// Detours attributed.
    pub detours: u64,
    /// All detour time, ns.
    pub noise_ns: u64,
    /// Share of detour time explained by kernel events.
    pub explained: f64,
    /// Events the kernel lost, all CPUs.
    pub events_lost: u64,
    /// Observation time, all CPUs' windows together, ns.
    pub window_ns: u64,
    /// Handler entries while the probe ran, all CPUs.
    pub entries_checked: u64,
    /// Of those, entries outside every detour.
    pub entries_outside: u64,
    /// Rows, by total time, largest first (`unattributed` included).
    pub rows: Vec<SourceRow>,
    /// The combinations with the most detour time, largest first (at most
    /// `TOP_COMBINATIONS`).
    pub combinations: Vec<CombinationRow>,
    /// Unattributed time beside steal time per CPU, then all CPUs together (empty: not
    /// compared, as in a bucket's report).
    pub steal: Vec<steal::Comparison>,
    /// Notes carried from the sidecar.
    pub notes: BTreeMap<String, String>,
}

/// Builds the per-source table of an attribution (individual sources).
pub fn report(a: &Attribution) -> Report {
    report_in(a, Mode::Frequency)
}

/// Builds the per-source table of an attribution in `mode`.
pub fn report_in(a: &Attribution, mode: Mode) -> Report {
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
            for (source, start, ns) in mode.shares(d) {
                let acc = by.entry(source.to_string()).or_insert_with(|| Acc {
                    times: Vec::new(),
                    starts: BTreeMap::new(),
                });
                acc.times.push(ns);
                acc.starts.entry(c.cpu).or_default().push(start);
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
                category: match mode {
                    Mode::Frequency => Category::of(&source),
                    // A combination takes its first member's category.
                    Mode::Time => Category::of(source.split('+').next().unwrap_or_default()),
                },
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
                period_ns: None,
                periods: None,
                median_gap_ns: gaps.get(gaps.len() / 2).copied(),
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
        mode,
        detours,
        noise_ns,
        explained: if noise_ns > 0 {
            explained as f64 / noise_ns as f64
        } else {
            0.0
        },
        events_lost: a.cpus.iter().map(|c| c.events_lost).sum(),
        window_ns,
        entries_checked: a.cpus.iter().map(|c| c.entries_checked).sum(),
        entries_outside: a.cpus.iter().map(|c| c.entries_outside).sum(),
        rows,
        combinations,
        steal: steal::comparisons(a),
        notes: a.notes.clone(),
    }
}

/// Fills the periods of every row of `report` (built by [`report_in`] from `a` in the
/// report's mode): the periodogram of each source's occurrence times on each CPU.
#[cfg(feature = "periodogram")]
pub fn add_periods(report: &mut Report, a: &Attribution) {
    let mut starts: BTreeMap<&str, BTreeMap<u32, Vec<u64>>> = BTreeMap::new();
    for c in &a.cpus {
        for d in &c.detours {
            for (source, start, _) in report.mode.shares(d) {
                let by_cpu = starts.entry(source).or_default();
                by_cpu.entry(c.cpu).or_default().push(start);
            }
        }
    }
    let windows: BTreeMap<u32, (u64, u64)> = a
        .cpus
        .iter()
        .map(|c| (c.cpu, (c.begin_ns, c.end_ns)))
        .collect();
    for row in &mut report.rows {
        let occurrences: Vec<Occurrences> = starts
            .get(row.source.as_str())
            .into_iter()
            .flatten()
            .map(|(cpu, t)| {
                let (begin_ns, end_ns) = windows.get(cpu).copied().unwrap_or_default();
                Occurrences {
                    begin_ns,
                    end_ns,
                    times_ns: t,
                }
            })
            .collect();
        let found = periods(&occurrences);
        row.period_ns = found.first().map(|p| p.period_ns.round() as u64);
        row.periods = Some(found);
    }
}

/// [`report_in`] with the periods of every source ([`add_periods`]).
#[cfg(feature = "periodogram")]
pub fn report_with_periods(a: &Attribution, mode: Mode) -> Report {
    let mut r = report_in(a, mode);
    add_periods(&mut r, a);
    r
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
    if r.mode == Mode::Time {
        let _ = writeln!(
            out,
            "# time domain: each combination of sources is a row, with its detours' run-times"
        );
    }
    let mut header = vec![
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
    ];
    // The period column only where the periods were analysed (`add_periods`).
    let analysed = r.rows.iter().any(|row| row.periods.is_some());
    if analysed {
        header.push("period_ms");
    }
    let mut table = Table::new(header).left(2);
    for row in &r.rows {
        let mut cells = vec![
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
        ];
        match &row.periods {
            Some(p) if p.is_empty() => cells.push("-".into()),
            Some(p) => cells.push(
                p.iter()
                    .map(|p| format!("{:.3}", p.period_ns / 1e6))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            None => {}
        }
        table.row(cells);
    }
    out.push_str(&table.render());
    if !analysed && !r.rows.is_empty() {
        let _ = writeln!(
            out,
            "# periods of each source: jitter-trace attribution <trace> (the periodogram is \
             not computed here)"
        );
    }
    if !r.combinations.is_empty() {
        let _ = writeln!(out, "# combinations with the most detour time:");
        let mut table =
            Table::new(["share", "detours", "median_us", "combination"]).align(3, Align::Left);
        for c in &r.combinations {
            table.row([
                format!("{:.2} %", c.share * 100.0),
                c.count.to_string(),
                us(c.median_ns as f64),
                c.combination.clone(),
            ]);
        }
        for line in table.render().lines() {
            let _ = writeln!(out, "#   {line}");
        }
    }
    out.push_str(&steal::render(&r.steal));
    for (k, v) in &r.notes {
        let _ = writeln!(out, "# {k}: {v}");
    }
    out
}

/// The detours with run-times in `[lo_ns, hi_ns)` only ("who fills this bucket": their report
/// gives the bucket's sources and shares; rates stay per second of the whole observation).
/// Steal is counted for the whole run, not per bucket: clear the bucket's `Report::steal`.
pub fn within_runs(a: &Attribution, lo_ns: u64, hi_ns: u64) -> Attribution {
    let mut out = a.clone();
    for c in &mut out.cpus {
        c.detours.retain(|d| d.run_ns >= lo_ns && d.run_ns < hi_ns);
    }
    out
}

/// The columns of the per-source CSV, in order.
const CSV_HEADER: [&str; 13] = [
    "source",
    "category",
    "count",
    "rate_per_s",
    "min_ns",
    "mean_ns",
    "median_ns",
    "max_ns",
    "total_ns",
    "share",
    "period_ns",
    "periods_ns",
    "median_gap_ns",
];

/// The per-source table as CSV, one row per source (times in ns; `periods_ns` `;`-separated;
/// fields quoted where they need it).
pub fn csv(r: &Report) -> String {
    let mut out = csv::Writer::from_writer(Vec::new());
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    let rows = r.rows.iter().map(|row| {
        let periods: Vec<String> = row
            .periods
            .iter()
            .flatten()
            .map(|p| format!("{:.0}", p.period_ns))
            .collect();
        [
            row.source.clone(),
            row.category.name().to_string(),
            row.count.to_string(),
            format!("{:.3}", row.rate_per_s),
            row.min_ns.to_string(),
            format!("{:.1}", row.mean_ns),
            row.median_ns.to_string(),
            row.max_ns.to_string(),
            row.total_ns.to_string(),
            format!("{:.6}", row.share),
            opt(row.period_ns),
            periods.join(";"),
            opt(row.median_gap_ns),
        ]
    });
    let written = std::iter::once(CSV_HEADER.map(String::from))
        .chain(rows)
        .try_for_each(|fields| out.write_record(&fields));
    // Writing into memory cannot fail.
    written.expect("CSV into memory");
    String::from_utf8(out.into_inner().expect("CSV into memory")).expect("CSV of UTF-8 fields")
}

/// One source's time in each detour it took part in, for the charts.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSamples {
    /// Source label (a combination in time mode).
    pub source: String,
    /// (run-time of the detour, the source's time in it), ns, one pair per detour.
    pub samples: Vec<(u64, u64)>,
}

/// Every source's samples in `mode`, by total time, largest first.
pub fn samples(a: &Attribution, mode: Mode) -> Vec<SourceSamples> {
    let mut by: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for d in a.cpus.iter().flat_map(|c| &c.detours) {
        for (source, _, ns) in mode.shares(d) {
            by.entry(source).or_default().push((d.run_ns, ns));
        }
    }
    let mut out: Vec<SourceSamples> = by
        .into_iter()
        .map(|(s, samples)| SourceSamples {
            source: s.to_string(),
            samples,
        })
        .collect();
    let total = |s: &SourceSamples| s.samples.iter().map(|p| p.1).sum::<u64>();
    out.sort_by(|a, b| total(b).cmp(&total(a)).then(a.source.cmp(&b.source)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::{diff, render_diff, Change};

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
        // Gaps 4, 4, 11 ms: the median is 4 ms; the periods are not analysed by `report`.
        assert_eq!(t.median_gap_ns, Some(4_000_000));
        assert_eq!((t.period_ns, &t.periods), (None, &None));
        // Four occurrences are too few for a period: analysed, none found.
        #[cfg(feature = "periodogram")]
        {
            let p = report_with_periods(&a, Mode::Frequency);
            assert_eq!(
                (p.rows[1].period_ns, &p.rows[1].periods),
                (None, &Some(vec![]))
            );
            let text = render(&p);
            assert!(
                text.lines().nth(1).unwrap().ends_with("period_ms"),
                "{text}"
            );
            assert!(!text.contains("is not computed here"), "{text}");
        }
        let u = &r.rows[2];
        assert_eq!((u.count, u.total_ns), (3, 500 + 500 + 2_000));
        assert_eq!(r.rows[0].median_gap_ns, None);
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
        // Without the periodogram: no period column, and a line saying where the periods are.
        assert!(text.lines().nth(1).unwrap().ends_with("share%"), "{text}");
        assert!(
            text.contains("# periods of each source: jitter-trace attribution <trace>"),
            "{text}"
        );
        assert!(text
            .lines()
            .nth(2)
            .unwrap()
            .starts_with("task:d        preemption"));
        // The combinations: a commented table, largest detour time first.
        let combos: Vec<&str> = text.lines().filter(|l| l.starts_with("#   ")).collect();
        assert_eq!(combos.len(), 3, "{text}");
        assert!(
            combos[0].ends_with("share  detours  median_us  combination"),
            "{text}"
        );
        assert_eq!(
            combos[1], "#   98.06 %        1     304.00  timer+task:d",
            "{text}"
        );
    }

    /// 2 s on one CPU: a timer every 4 ms (2 µs, 1 µs unexplained each), a daemon every 10 ms
    /// (300 µs), every third daemon wake-up joined by the timer.
    fn periodic_attribution() -> Attribution {
        let mut detours = Vec::new();
        for k in 0..500u64 {
            let t = 1_000_000 + k * 4_000_000;
            detours.push(detour(t, 3_000, &[("timer", t, 2_000)]));
        }
        for k in 0..200u64 {
            let t = 2_500_000 + k * 10_000_000;
            if k % 3 == 0 {
                detours.push(detour(
                    t,
                    302_000,
                    &[("timer", t, 2_000), ("task:d1", t + 2_000, 300_000)],
                ));
            } else {
                detours.push(detour(t, 300_000, &[("task:d1", t, 300_000)]));
            }
        }
        detours.sort_by_key(|d| d.start_ns);
        Attribution {
            version: ATTRIBUTION_VERSION,
            cpus: vec![CpuAttribution {
                cpu: 0,
                begin_ns: 0,
                end_ns: 2_000_000_000,
                detours,
                ..CpuAttribution::default()
            }],
            ..Attribution::default()
        }
    }

    /// The period is within half a frequency bin of `p`: at most p²/(2·span) for the 2 s span.
    fn assert_within_half_bin(row: &SourceRow, p: f64) {
        let got = row.period_ns.expect("a period") as f64;
        assert!((got - p).abs() <= p * p / 4e9, "{row:?}");
    }

    #[cfg(feature = "periodogram")]
    #[test]
    fn rows_carry_the_periodogram_period_of_each_source() {
        let r = report_with_periods(&periodic_attribution(), Mode::Frequency);
        let row = |s: &str| r.rows.iter().find(|r| r.source == s).unwrap();
        assert_within_half_bin(row("task:d1"), 10e6);
        // The timer: every 4 ms, plus every 30 ms with the daemon; the 4 ms family dominates.
        assert_within_half_bin(row("timer"), 4e6);
        assert_within_half_bin(row(UNATTRIBUTED), 4e6);
        let text = render(&r);
        let d1 = text.lines().find(|l| l.starts_with("task:d1")).unwrap();
        assert!(d1.ends_with("10.000"), "{text}");
    }

    #[cfg(feature = "periodogram")]
    #[test]
    fn time_mode_makes_each_combination_a_source_with_whole_run_times() {
        let a = periodic_attribution();
        let r = report_with_periods(&a, Mode::Time);
        assert_eq!(r.mode, Mode::Time);
        let names: Vec<&str> = r.rows.iter().map(|r| r.source.as_str()).collect();
        assert_eq!(names, ["task:d1", "timer+task:d1", "timer"]);
        let combo = &r.rows[1];
        assert_eq!((combo.count, combo.total_ns), (67, 67 * 302_000));
        assert_eq!(combo.category, Category::Periodic);
        assert_within_half_bin(combo, 30e6);
        let timer = &r.rows[2];
        assert_eq!((timer.count, timer.min_ns), (500, 3_000));
        let shares: f64 = r.rows.iter().map(|r| r.share).sum();
        assert!((shares - 1.0).abs() < 1e-12);
        // Frequency mode splits the same time over the members and the residual.
        let f = report_in(&a, Mode::Frequency);
        let total = |r: &Report| r.rows.iter().map(|r| r.total_ns).sum::<u64>();
        assert_eq!(total(&f), total(&r));
        assert_eq!(f.rows.len(), 3);
        assert!(render(&r).contains("time domain"));
        assert_eq!("time".parse::<Mode>().unwrap(), Mode::Time);
        assert!("space".parse::<Mode>().is_err());
    }

    #[cfg(feature = "periodogram")]
    #[test]
    fn diff_names_new_vanished_and_changed_sources_by_its_criterion() {
        let base = periodic_attribution();
        let report = |a: &Attribution| report_with_periods(a, Mode::Frequency);
        let same = diff(&report(&base), &report(&base));
        assert!(same.sources.iter().all(|s| s.change == Change::Same));
        assert!(render_diff(&same).contains("# 3 sources within the criterion"));
        // The new run: the daemon d1 is gone, d2 (50 µs every 5 ms) and one rare work item came.
        let mut new = base.clone();
        let c = &mut new.cpus[0];
        c.detours.retain(|d| !d.combination.contains("task:d1"));
        for k in 0..400u64 {
            let t = 3_000_000 + k * 5_000_000;
            c.detours.push(detour(t, 50_000, &[("task:d2", t, 50_000)]));
        }
        c.detours
            .push(detour(7_000_000, 9_000, &[("work:rare", 7_000_000, 9_000)]));
        c.detours.sort_by_key(|d| d.start_ns);
        let d = diff(&report(&base), &report(&new));
        let get = |s: &str| d.sources.iter().find(|c| c.source == s).unwrap();
        assert_eq!(get("task:d1").change, Change::Vanished);
        let d2 = get("task:d2");
        assert_eq!(
            (d2.change, d2.count_base, d2.count_new),
            (Change::New, 0, 400)
        );
        // Within half a frequency bin, p²/(2·span) = 6.25 µs.
        assert!(
            d2.period_new_ns.unwrap().abs_diff(5_000_000) <= 6_250,
            "{d2:?}"
        );
        // Once in 2 s: absent from the base run is no evidence (expected 1 < 3 there).
        assert_eq!(get("work:rare").change, Change::Same);
        // The timer kept its own 500 but lost the 67 it shared with d1: z = -2.05, the same
        // rate by the criterion; its share of the now smaller noise grew from 1.8 % to 4.7 %.
        let timer = get("timer");
        assert!((timer.rate_z + 2.05).abs() < 0.01, "{timer:?}");
        assert_eq!(timer.change, Change::Changed);
        let order: Vec<Change> = d.sources.iter().map(|s| s.change).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
        let text = render_diff(&d);
        assert!(text.contains("task:d2") && text.contains("new"), "{text}");
        assert!(
            text.contains("gives >= 3 occurrences there; changed: rate |z| >= 3 and >= 20 % apart"),
            "{text}"
        );
        assert!(!text.contains("work:rare"), "{text}");
    }

    #[test]
    fn a_bucket_keeps_its_detours_and_the_csv_has_one_row_per_source() {
        let a = periodic_attribution();
        // 2-3.5 µs: the timer detours alone (3 µs), not the daemon's (300-302 µs).
        let b = report(&within_runs(&a, 2_000, 3_500));
        let names: Vec<&str> = b.rows.iter().map(|r| r.source.as_str()).collect();
        assert_eq!(names, ["timer", UNATTRIBUTED]);
        assert_eq!(b.detours, 500);
        assert!((b.rows[0].share - 2.0 / 3.0).abs() < 1e-12);
        let r = report(&a);
        let text = csv(&r);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + r.rows.len());
        assert!(lines[0].starts_with("source,category,count,"));
        let d1 = lines.iter().find(|l| l.starts_with("task:d1,")).unwrap();
        assert_eq!(d1.split(',').count(), 13, "{d1}");
        assert!(
            d1.starts_with("task:d1,preemption,200,100.000,300000,"),
            "{d1}"
        );
        // A label with a comma and quotes is quoted and reads back whole.
        let mut q = r.clone();
        q.rows[0].source = "say \"x\", then y".into();
        let text = csv(&q);
        let mut back = csv::Reader::from_reader(text.as_bytes());
        let first = back.records().next().unwrap().unwrap();
        assert_eq!((&first[0], first.len()), ("say \"x\", then y", 13));
        assert!(text.contains("\"say \"\"x\"\", then y\","), "{text}");
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

    #[test]
    fn a_sidecar_written_before_steal_was_recorded_reads_as_not_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.jtr.attr.json");
        let a = Attribution {
            version: ATTRIBUTION_VERSION,
            cpus: vec![CpuAttribution {
                cpu: 2,
                end_ns: 1_000_000_000,
                ..CpuAttribution::default()
            }],
            ..Attribution::default()
        };
        let mut v = serde_json::to_value(&a).unwrap();
        let cpu = v["cpus"][0].as_object_mut().unwrap();
        assert!(cpu.remove("steal").is_some());
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        let back = Attribution::read(&p).unwrap();
        assert_eq!(back.cpus[0].steal, None);
        let text = render(&report(&back));
        assert!(text.contains("# steal: steal time not recorded"), "{text}");
    }
}
