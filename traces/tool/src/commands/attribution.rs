//! `jitter-trace attribution` and `diff`: the per-source tables of attributed collections.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::Args;

use jitter_plot::{source_bars_of, source_density_of, SpilledSeries};
use jitter_trace::attribution::{csv as attribution_csv, render, report_of, Mode, Scope};
use jitter_trace::changes::{diff, render_diff};
use jitter_trace::output::{check_output, write_output_bytes};
use jitter_trace::units::parse_duration_ns;

use crate::commands::input::attribution_file;
use crate::commands::output::{check_svg, print_json};

/// `jitter-trace attribution`.
#[derive(Debug, Args)]
pub(crate) struct AttributionArgs {
    /// The trace (its sidecar `<trace>.attr.json` must be beside it).
    trace: PathBuf,
    /// frequency: individual sources, a detour's time split over them; time: each
    /// combination of sources is a source.
    #[arg(long, default_value = "frequency")]
    mode: Mode,
    /// Only detours with run-times in `LO..HI` (e.g. 11us..13us): who fills this bucket.
    #[arg(long, value_name = "LO..HI")]
    bucket: Option<String>,
    /// Also write the per-source table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Draw the noise time per run-time bucket, stacked by source, into this SVG.
    #[arg(long, value_name = "SVG")]
    bars_svg: Option<PathBuf>,
    /// Draw each source's density of its time per detour into this SVG.
    #[arg(long, value_name = "SVG")]
    density_svg: Option<PathBuf>,
}

/// `jitter-trace diff`.
#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The base run's trace.
    base: PathBuf,
    /// The new run's trace.
    new: PathBuf,
    /// frequency (individual sources) or time (combinations).
    #[arg(long, default_value = "frequency")]
    mode: Mode,
}

impl AttributionArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let AttributionArgs {
            trace,
            mode,
            bucket,
            csv,
            bars_svg,
            density_svg,
        } = self;
        if let Some(p) = &csv {
            check_output(p, "--csv", "a CSV table", &["csv"])?;
        }
        check_svg(bars_svg.as_ref(), "--bars-svg")?;
        check_svg(density_svg.as_ref(), "--density-svg")?;
        let a = attribution_file(&trace)?;
        let runs = match &bucket {
            None => None,
            Some(b) => {
                let (lo, hi) = b
                    .split_once("..")
                    .ok_or_else(|| anyhow!("--bucket must be LO..HI, e.g. 11us..13us"))?;
                let (lo, hi) = (parse_duration_ns(lo)?, parse_duration_ns(hi)?);
                if !(lo >= 0.0 && hi > lo) {
                    bail!("--bucket {b}: the upper end must exceed the lower one");
                }
                Some((lo.round() as u64, hi.round() as u64))
            }
        };
        let scope = Scope {
            mode,
            runs,
            periods: Some(jitter_trace::periodogram::periods_binned),
        };
        let mut report = report_of(&a, scope)?;
        if let (Some((lo, hi)), 0) = (runs, report.detours) {
            // A bucket is a range that must hold some of the input (`names`).
            let all = report_of(
                &a,
                Scope {
                    runs: None,
                    ..scope
                },
            )?;
            let name = trace.display().to_string();
            let e = jitter_trace::names::no_run_time_in("--bucket", lo, hi, &name, all.detours);
            return Err(e.into());
        }
        if bucket.is_some() {
            // Steal is counted for the whole run: nothing to compare a bucket's detours with.
            report.steal.clear();
        }
        if let Some(p) = &csv {
            write_output_bytes(p, attribution_csv(&report).as_bytes())?;
        }
        if bars_svg.is_some() || density_svg.is_some() {
            let by_source = SpilledSeries::read(&a, mode, runs)?;
            let name = trace.file_stem().map_or(trace.display().to_string(), |s| {
                s.to_string_lossy().into_owned()
            });
            if let Some(p) = &bars_svg {
                let title = format!("Noise time per detour run-time, by source: {name}");
                source_bars_of(&by_source, &title, p)?;
            }
            if let Some(p) = &density_svg {
                let title = format!("Time per detour, by source: {name}");
                source_density_of(&by_source, &title, p)?;
            }
        }
        if json {
            print_json(&serde_json::to_value(&report)?)
        } else {
            print!("{}", render(&report));
            Ok(())
        }
    }
}

impl DiffArgs {
    /// Runs the subcommand; `json`: print JSON instead of text.
    pub(crate) fn run(self, json: bool) -> Result<()> {
        let DiffArgs { base, new, mode } = self;
        let scope = Scope {
            mode,
            runs: None,
            periods: Some(jitter_trace::periodogram::periods_binned),
        };
        let d = diff(
            &report_of(&attribution_file(&base)?, scope)?,
            &report_of(&attribution_file(&new)?, scope)?,
        );
        if json {
            print_json(&serde_json::to_value(&d)?)
        } else {
            print!("{}", render_diff(&d));
            Ok(())
        }
    }
}
