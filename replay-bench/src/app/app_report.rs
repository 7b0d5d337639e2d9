//! The report of a study: every run, the two arms, the effect and its verdict, the platform's
//! own noise; as JSON (`jitter_trace::output::write_output`) and as text tables.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use jitter_trace::summary::mean;
use jitter_trace::table::Table;

use super::pair_verdict::{judge, ArmSummary, Effect, Verdict};
use super::pairs::{Arm, RunRecord};
use crate::bench::noise::PlatformNoise;

/// The whole study, as written with `-o`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppReport {
    /// The command each run ran (launcher included).
    pub command: Vec<String>,
    /// The trace replayed.
    pub trace: String,
    /// The trace's noise ratio over the streams the ranks replay (what the library injects
    /// when all goes well).
    pub trace_noise_ratio: f64,
    /// S.
    pub scale: f64,
    /// How the library injected (`JITTER_INJECT`; `signal` in reports older than it).
    #[serde(default)]
    pub inject: jitter_emulator::InjectionMode,
    /// Why (`--inject auto`: the rule and this host's signal cost).
    #[serde(default)]
    pub inject_reason: String,
    /// `JITTER_SYNC`.
    pub sync: String,
    /// `JITTER_RANKS_PER_NODE`, if given.
    pub ranks_per_node: Option<u64>,
    /// The host the runs ran on (without `JITTER_RANKS_PER_NODE` the library's node: its
    /// ranks' timelines, `app::layout`); absent in reports older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Seed of the order and of each pair's `JITTER_SEED`.
    pub seed: u64,
    /// What was measured: "wall time, ns" or the `--metric` regex.
    pub metric: String,
    /// Time limit of one run, ns.
    pub timeout_ns: u64,
    /// This machine's own noise, probed on this CPU before the runs.
    pub platform_noise: PlatformNoise,
    /// Every run in the order it ran, warm-ups included.
    pub runs: Vec<RunRecord>,
    /// The arms and the effect over the counted pairs; None when the study stopped early.
    pub result: Option<AppResult>,
    /// Why the study stopped before its end, if it did.
    pub stopped: Option<String>,
    /// Warnings (a library that wrote no statistics, a trace that ran out).
    pub warnings: Vec<String>,
}

/// The counted pairs summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppResult {
    /// The metric without the library.
    pub without: ArmSummary,
    /// The metric with the library.
    pub with: ArmSummary,
    /// Slowdown, its interval, verdict, and the pairs that would do.
    pub effect: Effect,
    /// Mean of the library's injected share over the runs that reported it.
    pub injected_share: Option<f64>,
    /// The whole program's wall time beside the loop's (when the loop or a printed number is
    /// the metric): its slowdown holds the library's start-up and the set-up and output outside
    /// the loop, which `predict --app` does not predict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<Effect>,
    /// The library's start-up (its part of `MPI_Init`), mean ns per run: [without, with].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_ns: Option<[f64; 2]>,
    /// Mean wall time outside the loop (start-up, set-up, output, launcher), ns: [without, with].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_loop_ns: Option<[f64; 2]>,
}

/// (without, with) of each counted pair, in pair order.
pub fn pairs_of(runs: &[RunRecord]) -> Vec<(f64, f64)> {
    pairs_by(runs, RunRecord::value)
}

/// (without, with) of `value` of each counted pair, in pair order.
fn pairs_by(runs: &[RunRecord], value: impl Fn(&RunRecord) -> Option<f64>) -> Vec<(f64, f64)> {
    let counted: Vec<&RunRecord> = runs.iter().filter(|r| !r.warmup).collect();
    let mut out = Vec::new();
    for p in counted
        .iter()
        .map(|r| r.pair)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let of = |arm| {
            counted
                .iter()
                .find(|r| r.pair == p && r.arm == arm)
                .and_then(|r| value(r))
        };
        if let (Some(a), Some(b)) = (of(Arm::Without), of(Arm::With)) {
            out.push((a, b));
        }
    }
    out
}

/// The result of complete pairs of `runs`.
pub(crate) fn result_of(runs: &[RunRecord]) -> AppResult {
    let pairs = pairs_of(runs);
    let a: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let b: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    let shares: Vec<f64> = runs
        .iter()
        .filter(|r| !r.warmup)
        .filter_map(|r| r.library.as_ref().map(|l| l.noise_share))
        .collect();
    let timed = runs
        .iter()
        .any(|r| r.loop_ns.is_some() || r.metric.is_some());
    let means = |value: &dyn Fn(&RunRecord) -> Option<f64>| {
        let p = pairs_by(runs, value);
        let (a, b): (Vec<f64>, Vec<f64>) = p.into_iter().unzip();
        Some([mean(&a)?, mean(&b)?])
    };
    AppResult {
        without: ArmSummary::of(&a),
        with: ArmSummary::of(&b),
        effect: judge(&pairs),
        injected_share: mean(&shares),
        wall: timed.then(|| judge(&pairs_by(runs, |r| Some(r.wall_ns as f64)))),
        startup_ns: means(&|r| r.startup_ns.map(|ns| ns as f64)),
        outside_loop_ns: means(&|r| r.loop_ns.map(|ns| r.wall_ns.saturating_sub(ns) as f64)),
    }
}

/// What the library's statistics say about the runs with it: none written (it did not
/// intercept `MPI_Init`), or a trace that ran out before the program ended.
pub(crate) fn library_warnings(runs: &[RunRecord], trace_noise_ratio: f64) -> Vec<String> {
    let with: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| r.arm == Arm::With && r.status.success())
        .collect();
    let mut w = Vec::new();
    let silent = with.iter().filter(|r| r.library.is_none()).count();
    if silent > 0 {
        w.push(format!(
            "{silent} of {} runs with the library wrote no statistics: the library did not \
             replay there (no MPI_Init intercepted: a statically linked MPI, Fortran, or no MPI); \
             their slowdown is not the trace's",
            with.len()
        ));
    }
    let ran_out = with
        .iter()
        .filter(|r| r.library.as_ref().is_some_and(|l| !l.exhausted.is_empty()))
        .count();
    if ran_out > 0 {
        w.push(format!(
            "in {ran_out} runs the trace ran out before MPI_Finalize: use a longer trace"
        ));
    }
    w.extend(injected_too_little(&with, trace_noise_ratio));
    w
}

/// The library's injected share against the trace's noise: under half of it means most of
/// the trace's noise time is in detours the injector cannot reproduce at this S (each shorter
/// than its cost O, dropped): the study measures another noise than the trace's.
fn injected_too_little(with: &[&RunRecord], trace_noise_ratio: f64) -> Option<String> {
    let shares: Vec<f64> = (with.iter())
        .filter_map(|r| r.library.as_ref().map(|l| l.noise_share))
        .collect();
    let injected = jitter_trace::summary::mean(&shares)?;
    (trace_noise_ratio > 0.0 && injected < trace_noise_ratio / 2.0).then(|| {
        format!(
            "the library injected {:.3} % of each rank's time where the trace holds {:.3} % of \
             noise: most of its noise time is in detours shorter than the injector's cost at \
             this scale, which it drops; raise --scale (replay-bench choose-scale --trace gives \
             the S that keeps a share of them)",
            injected * 100.0,
            trace_noise_ratio * 100.0
        )
    })
}

fn num(v: f64) -> String {
    if v.abs() >= 1e5 || (v != 0.0 && v.abs() < 1e-2) {
        format!("{v:.4e}")
    } else {
        format!("{v:.4}")
    }
}

/// The wall time and the library's start-up beside the metric.
fn beside_lines(r: &AppResult) -> String {
    let mut out = String::new();
    if let Some([a, b]) = r.startup_ns {
        let _ = writeln!(
            out,
            "the library's start-up (its part of MPI_Init): {:.1} ms per run with the trace, \
             {:.1} ms without (outside the loop)",
            b / 1e6,
            a / 1e6
        );
    }
    if let Some(w) = &r.wall {
        let _ = write!(
            out,
            "the whole program's wall time beside it: {:+.2} % ± {:.2} pp",
            w.slowdown_pct, w.slowdown_ci95_pct
        );
        match r.outside_loop_ns {
            Some([a, b]) => {
                let _ = writeln!(
                    out,
                    " (it also counts {:.3} s outside the loop without the trace, {:.3} s with: \
                     start-up, set-up, output; predict --app predicts the loop)",
                    a / 1e9,
                    b / 1e9
                );
            }
            None => out.push('\n'),
        }
    }
    out
}

/// The verdict sentence.
pub fn verdict_line(e: &Effect) -> String {
    let sd = format!("{:+.2} % ± {:.2} pp", e.slowdown_pct, e.slowdown_ci95_pct);
    match e.verdict {
        Verdict::Slower => format!("slower with the trace: {sd} (95 %, {} pairs)", e.pairs),
        Verdict::Faster => format!("faster with the trace: {sd} (95 %, {} pairs)", e.pairs),
        Verdict::Inconclusive => {
            let more = match e.pairs_needed {
                Some(n) => format!("about {n} pairs would resolve an effect of this size"),
                None => "no difference to resolve".into(),
            };
            if e.slowdown_ci95_pct.is_finite() {
                format!(
                    "no verdict: the interval is wider than the effect ({sd}, {} pairs); {more}",
                    e.pairs
                )
            } else {
                format!("no verdict: {} pair(s) give no interval; {more}", e.pairs)
            }
        }
    }
}

impl AppReport {
    /// The tables and lines printed at the end of a study.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut runs = Table::new([
            "pair",
            "arm",
            "status",
            "wall (s)",
            "loop (s)",
            "start-up (ms)",
            "metric",
            "injected",
        ])
        .left(2);
        for r in &self.runs {
            runs.row([
                format!("{}{}", r.pair, if r.warmup { " (warm-up)" } else { "" }),
                match r.arm {
                    Arm::Without => "without".into(),
                    Arm::With => "with".to_string(),
                },
                r.status.to_string(),
                format!("{:.3}", r.wall_ns as f64 / 1e9),
                r.loop_ns
                    .map_or("-".into(), |ns| format!("{:.3}", ns as f64 / 1e9)),
                r.startup_ns
                    .map_or("-".into(), |ns| format!("{:.1}", ns as f64 / 1e6)),
                r.metric.map_or("-".into(), num),
                r.library
                    .as_ref()
                    .map_or("-".into(), |l| format!("{:.2} %", 100.0 * l.noise_share)),
            ]);
        }
        out.push_str(&runs.render());
        let _ = writeln!(
            out,
            "\ntrace {} (noise {:.3} %), S = {}, sync {}; metric: {}",
            self.trace,
            100.0 * self.trace_noise_ratio,
            self.scale,
            self.sync,
            self.metric
        );
        if !self.inject_reason.is_empty() {
            let _ = writeln!(out, "injection: {}", self.inject_reason);
        }
        let p = &self.platform_noise;
        let _ = writeln!(
            out,
            "platform noise {:.3} % ({} detours, longest {:.1} µs, in {:.2} s on this CPU)",
            100.0 * p.noise_ratio,
            p.detours,
            p.max_ns as f64 / 1e3,
            p.duration_ns as f64 / 1e9
        );
        if let Some(r) = &self.result {
            let mut t = Table::new(["arm", "runs", "mean", "sd", "min", "median", "max"]).left(1);
            for (name, a) in [("without", &r.without), ("with", &r.with)] {
                t.row([
                    name.to_string(),
                    a.runs.to_string(),
                    num(a.mean),
                    num(a.sd),
                    num(a.min),
                    num(a.median),
                    num(a.max),
                ]);
            }
            out.push('\n');
            out.push_str(&t.render());
            if let Some(s) = r.injected_share {
                let _ = writeln!(
                    out,
                    "the library injected {:.2} % of each rank's time (mean)",
                    100.0 * s
                );
            }
            let _ = writeln!(out, "{}", verdict_line(&r.effect));
            out.push_str(&beside_lines(r));
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        if let Some(s) = &self.stopped {
            let _ = writeln!(out, "stopped: {s}");
        }
        out
    }
}
