//! Human tables: the number formats every table shares, and reports side by side
//! (`replay-bench compare`). The summary of one run is the benchmark's (`bench::run_summary`).

use std::fmt::Write as _;

use jitter_trace::table::{Align, Table};

use crate::report::{CallPayments, Report, ResultRow};

/// Formats ns as µs or ms with 4 significant-ish digits.
pub fn fmt_ns(ns: f64) -> String {
    if !ns.is_finite() {
        "-".into()
    } else if ns.abs() >= 1e6 {
        format!("{:.4} ms", ns / 1e6)
    } else {
        format!("{:.2} us", ns / 1e3)
    }
}

/// What the ranks paying at calls paid: shares, the least faithful rank, where, how late.
pub fn payments_line(p: &CallPayments) -> String {
    let least = |k: usize| {
        p.rank_shares
            .iter()
            .map(|r| r[k])
            .fold(f64::INFINITY, f64::min)
    };
    format!(
        "paid at MPI calls: {:.3} % of the detours met, {:.3} % of their time (least rank {:.3} \
         %, {:.3} %; worst phase {:.3} %, {} of {} phases missed one); at a call's entry {} \
         (lateness p50 ≤ {}), inside a polled call {} (p99 ≤ {}), after a blocking call {}; {} \
         calls, {:.1} polls per call",
        p.detour_share * 100.0,
        p.time_share * 100.0,
        least(0) * 100.0,
        least(1) * 100.0,
        p.worst_phase_time_share * 100.0,
        p.phases_missing,
        p.phases,
        p.at_entry.payments,
        fmt_ns(p.at_entry.lateness_p50_at_most_ns as f64),
        p.in_call.payments,
        fmt_ns(p.in_call.lateness_p99_at_most_ns as f64),
        p.on_return.payments,
        p.calls,
        p.polls as f64 / p.calls.max(1) as f64,
    )
}

/// A percentage with three decimals, `3.021 %` (`-` when not finite).
pub fn fmt_pct(p: f64) -> String {
    if p.is_finite() {
        format!("{p:.3} %")
    } else {
        "-".into()
    }
}

/// A slowdown with its 95 % half-width, `3.02 % ± 0.21` (or `3.020 %` without one).
pub fn fmt_sd(p: f64, ci95: Option<f64>) -> String {
    match ci95 {
        Some(h) if p.is_finite() && h.is_finite() => format!("{p:.2} % ± {h:.2}"),
        _ => fmt_pct(p),
    }
}

fn key(r: &ResultRow) -> (String, u64, String) {
    (r.trace.clone(), r.ranks, r.sync.clone())
}

/// Rows of two reports side by side, matched by (trace, ranks, sync); unmatched rows alone.
pub fn render_compare(a: &Report, b: &Report, a_name: &str, b_name: &str) -> String {
    let mut keys: Vec<(String, u64, String)> = a.results.iter().map(key).collect();
    for r in &b.results {
        if !keys.contains(&key(r)) {
            keys.push(key(r));
        }
    }
    keys.sort();
    let mut s = String::new();
    let _ = writeln!(s, "A = {a_name} ({})", a.kind);
    let _ = writeln!(s, "B = {b_name} ({})", b.kind);
    let mut table = Table::new([
        "trace", "ranks", "sync", "SD2 A", "SD2 B", "B-A", "SD3 A", "SD3 B", "B-A", "lost A",
        "lost B",
    ])
    .align(0, Align::Left)
    .align(2, Align::Left);
    let find =
        |r: &Report, k: &(String, u64, String)| r.results.iter().find(|x| key(x) == *k).cloned();
    for k in &keys {
        let ra = find(a, k);
        let rb = find(b, k);
        let v = |r: &Option<ResultRow>, f: fn(&ResultRow) -> f64| r.as_ref().map_or(f64::NAN, f);
        let (a2, b2) = (v(&ra, |r| r.sd_qtbt_pct), v(&rb, |r| r.sd_qtbt_pct));
        let (a3, b3) = (v(&ra, |r| r.sd_qt_pct), v(&rb, |r| r.sd_qt_pct));
        let (la, lb) = (
            v(&ra, |r| r.lost_rel * 100.0),
            v(&rb, |r| r.lost_rel * 100.0),
        );
        table.row([
            if k.0.is_empty() {
                "-".into()
            } else {
                k.0.clone()
            },
            k.1.to_string(),
            k.2.clone(),
            fmt_pct(a2),
            fmt_pct(b2),
            fmt_pct(b2 - a2),
            fmt_pct(a3),
            fmt_pct(b3),
            fmt_pct(b3 - a3),
            fmt_pct(la),
            fmt_pct(lb),
        ]);
    }
    s.push_str(&table.render());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Config, ReportKind};

    fn rep(kind: ReportKind, rows: &[(u64, &str, f64)]) -> Report {
        let mut r = Report::new(kind, Config::default());
        for &(ranks, sync, sd) in rows {
            r.results.push(ResultRow {
                trace: "t".into(),
                ranks,
                sync: sync.into(),
                sd_qtbt_pct: sd,
                sd_qt_pct: sd / 2.0,
                ..ResultRow::default()
            });
        }
        r
    }

    #[test]
    fn compare_matches_rows_and_keeps_the_unmatched() {
        let a = rep(ReportKind::Run, &[(2, "none", 4.0), (2, "phase", 2.0)]);
        let b = rep(
            ReportKind::PredictDes,
            &[(2, "phase", 2.5), (4, "phase", 2.6)],
        );
        let t = render_compare(&a, &b, "a.json", "b.json");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6, "{t}");
        let phase2 = lines.iter().find(|l| l.contains(" 2  phase")).unwrap();
        assert!(
            phase2.contains("2.000 %") && phase2.contains("2.500 %") && phase2.contains("0.500 %"),
            "{phase2}"
        );
        let none = lines.iter().find(|l| l.contains("none")).unwrap();
        assert!(none.contains("4.000 %") && none.contains(" - "), "{none}");
    }

    #[test]
    fn units_read_well() {
        assert_eq!(fmt_ns(1_234_567.0), "1.2346 ms");
        assert_eq!(fmt_ns(15_500.0), "15.50 us");
        assert_eq!(fmt_ns(f64::NAN), "-");
        assert_eq!(fmt_sd(3.0214, Some(0.2149)), "3.02 % ± 0.21");
        assert_eq!(fmt_sd(3.0214, None), "3.021 %");
        assert_eq!(fmt_sd(3.0, Some(f64::NAN)), "3.000 %");
    }
}
