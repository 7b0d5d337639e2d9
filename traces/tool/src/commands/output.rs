//! Where `jitter-trace` writes: the `-o`/`--to` flags checked before any work, traces written
//! in their format, and what a command prints about what it wrote.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;

use jitter_trace::interop::{export, export_streams, per_stream_path, Format};
use jitter_trace::output::{check_output, check_writable};
use jitter_trace::stream_order::{Counted, StreamSource};
use jitter_trace::Trace;

/// Where to write the output trace.
#[derive(Debug, Args)]
pub(crate) struct Output {
    /// Output file; a device is written through, a link is followed; a LogGOPSim export of
    /// several streams needs `{cpu}` in the name (one file per CPU).
    #[arg(short, long, value_name = "FILE")]
    pub(crate) output: PathBuf,
    /// Output format (default: from the file name).
    #[arg(long, value_name = "FORMAT")]
    pub(crate) to: Option<Format>,
}

impl Output {
    /// The output's format (`Format::for_output`: the name's extension, `--to` only where it
    /// agrees) and its path checked writable, before any input is read.
    pub(crate) fn check(&self) -> Result<Format> {
        let format = Format::for_output(self.to, &self.output)?;
        let probe = if format == Format::LogGopSim {
            per_stream_path(&self.output, 0)
        } else {
            self.output.clone()
        };
        check_writable(&probe, "-o")?;
        Ok(format)
    }
}

/// Checks an optional SVG output before any work (see `output::check_output`).
pub(crate) fn check_svg(path: Option<&PathBuf>, flag: &str) -> Result<()> {
    if let Some(p) = path {
        check_output(p, flag, "an SVG image", &["svg"])?;
    }
    Ok(())
}

/// Writes the trace and returns the files written (one per stream for multi-stream LogGOPSim).
pub(crate) fn save(trace: &Trace, output: &Output) -> Result<Vec<PathBuf>> {
    let format = Format::for_output(output.to, &output.output)?;
    export(trace, &output.output, format).with_context(|| output.output.display().to_string())?;
    Ok(written(trace, output, format))
}

/// [`save`] of a trace read stream by stream ([`export_streams`]), with how much it wrote.
pub(crate) fn save_streams(
    src: &dyn StreamSource,
    output: &Output,
) -> Result<(Vec<PathBuf>, Count)> {
    let format = Format::for_output(output.to, &output.output)?;
    let counted = Counted::new(src);
    export_streams(&counted, &output.output, format)
        .with_context(|| output.output.display().to_string())?;
    let count = Count {
        streams: src.frame().streams.len(),
        records: counted.detours_read(),
    };
    Ok((written(src.frame(), output, format), count))
}

/// The files an export of the trace of `frame` wrote.
fn written(frame: &Trace, output: &Output, format: Format) -> Vec<PathBuf> {
    if format == Format::LogGopSim && frame.streams.len() > 1 {
        (frame.streams.iter())
            .map(|s| per_stream_path(&output.output, s.cpu))
            .collect()
    } else {
        vec![output.output.clone()]
    }
}

pub(crate) fn print_json(v: &serde_json::Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// How many streams and records a transform wrote.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Count {
    pub(crate) streams: usize,
    pub(crate) records: u64,
}

impl Count {
    /// The counts of a trace in memory.
    pub(crate) fn of(trace: &Trace) -> Count {
        Count {
            streams: trace.streams.len(),
            records: trace.record_count() as u64,
        }
    }
}

/// Prints what a transform produced.
pub(crate) fn report_written(
    json: bool,
    trace: &Trace,
    paths: &[PathBuf],
    extra: serde_json::Value,
) -> Result<()> {
    report_count(json, Count::of(trace), paths, extra)
}

/// [`report_written`] from the counts of what was written.
pub(crate) fn report_count(
    json: bool,
    count: Count,
    paths: &[PathBuf],
    extra: serde_json::Value,
) -> Result<()> {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    if json {
        let mut v = json!({
            "output": names,
            "streams": count.streams,
            "records": count.records,
        });
        if let (Some(m), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            m.extend(e);
        }
        print_json(&v)
    } else {
        let mut line = format!(
            "wrote {} records in {} streams to {}",
            count.records,
            count.streams,
            names.join(" ")
        );
        if let serde_json::Value::Object(e) = extra {
            for (k, v) in e {
                line.push_str(&format!(", {k} {v}"));
            }
        }
        println!("{line}");
        Ok(())
    }
}
