//! The slowdown plot of a prediction: SD vs ranks on a log2 axis, one curve per trace, sync
//! mode and model (Figs. 5 and 6 of paper 001).

use std::path::Path;

use plotters::prelude::*;

/// One curve: a label and (ranks, SD %) points in ascending rank order.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Legend text, e.g. `rl1 none (des)`.
    pub label: String,
    /// (ranks, slowdown %).
    pub points: Vec<(u64, f64)>,
    /// Dashed line (used for the analytic model).
    pub dashed: bool,
}

/// Writes `curves` as an SVG plot to `path`.
pub fn write_svg(path: &Path, title: &str, curves: &[Curve]) -> anyhow::Result<()> {
    let pts = || curves.iter().flat_map(|c| c.points.iter());
    anyhow::ensure!(pts().next().is_some(), "nothing to plot");
    let x_lo = pts()
        .map(|p| (p.0 as f64).log2())
        .fold(f64::INFINITY, f64::min);
    let x_hi = pts()
        .map(|p| (p.0 as f64).log2())
        .fold(f64::NEG_INFINITY, f64::max);
    let y_hi = pts()
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let (x_lo, x_hi) = if x_hi > x_lo {
        (x_lo, x_hi)
    } else {
        (x_lo - 1.0, x_hi + 1.0)
    };
    let y_hi = if y_hi > 0.0 { y_hi * 1.08 } else { 1.0 };

    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (900, 600)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (2f64.powf(x_lo)..2f64.powf(x_hi)).log_scale().base(2.0),
                0.0..y_hi,
            )?;
        chart
            .configure_mesh()
            .x_desc("ranks")
            .y_desc("slowdown (%)")
            .x_labels((x_hi - x_lo).ceil() as usize + 1)
            .x_label_formatter(&|x| format!("{}", x.round() as u64))
            .draw()?;
        for (i, c) in curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let data: Vec<(f64, f64)> = c
                .points
                .iter()
                .filter(|p| p.1.is_finite())
                .map(|&(n, sd)| (n as f64, sd))
                .collect();
            let style = ShapeStyle::from(&color).stroke_width(2);
            if c.dashed {
                chart
                    .draw_series(DashedLineSeries::new(data.clone(), 8, 5, style))?
                    .label(c.label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            } else {
                chart
                    .draw_series(LineSeries::new(data.clone(), style))?
                    .label(c.label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            }
            chart.draw_series(data.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", path.display()))?;
    drop(root);
    jitter_trace::output::write_output_bytes(path, svg.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_label() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sd.svg");
        let curves = vec![
            Curve {
                label: "a none (des)".into(),
                points: vec![(16, 5.0), (64, 20.0), (256, 60.0)],
                dashed: false,
            },
            Curve {
                label: "a none (order-stats)".into(),
                points: vec![(16, 5.5), (64, 21.0), (256, 59.0)],
                dashed: true,
            },
        ];
        write_svg(&p, "slowdown", &curves).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("<svg"));
        assert!(text.contains("a none (des)") && text.contains("a none (order-stats)"));
        let labels: Vec<&str> = text.lines().map(str::trim).collect();
        for n in ["16", "32", "64", "128", "256"] {
            assert!(labels.contains(&n), "axis label {n} (log2 axis in ranks)");
        }
        assert!(write_svg(&p, "x", &[]).is_err());
    }
}
