//! The entry points of the commands that read reports: `replay-bench compare` (two reports
//! side by side, refused unless they may be) and `replay-bench plot-study` (a study's table and
//! chart).

use anyhow::Context;

use crate::flags::reports::{CompareArgs, PlotStudyArgs};
use jitter_report::formats;
use jitter_report::plot::{draw, load_rows, render_table};
use jitter_report::report::Report;

/// `replay-bench compare`: the two reports' results side by side, after the warnings of
/// what differs between them.
pub fn compare(a: &CompareArgs) -> anyhow::Result<()> {
    let ra = Report::load(&a.a)?;
    let rb = Report::load(&a.b)?;
    let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
    for note in jitter_report::matching::check_compare(&ra, &rb, &na, &nb)? {
        eprintln!("warning: {note}");
    }
    print!("{}", formats::render_compare(&ra, &rb, &na, &nb));
    Ok(())
}

/// `replay-bench plot-study`: the SD-vs-ranks table of the reports, and their chart (`--svg`).
pub(crate) fn plot_study(args: PlotStudyArgs) -> anyhow::Result<()> {
    if let Some(p) = &args.svg {
        jitter_trace::output::check_output(p, "--svg", "an SVG image", &["svg"])?;
    }
    let rows = load_rows(&args.reports)?;
    print!("{}", render_table(&rows));
    if let Some(svg) = &args.svg {
        draw(&rows, args.metric, &args.title, svg)
            .with_context(|| format!("plot {}", svg.display()))?;
        println!("plot: {}", svg.display());
    }
    Ok(())
}
