//! Whether two reports measured (or predicted) the same thing, so that `compare` may subtract
//! their rows and `plot-study` may draw them as one series: the same trace by content (its
//! digest, not its file name), the same quanta, scale factor and, between runs, design. Sync
//! mode and rank count are part of each row's key.

use std::fmt;
use std::path::Path;

use crate::report::{Report, ReportKind};

/// The first field in which two reports' rows of one trace differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// What differs (`trace content`, `quanta`, `scale`, `design`).
    pub field: &'static str,
    /// Its value in the first report.
    pub a: String,
    /// Its value in the second.
    pub b: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} differ ({} vs {})", self.field, self.a, self.b)
    }
}

/// The content digest of the trace a report's rows labelled `label` replayed, where the
/// report records one (reports written before digests do not).
pub(crate) fn digest_of<'a>(r: &'a Report, label: &str) -> Option<&'a str> {
    if let Some(p) = &r.config.predict {
        if let Some(i) = p.traces.iter().position(|l| l == label) {
            if let Some(d) = p.trace_digests.get(i).filter(|d| !d.is_empty()) {
                return Some(d);
            }
        }
    }
    (r.config.trace.as_ref())
        .filter(|t| t.label == label)
        .and_then(|t| t.digest.as_deref())
}

/// How `a` and `b` differ for their rows labelled `label` (`None`: alike). A digest missing
/// from either report is not a difference (see [`missing_digest`]).
pub fn mismatch(a: &Report, b: &Report, label: &str) -> Option<Mismatch> {
    let m = |field, x: String, y: String| (x != y).then_some(Mismatch { field, a: x, b: y });
    let digests = (!label.is_empty())
        .then(|| (digest_of(a, label), digest_of(b, label)))
        .and_then(|(x, y)| x.zip(y));
    let ns = |v: u64| format!("{v} ns");
    let design = |r: &Report| r.config.run.as_ref().map(|d| d.design.clone());
    let designs = (a.kind == ReportKind::Run && b.kind == ReportKind::Run)
        .then(|| design(a).zip(design(b)))
        .flatten();
    digests
        .and_then(|(x, y)| m("trace contents", x.into(), y.into()))
        .or_else(|| m("quanta", ns(a.config.quanta_ns), ns(b.config.quanta_ns)))
        .or_else(|| {
            m(
                "scale factors",
                a.config.scale.to_string(),
                b.config.scale.to_string(),
            )
        })
        .or_else(|| designs.and_then(|(x, y)| m("designs", x, y)))
}

/// Whether a report with rows labelled `label` cannot be matched by content: it replayed a
/// trace but records no digest (written before digests).
pub(crate) fn missing_digest(r: &Report, label: &str) -> bool {
    !label.is_empty() && digest_of(r, label).is_none()
}

/// The note for a report matched by trace name only.
fn by_name_only(name: &str, label: &str) -> String {
    format!(
        "{name} records no content digest of trace `{label}` (written before digests): its \
         rows are matched by the trace's name only"
    )
}

/// Checks that `compare` may subtract `b`'s rows from `a`'s: some row of each has the same
/// (trace, ranks, sync) and every such pair is alike ([`mismatch`]). Returns the notes for
/// rows matched by name only.
pub fn check_compare(
    a: &Report,
    b: &Report,
    a_name: &str,
    b_name: &str,
) -> anyhow::Result<Vec<String>> {
    let key = |r: &crate::report::ResultRow| (r.trace.clone(), r.ranks, r.sync.clone());
    let common: Vec<String> = (a.results.iter())
        .filter(|x| b.results.iter().any(|y| key(x) == key(y)))
        .map(|x| x.trace.clone())
        .collect();
    anyhow::ensure!(
        !common.is_empty(),
        "no row of {a_name} has the trace, ranks and sync of a row of {b_name}: nothing to compare"
    );
    let mut notes = Vec::new();
    for label in dedup(common) {
        if let Some(m) = mismatch(a, b, &label) {
            anyhow::bail!("cannot compare {a_name} with {b_name} for trace `{label}`: {m}");
        }
        for (r, name) in [(a, a_name), (b, b_name)] {
            if missing_digest(r, &label) {
                notes.push(by_name_only(name, &label));
            }
        }
    }
    Ok(notes)
}

/// Checks that `plot-study` may draw these reports' rows as series of (trace, sync,
/// producer): every two reports that share a series are alike ([`mismatch`]). Returns the
/// notes for reports matched by name only.
pub(crate) fn check_series(reports: &[(&Path, &Report)]) -> anyhow::Result<Vec<String>> {
    let mut owners: Vec<((String, String, ReportKind), usize)> = Vec::new();
    let mut notes = Vec::new();
    for (i, (path, r)) in reports.iter().enumerate() {
        for row in &r.results {
            let series = (row.trace.clone(), row.sync.clone(), r.kind);
            match owners.iter().find(|(s, _)| *s == series) {
                Some(&(_, j)) => {
                    let (first, other) = (reports[j], reports[i]);
                    if let Some(m) = mismatch(first.1, other.1, &row.trace) {
                        anyhow::bail!(
                            "cannot draw {} and {} as one series (trace `{}`, sync {}, {}): {m}",
                            first.0.display(),
                            other.0.display(),
                            row.trace,
                            row.sync,
                            r.kind
                        );
                    }
                }
                None => owners.push((series, i)),
            }
            if missing_digest(r, &row.trace) {
                let note = by_name_only(&path.display().to_string(), &row.trace);
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
        }
    }
    Ok(notes)
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Config, ResultRow, RunDetails, TraceInfo};

    fn run(digest: Option<&str>, quanta_ns: u64, scale: f64, design: &str) -> Report {
        let mut r = Report::new(
            ReportKind::Run,
            Config {
                quanta_ns,
                scale,
                trace: Some(TraceInfo {
                    label: "t".into(),
                    digest: digest.map(str::to_string),
                    ..TraceInfo::default()
                }),
                run: Some(RunDetails {
                    design: design.into(),
                    ..RunDetails::default()
                }),
                ..Config::default()
            },
        );
        r.results.push(ResultRow {
            trace: "t".into(),
            ranks: 2,
            sync: "none".into(),
            ..ResultRow::default()
        });
        r
    }

    #[test]
    fn reports_match_on_content_quanta_scale_and_design() {
        let base = run(Some("crc32x2:aa/1"), 1_000_000, 1.0, "paired");
        assert!(check_compare(&base, &base.clone(), "a", "b")
            .unwrap()
            .is_empty());
        let cases = [
            (
                run(Some("crc32x2:bb/1"), 1_000_000, 1.0, "paired"),
                "trace contents differ (crc32x2:aa/1 vs crc32x2:bb/1)",
            ),
            (
                run(Some("crc32x2:aa/1"), 2_000_000, 1.0, "paired"),
                "quanta differ (1000000 ns vs 2000000 ns)",
            ),
            (
                run(Some("crc32x2:aa/1"), 1_000_000, 20.0, "paired"),
                "scale factors differ (1 vs 20)",
            ),
            (
                run(Some("crc32x2:aa/1"), 1_000_000, 1.0, "sequential"),
                "designs differ (paired vs sequential)",
            ),
        ];
        for (other, why) in cases {
            let e = check_compare(&base, &other, "a.json", "b.json").unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("cannot compare a.json with b.json for trace `t`: {why}")
            );
            let e = check_series(&[(Path::new("a.json"), &base), (Path::new("b.json"), &other)])
                .unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("cannot draw a.json and b.json as one series (trace `t`, sync none, run): {why}")
            );
        }
    }

    #[test]
    fn an_old_report_is_matched_by_name_with_a_note_and_no_common_row_is_refused() {
        let base = run(Some("crc32x2:aa/1"), 1_000_000, 1.0, "paired");
        let old = run(None, 1_000_000, 1.0, "paired");
        let notes = check_compare(&base, &old, "a.json", "old.json").unwrap();
        assert_eq!(
            notes,
            vec![
                "old.json records no content digest of trace `t` (written before digests): \
                  its rows are matched by the trace's name only"
            ]
        );
        let mut elsewhere = base.clone();
        elsewhere.results[0].ranks = 4;
        let e = check_compare(&base, &elsewhere, "a.json", "b.json").unwrap_err();
        assert_eq!(
            e.to_string(),
            "no row of a.json has the trace, ranks and sync of a row of b.json: nothing to compare"
        );
    }

    #[test]
    fn a_prediction_names_each_trace_digest_in_order() {
        let mut p = Report::new(ReportKind::PredictDes, Config::default());
        p.config.predict = Some(crate::report::PredictDetails {
            traces: vec!["a".into(), "b".into()],
            trace_digests: vec!["crc32x2:01/1".into(), "crc32x2:02/1".into()],
            ..Default::default()
        });
        assert_eq!(digest_of(&p, "b"), Some("crc32x2:02/1"));
        assert_eq!(digest_of(&p, "c"), None);
    }
}
