//! `replay-bench validate`'s entry point: the options checked before the first run, the
//! platform's noise recorded, the runs, the prediction, and one table (with the plot and the
//! JSON) of each run beside the prediction of its own windows and of the whole trace.

use std::path::PathBuf;

use anyhow::Context;

use crate::flags::validate::ValidateArgs;
use crate::validate::{compare_all, predict_request, probe_platform, run_all, MeasuredRun};
use jitter_predict::prediction::predict;
use jitter_predict::prepare::prepare;
use jitter_report::comparison::{self, Comparison};
use jitter_report::plot::{self, StudyRow};
use jitter_report::report::{ReportKind, ResultRow};

/// `replay-bench validate`.
pub fn main(a: &ValidateArgs) -> anyhow::Result<()> {
    let ranks = a.rank_counts();
    a.sync.check()?;
    a.check_outputs()?;
    // Refused before the runs, as the runs and the prediction would refuse it.
    jitter_trace::read_trace(&a.trace)
        .with_context(|| format!("cannot read trace {}", a.trace.display()))?
        .accept(&a.trace.display().to_string(), a.salvage.choice())?;
    let stem = a
        .trace
        .file_stem()
        .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
    let dir = a
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("validate-{stem}")));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let background = probe_platform(a, ranks.iter().copied().max().unwrap_or(1), &dir)?;
    let measured = run_all(a, &ranks, &dir)?;
    // Each injection mode against its own prediction (its own platform: the signal injector's
    // calibration at S, or nothing paying at calls at S = 1).
    let (mut all, mut predicted) = (Vec::new(), Vec::new());
    for inject in a.inject_modes() {
        let runs: Vec<&MeasuredRun> = measured.iter().filter(|m| m.inject == inject).collect();
        let args = predict_request(a, &ranks, &runs, background.as_deref())?;
        eprintln!("validate: predicting {} points ({inject})", runs.len());
        let (traces, spec) = prepare(&args)?;
        let prediction = predict(
            &jitter_predict::comm::Solo,
            &traces,
            &spec,
            &indicatif::ProgressBar::hidden(),
            &|_| {},
        )?;
        let des = prediction
            .des
            .context("the prediction produced no simulation report")?;
        all.extend(compare_all(a, &args, &runs, &des.results)?);
        predicted.extend(des.results.into_iter().map(|mut r| {
            r.trace = format!("{} ({inject})", r.trace);
            (inject, r)
        }));
    }
    let file = a
        .trace
        .file_name()
        .map_or_else(|| stem.clone(), |f| f.to_string_lossy().into_owned());
    print_table(a, &file, &dir, background.as_ref(), &all);
    for line in comparison::modes_side_by_side(&all) {
        println!("{line}");
    }
    if let Some(svg) = &a.plot {
        draw(&measured, &predicted, &file, svg)?;
    }
    if let Some(o) = &a.output {
        let json = serde_json::to_string_pretty(&all)?;
        jitter_trace::output::write_output_bytes(o, json.as_bytes())?;
    }
    Ok(())
}

/// The table, under a line of what was run and over a line of where the platform's own noise
/// went.
fn print_table(
    a: &ValidateArgs,
    file: &str,
    dir: &std::path::Path,
    background: Option<&PathBuf>,
    all: &[Comparison],
) {
    println!(
        "replay-bench validate: {file} (q = {}, period {} s per run, seed {}); runs in {}",
        jitter_report::formats::fmt_ns(a.quanta.ns as f64),
        a.period.as_secs_f64(),
        a.seed.value,
        dir.display()
    );
    let bg_name = background
        .and_then(|p| p.file_name())
        .map(|f| f.to_string_lossy().into_owned());
    print!("{}", comparison::render(all, false));
    println!(
        "platform: the machine's own noise during each run; {}",
        match &bg_name {
            Some(f) => format!(
                "in the whole-trace prediction as {f}, recorded before the runs; not in the \
                 prediction of the same windows"
            ),
            None => "in no prediction".into(),
        }
    );
}

/// SD eq. (3) against processes: the measured points with their bars beside the predicted
/// curves.
fn draw(
    measured: &[MeasuredRun],
    predicted: &[(jitter_emulator::InjectionMode, ResultRow)],
    file: &str,
    svg: &std::path::Path,
) -> anyhow::Result<()> {
    let rows: Vec<StudyRow> = (measured.iter())
        .map(|m| StudyRow {
            kind: ReportKind::Run,
            row: ResultRow {
                trace: format!("{} ({})", m.row.trace, m.inject),
                ..m.row.clone()
            },
        })
        .chain(predicted.iter().map(|(_, row)| StudyRow {
            kind: ReportKind::PredictDes,
            row: row.clone(),
        }))
        .collect();
    let title = format!("Slowdown eq. (3) vs processes, {file}: measured and predicted");
    plot::draw(&rows, plot::Metric::Qt, &title, svg)
        .with_context(|| format!("plot {}", svg.display()))
}
