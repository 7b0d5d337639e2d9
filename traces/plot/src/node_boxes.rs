//! One box per node of a cluster-wide collection (`jitter-trace nodes`), in ranking order.

use std::path::Path;

use plotters::prelude::*;

use plotters::coord::combinators::LogCoord;

use super::look::{axis_number, chart_on, svg_file, ticks, y_label_area, SIZE};
use jitter_trace::error::TraceError;
use jitter_trace::nodes::NodeRow;

/// One box per node (run-times in µs on a log axis), in the order of `rows`.
pub fn nodes_svg(rows: &[NodeRow], title: &str, path: &Path) -> Result<(), TraceError> {
    if rows.is_empty() {
        return Err(TraceError::Argument("no nodes to plot".into()));
    }
    let us = |ns: u64| (ns.max(1)) as f64 / 1e3;
    let lo = rows
        .iter()
        .map(|r| us(r.summary.stats.min_ns))
        .fold(f64::INFINITY, f64::min);
    let hi = rows
        .iter()
        .map(|r| us(r.summary.stats.max_ns))
        .fold(0.0, f64::max)
        .max(lo * 2.0);
    let n = rows.len();
    let width = SIZE.0.max(120 + 40 * n as u32);
    svg_file(path, (width, SIZE.1), |root, e| {
        // The file stem names a node on the axis (`runs/node07.jtr` → `node07`); the table
        // beside the chart keeps the path.
        let names: Vec<String> = rows
            .iter()
            .map(|r| {
                let p = Path::new(&r.summary.node);
                p.file_stem()
                    .map_or(r.summary.node.clone(), |s| s.to_string_lossy().into_owned())
            })
            .collect();
        let label = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names
                    .get(i as usize)
                    .map_or(String::new(), |s| s.to_string())
            } else {
                String::new()
            }
        };
        let y_area = y_label_area(LogCoord::from((lo / 1.5..hi * 1.5).log_scale()));
        let mut chart = chart_on(root, title, y_area)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, (lo / 1.5..hi * 1.5).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_labels(n + 1)
            .x_label_formatter(&label)
            .y_labels(ticks(lo / 1.5, hi * 1.5))
            .y_label_formatter(&|v| axis_number(*v))
            .disable_x_mesh()
            .x_desc("node (noisiest first); red: outlier")
            .y_desc("detour run-time (µs): box p20–p80, median, whiskers min–p99.9, × max")
            .draw()
            .map_err(e)?;
        for (i, r) in rows.iter().enumerate() {
            let s = &r.summary.stats;
            let x = i as f64;
            let color = if r.outlier.is_empty() {
                Palette99::pick(0).to_rgba()
            } else {
                RED.to_rgba()
            };
            let w = 0.3;
            chart
                .draw_series([
                    Rectangle::new(
                        [(x - w, us(s.p20_ns)), (x + w, us(s.p80_ns))],
                        color.mix(0.3).filled(),
                    ),
                    Rectangle::new(
                        [(x - w, us(s.p20_ns)), (x + w, us(s.p80_ns))],
                        color.stroke_width(2),
                    ),
                ])
                .map_err(e)?;
            chart
                .draw_series([
                    PathElement::new(
                        vec![(x - w, us(s.median_ns)), (x + w, us(s.median_ns))],
                        color.stroke_width(3),
                    ),
                    PathElement::new(vec![(x, us(s.min_ns)), (x, us(s.p20_ns))], color),
                    PathElement::new(vec![(x, us(s.p80_ns)), (x, us(s.p99_9_ns))], color),
                ])
                .map_err(e)?;
            chart
                .draw_series([Cross::new((x, us(s.max_ns)), 5, color.stroke_width(2))])
                .map_err(e)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_trace::synth::{synthesize, Spec};

    #[test]
    fn nodes_draw_one_box_each_and_outliers_in_red() {
        use jitter_trace::nodes::{rank, NodeSummary, OUTLIER_Z};
        let s: Spec = "poisson:rate=2000/s,dur=exp:3us".parse().unwrap();
        let mut nodes: Vec<NodeSummary> = (0..4)
            .map(|i| {
                let t = synthesize(&s, 1, 200_000_000, i).unwrap();
                NodeSummary::of_trace(&t, &format!("node{i}.jtr"), 3)
            })
            .collect();
        let noisy: Spec = "poisson:rate=2000/s,dur=exp:3us+periodic:period=1ms,dur=100us"
            .parse()
            .unwrap();
        let t = synthesize(&noisy, 1, 200_000_000, 9).unwrap();
        nodes.push(NodeSummary::of_trace(&t, "noisy.jtr", 3));
        let table = rank(nodes, OUTLIER_Z);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nodes.svg");
        nodes_svg(&table.rows, "nodes", &p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.contains("noisy") && svg.contains("node3"), "{svg}");
        // one filled and one outlined box per node
        assert_eq!(svg.matches("<rect").count() - 1, 2 * 5, "{svg}");
        assert!(svg.contains("#FF0000"), "the outlier is red");
        assert!(nodes_svg(&[], "x", &p).is_err());
    }
}
