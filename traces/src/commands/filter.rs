//! `jitter-trace filter`: keep or drop the detour time of named sources of an attributed trace.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use jitter_trace::attribution::sidecar_path;
use jitter_trace::interop::Format;

use crate::commands::input::{load, load_attribution, Input};
use crate::commands::output::{report_written, save, Output};

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
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        use jitter_trace::filter::{filter, SourceFilter};
        let FilterArgs {
            trace,
            drop,
            keep,
            with_wakeups,
            input,
            output,
        } = self;
        let t = load(std::slice::from_ref(&trace), &input)?;
        let a = load_attribution(&trace)?;
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
        let filtered = filter(&t, &a, &f)?;
        let written = save(&filtered.trace, &output)?;
        if Format::resolve(output.to, &output.output)? == Format::Jtr {
            filtered.attribution.write(&sidecar_path(&output.output))?;
        }
        let extra = json!({
            "filter": f.describe(),
            "removed_ns": filtered.removed_ns,
            "emptied": filtered.emptied,
            "below_threshold": filtered.below_threshold,
            "shortened": filtered.shortened,
            "wakeups": filtered.wakeups,
        });
        report_written(json, &filtered.trace, &written, extra)
    }
}
