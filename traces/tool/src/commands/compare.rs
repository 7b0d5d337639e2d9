//! `jitter-trace compare`: trace B beside trace A (KL divergence, KS statistic, noise, rate).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use jitter_plot::{plot, series_names, PlotKind, Series};
use jitter_trace::compare::compare_sources;

use crate::commands::input::{source, Input};
use crate::commands::output::{check_svg, print_json};

/// `jitter-trace compare`.
#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    /// Reference trace.
    a: PathBuf,
    /// Trace compared with it.
    b: PathBuf,
    #[command(flatten)]
    input: Input,
    /// Also draw both log-densities into this SVG.
    #[arg(long, value_name = "SVG")]
    plot: Option<PathBuf>,
}

impl CompareArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let CompareArgs {
            a,
            b,
            input,
            plot: svg,
        } = self;
        check_svg(svg.as_ref(), "--plot")?;
        // Read stream by stream, in constant memory (`compare_sources`: the numbers of the
        // traces read whole).
        let ta = source(std::slice::from_ref(&a), &input)?;
        let tb = source(std::slice::from_ref(&b), &input)?;
        for (t, p) in [(&ta, &a), (&tb, &b)] {
            if t.detours == 0 {
                bail!("{} has no detours: nothing to compare", p.display());
            }
        }
        let (ta, tb) = (ta.src.as_ref(), tb.src.as_ref());
        let c = compare_sources(ta, tb)?;
        if let Some(p) = &svg {
            let names = series_names(&[(&a, &ta.frame().header), (&b, &tb.frame().header)]);
            let series = [
                Series {
                    label: &names[0],
                    source: ta,
                },
                Series {
                    label: &names[1],
                    source: tb,
                },
            ];
            plot(PlotKind::Density, &series, PlotKind::Density.title(), p)?;
        }
        if json {
            return print_json(&serde_json::to_value(&c)?);
        }
        println!("A: {} ({} detours)", a.display(), c.count_a);
        println!("B: {} ({} detours)", b.display(), c.count_b);
        println!("KL divergence D(A||B):   {:.6} nats", c.kl_divergence);
        println!(
            "KL divergence D(B||A):   {:.6} nats",
            c.kl_divergence_reverse
        );
        println!("KS statistic:            {:.6}", c.ks_statistic);
        // A rate or share not measured (no observed time) is `-`, and so is its difference.
        let shown =
            |v: f64, f: &dyn Fn(f64) -> String| if v.is_finite() { f(v) } else { "-".into() };
        let pct = |v: f64| format!("{:.4} %", v * 100.0);
        let diff = |v: f64| format!("{:+.4} %", v * 100.0);
        println!(
            "noise ratio:             {} -> {} (diff {})",
            shown(c.noise_ratio_a, &pct),
            shown(c.noise_ratio_b, &pct),
            shown(c.noise_ratio_diff, &diff)
        );
        let rate = |v: f64| format!("{v:.1}");
        let rate_diff = |v: f64| format!("{v:+.1}");
        println!(
            "detours/s per CPU:       {} -> {} (diff {})",
            shown(c.detour_rate_a, &rate),
            shown(c.detour_rate_b, &rate),
            shown(c.detour_rate_diff, &rate_diff)
        );
        for (name, n) in [(&a, c.count_a), (&b, c.count_b)] {
            if n < 2 {
                println!(
                    "note: {} has {n} detour: its distances describe one value, not a distribution",
                    name.display()
                );
            }
        }
        Ok(())
    }
}
