//! Nodes of a cluster-wide collection side by side: one trace per node (all streams of that
//! node), one row each — noise ratio, detours/s, p99/p99.9/max and the longest detours —
//! ranked noisiest first, with the nodes that stand out from the others flagged.
//!
//! **Outliers.** A node's robust z-score on a quantity x is (ln x − median of the *other*
//! nodes' ln x) / (1.4826 · MAD of the other nodes' ln x): leaving the node out keeps one noisy
//! node from widening the spread it is judged against, the logarithm because noise ratios and
//! maxima vary by factors, not by amounts; 1.4826 · MAD estimates the standard deviation of
//! normal data. It is computed on the noise ratio and on the longest detour; a node is flagged
//! when either |z| exceeds [`OUTLIER_Z`] (3.5, the cut Iglewicz and Hoaglin recommend for the
//! modified z-score). Fewer than [`MIN_OTHERS`] other nodes give no verdict. When the other
//! nodes agree exactly (MAD 0) any difference is infinitely far from them and is flagged.
//! A trace without detours, or whose streams observed less than [`MIN_OBSERVED_SHARE`] of its
//! collection's duration (its probe hardly ran), or that lacks detours (its ring dropped some,
//! a chunk is damaged, the file is truncated: [`crate::integrity`], unless salvaged), is
//! `unusable`: listed last, named, and left out of every other node's comparison.

use serde::{Deserialize, Serialize};

use crate::model::Trace;
use crate::stats::Stats;
use crate::summary::median;
use crate::table::{Align, Table};

/// |z| above which a node is an outlier (Iglewicz and Hoaglin's cut for the modified z-score).
pub const OUTLIER_Z: f64 = 3.5;

/// Other nodes needed before a node can be judged against them (a median and a MAD of fewer
/// values say nothing about spread).
pub const MIN_OTHERS: usize = 3;

/// MAD → standard deviation for normal data (1 / Φ⁻¹(3/4)).
const MAD_TO_SD: f64 = 1.4826;

/// A node whose streams observed less than this share of the collection says nothing.
pub const MIN_OBSERVED_SHARE: f64 = 0.1;

/// Longest detours listed per node by default.
pub const DEFAULT_TOP: usize = 5;

/// What one node's trace says, reduced to what the comparison needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// Node name: the trace header's host, or the file stem when hosts are missing or repeated.
    pub node: String,
    /// The trace file.
    pub file: String,
    /// Host recorded in the trace header.
    pub host: String,
    /// Streams (CPUs) in the trace.
    pub streams: usize,
    /// All streams of the node pooled (rates per CPU).
    pub stats: Stats,
    /// The longest detours of the node, ns, longest first.
    pub top_ns: Vec<u64>,
    /// Duration of the collection (the header's, else the longest stream's), ns.
    pub collection_ns: u64,
    /// What the trace lacks (ring loss, damage, truncation) where that makes it unusable (not
    /// salvaged): its numbers describe only part of what the probe saw.
    #[serde(default)]
    pub lacks: Option<String>,
    /// The share kept, where the trace lacks something but was taken (tolerated or salvaged).
    #[serde(default)]
    pub kept: Option<String>,
}

impl NodeSummary {
    /// Summarises one node's trace; `top` longest detours are kept.
    pub fn of_trace(trace: &Trace, file: &str, top: usize) -> NodeSummary {
        let mut runs: Vec<u64> = trace
            .streams
            .iter()
            .flat_map(|s| s.records.iter().map(|r| r.run_ns))
            .collect();
        let keep = top.min(runs.len());
        if keep > 0 {
            runs.select_nth_unstable_by(keep - 1, |a, b| b.cmp(a));
        }
        runs.truncate(keep);
        runs.sort_unstable_by(|a, b| b.cmp(a));
        NodeSummary {
            node: String::new(),
            file: file.to_string(),
            host: trace.header.host.clone(),
            streams: trace.streams.len(),
            stats: Stats::of_streams(&trace.streams),
            top_ns: runs,
            collection_ns: trace.header.duration_ns.max(
                trace
                    .streams
                    .iter()
                    .map(|s| s.duration_ns())
                    .max()
                    .unwrap_or(0),
            ),
            lacks: None,
            kept: None,
        }
    }

    /// Why this node's trace says nothing, or `None` when it is usable: no detours at all (no
    /// real CPU goes a whole collection without one; the probe hardly ran), or its streams
    /// observed less than [`MIN_OBSERVED_SHARE`] of the collection on average.
    pub fn unusable(&self) -> Option<String> {
        if let Some(lacks) = &self.lacks {
            return Some(format!(
                "{lacks}: its numbers describe part of what the probe saw (--salvage ranks it \
                 with what was kept)"
            ));
        }
        let per_stream = self.stats.duration_ns as f64 / self.streams.max(1) as f64;
        let observed = crate::units::format_ns(per_stream);
        if self.stats.count == 0 {
            return Some(format!(
                "no detours in {observed} per CPU: its probe hardly ran (see the collector's \
                 output)"
            ));
        }
        (per_stream < MIN_OBSERVED_SHARE * self.collection_ns as f64).then(|| {
            format!(
                "observed {observed} per CPU of a {} collection: its probe hardly ran (see the \
                 collector's output)",
                crate::units::format_ns(self.collection_ns as f64)
            )
        })
    }
}

/// How far one node lies from the others on one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// The node's value (noise ratio, or max in ns).
    pub value: f64,
    /// Median of the other nodes' values.
    pub others_median: f64,
    /// Robust z-score of ln(value) against the other nodes; `None` with too few others.
    pub z: Option<f64>,
}

/// One ranked node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRow {
    /// Place in the ranking, 1 = noisiest.
    pub rank: usize,
    /// What the node's trace says.
    pub summary: NodeSummary,
    /// Noise ratio against the other nodes.
    pub noise: Score,
    /// Longest detour against the other nodes.
    pub max: Score,
    /// Why the node is an outlier, one phrase per quantity; empty when it is not.
    pub outlier: Vec<String>,
    /// Why the node's trace says nothing (no observation time); `None` when it is usable.
    #[serde(default)]
    pub unusable: Option<String>,
}

/// All nodes of a collection, ranked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeTable {
    /// |z| above which a node was flagged.
    pub z_cut: f64,
    /// Nodes, noisiest first (by noise ratio, then by max).
    pub rows: Vec<NodeRow>,
    /// Said when the table can give no verdict (too few nodes).
    pub note: Option<String>,
}

/// Robust z-score of `x` against `others` (raw values, compared on their logarithm); `None` with
/// fewer than [`MIN_OTHERS`] others. `floor` replaces zeros before the logarithm.
pub fn robust_z(x: f64, others: &[f64], floor: f64) -> Option<f64> {
    if others.len() < MIN_OTHERS {
        return None;
    }
    let ln = |v: f64| v.max(floor).ln();
    let mut l: Vec<f64> = others.iter().map(|&v| ln(v)).collect();
    let m = median(&mut l);
    let mut dev: Vec<f64> = l.iter().map(|v| (v - m).abs()).collect();
    let scale = MAD_TO_SD * median(&mut dev);
    let d = ln(x) - m;
    Some(if scale > 0.0 {
        d / scale
    } else if d == 0.0 {
        0.0
    } else {
        d.signum() * f64::INFINITY
    })
}

/// Half the smallest positive value of `v`, at most 0.5: what a zero counts as on the log scale.
fn log_floor(v: &[f64]) -> f64 {
    v.iter()
        .copied()
        .filter(|&x| x > 0.0)
        .fold(f64::INFINITY, f64::min)
        .clamp(1e-300, 1.0)
        / 2.0
}

/// Names the nodes, scores each against the others and ranks them noisiest first.
pub fn rank(mut nodes: Vec<NodeSummary>, z_cut: f64) -> NodeTable {
    for i in 0..nodes.len() {
        let host = nodes[i].host.clone();
        let repeated = nodes.iter().filter(|n| n.host == host).count() > 1;
        nodes[i].node = if host.is_empty() || repeated {
            std::path::Path::new(&nodes[i].file)
                .file_stem()
                .map_or_else(|| nodes[i].file.clone(), |s| s.to_string_lossy().into())
        } else {
            host
        };
    }
    let unusable: Vec<Option<String>> = nodes.iter().map(NodeSummary::unusable).collect();
    let usable: Vec<bool> = unusable.iter().map(Option::is_none).collect();
    let noise: Vec<f64> = nodes.iter().map(|n| n.stats.noise_ratio).collect();
    let max: Vec<f64> = nodes.iter().map(|n| n.stats.max_ns as f64).collect();
    let (noise_floor, max_floor) = (log_floor(&noise), log_floor(&max));
    let score = |all: &[f64], i: usize, floor: f64| {
        let mut others: Vec<f64> = all
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i && usable[j])
            .map(|(_, &v)| v)
            .collect();
        let z = robust_z(all[i], &others, floor).filter(|_| usable[i]);
        Score {
            value: all[i],
            others_median: if others.is_empty() {
                f64::NAN
            } else {
                median(&mut others)
            },
            z,
        }
    };
    let mut rows: Vec<NodeRow> = nodes
        .into_iter()
        .enumerate()
        .map(|(i, summary)| {
            let noise = score(&noise, i, noise_floor);
            let max = score(&max, i, max_floor);
            let mut outlier = Vec::new();
            for (what, s) in [("noise ratio", &noise), ("max", &max)] {
                if let Some(z) = s.z.filter(|z| z.abs() > z_cut) {
                    let way = if z > 0.0 { "above" } else { "below" };
                    outlier.push(format!("{what} {way} the others (z {z:+.1})"));
                }
            }
            let unusable = unusable[i].clone();
            NodeRow {
                rank: 0,
                summary,
                noise,
                max,
                outlier,
                unusable,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        a.unusable
            .is_some()
            .cmp(&b.unusable.is_some())
            .then(b.noise.value.total_cmp(&a.noise.value))
            .then(b.max.value.total_cmp(&a.max.value))
            .then(a.summary.node.cmp(&b.summary.node))
    });
    for (i, r) in rows.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    let n_usable = usable.iter().filter(|&&u| u).count();
    let note = (n_usable <= MIN_OTHERS).then(|| {
        format!(
            "{n_usable} usable node(s): outliers need at least {} nodes (each is judged against \
             {MIN_OTHERS} others or more)",
            MIN_OTHERS + 1
        )
    });
    NodeTable { z_cut, rows, note }
}

impl NodeTable {
    /// The ranked table as text, one line per node, then the outliers and their reasons.
    pub fn render(&self) -> String {
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1e3);
        let z = |s: &Score| s.z.map_or("-".to_string(), |z| format!("{z:+.1}"));
        let mut table = Table::new([
            "rank",
            "node",
            "cpus",
            "noise(%)",
            "detours/s",
            "p99(us)",
            "p99.9(us)",
            "max(us)",
            "z_noi",
            "z_max",
            "longest detours (us)",
        ])
        .align(1, Align::Left)
        .align(10, Align::Left);
        for r in &self.rows {
            let s = &r.summary.stats;
            let top: Vec<String> = r.summary.top_ns.iter().map(|&t| us(t)).collect();
            let flag = if r.unusable.is_some() {
                "  UNUSABLE"
            } else if r.outlier.is_empty() {
                ""
            } else {
                "  OUTLIER"
            };
            // An unusable node's numbers are not what its probe saw: none is shown.
            let shown = |v: String| if r.unusable.is_some() { "-".into() } else { v };
            table.row([
                r.rank.to_string(),
                r.summary.node.clone(),
                r.summary.streams.to_string(),
                shown(format!("{:.4}", s.noise_ratio * 100.0)),
                shown(format!("{:.1}", s.detours_per_s)),
                shown(us(s.p99_ns)),
                shown(us(s.p99_9_ns)),
                shown(us(s.max_ns)),
                z(&r.noise),
                z(&r.max),
                format!("{}{flag}", top.join(" ")),
            ]);
        }
        let mut out = table.render();
        let flagged: Vec<&NodeRow> = self.rows.iter().filter(|r| !r.outlier.is_empty()).collect();
        if let Some(n) = &self.note {
            out.push_str(&format!("note: {n}\n"));
        } else if flagged.is_empty() {
            out.push_str(&format!(
                "no outliers (|z| <= {} on ln noise ratio and ln max against the other nodes)\n",
                self.z_cut
            ));
        }
        for r in flagged {
            out.push_str(&format!(
                "outlier: {} ({}): {}\n",
                r.summary.node,
                r.summary.file,
                r.outlier.join("; ")
            ));
        }
        for r in &self.rows {
            if let Some(why) = &r.unusable {
                out.push_str(&format!(
                    "unusable: {} ({}): {why}\n",
                    r.summary.node, r.summary.file
                ));
            } else if let Some(kept) = &r.summary.kept {
                out.push_str(&format!(
                    "partial: {} ({}): {kept}\n",
                    r.summary.node, r.summary.file
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synthesize, Spec};

    fn node(file: &str, host: &str, noise_ratio: f64, max_ns: u64) -> NodeSummary {
        NodeSummary {
            node: String::new(),
            file: file.into(),
            host: host.into(),
            streams: 2,
            stats: Stats {
                noise_ratio,
                max_ns,
                count: 1000,
                duration_ns: 1_000_000_000,
                ..Stats::default()
            },
            top_ns: vec![max_ns],
            collection_ns: 1_000_000_000,
            lacks: None,
            kept: None,
        }
    }

    #[test]
    fn robust_z_against_the_others_in_closed_form() {
        // ln of others: 0, ln 2, ln 4 → median ln 2, MAD ln 2; x = 8: (ln 8 − ln 2)/(1.4826 ln 2).
        let z = robust_z(8.0, &[1.0, 2.0, 4.0], 1e-12).unwrap();
        assert!((z - 2.0 / MAD_TO_SD).abs() < 1e-12, "{z}");
        assert_eq!(robust_z(8.0, &[1.0, 2.0], 1e-12), None);
        assert_eq!(robust_z(2.0, &[2.0, 2.0, 2.0], 1e-12), Some(0.0));
        assert_eq!(robust_z(3.0, &[2.0, 2.0, 2.0], 1e-12), Some(f64::INFINITY));
    }

    #[test]
    fn the_noisy_node_ranks_first_and_alone_is_flagged() {
        let mut nodes: Vec<NodeSummary> = [0.010, 0.011, 0.0095, 0.0105, 0.0102]
            .iter()
            .enumerate()
            .map(|(i, &r)| node(&format!("n{i}.jtr"), &format!("n{i}"), r, 50_000 + i as u64))
            .collect();
        nodes.push(node("bad.jtr", "bad", 0.05, 50_002));
        let t = rank(nodes, OUTLIER_Z);
        let names: Vec<&str> = t.rows.iter().map(|r| r.summary.node.as_str()).collect();
        assert_eq!(names[0], "bad");
        assert_eq!(t.rows[0].rank, 1);
        assert_eq!(t.rows[0].outlier.len(), 1, "{:?}", t.rows[0].outlier);
        assert!(t.rows[0].outlier[0].starts_with("noise ratio above"));
        assert!(t.rows[1..].iter().all(|r| r.outlier.is_empty()), "{t:?}");
        // The quiet nodes are judged against a set that holds the noisy one: still not flagged.
        assert!(t.note.is_none());
        let text = t.render();
        assert!(text.contains("outlier: bad (bad.jtr)"), "{text}");
        assert_eq!(text.matches("OUTLIER").count(), 1, "{text}");
    }

    #[test]
    fn a_long_max_alone_is_flagged_and_a_quiet_node_is_named_below() {
        let mut nodes: Vec<NodeSummary> = (0..5)
            .map(|i| node("x.jtr", "", 0.01 + 0.0002 * i as f64, 40_000 + 1_000 * i))
            .collect();
        nodes.push(node("spike.jtr", "", 0.0101, 4_000_000));
        nodes.push(node("quiet.jtr", "", 0.0001, 41_000));
        let t = rank(nodes, OUTLIER_Z);
        let spike = t.rows.iter().find(|r| r.summary.node == "spike").unwrap();
        assert!(spike.outlier.iter().any(|o| o.starts_with("max above")));
        assert!(spike.outlier.iter().all(|o| !o.starts_with("noise")));
        let quiet = t.rows.iter().find(|r| r.summary.node == "quiet").unwrap();
        assert_eq!(quiet.rank, 7);
        assert!(quiet.outlier[0].starts_with("noise ratio below"));
    }

    #[test]
    fn too_few_nodes_give_no_verdict() {
        let t = rank(
            vec![
                node("a.jtr", "a", 0.01, 1),
                node("b.jtr", "b", 0.5, 1_000_000),
            ],
            OUTLIER_Z,
        );
        assert!(t
            .rows
            .iter()
            .all(|r| r.outlier.is_empty() && r.noise.z.is_none()));
        assert!(t.render().contains("note: 2 usable node(s)"));
    }

    #[test]
    fn a_trace_that_observed_nothing_is_unusable_and_judges_no_one() {
        let mut nodes: Vec<NodeSummary> = (0..4)
            .map(|i| {
                node(
                    &format!("n{i}.jtr"),
                    &format!("n{i}"),
                    0.08 + 0.005 * i as f64,
                    50_000,
                )
            })
            .collect();
        nodes.push(node("d.jtr", "d", 0.19, 59_000));
        let with_empty = |k: usize| {
            let mut v = nodes.clone();
            for i in 0..k {
                // e0: no detours in 10 ns; e1: 3 detours in 1 µs of a 1 s collection.
                let mut e = node(&format!("e{i}.jtr"), &format!("e{i}"), 0.001, 50);
                (e.stats.count, e.stats.duration_ns) = [(0, 10), (3, 1_000)][i];
                v.push(e);
            }
            rank(v, OUTLIER_Z)
        };
        let clean = with_empty(0);
        let t = with_empty(2);
        for (a, b) in clean.rows.iter().zip(&t.rows) {
            assert_eq!(
                (a.noise.z, a.max.z),
                (b.noise.z, b.max.z),
                "{}",
                a.summary.node
            );
        }
        assert_eq!(t.rows[0].summary.node, "d");
        assert!(t.rows[0].outlier[0].starts_with("noise ratio above"));
        let last = &t.rows[6];
        assert!(last.unusable.is_some() && last.outlier.is_empty() && last.noise.z.is_none());
        let text = t.render();
        assert_eq!(text.matches("UNUSABLE").count(), 2, "{text}");
        assert!(
            text.contains("unusable: e0 (e0.jtr): no detours in 5 ns per CPU"),
            "{text}"
        );
        assert!(
            text.contains("unusable: e1 (e1.jtr): observed 500 ns per CPU of a 1.000 s"),
            "{text}"
        );
    }

    #[test]
    fn summary_pools_streams_and_keeps_the_longest_detours() {
        let s: Spec = "periodic:period=10ms,dur=100us+poisson:rate=1000/s,dur=exp:2us"
            .parse()
            .unwrap();
        let t = synthesize(&s, 2, 1_000_000_000, 4).unwrap();
        let n = NodeSummary::of_trace(&t, "dir/a.jtr", 3);
        assert_eq!(n.streams, 2);
        assert_eq!(n.top_ns.len(), 3);
        assert!(n.top_ns.windows(2).all(|w| w[0] >= w[1]));
        assert_eq!(n.top_ns[0], n.stats.max_ns);
        assert_eq!(n.stats, Stats::of_streams(&t.streams));
    }
}
