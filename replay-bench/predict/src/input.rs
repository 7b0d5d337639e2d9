//! A trace prepared for prediction (`TraceInput`): its label, its description for the report
//! and one plan per stream a node's ranks replay; a node-trace set is one more input
//! (`TraceInput::node_set`), and the platform's own noise rides beside the plans
//! (`BackgroundPlans`, united in `background`).

use std::sync::Arc;

use jitter_emulator::{Plan, PlanOptions};
use jitter_trace::{Replayed, Trace};
use rayon::prelude::*;

use super::rank_layout;
use jitter_report::report::TraceInfo;

/// A trace prepared for prediction: its label, description and one plan per stream used.
#[derive(Debug, Clone)]
pub struct TraceInput {
    /// Label in tables and plots.
    pub label: String,
    /// Description for the report.
    pub info: TraceInfo,
    /// Plans of streams 0..k, of each node trace in turn for a set ([`Placement`]); with a
    /// background, the trace united with it ([`background`]).
    pub plans: Vec<Arc<Plan>>,
    /// The platform's own noise the plans are united with, if any: the baseline's plans.
    pub background: Option<BackgroundPlans>,
}

/// The platform noise of a prediction with a background, laid out as [`TraceInput::plans`].
#[derive(Debug, Clone)]
pub struct BackgroundPlans {
    /// The platform-noise trace.
    pub label: String,
    /// The platform's streams alone (the baseline), one per united plan.
    pub plans: Vec<Arc<Plan>>,
    /// The trace plans' counts over one lap each (drops and merges happen before the union).
    pub lap: jitter_emulator::PlanStats,
}

/// What a prediction's report says of the whole trace, however much of it was read.
struct Whole {
    streams: usize,
    noise_ratio: f64,
    detours_per_s: f64,
    digest: String,
}

impl TraceInput {
    /// Prepares streams `0..ranks_per_node` of `trace` with `options` (all its streams when it
    /// has fewer: the ranks beyond them replay copies, `jitter_emulator::placement`).
    pub fn new(
        trace: &Trace,
        path: &str,
        label: &str,
        options: PlanOptions,
        ranks_per_node: u64,
    ) -> anyhow::Result<Self> {
        let whole = Whole {
            streams: trace.streams.len(),
            noise_ratio: trace.noise_ratio(),
            detours_per_s: trace.detours_per_s(),
            digest: jitter_trace::digest::content_digest(trace),
        };
        let plans = plans_of(trace, path, options, ranks_per_node)?;
        Ok(Self::of(trace, path, label, whole, plans))
    }

    /// [`TraceInput::new`] of a trace read with only the streams its ranks replay
    /// ([`jitter_trace::read_replayed`]: streams `0..ranks_per_node`): the plans from those,
    /// the description from the whole trace's facts, equal to `new`'s of the whole trace.
    pub fn replayed(
        replayed: &Replayed,
        path: &str,
        label: &str,
        options: PlanOptions,
        ranks_per_node: u64,
    ) -> anyhow::Result<Self> {
        let (trace, facts) = (&replayed.trace, &replayed.facts);
        let (noise_ratio, detours_per_s) = facts.pooled(0..facts.streams());
        let whole = Whole {
            streams: facts.streams(),
            noise_ratio,
            detours_per_s,
            digest: facts.digest.clone(),
        };
        let plans = plans_of(trace, path, options, ranks_per_node)?;
        Ok(Self::of(trace, path, label, whole, plans))
    }

    /// The input of `plans` made from `trace` (its header), described by `whole`.
    fn of(trace: &Trace, path: &str, label: &str, whole: Whole, plans: Vec<Arc<Plan>>) -> Self {
        TraceInput {
            label: label.to_string(),
            info: TraceInfo {
                path: path.to_string(),
                label: label.to_string(),
                host: trace.header.host.clone(),
                kernel: trace.header.kernel_release.clone(),
                streams: whole.streams,
                noise_ratio: whole.noise_ratio,
                detours_per_s: whole.detours_per_s,
                nodes: Vec::new(),
                integrity: None,
                digest: Some(whole.digest),
            },
            plans,
            background: None,
        }
    }

    /// One input of a node-trace set (each prepared by [`TraceInput::new`], in node order):
    /// node group g of ranks replays the (g mod n)-th; labelled `nodes(n)`.
    pub fn node_set(nodes: Vec<TraceInput>) -> anyhow::Result<Self> {
        anyhow::ensure!(!nodes.is_empty(), "--node-traces needs at least one trace");
        let n = nodes.len();
        let label = rank_layout::set_label(n);
        let info = TraceInfo::node_set(&label, nodes.iter().map(|t| t.info.clone()).collect());
        Ok(TraceInput {
            label,
            info,
            plans: nodes.into_iter().flat_map(|t| t.plans).collect(),
            background: None,
        })
    }
}

/// The plans of streams `0..ranks_per_node` of `trace` (all its streams when it has fewer).
fn plans_of(
    trace: &Trace,
    path: &str,
    options: PlanOptions,
    ranks_per_node: u64,
) -> anyhow::Result<Vec<Arc<Plan>>> {
    anyhow::ensure!(ranks_per_node >= 1, "--ranks-per-node must be at least 1");
    anyhow::ensure!(!trace.streams.is_empty(), "trace {path} has no streams");
    (0..trace.streams.len().min(ranks_per_node as usize))
        .into_par_iter()
        .map(|s| {
            Plan::from_trace(trace, s, options).map_err(|e| anyhow::anyhow!("trace {path}: {e}"))
        })
        .collect()
}
