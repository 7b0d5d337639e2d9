//! How `jitter-trace` reads its input traces: the `--from`/`--salvage` flags, loading with the
//! one integrity policy, and the attribution sidecar beside a trace.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use clap::Args;

use jitter_trace::attribution::{sidecar_path, Attribution};
use jitter_trace::integrity::{Integrity, Salvage, SALVAGED_NOTE};
use jitter_trace::interop::{import, Format};
use jitter_trace::scan::{scan_trace, ChunkSink, Scan};
use jitter_trace::sidecar_reader::SidecarFile;
use jitter_trace::stream_order::{StreamSource, TraceFile};
use jitter_trace::units::parse_duration_ns;
use jitter_trace::{Trace, TraceError};

/// How to read the input traces.
#[derive(Debug, Args)]
pub(crate) struct Input {
    /// Input format (default: from the file name).
    #[arg(long, value_name = "FORMAT")]
    pub(crate) from: Option<Format>,
    /// Go on with a trace that lacks detours (its ring dropped some, a chunk is damaged, the
    /// file is truncated), printing the share kept, instead of refusing it.
    #[arg(long)]
    pub(crate) salvage: bool,
}

pub(crate) fn duration_arg(s: &str) -> Result<f64, String> {
    parse_duration_ns(s).map_err(|e| e.to_string())
}

/// Reads a trace and applies the one policy on what it lacks (ring loss, damage, truncation:
/// refused unless `--salvage`; what was kept named on stderr).
pub(crate) fn load(paths: &[PathBuf], input: &Input) -> Result<Trace> {
    let (trace, _) = load_checked(paths, input)?;
    Ok(trace)
}

/// [`load`], with what the trace lacks; a salvaged defect is carried in the trace's notes, so
/// that a trace written from it says so too.
pub(crate) fn load_checked(paths: &[PathBuf], input: &Input) -> Result<(Trace, Integrity)> {
    let first = paths.first().ok_or_else(|| anyhow!("no input file"))?;
    let (mut trace, integrity) = import_unchecked(paths, input)?;
    let name = first.display().to_string();
    let integrity = integrity.check(&name, Salvage::from_flag(input.salvage))?;
    if let Some(w) = integrity.warning() {
        eprintln!("warning: {name}: {w}");
    }
    if integrity.salvaged {
        if let Some(defect) = &integrity.defect {
            trace.notes.insert(SALVAGED_NOTE.into(), defect.clone());
        }
    }
    Ok((trace, integrity))
}

/// Reads a trace with what it lacks, applying no policy (`nodes` marks such a node unusable).
pub(crate) fn import_unchecked(paths: &[PathBuf], input: &Input) -> Result<(Trace, Integrity)> {
    let first = paths.first().ok_or_else(|| anyhow!("no input file"))?;
    let format = Format::resolve(input.from, first)?;
    let imported = import(paths, format).map_err(|e| named(first, &e))?;
    let integrity = Integrity::of(&imported.trace, &imported.completeness);
    Ok((imported.trace, integrity))
}

/// A reader's error as one line that names the file once.
fn named(path: &Path, e: &TraceError) -> anyhow::Error {
    let msg = jitter_trace::error::chain_line(e);
    let name = path.display().to_string();
    if msg.contains(&name) {
        anyhow!(msg)
    } else {
        anyhow!("{name}: {msg}")
    }
}

/// One pass over a single `.jtr` input in constant memory in its length, with the policy of
/// [`load_checked`] (refused unless `--salvage`; what was kept named on stderr); `None` for the
/// other formats, which are read whole with [`load_checked`].
pub(crate) fn scan_checked<S: ChunkSink>(
    paths: &[PathBuf],
    input: &Input,
    sink: &mut S,
) -> Result<Option<(Scan, Integrity)>> {
    let Some((scan, integrity)) = scan_unchecked(paths, input, sink)? else {
        return Ok(None);
    };
    let name = paths[0].display().to_string();
    let integrity = integrity.check(&name, Salvage::from_flag(input.salvage))?;
    if let Some(w) = integrity.warning() {
        eprintln!("warning: {name}: {w}");
    }
    Ok(Some((scan, integrity)))
}

/// [`scan_checked`] applying no policy, as [`import_unchecked`].
pub(crate) fn scan_unchecked<S: ChunkSink>(
    paths: &[PathBuf],
    input: &Input,
    sink: &mut S,
) -> Result<Option<(Scan, Integrity)>> {
    let [path] = paths else {
        return Ok(None);
    };
    if Format::resolve(input.from, path)? != Format::Jtr {
        return Ok(None);
    }
    let scan = scan_trace(path, sink).map_err(|e| named(path, &e))?;
    let integrity = scan.integrity();
    Ok(Some((scan, integrity)))
}

/// Another pass over a `.jtr` file a [`scan_checked`] of `records` detours read, into `sink`;
/// an error if the file no longer holds the same detours.
pub(crate) fn rescan(
    path: &Path,
    records: u64,
    sink: &mut dyn ChunkSink,
) -> Result<(), TraceError> {
    let again = scan_trace(path, sink)?;
    if again.record_count() != records {
        return Err(TraceError::Argument(format!(
            "{} changed while it was read ({records} detours, then {})",
            path.display(),
            again.record_count()
        )));
    }
    Ok(())
}

/// A trace to read stream by stream: a single `.jtr` input from its file, in constant memory
/// in its length ([`TraceFile`]); the other formats read whole. The policy of
/// [`load_checked`] is applied (refused unless `--salvage`; what was kept named on stderr; a
/// salvaged defect carried in the frame's notes).
pub(crate) fn source(paths: &[PathBuf], input: &Input) -> Result<Source> {
    let first = paths.first().ok_or_else(|| anyhow!("no input file"))?;
    if paths.len() > 1 || Format::resolve(input.from, first)? != Format::Jtr {
        let trace = load(paths, input)?;
        let detours = trace.record_count() as u64;
        return Ok(Source {
            src: Box::new(trace),
            detours,
        });
    }
    let mut file = TraceFile::open(first).map_err(|e| named(first, &e))?;
    let name = first.display().to_string();
    let integrity = (file.scan().integrity()).check(&name, Salvage::from_flag(input.salvage))?;
    if let Some(w) = integrity.warning() {
        eprintln!("warning: {name}: {w}");
    }
    if integrity.salvaged {
        if let Some(defect) = &integrity.defect {
            (file.frame_mut().notes).insert(SALVAGED_NOTE.into(), defect.clone());
        }
    }
    Ok(Source {
        detours: file.scan().record_count(),
        src: Box::new(file),
    })
}

/// An input trace to read stream by stream, and how many detours it holds.
pub(crate) struct Source {
    pub(crate) src: Box<dyn StreamSource>,
    pub(crate) detours: u64,
}

/// Reads the attribution sidecar of `trace` and checks that it belongs to that collection.
pub(crate) fn load_attribution(trace: &Path) -> Result<Attribution> {
    let a = Attribution::read(&existing_sidecar(trace)?)?;
    let start = collection_start(trace)?;
    if start != a.collection_start_unix_ns {
        bail!(
            "{} belongs to another collection (started at {} ns, the trace at {start} ns)",
            sidecar_path(trace).display(),
            a.collection_start_unix_ns
        );
    }
    Ok(a)
}

/// The attribution sidecar of `trace`, to be read detour by detour: each pass refuses it
/// unless it belongs to the trace's collection.
pub(crate) fn attribution_file(trace: &Path) -> Result<SidecarFile> {
    let sidecar = existing_sidecar(trace)?;
    Ok(SidecarFile::new(&sidecar).of_collection(collection_start(trace)?))
}

/// The sidecar path of `trace`, or the error of a trace collected without `--attribute`.
fn existing_sidecar(trace: &Path) -> Result<std::path::PathBuf> {
    let sidecar = sidecar_path(trace);
    if !sidecar.exists() {
        bail!(
            "{} has no attribution ({} is missing): collect with jitter-collect --attribute",
            trace.display(),
            sidecar.display()
        );
    }
    Ok(sidecar)
}

/// The `collection_start_unix_ns` of the trace's header.
fn collection_start(trace: &Path) -> Result<u64> {
    let reader = jitter_trace::TraceReader::open(trace)?;
    Ok(reader.header().collection_start_unix_ns)
}
