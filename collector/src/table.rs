//! The end-of-run table: per-CPU detour statistics in osjitter's columns, as text or JSON.

use hdrhistogram::Histogram;
use jitter_trace::table::Table;
use serde::Serialize;

/// Largest detour the histograms track exactly (one hour, ns); longer ones are clamped to it.
const HIST_MAX_NS: u64 = 3_600_000_000_000;

/// Running statistics of the detours recorded for one stream (bounded memory).
#[derive(Debug, Clone)]
pub struct DetourStats {
    hist: Histogram<u64>,
    /// Detours recorded.
    pub count: u64,
    /// Sum of recorded run-times, ns.
    pub sum_ns: u64,
    /// Longest recorded run-time, ns (exact).
    pub max_ns: u64,
    /// Detours shorter than 1 µs, 5 µs and 14 µs.
    pub under: [u64; 3],
}

impl Default for DetourStats {
    fn default() -> Self {
        Self::new()
    }
}

impl DetourStats {
    /// Empty statistics.
    pub fn new() -> Self {
        DetourStats {
            hist: Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds"),
            count: 0,
            sum_ns: 0,
            max_ns: 0,
            under: [0; 3],
        }
    }

    /// Adds one detour of `run_ns`.
    #[inline]
    pub fn record(&mut self, run_ns: u64) {
        self.hist.saturating_record(run_ns.clamp(1, HIST_MAX_NS));
        self.count += 1;
        self.sum_ns += run_ns;
        self.max_ns = self.max_ns.max(run_ns);
        for (slot, limit) in self.under.iter_mut().zip([1_000, 5_000, 14_000]) {
            if run_ns < limit {
                *slot += 1;
            }
        }
    }

    /// Run-time at quantile `q` (0..=1), ns (within 0.1 %); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            0
        } else {
            // The histogram reports a bucket's upper edge; never past the exact maximum.
            self.hist.value_at_quantile(q).min(self.max_ns)
        }
    }

    /// Median absolute deviation of the run-times from their median, ns (within 0.1 %).
    pub fn mad(&self) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let med = self.quantile(0.5);
        let mut dev: Vec<(u64, u64)> = self
            .hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to().abs_diff(med), v.count_at_value()))
            .collect();
        dev.sort_unstable();
        let half = self.count.div_ceil(2);
        let mut seen = 0;
        for (d, n) in dev {
            seen += n;
            if seen >= half {
                return d;
            }
        }
        0
    }
}

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
    pub fn new(stats: &DetourStats, f: RowFacts) -> Self {
        let sum = stats.sum_ns + f.lost_ns;
        let share = |n: u64| {
            if stats.count == 0 {
                0.0
            } else {
                n as f64 / stats.count as f64
            }
        };
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
            under_1us: share(stats.under[0]),
            under_5us: share(stats.under[1]),
            under_14us: share(stats.under[2]),
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
    fn statistics_match_exact_values() {
        let mut s = DetourStats::new();
        // 1..=1000 µs in ns: median 500 µs, MAD 250 µs.
        for i in 1..=1000u64 {
            s.record(i * 1000);
        }
        let near = |a: u64, b: u64| (a as f64 - b as f64).abs() <= b as f64 * 0.001 + 1.0;
        assert!(near(s.quantile(0.5), 500_000), "{}", s.quantile(0.5));
        assert!(near(s.quantile(0.99), 990_000), "{}", s.quantile(0.99));
        assert!(near(s.mad(), 250_000), "{}", s.mad());
        assert_eq!(s.max_ns, 1_000_000);
        assert_eq!(s.under, [0, 4, 13]);
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
        let text = render(&[row]);
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().next().unwrap().trim_start().starts_with("CPU"));
        let empty = DetourStats::new();
        assert_eq!((empty.quantile(0.5), empty.mad()), (0, 0));
    }
}
