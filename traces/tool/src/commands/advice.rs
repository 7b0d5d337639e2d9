//! `jitter-trace advice`: tuning hints per source of an attributed trace.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use jitter_trace::attribution::{report_of, Scope};

use crate::commands::input::attribution_file;
use crate::commands::output::print_json;

/// `jitter-trace advice`.
#[derive(Debug, Args)]
pub(crate) struct AdviceArgs {
    /// The attributed trace (its sidecar `<trace>.attr.json` beside it).
    trace: PathBuf,
    /// Sources with less of the noise time get no hint (fraction).
    #[arg(long, default_value_t = 0.01)]
    min_share: f64,
}

impl AdviceArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        use jitter_trace::advice::{advise, render as render_advice, NodeConfig};
        if !(self.min_share.is_finite() && (0.0..1.0).contains(&self.min_share)) {
            bail!("--min-share must be in [0, 1), got {}", self.min_share);
        }
        let report = report_of(&attribution_file(&self.trace)?, Scope::default())?;
        let header = jitter_trace::TraceReader::open(&self.trace)?
            .header()
            .clone();
        let hints = advise(&report, &NodeConfig::of_header(&header), self.min_share);
        if json {
            print_json(&serde_json::to_value(&hints)?)
        } else {
            print!("{}", render_advice(&hints));
            Ok(())
        }
    }
}
