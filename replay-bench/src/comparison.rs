//! Like with like, as a table: each measured row of a real run beside the prediction of the
//! same stretches of its trace (`predict --windows-of`), judged by [`crate::verdict`], with the
//! check that both injected the same detours, and beside the prediction over the whole trace
//! with its range over offset draws (`predict --draws`). The main job's report (`study`) and
//! `validate` print it.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use jitter_trace::table::{Align, Table};

use crate::report::{InjectionCheck, ResultRow};
use crate::verdict::{self, Verdict};

/// One measured slowdown beside its predictions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Processes.
    pub ranks: u64,
    /// Sync mode.
    pub sync: String,
    /// `eq.2` (AvgMaxQTBT) or `eq.3` (AvgMaxQT).
    pub metric: String,
    /// Measured SD, percent.
    pub measured_pct: f64,
    /// Half-width of its 95 % interval, pp.
    pub ci95_pp: Option<f64>,
    /// The prediction of the run's own windows, percent.
    pub same_windows_pct: Option<f64>,
    /// Whether the run and that prediction injected the same detours.
    pub injection_agrees: Option<bool>,
    /// The prediction over the whole trace (every draw pooled), percent.
    pub whole_pct: Option<f64>,
    /// Its range over the offset draws, percent.
    pub whole_range_pct: Option<[f64; 2]>,
    /// The platform's own noise during the run, percent (not in the predictions).
    pub platform_pct: f64,
    /// The same-window prediction judged against the measurement.
    pub verdict: Verdict,
}

/// What [`compare`] needs of one run.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The run's measured row.
    pub measured: &'a ResultRow,
    /// The platform's own noise during the run, percent.
    pub platform_pct: f64,
    /// The prediction of its windows and the check of the injections.
    pub same_windows: Option<(&'a ResultRow, &'a InjectionCheck)>,
    /// The whole-trace prediction at the run's ranks and mode.
    pub whole: Option<&'a ResultRow>,
}

/// The two comparisons (eq. 2 and eq. 3) of one run.
pub fn compare(i: Inputs<'_>) -> [Comparison; 2] {
    let m = i.measured;
    let one = |metric: &str, meas: f64, ci: Option<f64>, pick: fn(&ResultRow) -> f64| {
        let same = i.same_windows.map(|(r, _)| pick(r));
        let range = i.whole.and_then(|w| w.draws).map(|d| {
            if metric == "eq.2" {
                d.sd_qtbt_range_pct
            } else {
                d.sd_qt_range_pct
            }
        });
        Comparison {
            ranks: m.ranks,
            sync: m.sync.clone(),
            metric: metric.into(),
            measured_pct: meas,
            ci95_pp: ci,
            same_windows_pct: same,
            injection_agrees: i.same_windows.map(|(_, c)| c.agrees),
            whole_pct: i.whole.map(pick),
            whole_range_pct: range,
            platform_pct: i.platform_pct,
            verdict: match same {
                Some(p) => Verdict::judge(meas, ci, p, i.platform_pct),
                None => Verdict::NoVerdict,
            },
        }
    };
    [
        one("eq.2", m.sd_qtbt_pct, m.sd_qtbt_ci95_pct, |r| r.sd_qtbt_pct),
        one("eq.3", m.sd_qt_pct, m.sd_qt_ci95_pct, |r| r.sd_qt_pct),
    ]
}

fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.2} %"),
        _ => "n/a".into(),
    }
}

/// The table (markdown when `markdown`, else text) and the closing count.
pub fn render(rows: &[Comparison], markdown: bool) -> String {
    let mut t = Table::new([
        "ranks",
        "sync",
        "SD",
        "measured (95 %)",
        "same windows",
        "diff",
        "verdict",
        "same detours",
        "whole trace (draws)",
        "platform",
    ])
    .align(1, Align::Left)
    .align(2, Align::Left)
    .align(6, Align::Left)
    .align(7, Align::Left);
    for c in rows {
        let whole = match (c.whole_pct, c.whole_range_pct) {
            (Some(w), Some([lo, hi])) => format!("{w:.2} % [{lo:.2} – {hi:.2}]"),
            (w, _) => pct(w),
        };
        t.row([
            c.ranks.to_string(),
            c.sync.clone(),
            c.metric.clone(),
            crate::table::fmt_sd(c.measured_pct, c.ci95_pp),
            pct(c.same_windows_pct),
            c.same_windows_pct
                .map_or("n/a".into(), |p| format!("{:+.2} pp", p - c.measured_pct)),
            c.verdict.words(c.ci95_pp, c.measured_pct),
            match c.injection_agrees {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "n/a".into(),
            },
            whole,
            format!("{:.2} %", c.platform_pct),
        ]);
    }
    let mut s = if markdown { t.markdown() } else { t.render() };
    let verdicts: Vec<Verdict> = rows.iter().map(|c| c.verdict).collect();
    let _ = writeln!(
        s,
        "{}{}",
        if markdown { "\n" } else { "" },
        verdict::summary(&verdicts)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::DrawSpread;

    #[test]
    fn a_run_is_judged_by_its_own_windows_and_shown_beside_the_whole_trace() {
        let measured = ResultRow {
            ranks: 2,
            sync: "none".into(),
            sd_qtbt_pct: 10.0,
            sd_qtbt_ci95_pct: Some(1.0),
            sd_qt_pct: 21.26,
            sd_qt_ci95_pct: Some(32.7),
            ..ResultRow::default()
        };
        let same = ResultRow {
            sd_qtbt_pct: 10.5,
            sd_qt_pct: 2.0,
            ..ResultRow::default()
        };
        let whole = ResultRow {
            sd_qtbt_pct: 7.5,
            sd_qt_pct: 7.0,
            draws: Some(DrawSpread {
                draws: 3,
                sd_qtbt_range_pct: [1.7, 8.4],
                sd_qt_range_pct: [1.5, 8.0],
            }),
            ..ResultRow::default()
        };
        let check = InjectionCheck {
            run_injected: 100,
            predicted_injected: 101,
            tolerance: 4.0,
            run_injected_ns: 1,
            predicted_injected_ns: 1,
            tolerance_ns: 1.0,
            run_covered_ns: 1.0,
            predicted_covered_ns: 1.0,
            agrees: true,
        };
        let [e2, e3] = compare(Inputs {
            measured: &measured,
            platform_pct: 0.3,
            same_windows: Some((&same, &check)),
            whole: Some(&whole),
        });
        assert_eq!(e2.verdict, Verdict::Inside);
        assert_eq!(e2.whole_range_pct, Some([1.7, 8.4]));
        // An interval wider than the effect gives no verdict, however far the prediction is.
        assert_eq!(e3.verdict, Verdict::NoVerdict);
        let text = render(&[e2, e3], false);
        assert!(text.contains("7.50 % [1.70 – 8.40]"), "{text}");
        assert!(text.contains("1 of 2 agree"), "{text}");
        // Without its windows' prediction a run gets no verdict.
        let [n, _] = compare(Inputs {
            measured: &measured,
            platform_pct: 0.0,
            same_windows: None,
            whole: None,
        });
        assert_eq!(n.verdict, Verdict::NoVerdict);
    }
}
