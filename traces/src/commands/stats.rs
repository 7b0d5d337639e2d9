//! `jitter-trace stats`: statistics per stream and overall, and what an injector can reproduce.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;

use jitter_trace::stats::{injectability, scale_for_share, TraceStats};

use crate::commands::input::{duration_arg, load_checked, Input};
use crate::commands::output::print_json;

/// `jitter-trace stats`.
#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    /// Trace file(s): one .jtr/.csv, or one file per core for sysjitter/LogGOPSim.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    input: Input,
    /// Injector overhead per detour (e.g. 20us): prints injectability.
    #[arg(long, value_parser = duration_arg)]
    overhead: Option<f64>,
    /// Scale factors to evaluate injectability at (with --overhead).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1.0, 2.0, 3.0, 5.0, 10.0])]
    scale: Vec<f64>,
    /// Share of detours that must be injectable: prints the smallest scale (with --overhead).
    #[arg(long)]
    share: Option<f64>,
}

impl StatsArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let StatsArgs {
            inputs,
            input,
            overhead,
            scale,
            share,
        } = self;
        let (trace, integrity) = load_checked(&inputs, &input)?;
        let stats = TraceStats::of_trace(&trace);
        let mut inject = Vec::new();
        let mut choice = None;
        if let Some(o) = overhead {
            for &s in &scale {
                inject.push(injectability(&trace.streams, o, s)?);
            }
            if let Some(sh) = share {
                choice = Some(scale_for_share(&trace.streams, o, sh)?);
            }
        } else if share.is_some() {
            bail!("--share needs --overhead");
        }
        if json {
            return print_json(&json!({
                "stats": stats,
                "integrity": integrity,
                "injectability": inject,
                "scale_for_share": choice,
            }));
        }
        if let Some(kept) = integrity.kept_line() {
            println!("# {kept}");
        }
        print!("{}", stats.table());
        if let Some(o) = overhead {
            println!("\ninjectable with overhead {:.3} us:", o / 1e3);
            let mut t =
                jitter_trace::table::Table::new(["scale", "% of detours", "% of noise time"]);
            for i in &inject {
                t.row([
                    i.scale.to_string(),
                    format!("{:.2}", i.detours * 100.0),
                    format!("{:.2}", i.noise * 100.0),
                ]);
            }
            print!("{t}");
        }
        match choice {
            Some(Some(c)) => println!(
                "smallest scale covering {:.1} %: any S > {:.3}; integer S = {} covers {:.2} %",
                c.share * 100.0,
                c.threshold,
                c.integer,
                c.at_integer.detours * 100.0
            ),
            Some(None) => println!("no scale covers that share (too few positive run-times)"),
            None => {}
        }
        Ok(())
    }
}
