//! `jitter-trace stats`: statistics per stream and overall, and what an injector can reproduce.
//!
//! The input is read in one pass in constant memory in its length
//! (`jitter_trace::stats::StatsSink`; with `--share`, a few more passes find the covering
//! detour exactly); a text input is imported into a temporary `.jtr` first.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;

use jitter_trace::integrity::Integrity;
use jitter_trace::stats::{
    kth_longest, scale_for_kth, share_rank, Injectability, InjectableTally, ScaleChoice, StatsSink,
    TraceStats,
};

use crate::commands::input::{duration_arg, rescan, scan_checked, Input};
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
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = vec![1.0, 2.0, 3.0, 5.0, 10.0],
        requires = "overhead"
    )]
    scale: Vec<f64>,
    /// Share of detours that must be injectable: prints the smallest scale (with --overhead).
    #[arg(long, requires = "overhead")]
    share: Option<f64>,
}

/// What `stats` prints.
struct Findings {
    stats: TraceStats,
    /// What is not measured, an inferred window (`TraceStats::notes`).
    notes: Vec<String>,
    integrity: Integrity,
    inject: Vec<Injectability>,
    choice: Option<Option<ScaleChoice>>,
}

impl StatsArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let found = self.scanned()?;
        print(&found, self.overhead, json)
    }

    /// The findings of one pass (and, with `--share`, a few more) over the input's `.jtr` (a
    /// text input's temporary import) in constant memory.
    fn scanned(&self) -> Result<Findings> {
        let tallies: Result<Vec<InjectableTally>, _> = match self.overhead {
            Some(o) => (self.scale.iter())
                .map(|&s| {
                    jitter_trace::stats::check_replay_scale(s)?;
                    InjectableTally::new(o, s)
                })
                .collect(),
            None => Ok(Vec::new()),
        };
        let mut sink = StatsSink::new(tallies.as_ref().cloned().unwrap_or_default());
        let scanned = scan_checked(&self.inputs, &self.input, &mut sink)?;
        let (scan, integrity) = (&scanned.scan, scanned.integrity.clone());
        tallies?;
        let stats = sink.stats(scan);
        let mut choice = None;
        match (self.overhead, self.share) {
            (Some(o), Some(share)) => {
                let path = &scanned.file;
                let n = scan.record_count();
                let k = share_rank(share, n)?;
                let kth = if n == 0 {
                    None
                } else {
                    kth_longest(k, stats.overall.max_ns, |s| rescan(path, n, s))?
                };
                choice = Some(scale_for_kth(share, o, kth, |scale| {
                    let mut at = StatsSink::new(vec![InjectableTally::new(o, scale)?]);
                    rescan(path, n, &mut at)?;
                    Ok(at.injectability()[0])
                })?);
            }
            (None, Some(_)) => bail!("--share needs --overhead"),
            _ => {}
        }
        Ok(Findings {
            notes: stats.notes(&scan.frame.header),
            stats,
            integrity,
            inject: sink.injectability(),
            choice,
        })
    }
}

/// Prints the findings as a table (or JSON).
fn print(f: &Findings, overhead: Option<f64>, json: bool) -> Result<()> {
    if json {
        return print_json(&json!({
            "stats": f.stats,
            "integrity": f.integrity,
            "injectability": f.inject,
            "scale_for_share": f.choice,
        }));
    }
    if let Some(kept) = f.integrity.kept_line() {
        println!("# {kept}");
    }
    print!("{}", f.stats.table());
    for n in &f.notes {
        println!("# {n}");
    }
    if let Some(o) = overhead {
        println!("\ninjectable with overhead {:.3} us:", o / 1e3);
        let mut t = jitter_trace::table::Table::new(["scale", "% of detours", "% of noise time"]);
        for i in &f.inject {
            t.row([
                jitter_trace::stats::number_shown(i.scale),
                format!("{:.2}", i.detours * 100.0),
                format!("{:.2}", i.noise * 100.0),
            ]);
        }
        print!("{t}");
    }
    match f.choice {
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
