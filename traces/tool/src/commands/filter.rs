//! `jitter-trace filter`: keep or drop the detour time of named sources of an attributed trace.

use std::path::PathBuf;

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;

use jitter_trace::attribution::sidecar_path;
use jitter_trace::filter_streams::{FilterPlan, SharedSidecar};
use jitter_trace::interop::Format;
use jitter_trace::output::check_output;

use crate::commands::input::{attribution_file_unchecked, check_collection, source, Input};
use crate::commands::output::{report_count, save_streams, Count, Output};

/// `jitter-trace filter`.
#[derive(Debug, Args)]
pub(crate) struct FilterArgs {
    /// The attributed trace (its sidecar `<trace>.attr.json` beside it).
    trace: PathBuf,
    /// Drop these sources' time: labels (`timer`, `task:x`), kinds (`task`) or
    /// `category:NAME`, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        conflicts_with = "keep",
        required_unless_present = "keep"
    )]
    drop: Vec<jitter_trace::filter::Selector>,
    /// Keep only these sources' time (same names as --drop).
    #[arg(long, value_delimiter = ',')]
    keep: Vec<jitter_trace::filter::Selector>,
    /// With --drop: a dropped task's or work item's detours lose their wake-up path too (the
    /// timer and scheduler parts and the unexplained time in them), as stopping it would.
    #[arg(long, requires = "drop")]
    with_wakeups: bool,
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    output: Output,
}

impl FilterArgs {
    /// Runs the subcommand; `json`: print JSON instead of text. The trace is read stream by
    /// stream and its sidecar detour by detour (`filter_streams`), in constant memory.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        use jitter_trace::filter::SourceFilter;
        let FilterArgs {
            trace,
            drop,
            keep,
            with_wakeups,
            input,
            output,
        } = self;
        let format = output.check()?;
        if format == Format::Jtr {
            // A filtered .jtr is written with its attribution beside it.
            check_output(
                &sidecar_path(&output.output),
                "-o writes",
                "the attribution (JSON)",
                &["json"],
            )?;
        }
        let source = source(std::slice::from_ref(&trace), &input)?;
        let sidecar = attribution_file_unchecked(&trace)?;
        let f = if keep.is_empty() {
            let f = SourceFilter::drop(drop);
            if with_wakeups {
                f.with_wakeups()
            } else {
                f
            }
        } else {
            SourceFilter::keep(keep)
        };
        let shared: SharedSidecar = Arc::new(sidecar.clone());
        let plan = FilterPlan::planned(source.src.as_ref(), shared, &f)?;
        check_collection(&trace, plan.collection_start_unix_ns())?;
        plan.require_named_sources(if f.keep { "--keep" } else { "--drop" })?;
        plan.check()?;
        let tally = plan.tally();
        let (written, count) = if format == Format::Jtr {
            let path = &output.output;
            (plan.write_jtr(path, &sidecar_path(path)))
                .with_context(|| path.display().to_string())?;
            let count = Count {
                streams: plan.frame().streams.len(),
                records: tally.kept,
            };
            (vec![path.clone()], count)
        } else {
            save_streams(&plan.source(), &output)?
        };
        let extra = json!({
            "filter": f.describe(),
            "removed_ns": tally.removed_ns,
            "emptied": tally.emptied,
            "below_threshold": tally.below_threshold,
            "shortened": tally.shortened,
            "wakeups": tally.wakeups,
        });
        report_count(json, count, &written, extra)
    }
}
