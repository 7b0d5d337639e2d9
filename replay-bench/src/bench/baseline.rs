//! The no-jitter reference of the slowdown equations: measured in the same invocation, taken
//! from an earlier report, or the quanta itself (paper 001 §VI).

use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{bail, Context};

use jitter_report::report::Report;

/// Where AvgMax(no jitter) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    /// Run the benchmark without jitter first, in the same invocation.
    Measured,
    /// AvgMaxQT = AvgMaxQTBT = q.
    Quanta,
    /// A row of an earlier report (same ranks, same quanta).
    File(PathBuf),
}

impl FromStr for Baseline {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "measured" => Baseline::Measured,
            "quanta" => Baseline::Quanta,
            path => Baseline::File(PathBuf::from(path)),
        })
    }
}

impl std::fmt::Display for Baseline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Baseline::Measured => f.write_str("measured"),
            Baseline::Quanta => f.write_str("quanta"),
            Baseline::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The reference values, unscaled ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reference {
    /// AvgMaxQT without jitter.
    pub avg_max_qt_ns: f64,
    /// AvgMaxQTBT without jitter.
    pub avg_max_qtbt_ns: f64,
}

/// Finds the no-jitter row for `ranks` ranks in report `path`, checking it used quanta `quanta_ns`.
///
/// A report written by `replay-bench run` without `--trace` has one row with sync `baseline`;
/// any report's row whose emulator injected nothing and whose sync is `baseline` qualifies.
pub fn from_report(
    path: &std::path::Path,
    ranks: u64,
    quanta_ns: u64,
) -> anyhow::Result<Reference> {
    // A prediction holds no measured no-jitter row: named as what it is.
    use jitter_trace::sniff::{expect_json, JsonKind};
    expect_json(
        "--baseline",
        path,
        &[JsonKind::RunReport, JsonKind::VirtualRanksReport],
        "a run's report (replay-bench run)",
    )?;
    let report = Report::load(path)?;
    if report.config.quanta_ns != quanta_ns {
        bail!(
            "baseline {} was measured with quanta {} ns, this run uses {} ns",
            path.display(),
            report.config.quanta_ns,
            quanta_ns
        );
    }
    let row = report
        .results
        .iter()
        .find(|r| r.sync == "baseline" && r.ranks == ranks)
        .with_context(|| {
            let have: Vec<String> = report
                .results
                .iter()
                .map(|r| format!("{} ranks/{}", r.ranks, r.sync))
                .collect();
            format!(
                "baseline {} has no no-jitter row for {ranks} ranks (it has: {})",
                path.display(),
                if have.is_empty() {
                    "nothing".into()
                } else {
                    have.join(", ")
                }
            )
        })?;
    if !(row.avg_max_qt_ns > 0.0 && row.avg_max_qtbt_ns > 0.0) {
        bail!("baseline {} has no positive averages", path.display());
    }
    Ok(Reference {
        avg_max_qt_ns: row.avg_max_qt_ns,
        avg_max_qtbt_ns: row.avg_max_qtbt_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_report::report::{Config, ReportKind, ResultRow};

    #[test]
    fn parses_and_finds_rows() {
        assert_eq!("quanta".parse::<Baseline>().unwrap(), Baseline::Quanta);
        assert_eq!("measured".parse::<Baseline>().unwrap(), Baseline::Measured);
        assert_eq!(
            "b.json".parse::<Baseline>().unwrap(),
            Baseline::File("b.json".into())
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.json");
        let mut r = Report::new(
            ReportKind::Run,
            Config {
                quanta_ns: 1_000_000,
                ..Config::default()
            },
        );
        r.results.push(ResultRow {
            ranks: 2,
            sync: "baseline".into(),
            avg_max_qt_ns: 1.01e6,
            avg_max_qtbt_ns: 1.02e6,
            ..ResultRow::default()
        });
        r.save(&p).unwrap();
        let b = from_report(&p, 2, 1_000_000).unwrap();
        assert_eq!(b.avg_max_qtbt_ns, 1.02e6);
        let e = from_report(&p, 4, 1_000_000).unwrap_err().to_string();
        assert!(e.contains("2 ranks/baseline"), "{e}");
        assert!(from_report(&p, 2, 2_000_000).is_err());
        assert!(from_report(&dir.path().join("missing.json"), 2, 1).is_err());
    }
}
