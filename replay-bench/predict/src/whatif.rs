//! What-if predictions (`replay-bench whatif`): what each kernel source of an attributed trace
//! costs at scale. The trace is filtered by source (`jitter_trace::filter`, net times) into one
//! variant per question — the trace as collected, without each source, with only that source,
//! and with every kernel source removed (only the unattributed rest left: what tuning the node
//! could reach at best) — and every variant is predicted by [`super::predict`], the engines
//! and report of `replay-bench predict`, with the same platform, rank counts, sync modes and
//! seeds. Nothing here predicts on its own.
//!
//! Memory: nothing held grows with the trace's length but every variant's plans of the
//! replayed streams (what `predict` holds of its traces). The trace is read stream by stream ([`TraceFile`]) and its sidecar detour
//! by detour ([`SidecarFile`]: the per-source table in a few passes, `report_of`); each variant
//! is filtered in constant memory ([`FilterPlan`]) into a temporary `.jtr` that is unlinked
//! while open (`tempfile::tempfile`: nothing is left behind, however the process ends) and read
//! back as `predict` reads its inputs (`read_replayed_from`: the replayed streams' detours and
//! the whole variant's facts), then planned and dropped. The numbers are those of the variants
//! filtered whole in memory, byte for byte.
//!
//! A prediction is deterministic given its seed, and which stretch of a heavy-tailed trace the
//! offsets land on moves it, so each question is asked over `--seeds` seeds (seed, seed + 1,
//! …) and every number is the mean over draws with its 95 % t-interval; a saving is the
//! paired difference (collected − variant) per draw, so the offsets common to both cancel.
//! The per-source savings need not add up to the saving of removing them all: two sources in
//! one detour, or two long detours in one phase, share the phase's maximum. The table states
//! that interaction (all removed − Σ each removed) per rank count and sync mode.

use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use indicatif::ProgressBar;
use serde::Serialize;

use jitter_trace::attribution::{report_of, sidecar_path, Mode, Scope, UNATTRIBUTED};
use jitter_trace::filter::{Selector, SourceFilter};
use jitter_trace::filter_streams::{FilterPlan, SharedSidecar};
use jitter_trace::scratch::Scratch;
use jitter_trace::sidecar_reader::SidecarFile;
use jitter_trace::stream_order::{StreamSource, TraceFile};
use jitter_trace::summary::mean_ci95;
use jitter_trace::table::{Align, Table};
use jitter_trace::{read_replayed, read_replayed_from, Replayed};

use super::comm::Solo;
use super::input::TraceInput;
use super::prediction::predict;
use super::prepare::prepare;
use super::request::PredictRequest;
use super::spec::PredictSpec;

/// How a removed source leaves its detours (`--removal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Removal {
    /// Only the source's own net time.
    Net,
    /// A task's or work item's wake-up path with it.
    WithWakeups,
}

/// What `replay-bench whatif` is asked: `predict`'s request (one attributed trace) and the
/// questions' own options.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIfRequest {
    /// The prediction of every variant.
    pub predict: PredictRequest,
    /// Seeds (offset draws) each question is predicted over: seed, seed + 1, …
    pub seeds: u64,
    /// Sources with at least this share of the noise time get rows of their own.
    pub min_share: f64,
    /// How a removed source leaves its detours.
    pub removal: Removal,
}

/// A number over the draws: mean and the half-width of its 95 % t-interval (NaN for one draw).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Mean over the draws.
    pub mean: f64,
    /// Half-width of the 95 % t-interval of the mean.
    pub ci95: f64,
}

impl Interval {
    fn of(v: &[f64]) -> Interval {
        let (mean, ci95) = mean_ci95(v);
        Interval { mean, ci95 }
    }

    fn text(&self) -> String {
        if self.ci95.is_finite() {
            format!("{:.2}±{:.2}", self.mean, self.ci95)
        } else {
            format!("{:.2}", self.mean)
        }
    }
}

/// What a variant asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Question {
    /// The trace as collected.
    Collected,
    /// The trace without one source.
    Without,
    /// The trace with that source only.
    Only,
    /// Every kernel source removed (only the unattributed rest).
    WithoutKernel,
}

/// One variant's row: its predicted SD (eq. 2, AvgMaxQTBT) and the saving against the trace as
/// collected, per (ranks, sync) point, in percent / percentage points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantRow {
    /// The variant's label (the trace label of its prediction rows).
    pub label: String,
    /// What it asks.
    pub question: Question,
    /// The source it removes or keeps.
    pub source: Option<String>,
    /// That source's share of the noise time (frequency mode, net times).
    pub share: Option<f64>,
    /// That source's period, ns, when its occurrences have one.
    pub period_ns: Option<u64>,
    /// Noise ratio of the variant's trace.
    pub noise_ratio: f64,
    /// Predicted SD per point.
    pub sd_pct: Vec<Interval>,
    /// SD as collected − SD of the variant, paired per draw, per point.
    pub saving_pp: Vec<Interval>,
}

/// The what-if table of one trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatIf {
    /// The trace.
    pub trace: String,
    /// The (ranks, sync) points, in column order.
    pub points: Vec<Point>,
    /// Seeds predicted over.
    pub seeds: Vec<u64>,
    /// Share of the noise time some kernel event explains.
    pub explained: f64,
    /// The rows: as collected, all kernel sources removed, then per source without / only.
    pub rows: Vec<VariantRow>,
    /// Saving of all kernel sources removed − Σ savings of each kernel source with a row,
    /// per point (negative: the sources overlap, removing one alone saves less than its part).
    pub interaction_pp: Vec<Interval>,
    /// What the table leaves out or assumes.
    pub notes: Vec<String>,
    /// `predict`'s report of every variant (its rows labelled by the variant), one per seed.
    pub reports: Vec<jitter_report::report::Report>,
}

/// A (ranks, sync mode) point of the table.
pub type Point = (u64, String);

/// One question: what its row says, and its filtered trace prepared for prediction (the
/// trace itself is dropped as soon as it is prepared: one variant's trace at a time).
struct Variant {
    row: VariantRow,
    /// Its plans, `None` once handed to the prediction or when `empty`.
    input: Option<TraceInput>,
    /// No detour left on any replayed stream: nothing to plan, its SD is 0.
    empty: bool,
}

/// How every variant is prepared: the trace's name, the platform's plan options and the
/// streams a node's ranks replay.
struct Prep<'a> {
    path: &'a str,
    options: jitter_emulator::PlanOptions,
    k: u64,
}

impl Prep<'_> {
    /// Which streams a variant's read keeps: those a node's ranks replay.
    fn keep(&self) -> impl Fn(usize, usize) -> bool {
        let k = self.k;
        move |i, _| (i as u64) < k
    }

    /// The variant with `row` of the trace read in `replayed`: its whole noise ratio, and its
    /// plans unless no replayed stream holds a detour (one left without detours on some of
    /// them is refused by `TraceInput::replayed`, named).
    fn variant(&self, mut row: VariantRow, replayed: &Replayed) -> anyhow::Result<Variant> {
        let facts = &replayed.facts;
        row.noise_ratio = facts.pooled(0..facts.streams()).0;
        let k = usize::try_from(self.k).unwrap_or(usize::MAX);
        let empty = (replayed.trace.streams.iter().take(k)).all(|s| s.records.is_empty());
        let input = if empty {
            None
        } else {
            let input = TraceInput::replayed(replayed, self.path, &row.label, self.options, self.k);
            Some(input.with_context(|| format!("variant `{}`", row.label))?)
        };
        Ok(Variant { row, input, empty })
    }

    /// The trace filtered by `plan`, written to a temporary `.jtr` unlinked while open and
    /// read back with the replayed streams' detours only.
    fn filtered(&self, plan: &FilterPlan) -> anyhow::Result<Replayed> {
        let scratch = Scratch::new("for a variant")?;
        let mut file = scratch.file();
        let mut w = plan.write_jtr_to(BufWriter::with_capacity(1 << 16, file))?;
        w.flush()
            .context("cannot write a variant's temporary trace")?;
        drop(w);
        (file.seek(SeekFrom::Start(0))).context("cannot read a variant's temporary trace")?;
        let input = BufReader::with_capacity(1 << 16, file);
        Ok(read_replayed_from(input, self.keep())?)
    }
}

/// The attributed trace read stream by stream, and its sidecar detour by detour.
struct Attributed<'a> {
    path: &'a Path,
    file: TraceFile,
    sidecar: SharedSidecar,
}

impl Attributed<'_> {
    /// `f` planned over the trace and its sidecar (one pass over the sidecar).
    fn plan<'s>(&'s self, f: &'s SourceFilter) -> anyhow::Result<FilterPlan<'s>> {
        Ok(FilterPlan::planned(
            &self.file,
            Arc::clone(&self.sidecar),
            f,
        )?)
    }
}

/// The trace at `path` and its attribution sidecar, which must exist and be this collection's
/// (the errors, in their order, of reading both whole: the sidecar's own from its first pass).
fn open_attributed<'a>(path: &'a Path) -> anyhow::Result<Attributed<'a>> {
    let file =
        TraceFile::open(path).with_context(|| format!("cannot read trace {}", path.display()))?;
    let sidecar = sidecar_path(path);
    anyhow::ensure!(
        sidecar.exists(),
        "{} has no attribution ({} is missing): collect with jitter-collect --attribute",
        path.display(),
        sidecar.display()
    );
    Ok(Attributed {
        path,
        file,
        sidecar: Arc::new(SidecarFile::new(&sidecar)),
    })
}

/// Refuses a sidecar that names another collection than the trace's.
fn check_collection(src: &Attributed, plan: &FilterPlan) -> anyhow::Result<()> {
    anyhow::ensure!(
        plan.collection_start_unix_ns() == src.file.frame().header.collection_start_unix_ns,
        "{} belongs to another collection than {}",
        sidecar_path(src.path).display(),
        src.path.display()
    );
    Ok(())
}

/// The variants of the trace: as collected, without every kernel source, and per source with
/// a share of at least `min_share` without it and with it only; and the share of the noise
/// time some kernel event explains.
fn variants(
    src: &Attributed,
    args: &WhatIfRequest,
    prep: &Prep,
    notes: &mut Vec<String>,
) -> anyhow::Result<(Vec<Variant>, f64)> {
    let min_share = args.min_share;
    let unattributed = vec![Selector::Source(UNATTRIBUTED.into())];
    let keep_rest = SourceFilter::keep(unattributed);
    // The first pass over the sidecar reads its frame: its collection is checked before the
    // table is made, and the first filter checks it against the trace before anything is
    // planned (the order in which the sidecar read whole was refused).
    let kernel = src.plan(&keep_rest)?;
    check_collection(src, &kernel)?;
    let scope = Scope {
        mode: Mode::Frequency,
        runs: None,
        periods: Some(jitter_trace::periodogram::periods_binned),
    };
    let report = report_of(src.sidecar.as_ref(), scope)?;
    kernel.check()?;
    let row =
        |label: &str, question, source: Option<&jitter_trace::attribution::SourceRow>| VariantRow {
            label: label.to_string(),
            question,
            source: source.map(|s| s.source.clone()),
            share: source.map(|s| s.share),
            period_ns: source.and_then(|s| s.period_ns),
            noise_ratio: 0.0,
            sd_pct: Vec::new(),
            saving_pp: Vec::new(),
        };
    let collected = read_replayed(src.path, prep.keep())
        .with_context(|| format!("cannot read trace {}", src.path.display()))?;
    let mut out = vec![prep.variant(row("collected", Question::Collected, None), &collected)?];
    drop(collected);
    let no_kernel = row("no kernel sources", Question::WithoutKernel, None);
    out.push(prep.variant(no_kernel, &prep.filtered(&kernel)?)?);
    drop(kernel);
    let (mut small, mut small_share) = (0, 0.0);
    for s in &report.rows {
        if s.share < min_share {
            small += 1;
            small_share += s.share;
            continue;
        }
        let one = vec![Selector::Source(s.source.clone())];
        let drop = SourceFilter::drop(one.clone());
        let drop = match args.removal {
            Removal::Net => drop,
            Removal::WithWakeups => drop.with_wakeups(),
        };
        let label = format!("without {}", s.source);
        let without = prep.filtered(&src.plan(&drop)?)?;
        out.push(prep.variant(row(&label, Question::Without, Some(s)), &without)?);
        std::mem::drop(without);
        let keep = SourceFilter::keep(one);
        let only = prep.filtered(&src.plan(&keep)?)?;
        let label = format!("only {}", s.source);
        out.push(prep.variant(row(&label, Question::Only, Some(s)), &only)?);
    }
    if small > 0 {
        notes.push(format!(
            "{small} source(s) under {:.1} % of the noise time each ({:.2} % together) have no \
             row of their own; they stay in every variant but their own",
            min_share * 100.0,
            small_share * 100.0
        ));
    }
    Ok((out, report.explained))
}

/// Predicts every variant over the draws and fills in their rows.
fn predict_variants(
    variants: &mut [Variant],
    spec: &PredictSpec,
    seeds: &[u64],
    args: &PredictRequest,
) -> anyhow::Result<(Vec<Point>, Vec<jitter_report::report::Report>)> {
    // A variant left without detours on every replayed stream replays nothing: its SD is 0 by
    // definition (no plan can be made of it).
    let inputs: Vec<TraceInput> = variants.iter_mut().filter_map(|v| v.input.take()).collect();
    // The predictor's budget before anything runs: every variant, every draw.
    let mut estimate = super::budget::estimate(&inputs, spec, 1, 0, rayon::current_num_threads());
    estimate.seconds *= seeds.len() as f64;
    super::budget::admit(&estimate, &super::budget::Limits::here(1), args.force)?;
    let mut reports = Vec::with_capacity(seeds.len());
    // sd[variant][point][draw]
    let mut sd: Vec<BTreeMap<(u64, String), Vec<f64>>> = vec![BTreeMap::new(); variants.len()];
    for &seed in seeds {
        for (i, _) in variants.iter().enumerate().filter(|(_, v)| v.empty) {
            for &n in &spec.ranks {
                for m in &spec.modes {
                    sd[i].entry((n, m.to_string())).or_default().push(0.0);
                }
            }
        }
        let mut s = spec.clone();
        s.des.seed = seed;
        let p = predict(&Solo, &inputs, &s, &ProgressBar::hidden(), &|_| {})?;
        super::prediction_report::check_plausible(&p)?;
        let report = p.des.or(p.order_stats).context("no model ran")?;
        reports.push(report.clone());
        for r in &report.results {
            let i = (variants.iter().position(|v| v.row.label == r.trace))
                .with_context(|| format!("a row of unknown trace `{}`", r.trace))?;
            let key = (r.ranks, r.sync.clone());
            sd[i].entry(key).or_default().push(r.sd_qtbt_pct);
        }
    }
    anyhow::ensure!(!variants[0].empty, "a stream of the trace has no detours");
    let points: Vec<Point> = spec
        .ranks
        .iter()
        .flat_map(|&n| spec.modes.iter().map(move |m| (n, m.to_string())))
        .filter(|k| sd[0].contains_key(k))
        .collect();
    for (i, v) in variants.iter_mut().enumerate() {
        for k in &points {
            let mine = sd[i].get(k).cloned().unwrap_or_default();
            let base = &sd[0][k];
            let saving: Vec<f64> = base.iter().zip(&mine).map(|(b, m)| b - m).collect();
            v.row.sd_pct.push(Interval::of(&mine));
            v.row.saving_pp.push(Interval::of(&saving));
        }
    }
    Ok((points, reports))
}

/// The what-if table of the one attributed trace of `args`.
pub fn what_if(args: &WhatIfRequest) -> anyhow::Result<WhatIf> {
    let p = &args.predict;
    anyhow::ensure!(
        p.traces.len() == 1 && p.node_traces.is_empty(),
        "whatif takes one attributed --trace (no --node-traces)"
    );
    anyhow::ensure!(
        p.draws == 1,
        "whatif predicts each question over --seeds K seeds (their mean and interval); --draws \
         (draws pooled into one number) is predict's"
    );
    anyhow::ensure!(
        p.platform_noise.is_none(),
        "whatif does not take --platform-noise (predict the variants with predict for that)"
    );
    anyhow::ensure!(
        args.min_share.is_finite() && (0.0..1.0).contains(&args.min_share),
        "--min-share must be in [0, 1), got {}",
        args.min_share
    );
    let path = &p.traces[0];
    let (_, spec) = prepare(p)?;
    let src = open_attributed(path)?;
    let mut notes = Vec::new();
    let shown = path.display().to_string();
    let prep = Prep {
        path: &shown,
        options: spec.platform.options(),
        k: p.ranks_per_node,
    };
    let (mut vs, explained) = variants(&src, args, &prep, &mut notes)?;
    drop(src);
    notes.push(
        match args.removal {
            Removal::Net => {
                "without a source: its net time removed from each detour (--removal net)"
            }
            Removal::WithWakeups => {
                "without a task or work item: its net time and its wake-up path (the timer and \
             scheduler parts and the unexplained time of the detours it ran in) removed; without \
             another source: its net time (--removal with-wakeups)"
            }
        }
        .into(),
    );
    let seeds: Vec<u64> = (0..args.seeds).map(|d| p.seed.wrapping_add(d)).collect();
    let (points, reports) = predict_variants(&mut vs, &spec, &seeds, p)?;
    let rows: Vec<VariantRow> = vs.into_iter().map(|v| v.row).collect();
    let interaction_pp = interaction(&rows, points.len());
    notes.push(
        "SD: eq. (2) (AvgMaxQTBT), mean over the draws ± half-width of its 95 % t-interval; \
         saving: SD as collected − SD of the variant, paired per draw"
            .into(),
    );
    Ok(WhatIf {
        trace: shown,
        points,
        seeds,
        explained,
        rows,
        interaction_pp,
        notes,
        reports,
    })
}

/// Saving of all kernel sources removed − Σ the savings of each kernel source with a row,
/// per point, from the draws' means (the interval: the root sum of squares of the parts').
fn interaction(rows: &[VariantRow], points: usize) -> Vec<Interval> {
    let all = rows.iter().find(|r| r.question == Question::WithoutKernel);
    let each: Vec<&VariantRow> = (rows.iter())
        .filter(|r| r.question == Question::Without && r.source.as_deref() != Some(UNATTRIBUTED))
        .collect();
    (0..points)
        .map(|k| {
            let Some(all) = all else {
                return Interval {
                    mean: f64::NAN,
                    ci95: f64::NAN,
                };
            };
            let parts =
                std::iter::once(&all.saving_pp[k]).chain(each.iter().map(|r| &r.saving_pp[k]));
            let ci95 = parts.map(|i| i.ci95 * i.ci95).sum::<f64>().sqrt();
            let sum: f64 = each.iter().map(|r| r.saving_pp[k].mean).sum();
            Interval {
                mean: all.saving_pp[k].mean - sum,
                ci95,
            }
        })
        .collect()
}

impl WhatIf {
    /// The table as text: one row per variant, SD and saving per point, then the interaction.
    pub fn render(&self) -> String {
        let mut head = vec![
            "variant".to_string(),
            "share(%)".into(),
            "period".into(),
            "noise(%)".into(),
        ];
        for (n, m) in &self.points {
            head.push(format!("SD {n} {m} (%)"));
            head.push(format!("saving {n} {m} (pp)"));
        }
        let mut t = Table::new(head).align(0, Align::Left);
        for r in &self.rows {
            let mut cells = vec![
                r.label.clone(),
                r.share.map_or("-".into(), |s| format!("{:.1}", s * 100.0)),
                (r.period_ns).map_or("-".into(), |p| jitter_trace::units::format_ns(p as f64)),
                format!("{:.3}", r.noise_ratio * 100.0),
            ];
            for (sd, sv) in r.sd_pct.iter().zip(&r.saving_pp) {
                cells.push(sd.text());
                cells.push(if r.question == Question::Collected {
                    "-".into()
                } else {
                    sv.text()
                });
            }
            t.row(cells);
        }
        let mut out = format!(
            "what if: {} ({:.1} % of the noise time attributed; seeds {:?})\n",
            self.trace,
            self.explained * 100.0,
            self.seeds
        );
        out.push_str(&t.render());
        let inter: Vec<String> = (self.points.iter().zip(&self.interaction_pp))
            .map(|((n, m), i)| format!("{n} {m}: {} pp", i.text()))
            .collect();
        out.push_str(&format!(
            "interaction (no kernel sources − Σ each kernel source removed): {}\n",
            inter.join("; ")
        ));
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }

    /// The table as CSV: one line per variant and point.
    pub fn csv(&self) -> anyhow::Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "variant",
            "question",
            "source",
            "share",
            "period_ns",
            "noise_ratio",
            "ranks",
            "sync",
            "sd_pct",
            "sd_ci95_pct",
            "saving_pp",
            "saving_ci95_pp",
        ])?;
        for r in &self.rows {
            for (k, (n, m)) in self.points.iter().enumerate() {
                let opt = |v: Option<String>| v.unwrap_or_default();
                w.write_record([
                    r.label.clone(),
                    format!("{:?}", r.question).to_lowercase(),
                    opt(r.source.clone()),
                    opt(r.share.map(|s| s.to_string())),
                    opt(r.period_ns.map(|p| p.to_string())),
                    r.noise_ratio.to_string(),
                    n.to_string(),
                    m.clone(),
                    r.sd_pct[k].mean.to_string(),
                    r.sd_pct[k].ci95.to_string(),
                    r.saving_pp[k].mean.to_string(),
                    r.saving_pp[k].ci95.to_string(),
                ])?;
            }
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_emulator::SyncMode;
    use jitter_trace::attribution::{AttributedDetour, Attribution, CpuAttribution, Part};
    use jitter_trace::{Detour, Stream, Trace};
    use std::path::PathBuf;

    /// One CPU, 4 s: a daemon (`task:d`, every 9 ms for 170 µs, from 1 ms) and the tick
    /// (`timer`, every 4 ms for 6 µs, from 3 ms; never touching the daemon). `which` picks
    /// the sources written into the trace; the attribution names each detour's one source,
    /// except that with `wakeup_ns` > 0 a daemon detour starts with that much `sched` (its
    /// wake-up path) before `task:d`.
    fn write(dir: &Path, name: &str, which: &[&str]) -> PathBuf {
        write_with(dir, name, which, 0)
    }

    fn write_with(dir: &Path, name: &str, which: &[&str], wakeup_ns: u64) -> PathBuf {
        let end = 4_000_000_000u64;
        let daemon: Vec<(u64, u64, &str)> = (0..)
            .map(|i| 1_000_000 + 9_000_000 * i)
            .take_while(|&s| s < end - 1_000_000)
            .map(|s| (s, 170_000, "task:d"))
            .collect();
        let ticks = (0..)
            .map(|i| 3_000_000 + 4_000_000 * i)
            .take_while(|&s| s < end - 1_000_000)
            .filter(|s| {
                !daemon
                    .iter()
                    .any(|&(a, r, _)| *s + 6_000 >= a && *s <= a + r)
            })
            .map(|s| (s, 6_000, "timer"));
        let mut d: Vec<(u64, u64, &str)> = (daemon.iter().copied().chain(ticks))
            .filter(|x| which.contains(&x.2))
            .collect();
        d.sort_unstable();
        let detours: Vec<Detour> = d
            .iter()
            .map(|&(start_ns, run_ns, _)| Detour { start_ns, run_ns })
            .collect();
        let mut trace = Trace {
            streams: vec![Stream::from_detours(0, 0, end, &detours).unwrap()],
            ..Trace::default()
        };
        trace.header.collection_start_unix_ns = 42;
        trace.sync_header();
        let path = dir.join(name);
        jitter_trace::write_trace(&path, &trace).unwrap();
        let cpu = CpuAttribution {
            cpu: 0,
            end_ns: end,
            detours: (d.iter())
                .map(|&(start_ns, run_ns, s)| {
                    let part = |source: &str, start_ns, ns| Part {
                        source: source.into(),
                        start_ns,
                        ns,
                    };
                    let parts = if s == "task:d" && wakeup_ns > 0 {
                        vec![
                            part("sched", start_ns, wakeup_ns),
                            part(s, start_ns + wakeup_ns, run_ns - wakeup_ns),
                        ]
                    } else {
                        vec![part(s, start_ns, run_ns)]
                    };
                    AttributedDetour {
                        start_ns,
                        run_ns,
                        source: s.into(),
                        combination: (parts.iter().map(|p| p.source.as_str()))
                            .collect::<Vec<_>>()
                            .join("+"),
                        explained_ns: run_ns,
                        parts,
                    }
                })
                .collect(),
            ..CpuAttribution::default()
        };
        let a = Attribution {
            version: jitter_trace::attribution::ATTRIBUTION_VERSION,
            collection_start_unix_ns: 42,
            cpus: vec![cpu],
            ..Attribution::default()
        };
        a.write(&sidecar_path(&path)).unwrap();
        path
    }

    fn flags(path: &Path) -> PredictRequest {
        PredictRequest {
            ranks: vec![16, 256],
            modes: vec![SyncMode::None, SyncMode::Once],
            phases: 400,
            quanta_ns: 1_000_000,
            seed: 5,
            ..PredictRequest::new(vec![path.to_path_buf()])
        }
    }

    /// The prediction of the trace without the daemon is the prediction of a collection that
    /// never had it (the same detours: equal to the last digit, seed by seed), likewise with
    /// the daemon only; the savings are the paired differences and the table says how they
    /// add up.
    #[test]
    fn a_source_removed_predicts_as_a_trace_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let both = write(dir.path(), "both.jtr", &["task:d", "timer"]);
        let tick = write(dir.path(), "tick.jtr", &["timer"]);
        let daemon = write(dir.path(), "daemon.jtr", &["task:d"]);
        let args = WhatIfRequest {
            predict: flags(&both),
            seeds: 2,
            min_share: 0.01,
            removal: Removal::Net,
        };
        let w = what_if(&args).unwrap();
        let row = |l: &str| w.rows.iter().find(|r| r.label == l).unwrap();
        let direct = |path: &Path| -> Vec<f64> {
            let (traces, spec) = prepare(&flags(path)).unwrap();
            let mut by_point = vec![Vec::new(); w.points.len()];
            for seed in [5, 6] {
                let mut s = spec.clone();
                s.des.seed = seed;
                let p = predict(&Solo, &traces, &s, &ProgressBar::hidden(), &|_| {}).unwrap();
                for r in p.des.unwrap().results {
                    let k = w
                        .points
                        .iter()
                        .position(|q| q.0 == r.ranks && q.1 == r.sync)
                        .unwrap();
                    by_point[k].push(r.sd_qtbt_pct);
                }
            }
            by_point.iter().map(|v| Interval::of(v).mean).collect()
        };
        let close = |a: &[Interval], b: &[f64]| {
            a.iter()
                .zip(b)
                .all(|(x, y)| (x.mean - y).abs() < 1e-9 * y.abs().max(1.0))
        };
        let without = row("without task:d");
        assert!(close(&without.sd_pct, &direct(&tick)), "{w:?}");
        assert!(close(&row("only task:d").sd_pct, &direct(&daemon)), "{w:?}");
        assert!(close(&row("collected").sd_pct, &direct(&both)));
        let share = without.share.unwrap();
        assert!(
            (share - 170.0 / 9.0 / (170.0 / 9.0 + 6.0 / 4.0)).abs() < 0.01,
            "{share}"
        );
        assert_eq!(
            without.period_ns.map(|p| (p as f64 / 1e6).round()),
            Some(9.0)
        );
        for (k, s) in without.saving_pp.iter().enumerate() {
            let want = row("collected").sd_pct[k].mean - without.sd_pct[k].mean;
            assert!((s.mean - want).abs() < 1e-9, "{s:?} {want}");
            assert!(
                s.mean > 1.0,
                "the daemon costs more than 1 pp at every point: {s:?}"
            );
        }
        // No unattributed time: removing every kernel source removes all noise.
        let none = row("no kernel sources");
        assert_eq!(none.noise_ratio, 0.0);
        assert!(none.sd_pct.iter().all(|s| s.mean.abs() < 0.5), "{none:?}");
        // The interaction is what the two savings leave of removing both.
        for (k, i) in w.interaction_pp.iter().enumerate() {
            let each = without.saving_pp[k].mean + row("without timer").saving_pp[k].mean;
            assert!(
                (i.mean - (none.saving_pp[k].mean - each)).abs() < 1e-9,
                "{i:?}"
            );
        }
        let text = w.render();
        assert!(text.contains("interaction (no kernel sources − Σ each kernel source removed)"));
        assert_eq!(w.reports.len(), 2);
        let rows = w.reports[0].results.len();
        assert_eq!(
            rows,
            (w.rows.len() - 1) * w.points.len(),
            "every variant but the empty one"
        );
        let csv = w.csv().unwrap();
        assert_eq!(csv.lines().count(), 1 + w.rows.len() * w.points.len());
    }

    /// A daemon whose detours begin with its wake-up (`sched`): removed with its wake-ups, the
    /// trace predicts as the tick alone; removed net, its wake-ups stay as short detours and
    /// the prediction is the tick's plus theirs (larger at sync once, where every detour
    /// counts).
    #[test]
    fn a_task_removed_with_its_wakeups_predicts_as_a_trace_without_them() {
        let dir = tempfile::tempdir().unwrap();
        let both = write_with(dir.path(), "both.jtr", &["task:d", "timer"], 20_000);
        let tick = write(dir.path(), "tick.jtr", &["timer"]);
        let mut args = WhatIfRequest {
            predict: flags(&both),
            seeds: 1,
            min_share: 0.01,
            removal: Removal::WithWakeups,
        };
        let sd = |args: &WhatIfRequest| -> (Vec<Point>, Vec<f64>) {
            let w = what_if(args).unwrap();
            let row = w.rows.iter().find(|r| r.label == "without task:d").unwrap();
            (w.points, row.sd_pct.iter().map(|i| i.mean).collect())
        };
        let (points, woken) = sd(&args);
        args.removal = Removal::Net;
        let (_, net) = sd(&args);
        args.predict = flags(&tick);
        let (traces, spec) = prepare(&args.predict).unwrap();
        let p = predict(&Solo, &traces, &spec, &ProgressBar::hidden(), &|_| {}).unwrap();
        let results = p.des.unwrap().results;
        let direct: Vec<f64> = (points.iter())
            .map(|(n, s)| {
                let r = results.iter().find(|r| r.ranks == *n && &r.sync == s);
                r.unwrap().sd_qtbt_pct
            })
            .collect();
        assert_eq!(woken.len(), direct.len());
        for (k, (w, d)) in woken.iter().zip(&direct).enumerate() {
            assert!(
                (w - d).abs() < 1e-9 * d.abs().max(1.0),
                "{k}: {woken:?} {direct:?}"
            );
        }
        assert!(
            net.iter().zip(&woken).all(|(n, w)| n > w),
            "the wake-ups left behind cost something: {net:?} {woken:?}"
        );
    }

    #[test]
    fn a_trace_without_attribution_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let both = write(dir.path(), "both.jtr", &["timer"]);
        std::fs::remove_file(sidecar_path(&both)).unwrap();
        let args = WhatIfRequest {
            predict: flags(&both),
            seeds: 1,
            min_share: 0.01,
            removal: Removal::Net,
        };
        let e = what_if(&args).unwrap_err().to_string();
        assert!(e.contains("has no attribution"), "{e}");
    }
}
