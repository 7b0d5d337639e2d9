//! The end-of-run table: per-CPU detour statistics in osjitter's columns, as text or JSON.

use jitter_trace::table::Table;
use serde::Serialize;

pub use jitter_trace::summary::DetourHistogram;

/// One line of the end table: what one CPU saw (osjitter's columns plus a few).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuRow {
    /// CPU id.
    pub cpu: u32,
    /// Counter frequency used, kHz.
    pub tsc_khz: u64,
    /// Detours the probe saw (recorded + lost).
    pub intr: u64,
    /// Detours recorded in the trace.
    pub delta: u64,
    /// Detours lost to ring overflow.
    pub ovfl: u64,
    /// Time of the lost detours, ns.
    pub ovfl_ns: u64,
    /// Involuntary context switches of the probe thread.
    pub invol_ctx: u64,
    /// Sum of all detours (recorded + lost), ns.
    pub sum_intr_ns: u64,
    /// Noise ratio: sum_intr_ns / rt.
    pub iratio: f64,
    /// Observation time, s.
    pub rt_s: f64,
    /// Mean undisturbed loop period, ns.
    pub loop_ns: f64,
    /// Median run-time, ns.
    pub median_ns: u64,
    /// 20th percentile, ns.
    pub p20_ns: u64,
    /// 80th percentile, ns.
    pub p80_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// 99.9th percentile, ns.
    pub p99_9_ns: u64,
    /// 99.99th percentile, ns.
    pub p99_99_ns: u64,
    /// Longest detour, ns.
    pub max_ns: u64,
    /// Median absolute deviation, ns.
    pub mad_ns: u64,
    /// Share of recorded detours shorter than 1 µs.
    pub under_1us: f64,
    /// Share shorter than 5 µs.
    pub under_5us: f64,
    /// Share shorter than 14 µs.
    pub under_14us: f64,
    /// Hardware interrupts on this CPU during the collection (`/proc/interrupts` delta).
    pub irqs: u64,
    /// Softirqs on this CPU during the collection (`/proc/softirqs` delta).
    pub softirqs: u64,
    /// Detour time overlapping the writer's activity windows, ns (upper bound of self-noise).
    pub self_ns: u64,
}

/// Inputs for one row besides the detour statistics.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowFacts {
    /// CPU id.
    pub cpu: u32,
    /// Counter frequency, kHz.
    pub tsc_khz: u64,
    /// Detours lost to overflow.
    pub lost: u64,
    /// Their time, ns.
    pub lost_ns: u64,
    /// Involuntary context switches.
    pub invol_ctx: u64,
    /// Observation time, ns.
    pub rt_ns: u64,
    /// Mean undisturbed loop period, ns.
    pub loop_ns: f64,
    /// Interrupt and softirq deltas.
    pub irqs: u64,
    /// Softirq delta.
    pub softirqs: u64,
    /// Detour time overlapping the writer's windows, ns.
    pub self_overlap_ns: u64,
}

impl CpuRow {
    /// Builds a row from a stream's statistics and facts.
    pub fn new(stats: &DetourHistogram, f: RowFacts) -> Self {
        let sum = stats.sum_ns + f.lost_ns;
        let [under_1us, under_5us, under_14us] = stats.under_shares();
        CpuRow {
            cpu: f.cpu,
            tsc_khz: f.tsc_khz,
            intr: stats.count + f.lost,
            delta: stats.count,
            ovfl: f.lost,
            ovfl_ns: f.lost_ns,
            invol_ctx: f.invol_ctx,
            sum_intr_ns: sum,
            iratio: if f.rt_ns == 0 {
                0.0
            } else {
                sum as f64 / f.rt_ns as f64
            },
            rt_s: f.rt_ns as f64 / 1e9,
            loop_ns: f.loop_ns,
            median_ns: stats.quantile(0.5),
            p20_ns: stats.quantile(0.2),
            p80_ns: stats.quantile(0.8),
            p90_ns: stats.quantile(0.9),
            p99_ns: stats.quantile(0.99),
            p99_9_ns: stats.quantile(0.999),
            p99_99_ns: stats.quantile(0.9999),
            max_ns: stats.max_ns,
            mad_ns: stats.mad(),
            under_1us,
            under_5us,
            under_14us,
            irqs: f.irqs,
            softirqs: f.softirqs,
            self_ns: f.self_overlap_ns,
        }
    }
}

/// Renders rows as a fixed-width text table (osjitter's column names, then the extras).
pub fn render(rows: &[CpuRow]) -> String {
    let heads = [
        "CPU",
        "TSC_khz",
        "#intr",
        "#delta",
        "ovfl_ns",
        "invol_ctx",
        "sum_intr_ns",
        "iratio",
        "rt_s",
        "loop_ns",
        "median",
        "p20",
        "p80",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "max",
        "mad",
        "<1us",
        "<5us",
        "<14us",
        "irqs",
        "softirqs",
        "self_ns",
    ];
    let mut table = Table::new(heads);
    for r in rows {
        table.row([
            r.cpu.to_string(),
            r.tsc_khz.to_string(),
            r.intr.to_string(),
            r.delta.to_string(),
            r.ovfl_ns.to_string(),
            r.invol_ctx.to_string(),
            r.sum_intr_ns.to_string(),
            format!("{:.5}", r.iratio),
            format!("{:.1}", r.rt_s),
            format!("{:.1}", r.loop_ns),
            r.median_ns.to_string(),
            r.p20_ns.to_string(),
            r.p80_ns.to_string(),
            r.p90_ns.to_string(),
            r.p99_ns.to_string(),
            r.p99_9_ns.to_string(),
            r.p99_99_ns.to_string(),
            r.max_ns.to_string(),
            r.mad_ns.to_string(),
            format!("{:.3}", r.under_1us),
            format!("{:.3}", r.under_5us),
            format!("{:.3}", r.under_14us),
            r.irqs.to_string(),
            r.softirqs.to_string(),
            r.self_ns.to_string(),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_carry_the_statistics_and_the_lost_detours() {
        // 1..=1000 µs in ns (the statistics themselves: `jitter_trace::summary`'s tests).
        let s = DetourHistogram::of((1..=1000u64).map(|i| i * 1000));
        let row = CpuRow::new(
            &s,
            RowFacts {
                lost: 2,
                lost_ns: 500,
                rt_ns: 1_000_000_000,
                ..Default::default()
            },
        );
        assert_eq!(row.intr, 1002);
        assert_eq!(row.sum_intr_ns, 500_500_000 + 500);
        assert!((row.iratio - 0.5005005).abs() < 1e-9);
        assert_eq!(
            (row.median_ns, row.mad_ns, row.max_ns),
            (s.quantile(0.5), s.mad(), 1_000_000)
        );
        assert_eq!((row.under_5us, row.under_14us), (0.004, 0.013));
        let text = render(&[row]);
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().next().unwrap().trim_start().starts_with("CPU"));
        let empty = CpuRow::new(&DetourHistogram::new(), RowFacts::default());
        assert_eq!(
            (empty.median_ns, empty.mad_ns, empty.under_1us),
            (0, 0, 0.0)
        );
    }
}
