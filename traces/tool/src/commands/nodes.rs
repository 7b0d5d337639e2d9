//! `jitter-trace nodes`: the nodes of a cluster-wide collection ranked, outliers flagged.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use jitter_trace::integrity::Salvage;

use jitter_trace::integrity::Integrity;
use jitter_trace::nodes::{NodeSink, NodeSummary};

use crate::commands::input::{duration_arg, scan_unchecked, Input};
use crate::commands::output::{check_svg, print_json};

/// `jitter-trace nodes`.
#[derive(Debug, Args)]
pub(crate) struct NodesArgs {
    /// One trace per node (e.g. `collect-*/*.jtr`).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    #[command(flatten)]
    input: Input,
    /// |z| above which a node is flagged.
    #[arg(long, default_value_t = jitter_trace::nodes::OUTLIER_Z)]
    z: f64,
    /// Smallest difference in noise from the others' median that is flagged, percentage points.
    #[arg(long, default_value_t = jitter_trace::nodes::MIN_NOISE_PP * 100.0)]
    min_noise_pp: f64,
    /// Smallest difference in the longest detour from the others' median that is flagged.
    #[arg(long, default_value = "1ms", value_parser = duration_arg)]
    min_max: f64,
    /// Longest detours listed per node.
    #[arg(long, default_value_t = jitter_trace::nodes::DEFAULT_TOP)]
    top: usize,
    /// Also draw one box per node into this SVG.
    #[arg(long, value_name = "SVG")]
    plot: Option<PathBuf>,
}

impl NodesArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let NodesArgs {
            traces,
            input,
            z,
            min_noise_pp,
            min_max,
            top,
            plot: svg,
        } = self;
        if !(z.is_finite() && z > 0.0) {
            bail!("--z must be a positive number, got {z}");
        }
        check_svg(svg.as_ref(), "--plot")?;
        if !(min_noise_pp.is_finite() && (0.0..=100.0).contains(&min_noise_pp)) {
            bail!("--min-noise-pp must be in 0..=100, got {min_noise_pp}");
        }
        let criteria = jitter_trace::nodes::Criteria {
            z_cut: z,
            min_noise: min_noise_pp / 100.0,
            min_max_ns: min_max,
        };
        let mut nodes = Vec::with_capacity(traces.len());
        let progress = traces.len() > 4 && std::io::stderr().is_terminal();
        for (i, p) in traces.iter().enumerate() {
            if progress {
                eprint!("\rreading {}/{} {}\x1b[K", i + 1, traces.len(), p.display());
            }
            let name = p.display().to_string();
            let (mut node, integrity) = summarise(p, &input, &name, top)?;
            let problem = integrity.problem();
            match integrity.check(&name, Salvage::from_flag(input.salvage)) {
                Ok(i) => {
                    if let Some(w) = i.warning() {
                        eprintln!("warning: {name}: {w}");
                    }
                    node.kept = i.kept_line();
                }
                Err(_) => node.lacks = problem,
            }
            nodes.push(node);
        }
        if progress {
            eprintln!();
        }
        let table = jitter_trace::nodes::rank_with(nodes, criteria);
        if let Some(p) = &svg {
            jitter_plot::nodes_svg(&table.rows, "Detour run-times per node", p)?;
        }
        if json {
            return print_json(&serde_json::to_value(&table)?);
        }
        print!("{}", table.render());
        if let Some(p) = &svg {
            println!("plot: {}", p.display());
        }
        Ok(())
    }
}

/// One node's row and what its trace lacks, in one pass in constant memory in its length (a
/// text input through its temporary `.jtr`).
fn summarise(
    path: &PathBuf,
    input: &Input,
    name: &str,
    top: usize,
) -> Result<(NodeSummary, Integrity)> {
    let paths = std::slice::from_ref(path);
    let mut sink = NodeSink::new(top);
    let scanned = scan_unchecked(paths, input, &mut sink)?;
    Ok((sink.summary(&scanned.scan, name), scanned.integrity))
}
