//! `replay-bench whatif`'s entry point: in one process, the what-if table printed, its JSON
//! (`-o`), CSV and bar chart written.

use crate::flags::whatif::WhatIfArgs;
use jitter_predict::whatif::what_if;
use jitter_predict::whatif_chart::savings_svg;

/// `replay-bench whatif`: prints the table, writes the JSON (`-o`), CSV and chart.
pub fn main(args: WhatIfArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        crate::launcher_rank().is_none(),
        "whatif runs in one process (not under mpirun)"
    );
    if let Some(t) = args.predict.threads {
        anyhow::ensure!(t >= 1, "--threads must be at least 1");
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global();
    }
    // Every output is checked before the variants are predicted (minutes of work).
    args.predict.check_outputs()?;
    if let Some(p) = &args.csv {
        jitter_trace::output::check_output(p, "--csv", "a CSV table", &["csv"])?;
    }
    let w = what_if(&args.request())?;
    print!("{}", w.render());
    if let Some(p) = &args.predict.output {
        let bytes = serde_json::to_vec_pretty(&w)?;
        jitter_trace::output::write_output_bytes(p, &bytes)?;
    }
    if let Some(p) = &args.csv {
        jitter_trace::output::write_output_bytes(p, w.csv()?.as_bytes())?;
    }
    if let Some(p) = &args.predict.plot {
        savings_svg(&w, p)?;
    }
    Ok(())
}
