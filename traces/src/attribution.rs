//! Attribution of detours to their kernel sources (written by `jitter-collect --attribute`):
//! the source categories of paper 002 and the per-source table of paper 000 (Table I). The
//! sidecar file `<trace>.attr.json` itself is [`crate::sidecar`]'s (re-exported here); the
//! diff of two runs is [`crate::changes`]'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::error::TraceError;
use crate::periodogram::Period;
use crate::sidecar_reader::DetourSource;
use crate::steal;
use crate::table::{Align, Table};
use crate::tally::{tally, Plan};

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

impl Mode {
    /// [`Mode::shares`] shown one by one, without collecting them.
    pub fn each(self, d: &AttributedDetour, f: &mut dyn FnMut(&str, u64, u64)) {
        match self {
            Mode::Time => f(&d.combination, d.start_ns, d.run_ns),
            Mode::Frequency => {
                for p in &d.parts {
                    f(&p.source, p.start_ns, p.ns);
                }
                if d.unattributed_ns() > 0 {
                    f(UNATTRIBUTED, d.start_ns, d.unattributed_ns());
                }
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
pub(crate) const TOP_COMBINATIONS: usize = 10;

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

/// Builds the per-source table of an attribution in `mode` (no periods: [`add_periods`]).
pub(crate) fn report_in(a: &Attribution, mode: Mode) -> Report {
    let scope = Scope {
        mode,
        ..Scope::default()
    };
    // A pass over memory shows every detour and fails nowhere.
    report_of(a, scope).expect("a report of an attribution in memory")
}

/// What a report covers and analyses.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope {
    /// What the rows are.
    pub mode: Mode,
    /// Only detours with run-times in `[lo, hi)` ("who fills this bucket", as
    /// [`within_runs`]); `None`: all.
    pub runs: Option<(u64, u64)>,
    /// How to find each source's periods (`None`: not analysed): `periodogram::periods_binned`
    /// (feature `periodogram`), passed by who wants them ([`add_periods`], `jitter-trace
    /// attribution`, `replay-bench whatif`); the collector's and the preload library's reports
    /// never reach the FFT.
    pub periods: Option<crate::periodogram::FindPeriods>,
}

/// The per-source table of the attribution of `src` (a sidecar file read detour by detour in
/// a few passes, or one in memory: [`crate::tally`]), equal figure for figure to the one
/// built from the whole attribution in memory.
pub fn report_of(src: &dyn DetourSource, scope: Scope) -> Result<Report, TraceError> {
    let shares = |d: &AttributedDetour, f: &mut dyn FnMut(&str, u64, u64)| scope.mode.each(d, f);
    let plan = Plan {
        shares: &shares,
        runs: scope.runs,
        periods: scope.periods,
        top_combinations: TOP_COMBINATIONS,
    };
    let t = tally(src, &plan)?;
    let a = &t.frame.attribution;
    let window_ns: u64 = (a.cpus.iter())
        .map(|c| c.end_ns.saturating_sub(c.begin_ns))
        .sum();
    let secs = window_ns as f64 / 1e9;
    let share = |total: u64| match t.noise_ns {
        0 => 0.0,
        noise => total as f64 / noise as f64,
    };
    let mut rows: Vec<SourceRow> = (t.sources.iter())
        .map(|(source, s)| SourceRow {
            category: match scope.mode {
                Mode::Frequency => Category::of(source),
                // A combination takes its first member's category.
                Mode::Time => Category::of(source.split('+').next().unwrap_or_default()),
            },
            source: source.clone(),
            count: s.count,
            rate_per_s: if secs > 0.0 {
                s.count as f64 / secs
            } else {
                0.0
            },
            min_ns: s.min_ns,
            mean_ns: s.total_ns as f64 / s.count.max(1) as f64,
            median_ns: s.median_ns,
            max_ns: s.max_ns,
            total_ns: s.total_ns,
            share: share(s.total_ns),
            period_ns: (s.periods.as_ref())
                .and_then(|p| p.first())
                .map(|p| p.period_ns.round() as u64),
            periods: s.periods.clone(),
            median_gap_ns: s.median_gap_ns,
        })
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.source.cmp(&b.source)));
    let mut combinations: Vec<CombinationRow> = (t.combinations.iter())
        .filter_map(|(c, x)| {
            Some(CombinationRow {
                combination: c.clone(),
                count: x.count,
                median_ns: x.median_ns?,
                total_ns: x.total_ns,
                share: share(x.total_ns),
            })
        })
        .collect();
    combinations.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(a.combination.cmp(&b.combination))
    });
    Ok(Report {
        mode: scope.mode,
        detours: t.detours,
        noise_ns: t.noise_ns,
        explained: share(t.explained_ns),
        events_lost: a.cpus.iter().map(|c| c.events_lost).sum(),
        window_ns,
        entries_checked: a.cpus.iter().map(|c| c.entries_checked).sum(),
        entries_outside: a.cpus.iter().map(|c| c.entries_outside).sum(),
        rows,
        combinations,
        steal: steal::comparisons_of(a, &t.unattributed_ns),
        notes: a.notes.clone(),
    })
}

/// Fills the periods of every row of `report` (built by [`report_in`] from `a` in the
/// report's mode): the periodogram of each source's occurrence times on each CPU.
#[cfg(feature = "periodogram")]
pub fn add_periods(report: &mut Report, a: &Attribution) {
    let with = report_with_periods(a, report.mode);
    for row in &mut report.rows {
        let found = (with.rows.iter()).find(|r| r.source == row.source);
        row.periods = Some(found.and_then(|r| r.periods.clone()).unwrap_or_default());
        row.period_ns = found.and_then(|r| r.period_ns);
    }
}

/// [`report_in`] with the periods of every source.
#[cfg(feature = "periodogram")]
pub fn report_with_periods(a: &Attribution, mode: Mode) -> Report {
    let scope = Scope {
        mode,
        runs: None,
        periods: Some(crate::periodogram::periods_binned),
    };
    // A pass over memory shows every detour and fails nowhere.
    report_of(a, scope).expect("a report of an attribution in memory")
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
#[cfg(test)]
pub(crate) fn within_runs(a: &Attribution, lo_ns: u64, hi_ns: u64) -> Attribution {
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
    // A pass over memory shows every detour and fails nowhere.
    samples_of(a, mode, None).expect("samples of an attribution in memory")
}

/// [`samples`] of the detours of `src` with run-times in `runs` (`None`: all), in one pass.
/// Unlike the tables, the charts draw every sample: this holds 16 bytes per source and detour.
pub fn samples_of(
    src: &dyn DetourSource,
    mode: Mode,
    runs: Option<(u64, u64)>,
) -> Result<Vec<SourceSamples>, TraceError> {
    let mut by: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    src.pass(&mut |_: usize, _: u32, d: &AttributedDetour| {
        if runs.is_none_or(|(lo, hi)| d.run_ns >= lo && d.run_ns < hi) {
            mode.each(d, &mut |source, _, ns| match by.get_mut(source) {
                Some(v) => v.push((d.run_ns, ns)),
                None => {
                    by.insert(source.to_string(), vec![(d.run_ns, ns)]);
                }
            });
        }
        Ok(())
    })?;
    let mut out: Vec<SourceSamples> = by
        .into_iter()
        .map(|(source, samples)| SourceSamples { source, samples })
        .collect();
    let total = |s: &SourceSamples| s.samples.iter().map(|p| p.1).sum::<u64>();
    out.sort_by(|a, b| total(b).cmp(&total(a)).then(a.source.cmp(&b.source)));
    Ok(out)
}

#[cfg(test)]
mod tests;
