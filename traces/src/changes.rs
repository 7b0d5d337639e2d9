//! Sources that are new, vanished or changed between two attributed runs
//! (`jitter-trace diff`): two per-source tables of [`crate::attribution`] side by side, judged
//! by one criterion on rates (two Poisson counts) and shares.

use std::fmt::Write as _;

use serde::Serialize;

use crate::attribution::{Category, Mode, Report};
use crate::table::Table;

/// A rate change is significant when its z-score (two Poisson counts over their windows)
/// reaches this.
pub(crate) const DIFF_RATE_Z: f64 = 3.0;

/// ... and the rate changed by at least this fraction.
pub(crate) const DIFF_RATE_RELATIVE: f64 = 0.2;

/// A share of noise time changed when it moved by at least this (absolute, 1 percentage point)
/// and by [`DIFF_RATE_RELATIVE`] of the larger share.
pub(crate) const DIFF_SHARE_ABSOLUTE: f64 = 0.01;

/// A source absent from one run is new (vanished) when its rate in the other would have given
/// at least this many occurrences there (P(0) = e⁻³ < 5 % for Poisson arrivals).
pub(crate) const DIFF_ABSENT_EXPECTED: f64 = 3.0;

/// How a source differs between two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Absent from the base run, and its rate would have shown it there.
    New,
    /// Absent from the new run, and its base rate would have shown it there.
    Vanished,
    /// Its rate or share of noise time changed beyond the criterion.
    Changed,
    /// Within the criterion.
    Same,
}

impl Change {
    /// Name as printed.
    pub fn name(self) -> &'static str {
        match self {
            Change::New => "new",
            Change::Vanished => "vanished",
            Change::Changed => "changed",
            Change::Same => "same",
        }
    }
}

/// One source in the comparison of two runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceChange {
    /// Source label.
    pub source: String,
    /// Its category.
    pub category: Category,
    /// The verdict.
    pub change: Change,
    /// Occurrences in the base run.
    pub count_base: u64,
    /// Occurrences in the new run.
    pub count_new: u64,
    /// Rate in the base run, per s.
    pub rate_base: f64,
    /// Rate in the new run, per s.
    pub rate_new: f64,
    /// z-score of the rate change (new − base).
    pub rate_z: f64,
    /// Share of noise time in the base run.
    pub share_base: f64,
    /// Share of noise time in the new run.
    pub share_new: f64,
    /// Dominant period in the base run, ns.
    pub period_base_ns: Option<u64>,
    /// Dominant period in the new run, ns.
    pub period_new_ns: Option<u64>,
}

/// The comparison of two attributed runs, source by source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// What the sources are.
    pub mode: Mode,
    /// Share of noise time explained, base run.
    pub explained_base: f64,
    /// Share of noise time explained, new run.
    pub explained_new: f64,
    /// Every source of either run: new, vanished, changed, then the rest, each by the larger
    /// share.
    pub sources: Vec<SourceChange>,
}

/// Compares two per-source tables (of one mode).
pub fn diff(base: &Report, new: &Report) -> Diff {
    let secs = |r: &Report| r.window_ns as f64 / 1e9;
    let (t1, t2) = (secs(base), secs(new));
    let find = |r: &'_ Report, s: &str| r.rows.iter().find(|row| row.source == s).cloned();
    let mut names: Vec<&str> = base.rows.iter().map(|r| r.source.as_str()).collect();
    names.extend(new.rows.iter().map(|r| r.source.as_str()));
    names.sort_unstable();
    names.dedup();
    let mut sources: Vec<SourceChange> = names
        .into_iter()
        .map(|name| {
            let (a, b) = (find(base, name), find(new, name));
            let (k1, k2) = (
                a.as_ref().map_or(0, |r| r.count),
                b.as_ref().map_or(0, |r| r.count),
            );
            let rate = |k: u64, t: f64| if t > 0.0 { k as f64 / t } else { 0.0 };
            let (r1, r2) = (rate(k1, t1), rate(k2, t2));
            let var = |k: u64, t: f64| if t > 0.0 { k as f64 / (t * t) } else { 0.0 };
            let sd = (var(k1, t1) + var(k2, t2)).sqrt();
            let z = if sd > 0.0 { (r2 - r1) / sd } else { 0.0 };
            let (s1, s2) = (
                a.as_ref().map_or(0.0, |r| r.share),
                b.as_ref().map_or(0.0, |r| r.share),
            );
            let relative = |x: f64, y: f64| (x - y).abs() >= DIFF_RATE_RELATIVE * x.max(y);
            let change = if k1 == 0 && r2 * t1 >= DIFF_ABSENT_EXPECTED {
                Change::New
            } else if k2 == 0 && r1 * t2 >= DIFF_ABSENT_EXPECTED {
                Change::Vanished
            } else if (z.abs() >= DIFF_RATE_Z && relative(r1, r2))
                || ((s2 - s1).abs() >= DIFF_SHARE_ABSOLUTE && relative(s1, s2))
            {
                Change::Changed
            } else {
                Change::Same
            };
            SourceChange {
                source: name.to_string(),
                category: a
                    .as_ref()
                    .or(b.as_ref())
                    .map_or(Category::Unattributed, |r| r.category),
                change,
                count_base: k1,
                count_new: k2,
                rate_base: r1,
                rate_new: r2,
                rate_z: z,
                share_base: s1,
                share_new: s2,
                period_base_ns: a.and_then(|r| r.period_ns),
                period_new_ns: b.and_then(|r| r.period_ns),
            }
        })
        .collect();
    sources.sort_by(|a, b| {
        a.change.cmp(&b.change).then(
            b.share_base
                .max(b.share_new)
                .total_cmp(&a.share_base.max(a.share_new)),
        )
    });
    Diff {
        mode: base.mode,
        explained_base: base.explained,
        explained_new: new.explained,
        sources,
    }
}

/// The comparison as text: the criterion, the sources that differ, and a count of the rest.
pub fn render_diff(d: &Diff) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# sources ({} mode): explained {:.1} % -> {:.1} %",
        match d.mode {
            Mode::Frequency => "frequency",
            Mode::Time => "time",
        },
        d.explained_base * 100.0,
        d.explained_new * 100.0
    );
    let _ = writeln!(
        out,
        "# new/vanished: absent from one run although the other's rate gives >= \
         {DIFF_ABSENT_EXPECTED} occurrences there; changed: rate |z| >= {DIFF_RATE_Z} and >= {:.0} \
         % apart, or share >= {:.0} pp and >= {:.0} % apart",
        DIFF_RATE_RELATIVE * 100.0,
        DIFF_SHARE_ABSOLUTE * 100.0,
        DIFF_RATE_RELATIVE * 100.0
    );
    let period = |p: Option<u64>| p.map_or("-".into(), |p| format!("{:.3}", p as f64 / 1e6));
    let mut table = Table::new([
        "source",
        "category",
        "change",
        "rate/s",
        "rate/s new",
        "z",
        "share%",
        "share% new",
        "period_ms",
        "period_ms new",
    ])
    .left(3);
    let same = d
        .sources
        .iter()
        .filter(|s| s.change == Change::Same)
        .count();
    for s in d.sources.iter().filter(|s| s.change != Change::Same) {
        table.row([
            s.source.clone(),
            s.category.name().into(),
            s.change.name().into(),
            format!("{:.1}", s.rate_base),
            format!("{:.1}", s.rate_new),
            format!("{:+.1}", s.rate_z),
            format!("{:.2}", s.share_base * 100.0),
            format!("{:.2}", s.share_new * 100.0),
            period(s.period_base_ns),
            period(s.period_new_ns),
        ]);
    }
    if !table.is_empty() {
        out.push_str(&table.render());
    }
    let _ = writeln!(out, "# {same} sources within the criterion");
    out
}
