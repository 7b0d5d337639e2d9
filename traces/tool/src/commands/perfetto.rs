//! `jitter-trace perfetto`: a collection as Chrome/Perfetto trace-event JSON.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use serde_json::json;

use jitter_trace::attribution::sidecar_path;
use jitter_trace::output::{check_output, write_output};
use jitter_trace::sidecar_reader::DetourSource;
use jitter_trace::units::parse_duration_ns;
use jitter_trace::TraceError;

use crate::commands::input::{attribution_file, source, Input};
use crate::commands::output::print_json;

/// `jitter-trace perfetto`.
#[derive(Debug, Args)]
pub(crate) struct PerfettoArgs {
    /// The trace (its attribution `<trace>.attr.json` is used when present).
    trace: PathBuf,
    #[command(flatten)]
    input: Input,
    /// Keep only this stretch, `FROM..TO` from the trace's start (e.g. 10s..20s).
    #[arg(long, value_name = "FROM..TO")]
    window: Option<String>,
    /// Most detours drawn as slices (the longest); the rest are in the counters only.
    #[arg(long, default_value_t = jitter_trace::interop::perfetto::DEFAULT_MAX_SLICES)]
    max_slices: usize,
    /// Output JSON file.
    #[arg(short, long)]
    output: PathBuf,
}

impl PerfettoArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        use jitter_trace::interop::perfetto::{write_trace_events, Export};
        check_output(
            &self.output,
            "-o",
            "Chrome/Perfetto trace events (JSON)",
            &["json"],
        )?;
        let t = source(std::slice::from_ref(&self.trace), &self.input)?.src;
        let a = if sidecar_path(&self.trace).exists() {
            Some(attribution_file(&self.trace)?)
        } else {
            None
        };
        let window = match &self.window {
            None => None,
            Some(w) => {
                let (a, b) = (w.split_once(".."))
                    .ok_or_else(|| anyhow!("--window must be FROM..TO, e.g. 10s..20s"))?;
                let (a, b) = (parse_duration_ns(a)?, parse_duration_ns(b)?);
                if !(a >= 0.0 && b > a) {
                    bail!("--window {w}: the end must come after the start");
                }
                Some((a.round() as u64, b.round() as u64))
            }
        };
        if self.max_slices == 0 {
            bail!("--max-slices must be at least 1");
        }
        let e = Export {
            window,
            max_slices: self.max_slices,
        };
        let mut omitted = Default::default();
        write_output(&self.output, |w| -> Result<(), TraceError> {
            let a = a.as_ref().map(|a| a as &dyn DetourSource);
            omitted = write_trace_events(t.as_ref(), a, &e, w)?;
            Ok(())
        })?;
        if json {
            return print_json(&json!({
                "output": self.output.display().to_string(),
                "attributed": a.is_some(),
                "omitted": omitted,
            }));
        }
        println!(
            "wrote {} ({} of {} detours as slices{}; {} attribution)",
            self.output.display(),
            omitted.slices,
            omitted.detours,
            if omitted.counter_only > 0 {
                format!(
                    ", {} shorter ones ({:.3} ms) in the counters only",
                    omitted.counter_only,
                    omitted.counter_only_ns as f64 / 1e6
                )
            } else {
                String::new()
            },
            if a.is_some() { "with" } else { "without" }
        );
        Ok(())
    }
}
