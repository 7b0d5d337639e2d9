//! How `jitter-trace` reads its input traces: the `--from`/`--salvage` flags, loading with the
//! one integrity policy, and the attribution sidecar beside a trace. Every command that reads
//! in bounded memory reads a `.jtr`: a text input (CSV, sysjitter, LogGOPSim) is imported
//! into a temporary one first, in one pass ([`jtr_of`]).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use clap::Args;

use jitter_trace::attribution::sidecar_path;
use jitter_trace::integrity::{Integrity, Salvage, SALVAGED_NOTE};
use jitter_trace::interop::{import_to_file, Format, Spilled};
use jitter_trace::scan::{scan_trace, ChunkSink, Scan};
use jitter_trace::sidecar_reader::SidecarFile;
use jitter_trace::stream_order::{RunSink, StreamSource, TraceFile};
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

/// The `.jtr` file an input is read from: a single `.jtr` input itself; a text input (CSV,
/// sysjitter, LogGOPSim) imported into a temporary one in one pass, in bounded memory
/// (`interop::import_to_file`), removed when the [`Spilled`] returned with it is dropped.
fn jtr_of(paths: &[PathBuf], input: &Input) -> Result<(PathBuf, Option<Spilled>)> {
    let first = paths.first().ok_or_else(|| anyhow!("no input file"))?;
    let format = Format::resolve(input.from, first)?;
    if format != Format::Jtr {
        let spilled = import_to_file(paths, format).map_err(|e| named(first, &e))?;
        return Ok((spilled.path().to_path_buf(), Some(spilled)));
    }
    if paths.len() != 1 {
        let e = TraceError::Argument(format!(".jtr input is a single file, got {}", paths.len()));
        return Err(named(first, &e));
    }
    Ok((first.clone(), None))
}

/// One pass over an input's `.jtr` ([`jtr_of`]) in constant memory in its length, with the
/// one integrity policy (refused unless `--salvage`; what was kept named on stderr).
pub(crate) fn scan_checked<S: ChunkSink>(
    paths: &[PathBuf],
    input: &Input,
    sink: &mut S,
) -> Result<Scanned> {
    let scanned = scan_unchecked(paths, input, sink)?;
    let name = paths[0].display().to_string();
    let integrity = (scanned.integrity).check(&name, Salvage::from_flag(input.salvage))?;
    if let Some(w) = integrity.warning() {
        eprintln!("warning: {name}: {w}");
    }
    Ok(Scanned {
        integrity,
        ..scanned
    })
}

/// [`scan_checked`] applying no policy (`nodes` marks such a node unusable).
pub(crate) fn scan_unchecked<S: ChunkSink>(
    paths: &[PathBuf],
    input: &Input,
    sink: &mut S,
) -> Result<Scanned> {
    let (file, spilled) = jtr_of(paths, input)?;
    let scan = scan_trace(&file, sink).map_err(|e| named(&paths[0], &e))?;
    let integrity = scan.integrity();
    Ok(Scanned {
        scan,
        integrity,
        file,
        _spilled: spilled,
    })
}

/// What one pass over an input learnt, and the `.jtr` file to read again for more passes.
pub(crate) struct Scanned {
    pub(crate) scan: Scan,
    pub(crate) integrity: Integrity,
    /// The `.jtr` read: the input, or the temporary import of a text input.
    pub(crate) file: PathBuf,
    _spilled: Option<Spilled>,
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

/// A trace to read stream by stream from its `.jtr` ([`jtr_of`]: a text input imported into a
/// temporary one first), in constant memory in its length ([`TraceFile`]). The policy of
/// [`scan_checked`] is applied (refused unless `--salvage`; what was kept named on stderr; a
/// salvaged defect carried in the frame's notes).
pub(crate) fn source(paths: &[PathBuf], input: &Input) -> Result<Source> {
    let (path, spilled) = jtr_of(paths, input)?;
    let first = &paths[0];
    let mut file = TraceFile::open(&path).map_err(|e| named(first, &e))?;
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
        src: Box::new(InputFile {
            file,
            _spilled: spilled,
        }),
    })
}

/// An input trace to read stream by stream, and how many detours it holds.
pub(crate) struct Source {
    pub(crate) src: Box<dyn StreamSource>,
    pub(crate) detours: u64,
}

/// An input's `.jtr` read stream by stream, with the temporary import it may be (removed when
/// this is dropped).
struct InputFile {
    file: TraceFile,
    _spilled: Option<Spilled>,
}

impl StreamSource for InputFile {
    fn frame(&self) -> &Trace {
        self.file.frame()
    }

    fn detours(&self, stream: usize, sink: &mut RunSink) -> Result<(), TraceError> {
        self.file.detours(stream, sink)
    }
}

/// The attribution sidecar of `trace`, to be read detour by detour: each pass refuses it
/// unless it belongs to the trace's collection.
pub(crate) fn attribution_file(trace: &Path) -> Result<SidecarFile> {
    let sidecar = existing_sidecar(trace)?;
    Ok(SidecarFile::new(&sidecar).of_collection(collection_start(trace)?))
}

/// The attribution sidecar of `trace`, to be read detour by detour, its collection not yet
/// checked ([`check_collection`] after its first pass: the order in which a sidecar read
/// whole was refused).
pub(crate) fn attribution_file_unchecked(trace: &Path) -> Result<SidecarFile> {
    Ok(SidecarFile::new(&existing_sidecar(trace)?))
}

/// Refuses a sidecar of `trace` that names the collection started at `found` ns unless it is
/// the trace's.
pub(crate) fn check_collection(trace: &Path, found: u64) -> Result<()> {
    let start = collection_start(trace)?;
    if start != found {
        bail!(
            "{} belongs to another collection (started at {found} ns, the trace at {start} ns)",
            sidecar_path(trace).display()
        );
    }
    Ok(())
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
