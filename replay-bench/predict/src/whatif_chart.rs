//! The what-if savings as bars (`replay-bench whatif --plot`): at the largest rank count, one
//! bar per variant that removes something and per sync mode, its 95 % interval as a whisker.

use std::path::Path;

use plotters::prelude::*;

use super::whatif::{Question, WhatIf};

/// Draws the savings (pp of SD eq. 2) at the largest rank count of `w` into an SVG at `path`.
pub fn savings_svg(w: &WhatIf, path: &Path) -> anyhow::Result<()> {
    let n = (w.points.iter().map(|p| p.0).max()).ok_or_else(|| anyhow::anyhow!("no points"))?;
    let cols: Vec<(usize, &str)> = (w.points.iter().enumerate())
        .filter(|(_, p)| p.0 == n)
        .map(|(k, p)| (k, p.1.as_str()))
        .collect();
    let rows: Vec<_> = (w.rows.iter())
        .filter(|r| matches!(r.question, Question::Without | Question::WithoutKernel))
        .collect();
    anyhow::ensure!(
        !rows.is_empty(),
        "no variant removes anything: nothing to draw"
    );
    let bar = |v: f64| if v.is_finite() { v } else { 0.0 };
    let vals = rows.iter().flat_map(|r| {
        cols.iter().flat_map(move |&(k, _)| {
            let s = r.saving_pp[k];
            [bar(s.mean) - bar(s.ci95), bar(s.mean) + bar(s.ci95)]
        })
    });
    let (lo, hi) = vals.fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let pad = ((hi - lo) * 0.1).max(0.5);
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot draw {}: {e}", path.display());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 200 + 34 * rows.len() as u32))
            .into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let names: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
        let m = rows.len() as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("saving in SD eq. (2) at {n} ranks, mean over seeds ± 95 %"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(220)
            .build_cartesian_2d((lo - pad)..(hi + pad), -0.5..m - 0.5)
            .map_err(|e| err(&e))?;
        let label = |y: &f64| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .y_labels(rows.len() + 1)
            .y_label_formatter(&label)
            .disable_y_mesh()
            .x_desc("percentage points of slowdown removed")
            .draw()
            .map_err(|e| err(&e))?;
        let h = 0.8 / cols.len() as f64;
        for (c, &(k, mode)) in cols.iter().enumerate() {
            let color = Palette99::pick(c).to_rgba();
            let bars = rows.iter().enumerate().map(|(i, r)| {
                let y0 = i as f64 - 0.4 + c as f64 * h;
                Rectangle::new(
                    [(0.0, y0), (bar(r.saving_pp[k].mean), y0 + h)],
                    color.filled(),
                )
            });
            chart
                .draw_series(bars)
                .map_err(|e| err(&e))?
                .label(format!("sync {mode}"))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
            let whiskers = rows.iter().enumerate().filter_map(|(i, r)| {
                let s = r.saving_pp[k];
                let y = i as f64 - 0.4 + (c as f64 + 0.5) * h;
                s.ci95.is_finite().then(|| {
                    PathElement::new(vec![(s.mean - s.ci95, y), (s.mean + s.ci95, y)], BLACK)
                })
            });
            chart.draw_series(whiskers).map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    jitter_trace::output::write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}
