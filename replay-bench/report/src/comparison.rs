//! Like with like, as a table: each measured row of a real run beside the prediction of the
//! same stretches of its trace (`predict --windows-of`), judged by [`crate::verdict`], with the
//! check that both injected the same detours, and beside the prediction over the whole trace
//! with its 95 % interval and its range over offset draws (`predict --draws`). Where the run recorded its blocks and
//! the prediction its windows, the difference is judged window by window (the paired interval
//! of `metrics::paired_difference`: the stretch each block replayed cancels). The main job's
//! report (`study`) and `validate` print it.

use std::fmt::Write as _;

use jitter_emulator::InjectionMode;
use serde::{Deserialize, Serialize};

use jitter_trace::table::{Align, Table};

use crate::metrics::paired_difference;
use crate::report::{BlockMeans, ResultRow, WindowsOf};
use crate::verdict::{self, Verdict};

/// One measured slowdown beside its predictions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// How the run injected (`signal` in tables written before it was recorded).
    #[serde(default)]
    pub inject: InjectionMode,
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
    /// The 95 % half-width of the difference (same windows − measured) paired window by window,
    /// pp (`None`: the run or the prediction recorded no blocks; the verdict then rests on the
    /// measured interval).
    #[serde(default)]
    pub paired_ci95_pp: Option<f64>,
    /// Whether the run and that prediction injected the same detours.
    pub injection_agrees: Option<bool>,
    /// The prediction over the whole trace (every draw pooled), percent.
    pub whole_pct: Option<f64>,
    /// Half-width of its 95 % interval over the draws, pp (`None`: one draw, or a report
    /// written before predictions had intervals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_ci95_pp: Option<f64>,
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
    /// The prediction of its windows, with the check of the injections and each window's SD.
    pub same_windows: Option<(&'a ResultRow, &'a WindowsOf)>,
    /// The run's block means of every complete pair (empty: not recorded).
    pub blocks: &'a [BlockMeans],
    /// The whole-trace prediction at the run's ranks and mode.
    pub whole: Option<&'a ResultRow>,
    /// How the run injected.
    pub inject: InjectionMode,
}

/// The two comparisons (eq. 2 and eq. 3) of one run.
pub fn compare(i: Inputs<'_>) -> [Comparison; 2] {
    let m = i.measured;
    type Pick = fn(&ResultRow) -> (f64, Option<f64>);
    let one = |metric: &str, meas: f64, ci: Option<f64>, pick: Pick| {
        let same = i.same_windows.map(|(r, _)| pick(r));
        let eq2 = metric == "eq.2";
        let paired = i.same_windows.and_then(|(_, w)| {
            let pairs: Vec<(f64, f64)> = (i.blocks.iter())
                .map(|b| {
                    if eq2 {
                        (b.base_qtbt_ns, b.jit_qtbt_ns)
                    } else {
                        (b.base_qt_ns, b.jit_qt_ns)
                    }
                })
                .collect();
            let predicted: Vec<f64> = (w.window_sd_pct.iter())
                .map(|p| if eq2 { p[0] } else { p[1] })
                .collect();
            paired_difference(&pairs, &predicted)
        });
        let range = i.whole.and_then(|w| w.draws).map(|d| {
            if metric == "eq.2" {
                d.sd_qtbt_range_pct
            } else {
                d.sd_qt_range_pct
            }
        });
        Comparison {
            inject: i.inject,
            ranks: m.ranks,
            sync: m.sync.clone(),
            metric: metric.into(),
            measured_pct: meas,
            ci95_pp: ci,
            same_windows_pct: same.map(|s| s.0),
            paired_ci95_pp: paired.map(|d| d.ci95_pct),
            injection_agrees: i.same_windows.map(|(_, w)| w.injection.agrees),
            whole_pct: i.whole.map(|w| pick(w).0),
            whole_ci95_pp: i.whole.and_then(|w| pick(w).1),
            whole_range_pct: range,
            platform_pct: i.platform_pct,
            verdict: match (same, paired) {
                // The paired difference's mean is the rows' difference (every window has the
                // same phases and the same baseline); its interval is the paired one.
                (Some((p, _)), Some(d)) => {
                    Verdict::judge_difference(meas, p - meas, Some(d.ci95_pct), i.platform_pct)
                }
                // The prediction of the run's own windows carries no interval (it replays
                // those very stretches): the measurement's alone, combined with none.
                (Some((p, h)), None) => Verdict::judge(meas, ci, p, h, i.platform_pct),
                (None, _) => Verdict::NoVerdict,
            },
        }
    };
    [
        one("eq.2", m.sd_qtbt_pct, m.sd_qtbt_ci95_pct, |r| {
            (r.sd_qtbt_pct, r.sd_qtbt_ci95_pct)
        }),
        one("eq.3", m.sd_qt_pct, m.sd_qt_ci95_pct, |r| {
            (r.sd_qt_pct, r.sd_qt_ci95_pct)
        }),
    ]
}

fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.2} %"),
        _ => "n/a".into(),
    }
}

impl Comparison {
    /// The difference same windows − measured, with its paired interval where there is one
    /// (`+0.13 ± 0.40 pp`, `+0.13 pp`, or `n/a`).
    pub fn diff_words(&self) -> String {
        match (self.same_windows_pct, self.paired_ci95_pp) {
            (Some(p), Some(h)) => format!("{:+.2} ± {h:.2} pp", p - self.measured_pct),
            (Some(p), None) => format!("{:+.2} pp", p - self.measured_pct),
            (None, _) => "n/a".into(),
        }
    }

    /// The verdict in words, naming the interval it rested on.
    pub fn verdict_words(&self) -> String {
        (self.verdict).words(self.paired_ci95_pp.or(self.ci95_pp), self.measured_pct)
    }
}

/// The table (markdown when `markdown`, else text) and the closing count.
pub fn render(rows: &[Comparison], markdown: bool) -> String {
    let mut t = Table::new([
        "inject",
        "ranks",
        "sync",
        "SD",
        "measured (95 %)",
        "same windows",
        "diff",
        "verdict",
        "same detours",
        "whole trace ± 95 % [draws]",
        "platform",
    ])
    .align(0, Align::Left)
    .align(2, Align::Left)
    .align(3, Align::Left)
    .align(7, Align::Left)
    .align(8, Align::Left);
    for c in rows {
        let whole = match (c.whole_pct, c.whole_range_pct) {
            (Some(w), range) => {
                let mut s = match c.whole_ci95_pp {
                    Some(h) if h.is_finite() => crate::formats::fmt_sd(w, Some(h)),
                    _ => pct(Some(w)),
                };
                if let Some([lo, hi]) = range {
                    s.push_str(&format!(" [{lo:.2} – {hi:.2}]"));
                }
                s
            }
            (None, _) => pct(None),
        };
        t.row([
            c.inject.to_string(),
            c.ranks.to_string(),
            c.sync.clone(),
            c.metric.clone(),
            crate::formats::fmt_sd(c.measured_pct, c.ci95_pp),
            pct(c.same_windows_pct),
            c.diff_words(),
            c.verdict_words(),
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

/// One line per (ranks, sync, SD) measured in both injection modes: the two measured SDs, their
/// difference with the 95 % half-width of a difference of two independent runs
/// (√(h₁² + h₂²)), and whether they agree (|d| ≤ h), beside each mode's own verdict; the modes
/// replay the same trace, the signal injector with what its S leaves injectable.
pub fn modes_side_by_side(rows: &[Comparison]) -> Vec<String> {
    let mut out = Vec::new();
    for s in rows.iter().filter(|c| c.inject == InjectionMode::Signal) {
        let Some(b) = rows.iter().find(|c| {
            c.inject == InjectionMode::Boundary
                && (c.ranks, &c.sync, &c.metric) == (s.ranks, &s.sync, &s.metric)
        }) else {
            continue;
        };
        let d = s.measured_pct - b.measured_pct;
        let h = match (s.ci95_pp, b.ci95_pp) {
            (Some(x), Some(y)) => Some((x * x + y * y).sqrt()),
            _ => None,
        };
        let words = match h {
            Some(h) if d.abs() <= h => format!("{d:+.2} ± {h:.2} pp: agree"),
            Some(h) => format!("{d:+.2} ± {h:.2} pp: differ"),
            None => format!("{d:+.2} pp: no interval"),
        };
        out.push(format!(
            "signal vs boundary, np {} {} {}: {} and {} measured, {words}; each against its \
             prediction: {} / {}",
            s.ranks,
            s.sync,
            s.metric,
            crate::formats::fmt_sd(s.measured_pct, s.ci95_pp),
            crate::formats::fmt_sd(b.measured_pct, b.ci95_pp),
            s.verdict_words(),
            b.verdict_words()
        ));
    }
    out
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
        let windows = windows_of(Vec::new());
        let [e2, e3] = compare(Inputs {
            measured: &measured,
            platform_pct: 0.3,
            same_windows: Some((&same, &windows)),
            blocks: &[],
            whole: Some(&whole),
            inject: InjectionMode::Signal,
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
            blocks: &[],
            whole: None,
            inject: InjectionMode::Signal,
        });
        assert_eq!(n.verdict, Verdict::NoVerdict);
    }

    fn windows_of(window_sd_pct: Vec<[f64; 2]>) -> WindowsOf {
        WindowsOf {
            run: "run.json".into(),
            windows: window_sd_pct.len() as u64,
            phases_per_window: 10,
            injection: crate::report::InjectionCheck {
                run_injected: 100,
                predicted_injected: 101,
                tolerance: 4.0,
                run_injected_ns: 1,
                predicted_injected_ns: 1,
                tolerance_ns: 1.0,
                run_covered_ns: 1.0,
                predicted_covered_ns: 1.0,
                agrees: true,
            },
            window_sd_pct,
        }
    }

    /// Judges per-window predictions `p` against blocks measuring 10, 30, 5 and 15 % (SD 15 %,
    /// ± 17.2 pp: too wide for a verdict on its own), platform 0.3 %.
    fn judge_windows(p: [f64; 4]) -> Comparison {
        let blocks: Vec<BlockMeans> = [1100.0, 1300.0, 1050.0, 1150.0]
            .iter()
            .map(|&jit| BlockMeans {
                base_qt_ns: 1000.0,
                base_qtbt_ns: 1000.0,
                jit_qt_ns: jit,
                jit_qtbt_ns: jit,
            })
            .collect();
        let measured = ResultRow {
            ranks: 2,
            sync: "none".into(),
            sd_qtbt_pct: 15.0,
            sd_qtbt_ci95_pct: Some(17.2),
            ..ResultRow::default()
        };
        let same = ResultRow {
            sd_qtbt_pct: p.iter().sum::<f64>() / 4.0,
            ..ResultRow::default()
        };
        let windows = windows_of(p.iter().map(|&x| [x, x]).collect());
        let [e2, _] = compare(Inputs {
            measured: &measured,
            platform_pct: 0.3,
            same_windows: Some((&same, &windows)),
            blocks: &blocks,
            whole: None,
            inject: InjectionMode::Signal,
        });
        e2
    }

    #[test]
    fn the_difference_is_judged_window_by_window_where_both_recorded_them() {
        // Unpaired, the measured ± 17.2 pp decides nothing (wider than the 15 % effect).
        assert_eq!(
            Verdict::judge(15.0, Some(17.2), 15.0, None, 0.3),
            Verdict::NoVerdict
        );
        // Differences 0.2, -0.2, 0.1, -0.1: mean 0, paired half-width t(3) · s / 2.
        let c = judge_windows([10.2, 29.8, 5.1, 14.9]);
        assert_eq!(c.verdict, Verdict::Inside);
        let s = (0.1_f64 / 3.0).sqrt();
        let h = c.paired_ci95_pp.unwrap();
        assert!((h - 3.182_446 * s / 2.0).abs() < 1e-4, "{h}");
        // A steady +0.5 pp: outside the narrow paired interval, within 1 pp + platform.
        assert_eq!(
            judge_windows([10.4, 30.6, 5.5, 15.5]).verdict,
            Verdict::Near
        );
        // A steady +3 pp: a disagreement the unpaired interval could not have shown.
        assert_eq!(
            judge_windows([13.0, 33.1, 7.9, 18.0]).verdict,
            Verdict::Disagrees
        );
        let text = render(&[judge_windows([10.2, 29.8, 5.1, 14.9])], false);
        assert!(text.contains("+0.00 ± 0.29 pp"), "{text}");
    }

    #[test]
    fn both_injection_modes_of_one_point_are_set_side_by_side_with_the_interval_of_a_difference() {
        let row = |inject, measured_pct, ci: f64| Comparison {
            inject,
            ranks: 2,
            sync: "phase".into(),
            metric: "eq.3".into(),
            measured_pct,
            ci95_pp: Some(ci),
            same_windows_pct: None,
            paired_ci95_pp: None,
            injection_agrees: None,
            whole_pct: None,
            whole_range_pct: None,
            whole_ci95_pp: None,
            platform_pct: 0.0,
            verdict: Verdict::NoVerdict,
        };
        let signal = row(InjectionMode::Signal, 10.0, 3.0);
        let lines = modes_side_by_side(&[signal.clone(), row(InjectionMode::Boundary, 14.0, 4.0)]);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("-4.00 ± 5.00 pp: agree"), "{}", lines[0]);
        let lines = modes_side_by_side(&[signal.clone(), row(InjectionMode::Boundary, 16.0, 4.0)]);
        assert!(lines[0].contains("-6.00 ± 5.00 pp: differ"), "{}", lines[0]);
        // A point measured in one mode only has no line.
        assert!(modes_side_by_side(&[signal]).is_empty());
    }
}
